/* Batch normalisation over axis 1. Per channel c, with m = N·H·W values:
 *   training: mu, var (biased) from the batch; xhat = (x - mu)·invstd
 *   y = gamma·xhat + beta
 * backward (training), the usual closed form:
 *   dx = gamma·invstd/m · (m·dy - Σdy - xhat·Σ(dy·xhat))
 * In evaluation the statistics are constants and dx = dy·gamma·invstd. */
#include <math.h>

#include "internal.h"

/* xhat is not kept: backward computes it again from x with the forward's
 * float operations (the same bits), which saves a tensor the size of the
 * activation for every BatchNorm of the step. */
typedef struct {
    float *mu, *invstd; /* [C] */
    bool training;
} bn_saved;

static void bn_bw(qat_ctx *ctx, qat_node *n) {
    const bn_saved *s = n->saved;
    qat_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C), m = N * HW;
    const float *dy = n->out->grad;
    float *gx = qat__wants_grad(x) ? qat__grad(ctx, x) : NULL;
    float *gg = qat__wants_grad(gamma) ? qat__grad(ctx, gamma) : NULL;
    float *gb = qat__wants_grad(beta) ? qat__grad(ctx, beta) : NULL;
    if (ctx->status != QAT_OK) return;
    for (int64_t c = 0; c < C; c++) {
        double acc[6] = {0}; /* Σdy, Σdy·xhat, ... (bn_rows.c) */
        float mu = s->mu[c], is = s->invstd[c];
        for (int64_t b = 0; b < N; b++)
            qat__bn_grad_sums_row(x->data + (b * C + c) * HW, dy + (b * C + c) * HW, HW, 1.0f, 0.0f, mu, is, acc);
        if (gg) gg[c] += (float)acc[1];
        if (gb) gb[c] += (float)acc[0];
        if (!gx) continue;
        float k = gamma->data[c] * is;
        float a = (float)(acc[0] / (double)m), bb = (float)(acc[1] / (double)m);
        for (int64_t b = 0; b < N; b++)
            qat__bn_grad_x_row(x->data + (b * C + c) * HW, dy + (b * C + c) * HW, gx + (b * C + c) * HW, HW, 1.0f,
                               0.0f, mu, is, k, a, bb, s->training, false);
    }
}

qat_tensor *qat_batchnorm(qat_ctx *ctx, qat_tensor *x, qat_tensor *gamma, qat_tensor *beta,
                          float *running_mean, float *running_var, float momentum, float eps,
                          bool training) {
    qat_tensor *ins[3] = {x, gamma, beta};
    if (!qat__inputs_ok(ctx, "qat_batchnorm", 3, ins)) return NULL;
    char s1[64];
    if ((x->rank != 2 && x->rank != 4) || !qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_batchnorm: want [N, C] or [N, C, H, W], got %s",
                            qat_shape_str(x, s1, sizeof s1)), NULL;
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C), m = N * HW;
    if (gamma->numel != C || beta->numel != C)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_batchnorm: gamma/beta need %lld elements",
                            (long long)C), NULL;
    if (!running_mean || !running_var)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: NULL running statistics"), NULL;
    if (training && m < 2)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: training needs more than one value "
                            "per channel (got %lld)", (long long)m), NULL;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: eps %g, momentum %g", (double)eps,
                            (double)momentum), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    bn_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *mus = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    float *invstd = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    if (!y || !s || !mus || !invstd) return NULL;
    for (int64_t c = 0; c < C; c++) {
        float mu, var;
        if (training) {
            double acc[2] = {0}; /* Σx, Σx² */
            for (int64_t b = 0; b < N; b++) qat__bn_moments_row(x->data + (b * C + c) * HW, NULL, HW, 1.0f, 0.0f, acc);
            double mean = acc[0] / (double)m, sq = acc[1] - acc[0] * mean; /* Σ(x - mean)² */
            if (sq < 0) sq = 0;
            mu = (float)mean;
            var = (float)(sq / (double)m);
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mu;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)(sq / (double)(m - 1));
        } else {
            mu = running_mean[c];
            var = running_var[c];
        }
        invstd[c] = 1.0f / sqrtf(var + eps);
        mus[c] = mu;
        for (int64_t b = 0; b < N; b++)
            qat__bn_normalize_row(x->data + (b * C + c) * HW, y->data + (b * C + c) * HW, HW, mu, invstd[c],
                                  gamma->data[c], beta->data[c]);
    }
    s->mu = mus;
    s->invstd = invstd;
    s->training = training;
    qat_node *n = qat__record(ctx, "qat_batchnorm", bn_bw, y, x, gamma, beta);
    if (n) n->saved = s, n->out_free = true;
    return y;
}
