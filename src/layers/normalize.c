/* The model's input normalization as a graph op (qat_normalize): per
 * element of channel c, ((x / divisor) - mean[c]) / std[c], three float32
 * operations each rounded — the formula every target computes
 * (docs/quantization.md, "Normalization"). */
#include <stdio.h>
#include <string.h>

#include "autograd/op_api.h"
#include "internal.h"

/* The tensor as planes of `per` elements, plane p of channel p % C: a
 * [N, C, H, W] input per channel has planes of H·W; a normalization of one
 * channel has one plane per sample. */
typedef struct {
    const float *x, *gy;
    float *y, *g;
    int64_t per, C;
    const qat_normalization *n; /* forward */
    const float *bw;            /* backward: std[0..C-1], then the divisor */
} norm_job;

/* Planes [p0, p1). Division, not a product by the reciprocal: the same
 * IEEE operations as every other implementation of the formula. The
 * inner loop has loop-invariant operands, so it vectorises (divps is
 * correctly rounded like the scalar division). */
static void norm_range(void *u, int64_t p0, int64_t p1) {
    const norm_job *j = u;
    const float d = j->n->divisor;
    for (int64_t p = p0; p < p1; p++) {
        const float mu = j->n->mean[p % j->C], sd = j->n->std[p % j->C];
        const float *restrict x = j->x + p * j->per;
        float *restrict y = j->y + p * j->per;
        for (int64_t i = 0; i < j->per; i++) y[i] = ((x[i] / d) - mu) / sd;
    }
}

/* dx += (dy / std[c]) / divisor: the chain rule through the two divisions
 * in reverse order (the subtraction passes the gradient as it is). */
static void norm_bw_range(void *u, int64_t p0, int64_t p1) {
    const norm_job *j = u;
    const float d = j->bw[j->C];
    for (int64_t p = p0; p < p1; p++) {
        const float sd = j->bw[p % j->C];
        const float *restrict gy = j->gy + p * j->per;
        float *restrict g = j->g + p * j->per;
        for (int64_t i = 0; i < j->per; i++) g[i] += (gy[i] / sd) / d;
    }
}

static int64_t grain(int64_t per) { return per >= QAT__GRAIN ? 1 : QAT__GRAIN / per; }

static void norm_bw(qat_ctx *ctx, qat_node *node) {
    float *gx = qat__grad(ctx, node->in[0]);
    if (!gx) return;
    norm_job j = {.gy = node->out->grad, .g = gx, .per = node->i[0], .C = node->i[1], .bw = node->saved};
    qat__par_range(ctx, node->out->numel / j.per, grain(j.per), norm_bw_range, &j);
}

qat_tensor *qat_normalize(qat_ctx *ctx, qat_tensor *x, const qat_normalization *n) {
    if (!qat__inputs_ok(ctx, "qat_normalize", 1, &x)) return NULL;
    if (!n || n->channels == 0) return x;
    char s[64], msg[200];
    if (qat_normalization_check(n, 0, NULL, msg, sizeof msg) != QAT_OK)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_normalize: normalization: %s", msg), NULL;
    if (!qat_tensor_is_contiguous(x) || x->rank < 2)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_normalize: the input %s is not a contiguous batch",
                            qat_shape_str(x, s, sizeof s)), NULL;
    if (n->channels > 1 && (x->rank != 4 || x->shape[1] != n->channels))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_normalize: the normalization has %d channels, the input %s "
                            "is not [N, %d, H, W]", n->channels, qat_shape_str(x, s, sizeof s), n->channels), NULL;
    int64_t per = 1, C = n->channels;
    for (int d = n->channels > 1 ? 2 : 1; d < x->rank; d++) per *= x->shape[d];
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    if (per > 0) {
        norm_job j = {.x = x->data, .y = y->data, .per = per, .C = C, .n = n};
        qat__par_range(ctx, x->numel / per, grain(per), norm_range, &j);
    }
    qat_node *node = qat__record(ctx, "qat_normalize", norm_bw, y, x, NULL, NULL);
    if (node) { /* what the backward needs, kept in the step: the caller may change its normalization */
        float *bw = qat__step_scratch(ctx, (size_t)(C + 1) * sizeof *bw);
        if (!bw) return NULL;
        memcpy(bw, n->std, (size_t)C * sizeof *bw);
        bw[C] = n->divisor;
        node->i[0] = per > 0 ? per : 1, node->i[1] = C;
        node->saved = bw;
        node->out_free = true; /* the backward reads no output: the input's quantizer may write over it */
    }
    return y;
}

void qat_normalize_samples(const qat_normalization *n, int64_t numel, const float *x, float *y, int64_t count) {
    if (!n || n->channels <= 0) {
        if (y != x) memmove(y, x, (size_t)(count * numel) * sizeof *y);
        return;
    }
    /* the op's own loop, on planes of one channel each (numel / channels elements) */
    norm_job j = {.x = x, .y = y, .per = numel / n->channels, .C = n->channels, .n = n};
    if (j.per > 0) norm_range(&j, 0, count * n->channels);
}
