/* SGD (momentum, Nesterov, weight decay), Adam and AdamW, as torch.optim
 * computes them in float32. */
#include <math.h>
#include <string.h>

#include "autograd/op_api.h" /* QAT__SIMD_FN */
#include "qat/optim.h"

qat_optim_config qat_optim_defaults(qat_optim_kind kind) {
    qat_optim_config c = {.kind = kind, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    c.lr = kind == QAT_OPTIM_SGD ? 0.01f : 0.001f;
    c.weight_decay = kind == QAT_OPTIM_ADAMW ? 0.01f : 0.0f;
    return c;
}

const char *qat_optim_kind_str(qat_optim_kind kind) {
    switch (kind) {
    case QAT_OPTIM_SGD: return "sgd";
    case QAT_OPTIM_ADAM: return "adam";
    case QAT_OPTIM_ADAMW: return "adamw";
    }
    return "unknown";
}

qat_status qat_optim_init(qat_optim *o, qat_ctx *ctx, const qat_optim_config *cfg, int64_t n) {
    if (!ctx) return QAT_ERR_ARG;
    if (!o || !cfg || n < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "optim: bad arguments");
    if (!(cfg->lr >= 0) || !(cfg->weight_decay >= 0) || !(cfg->momentum >= 0) ||
        !(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1) ||
        !(cfg->eps > 0) || (unsigned)cfg->kind > QAT_OPTIM_ADAMW)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "optim: invalid hyperparameters");
    if (cfg->nesterov && (cfg->momentum <= 0 || cfg->dampening != 0))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "optim: Nesterov needs momentum > 0 and dampening 0");
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    bool sgd = cfg->kind == QAT_OPTIM_SGD;
    if (!sgd || cfg->momentum > 0) {
        o->m = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n * sizeof(float));
        if (!o->m) return qat_ctx_status(ctx);
    }
    if (!sgd) {
        o->v = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n * sizeof(float));
        if (!o->v) return qat_ctx_status(ctx);
    }
    return QAT_OK;
}

QAT__SIMD_FN(static, sgd_loop, (p, g, m, n, lr, wd, mu, damp, first, nesterov), float *restrict p,
             const float *restrict g, float *restrict m, int64_t n, float lr, float wd, float mu, float damp,
             bool first, bool nesterov) {
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        if (m) {
            /* torch: the buffer starts as the first gradient, undamped */
            float mi = first ? d : mu * m[i] + damp * d;
            m[i] = mi;
            d = nesterov ? d + mu * mi : mi;
        }
        p[i] -= lr * d;
    }
}

/* Both loops are element-wise: the pool's tasks are fixed ranges of
 * STEP_GRAIN parameters, the same bits on any number of threads. */
#define STEP_GRAIN ((int64_t)1 << 14)

typedef struct {
    qat_optim *o;
    float *p;
    const float *g;
    float lr;
    const struct adam_consts_ *k;
    qat__simd simd; /* the loops' copy (op_api.h) */
} step_job;

static void sgd_task(void *u, int64_t t, int worker) {
    const step_job *j = u;
    const qat_optim_config *c = &j->o->cfg;
    (void)worker;
    int64_t i0 = t * STEP_GRAIN, n = j->o->n - i0 < STEP_GRAIN ? j->o->n - i0 : STEP_GRAIN;
    sgd_loop_at(j->simd, j->p + i0, j->g + i0, j->o->m ? j->o->m + i0 : NULL, n, j->lr, c->weight_decay, c->momentum,
             1.0f - c->dampening, j->o->steps == 1, c->nesterov);
}

static void sgd_step(qat_optim *o, float *p, const float *g, float lr) {
    step_job j = {o, p, g, lr, NULL, qat__simd_level()};
    qat_pool_run(o->pool, (o->n + STEP_GRAIN - 1) / STEP_GRAIN, sgd_task, &j);
}

typedef struct adam_consts_ {
    float b1, b2, wd, lr, eps, step_size, bc2_sqrt;
    bool decoupled;
} adam_consts;

/* The flat loop over every parameter: restrict pointers and no errno let
 * it vectorise; division and sqrt are correctly rounded in every ISA, so
 * each copy gives the same bits. */
QAT__SIMD_FN(static, adam_loop, (k, p, g, m, v, n), const adam_consts *k, float *restrict p, const float *restrict g,
             float *restrict m, float *restrict v, int64_t n) {
    const adam_consts c = *k;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i], pi = p[i];
        if (c.decoupled) pi *= 1.0f - c.lr * c.wd;
        else d += c.wd * pi;
        float mi = c.b1 * m[i] + (1.0f - c.b1) * d;
        float vi = c.b2 * v[i] + (1.0f - c.b2) * d * d;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;
        p[i] = pi - c.step_size * (mi / denom);
    }
}

static void adam_task(void *u, int64_t t, int worker) {
    const step_job *j = u;
    (void)worker;
    int64_t i0 = t * STEP_GRAIN, n = j->o->n - i0 < STEP_GRAIN ? j->o->n - i0 : STEP_GRAIN;
    adam_loop_at(j->simd, j->k, j->p + i0, j->g + i0, j->o->m + i0, j->o->v + i0, n);
}

static void adam_step(qat_optim *o, float *p, const float *g, float lr) {
    const qat_optim_config *c = &o->cfg;
    float bc1 = 1.0f - powf(c->beta1, (float)o->steps), bc2 = 1.0f - powf(c->beta2, (float)o->steps);
    adam_consts k = {.b1 = c->beta1, .b2 = c->beta2, .wd = c->weight_decay, .lr = lr, .eps = c->eps,
                     .step_size = lr / bc1, .bc2_sqrt = sqrtf(bc2), .decoupled = c->kind == QAT_OPTIM_ADAMW};
    step_job j = {o, p, g, lr, &k, qat__simd_level()};
    qat_pool_run(o->pool, (o->n + STEP_GRAIN - 1) / STEP_GRAIN, adam_task, &j);
}

void qat_optim_step(qat_optim *o, float *params, const float *grads, float lr) {
    if (!o || !params || !grads) return;
    o->steps++;
    if (o->cfg.kind == QAT_OPTIM_SGD) sgd_step(o, params, grads, lr);
    else adam_step(o, params, grads, lr);
}

void qat_optim_set_pool(qat_optim *o, qat_pool *pool) {
    if (o) o->pool = pool;
}

float qat_clip_grad_norm(float *grads, int64_t n, float max_norm) {
    if (!grads) return 0.0f;
    double sq = 0;
    for (int64_t i = 0; i < n; i++) sq += (double)grads[i] * grads[i];
    float norm = (float)sqrt(sq);
    float coef = max_norm / (norm + 1e-6f);
    if (coef < 1.0f)
        for (int64_t i = 0; i < n; i++) grads[i] *= coef;
    return norm;
}
