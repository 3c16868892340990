/* A progress bar with rate and ETA on a terminal; plain lines otherwise. */
#ifndef QAT_TOOL_PROGRESS_H
#define QAT_TOOL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *label;
    int64_t total, done;
    int64_t first; /* items done before this run (a resumed epoch): not in the rate */
    double start, last_print;
    bool tty;
    int last_decile;
} progress;

void progress_start(progress *p, const char *label, int64_t total);
/* done: items finished; extra: text after the rate (e.g. "loss 0.1234"). */
void progress_update(progress *p, int64_t done, const char *extra);
void progress_end(progress *p, const char *extra);
/* The last line where the work stopped (done as it is, not the total). */
void progress_cut(progress *p);

#endif
