/* SGD (momentum, Nesterov, weight decay), Adam and AdamW, as torch.optim
 * computes them in float32. */
#include <math.h>
#include <string.h>

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

static void sgd_step(qat_optim *o, float *p, const float *g, float lr) {
    const qat_optim_config *c = &o->cfg;
    float wd = c->weight_decay, mu = c->momentum, damp = 1.0f - c->dampening;
    bool first = o->steps == 1;
    for (int64_t i = 0; i < o->n; i++) {
        float d = g[i] + wd * p[i];
        if (o->m) {
            /* torch: the buffer starts as the first gradient, undamped */
            o->m[i] = first ? d : mu * o->m[i] + damp * d;
            d = c->nesterov ? d + mu * o->m[i] : o->m[i];
        }
        p[i] -= lr * d;
    }
}

static void adam_step(qat_optim *o, float *p, const float *g, float lr) {
    const qat_optim_config *c = &o->cfg;
    float b1 = c->beta1, b2 = c->beta2, wd = c->weight_decay;
    bool decoupled = c->kind == QAT_OPTIM_ADAMW;
    float bc1 = 1.0f - powf(b1, (float)o->steps), bc2 = 1.0f - powf(b2, (float)o->steps);
    float step_size = lr / bc1, bc2_sqrt = sqrtf(bc2);
    for (int64_t i = 0; i < o->n; i++) {
        float d = g[i];
        if (decoupled) p[i] *= 1.0f - lr * wd;
        else d += wd * p[i];
        o->m[i] = b1 * o->m[i] + (1.0f - b1) * d;
        o->v[i] = b2 * o->v[i] + (1.0f - b2) * d * d;
        float denom = sqrtf(o->v[i]) / bc2_sqrt + c->eps;
        p[i] -= step_size * (o->m[i] / denom);
    }
}

void qat_optim_step(qat_optim *o, float *params, const float *grads, float lr) {
    if (!o || !params || !grads) return;
    o->steps++;
    if (o->cfg.kind == QAT_OPTIM_SGD) sgd_step(o, params, grads, lr);
    else adam_step(o, params, grads, lr);
}

float qat_clip_grad_norm(float *grads, int64_t n, float max_norm) {
    double sq = 0;
    for (int64_t i = 0; i < n; i++) sq += (double)grads[i] * grads[i];
    float norm = (float)sqrt(sq);
    float coef = max_norm / (norm + 1e-6f);
    if (coef < 1.0f)
        for (int64_t i = 0; i < n; i++) grads[i] *= coef;
    return norm;
}
