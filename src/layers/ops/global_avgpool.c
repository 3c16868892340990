/* global_avgpool: the mean over H and W, [C, H, W] -> [C]. Under QAT its
 * output is requantized: the integer program's global_avgpool op, an
 * int32 sum over H·W requantized by s_in / (s_out·H·W). Prepared with
 * pool_keeps_scale it keeps its input's quantization instead (TFLite's
 * int8 rule): the op divides the sum of the integers by H·W, rounding
 * half away from zero. */
#include "../internal.h"
#include "../op.h"

int qat_layer_global_avgpool(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_GLOBAL_AVGPOOL, name, 1, &x, NULL);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    if (r != 3) return qat__misfit(m, l, "wants [C, H, W]", r, x);
    *rank = 1, s[0] = x[0];
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_global_avgpool2d(m->ctx, xs[0]);
}

static qat_status lower(qat__lowering *L, int id) {
    const qat__layer *l = &qat__lower_model(L)->layers[id];
    if (qat__pool_keeps_scale(l)) { /* the input's quantization, the dividing rule */
        qat__lower_same(L, id, QAT_QOP_GLOBAL_AVGPOOL)->keeps_scale = true;
        return QAT_OK;
    }
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = qat__lower_op(L, QAT_QOP_GLOBAL_AVGPOOL, id, 1, l->in, id, &out);
    int rank;
    const int64_t *x = qat__lower_shape(L, l->in[0], &rank);
    double s_in = qat__lower_in(L, l, 0)->scale, M = s_in / ((double)out.scale * (double)(x[1] * x[2]));
    return qat__lower_multipliers(L, l, op, 1, &M);
}

const qat__op_kind qat__op_global_avgpool = {
    .kind = QAT_LAYER_GLOBAL_AVGPOOL, .name = "global_avgpool", .stem = "gap", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .shape = shape, .forward = forward, .requantizes = true, .averages = true, .lower = lower,
};
