/* The training metrics log's reader (qat plot): the layout is
 * metrics_log.h's; every field is checked (a number, or empty). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_log.h"

double *metrics_log_cell(const metrics_log_data *d, int r, int c) {
    return &d->v[(size_t)r * (size_t)d->n_cols + (size_t)c];
}

static const char *const fixed_cols[C_FIXED] = {"kind", "step", "epoch", "loss", "lr", "samples_per_s", "fake_quant",
                                                "observers_frozen", "acc_float", "acc_fake_quant", "acc_int",
                                                "mse_float", "mse_fake_quant", "mse_int"};
/* Logs from before the mse_ columns end their fixed columns at acc_int. */
enum { OLD_FIXED = C_MSE_FLOAT, ADDED = C_FIXED - OLD_FIXED };

/* The column in memory of the file's column c. */
static int column(const metrics_log_data *d, int c) { return d->file_cols < d->n_cols && c >= OLD_FIXED ? c + ADDED : c; }

void metrics_log_free(metrics_log_data *d) {
    for (int p = 0; d->names && p < d->n_points; p++) free(d->names[p]);
    free(d->names), free(d->is_epoch), free(d->v);
}

/* Fields of a line: its commas + 1 (the newline dropped from line). */
static int count_fields(char *line) {
    line[strcspn(line, "\r\n")] = '\0';
    int n = 1;
    for (const char *c = line; *c; c++) n += *c == ',';
    return n;
}

/* Splits line (modified) at commas into at most max fields; the count. */
static int split(char *line, char **fields, int max) {
    int n = count_fields(line);
    char *s = line;
    for (int k = 0; k < n; k++) {
        char *e = strchr(s, ',');
        if (k < max) fields[k] = s;
        if (e) *e = '\0', s = e + 1;
    }
    return n;
}

/* The header: the fixed columns in order, then (min, max, scale) per point. */
static int read_header(metrics_log_data *d, char *line, const char *path, char *err, size_t len) {
    int n = count_fields(line);
    char **f = malloc((size_t)n * sizeof *f);
    if (!f) return snprintf(err, len, "out of memory"), -1;
    split(line, f, n);
    int rc = -1, fixed = n >= C_FIXED && !strcmp(f[OLD_FIXED], fixed_cols[OLD_FIXED]) ? C_FIXED : OLD_FIXED;
    if (n < fixed || (n - fixed) % 3) goto bad;
    for (int c = 0; c < fixed; c++)
        if (strcmp(f[c], fixed_cols[c])) goto bad;
    d->file_cols = n, d->n_cols = n + C_FIXED - fixed, d->n_points = (n - fixed) / 3;
    if (!(d->names = calloc((size_t)d->n_points + 1, sizeof *d->names))) goto oom;
    for (int p = 0; p < d->n_points; p++) {
        const char *mn = f[fixed + 3 * p];
        size_t k = strlen(mn);
        if (k < 5 || strcmp(mn + k - 4, ".min")) goto bad;
        if (!(d->names[p] = malloc(k - 3))) goto oom;
        memcpy(d->names[p], mn, k - 4), d->names[p][k - 4] = '\0';
    }
    rc = 0;
    goto done;
bad:
    snprintf(err, len, "%s: not a training log of qat train --log (its header is not %s,%s,...)", path,
             fixed_cols[0], fixed_cols[1]);
    goto done;
oom:
    snprintf(err, len, "out of memory");
done:
    free(f);
    return rc;
}

static int read_row(metrics_log_data *d, char *line, char **f, const char *path, long lineno, char *err, size_t len) {
    int n = split(line, f, d->file_cols);
    if (n == 1 && !f[0][0]) return 0; /* an empty line */
    bool epoch = !strcmp(f[0], "epoch");
    if (n != d->file_cols || (!epoch && strcmp(f[0], "step")))
        return snprintf(err, len, "%s:%ld: a row of %d fields where the header has %d, or of an unknown kind", path,
                        lineno, n, d->file_cols), -1;
    if (d->n_rows == d->cap) {
        int cap = d->cap ? 2 * d->cap : 256;
        double *v = realloc(d->v, (size_t)cap * (size_t)d->n_cols * sizeof *v);
        bool *e = v ? realloc(d->is_epoch, (size_t)cap * sizeof *e) : NULL;
        if (v) d->v = v;
        if (!v || !e) return snprintf(err, len, "out of memory"), -1;
        d->is_epoch = e, d->cap = cap;
    }
    int r = d->n_rows++;
    d->is_epoch[r] = epoch;
    for (int c = 0; c < d->n_cols; c++) *metrics_log_cell(d, r, c) = NAN; /* and the columns an older log lacks */
    for (int c = 1; c < n; c++) {
        char *end;
        double x = strtod(f[c], &end);
        if (!f[c][0]) x = NAN;
        else if (*end || !isfinite(x))
            return snprintf(err, len, "%s:%ld: field %d (%s) is not a number: \"%.40s\"", path, lineno, c + 1,
                            column(d, c) < C_FIXED ? fixed_cols[column(d, c)] : "a point's range", f[c]), -1;
        *metrics_log_cell(d, r, column(d, c)) = x;
    }
    return 0;
}

int metrics_log_read(const char *path, metrics_log_data *d, char *err, size_t len) {
    memset(d, 0, sizeof *d);
    FILE *in = fopen(path, "r");
    if (!in) return snprintf(err, len, "%s: cannot open: %s", path, strerror(errno)), -1;
    char *line = NULL, **f = NULL;
    size_t cap = 0;
    long lineno = 1;
    int rc = getline(&line, &cap, in) < 0 ? (snprintf(err, len, "%s: empty: not a training log", path), -1)
                                          : read_header(d, line, path, err, len);
    if (!rc && !(f = malloc((size_t)d->file_cols * sizeof *f))) rc = (snprintf(err, len, "out of memory"), -1);
    while (!rc && getline(&line, &cap, in) >= 0) rc = read_row(d, line, f, path, ++lineno, err, len);
    if (!rc && ferror(in)) rc = (snprintf(err, len, "%s: cannot read: %s", path, strerror(errno)), -1);
    if (!rc && d->n_rows == 0) rc = (snprintf(err, len, "%s: no rows yet: nothing to draw", path), -1);
    free(line), free(f);
    fclose(in);
    return rc;
}

