/* What an evaluation measures: the task's loss, accuracy, top-k,
 * the confusion matrix; the reconstruction error and the ROC AUC. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qat/train.h"

const char *qat_task_kind_str(qat_task_kind k) {
    switch (k) {
    case QAT_TASK_CLASSIFY: return "classify";
    case QAT_TASK_REGRESS: return "regress";
    case QAT_TASK_AUTOENCODER: return "autoencoder";
    }
    return "?";
}

void qat_metrics_free(qat_metrics *m) {
    if (!m) return;
    free(m->confusion);
    free(m->predictions);
    free(m->errors);
    free(m->anomaly);
    memset(m, 0, sizeof *m);
}

qat_status qat_metrics_init(qat_metrics *m, const qat_task *task, int64_t n, int64_t out_numel) {
    if (!m) return QAT_ERR_ARG;
    memset(m, 0, sizeof *m);
    if (!task || n < 0 || out_numel < 1 || (task->kind == QAT_TASK_CLASSIFY && out_numel > QAT_MAX_CLASSES))
        return QAT_ERR_ARG;
    m->task = task->kind, m->cap = n, m->out_numel = out_numel;
    size_t cap = (size_t)(n > 0 ? n : 1);
    if (task->kind == QAT_TASK_CLASSIFY) {
        m->classes = (int)out_numel;
        m->topk = task->topk > 0 && task->topk < out_numel ? task->topk : 0;
        m->confusion = calloc((size_t)out_numel * (size_t)out_numel, sizeof *m->confusion);
        m->predictions = calloc(cap, sizeof *m->predictions);
        if (!m->confusion || !m->predictions) return qat_metrics_free(m), QAT_ERR_NOMEM;
    } else {
        m->errors = calloc(cap, sizeof *m->errors);
        m->anomaly = calloc(cap, 1);
        if (!m->errors || !m->anomaly) return qat_metrics_free(m), QAT_ERR_NOMEM;
    }
    return QAT_OK;
}

/* -log softmax(l)[y], stable, in double. */
static double xent(const float *l, int64_t K, int32_t y) {
    float mx = l[0];
    for (int64_t k = 1; k < K; k++) mx = l[k] > mx ? l[k] : mx;
    double z = 0;
    for (int64_t k = 0; k < K; k++) z += exp((double)l[k] - (double)mx);
    return log(z) + (double)mx - (double)l[y];
}

qat_status qat_metrics_add(qat_metrics *m, int64_t first, int64_t n, const float *outputs, const int32_t *labels,
                           const float *targets, const uint8_t *anomaly) {
    if (!m || first < 0 || n < 0 || first + n > m->cap || !outputs) return QAT_ERR_ARG;
    if (n > 0 && (m->task == QAT_TASK_CLASSIFY ? !labels : !targets)) return QAT_ERR_ARG;
    int64_t K = m->out_numel;
    for (int64_t i = 0; i < n; i++) {
        const float *o = outputs + i * K;
        if (m->task == QAT_TASK_CLASSIFY) {
            int32_t y = labels[i];
            if (y < 0 || y >= K) return QAT_ERR_ARG;
            int32_t best = 0;
            for (int64_t k = 1; k < K; k++) best = o[k] > o[best] ? (int32_t)k : best;
            m->predictions[first + i] = best;
            m->confusion[(int64_t)y * K + best]++;
            m->correct += best == y;
            if (m->topk) { /* in the top k: fewer than k outputs rank above it (earlier ones win ties) */
                int64_t above = 0;
                for (int64_t k = 0; k < K; k++) above += o[k] > o[y] || (o[k] == o[y] && k < y);
                m->topk_correct += above < m->topk;
            }
            m->loss_sum += xent(o, K, y);
        } else {
            const float *t = targets + i * K;
            double se = 0;
            for (int64_t k = 0; k < K; k++) {
                double d = (double)o[k] - (double)t[k];
                se += d * d;
            }
            m->se_sum += se;
            m->errors[first + i] = (float)(se / (double)K);
            if (anomaly) m->anomaly[first + i] = anomaly[i] != 0, m->has_auc = true;
        }
    }
    m->n += n;
    return QAT_OK;
}

void qat_metrics_finish(qat_metrics *m) {
    if (!m) return;
    double n = m->n > 0 ? (double)m->n : 1.0;
    if (m->task == QAT_TASK_CLASSIFY) {
        m->accuracy = (double)m->correct / n;
        m->topk_accuracy = m->topk ? (double)m->topk_correct / n : NAN;
        m->loss = m->loss_sum / n;
        m->mse = NAN, m->auc = NAN;
    } else {
        m->mse = m->se_sum / (n * (double)m->out_numel);
        m->loss = m->mse;
        m->accuracy = NAN, m->topk_accuracy = NAN;
        m->auc = m->has_auc ? qat_roc_auc(m->errors, m->anomaly, m->n) : NAN;
        m->has_auc = m->has_auc && !isnan(m->auc);
    }
}

double qat_metrics_get(const qat_metrics *m, const char *name, bool *higher) {
    if (!m || !name) return NAN;
    bool up = true;
    double v = NAN;
    if (!strcmp(name, "loss")) v = m->loss, up = false;
    else if (!strcmp(name, "mse")) v = m->mse, up = false;
    else if (!strcmp(name, "accuracy")) v = m->accuracy;
    else if (!strcmp(name, "auc")) v = m->has_auc ? m->auc : NAN;
    else if (!strncmp(name, "top", 3) && m->topk && atoi(name + 3) == m->topk) v = m->topk_accuracy;
    if (higher) *higher = up;
    return v;
}

/* ---- ROC AUC: the Mann-Whitney statistic from ranks -------------------------------- */

typedef struct {
    float s;
    uint8_t y;
} scored;

static int by_score(const void *a, const void *b) {
    float x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

double qat_roc_auc(const float *scores, const uint8_t *labels, int64_t n) {
    if (!scores || !labels) return NAN;
    scored *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NAN;
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) v[i] = (scored){scores[i], labels[i] != 0}, pos += labels[i] != 0;
    int64_t neg = n - pos;
    if (!pos || !neg) return free(v), NAN;
    qsort(v, (size_t)n, sizeof *v, by_score);
    /* the positives' rank sum, every run of equal scores at its mean rank */
    double rank_sum = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i, p = 0;
        while (j < n && v[j].s == v[i].s) p += v[j++].y;
        rank_sum += (double)p * ((double)(i + 1) + (double)j) / 2.0;
        i = j;
    }
    free(v);
    return (rank_sum - (double)pos * (double)(pos + 1) / 2.0) / ((double)pos * (double)neg);
}
