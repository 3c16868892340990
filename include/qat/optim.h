/* qat/optim.h — optimizers over flat parameter blocks, gradient clipping,
 * learning-rate schedules.
 *
 * State (momentum buffers, Adam moments) mirrors the parameter block, so a
 * step is one flat loop. The update formulas are PyTorch's (torch.optim
 * SGD, Adam, AdamW with their defaults), step for step. */
#ifndef QAT_OPTIM_H
#define QAT_OPTIM_H

#include "qat/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { QAT_OPTIM_SGD, QAT_OPTIM_ADAM, QAT_OPTIM_ADAMW } qat_optim_kind;

typedef struct {
    qat_optim_kind kind;
    float lr;
    float weight_decay; /* SGD/Adam: L2 added to the gradient; AdamW: decoupled */
    float momentum;     /* SGD */
    float dampening;    /* SGD */
    bool nesterov;      /* SGD; needs momentum > 0 and dampening 0 */
    float beta1, beta2, eps; /* Adam(W) */
} qat_optim_config;

/* PyTorch's defaults for the kind (lr 0.01 SGD, 0.001 Adam(W); AdamW decay 0.01). */
QAT_API qat_optim_config qat_optim_defaults(qat_optim_kind kind);
QAT_API const char *qat_optim_kind_str(qat_optim_kind kind);

typedef struct {
    qat_optim_config cfg;
    int64_t n;     /* parameters */
    int64_t steps; /* taken so far (Adam's t) */
    float *m;      /* SGD momentum buffer, or Adam first moment [n] */
    float *v;      /* Adam second moment [n] (NULL for SGD) */
    qat_pool *pool; /* borrowed (qat_optim_set_pool); NULL: one thread */
} qat_optim;

/* State in ctx's persistent memory, zeroed. Checks the config. */
QAT_API qat_status qat_optim_init(qat_optim *o, qat_ctx *ctx, const qat_optim_config *cfg, int64_t n);
/* Splits every step over pool's threads (the caller's; NULL: one
 * thread). The update is element-wise: the same bits either way. */
QAT_API void qat_optim_set_pool(qat_optim *o, qat_pool *pool);
/* One update of params from grads at learning rate lr (the schedule's). */
QAT_API void qat_optim_step(qat_optim *o, float *params, const float *grads, float lr);

/* Scales grads so their global L2 norm is at most max_norm (as
 * torch.nn.utils.clip_grad_norm_, factor max_norm / (norm + 1e-6)).
 * Returns the norm before clipping. */
QAT_API float qat_clip_grad_norm(float *grads, int64_t n, float max_norm);

typedef enum { QAT_LR_CONSTANT, QAT_LR_STEP, QAT_LR_COSINE } qat_lr_kind;

typedef struct {
    qat_lr_kind kind;
    float base_lr;
    int64_t step_size; /* STEP: multiply by gamma every step_size steps */
    float gamma;
    int64_t total_steps; /* COSINE: T_max */
    float min_lr;        /* COSINE: eta_min */
    int64_t warmup_steps; /* linear warm-up from warmup_start * base to base */
    float warmup_start;
} qat_lr_schedule;

/* Learning rate for 0-based step `step` (closed forms, as torch's
 * StepLR, CosineAnnealingLR and LinearLR compose). */
QAT_API float qat_lr_at(const qat_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
