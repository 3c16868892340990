/* The fake-quantize op in the autograd graph, with straight-through
 * backward: clipped (gradient where the unclamped integer is in range, as
 * PyTorch) or plain. */
#include "autograd/internal.h"
#include "internal.h"

static void fq_bw(qat_ctx *ctx, qat_node *n) {
    float *restrict gx = qat__grad(ctx, n->in[0]);
    const float *restrict gy = n->out->grad;
    const uint8_t *restrict mask = n->saved; /* NULL: plain STE */
    if (!gx) return;
    if (!mask) {
        for (int64_t i = 0; i < n->out->numel; i++) gx[i] += gy[i];
        return;
    }
    for (int64_t i = 0; i < n->out->numel; i++) {
        float g = gy[i];
        gx[i] += mask[i] ? g : 0.0f;
    }
}

qat_tensor *qat_fake_quant(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste) {
    if (!qat__inputs_ok(ctx, "qat_fake_quant", 1, &x)) return NULL;
    if (!q || !q->scale) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_fake_quant: NULL type"), NULL;
    bool same = (x->rank == q->rank || q->rank == 0) && qat_tensor_is_contiguous(x);
    for (int d = 0; same && d < q->rank; d++) same = x->shape[d] == q->shape[d];
    if (!same) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_fake_quant: tensor %s does not have the type's "
                            "shape", qat_shape_str(x, s, sizeof s)), NULL;
    }
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    uint8_t *mask = NULL;
    bool record = ctx->grad_enabled && x->requires_grad;
    if (record && ste == QAT_STE_CLIPPED) mask = qat__step_scratch(ctx, (size_t)x->numel);
    if (!y || (record && ste == QAT_STE_CLIPPED && !mask)) return NULL;
    int64_t n = x->numel, run = q->rank == 0 ? n : qat__qtype_run(q);
    const float *restrict xs = x->data;
    float *restrict ys = y->data;
    for (int64_t s = 0; s < n; s += run) {
        int64_t p = qat_qtype_param_index(q, s);
        float sc = q->scale[p], inv = 1.0f / sc; /* x * (1/scale), as PyTorch */
        /* clamp r = round(x/s) to [qmin - zp, qmax - zp]: then r = q - zp exactly
         * (small integers), and x_hat = r * s is (q - zp) * s bit for bit. NaN
         * passes through (no comparison holds) and is out of range. */
        float lo = (float)(q->qmin - q->zero_point[p]), hi = (float)(q->qmax - q->zero_point[p]);
        if (mask) {
            for (int64_t j = s; j < s + run; j++) {
                float r = qat__rint(xs[j] * inv);
                mask[j] = (r >= lo) & (r <= hi);
                float c = r < lo ? lo : r;
                c = c > hi ? hi : c;
                ys[j] = c * sc;
            }
        } else {
            for (int64_t j = s; j < s + run; j++) {
                float r = qat__rint(xs[j] * inv);
                float c = r < lo ? lo : r;
                c = c > hi ? hi : c;
                ys[j] = c * sc;
            }
        }
    }
    qat_node *node = qat__record(ctx, "qat_fake_quant", fq_bw, y, x, NULL, NULL);
    if (node) node->saved = mask;
    return y;
}
