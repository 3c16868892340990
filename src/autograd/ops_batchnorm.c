/* Batch normalisation over axis 1, plain and folded.
 *
 * Plain (qat_batchnorm), per channel c with m = N·H·W values:
 *   training: mu, var (biased) from the batch; xhat = (x - mu)·invstd
 *   y = gamma·xhat + beta
 *   backward (training), the usual closed form:
 *   dx = gamma·invstd/m · (m·dy - Σdy - xhat·Σ(dy·xhat))
 * In evaluation the statistics are constants and dx = dy·gamma·invstd.
 *
 * Folded (qat__batchnorm_scaled): the same on z = x·scale[c] (+ shift[c]),
 * the BatchNorm of quantization-aware training's Conv+BN folding (Jacob et
 * al. 2018; PyTorch's ConvBn2d computes conv(x, fq(w·sf)) / sf (+ bias)
 * and normalises that). One op instead of a multiply, an add and a
 * BatchNorm: no z tensor, no two extra gradient tensors, one pass less
 * over the activations. z is computed as the separate ops did (x·scale,
 * then + shift, in float); backward is the closed form for dz, then
 * dx = dz·scale[c], dscale[c] = Σ dz·x, dshift[c] = Σ dz. The plain form is
 * the folded one with no scale: the row loops (bn_rows.c) take scale 1 and
 * shift 0 and then read x where the folded form reads z.
 *
 * xhat is not kept: backward computes it (and z) again from x with the
 * forward's float operations (the same bits), which saves a tensor the
 * size of the activation for every BatchNorm of the step.
 *
 * Channels are the pool's tasks: each channel's sums run in one task in
 * the one-thread order, so the bits do not depend on the thread count.
 * With a reducer on the context (data-parallel training), the batch sums
 * of training — Σz, Σz² and the count forward, Σdy and Σdy·xhat backward —
 * are summed over every process between the passes (synchronized
 * BatchNorm); the gradients of gamma, beta, scale and shift stay this
 * process's share, which the caller's gradient all-reduce adds up. */
#include <math.h>
#include <string.h>

#include "internal.h"

typedef struct {
    float *mu, *invstd; /* [C] */
    double *local;      /* folded: [C][2], this process's forward Σz, Σz² */
    bool training;
    double m;          /* values per channel in the (global) batch */
    qat_tensor *in[5]; /* x, gamma, beta, scale (or NULL), shift (or NULL) */
} bn_saved;

typedef struct {
    const float *x, *dy, *scale, *shift, *gamma, *beta;
    float *y, *gx, *gs, *gsh, *gg, *gb, *mu, *invstd, *running_mean, *running_var;
    double *acc, *global, *local; /* acc [C][2]; global: the reduced [C][2] backward */
    int64_t N, C, HW;
    double m;
    float momentum, eps;
    qat__simd simd; /* the row loops' copy (op_api.h) */
    bool training, store;
} bn_job;

static float scale_of(const bn_job *j, int64_t c) { return j->scale ? j->scale[c] : 1.0f; }
static float shift_of(const bn_job *j, int64_t c) { return j->shift ? j->shift[c] : 0.0f; }

static void bn_moments_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c; /* Σz, Σz²; a folded z (x·scale + shift) goes into y first */
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++) {
        int64_t at = (b * j->C + c) * j->HW;
        qat__bn_moments_row_at(j->simd, j->x + at, j->scale ? j->y + at : NULL, j->HW, scale_of(j, c),
                               shift_of(j, c), acc);
    }
}

static void bn_normalize_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    qat__bn_channel_stats(j->training ? j->acc + 2 * c : NULL, j->m, j->momentum, j->eps, j->running_mean + c,
                          j->running_var + c, j->mu + c, j->invstd + c);
    for (int64_t b = 0; b < j->N; b++) {
        int64_t at = (b * j->C + c) * j->HW;
        qat__bn_normalize_row_at(j->simd, j->scale ? j->y + at : j->x + at, j->y + at, j->HW, j->mu[c],
                                 j->invstd[c], j->gamma[c], j->beta[c]);
    }
}

/* Without a reducer, a channel's moments and its normalisation in one
 * task, while the channel's values are in the core's cache. Evaluation
 * needs no moments, except the folded form's z. */
static void bn_forward_fused_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    if (j->training || j->scale) bn_moments_task(u, c, worker);
    bn_normalize_task(u, c, worker);
}

static void bn_grad_sums_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c; /* Σdy, Σdy·xhat */
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++) {
        int64_t at = (b * j->C + c) * j->HW;
        qat__bn_grad_sums_row_at(j->simd, j->x + at, j->dy + at, j->HW, scale_of(j, c), shift_of(j, c), j->mu[c],
                                 j->invstd[c], acc);
    }
    if (j->global) j->global[2 * c] = acc[0], j->global[2 * c + 1] = acc[1];
}

/* The folded form's dscale and dshift: Σdz·x and Σdz in closed form
 * (dz = k·(dy - a - xhat·b) in training, k·dy with frozen statistics),
 * from Σdy, Σdy·xhat and this process's forward sums: Σxhat = is·(Σz - m·mu)
 * and Σxhat² = is²·(Σz² - 2·mu·Σz + m·mu²); then, as z = mu + xhat/is and
 * x = (z - shift)/scale, Σdz·x = (Σdz·xhat/is + (mu - shift)·Σdz)/scale.
 * Two sums a row instead of six. Summed directly, these cancel to the same
 * small values (in training, BatchNorm makes both gradients eps-sized)
 * with more rounding, not less. */
static void bn_scale_shift_grads(const bn_job *j, int64_t c, float k, float a, float bb) {
    const double *acc = j->acc + 2 * c;
    double is = j->invstd[c], m = (double)(j->N * j->HW), mu = j->mu[c];
    double sz = j->local[2 * c], szz = j->local[2 * c + 1];
    double s1 = is * (sz - m * mu), s2 = (double)j->invstd[c] * j->invstd[c] * (szz - 2.0 * mu * sz + m * mu * mu);
    double sdz = j->training ? k * (acc[0] - (double)a * m - (double)bb * s1) : k * acc[0];
    double sdzxh = j->training ? k * (acc[1] - (double)a * s1 - (double)bb * s2) : k * acc[1];
    double sdzx = (sdzxh / is + (mu - shift_of(j, c)) * sdz) / j->scale[c];
    if (j->gs) j->gs[c] += (float)sdzx;
    if (j->gsh) j->gsh[c] += (float)sdz;
}

static void bn_grad_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    const double *acc = j->acc + 2 * c, *g = j->global ? j->global + 2 * c : acc;
    if (j->gg) j->gg[c] += (float)acc[1];
    if (j->gb) j->gb[c] += (float)acc[0];
    float is = j->invstd[c], k = j->gamma[c] * is;
    float a = (float)(g[0] / j->m), bb = (float)(g[1] / j->m);
    if (j->gs || j->gsh) bn_scale_shift_grads(j, c, k, a, bb);
    if (j->gx)
        for (int64_t b = 0; b < j->N; b++) {
            int64_t at = (b * j->C + c) * j->HW;
            qat__bn_grad_x_row_at(j->simd, j->x + at, j->dy + at, j->gx + at, j->HW, scale_of(j, c), shift_of(j, c),
                                  j->mu[c], is, k, a, bb, j->training, j->store);
        }
}

/* Without a reducer, a channel's sums and its dx in one task: the
 * channel's x and dy (N·HW floats each, 200 KB for a 16-channel 28x28
 * layer at batch 64) are still in the core's cache for the second pass. */
static void bn_grad_fused_task(void *u, int64_t c, int worker) {
    bn_grad_sums_task(u, c, worker);
    bn_grad_task(u, c, worker);
}

static void bn_bw(qat_ctx *ctx, qat_node *n) {
    const bn_saved *s = n->saved;
    qat_tensor *x = s->in[0], *gamma = s->in[1], *beta = s->in[2], *scale = s->in[3], *shift = s->in[4];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C);
    bn_job j = {.simd = qat__simd_level(), .x = x->data, .dy = n->out->grad, .scale = scale ? scale->data : NULL,
                .shift = shift ? shift->data : NULL, .gamma = gamma->data, .mu = s->mu, .invstd = s->invstd, .N = N,
                .C = C, .HW = HW, .m = s->m, .local = s->local, .training = s->training};
    j.gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &j.store) : NULL;
    j.gs = qat__wants_grad(scale) ? qat__grad(ctx, scale) : NULL;
    j.gsh = qat__wants_grad(shift) ? qat__grad(ctx, shift) : NULL;
    j.gg = qat__wants_grad(gamma) ? qat__grad(ctx, gamma) : NULL;
    j.gb = qat__wants_grad(beta) ? qat__grad(ctx, beta) : NULL;
    bool sync = s->training && qat_ctx_has_reducer(ctx);
    j.acc = qat__step_scratch(ctx, (size_t)(2 * C) * sizeof(double));
    j.global = sync ? qat__step_scratch(ctx, (size_t)(2 * C) * sizeof(double)) : NULL;
    if (qat_ctx_status(ctx) != QAT_OK) return;
    if (!sync) {
        qat__par(ctx, C, bn_grad_fused_task, &j);
        return;
    }
    qat__par(ctx, C, bn_grad_sums_task, &j);
    if (qat_ctx_reduce_sum(ctx, j.global, 2 * C) != QAT_OK) return;
    qat__par(ctx, C, bn_grad_task, &j);
}

/* folded: scale is an input (NULL is an error), shift optional */
static qat_tensor *batchnorm(qat_ctx *ctx, const char *name, bool folded, qat_tensor *x, qat_tensor *scale,
                             qat_tensor *shift, qat_tensor *gamma, qat_tensor *beta, float *running_mean,
                             float *running_var, float momentum, float eps, bool training) {
    qat_tensor *plain[3] = {x, gamma, beta}, *fold[4] = {x, scale, gamma, beta};
    if (!qat__inputs_ok(ctx, name, folded ? 4 : 3, folded ? fold : plain)) return NULL;
    char s1[64];
    if ((x->rank != 2 && x->rank != 4) || !qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: want [N, C] or [N, C, H, W], got %s", name,
                            qat_shape_str(x, s1, sizeof s1)), NULL;
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C), m = N * HW;
    if (gamma->numel != C || beta->numel != C || (scale && scale->numel != C) || (shift && shift->numel != C))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: %s need %lld elements", name,
                            scale ? "scale, shift, gamma and beta" : "gamma and beta", (long long)C), NULL;
    if (!running_mean || !running_var)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: NULL running statistics", name), NULL;
    if (training && m < 2 && !qat_ctx_has_reducer(ctx))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: training needs more than one value per channel (got %lld)",
                            name, (long long)m), NULL;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: eps %g, momentum %g", name, (double)eps, (double)momentum), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    bn_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *mus = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    float *invstd = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    bool moments = training || scale;
    double *acc = moments ? qat__step_scratch(ctx, (size_t)(2 * C + 1) * sizeof(double)) : NULL;
    if (!y || !s || !mus || !invstd || (moments && !acc)) return NULL;
    bn_job j = {.simd = qat__simd_level(), .x = x->data, .y = y->data, .scale = scale ? scale->data : NULL,
                .shift = shift ? shift->data : NULL, .gamma = gamma->data, .beta = beta->data, .mu = mus,
                .invstd = invstd, .running_mean = running_mean, .running_var = running_var, .acc = acc, .N = N, .C = C,
                .HW = HW, .m = (double)m, .momentum = momentum, .eps = eps, .training = training};
    double *local = acc; /* the folded backward's forward sums: this process's */
    if (!(training && qat_ctx_has_reducer(ctx))) {
        qat__par(ctx, C, bn_forward_fused_task, &j);
    } else { /* synchronized: the global batch's sums and count */
        qat__par(ctx, C, bn_moments_task, &j);
        if (scale) {
            local = qat__step_scratch(ctx, (size_t)(2 * C) * sizeof(double));
            if (!local) return NULL;
            memcpy(local, acc, (size_t)(2 * C) * sizeof(double));
        }
        acc[2 * C] = (double)m;
        if (qat_ctx_reduce_sum(ctx, acc, 2 * C + 1) != QAT_OK) return NULL;
        j.m = acc[2 * C];
        if (j.m < 2)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: training needs more than one value per channel in the "
                                "global batch (got %g)", name, j.m), NULL;
        qat__par(ctx, C, bn_normalize_task, &j);
    }
    *s = (bn_saved){.mu = mus, .invstd = invstd, .local = local, .training = training, .m = j.m,
                    .in = {x, gamma, beta, scale, shift}};
    /* recorded as the ops were: x, gamma, beta; folded x, scale, gamma, beta (, shift) */
    qat_tensor *rec[5] = {x, scale, gamma, beta, shift};
    qat_node *n = scale ? qat__record_n(ctx, name, bn_bw, y, shift ? 5 : 4, rec)
                        : qat__record(ctx, name, bn_bw, y, x, gamma, beta);
    if (n) n->saved = s, n->out_free = true;
    return y;
}

qat_tensor *qat_batchnorm(qat_ctx *ctx, qat_tensor *x, qat_tensor *gamma, qat_tensor *beta, float *running_mean,
                          float *running_var, float momentum, float eps, bool training) {
    return batchnorm(ctx, "qat_batchnorm", false, x, NULL, NULL, gamma, beta, running_mean, running_var, momentum, eps,
                     training);
}

qat_tensor *qat__batchnorm_scaled(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale, qat_tensor *shift, qat_tensor *gamma,
                                  qat_tensor *beta, float *running_mean, float *running_var, float momentum, float eps,
                                  bool training) {
    return batchnorm(ctx, "qat_batchnorm_scaled", true, x, scale, shift, gamma, beta, running_mean, running_var, momentum,
                     eps, training);
}
