/* concat: 1 to 16 inputs joined along their first axis (channels, or the
 * features of vectors); the other axes must agree. Under QAT its output is
 * requantized: the integer program's concat op, each input requantized to
 * the output's parameters. */
#include <string.h>

#include "../op.h"

int qat_layer_concat(qat_model *m, const char *name, int n, const int *xs) {
    if (m && (n < 1 || n > QAT_CUSTOM_MAX_INPUTS || !xs)) {
        qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: concat takes 1..%d inputs", QAT_CUSTOM_MAX_INPUTS);
        return -1;
    }
    return qat__add_layer(m, QAT_LAYER_CONCAT, name, n, xs, NULL);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    *rank = r, memcpy(s, x, 3 * sizeof *s);
    for (int j = 1; j < l->n_in; j++) {
        const int64_t *y = shapes[l->in[j]];
        if (ranks[l->in[j]] != r || (r == 3 && (y[1] != x[1] || y[2] != x[2])))
            return qat__misfit(m, l, "wants inputs that differ only in their channels", r, x);
        s[0] = s[0] > ((int64_t)1 << 62) - y[0] ? (int64_t)1 << 62 : s[0] + y[0]; /* saturating */
    }
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    return qat_concat(m->ctx, l->n_in, xs, 1);
}

static qat_status lower(qat__lowering *L, int id) {
    const qat__layer *l = &qat__lower_model(L)->layers[id];
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = qat__lower_op(L, QAT_QOP_CONCAT, id, l->n_in, l->in, id, &out);
    double M[QAT_QOP_MAX_INPUTS];
    for (int j = 0; j < l->n_in; j++) M[j] = qat__lower_in(L, l, j)->scale / (double)out.scale;
    return qat__lower_multipliers(L, l, op, l->n_in, M);
}

const qat__op_kind qat__op_concat = {
    .kind = QAT_LAYER_CONCAT, .name = "concat", .stem = "concat", .min_inputs = 1, .max_inputs = QAT_CUSTOM_MAX_INPUTS,
    .in_files = true, .shape = shape, .forward = forward, .requantizes = true, .lower = lower,
};
