/* relu: max(x, 0). Under QAT it fuses into the group before it (a
 * Linear/Conv/Add: the clamp of that op's output integers, op.h: act);
 * alone it keeps its input's quantization and is the integer program's
 * relu op (a clamp at the zero point). */
#include "../op.h"

int qat_layer_relu(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_RELU, name, 1, &x, NULL);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_relu(m->ctx, xs[0]);
}

static qat_status lower(qat__lowering *L, int id) {
    qat_qop *op = qat__lower_same(L, id, QAT_QOP_RELU);
    const qat_aparams *a = qat__lower_in(L, &qat__lower_model(L)->layers[id], 0);
    if (a->zero_point > op->act_min) op->act_min = a->zero_point;
    return QAT_OK;
}

const qat__op_kind qat__op_relu = {
    .kind = QAT_LAYER_RELU, .name = "relu", .stem = "relu", .min_inputs = 1, .max_inputs = 1, .in_files = true,
    .forward = forward, .act = QAT_ACT_RELU, .keeps_quant = true, .lower = lower,
};
