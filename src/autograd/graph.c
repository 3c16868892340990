/* The tape: recording ops and the reverse walk. Ops are appended in the
 * order they run, so walking the list backwards is a topological order. */
#include <string.h>

#include "internal.h"

bool qat__inputs_ok(qat_ctx *ctx, const char *op, int n, qat_tensor *const *ts) {
    if (!ctx) return false;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            /* A NULL usually comes from an op that already failed: keep its
             * message, which names the real cause. */
            qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: input %d is NULL", op, i);
            return false;
        }
    }
    const qat__tape *t = qat__tape_peek(ctx);
    if (t && t->backward_done) {
        qat_ctx_fail(ctx, QAT_ERR_STATE,
                     "%s: the step's graph was already used by qat_backward; call "
                     "qat_ctx_step_reset first", op);
        return false;
    }
    return true;
}

qat_node *qat__record(qat_ctx *ctx, const char *name, qat__backward_fn fn, qat_tensor *out,
                      qat_tensor *a, qat_tensor *b, qat_tensor *c) {
    if (!qat_ctx_grad_enabled(ctx)) return NULL;
    if (!qat__wants_grad(a) && !qat__wants_grad(b) && !qat__wants_grad(c)) return NULL;
    qat__tape *t = qat__tape_of(ctx);
    qat_node *n = t ? qat__step_alloc(ctx, sizeof *n) : NULL;
    if (!n) return NULL;
    n->backward = fn;
    n->name = name;
    n->out = out;
    n->in[0] = a;
    n->in[1] = b;
    n->in[2] = c;
    n->prev = t->tape;
    t->tape = n;
    out->requires_grad = true;
    out->node = n;
    return n;
}

qat_node *qat__record_n(qat_ctx *ctx, const char *name, qat__backward_fn fn, qat_tensor *out, int n,
                        qat_tensor *const *ins) {
    qat_tensor *wanting = NULL;
    for (int i = 0; i < n && !wanting; i++)
        if (qat__wants_grad(ins[i])) wanting = ins[i];
    qat_node *node = qat__record(ctx, name, fn, out, wanting, NULL, NULL);
    if (node)
        for (int i = 0; i < 3; i++) node->in[i] = i < n ? ins[i] : NULL;
    return node;
}

/* A step tensor's new gradient buffer: a recycled one if one fits, else
 * fresh step memory. Not zeroed. */
static float *step_grad(qat_ctx *ctx, const qat_tensor *t) {
    return qat__step_recycled(ctx, (size_t)t->numel * sizeof(float));
}

float *qat__grad(qat_ctx *ctx, qat_tensor *t) {
    if (t->grad) return t->grad;
    if (t->mem != QAT_MEM_STEP) /* a persistent tensor's gradient must outlive the step */
        return t->grad = qat_ctx_alloc(ctx, t->mem, (size_t)t->numel * sizeof(float));
    t->grad = step_grad(ctx, t);
    if (t->grad) memset(t->grad, 0, (size_t)t->numel * sizeof(float));
    return t->grad;
}

float *qat__grad_dst(qat_ctx *ctx, qat_tensor *t, bool *store) {
    *store = !t->grad && t->mem == QAT_MEM_STEP;
    if (*store) return t->grad = step_grad(ctx, t);
    return qat__grad(ctx, t);
}

float *qat__grad_reuse(qat_tensor *in, qat_tensor *out) {
    if (in->grad || in->mem != QAT_MEM_STEP || in->numel != out->numel || !out->grad) return NULL;
    in->grad = out->grad;
    out->grad = NULL;
    return in->grad;
}

qat_status qat_backward(qat_ctx *ctx, qat_tensor *loss) {
    if (!ctx) return QAT_ERR_ARG;
    if (qat_ctx_status(ctx) != QAT_OK) return qat_ctx_status(ctx); /* the forward pass failed */
    if (!loss) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_backward: NULL loss");
    if (loss->numel != 1)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE,
                            "qat_backward: loss must be a scalar, has %lld elements",
                            (long long)loss->numel);
    qat__tape *t = qat__tape_of(ctx);
    if (!t) return qat_ctx_status(ctx);
    if (t->backward_done)
        return qat_ctx_fail(ctx, QAT_ERR_STATE,
                            "qat_backward: already called for this step (call qat_ctx_step_reset)");
    if (!loss->requires_grad || !loss->node)
        return qat_ctx_fail(ctx, QAT_ERR_STATE,
                            "qat_backward: the loss does not depend on any tensor that requires "
                            "grad (no parameters, or grad mode was off)");
    float *g = qat__grad(ctx, loss);
    if (!g) return qat_ctx_status(ctx);
    g[0] += 1.0f;
    for (qat_node *n = t->tape; n; n = n->prev) {
        if (!n->out->grad) continue; /* not on a path to the loss */
        n->backward(ctx, n);
        if (qat_ctx_status(ctx) != QAT_OK) return qat_ctx_status(ctx);
        /* Every op that reads out has added its share (they ran before
         * this one), and this op has passed it on: the gradient of an
         * op's output is dead, its memory free for the next ones. (As in
         * PyTorch, only leaves keep their gradients after backward.) */
        if (n->out->grad) qat__step_release(ctx, n->out->grad, (size_t)n->out->numel * sizeof(float));
        n->out->grad = NULL;
    }
    t->backward_done = true;
    return QAT_OK;
}
