/* flatten: [C, H, W] -> [C·H·W] (a vector stays a vector). The same
 * numbers, so under QAT it keeps its input's quantization; the integer
 * program's flatten op (a view of its input). */
#include "../internal.h"
#include "../op.h"

int qat_layer_flatten(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_FLATTEN, name, 1, &x, NULL);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    (void)m;
    *rank = 1, s[0] = qat__shape_numel(ranks[l->in[0]], shapes[l->in[0]]); /* saturating */
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_flatten(m->ctx, xs[0]);
}

static qat_status lower(qat__lowering *L, int id) {
    qat__lower_same(L, id, QAT_QOP_FLATTEN);
    return QAT_OK;
}

const qat__op_kind qat__op_flatten = {
    .kind = QAT_LAYER_FLATTEN, .name = "flatten", .stem = "flatten", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .shape = shape, .forward = forward, .keeps_quant = true, .lower = lower,
};
