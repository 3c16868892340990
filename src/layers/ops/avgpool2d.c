/* avgpool2d: average pooling over windows of [C, H, W] (PyTorch's
 * nn.AvgPool2d: zero padding counts in the divisor). Under QAT its output
 * is requantized: the integer program's avgpool2d op, an int32 window sum
 * requantized by s_in / (s_out·kh·kw). Prepared with pool_keeps_scale it
 * keeps its input's quantization instead (TFLite's int8 AVERAGE_POOL_2D):
 * the op divides the window sum of the integers by kh·kw, rounding half
 * away from zero (unpadded: the QAT pass refuses padding then). */
#include "../internal.h"
#include "pool.h"

int qat_layer_avgpool2d(qat_model *m, const char *name, int x, const qat_pool2d_spec *s) {
    return qat__pool_add(m, QAT_LAYER_AVGPOOL2D, name, x, s);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    qat_pool2d_params pp = qat__pool_params(l);
    return qat_avgpool2d_ex(m->ctx, xs[0], &pp);
}

static qat_status lower(qat__lowering *L, int id) {
    const qat__layer *l = &qat__lower_model(L)->layers[id];
    if (qat__pool_keeps_scale(l)) { /* the input's quantization, the dividing rule */
        qat__lower_same(L, id, QAT_QOP_AVGPOOL2D)->keeps_scale = true;
        return QAT_OK;
    }
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = qat__lower_op(L, QAT_QOP_AVGPOOL2D, id, 1, l->in, id, &out);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    double M = qat__lower_in(L, l, 0)->scale / ((double)out.scale * l->kh * l->kw);
    return qat__lower_multipliers(L, l, op, 1, &M);
}

const qat__op_kind qat__op_avgpool2d = {
    .kind = QAT_LAYER_AVGPOOL2D, .name = "avgpool2d", .stem = "avgpool", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "kernel, stride, pad", .parse = qat__pool_parse, .print = qat__pool_print,
    .shape = qat__pool_shape, .forward = forward, .requantizes = true, .averages = true, .lower = lower,
    .rebuild = qat__pool_rebuild,
};
