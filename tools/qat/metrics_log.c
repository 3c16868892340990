/* The training metrics log: a CSV row every N steps and one per epoch
 * (the layout is in metrics_log.h). A step row costs a few fprintf calls:
 * training speed does not change. */
#define _POSIX_C_SOURCE 200809L
#include "metrics_log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "tools.h"

#define HEADER_MAX 65536

/* The header line (with its newline) into buf; false if it does not fit. */
static bool header(const metrics_log *g, const qat_model *m, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,"
                                             "acc_float,acc_fake_quant,acc_int,mse_float,mse_fake_quant,mse_int");
    static const char *const what[] = {"min", "max", "scale"};
    for (int p = 0; p < g->n_points && used < len; p++) {
        char name[QAT_NAME_LEN];
        snprintf(name, sizeof name, "%s", qat_model_layer_name(m, g->points[p]));
        for (char *c = name; *c; c++)
            if (*c == ',' || *c == '"' || (unsigned char)*c < 32) *c = '_'; /* one CSV field, no quoting */
        for (int k = 0; k < 3 && used < len; k++) used += (size_t)snprintf(buf + used, len - used, ",%s.%s", name, what[k]);
    }
    if (used + 2 > len) return false;
    memcpy(buf + used, "\n", 2);
    return true;
}

/* Whether a line of the log (row: its number, the header 0) goes: a row
 * past step, or a last line cut short (no newline: a run killed while it
 * wrote), which the next row would be appended to. */
static bool drop(const char *line, ssize_t n, long row, int64_t step) {
    const char *comma = strchr(line, ',');
    return line[n - 1] != '\n' || (row > 0 && comma && strtoll(comma + 1, NULL, 10) > step);
}

/* Rewrites the log at path without the lines drop() names, when it has
 * any: a copy renamed over it (a crash leaves the old log whole). 0, or
 * -1 with errno. */
static int drop_rows_after(const char *path, int64_t step) {
    FILE *in = fopen(path, "r"), *out = NULL;
    if (!in) return -1;
    char tmp[4200], *line = NULL;
    size_t cap = 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    bool any = false;
    ssize_t n;
    for (long row = 0; !any && (n = getline(&line, &cap, in)) > 0; row++) any = drop(line, n, row, step);
    int rc = ferror(in) ? -1 : 0;
    if (any && !rc) {
        rewind(in);
        if (!(out = fopen(tmp, "w"))) rc = -1;
        for (long row = 0; !rc && (n = getline(&line, &cap, in)) > 0; row++)
            if (!drop(line, n, row, step)) fputs(line, out);
        if (out && (ferror(in) || ferror(out))) rc = -1;
        if (out && fclose(out)) rc = -1;
        if (out && !rc && rename(tmp, path)) rc = -1;
        if (out && rc) remove(tmp);
    }
    free(line);
    fclose(in);
    return rc;
}

int metrics_log_open(metrics_log *g, const char *path, int64_t resume_step, const qat_model *m,
                     const qat_prepare_config *qcfg, long every, int64_t steps_per_epoch, char *err, size_t len) {
    *g = (metrics_log){.every = every > 0 ? every : 10, .steps_per_epoch = steps_per_epoch, .last_time = cli_now(),
                       .path = path, .resume_step = resume_step};
    g->n_points = qcfg ? qat_prepare_points(m, qcfg, NULL, 0) : 0;
    g->points = malloc((size_t)(g->n_points + 1) * sizeof *g->points);
    char *line = g->header = malloc(HEADER_MAX), *old = malloc(HEADER_MAX);
    int rc = 1;
    if (!g->points || !line || !old) {
        snprintf(err, len, "out of memory");
        goto done;
    }
    if (qcfg) qat_prepare_points(m, qcfg, g->points, g->n_points);
    if (!header(g, m, line, HEADER_MAX)) {
        snprintf(err, len, "--log %s: too many quantization points for one header line", path);
        goto done;
    }
    /* a resume continues its own log; anything else starts one */
    FILE *f = resume_step >= 0 ? fopen(path, "r") : NULL;
    if (f) {
        g->append = fgets(old, HEADER_MAX, f) != NULL;
        fclose(f);
        if (g->append && strcmp(old, line)) {
            /* this run's header without the mse_ columns: a log of an older qat */
            const char *added = ",mse_float,mse_fake_quant,mse_int", *at = strstr(line, added);
            size_t k = (size_t)(at - line), n = strlen(added);
            bool older = !strncmp(old, line, k) && !strcmp(old + k, at + n);
            snprintf(err, len, "--log %s: the file's columns are not this run's (%s): give another --log", path,
                     older ? "a log of an older qat, without the mse_ columns" : "another model or QAT setting");
            rc = EXIT_USAGE;
            goto done;
        }
    }
    g->measuring = true;
    rc = 0;
done:
    free(old);
    if (rc) free(g->points), free(g->header), g->points = NULL, g->header = NULL;
    return rc;
}

int metrics_log_start(metrics_log *g, char *err, size_t len) {
    if (!g->header) return 0;
    const char *path = g->path;
    int rc = -1;
    if (g->append && drop_rows_after(path, g->resume_step)) {
        snprintf(err, len, "--log %s: cannot rewrite it without the rows past the checkpoint: %s", path, strerror(errno));
        goto done;
    }
    if (!(g->f = fopen(path, g->append ? "a" : "w"))) {
        snprintf(err, len, "--log %s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    setvbuf(g->f, NULL, _IOLBF, 0); /* a row at a time: a run killed leaves at most one row cut short */
    if (!g->append) fputs(g->header, g->f);
    fflush(g->f);
    rc = 0;
done:
    free(g->header), g->header = NULL;
    return rc;
}

/* The columns every row ends with: each point's range and scale (empty
 * before the QAT pass placed it, or while it has seen nothing). */
static void point_columns(const metrics_log *g, const qat_model *m) {
    for (int p = 0; p < g->n_points; p++) {
        qat_act_quant_info a;
        if (qat_model_act_quant(m, g->points[p], &a) && a.updates > 0)
            fprintf(g->f, ",%.6g,%.6g,%.6g", (double)a.min, (double)a.max, (double)a.scale);
        else
            fputs(",,,", g->f);
    }
    fputc('\n', g->f);
}

static void phase(const qat_model *m, FILE *f) {
    bool prepared = qat_model_prepared(m);
    fprintf(f, ",%d,%d", prepared && qat_model_fake_quant_on(m), prepared && qat_model_observers_frozen(m));
}

void metrics_log_step(metrics_log *g, const qat_model *m, int64_t step, double loss, float lr, int64_t b) {
    if (!g->f) return;
    g->loss_sum += loss, g->loss_n++, g->samples += b;
    if (step % g->every) return;
    double now = cli_now(), dt = now - g->last_time;
    fprintf(g->f, "step,%lld,%.6f,%.6g,%.6g,%.1f", (long long)step, (double)step / (double)g->steps_per_epoch,
            g->loss_sum / (double)g->loss_n, (double)lr, dt > 0 ? (double)g->samples / dt : 0.0);
    phase(m, g->f);
    fputs(",,,,,,", g->f); /* the test figures: epoch rows only */
    point_columns(g, m);
    g->loss_sum = 0, g->loss_n = 0, g->samples = 0, g->last_time = now;
}

/* The task's figure of a measurement: the accuracy of a classifier, the
 * mean squared error of the others. */
static double figure(const qat_metrics *mt) { return mt->task == QAT_TASK_CLASSIFY ? mt->accuracy : mt->mse; }

/* The integer program's figure on the test split: the model lowered in a
 * context of its own and run by the int engine; NAN when it cannot be (a
 * point never observed, types the runtime does not run). */
static double int_figure(qat_model *m, qat_dataset *data, int64_t limit, qat_task_kind kind) {
    qat_ctx *pctx = qat_ctx_new();
    if (!pctx) return NAN;
    int64_t shape[3];
    int rank = tools_input_shape(m, shape);
    qat_qmodel q;
    qat_engine *e = NULL;
    qat_metrics mt = {0};
    qat_task task = {.kind = kind};
    qat_engine_eval how = {.limit = limit, .batch = 100};
    bool ok = qat_qmodel_lower(m, rank, shape, pctx, &q) == QAT_OK && (e = qat_engine_new(pctx, &q, QAT_ENGINE_INT, 100)) &&
              qat_engine_evaluate(pctx, e, &q, data, QAT_SPLIT_TEST, &task, &how, &mt) == QAT_OK;
    if (!ok) qat_ctx_clear_error(qat_model_ctx(m)); /* lowering's message: the column stays empty */
    double v = ok ? figure(&mt) : NAN;
    qat_metrics_free(&mt);
    qat_engine_free(e);
    qat_ctx_free(pctx);
    return v;
}

/* A figure, or an empty field where it is not known. */
static void field(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputc(',', f);
}

void metrics_log_follow(metrics_log *g) { g->measuring = true; }

void metrics_log_epoch(metrics_log *g, qat_model *m, int64_t step, long epoch, double loss, const qat_metrics *test,
                       qat_dataset *data, int64_t limit, const qat_train_dist *dist) {
    if (!g->measuring) return;
    /* float, fake-quantized, integer: the test figure the trainer measured,
     * the other one of float and fake-quantized, then the integers */
    double v[3] = {figure(test), NAN, NAN};
    if (qat_model_prepared(m)) {
        bool on = qat_model_fake_quant_on(m);
        qat_model_set_fake_quant(m, !on);
        qat_task task = {.kind = test->task};
        qat_metrics other;
        double o = NAN;
        if (qat_model_evaluate(m, data, QAT_SPLIT_TEST, limit, &task, dist, &other) == QAT_OK) {
            o = figure(&other);
            qat_metrics_free(&other);
        } else {
            qat_ctx_clear_error(qat_model_ctx(m));
        }
        qat_model_set_fake_quant(m, on);
        if (on) v[1] = v[0], v[0] = o;
        else v[1] = o;
        v[2] = int_figure(m, data, limit, test->task);
    }
    if (!g->f) return;
    (void)epoch; /* the column is step / steps per epoch: a run stopped part way is at 0.7, not 1 */
    fprintf(g->f, "epoch,%lld,%.6g,%.6g,,", (long long)step, (double)step / (double)g->steps_per_epoch, loss);
    phase(m, g->f);
    bool classify = test->task == QAT_TASK_CLASSIFY; /* its three columns, then the MSE's three */
    for (int k = 0; k < 6; k++) field(g->f, classify == (k < 3) ? v[k % 3] : NAN);
    point_columns(g, m);
    fflush(g->f); /* plot can read the log while the run goes on */
}

int metrics_log_close(metrics_log *g) {
    int rc = 0;
    if (g->f) {
        rc = ferror(g->f) ? -1 : 0;
        if (fclose(g->f)) rc = -1;
    }
    free(g->points), free(g->header);
    *g = (metrics_log){0};
    return rc;
}
