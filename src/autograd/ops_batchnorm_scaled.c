/* Batch normalisation of z = x·scale[c] (+ shift[c]): the folded
 * BatchNorm of quantization-aware training (Jacob et al. 2018; PyTorch's
 * ConvBn2d) computes conv(x, fq(w·sf)) / sf (+ bias) and normalises that.
 * One op instead of a multiply, an add and a BatchNorm: no z tensor, no
 * two extra gradient tensors, one pass less over the activations.
 *
 * The forward computes z as the separate ops did (x·scale, then + shift,
 * in float). The backward is the BatchNorm's closed form for dz, then
 * dx = dz·scale[c], dscale[c] = Σ dz·x, dshift[c] = Σ dz (sums in double,
 * the row loops in bn_rows.c; the last two in closed form, below). */
#include <math.h>
#include <string.h>

#include "internal.h"

/* xhat is not kept: backward computes z and xhat again from x with the
 * forward's float operations (the same bits), which saves a tensor the
 * size of the activation for every folded BatchNorm of the step.
 *
 * Channels are the pool's tasks, and a reducer on the context makes the
 * training statistics global, as in ops_batchnorm.c: forward Σz, Σz² and
 * the count; backward Σdy and Σdy·xhat (the a and b of dz). The scale's,
 * shift's, gamma's and beta's gradients stay this process's sums. */
typedef struct {
    float *mu, *invstd; /* [C] */
    double *local;      /* [C][2]: this process's forward Σz, Σz² */
    bool training;
    double m;          /* values per channel in the (global) batch */
    qat_tensor *in[5]; /* x, scale, shift (or NULL), gamma, beta */
} bns_saved;

typedef struct {
    const float *x, *dy, *scale, *shift, *gamma, *beta;
    float *y, *gx, *gs, *gsh, *gg, *gb, *mu, *invstd, *running_mean, *running_var;
    double *acc, *global, *local;
    int64_t N, C, HW;
    double m;
    float momentum, eps;
    qat__simd simd; /* the row loops' copy (op_api.h) */
    bool training, store;
} bns_job;

static float shift_of(const bns_job *j, int64_t c) { return j->shift ? j->shift[c] : 0.0f; }

static void bns_grad_sums_task(void *u, int64_t c, int worker) {
    const bns_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c; /* Σdy, Σdy·xhat */
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_grad_sums_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->dy + (b * j->C + c) * j->HW, j->HW,
                                 j->scale[c], shift_of(j, c), j->mu[c], j->invstd[c], acc);
    if (j->global) j->global[2 * c] = acc[0], j->global[2 * c + 1] = acc[1];
}

static void bns_grad_task(void *u, int64_t c, int worker) {
    const bns_job *j = u;
    (void)worker;
    const double *acc = j->acc + 2 * c, *g = j->global ? j->global + 2 * c : acc;
    float is = j->invstd[c];
    if (j->gg) j->gg[c] += (float)acc[1];
    if (j->gb) j->gb[c] += (float)acc[0];
    float k = j->gamma[c] * is;
    float a = (float)(g[0] / j->m), bb = (float)(g[1] / j->m);
    if (j->gs || j->gsh) {
        /* Σdz and Σdz·x in closed form (dz = k·(dy - a - xhat·b) in
         * training, k·dy with frozen statistics), from Σdy, Σdy·xhat and
         * this process's forward sums: Σxhat = is·(Σz - m·mu) and
         * Σxhat² = is²·(Σz² - 2·mu·Σz + m·mu²); then, as z = mu + xhat/is
         * and x = (z - shift)/scale, Σdz·x = (Σdz·xhat/is + (mu - shift)·Σdz)/scale.
         * Two sums a row instead of six. Summed directly, these cancel to
         * the same small values (in training, BatchNorm makes both
         * gradients eps-sized) with more rounding, not less. */
        double m = (double)(j->N * j->HW), mu = j->mu[c], sz = j->local[2 * c], szz = j->local[2 * c + 1];
        double s1 = is * (sz - m * mu), s2 = (double)is * is * (szz - 2.0 * mu * sz + m * mu * mu);
        double sdz = j->training ? k * (acc[0] - (double)a * m - (double)bb * s1) : k * acc[0];
        double sdzxh = j->training ? k * (acc[1] - (double)a * s1 - (double)bb * s2) : k * acc[1];
        double sdzx = (sdzxh / is + (mu - shift_of(j, c)) * sdz) / j->scale[c];
        if (j->gs) j->gs[c] += (float)sdzx;
        if (j->gsh) j->gsh[c] += (float)sdz;
    }
    if (j->gx)
        for (int64_t b = 0; b < j->N; b++)
            qat__bn_grad_x_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->dy + (b * j->C + c) * j->HW,
                               j->gx + (b * j->C + c) * j->HW, j->HW, j->scale[c], shift_of(j, c), j->mu[c], is, k, a,
                               bb, j->training, j->store);
}

/* Without a reducer, a channel's sums and its dx in one task: the
 * channel's x and dy (N·HW floats each, 200 KB for a 16-channel 28x28
 * layer at batch 64) are still in the core's cache for the second pass. */
static void bns_grad_fused_task(void *u, int64_t c, int worker) {
    bns_grad_sums_task(u, c, worker);
    bns_grad_task(u, c, worker);
}

static void bns_bw(qat_ctx *ctx, qat_node *n) {
    const bns_saved *s = n->saved;
    qat_tensor *x = s->in[0], *scale = s->in[1], *shift = s->in[2], *gamma = s->in[3], *beta = s->in[4];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C);
    bns_job j = {.simd = qat__simd_level(), .x = x->data, .dy = n->out->grad, .scale = scale->data,
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
        qat__par(ctx, C, bns_grad_fused_task, &j);
        return;
    }
    qat__par(ctx, C, bns_grad_sums_task, &j);
    if (qat_ctx_reduce_sum(ctx, j.global, 2 * C) != QAT_OK) return;
    qat__par(ctx, C, bns_grad_task, &j);
}

static void bns_moments_task(void *u, int64_t c, int worker) {
    const bns_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c; /* Σz, Σz²; z (x·scale + shift) goes into y first */
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_moments_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->y + (b * j->C + c) * j->HW, j->HW,
                               j->scale[c], shift_of(j, c), acc);
}

static void bns_normalize_task(void *u, int64_t c, int worker) {
    const bns_job *j = u;
    (void)worker;
    qat__bn_channel_stats(j->training ? j->acc + 2 * c : NULL, j->m, j->momentum, j->eps, j->running_mean + c,
                          j->running_var + c, j->mu + c, j->invstd + c);
    float mu = j->mu[c];
    for (int64_t b = 0; b < j->N; b++) {
        float *o = j->y + (b * j->C + c) * j->HW;
        qat__bn_normalize_row_at(j->simd, o, o, j->HW, mu, j->invstd[c], j->gamma[c], j->beta[c]);
    }
}

/* Without a reducer, a channel's moments and its normalisation in one
 * task, while the channel's values are in the core's cache. */
static void bns_forward_fused_task(void *u, int64_t c, int worker) {
    bns_moments_task(u, c, worker);
    bns_normalize_task(u, c, worker);
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
    if (!running_mean || !running_var || (training && m < 2 && !qat_ctx_has_reducer(ctx)) || !(eps > 0.0f) ||
        !(momentum >= 0.0f && momentum <= 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm_scaled: bad statistics, eps %g or momentum %g, or one "
                            "value per channel in training", (double)eps, (double)momentum), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    bns_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *mus = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    float *invstd = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    double *acc = qat__step_scratch(ctx, (size_t)(2 * C + 1) * sizeof(double));
    if (!y || !s || !mus || !invstd || !acc) return NULL;
    bns_job j = {.simd = qat__simd_level(), .x = x->data, .y = y->data, .scale = scale->data,
                 .shift = shift ? shift->data : NULL, .gamma = gamma->data, .beta = beta->data, .mu = mus,
                 .invstd = invstd, .running_mean = running_mean, .running_var = running_var, .acc = acc, .N = N, .C = C,
                 .HW = HW, .m = (double)m, .momentum = momentum, .eps = eps, .training = training};
    if (!(training && qat_ctx_has_reducer(ctx))) {
        qat__par(ctx, C, bns_forward_fused_task, &j);
    } else { /* synchronized: the global batch's sums and count; backward keeps this process's */
        qat__par(ctx, C, bns_moments_task, &j);
        double *local = qat__step_scratch(ctx, (size_t)(2 * C) * sizeof(double));
        if (!local) return NULL;
        memcpy(local, acc, (size_t)(2 * C) * sizeof(double));
        j.local = local;
        acc[2 * C] = (double)m;
        if (qat_ctx_reduce_sum(ctx, acc, 2 * C + 1) != QAT_OK) return NULL;
        j.m = acc[2 * C];
        if (j.m < 2)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm_scaled: training needs more than one value per "
                                "channel in the global batch (got %g)", j.m), NULL;
        qat__par(ctx, C, bns_normalize_task, &j);
    }
    *s = (bns_saved){.mu = mus, .invstd = invstd, .local = j.local ? j.local : acc, .training = training, .m = j.m,
                     .in = {x, scale, shift, gamma, beta}};
    qat_tensor *rec[5] = {x, scale, gamma, beta, shift};
    qat_node *n = qat__record_n(ctx, "qat_batchnorm_scaled", bns_bw, y, shift ? 5 : 4, rec);
    if (n) n->saved = s, n->out_free = true;
    return y;
}
