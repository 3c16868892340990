/* sigmoid: 1 / (1 + exp(-x)), element-wise, in float32 as PyTorch computes it
 * (autograd's qat_sigmoid). Under QAT its output is requantized: the integer
 * program's lut op, a table of the output integer for each input integer
 * built with the same scalar function (qat_eval_sigmoid). */
#include "../op.h"

int qat_layer_sigmoid(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_SIGMOID, name, 1, &x, NULL);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_sigmoid(m->ctx, xs[0]);
}

static float eval(float x, const float *attr) {
    (void)attr;
    return qat_eval_sigmoid(x);
}

static qat_status lower(qat__lowering *L, int id) { return qat__lower_table(L, id, QAT_LUT_SIGMOID, eval); }

const qat__op_kind qat__op_sigmoid = {
    .kind = QAT_LAYER_SIGMOID, .name = "sigmoid", .stem = "sigmoid", .min_inputs = 1, .max_inputs = 1, .in_files = true,
    .forward = forward, .requantizes = true, .lower = lower,
};
