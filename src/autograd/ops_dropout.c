/* Inverted dropout with the caller's RNG: the mask is drawn in element
 * order, so a seed fixes the mask. */
#include "internal.h"

static void dropout_bw(qat_ctx *ctx, qat_node *n) {
    const float *restrict mask = n->saved;
    float *g = qat__grad_reuse(n->in[0], n->out);
    if (g) { /* in place */
        for (int64_t i = 0; i < n->in[0]->numel; i++) g[i] *= mask[i];
        return;
    }
    float *restrict gx = qat__grad(ctx, n->in[0]);
    const float *restrict gy = n->out->grad;
    if (!gx) return;
    for (int64_t i = 0; i < n->out->numel; i++) gx[i] += gy[i] * mask[i];
}

qat_tensor *qat_dropout(qat_ctx *ctx, qat_tensor *x, float p, qat_rng *rng) {
    if (!qat__inputs_ok(ctx, "qat_dropout", 1, &x)) return NULL;
    if (!rng) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_dropout: NULL rng"), NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_dropout: p = %g outside [0, 1)", (double)p), NULL;
    if (!qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_dropout: input must be contiguous"), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    float *mask = qat__step_scratch(ctx, (size_t)x->numel * sizeof(float));
    if (!y || !mask) return NULL;
    float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < x->numel; i++) {
        mask[i] = qat_rng_uniform(rng) < p ? 0.0f : keep;
        y->data[i] = x->data[i] * mask[i];
    }
    qat_node *n = qat__record(ctx, "qat_dropout", dropout_bw, y, x, NULL, NULL);
    if (n) n->saved = mask;
    return y;
}
