/* Batch normalisation of z = x·scale[c] (+ shift[c]): the folded
 * BatchNorm of quantization-aware training (Jacob et al. 2018; PyTorch's
 * ConvBn2d) computes conv(x, fq(w·sf)) / sf (+ bias) and normalises that.
 * One op instead of a multiply, an add and a BatchNorm: no z tensor, no
 * two extra gradient tensors, one pass less over the activations.
 *
 * The forward computes z as the separate ops did (x·scale, then + shift,
 * in float). The backward is the BatchNorm's closed form for dz, then
 * dx = dz·scale[c], dscale[c] = Σ dz·x, dshift[c] = Σ dz (sums in double,
 * the row loops in bn_rows.c). */
#include <math.h>

#include "internal.h"

/* xhat is not kept: backward computes z and xhat again from x with the
 * forward's float operations (the same bits), which saves a tensor the
 * size of the activation for every folded BatchNorm of the step. */
typedef struct {
    float *mu, *invstd; /* [C] */
    bool training;
    qat_tensor *in[5]; /* x, scale, shift (or NULL), gamma, beta */
} bns_saved;

static void bns_bw(qat_ctx *ctx, qat_node *n) {
    const bns_saved *s = n->saved;
    qat_tensor *x = s->in[0], *scale = s->in[1], *shift = s->in[2], *gamma = s->in[3], *beta = s->in[4];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C), m = N * HW;
    const float *dy = n->out->grad;
    bool store = false;
    float *gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &store) : NULL;
    float *gs = qat__wants_grad(scale) ? qat__grad(ctx, scale) : NULL;
    float *gsh = qat__wants_grad(shift) ? qat__grad(ctx, shift) : NULL;
    float *gg = qat__wants_grad(gamma) ? qat__grad(ctx, gamma) : NULL;
    float *gb = qat__wants_grad(beta) ? qat__grad(ctx, beta) : NULL;
    if (ctx->status != QAT_OK) return;
    for (int64_t c = 0; c < C; c++) {
        double acc[6] = {0}; /* Σdy, Σdy·xhat, Σxhat, Σdy·x, Σx, Σxhat·x */
        float mu = s->mu[c], is = s->invstd[c], sc = scale->data[c], sh = shift ? shift->data[c] : 0.0f;
        for (int64_t b = 0; b < N; b++)
            qat__bn_grad_sums_row(x->data + (b * C + c) * HW, dy + (b * C + c) * HW, HW, sc, sh, mu, is, acc);
        if (gg) gg[c] += (float)acc[1];
        if (gb) gb[c] += (float)acc[0];
        float k = gamma->data[c] * is;
        float a = (float)(acc[0] / (double)m), bb = (float)(acc[1] / (double)m);
        /* Σdz and Σdz·x in closed form from the sums (dz = k·(dy - a - xhat·b)
         * in training, k·dy with frozen statistics): the scale's and the
         * shift's gradients without a second reduction. */
        double sdz = s->training ? k * (acc[0] - (double)a * (double)m - (double)bb * acc[2]) : k * acc[0];
        double sdzx = s->training ? k * (acc[3] - (double)a * acc[4] - (double)bb * acc[5]) : k * acc[3];
        if (gs) gs[c] += (float)sdzx;
        if (gsh) gsh[c] += (float)sdz;
        if (gx)
            for (int64_t b = 0; b < N; b++)
                qat__bn_grad_x_row(x->data + (b * C + c) * HW, dy + (b * C + c) * HW, gx + (b * C + c) * HW, HW, sc,
                                   sh, mu, is, k, a, bb, s->training, store);
    }
}

qat_tensor *qat__batchnorm_scaled(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale, qat_tensor *shift, qat_tensor *gamma,
                                  qat_tensor *beta, float *running_mean, float *running_var, float momentum, float eps,
                                  bool training) {
    qat_tensor *ins[5] = {x, scale, gamma, beta, shift};
    if (!qat__inputs_ok(ctx, "qat_batchnorm_scaled", 4, ins)) return NULL;
    char s1[64];
    if ((x->rank != 2 && x->rank != 4) || !qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_batchnorm_scaled: want [N, C] or [N, C, H, W], got %s",
                            qat_shape_str(x, s1, sizeof s1)), NULL;
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C), m = N * HW;
    if (gamma->numel != C || beta->numel != C || scale->numel != C || (shift && shift->numel != C))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_batchnorm_scaled: scale, shift, gamma and beta need %lld elements",
                            (long long)C), NULL;
    if (!running_mean || !running_var || (training && m < 2) || !(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm_scaled: bad statistics, eps %g or momentum %g, or one "
                            "value per channel in training", (double)eps, (double)momentum), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    bns_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *mus = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    float *invstd = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    if (!y || !s || !mus || !invstd) return NULL;
    for (int64_t c = 0; c < C; c++) {
        float sc = scale->data[c], sh = shift ? shift->data[c] : 0.0f;
        double acc[2] = {0}; /* Σz, Σz²; z (x·scale + shift) goes into y first */
        for (int64_t b = 0; b < N; b++)
            qat__bn_moments_row(x->data + (b * C + c) * HW, y->data + (b * C + c) * HW, HW, sc, sh, acc);
        float mu, var;
        if (training) {
            double mean = acc[0] / (double)m, sq = acc[1] - acc[0] * mean; /* Σ(z - mean)² */
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
        for (int64_t b = 0; b < N; b++) {
            float *o = y->data + (b * C + c) * HW;
            qat__bn_normalize_row(o, o, HW, mu, invstd[c], gamma->data[c], beta->data[c]);
        }
    }
    *s = (bns_saved){.mu = mus, .invstd = invstd, .training = training, .in = {x, scale, shift, gamma, beta}};
    qat_tensor *rec[5] = {x, scale, gamma, beta, shift};
    qat_node *n = qat__record_n(ctx, "qat_batchnorm_scaled", bns_bw, y, shift ? 5 : 4, rec);
    if (n) n->saved = s, n->out_free = true;
    return y;
}
