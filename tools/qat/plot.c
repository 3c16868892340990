/* qat plot: a training log (train --log) as PNG pictures, drawn by
 * gnuplot through a pipe: the loss, the test accuracy or mean squared
 * error (float, fake-quantized, integer) and each quantization point's range over the
 * run, with the QAT phases marked. The script also goes to DIR/plots.gp,
 * data inline, so the pictures can be redrawn (or drawn elsewhere) with
 * gnuplot alone. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "gnuplot.h"
#include "metrics_log.h"
#include "tools.h"

static const char *const plot_usage =
    "usage: qat plot LOG.csv --out DIR [--json]\n"
    "\n"
    "Draws a training log (qat train --log LOG.csv) as PNG pictures in DIR,\n"
    "with gnuplot (Debian: apt-get install gnuplot-nox):\n"
    "  loss.png      training loss and learning rate against epochs (steps on top)\n"
    "  accuracy.png  test accuracy per epoch: float weights, fake-quantized, integer\n"
    "                (a classifier's log)\n"
    "  error.png     test mean squared error per epoch, the same three (a regression's\n"
    "                or an autoencoder's log)\n"
    "  ranges.png    each quantization point's observed range over the run\n"
    "QAT's phases are marked: prepared (ranges observed, fake quantization off during\n"
    "--qat-warmup), fake quantization on, ranges frozen. The gnuplot script, data\n"
    "inline, is written to DIR/plots.gp as well; without gnuplot the command writes\n"
    "it, says how to install gnuplot, and exits with status 1.\n"
    "\n"
    "  --out DIR     where the pictures go (made if missing)\n"
    "  --json        the files written as one JSON object (last line of stdout)\n"
    "  --help        this text\n"
    "\n"
    "The environment variable QAT_GNUPLOT names the gnuplot program (default: gnuplot\n"
    "on the PATH).\n";

#define P "qat plot"

/* ---- the gnuplot script ---------------------------------------------------------------- */

/* Where a phase began: the first step row where column c becomes 1, or
 * the first row with point columns filled (c < 0), began it at or after
 * the row before (any kind): that row's x (epochs), 0 for the first row;
 * NAN if never. The log cannot say where between the two rows: the
 * earlier end is right for the usual cases, QAT from the first step and
 * after --float-epochs (an epoch row just before). */
static double first_epoch_where(const metrics_log_data *d, int c) {
    for (int r = 0; r < d->n_rows; r++) {
        if (d->is_epoch[r]) continue;
        double x = c >= 0 ? *metrics_log_cell(d, r, c) : d->n_points ? *metrics_log_cell(d, r, C_FIXED) : NAN;
        if (c >= 0 ? x == 1 : !isnan(x)) return r ? *metrics_log_cell(d, r - 1, C_EPOCH) : 0;
    }
    return NAN;
}

static void num(FILE *s, double x) {
    if (isnan(x)) fputs(" NaN", s);
    else fprintf(s, " %.6g", x);
}

/* The QAT phases as labelled vertical lines on the current plot; phases
 * that begin at one logged step share a line and a label. */
static void phase_marks(FILE *s, const metrics_log_data *d) {
    struct { double x; const char *what; } marks[] = {
        {first_epoch_where(d, -1), "QAT prepared"},
        {first_epoch_where(d, C_FQ), "fake quant on"},
        {first_epoch_where(d, C_FROZEN), "ranges frozen"},
    };
    fputs("unset arrow; unset label\n", s);
    for (int i = 0, shown = 0; i < 3; i++) {
        if (isnan(marks[i].x) || (i > 0 && marks[i].x == marks[i - 1].x)) continue;
        char text[96];
        int k = snprintf(text, sizeof text, "%s", marks[i].what);
        for (int j = i + 1; j < 3 && marks[j].x == marks[i].x; j++)
            k += snprintf(text + k, sizeof text - (size_t)k, ", %s", marks[j].what);
        fprintf(s, "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt 3 lc rgb '#888888'\n", marks[i].x, marks[i].x);
        fprintf(s, "set label '%s' at %.6g, graph %.2f offset 0.5,0 font ',7' tc rgb '#555555'\n", text, marks[i].x,
                0.95 - 0.07 * shown++);
    }
}

static void common(FILE *s, const char *dir, const char *file, int w, int h) {
    fputs("reset\n", s); /* the settings of the picture before; the datablocks stay */
    fprintf(s, "set terminal pngcairo size %d,%d font 'sans,9' noenhanced\n", w, h);
    fprintf(s, "set output '%s/%s'\n", dir, file);
    fputs("set grid lc rgb '#dddddd'\nset key top right box opaque\n", s);
}

/* loss.png: the step rows' loss (log scale) and learning rate. */
static void loss_plot(FILE *s, const metrics_log_data *d, const char *dir) {
    fputs("$loss << EOD\n", s);
    for (int r = 0; r < d->n_rows; r++)
        if (!d->is_epoch[r]) num(s, *metrics_log_cell(d, r, C_EPOCH)), num(s, *metrics_log_cell(d, r, C_STEP)), num(s, *metrics_log_cell(d, r, C_LOSS)),
                             num(s, *metrics_log_cell(d, r, C_LR)), fputc('\n', s);
    fputs("EOD\n$epoch_loss << EOD\n", s);
    for (int r = 0; r < d->n_rows; r++)
        if (d->is_epoch[r]) num(s, *metrics_log_cell(d, r, C_EPOCH)), num(s, *metrics_log_cell(d, r, C_LOSS)), fputc('\n', s);
    fputs("EOD\n", s);
    common(s, dir, "loss.png", 720, 400);
    /* steps per epoch, from the last step row, links the top axis */
    double spe = 0;
    for (int r = 0; r < d->n_rows; r++)
        if (!d->is_epoch[r] && *metrics_log_cell(d, r, C_EPOCH) > 0) spe = *metrics_log_cell(d, r, C_STEP) / *metrics_log_cell(d, r, C_EPOCH);
    if (spe > 0) fprintf(s, "set x2label 'step'\nset x2tics\nset link x2 via x*%.6g inverse x/%.6g\n", spe, spe);
    fputs("set xlabel 'epoch'\nset ylabel 'training loss (mean over the logged steps)'\n"
          "set logscale y\nset y2label 'learning rate'\nset y2tics\nset ytics nomirror\nset format y2 '%.2g'\n"
          "set xrange [0:*]\nset y2range [0:*]\n", s); /* from the start, and the rate from 0: a flat rate gets sane tics */
    double last = 0; /* room right of the last point, whose dot the frame would cut */
    int steps = 0;
    for (int r = 0; r < d->n_rows; r++) {
        double x = *metrics_log_cell(d, r, C_EPOCH);
        if (x > last) last = x;
        steps += !d->is_epoch[r];
    }
    fprintf(s, "set offsets 0, %.6g, 0, 0\n", 0.02 * (last > 0 ? last : 1));
    phase_marks(s, d);
    if (!steps) { /* epoch rows only (--log-every past the run's steps): the epochs' means, no rate */
        fputs("unset y2label\nunset y2tics\nset ytics mirror\n"
              "plot $epoch_loss using 1:2 with linespoints pt 7 lc rgb '#1f77b4' title 'epoch mean'\n", s);
        return;
    }
    fprintf(s, "plot $loss using 1:3 with %s lw 1.5 lc rgb '#1f77b4' title 'loss', ", steps > 1 ? "lines" : "points pt 7");
    fputs("$epoch_loss using 1:2 with points pt 7 ps 0.8 lc rgb '#1f77b4' title 'epoch mean', "
          "$loss using 1:4 axes x1y2 with lines dt 2 lc rgb '#999999' title 'learning rate'\n", s);
}

/* A picture of the epoch rows' test figure: float, fake-quantized and
 * integer from column c0 on. */
typedef struct {
    int c0;
    const char *file, *title, *ylabel, *key;
    double scale; /* the figures times this (accuracy in percent) */
} figure_picture;

static const figure_picture accuracy_picture = {C_ACC_FLOAT, "accuracy.png", "test accuracy after each epoch",
                                                "accuracy (%)", "bottom right", 100};
static const figure_picture error_picture = {C_MSE_FLOAT, "error.png", "test mean squared error after each epoch",
                                             "mean squared error", "top right", 1};

/* Whether an epoch row has one of the picture's figures. */
static bool has_figure(const metrics_log_data *d, const figure_picture *p) {
    for (int r = 0; r < d->n_rows; r++)
        for (int c = p->c0; d->is_epoch[r] && c < p->c0 + 3; c++)
            if (isfinite(*metrics_log_cell(d, r, c))) return true;
    return false;
}

static void figure_plot(FILE *s, const metrics_log_data *d, const char *dir, const figure_picture *p) {
    fprintf(s, "$%.5s << EOD\n", p->file);
    for (int r = 0; r < d->n_rows; r++) {
        if (!d->is_epoch[r]) continue;
        num(s, *metrics_log_cell(d, r, C_EPOCH));
        for (int c = p->c0; c < p->c0 + 3; c++) num(s, p->scale * *metrics_log_cell(d, r, c));
        fputc('\n', s);
    }
    fputs("EOD\n", s);
    common(s, dir, p->file, 720, 400);
    fprintf(s, "set title '%s'\nset xlabel 'epoch'\nset ylabel '%s'\nset key %s\nset xtics 1\n"
               "set offsets 0.2, 0.2, 0, 0\n", p->title, p->ylabel, p->key);
    phase_marks(s, d);
    fprintf(s, "plot $%.5s using 1:2 with linespoints pt 7 lw 1.5 lc rgb '#1f77b4' title 'float weights', "
               "$%.5s using 1:3 with linespoints pt 5 lw 1.5 lc rgb '#ff7f0e' title 'fake-quantized', "
               "$%.5s using 1:4 with linespoints pt 9 lw 1.5 dt 2 lc rgb '#2ca02c' title 'integer program'\n",
            p->file, p->file, p->file);
}

/* Whether point p has an observed range in some row. */
static bool has_range(const metrics_log_data *d, int p) {
    for (int r = 0; r < d->n_rows; r++)
        if (isfinite(*metrics_log_cell(d, r, C_FIXED + 3 * p)) && isfinite(*metrics_log_cell(d, r, C_FIXED + 3 * p + 1)))
            return true;
    return false;
}

/* ranges.png: a panel per point that has a range in some row (step and
 * epoch rows alike), its observed [min, max] as a band; n of them. */
static void ranges_plot(FILE *s, const metrics_log_data *d, const char *dir, int n) {
    int cols = n < 3 ? n : 3, rows = (n + cols - 1) / cols;
    for (int p = 0; p < d->n_points; p++) {
        if (!has_range(d, p)) continue;
        fprintf(s, "$point%d << EOD\n", p);
        for (int r = 0; r < d->n_rows; r++)
            num(s, *metrics_log_cell(d, r, C_EPOCH)), num(s, *metrics_log_cell(d, r, C_FIXED + 3 * p)),
                num(s, *metrics_log_cell(d, r, C_FIXED + 3 * p + 1)), fputc('\n', s);
        fputs("EOD\n", s);
    }
    common(s, dir, "ranges.png", 300 * cols, 40 + 210 * rows);
    fprintf(s, "set multiplot layout %d,%d title 'observed range of each quantization point'\n", rows, cols);
    /* headroom above the band for the phase labels */
    fputs("set key off\nset xlabel 'epoch' offset 0,0.5\nset style fill transparent solid 0.35 noborder\n"
          "set offsets 0, 0, graph 0.3, 0\n", s);
    for (int p = 0; p < d->n_points; p++) {
        if (!has_range(d, p)) continue;
        char name[64];
        snprintf(name, sizeof name, "%s", d->names[p]);
        for (char *c = name; *c; c++)
            if (*c == '\'' || *c == '\\') *c = '_';
        fprintf(s, "set title '%s'\n", name);
        phase_marks(s, d);
        fprintf(s, "plot $point%d using 1:2:3 with filledcurves lc rgb '#1f77b4', "
                   "'' using 1:3 with lines lc rgb '#1f77b4', '' using 1:2 with lines lc rgb '#1f77b4'\n", p);
    }
    fputs("unset multiplot\n", s);
}

/* A PNG gnuplot wrote: a file that starts with the PNG signature. */
static long png_size(const char *dir, const char *file) {
    char path[4200];
    unsigned char sig[8];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    bool ok = fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
    long size = ok && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    return size;
}

int cmd_plot(int argc, char **argv) {
    const char *log = NULL, *dir = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(plot_usage, stdout), 0;
        if (!strcmp(a, "--out")) {
            if (!(dir = cli_value(P, argc, argv, &i))) return EXIT_USAGE; /* the message said it, with the --help hint */
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (a[0] == '-' || log) {
            fprintf(stderr, "%s: %s \"%s\" (%s --help lists the options)\n", P, a[0] == '-' ? "unknown option" : "one log only, got another:", a, P);
            return EXIT_USAGE; /* the message said it, with the --help hint */
        } else {
            log = a;
        }
    }
    if (!log || !dir) return cli_usage_fail(P, json, plot_usage, "give a LOG.csv and --out DIR");
    if (strpbrk(dir, "'\n") || strlen(dir) > 4000) /* it goes into the script's quoted strings */
        return cli_usage_fail(P, json, plot_usage, "--out %s: a directory name without ' or a newline, please", dir);
    char err[600];
    metrics_log_data d;
    if (metrics_log_read(log, &d, err, sizeof err)) return metrics_log_free(&d), cli_fail("qat", json, 1, "%s", err);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        metrics_log_free(&d);
        return cli_fail("qat", json, 1, "--out %s: cannot make the directory: %s", dir, strerror(e));
    }
    /* the script, in memory: to the pipe and to DIR/plots.gp */
    char *script = NULL, gp_path[4200], found[4200];
    size_t len = 0;
    FILE *s = open_memstream(&script, &len);
    if (!s) return metrics_log_free(&d), cli_fail("qat", json, 1, "out of memory");
    bool epochs = false, acc = has_figure(&d, &accuracy_picture), mse = has_figure(&d, &error_picture);
    for (int r = 0; r < d.n_rows; r++) epochs |= d.is_epoch[r];
    fprintf(s, "# drawn by qat plot from %s: gnuplot %s/plots.gp redraws the pictures\n", log, dir);
    loss_plot(s, &d, dir);
    if (acc) figure_plot(s, &d, dir, &accuracy_picture);
    if (mse) figure_plot(s, &d, dir, &error_picture);
    int ranged = 0; /* points with a range to draw */
    for (int p = 0; p < d.n_points; p++) ranged += has_range(&d, p);
    if (ranged) ranges_plot(s, &d, dir, ranged);
    fclose(s);
    snprintf(gp_path, sizeof gp_path, "%s/plots.gp", dir);
    FILE *gp = fopen(gp_path, "w");
    int rc = 0;
    if (!gp || fwrite(script, 1, len, gp) != len || fclose(gp) != 0) {
        rc = cli_fail("qat", json, 1, "%s: cannot write: %s", gp_path, strerror(errno));
        goto done;
    }
    const char *gnuplot = find_gnuplot(found, sizeof found);
    if (!gnuplot) {
        rc = cli_fail("qat", json, 1, "gnuplot is not installed%s: install it (Debian/Ubuntu: apt-get install "
                      "gnuplot-nox), then run qat plot again, or gnuplot %s; the log %s is complete without it",
                      getenv("QAT_GNUPLOT") ? " (QAT_GNUPLOT names no program)" : "", gp_path, log);
        goto done;
    }
    if (run_gnuplot(gnuplot, script, len)) {
        rc = cli_fail("qat", json, 1, "%s failed on the script (kept in %s)", gnuplot, gp_path);
        goto done;
    }
    const char *files[] = {"loss.png", acc ? accuracy_picture.file : NULL, mse ? error_picture.file : NULL,
                           ranged ? "ranges.png" : NULL};
    enum { FILES = sizeof files / sizeof *files };
    long sizes[FILES];
    for (int i = 0; i < FILES; i++)
        if (files[i] && (sizes[i] = png_size(dir, files[i])) <= 0) {
            rc = cli_fail("qat", json, 1, "%s/%s: gnuplot wrote no PNG", dir, files[i]);
            goto done;
        }
    if (json) printf("{\"log\": "), cli_json_str(log), printf(", \"out\": "), cli_json_str(dir), printf(", \"files\": [");
    for (int i = 0, k = 0; i < FILES; i++) {
        if (!files[i]) continue;
        fprintf(stderr, "qat: wrote %s/%s (%ld bytes)\n", dir, files[i], sizes[i]);
        if (json) printf("%s{\"file\": \"%s\", \"bytes\": %ld}", k++ ? ", " : "", files[i], sizes[i]);
    }
    if (json) printf("]}\n");
    if (!epochs) fprintf(stderr, "qat: no epoch rows yet: no accuracy.png or error.png\n");
    else if (!acc && !mse) fprintf(stderr, "qat: no test figures in the log's epoch rows: no accuracy.png or error.png\n");
    if (!d.n_points) fprintf(stderr, "qat: a float run: no quantization points, no ranges.png\n");
    else if (!ranged) fprintf(stderr, "qat: no quantization point has an observed range yet: no ranges.png\n");
    else if (ranged < d.n_points)
        fprintf(stderr, "qat: %d of %d quantization points have no observed range yet: not in ranges.png\n",
                d.n_points - ranged, d.n_points);
done:
    free(script);
    metrics_log_free(&d);
    return rc;
}
