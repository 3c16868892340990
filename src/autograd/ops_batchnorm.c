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
 * activation for every BatchNorm of the step.
 *
 * Channels are the pool's tasks: each channel's sums run in one task in
 * the one-thread order, so the bits do not depend on the thread count.
 * With a reducer on the context (data-parallel training), the batch sums
 * of training — Σx, Σx² and the count forward, Σdy and Σdy·xhat backward —
 * are summed over every process between the passes (synchronized
 * BatchNorm); the gradients of gamma and beta stay this process's share,
 * which the caller's gradient all-reduce adds up. */
typedef struct {
    float *mu, *invstd; /* [C] */
    bool training;
    double m; /* values per channel in the (global) batch */
} bn_saved;

typedef struct {
    const float *x, *dy, *gamma, *beta;
    float *y, *gx, *gg, *gb, *mu, *invstd, *running_mean, *running_var;
    double *acc, *global; /* [C][2] forward, [C][6] backward; global: the reduced [C][2] (or acc) */
    int64_t N, C, HW;
    double m;
    float momentum, eps;
    qat__simd simd; /* the row loops' copy (op_api.h) */
    bool training;
} bn_job;

static void bn_moments_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c;
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_moments_row_at(j->simd, j->x + (b * j->C + c) * j->HW, NULL, j->HW, 1.0f, 0.0f, acc);
}

static void bn_normalize_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    qat__bn_channel_stats(j->training ? j->acc + 2 * c : NULL, j->m, j->momentum, j->eps, j->running_mean + c,
                          j->running_var + c, j->mu + c, j->invstd + c);
    float mu = j->mu[c];
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_normalize_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->y + (b * j->C + c) * j->HW, j->HW, mu,
                                 j->invstd[c], j->gamma[c], j->beta[c]);
}

static void bn_grad_sums_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    double *acc = j->acc + 2 * c; /* Σdy, Σdy·xhat (bn_rows.c) */
    acc[0] = acc[1] = 0;
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_grad_sums_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->dy + (b * j->C + c) * j->HW, j->HW, 1.0f,
                                 0.0f, j->mu[c], j->invstd[c], acc);
    if (j->global) j->global[2 * c] = acc[0], j->global[2 * c + 1] = acc[1];
}

static void bn_grad_task(void *u, int64_t c, int worker) {
    const bn_job *j = u;
    (void)worker;
    const double *acc = j->acc + 2 * c, *g = j->global ? j->global + 2 * c : acc;
    if (j->gg) j->gg[c] += (float)acc[1];
    if (j->gb) j->gb[c] += (float)acc[0];
    if (!j->gx) return;
    float is = j->invstd[c], k = j->gamma[c] * is;
    float a = (float)(g[0] / j->m), bb = (float)(g[1] / j->m);
    for (int64_t b = 0; b < j->N; b++)
        qat__bn_grad_x_row_at(j->simd, j->x + (b * j->C + c) * j->HW, j->dy + (b * j->C + c) * j->HW,
                              j->gx + (b * j->C + c) * j->HW, j->HW, 1.0f, 0.0f, j->mu[c], is, k, a, bb, j->training,
                              false);
}

/* Without a reducer, one channel's two passes in one task, while its
 * values are in the core's cache (as ops_batchnorm_scaled.c does). */
static void bn_grad_fused_task(void *u, int64_t c, int worker) {
    bn_grad_sums_task(u, c, worker);
    bn_grad_task(u, c, worker);
}

static void bn_forward_fused_task(void *u, int64_t c, int worker) {
    bn_moments_task(u, c, worker);
    bn_normalize_task(u, c, worker);
}

static void bn_bw(qat_ctx *ctx, qat_node *n) {
    const bn_saved *s = n->saved;
    qat_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->numel / (N * C);
    bn_job j = {.simd = qat__simd_level(), .x = x->data, .dy = n->out->grad, .gamma = gamma->data, .mu = s->mu,
                .invstd = s->invstd, .N = N, .C = C, .HW = HW, .m = s->m, .training = s->training};
    j.gx = qat__wants_grad(x) ? qat__grad(ctx, x) : NULL;
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
    if (training && m < 2 && !qat_ctx_has_reducer(ctx))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: training needs more than one value "
                            "per channel (got %lld)", (long long)m), NULL;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: eps %g, momentum %g", (double)eps,
                            (double)momentum), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    bn_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *mus = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    float *invstd = qat__step_scratch(ctx, (size_t)C * sizeof(float));
    double *acc = training ? qat__step_scratch(ctx, (size_t)(2 * C + 1) * sizeof(double)) : NULL;
    if (!y || !s || !mus || !invstd || (training && !acc)) return NULL;
    bn_job j = {.simd = qat__simd_level(), .x = x->data, .y = y->data, .gamma = gamma->data, .beta = beta->data,
                .mu = mus, .invstd = invstd, .running_mean = running_mean, .running_var = running_var, .acc = acc,
                .N = N, .C = C, .HW = HW, .m = (double)m, .momentum = momentum, .eps = eps, .training = training};
    if (training && !qat_ctx_has_reducer(ctx)) {
        qat__par(ctx, C, bn_forward_fused_task, &j);
    } else if (training) { /* synchronized: the global batch's sums and count */
        qat__par(ctx, C, bn_moments_task, &j);
        acc[2 * C] = (double)m;
        if (qat_ctx_reduce_sum(ctx, acc, 2 * C + 1) != QAT_OK) return NULL;
        j.m = acc[2 * C];
        if (j.m < 2)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_batchnorm: training needs more than one value per "
                                "channel in the global batch (got %g)", j.m), NULL;
        qat__par(ctx, C, bn_normalize_task, &j);
    } else {
        qat__par(ctx, C, bn_normalize_task, &j);
    }
    s->mu = mus;
    s->invstd = invstd;
    s->training = training;
    s->m = j.m;
    qat_node *n = qat__record(ctx, "qat_batchnorm", bn_bw, y, x, gamma, beta);
    if (n) n->saved = s, n->out_free = true;
    return y;
}
