/* The tape's state on a context, grad mode, and the step memory ops take:
 * zeroed, scratch, and blocks recycled within a step. */
#include <stdlib.h>

#include "internal.h"

static void tape_reset(void *state) {
    qat__tape *t = state;
    t->n_pool = 0;
    t->tape = NULL;
    t->backward_done = false;
}

qat__tape *qat__tape_of(qat_ctx *ctx) {
    qat__tape *t = qat__tape_peek(ctx);
    if (t || !ctx) return t;
    if (!(t = calloc(1, sizeof *t))) {
        qat_ctx_fail(ctx, QAT_ERR_NOMEM, "out of memory allocating the tape");
        return NULL;
    }
    t->grad_enabled = true;
    qat_ctx_set_step_state(ctx, t, tape_reset, free);
    return t;
}

void qat_ctx_set_grad_enabled(qat_ctx *ctx, bool enabled) {
    qat__tape *t = qat__tape_of(ctx);
    if (t) t->grad_enabled = enabled;
}

bool qat_ctx_grad_enabled(const qat_ctx *ctx) {
    const qat__tape *t = qat__tape_peek(ctx);
    return ctx && (!t || t->grad_enabled); /* on by default */
}

void *qat__step_alloc(qat_ctx *ctx, size_t bytes) { return qat_ctx_alloc(ctx, QAT_MEM_STEP, bytes); }

void *qat__step_scratch(qat_ctx *ctx, size_t bytes) { return qat_ctx_alloc_uninit(ctx, QAT_MEM_STEP, bytes); }

/* The pool: the smallest released block of at least `bytes` is taken,
 * unless it is more than twice too large (a per-channel vector would
 * otherwise take an activation's block, and the next activation would
 * find none). */
float *qat__step_recycled(qat_ctx *ctx, size_t bytes) {
    qat__tape *t = qat__tape_peek(ctx);
    int best = -1;
    for (int i = 0; t && i < t->n_pool; i++)
        if (t->pool[i].bytes >= bytes && t->pool[i].bytes / 2 <= bytes &&
            (best < 0 || t->pool[i].bytes < t->pool[best].bytes))
            best = i;
    if (best < 0) return qat__step_scratch(ctx, bytes);
    float *p = t->pool[best].p;
    t->pool[best] = t->pool[--t->n_pool];
    return p;
}

/* A full pool drops its smallest block (it stays in the arena, unused,
 * until the step ends). */
void qat__step_release(qat_ctx *ctx, float *p, size_t bytes) {
    qat__tape *t;
    if (!p || !(t = qat__tape_of(ctx))) return;
    if (t->n_pool < QAT__GRAD_POOL) {
        t->pool[t->n_pool++] = (qat__block){p, bytes};
        return;
    }
    int small = 0;
    for (int i = 1; i < QAT__GRAD_POOL; i++)
        if (t->pool[i].bytes < t->pool[small].bytes) small = i;
    if (t->pool[small].bytes < bytes) t->pool[small] = (qat__block){p, bytes};
}

typedef struct {
    qat__range_fn fn;
    void *user;
    int64_t n, grain;
} range_job;

static void range_task(void *u, int64_t t, int worker) {
    const range_job *j = u;
    (void)worker;
    int64_t i0 = t * j->grain, i1 = i0 + j->grain < j->n ? i0 + j->grain : j->n;
    j->fn(j->user, i0, i1);
}

void qat__par_range(qat_ctx *ctx, int64_t n, int64_t grain, qat__range_fn fn, void *user) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n <= grain) {
        fn(user, 0, n);
        return;
    }
    range_job j = {fn, user, n, grain};
    qat__par(ctx, (n + grain - 1) / grain, range_task, &j);
}
