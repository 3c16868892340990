/* mul: the element-wise product of two inputs, of one shape, or the
 * second [C, 1, 1] over the first's [C, H, W] (one factor per channel:
 * squeeze-and-excitation's gate, as MobileNetV3 applies it). PyTorch's
 * `a * b` with broadcasting, in float32 (autograd's qat_mul, whose
 * backward sums the gate's gradient over H and W). Under QAT its output
 * is requantized: the integer program's mul op, TFLite's MUL (the int32
 * product of the inputs' offsets, requantized by s_a·s_b / s_out). */
#include <string.h>

#include "../op.h"

int qat_layer_mul(qat_model *m, const char *name, int a, int b) {
    int in[2] = {a, b};
    return qat__add_layer(m, QAT_LAYER_MUL, name, 2, in, NULL);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]], r2 = ranks[l->in[1]];
    const int64_t *x = shapes[l->in[0]], *g = shapes[l->in[1]];
    bool same = r2 == r && !memcmp(g, x, (size_t)r * sizeof *x);
    bool per_channel = r == 3 && r2 == 3 && g[0] == x[0] && g[1] == 1 && g[2] == 1;
    if (!same && !per_channel)
        return qat__misfit(m, l, "wants a second input of the first's shape, or [C, 1, 1] over [C, H, W]", r, x);
    *rank = r, memcpy(s, x, 3 * sizeof *s);
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_mul(m->ctx, xs[0], xs[1]);
}

static qat_status lower(qat__lowering *L, int id) {
    const qat__layer *l = &qat__lower_model(L)->layers[id];
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, l, &out);
    if (st != QAT_OK) return st;
    double M = (double)qat__lower_in(L, l, 0)->scale * (double)qat__lower_in(L, l, 1)->scale / (double)out.scale;
    qat_qop *op = qat__lower_op(L, QAT_QOP_MUL, id, 2, l->in, id, &out);
    return qat__lower_multipliers(L, l, op, 1, &M);
}

const qat__op_kind qat__op_mul = {
    .kind = QAT_LAYER_MUL, .name = "mul", .stem = "mul", .min_inputs = 2, .max_inputs = 2, .in_files = true,
    .shape = shape, .forward = forward, .requantizes = true, .lower = lower,
};
