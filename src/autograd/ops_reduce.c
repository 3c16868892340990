/* Reductions to a scalar (double accumulation), and reshape views. */
#include "internal.h"

static void sum_bw(qat_ctx *ctx, qat_node *n) {
    float *gx = qat__grad(ctx, n->in[0]);
    if (!gx) return;
    float g = n->out->grad[0] * n->f[0]; /* f[0] = 1 for sum, 1/numel for mean */
    for (int64_t i = 0; i < n->in[0]->numel; i++) gx[i] += g;
}

static qat_tensor *reduce(qat_ctx *ctx, const char *name, qat_tensor *x, bool mean) {
    if (!qat__inputs_ok(ctx, name, 1, &x)) return NULL;
    if (!qat_tensor_is_contiguous(x)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: input must be contiguous", name);
        return NULL;
    }
    qat_tensor *y = qat__new_out(ctx, 0, NULL);
    if (!y) return NULL;
    /* 8 float lanes over blocks of 1024 (vectorisable, exact order fixed),
     * blocks summed in double: accurate and fast. */
    double acc = 0.0;
    const float *restrict p = x->data;
    for (int64_t s = 0; s < x->numel; s += 1024) {
        int64_t e = s + 1024 < x->numel ? s + 1024 : x->numel, i = s;
        float lane[8] = {0};
        for (; i + 8 <= e; i += 8)
            for (int k = 0; k < 8; k++) lane[k] += p[i + k];
        double block = 0.0;
        for (int k = 0; k < 8; k++) block += lane[k];
        for (; i < e; i++) block += p[i];
        acc += block;
    }
    y->data[0] = (float)(mean ? acc / (double)x->numel : acc);
    qat_node *n = qat__record(ctx, name, sum_bw, y, x, NULL, NULL);
    if (n) n->f[0] = mean ? 1.0f / (float)x->numel : 1.0f;
    return y;
}

qat_tensor *qat_sum(qat_ctx *ctx, qat_tensor *x) { return reduce(ctx, "qat_sum", x, false); }
qat_tensor *qat_mean(qat_ctx *ctx, qat_tensor *x) { return reduce(ctx, "qat_mean", x, true); }

/* The view shares data with x, but its gradient is its own buffer: it
 * becomes x's when x has none yet, else backward adds it into x's (x may
 * have other consumers). */
static void reshape_bw(qat_ctx *ctx, qat_node *n) {
    if (qat__grad_reuse(n->in[0], n->out)) return;
    float *restrict gx = qat__grad(ctx, n->in[0]);
    const float *restrict gy = n->out->grad;
    if (!gx) return;
    for (int64_t i = 0; i < n->out->numel; i++) gx[i] += gy[i];
}

qat_tensor *qat_reshape(qat_ctx *ctx, qat_tensor *x, int rank, const int64_t *shape) {
    if (!qat__inputs_ok(ctx, "qat_reshape", 1, &x)) return NULL;
    if (!qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_reshape: input must be contiguous"), NULL;
    if (rank < 0 || rank > QAT_MAX_RANK || (rank > 0 && !shape))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_reshape: bad rank %d", rank), NULL;
    int64_t s[QAT_MAX_RANK], known = 1;
    int infer = -1;
    for (int d = 0; d < rank; d++) {
        s[d] = shape[d];
        if (s[d] == -1 && infer < 0) infer = d;
        else if (s[d] <= 0)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_reshape: bad dimension %lld",
                                (long long)s[d]), NULL;
        else known *= s[d];
    }
    if (infer >= 0) {
        if (x->numel % known)
            return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_reshape: %lld elements do not split "
                                "into blocks of %lld", (long long)x->numel, (long long)known), NULL;
        s[infer] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_reshape: %lld elements cannot take a shape "
                            "of %lld", (long long)x->numel, (long long)known), NULL;
    qat_tensor *y = qat_tensor_wrap(ctx, QAT_MEM_STEP, x->data, NULL, rank, s);
    if (!y) return NULL;
    qat__record(ctx, "qat_reshape", reshape_bw, y, x, NULL, NULL);
    return y;
}

qat_tensor *qat_flatten(qat_ctx *ctx, qat_tensor *x) {
    if (!qat__inputs_ok(ctx, "qat_flatten", 1, &x)) return NULL;
    if (x->rank < 1) return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_flatten: scalar input"), NULL;
    int64_t shape[2] = {x->shape[0], x->numel / x->shape[0]};
    return qat_reshape(ctx, x, 2, shape);
}
