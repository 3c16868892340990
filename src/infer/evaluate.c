/* An engine measured on a split of a data set (qat/infer.h): batches
 * read, run, and their outputs handed to the task's metrics. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

qat_status qat_engine_evaluate(qat_ctx *ctx, qat_engine *e, const qat_qmodel *q, qat_dataset *d, qat_split s,
                               const qat_task *task, qat_engine_eval *opt, qat_metrics *out) {
    if (out) memset(out, 0, sizeof *out); /* qat_metrics_free after any failure is safe */
    if (!out || !q || !task || !opt || !e || !d)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_engine_evaluate: NULL %s",
                            !out ? "out" : !q ? "q" : !task ? "task" : !opt ? "opt" : !e ? "engine" : "data set");
    memset(out, 0, sizeof *out);
    const qat_split_info *info = qat_dataset_info(d, s);
    if (!info) return qat_ctx_fail(ctx, QAT_ERR_ARG, "evaluation: the data set has no %s split", qat_split_str(s));
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), K = qat_qtensor_numel(&q->tensors[q->output]);
    const qat_qtensor *it = &q->tensors[q->input];
    qat_status cs = qat_data_check(ctx, info, s, it->rank, it->shape, K, &task->kind);
    if (cs != QAT_OK) return cs;
    int64_t max_b = qat__engine_max_batch(e), B = opt->batch > 0 ? opt->batch : max_b < 64 ? max_b : 64;
    if (B > max_b)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "evaluation: batch %lld is more than the engine's max_batch %lld",
                            (long long)B, (long long)max_b);
    int64_t n = opt->limit > 0 && opt->limit < info->n ? opt->limit : info->n;
    float *x = malloc((size_t)(B * in) * sizeof *x), *y = malloc((size_t)(B * K) * sizeof *y);
    float *t = task->kind == QAT_TASK_CLASSIFY ? NULL : malloc((size_t)(B * K) * sizeof *t);
    /* uint8 data goes in as bytes: the integer engine maps them through its
     * table (the device's path), the same integers as the floats would give */
    bool bytes = info->x_dtype == QAT_DT_U8;
    uint8_t *raw = bytes ? malloc((size_t)(B * in)) : NULL;
    int32_t *idx = malloc((size_t)B * sizeof *idx), *labels = malloc((size_t)B * sizeof *labels);
    uint8_t *anomaly = malloc((size_t)B);
    qat_status st = qat_metrics_init(out, task, n, K);
    if (st == QAT_OK && (!x || !y || !idx || !labels || !anomaly || (task->kind != QAT_TASK_CLASSIFY && !t) ||
                         (bytes && !raw)))
        st = QAT_ERR_NOMEM;
    if (st != QAT_OK) st = qat_ctx_fail(ctx, st, "evaluation: out of memory or a bad task");
    opt->seconds = 0;
    for (int64_t at = 0; st == QAT_OK && at < n; at += B) {
        int64_t b = n - at < B ? n - at : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(at + i);
        bool need_x = !bytes || task->kind == QAT_TASK_AUTOENCODER;
        st = qat_dataset_read(d, s, idx, b, need_x ? x : NULL, task->kind == QAT_TASK_CLASSIFY ? labels : NULL,
                              task->kind == QAT_TASK_REGRESS ? t : NULL, info->has_anomaly ? anomaly : NULL);
        if (st == QAT_OK && bytes) st = qat_dataset_read_raw(d, s, idx, b, raw);
        if (st != QAT_OK) break;
        if (task->kind == QAT_TASK_AUTOENCODER) qat_normalize_samples(q->norm, in, x, t, b);
        double t0 = now();
        int32_t *oq = opt->outputs_q ? opt->outputs_q + at * K : NULL;
        st = bytes ? qat_engine_run_u8(e, raw, b, y, oq) : qat_engine_run(e, x, b, y, oq);
        opt->seconds += now() - t0;
        if (st != QAT_OK) break;
        if (opt->outputs_f) memcpy(opt->outputs_f + at * K, y, (size_t)(b * K) * sizeof *y);
        st = qat_metrics_add(out, at, b, y, labels, t, info->has_anomaly ? anomaly : NULL);
        if (st != QAT_OK) st = qat_ctx_fail(ctx, st, "evaluation: the outputs do not fit the task");
        if (opt->progress) opt->progress(opt->user, at + b, n);
    }
    free(x), free(y), free(t), free(raw), free(idx), free(labels), free(anomaly);
    if (st != QAT_OK) return qat_metrics_free(out), st;
    qat_metrics_finish(out);
    return QAT_OK;
}
