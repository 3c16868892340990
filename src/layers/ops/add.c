/* add: the sum of two inputs of one shape (a residual). Under QAT its
 * group takes a following ReLU/ReLU6 in and its output is requantized:
 * the integer program's add op, TFLite's ADD (both inputs rescaled to
 * 2·max(s_a, s_b) after a left shift of 20, an int32 sum, requantized). */
#include <string.h>

#include "../op.h"

int qat_layer_add(qat_model *m, const char *name, int a, int b) {
    int in[2] = {a, b};
    return qat__add_layer(m, QAT_LAYER_ADD, name, 2, in, NULL);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]], r2 = ranks[l->in[1]];
    const int64_t *x = shapes[l->in[0]];
    if (r2 != r || memcmp(shapes[l->in[1]], x, (size_t)r * sizeof *x))
        return qat__misfit(m, l, "wants two inputs of one shape (the second differs)", r, x);
    *rank = r, memcpy(s, x, 3 * sizeof *s);
    return QAT_OK;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    (void)l;
    return qat_add(m->ctx, xs[0], xs[1]);
}

static qat_status lower(qat__lowering *L, int id) {
    qat_model *m = qat__lower_model(L);
    const qat__layer *l = &m->layers[id];
    qat__group g;
    qat__match_group(m, id, false, &g);
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, &m->layers[g.end], &out);
    if (st != QAT_OK) return st;
    double sa = qat__lower_in(L, l, 0)->scale, sb = qat__lower_in(L, l, 1)->scale, twice = 2.0 * (sa > sb ? sa : sb);
    qat_qop *op = qat__lower_op(L, QAT_QOP_ADD, id, 2, l->in, g.end, &out);
    op->left_shift = QAT_ADD_LEFT_SHIFT;
    qat__lower_fuse_act(L, op, &out, g.act);
    double M[3] = {sa / twice, sb / twice, twice / ((double)(1 << QAT_ADD_LEFT_SHIFT) * out.scale)};
    return qat__lower_multipliers(L, l, op, 3, M);
}

const qat__op_kind qat__op_add = {
    .kind = QAT_LAYER_ADD, .name = "add", .stem = "add", .min_inputs = 2, .max_inputs = 2, .in_files = true,
    .shape = shape, .forward = forward, .requantizes = true, .fuses_act = true, .lower = lower,
};
