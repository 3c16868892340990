/* leaky_relu: x for x > 0, negative_slope·x otherwise (PyTorch's
 * nn.LeakyReLU, negative_slope 0.01 by default), element-wise, in float32
 * as PyTorch computes it: `x > 0 ? x : x * slope`, its gradient `g` or
 * `g * slope` by the same test (so slope at 0). Under QAT its output is
 * requantized: the integer program's lut op with the table alone
 * (QAT_LUT_TABLE), each input integer's output integer computed here with
 * the same scalar function, so no target needs to know the function. */
#include "../op.h"

enum { SLOPE }; /* its attribute, as qat__layer.attr holds it */

int qat_layer_leaky_relu(qat_model *m, const char *name, int x, float negative_slope) {
    return qat__add_layer(m, QAT_LAYER_LEAKY_RELU, name, 1, &x, (const float[]){negative_slope});
}

static float eval(float x, const float *attr) { return x > 0.0f ? x : x * attr[SLOPE]; }

/* The autograd op, its slope (the layer's attr) as user data. */
static qat_status shape(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank, int64_t *s) {
    (void)ctx, (void)user, (void)n;
    *rank = x[0]->rank;
    for (int d = 0; d < x[0]->rank; d++) s[d] = x[0]->shape[d];
    return QAT_OK;
}

static qat_status fwd(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)ctx, (void)n;
    const float *attr = user, *xd = x[0]->data;
    for (int64_t i = 0; i < y->numel; i++) y->data[i] = eval(xd[i], attr);
    return QAT_OK;
}

static qat_status bwd(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, const qat_tensor *y,
                      float *const *gx) {
    (void)ctx, (void)n;
    const float slope = ((const float *)user)[SLOPE], *xd = x[0]->data, *g = y->grad;
    if (gx[0])
        for (int64_t i = 0; i < y->numel; i++) gx[0][i] += xd[i] > 0.0f ? g[i] : g[i] * slope;
    return QAT_OK;
}

static const qat_custom_op op = {.name = "leaky_relu", .shape = shape, .forward = fwd, .backward = bwd};

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    return qat_custom(m->ctx, &op, l->attr, 1, xs);
}

static qat_status lower(qat__lowering *L, int id) { return qat__lower_table(L, id, QAT_LUT_TABLE, eval); }

const qat__op_kind qat__op_leaky_relu = {
    .kind = QAT_LAYER_LEAKY_RELU, .name = "leaky_relu", .stem = "leaky_relu", .min_inputs = 1, .max_inputs = 1,
    .n_attrs = 1, .attrs = {[SLOPE] = {.key = "negative_slope", .lo = 0.0f, .hi = 1.0f, .def = 0.01f}},
    .in_files = true, .forward = forward, .requantizes = true, .lower = lower,
};
