/* 2-D pooling over k x k windows, no padding, floor output size. */
#include <float.h>

#include "internal.h"

static bool pool_dims(qat_ctx *ctx, const char *op, const qat_tensor *x, int k, int stride,
                      int64_t out_shape[4]) {
    char s[64];
    if (x->rank != 4 || !qat_tensor_is_contiguous(x)) {
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: want contiguous [N, C, H, W], got %s", op,
                     qat_shape_str(x, s, sizeof s));
        return false;
    }
    if (k < 1 || stride < 1 || x->shape[2] < k || x->shape[3] < k) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: window %d, stride %d do not fit input %s", op, k,
                     stride, qat_shape_str(x, s, sizeof s));
        return false;
    }
    out_shape[0] = x->shape[0];
    out_shape[1] = x->shape[1];
    out_shape[2] = (x->shape[2] - k) / stride + 1;
    out_shape[3] = (x->shape[3] - k) / stride + 1;
    return true;
}

/* saved: for each output, the flat input index of its maximum. */
static void maxpool_bw(qat_ctx *ctx, qat_node *n) {
    float *gx = qat__grad(ctx, n->in[0]);
    const int32_t *arg = n->saved;
    const float *gy = n->out->grad;
    if (!gx) return;
    for (int64_t i = 0; i < n->out->numel; i++) gx[arg[i]] += gy[i];
}

qat_tensor *qat_maxpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride) {
    int64_t os[4];
    if (!qat__inputs_ok(ctx, "qat_maxpool2d", 1, &x) ||
        !pool_dims(ctx, "qat_maxpool2d", x, k, stride, os))
        return NULL;
    if (x->numel > INT32_MAX)
        return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "qat_maxpool2d: input too large"), NULL;
    qat_tensor *y = qat__new_out(ctx, 4, os);
    int32_t *arg = qat__step_scratch(ctx, (size_t)y->numel * sizeof(int32_t));
    if (!y || !arg) return NULL;
    int64_t H = x->shape[2], W = x->shape[3], i = 0;
    for (int64_t p = 0; p < os[0] * os[1]; p++) {
        const float *xp = x->data + p * H * W;
        if (k == 2 && stride == 2) { /* LeNet's: branch-free, same order of comparisons */
            for (int64_t oh = 0; oh < os[2]; oh++)
                for (int64_t ow = 0; ow < os[3]; ow++, i++) {
                    int64_t at = 2 * oh * W + 2 * ow;
                    float m = xp[at], v;
                    int64_t best = at;
                    v = xp[at + 1], best = v > m ? at + 1 : best, m = v > m ? v : m;
                    v = xp[at + W], best = v > m ? at + W : best, m = v > m ? v : m;
                    v = xp[at + W + 1], best = v > m ? at + W + 1 : best, m = v > m ? v : m;
                    y->data[i] = m;
                    arg[i] = (int32_t)(p * H * W + best);
                }
            continue;
        }
        for (int64_t oh = 0; oh < os[2]; oh++)
            for (int64_t ow = 0; ow < os[3]; ow++, i++) {
                int64_t best = (oh * stride) * W + ow * stride;
                for (int64_t kh = 0; kh < k; kh++)
                    for (int64_t kw = 0; kw < k; kw++) {
                        int64_t at = (oh * stride + kh) * W + ow * stride + kw;
                        if (xp[at] > xp[best]) best = at; /* first maximum wins, as PyTorch */
                    }
                y->data[i] = xp[best];
                arg[i] = (int32_t)(p * H * W + best);
            }
    }
    qat_node *n = qat__record(ctx, "qat_maxpool2d", maxpool_bw, y, x, NULL, NULL);
    if (n) n->saved = arg;
    return y;
}

static void avgpool_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *y = n->out;
    float *gx = qat__grad(ctx, x);
    if (!gx) return;
    int64_t k = n->i[0], stride = n->i[1], H = x->shape[2], W = x->shape[3];
    int64_t OH = y->shape[2], OW = y->shape[3], i = 0;
    float inv = 1.0f / (float)(k * k);
    for (int64_t p = 0; p < y->shape[0] * y->shape[1]; p++) {
        float *gp = gx + p * H * W;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++, i++) {
                float g = y->grad[i] * inv;
                for (int64_t kh = 0; kh < k; kh++)
                    for (int64_t kw = 0; kw < k; kw++)
                        gp[(oh * stride + kh) * W + ow * stride + kw] += g;
            }
    }
}

qat_tensor *qat_avgpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride) {
    int64_t os[4];
    if (!qat__inputs_ok(ctx, "qat_avgpool2d", 1, &x) ||
        !pool_dims(ctx, "qat_avgpool2d", x, k, stride, os))
        return NULL;
    qat_tensor *y = qat__new_out(ctx, 4, os);
    if (!y) return NULL;
    int64_t H = x->shape[2], W = x->shape[3], i = 0;
    float inv = 1.0f / (float)(k * k);
    for (int64_t p = 0; p < os[0] * os[1]; p++) {
        const float *xp = x->data + p * H * W;
        for (int64_t oh = 0; oh < os[2]; oh++)
            for (int64_t ow = 0; ow < os[3]; ow++, i++) {
                float acc = 0.0f;
                for (int64_t kh = 0; kh < k; kh++)
                    for (int64_t kw = 0; kw < k; kw++)
                        acc += xp[(oh * stride + kh) * W + ow * stride + kw];
                y->data[i] = acc * inv;
            }
    }
    qat_node *n = qat__record(ctx, "qat_avgpool2d", avgpool_bw, y, x, NULL, NULL);
    if (n) {
        n->i[0] = k;
        n->i[1] = stride;
    }
    return y;
}
