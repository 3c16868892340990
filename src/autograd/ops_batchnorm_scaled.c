/* Batch normalisation of z = x·scale[c] (+ shift[c]): the folded
 * BatchNorm of quantization-aware training (Jacob et al. 2018; PyTorch's
 * ConvBn2d) computes conv(x, fq(w·sf)) / sf (+ bias) and normalises that.
 * One op instead of a multiply, an add and a BatchNorm: no z tensor, no
 * two extra gradient tensors, one pass less over the activations.
 *
 * The forward computes z as the separate ops did (x·scale, then + shift,
 * in float), so its values are theirs to the bit. The backward is the
 * BatchNorm's closed form for dz, then dx = dz·scale[c],
 * dscale[c] = Σ dz·x, dshift[c] = Σ dz (sums in double). */
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
        double sdy = 0, sdyx = 0;
        float mu = s->mu[c], is = s->invstd[c], sc = scale->data[c], sh = shift ? shift->data[c] : 0.0f;
#define XHAT(v) (((shift ? (v) * sc + sh : (v) * sc) - mu) * is) /* the forward's z, then xhat */
        for (int64_t b = 0; b < N; b++) {
            const float *d = dy + (b * C + c) * HW, *xv = x->data + (b * C + c) * HW;
            for (int64_t i = 0; i < HW; i++) {
                float xh = XHAT(xv[i]);
                sdy += d[i];
                sdyx += (double)d[i] * xh;
            }
        }
        if (gg) gg[c] += (float)sdyx;
        if (gb) gb[c] += (float)sdy;
        if (!gx && !gs && !gsh) continue;
        float k = gamma->data[c] * is;
        float mean_dy = (float)(sdy / (double)m), mean_dyx = (float)(sdyx / (double)m);
        double sdz = 0, sdzx = 0;
        for (int64_t b = 0; b < N; b++) {
            const float *d = dy + (b * C + c) * HW, *xv = x->data + (b * C + c) * HW;
            float *g = gx ? gx + (b * C + c) * HW : NULL;
            for (int64_t i = 0; i < HW; i++) {
                float dz = s->training ? k * (d[i] - mean_dy - XHAT(xv[i]) * mean_dyx) : k * d[i];
                sdz += dz;
                sdzx += (double)dz * xv[i];
                if (g) g[i] = store ? dz * sc : g[i] + dz * sc;
            }
        }
        if (gs) gs[c] += (float)sdzx;
        if (gsh) gsh[c] += (float)sdz;
#undef XHAT
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
        double sum = 0;
        for (int64_t b = 0; b < N; b++) { /* z into y first: the multiply and add of the separate ops */
            const float *p = x->data + (b * C + c) * HW;
            float *z = y->data + (b * C + c) * HW;
            for (int64_t i = 0; i < HW; i++) {
                float v = p[i] * sc;
                z[i] = shift ? v + sh : v;
                sum += z[i];
            }
        }
        float mu, var;
        if (training) {
            double mean = sum / (double)m, sq = 0;
            for (int64_t b = 0; b < N; b++) {
                const float *z = y->data + (b * C + c) * HW;
                for (int64_t i = 0; i < HW; i++) sq += (z[i] - mean) * (z[i] - mean);
            }
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
        float g = gamma->data[c], bt = beta->data[c];
        for (int64_t b = 0; b < N; b++) {
            float *o = y->data + (b * C + c) * HW;
            for (int64_t i = 0; i < HW; i++) o[i] = g * ((o[i] - mu) * invstd[c]) + bt;
        }
    }
    *s = (bns_saved){.mu = mus, .invstd = invstd, .training = training, .in = {x, scale, shift, gamma, beta}};
    qat_tensor *rec[5] = {x, scale, gamma, beta, shift};
    qat_node *n = qat__record_n(ctx, "qat_batchnorm_scaled", bns_bw, y, shift ? 5 : 4, rec);
    if (n) n->saved = s, n->out_free = true;
    return y;
}
