/* relu6: min(max(x, 0), 6) (MobileNet's). Under QAT it fuses into the
 * group before it (a Linear/Conv/Add: the clamp of that op's output
 * integers, op.h: act); alone it leaves the quantization grid, and has no
 * integer form. */
#include "../op.h"

int qat_layer_relu6(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_RELU6, name, 1, &x, NULL);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_clamp(m->ctx, xs[0], 0.0f, 6.0f);
}

static qat_status lower(qat__lowering *L, int id) {
    return qat__lower_fail(L, &qat__lower_model(L)->layers[id], QAT_ERR_UNSUPPORTED,
                           "a ReLU6 not fused to a Linear/Conv/Add leaves the quantization grid");
}

const qat__op_kind qat__op_relu6 = {
    .kind = QAT_LAYER_RELU6, .name = "relu6", .stem = "relu6_", .min_inputs = 1, .max_inputs = 1, .in_files = true,
    .forward = forward, .act = QAT_ACT_RELU6, .lower = lower,
};
