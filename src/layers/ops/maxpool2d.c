/* maxpool2d: max pooling over windows of [C, H, W] (PyTorch's
 * nn.MaxPool2d; padding is -inf). The max commutes with the affine map of
 * the quantization, so under QAT it keeps its input's quantization and is
 * the integer program's maxpool2d op on the integers themselves. */
#include "pool.h"

int qat_layer_maxpool2d(qat_model *m, const char *name, int x, const qat_pool2d_spec *s) {
    return qat__pool_add(m, QAT_LAYER_MAXPOOL2D, name, x, s);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    qat_pool2d_params pp = qat__pool_params(l);
    return qat_maxpool2d_ex(m->ctx, xs[0], &pp);
}

static qat_status lower(qat__lowering *L, int id) {
    qat__lower_same(L, id, QAT_QOP_MAXPOOL2D);
    return QAT_OK;
}

const qat__op_kind qat__op_maxpool2d = {
    .kind = QAT_LAYER_MAXPOOL2D, .name = "maxpool2d", .stem = "pool", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "kernel, stride, pad", .parse = qat__pool_parse, .print = qat__pool_print,
    .shape = qat__pool_shape, .forward = forward, .keeps_quant = true, .lower = lower,
    .rebuild = qat__pool_rebuild,
};
