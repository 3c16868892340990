/* custom: a differentiable op written outside the library (a
 * qat_custom_op, qat/autograd.h) as a layer. It trains and checkpoints
 * like the others; under QAT its output gets an activation quantizer. It
 * has no model-file syntax, a checkpoint cannot rebuild it (the op's code
 * is not in the file), and it has no integer form. */
#include <stdio.h>
#include <string.h>

#include "../internal.h"
#include "../op.h"

int qat_layer_custom(qat_model *m, const char *name, const qat_custom_op *op, void *user, int n, const int *xs) {
    if (m && (!op || !op->name || !op->shape || !op->forward || !op->backward || n < 1 ||
              n > QAT_CUSTOM_MAX_INPUTS || !xs)) {
        qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: a custom layer needs a named op with shape, forward and backward, "
                     "and 1..%d inputs", QAT_CUSTOM_MAX_INPUTS);
        return -1;
    }
    qat__layer *l = qat__append(m, QAT_LAYER_CUSTOM, name, n, xs);
    if (!l) return -1;
    l->custom = op, l->custom_user = user;
    return m->n_layers - 1;
}

/* Asks the op, with [1, shape] stand-ins for its inputs. */
static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    qat_tensor xs[QAT_CUSTOM_MAX_INPUTS];
    const qat_tensor *ps[QAT_CUSTOM_MAX_INPUTS];
    for (int j = 0; j < l->n_in; j++) {
        memset(&xs[j], 0, sizeof xs[j]);
        xs[j].rank = ranks[l->in[j]] + 1, xs[j].shape[0] = 1, xs[j].numel = 1;
        for (int d = 0; d < ranks[l->in[j]]; d++) xs[j].shape[d + 1] = shapes[l->in[j]][d], xs[j].numel *= xs[j].shape[d + 1];
        ps[j] = &xs[j];
    }
    int orank = 0;
    int64_t os[QAT_MAX_RANK] = {0};
    qat_status st = l->custom->shape(m->ctx, l->custom_user, l->n_in, ps, &orank, os);
    if (st != QAT_OK) return st;
    if ((orank != 2 && orank != 4) || os[0] != 1)
        return qat__misfit(m, l, "its op gives no [N, F] or [N, C, H, W] output", ranks[l->in[0]], shapes[l->in[0]]);
    *rank = orank - 1;
    for (int d = 1; d < orank; d++) s[d - 1] = os[d];
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    return qat_custom(m->ctx, l->custom, l->custom_user, l->n_in, xs);
}

static qat_status lower(qat__lowering *L, int id) {
    const qat__layer *l = &qat__lower_model(L)->layers[id];
    char msg[96];
    snprintf(msg, sizeof msg, "custom op \"%s\" has no integer form", l->custom->name);
    return qat__lower_fail(L, l, QAT_ERR_UNSUPPORTED, msg);
}

const qat__op_kind qat__op_custom = {
    .kind = QAT_LAYER_CUSTOM, .name = "custom", .stem = "custom", .min_inputs = 1, .max_inputs = QAT_CUSTOM_MAX_INPUTS,
    .shape = shape, .forward = forward, .requantizes = true, .lower = lower,
    .rebuild_refusal = "is a custom op: it cannot be rebuilt from the file alone (build the model in code and use "
                       "qat_checkpoint_load)",
};
