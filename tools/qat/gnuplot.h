/* gnuplot, run without a shell: found on the PATH (or $QAT_GNUPLOT), fed
 * a script on its standard input. qat plot and qat fit draw with it. */
#ifndef QAT_TOOL_GNUPLOT_H
#define QAT_TOOL_GNUPLOT_H

#include <stddef.h>

/* The gnuplot to run: $QAT_GNUPLOT, or "gnuplot" found on the PATH (as
 * `command -v gnuplot`); NULL if there is none. */
const char *find_gnuplot(char *buf, size_t len);
/* Sends the script down a pipe to gnuplot's standard input; 0 when
 * gnuplot ran it and exited 0. */
int run_gnuplot(const char *gnuplot, const char *script, size_t len);

#endif
