/* Custom ops: a differentiable op written outside the library (the
 * callbacks of a qat_custom_op), run and recorded on the tape like any
 * other. The callbacks work on raw data; grad mode is off while they run,
 * so that library ops they call for scratch work record nothing. A
 * callback that fails must leave a message (qat_ctx_fail); when it forgot
 * to, the library sets "custom op <name>: <callback> failed". */
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct {
    qat_custom_op op; /* a copy: the caller's struct may not outlive the step */
    void *user;
    int n;
    qat_tensor *xs[QAT_CUSTOM_MAX_INPUTS];
} custom_saved;

static const char *op_name(const qat_custom_op *op) { return op->name ? op->name : "(unnamed)"; }

/* Runs after a callback, with the context's status from before the call:
 * OK when the callback returned OK and set no error; otherwise the error,
 * with a message naming the op and the callback (the callback's own
 * message after it, or "failed" when it left none). An error from before
 * the call is left as it is: the first error wins. */
static qat_status callback_done(qat_ctx *ctx, const qat_custom_op *op, const char *which, qat_status before,
                                qat_status st) {
    bool set_now = before == QAT_OK && qat_ctx_status(ctx) != QAT_OK; /* by the callback, or an op it called */
    if (st == QAT_OK && !set_now) return QAT_OK;
    if (set_now) qat_ctx_error_prefix(ctx, "custom op %s: %s: ", op_name(op), which);
    else if (qat_ctx_status(ctx) == QAT_OK)
        qat_ctx_fail(ctx, st, "custom op %s: %s failed (%s)", op_name(op), which, qat_status_str(st));
    return st != QAT_OK ? st : qat_ctx_status(ctx);
}

static void custom_bw(qat_ctx *ctx, qat_node *node) {
    custom_saved *s = node->saved;
    float *gx[QAT_CUSTOM_MAX_INPUTS];
    for (int i = 0; i < s->n; i++) {
        gx[i] = NULL;
        if (qat__wants_grad(s->xs[i]) && !(gx[i] = qat__grad(ctx, s->xs[i]))) return;
    }
    bool was = qat_ctx_grad_enabled(ctx);
    qat_status before = qat_ctx_status(ctx);
    qat_ctx_set_grad_enabled(ctx, false);
    qat_status st = s->op.backward(ctx, s->user, s->n, (const qat_tensor *const *)s->xs, node->out, gx);
    qat_ctx_set_grad_enabled(ctx, was);
    callback_done(ctx, &s->op, "backward", before, st);
}

static bool custom_check(qat_ctx *ctx, const qat_custom_op *op, int n, qat_tensor *const *xs) {
    if (!op || !op->shape || !op->forward || !op->backward)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_custom: op %s has a NULL callback (shape, forward and backward "
                            "are all required)", op ? op_name(op) : "NULL"), false;
    if (n < 1 || n > QAT_CUSTOM_MAX_INPUTS || !xs)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "custom op %s: %d inputs (want 1 to %d)", op_name(op), n,
                            QAT_CUSTOM_MAX_INPUTS), false;
    char name[96];
    snprintf(name, sizeof name, "custom op %s", op_name(op));
    if (!qat__inputs_ok(ctx, name, n, xs)) return false;
    for (int i = 0; i < n; i++)
        if (!qat_tensor_is_contiguous(xs[i])) {
            char s[64];
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "custom op %s: input %d %s is not contiguous", op_name(op), i,
                                qat_shape_str(xs[i], s, sizeof s)), false;
        }
    return true;
}

qat_tensor *qat_custom(qat_ctx *ctx, const qat_custom_op *op, void *user, int n, qat_tensor *const *xs) {
    if (!ctx || !custom_check(ctx, op, n, xs)) return NULL;
    const qat_tensor *const *cx = (const qat_tensor *const *)xs;
    int rank = -1;
    int64_t shape[QAT_MAX_RANK] = {0};
    bool was = qat_ctx_grad_enabled(ctx);
    qat_status before = qat_ctx_status(ctx);
    qat_ctx_set_grad_enabled(ctx, false);
    qat_status st = callback_done(ctx, op, "shape", before, op->shape(ctx, user, n, cx, &rank, shape));
    qat_ctx_set_grad_enabled(ctx, was);
    if (st != QAT_OK) return NULL;
    if (rank < 0 || rank > QAT_MAX_RANK)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "custom op %s: shape gave rank %d (want 0 to %d)", op_name(op), rank,
                            QAT_MAX_RANK), NULL;
    qat_tensor *y = qat__new_out(ctx, rank, shape);
    if (!y) {
        qat_ctx_error_prefix(ctx, "custom op %s: output: ", op_name(op));
        return NULL;
    }
    qat_ctx_set_grad_enabled(ctx, false);
    st = callback_done(ctx, op, "forward", before, op->forward(ctx, user, n, cx, y));
    qat_ctx_set_grad_enabled(ctx, was);
    if (st != QAT_OK) return NULL;
    custom_saved *s = qat__step_alloc(ctx, sizeof *s);
    if (!s) return NULL;
    *s = (custom_saved){.op = *op, .user = user, .n = n};
    memcpy(s->xs, xs, (size_t)n * sizeof(qat_tensor *));
    qat_node *node = qat__record_n(ctx, op_name(op), custom_bw, y, n, xs);
    if (node) node->saved = s;
    return y;
}
