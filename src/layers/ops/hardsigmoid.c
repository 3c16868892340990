/* hardsigmoid: min(max(x + 3, 0), 6) / 6 (PyTorch's nn.Hardsigmoid, the
 * gate of MobileNetV3's squeeze-and-excitation blocks), element-wise, in
 * float32 in PyTorch's order: the sum, the clamps, then a division by 6.
 * Its gradient is g·(1/6) strictly inside (-3, 3) and 0 elsewhere, as
 * PyTorch's. Under QAT its output is requantized: the integer program's
 * lut op with the table alone (QAT_LUT_TABLE), each input integer's output
 * integer computed with the same scalar function. */
#include "../op.h"

int qat_layer_hardsigmoid(qat_model *m, const char *name, int x) {
    return qat__add_layer(m, QAT_LAYER_HARDSIGMOID, name, 1, &x, NULL);
}

static float eval(float x, const float *attr) {
    (void)attr;
    float t = x + 3.0f;
    t = t < 0.0f ? 0.0f : t;
    t = t > 6.0f ? 6.0f : t;
    return t / 6.0f;
}

static qat_status shape(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank, int64_t *s) {
    (void)ctx, (void)user, (void)n;
    *rank = x[0]->rank;
    for (int d = 0; d < x[0]->rank; d++) s[d] = x[0]->shape[d];
    return QAT_OK;
}

static qat_status fwd(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)ctx, (void)user, (void)n;
    const float *xd = x[0]->data;
    for (int64_t i = 0; i < y->numel; i++) y->data[i] = eval(xd[i], NULL);
    return QAT_OK;
}

static qat_status bwd(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, const qat_tensor *y,
                      float *const *gx) {
    (void)ctx, (void)user, (void)n;
    const float sixth = 1.0f / 6.0f, *xd = x[0]->data, *g = y->grad;
    if (gx[0])
        for (int64_t i = 0; i < y->numel; i++) gx[0][i] += xd[i] > -3.0f && xd[i] < 3.0f ? g[i] * sixth : 0.0f;
    return QAT_OK;
}

static const qat_custom_op op = {.name = "hardsigmoid", .shape = shape, .forward = fwd, .backward = bwd};

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    return qat_custom(m->ctx, &op, l->attr, 1, xs);
}

static qat_status lower(qat__lowering *L, int id) { return qat__lower_table(L, id, QAT_LUT_TABLE, eval); }

const qat__op_kind qat__op_hardsigmoid = {
    .kind = QAT_LAYER_HARDSIGMOID, .name = "hardsigmoid", .stem = "hardsigmoid", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .forward = forward, .requantizes = true, .lower = lower,
};
