#include "progress.h"

#include <stdio.h>
#include <unistd.h>

#include "cli.h"

void progress_start(progress *p, const char *label, int64_t total) {
    p->label = label;
    p->total = total > 0 ? total : 1;
    p->done = p->first = 0;
    p->start = p->last_print = cli_now();
    p->tty = isatty(2);
    p->last_decile = 0;
}

static void show(progress *p, const char *extra, bool final) {
    double el = cli_now() - p->start, rate = el > 0 ? (double)(p->done - p->first) / el : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    double frac = (double)p->done / (double)p->total;
    if (p->tty) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r%s [%s] %3.0f%% %8.0f samples/s  %s  %s %3.0fs\033[K%s", p->label, bar,
                100 * frac, rate, extra ? extra : "", final ? "took" : "ETA", final ? el : eta,
                final ? "\n" : "");
    } else {
        fprintf(stderr, "%s %3.0f%% %.0f samples/s %s %s %.0fs\n", p->label, 100 * frac, rate,
                extra ? extra : "", final ? "took" : "ETA", final ? el : eta);
    }
    fflush(stderr);
}

void progress_update(progress *p, int64_t done, const char *extra) {
    p->done = done;
    double now = cli_now();
    if (p->tty) {
        if (now - p->last_print < 0.1) return;
    } else {
        int decile = (int)(10 * done / p->total); /* plain output: a line per 10 % */
        if (decile <= p->last_decile) return;
        p->last_decile = decile;
        if (done >= p->total) return; /* progress_end prints the last line */
    }
    p->last_print = now;
    show(p, extra, false);
}

void progress_end(progress *p, const char *extra) {
    p->done = p->total;
    show(p, extra, true);
}

void progress_cut(progress *p) { show(p, NULL, true); }
