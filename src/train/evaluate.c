/* A model measured on a split of a data set, in eval mode, on one
 * process or shared among the processes of a data-parallel job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "qat/train.h"

bool qat_data_fits_input(int rank, const int64_t *shape, int in_rank, const int64_t *in_shape) {
    if (!shape || !in_shape) return false;
    int64_t a[QAT_DATA_MAX_RANK], b[3], na = 0, nb = 0, numel = 1, in_numel = 1;
    for (int d = 0; d < rank; d++) {
        numel *= shape[d];
        if (shape[d] != 1) a[na++] = shape[d];
    }
    for (int d = 0; d < in_rank; d++) {
        in_numel *= in_shape[d];
        if (in_shape[d] != 1) b[nb++] = in_shape[d];
    }
    if (in_rank == 1) return numel == in_numel;
    if (na != nb) return false;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d]) return false;
    return true;
}

qat_status qat_data_check(qat_ctx *ctx, const qat_split_info *i, qat_split s, int in_rank, const int64_t *in_shape,
                          int64_t outputs, const qat_task_kind *kind) {
    if (!qat_data_fits_input(i->x_rank, i->x_shape, in_rank, in_shape)) { /* the layout, not only the count */
        char a[96], b[96];
        bool hwc = i->x_rank == 3 && in_rank == 3 && i->x_shape[2] == in_shape[0];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "the data's samples are %s, the model's input is %s%s",
                            qat_dims_str(i->x_rank, i->x_shape, a, sizeof a), qat_dims_str(in_rank, in_shape, b, sizeof b),
                            hwc ? " (images stored [N, H, W, C]? read them channels-last: qat's --channels-last, the "
                                  "data options' channels_last)" : "");
    }
    if (kind && *kind != QAT_TASK_AUTOENCODER) { /* an autoencoder may ignore a y the set carries */
        static const char *const what[] = {"no y", "class labels", "float targets"};
        qat_target_kind want = *kind == QAT_TASK_CLASSIFY ? QAT_TARGET_CLASS : QAT_TARGET_VALUES;
        if (i->target != want)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "the %s task needs %s in y; the %s split has %s%s",
                                qat_task_kind_str(*kind), what[want], qat_split_str(s), what[i->target],
                                want == QAT_TARGET_VALUES && i->target == QAT_TARGET_CLASS
                                    ? " (an integer y is read as class labels: save it as float32 to regress on it)"
                                    : "");
    }
    bool classify = !kind || *kind == QAT_TASK_CLASSIFY;
    if (classify && i->target == QAT_TARGET_CLASS && i->label_max >= outputs)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: label %lld at row %lld is outside 0..%lld (the model has %lld "
                            "output%s%s)", qat_split_str(s), (long long)i->label_max, (long long)i->label_max_row,
                            (long long)outputs - 1, (long long)outputs, outputs == 1 ? "" : "s",
                            outputs == 1 ? "; to regress on an integer y, save it as float32" : "");
    if (kind && *kind == QAT_TASK_REGRESS && i->y_numel != outputs)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: y has %lld value%s per sample, the model outputs %lld",
                            qat_split_str(s), (long long)i->y_numel, i->y_numel == 1 ? "" : "s", (long long)outputs);
    int64_t in_numel = 1;
    for (int d = 0; d < in_rank; d++) in_numel *= in_shape[d];
    if (kind && *kind == QAT_TASK_AUTOENCODER && outputs != in_numel)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "an autoencoder's output must have its input's %lld values; this "
                            "model outputs %lld", (long long)in_numel, (long long)outputs);
    return QAT_OK;
}

void qat__pool_channel_stats(int channels, double *mean, double *sd) {
    double m = 0, sq = 0;
    for (int c = 0; c < channels; c++) m += mean[c], sq += sd[c] * sd[c] + mean[c] * mean[c];
    m /= channels, sq /= channels;
    mean[0] = m, sd[0] = sqrt(fmax(sq - m * m, 0.0));
}

static const char *units_hint(double ratio, double mean, double sd, double ref_mean, double ref_sd,
                              const qat_normalization *nm) {
    if (fabs(mean) <= 0.05 * sd && fabs(ref_mean) > 0.2 * ref_sd)
        return "normalized already, centred on 0? the model normalizes raw data itself: give them raw";
    if (ratio > 64 && ratio < 1024 && nm->divisor == 255.0f)
        return "values in 0..1 where the model takes raw bytes 0..255, as it was trained on? give the data as uint8, "
               "or as floats 0..255";
    if (ratio > 1.0 / 1024 && ratio < 1.0 / 64 && nm->divisor == 1.0f)
        return "values in 0..255 where the model was trained on floats near 0..1? give the data in the training's "
               "units";
    return "data in other units than the training's, or normalized already? the model normalizes raw data itself";
}

qat_status qat_data_check_units(qat_ctx *ctx, qat_dataset *d, qat_split s, int64_t limit, const qat_normalization *nm,
                                bool *refused) {
    if (refused) *refused = false;
    if (!nm || nm->channels < 1) return QAT_OK;
    const qat_split_info *i = qat_dataset_info(d, s);
    if (!i) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_data_check_units: the data set has no %s split", qat_split_str(s));
    int data_ch = i->x_rank == 3 ? (int)i->x_shape[0] : 1;
    if (data_ch > QAT_NORM_MAX_CHANNELS || (nm->channels != 1 && nm->channels != data_ch))
        return QAT_OK; /* a layout qat_data_check refuses */
    double mean[QAT_NORM_MAX_CHANNELS], sd[QAT_NORM_MAX_CHANNELS];
    qat_status st = qat_dataset_channel_stats(d, s, limit, nm->divisor, mean, sd);
    if (st != QAT_OK) return st;
    bool pooled = nm->channels == 1 && data_ch > 1;
    if (pooled) qat__pool_channel_stats(data_ch, mean, sd); /* as the trainer pools them */
    for (int c = 0; c < nm->channels; c++) {
        /* a std of exactly 1 may be the trainer's stand-in for a constant channel: the mean alone judges it */
        double ref = nm->std[c], ratio = sd[c] > 0 ? ref / sd[c] : 1.0;
        bool spread = sd[c] > 0 && nm->std[c] != 1.0f && (ratio > QAT_UNITS_RATIO || ratio < 1.0 / QAT_UNITS_RATIO);
        if (!spread && !(fabs(mean[c] - nm->mean[c]) > QAT_UNITS_RATIO * ref)) continue;
        if (refused) *refused = true;
        char which[32];
        snprintf(which, sizeof which, pooled ? "the data's channels, pooled," : "channel %d of the data", c);
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: %s has mean %.4g and standard deviation %.4g (of x / %g), where "
                            "the model's normalization was made for %.4g and %.4g (%s)", qat_split_str(s), which,
                            mean[c], sd[c], (double)nm->divisor, (double)nm->mean[c], ref,
                            units_hint(ratio, mean[c], sd[c], nm->mean[c], ref, nm));
    }
    return QAT_OK;
}

/* Sums the figures of every process (each measured its own share of the
 * samples, its other entries zero). */
static qat_status reduce(qat_metrics *m, const qat_train_dist *D, qat_ctx *ctx) {
    if (!D || D->size <= 1) return QAT_OK;
    int64_t cap = m->cap, K = m->classes, len = 5 + (m->task == QAT_TASK_CLASSIFY ? K * K + cap : 2 * cap);
    double *v = calloc((size_t)len, sizeof *v);
    if (!v) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "evaluation: out of memory");
    v[0] = (double)m->n, v[1] = (double)m->correct, v[2] = (double)m->topk_correct, v[3] = m->loss_sum;
    v[4] = m->se_sum; /* has_auc travels in the anomaly flags below */
    double *p = v + 5;
    if (m->task == QAT_TASK_CLASSIFY) {
        for (int64_t i = 0; i < K * K; i++) p[i] = (double)m->confusion[i];
        for (int64_t i = 0; i < cap; i++) p[K * K + i] = (double)m->predictions[i];
    } else {
        for (int64_t i = 0; i < cap; i++) p[i] = m->errors[i], p[cap + i] = m->anomaly[i] + (m->has_auc ? 2.0 : 0.0);
    }
    char msg[256] = "";
    qat_status st = D->sum_f64(D->user, v, len, msg, sizeof msg);
    if (st != QAT_OK) return free(v), qat_ctx_fail(ctx, st, "evaluation: %s", msg);
    m->n = (int64_t)v[0], m->correct = (int64_t)v[1], m->topk_correct = (int64_t)v[2], m->loss_sum = v[3];
    m->se_sum = v[4];
    if (m->task == QAT_TASK_CLASSIFY) {
        for (int64_t i = 0; i < K * K; i++) m->confusion[i] = (int64_t)p[i];
        for (int64_t i = 0; i < cap; i++) m->predictions[i] = (int32_t)p[K * K + i];
    } else {
        bool any = false;
        for (int64_t i = 0; i < cap; i++) {
            /* each process adds 2 to its flags when it has anomaly labels: every process does or none */
            double f = p[cap + i];
            any = any || f >= 2.0;
            m->errors[i] = (float)p[i];
            m->anomaly[i] = (uint8_t)((int64_t)f % 2);
        }
        m->has_auc = any;
    }
    free(v);
    return QAT_OK;
}

qat_status qat_model_evaluate(qat_model *m, qat_dataset *d, qat_split s, int64_t limit, const qat_task *task,
                              const qat_train_dist *D, qat_metrics *out) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = qat_model_ctx(m);
    if (!out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_model_evaluate: NULL out");
    memset(out, 0, sizeof *out);
    const qat_split_info *info = qat_dataset_info(d, s);
    if (!info) return qat_ctx_fail(ctx, QAT_ERR_ARG, "evaluation: the data set has no %s split", qat_split_str(s));
    int64_t in_shape[3];
    int in_rank = qat_model_input_shape(m, in_shape);
    if (in_rank == 0) return qat_ctx_fail(ctx, QAT_ERR_STATE, "evaluation: the model declares no input shape");
    int64_t n = limit > 0 && limit < info->n ? limit : info->n, B = 100, out_numel = 0;
    int size = D ? D->size : 1, rank = D ? D->rank : 0;
    int64_t lo = n * rank / size, hi = n * (rank + 1) / size;
    bool was_training = qat_model_training(m), grad = qat_ctx_grad_enabled(ctx);
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    int32_t idx[100], labels[100];
    uint8_t anomaly[100];
    float *targets = NULL;
    qat_status st = QAT_OK;
    bool inited = false;
    for (int64_t at = lo; st == QAT_OK && (at < hi || !inited); at += B) {
        /* the first batch runs even on a process with no share: it learns the output's size */
        int64_t b = at < hi ? (hi - at < B ? hi - at : B) : 0, bb = b > 0 ? b : 1;
        for (int64_t i = 0; i < bb; i++) idx[i] = (int32_t)(b > 0 ? at + i : 0);
        int64_t shape[4] = {bb, in_shape[0], in_shape[1], in_shape[2]};
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, in_rank + 1, shape, false);
        if (!x) {
            st = qat_ctx_status(ctx);
            break;
        }
        st = qat_dataset_read(d, s, idx, bb, x->data, info->target == QAT_TARGET_CLASS ? labels : NULL, NULL,
                              info->has_anomaly ? anomaly : NULL);
        qat_tensor *y = st == QAT_OK ? qat_model_forward(m, x) : NULL;
        if (!y) {
            st = qat_ctx_status(ctx);
            break;
        }
        if (!inited) {
            out_numel = y->numel / bb;
            if ((st = qat_metrics_init(out, task, n, out_numel)) != QAT_OK) {
                st = qat_ctx_fail(ctx, st, "evaluation: cannot measure %lld outputs per sample for the %s task",
                                  (long long)out_numel, qat_task_kind_str(task->kind));
                break;
            }
            inited = true;
            targets = task->kind == QAT_TASK_CLASSIFY ? NULL : malloc((size_t)(B * out_numel) * sizeof *targets);
            if (task->kind != QAT_TASK_CLASSIFY && !targets) {
                st = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "evaluation: out of memory");
                break;
            }
        }
        if (b > 0 && task->kind == QAT_TASK_REGRESS)
            st = qat_dataset_read(d, s, idx, b, NULL, NULL, targets, NULL);
        else if (b > 0 && task->kind == QAT_TASK_AUTOENCODER)
            qat_normalize_samples(qat_model_normalization(m), x->numel / bb, x->data, targets, b);
        if (st == QAT_OK && b > 0 && y->numel != b * out_numel) st = QAT_ERR_SHAPE;
        if (st == QAT_OK && b > 0)
            st = qat_metrics_add(out, at, b, y->data, labels, targets, info->has_anomaly ? anomaly : NULL);
        if (st != QAT_OK && qat_ctx_status(ctx) == QAT_OK)
            st = qat_ctx_fail(ctx, st, "evaluation: the outputs do not fit the %s task", qat_task_kind_str(task->kind));
        qat_ctx_step_reset(ctx);
    }
    free(targets);
    qat_model_train(m, was_training);
    qat_ctx_set_grad_enabled(ctx, grad);
    if (st == QAT_OK) st = reduce(out, D, ctx);
    if (st != QAT_OK) return qat_metrics_free(out), st;
    qat_metrics_finish(out);
    return QAT_OK;
}
