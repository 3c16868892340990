/* 2-D pooling over k x k windows, no padding, floor output size. */
#include <float.h>
#include <string.h>

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

/* 2x2 windows at stride 2 (LeNet's): per output, which of the window's
 * four inputs is the maximum (0..3, row-major) as one byte. The first
 * maximum wins, as PyTorch. The rows are short (14 and 5 outputs in
 * LeNet): the compiler's vectorised forms of this loop ran slower than
 * it; the AVX-512 version (ops_pool_avx512.c) does the same comparisons
 * with masked row ends. */
void qat__maxpool2_row(const float *restrict r0, const float *restrict r1, float *restrict y,
                       uint8_t *restrict code, int64_t OW) {
    for (int64_t ow = 0; ow < OW; ow++) {
        float m = r0[2 * ow], v;
        uint8_t k = 0;
        v = r0[2 * ow + 1], k = v > m ? 1 : k, m = v > m ? v : m;
        v = r1[2 * ow], k = v > m ? 2 : k, m = v > m ? v : m;
        v = r1[2 * ow + 1], k = v > m ? 3 : k, m = v > m ? v : m;
        y[ow] = m;
        code[ow] = k;
    }
}

/* Routes each output's gradient to its window's maximum: one add per
 * output (the compiler's vectorised four-way select was slower). */
static void maxpool2_row_bw(float *restrict g0, int64_t W, const float *restrict gy,
                            const uint8_t *restrict code, int64_t OW) {
    for (int64_t ow = 0; ow < OW; ow++) g0[(code[ow] >> 1) * W + 2 * ow + (code[ow] & 1)] += gy[ow];
}

/* The same into a gradient not written yet: every input of the row pair
 * is stored (the windows tile it), so nothing needs zeroing first. Zero
 * both rows, then place each gradient: in cache, cheaper than a select
 * per input. */
void qat__maxpool2_row_bw_store(float *restrict g0, int64_t W, const float *restrict gy,
                                const uint8_t *restrict code, int64_t OW) {
    memset(g0, 0, (size_t)(2 * W) * sizeof(float));
    maxpool2_row_bw(g0, W, gy, code, OW);
}

/* saved: the window codes (2x2 at stride 2, n->i[0] == 1), else for each
 * output the flat input index of its maximum. */
static void maxpool_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *y = n->out;
    int64_t H = x->shape[2], W = x->shape[3], OH = y->shape[2], OW = y->shape[3];
    const float *gy = y->grad;
    if (n->i[0]) {
        /* a new gradient is stored row pair by row pair when the windows
         * tile x; otherwise each output adds into its window's maximum */
        bool store = false;
        float *gx = H % 2 == 0 && W % 2 == 0 ? qat__grad_dst(ctx, x, &store) : qat__grad(ctx, x);
        if (!gx) return;
        const uint8_t *code = n->saved;
        void (*put)(float *, int64_t, const float *, const uint8_t *, int64_t) =
            store ? qat__maxpool2_row_bw_store : maxpool2_row_bw;
#if QAT__POOL_AVX512
        if (store && qat__have_avx512bw()) put = qat__maxpool2_row_bw_store_avx512;
#endif
        for (int64_t p = 0; p < y->shape[0] * y->shape[1]; p++)
            for (int64_t oh = 0; oh < OH; oh++) {
                int64_t o = (p * OH + oh) * OW;
                put(gx + (p * H + 2 * oh) * W, W, gy + o, code + o, OW);
            }
        return;
    }
    float *gx = qat__grad(ctx, x);
    if (!gx) return;
    const int32_t *arg = n->saved;
    for (int64_t i = 0; i < y->numel; i++) gx[arg[i]] += gy[i];
}

qat_tensor *qat_maxpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride) {
    int64_t os[4];
    if (!qat__inputs_ok(ctx, "qat_maxpool2d", 1, &x) ||
        !pool_dims(ctx, "qat_maxpool2d", x, k, stride, os))
        return NULL;
    if (x->numel > INT32_MAX)
        return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "qat_maxpool2d: input too large"), NULL;
    bool two = k == 2 && stride == 2;
    qat_tensor *y = qat__new_out(ctx, 4, os);
    void *saved = y ? qat__step_scratch(ctx, (size_t)y->numel * (two ? 1 : sizeof(int32_t))) : NULL;
    if (!y || !saved) return NULL;
    int64_t H = x->shape[2], W = x->shape[3], i = 0;
    void (*row)(const float *, const float *, float *, uint8_t *, int64_t) = qat__maxpool2_row;
#if QAT__POOL_AVX512
    if (qat__have_avx512f()) row = qat__maxpool2_row_avx512;
#endif
    for (int64_t p = 0; p < os[0] * os[1]; p++) {
        const float *xp = x->data + p * H * W;
        if (two) {
            for (int64_t oh = 0; oh < os[2]; oh++, i += os[3])
                row(xp + 2 * oh * W, xp + (2 * oh + 1) * W, y->data + i, (uint8_t *)saved + i, os[3]);
            continue;
        }
        int32_t *arg = saved;
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
    if (n) {
        n->saved = saved;
        n->i[0] = two;
    }
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
