/* Fused log-softmax + negative log-likelihood, averaged over the batch. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* saved: softmax probabilities [N, K] then the labels. */
static void xent_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0];
    bool store;
    float *gx = qat__grad_dst(ctx, x, &store);
    if (!gx) return;
    int64_t N = x->shape[0], K = x->shape[1];
    const float *p = n->saved;
    const int32_t *lab = (const int32_t *)(p + N * K);
    float g = n->out->grad[0] / (float)N;
    for (int64_t r = 0; r < N; r++) {
        for (int64_t k = 0; k < K; k++) gx[r * K + k] = (store ? 0.0f : gx[r * K + k]) + g * p[r * K + k];
        gx[r * K + lab[r]] -= g;
    }
}

qat_tensor *qat_cross_entropy(qat_ctx *ctx, qat_tensor *logits, const int32_t *labels) {
    if (!qat__inputs_ok(ctx, "qat_cross_entropy", 1, &logits)) return NULL;
    if (!labels) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_cross_entropy: NULL labels"), NULL;
    if (logits->rank != 2 || !qat_tensor_is_contiguous(logits)) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_cross_entropy: logits must be [N, K], got %s",
                            qat_shape_str(logits, s, sizeof s)), NULL;
    }
    int64_t N = logits->shape[0], K = logits->shape[1];
    for (int64_t r = 0; r < N; r++)
        if (labels[r] < 0 || labels[r] >= K)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_cross_entropy: label %d of sample %lld "
                                "outside [0, %lld)", labels[r], (long long)r, (long long)K), NULL;
    qat_tensor *y = qat__new_out(ctx, 0, NULL);
    float *p = qat__step_scratch(ctx, (size_t)(N * K) * sizeof(float) + (size_t)N * sizeof(int32_t));
    if (!y || !p) return NULL;
    double total = 0.0;
    for (int64_t r = 0; r < N; r++) {
        const float *x = logits->data + r * K;
        float m = x[0];
        for (int64_t k = 1; k < K; k++) m = x[k] > m ? x[k] : m;
        double z = 0.0;
        for (int64_t k = 0; k < K; k++) {
            p[r * K + k] = expf(x[k] - m);
            z += p[r * K + k];
        }
        float inv = (float)(1.0 / z);
        for (int64_t k = 0; k < K; k++) p[r * K + k] *= inv;
        total += log(z) + (double)m - (double)x[labels[r]]; /* -log softmax[label] */
    }
    y->data[0] = (float)(total / (double)N);
    memcpy(p + N * K, labels, (size_t)N * sizeof(int32_t));
    qat_node *n = qat__record(ctx, "qat_cross_entropy", xent_bw, y, logits, NULL, NULL);
    if (n) n->saved = p;
    return y;
}
