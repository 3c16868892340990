/* Losses: fused log-softmax + negative log-likelihood (with PyTorch's
 * class weights and label smoothing), and the mean squared error. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* saved: softmax probabilities [N, K], then the labels [N]; f[0] is 0 for
 * the plain loss, 1 for the weighted/smoothed one, whose per-row factors
 * follow the labels: a[r] = (1-eps)·w[y_r] + (eps/K)·Σw, then w·eps/K [K],
 * then (1-eps)·w[y_r] [N], all already divided by Σ_r w[y_r]. */
static void xent_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0];
    bool store;
    float *gx = qat__grad_dst(ctx, x, &store);
    if (!gx) return;
    int64_t N = x->shape[0], K = x->shape[1];
    const float *p = n->saved;
    const int32_t *lab = (const int32_t *)(p + N * K);
    if (n->f[0] == 0.0f) {
        float g = n->out->grad[0] / (float)N;
        for (int64_t r = 0; r < N; r++) {
            for (int64_t k = 0; k < K; k++) gx[r * K + k] = (store ? 0.0f : gx[r * K + k]) + g * p[r * K + k];
            gx[r * K + lab[r]] -= g;
        }
        return;
    }
    const float *a = (const float *)(lab + N), *wk = a + N, *wy = wk + K, dy = n->out->grad[0];
    for (int64_t r = 0; r < N; r++) {
        for (int64_t k = 0; k < K; k++)
            gx[r * K + k] = (store ? 0.0f : gx[r * K + k]) + dy * (a[r] * p[r * K + k] - wk[k]);
        gx[r * K + lab[r]] -= dy * wy[r];
    }
}

/* Softmax of each row into p [N, K] (max subtracted), and -log p of the
 * row's every class added, weighted, into the two sums. */
static void softmax_rows(const float *x, int64_t N, int64_t K, float *p, double *logz) {
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x + r * K;
        float m = xr[0];
        for (int64_t k = 1; k < K; k++) m = xr[k] > m ? xr[k] : m;
        double z = 0.0;
        for (int64_t k = 0; k < K; k++) {
            p[r * K + k] = expf(xr[k] - m);
            z += p[r * K + k];
        }
        float inv = (float)(1.0 / z);
        for (int64_t k = 0; k < K; k++) p[r * K + k] *= inv;
        logz[r] = log(z) + (double)m; /* -log p[r, k] = logz[r] - x[r, k] */
    }
}

qat_tensor *qat_cross_entropy_ex(qat_ctx *ctx, qat_tensor *logits, const int32_t *labels, const float *weights,
                                 float smoothing) {
    const char *op = weights || smoothing != 0.0f ? "qat_cross_entropy_ex" : "qat_cross_entropy";
    if (!qat__inputs_ok(ctx, op, 1, &logits)) return NULL;
    if (!labels) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: NULL labels", op), NULL;
    if (!(smoothing >= 0.0f && smoothing < 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: label smoothing %g outside [0, 1)", op, (double)smoothing), NULL;
    if (logits->rank != 2 || !qat_tensor_is_contiguous(logits)) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: logits must be [N, K], got %s", op,
                            qat_shape_str(logits, s, sizeof s)), NULL;
    }
    int64_t N = logits->shape[0], K = logits->shape[1];
    for (int64_t r = 0; r < N; r++)
        if (labels[r] < 0 || labels[r] >= K)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: label %d of sample %lld outside [0, %lld)", op, labels[r],
                                (long long)r, (long long)K), NULL;
    for (int64_t k = 0; weights && k < K; k++)
        if (!(weights[k] >= 0.0f) || !isfinite(weights[k]))
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: class weight %lld is %g (want finite, >= 0)", op, (long long)k,
                                (double)weights[k]), NULL;
    bool plain = !weights && smoothing == 0.0f;
    size_t extra = plain ? 0 : (size_t)(2 * N + K) * sizeof(float);
    qat_tensor *y = qat__new_out(ctx, 0, NULL);
    float *p = qat__step_scratch(ctx, (size_t)(N * K) * sizeof(float) + (size_t)N * sizeof(int32_t) + extra);
    double *logz = qat__step_scratch(ctx, (size_t)N * sizeof(double));
    if (!y || !p || !logz) return NULL;
    softmax_rows(logits->data, N, K, p, logz);
    memcpy(p + N * K, labels, (size_t)N * sizeof(int32_t));
    const float *x = logits->data;
    double loss;
    if (plain) {
        double total = 0.0;
        for (int64_t r = 0; r < N; r++) total += logz[r] - (double)x[r * K + labels[r]];
        loss = total / (double)N;
    } else {
        double wsum = 0.0, wall = 0.0, nll = 0.0, smooth = 0.0;
        for (int64_t k = 0; k < K; k++) wall += weights ? weights[k] : 1.0;
        for (int64_t r = 0; r < N; r++) {
            const float *xr = x + r * K;
            double wy = weights ? weights[labels[r]] : 1.0, row = 0.0;
            wsum += wy;
            nll += wy * (logz[r] - (double)xr[labels[r]]);
            for (int64_t k = 0; k < K; k++) row += (weights ? weights[k] : 1.0) * (logz[r] - (double)xr[k]);
            smooth += row;
        }
        if (!(wsum > 0.0))
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: the batch's labels all have class weight 0", op), NULL;
        double e = smoothing, eK = e / (double)K;
        loss = ((1.0 - e) * nll + eK * smooth) / wsum;
        float *a = (float *)(p + N * K + N), *wk = a + N, *wyr = wk + K; /* the backward's factors, / wsum */
        for (int64_t k = 0; k < K; k++) wk[k] = (float)(eK * (weights ? weights[k] : 1.0) / wsum);
        for (int64_t r = 0; r < N; r++) {
            double wy = weights ? weights[labels[r]] : 1.0;
            a[r] = (float)(((1.0 - e) * wy + eK * wall) / wsum);
            wyr[r] = (float)((1.0 - e) * wy / wsum);
        }
    }
    y->data[0] = (float)loss;
    qat_node *n = qat__record(ctx, op, xent_bw, y, logits, NULL, NULL);
    if (n) n->saved = p, n->f[0] = plain ? 0.0f : 1.0f;
    return y;
}

qat_tensor *qat_cross_entropy(qat_ctx *ctx, qat_tensor *logits, const int32_t *labels) {
    return qat_cross_entropy_ex(ctx, logits, labels, NULL, 0.0f);
}

/* saved: the targets [numel]. */
static void mse_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0];
    bool store;
    float *gx = qat__grad_dst(ctx, x, &store);
    if (!gx) return;
    const float *t = n->saved;
    float g = 2.0f * n->out->grad[0] / (float)x->numel;
    for (int64_t i = 0; i < x->numel; i++) gx[i] = (store ? 0.0f : gx[i]) + g * (x->data[i] - t[i]);
}

qat_tensor *qat_mse_loss(qat_ctx *ctx, qat_tensor *x, const float *target) {
    if (!qat__inputs_ok(ctx, "qat_mse_loss", 1, &x)) return NULL;
    if (!target) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_mse_loss: NULL target"), NULL;
    if (!qat_tensor_is_contiguous(x) || x->numel == 0)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_mse_loss: x must be contiguous and not empty"), NULL;
    qat_tensor *y = qat__new_out(ctx, 0, NULL);
    float *t = qat__step_scratch(ctx, (size_t)x->numel * sizeof(float));
    if (!y || !t) return NULL;
    memcpy(t, target, (size_t)x->numel * sizeof(float));
    double total = 0.0;
    for (int64_t i = 0; i < x->numel; i++) {
        double d = (double)x->data[i] - (double)t[i];
        total += d * d;
    }
    y->data[0] = (float)(total / (double)x->numel);
    qat_node *n = qat__record(ctx, "qat_mse_loss", mse_bw, y, x, NULL, NULL);
    if (n) n->saved = t;
    return y;
}
