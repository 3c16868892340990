/* tanh: tanh(x), element-wise, in float32 as PyTorch computes it
 * (autograd's qat_tanh). Under QAT its output is requantized: the integer
 * program's lut op, a table of the output integer for each input integer
 * built with the same scalar function (qat_eval_tanh). */
#include "../op.h"

int qat_layer_tanh(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_TANH, name, 1, &x, NULL);
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_tanh(m->ctx, xs[0]);
}

static float eval(float x, const float *attr) {
    (void)attr;
    return qat_eval_tanh(x);
}

static qat_status lower(qat__lowering *L, int id) { return qat__lower_table(L, id, QAT_LUT_TANH, eval); }

const qat__op_kind qat__op_tanh = {
    .kind = QAT_LAYER_TANH, .name = "tanh", .stem = "tanh", .min_inputs = 1, .max_inputs = 1, .in_files = true,
    .forward = forward, .requantizes = true, .lower = lower,
};
