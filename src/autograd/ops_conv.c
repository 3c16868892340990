/* conv2d as im2col + cblas_sgemm.
 *
 * Layout (caffe's): colT [C*KH*KW, N*OH*OW], so im2col writes contiguous
 * rows. Sample n's columns are a [CKK, OH*OW] block at colT + n*OH*OW with
 * leading dimension N*OH*OW, and its NCHW output is the contiguous
 * [O, OH*OW] block  y_n = w · colT_n : one sgemm per sample writes the
 * output in place, and backward reads dy in place the same way, so no
 * transposition buffer is ever needed. */
#include <cblas.h>
#include <string.h>

#include "internal.h"

typedef struct {
    int64_t N, C, H, W, O, KH, KW, OH, OW, stride, pad;
} conv_dims;

/* r[0..lo) = 0, r[lo..hi) = src[lo..hi), r[hi..n) = 0: one output row of
 * a stride-1 im2col row. Inline (the runs are 10 to 28 floats: a libc
 * memcpy call per run cost more than the copy). */
static inline void shifted_run(float *restrict r, const float *restrict src, int64_t lo, int64_t hi, int64_t n) {
    for (int64_t i = 0; i < lo; i++) r[i] = 0.0f;
    for (int64_t i = lo; i < hi; i++) r[i] = src[i];
    for (int64_t i = hi; i < n; i++) r[i] = 0.0f;
}

static void im2col(const conv_dims *d, const float *x, float *colT) {
    int64_t P = d->N * d->OH * d->OW;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                float *row = colT + ((c * d->KH + kh) * d->KW + kw) * P;
                for (int64_t n = 0; n < d->N; n++) {
                    const float *xc = x + (n * d->C + c) * d->H * d->W;
                    for (int64_t oh = 0; oh < d->OH; oh++) {
                        int64_t ih = oh * d->stride - d->pad + kh;
                        float *r = row + (n * d->OH + oh) * d->OW;
                        if (ih < 0 || ih >= d->H) {
                            memset(r, 0, (size_t)d->OW * sizeof(float));
                            continue;
                        }
                        if (d->stride == 1) { /* a shifted copy of one input row */
                            int64_t lo = d->pad - kw, hi = d->W + d->pad - kw; /* valid ow */
                            if (lo < 0) lo = 0;
                            if (hi > d->OW) hi = d->OW;
                            if (hi < lo) hi = lo;
                            shifted_run(r, xc + ih * d->W - d->pad + kw, lo, hi, d->OW);
                            continue;
                        }
                        for (int64_t ow = 0; ow < d->OW; ow++) {
                            int64_t iw = ow * d->stride - d->pad + kw;
                            r[ow] = (iw >= 0 && iw < d->W) ? xc[ih * d->W + iw] : 0.0f;
                        }
                    }
                }
            }
}

/* The adjoint of im2col: scatter-add colT back into dx. */
static void col2im_add(const conv_dims *d, const float *colT, float *gx) {
    int64_t P = d->N * d->OH * d->OW;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                const float *row = colT + ((c * d->KH + kh) * d->KW + kw) * P;
                for (int64_t n = 0; n < d->N; n++) {
                    float *gc = gx + (n * d->C + c) * d->H * d->W;
                    for (int64_t oh = 0; oh < d->OH; oh++) {
                        int64_t ih = oh * d->stride - d->pad + kh;
                        if (ih < 0 || ih >= d->H) continue;
                        const float *r = row + (n * d->OH + oh) * d->OW;
                        if (d->stride == 1) { /* add a shifted run into one input row */
                            int64_t lo = d->pad - kw, hi = d->W + d->pad - kw;
                            if (lo < 0) lo = 0;
                            if (hi > d->OW) hi = d->OW;
                            float *restrict g = gc + ih * d->W - d->pad + kw;
                            for (int64_t ow = lo; ow < hi; ow++) g[ow] += r[ow];
                            continue;
                        }
                        for (int64_t ow = 0; ow < d->OW; ow++) {
                            int64_t iw = ow * d->stride - d->pad + kw;
                            if (iw >= 0 && iw < d->W) gc[ih * d->W + iw] += r[ow];
                        }
                    }
                }
            }
}

typedef struct {
    conv_dims d;
    float *colT;
} conv_saved;

static void conv_bw(qat_ctx *ctx, qat_node *node) {
    const conv_saved *s = node->saved;
    const conv_dims *d = &s->d;
    qat_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int64_t OHW = d->OH * d->OW, P = d->N * OHW, CKK = d->C * d->KH * d->KW;
    const float *gy = node->out->grad; /* [N, O, OHW] */
    if (qat__wants_grad(w)) { /* dw [O, CKK] += Σ_n dy_n · colT_nᵀ */
        float *gw = qat__grad(ctx, w);
        if (!gw) return;
        for (int64_t n = 0; n < d->N; n++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d->O, (int)CKK, (int)OHW, 1.0f,
                        gy + n * d->O * OHW, (int)OHW, s->colT + n * OHW, (int)P, 1.0f, gw, (int)CKK);
    }
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (!gb) return;
        for (int64_t o = 0; o < d->O; o++) {
            double acc = 0.0;
            for (int64_t n = 0; n < d->N; n++) { /* 8 float lanes within a row, double across */
                const float *g = gy + (n * d->O + o) * OHW;
                float lane[8] = {0};
                int64_t i = 0;
                for (; i + 8 <= OHW; i += 8)
                    for (int j = 0; j < 8; j++) lane[j] += g[i + j];
                for (; i < OHW; i++) lane[0] += g[i];
                for (int j = 0; j < 8; j++) acc += lane[j];
            }
            gb[o] += (float)acc;
        }
    }
    if (qat__wants_grad(x)) { /* dcolT_n [CKK, OHW] = wᵀ · dy_n, then col2im */
        float *gx = qat__grad(ctx, x);
        float *dcol = qat__step_scratch(ctx, (size_t)(CKK * P) * sizeof(float));
        if (!gx || !dcol) return;
        for (int64_t n = 0; n < d->N; n++)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)CKK, (int)OHW, (int)d->O, 1.0f,
                        w->data, (int)CKK, gy + n * d->O * OHW, (int)OHW, 0.0f, dcol + n * OHW, (int)P);
        col2im_add(d, dcol, gx);
    }
}

qat_tensor *qat_conv2d(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b, int stride,
                       int padding) {
    qat_tensor *ins[2] = {x, w};
    if (!qat__inputs_ok(ctx, "qat_conv2d", 2, ins)) return NULL;
    char s1[64], s2[64];
    if (x->rank != 4 || w->rank != 4 || !qat_tensor_is_contiguous(x) ||
        !qat_tensor_is_contiguous(w) || x->shape[1] != w->shape[1])
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_conv2d: input %s and weight %s: want "
                            "contiguous [N, C, H, W] and [O, C, KH, KW]",
                            qat_shape_str(x, s1, sizeof s1), qat_shape_str(w, s2, sizeof s2)), NULL;
    if (stride < 1 || padding < 0)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_conv2d: stride %d, padding %d", stride,
                            padding), NULL;
    conv_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                   .O = w->shape[0], .KH = w->shape[2], .KW = w->shape[3], .stride = stride,
                   .pad = padding};
    if (d.H + 2 * d.pad < d.KH || d.W + 2 * d.pad < d.KW)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_conv2d: kernel %s larger than padded input %s",
                            qat_shape_str(w, s2, sizeof s2), qat_shape_str(x, s1, sizeof s1)), NULL;
    if (b && (b->numel != d.O || !qat_tensor_is_contiguous(b)))
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_conv2d: bias has %lld elements, want %lld",
                            (long long)b->numel, (long long)d.O), NULL;
    d.OH = (d.H + 2 * d.pad - d.KH) / d.stride + 1;
    d.OW = (d.W + 2 * d.pad - d.KW) / d.stride + 1;
    int64_t OHW = d.OH * d.OW, P = d.N * OHW, CKK = d.C * d.KH * d.KW;
    int64_t shape[4] = {d.N, d.O, d.OH, d.OW};
    qat_tensor *y = qat__new_out(ctx, 4, shape);
    conv_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *colT = qat__step_scratch(ctx, (size_t)(CKK * P) * sizeof(float));
    if (!y || !s || !colT) return NULL;
    im2col(&d, x->data, colT);
    for (int64_t n = 0; n < d.N; n++) {
        float *yn = y->data + n * d.O * OHW;
        if (b) /* start from the bias, accumulate the product onto it */
            for (int64_t o = 0; o < d.O; o++)
                for (int64_t i = 0; i < OHW; i++) yn[o * OHW + i] = b->data[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.O, (int)OHW, (int)CKK, 1.0f,
                    w->data, (int)CKK, colT + n * OHW, (int)P, b ? 1.0f : 0.0f, yn, (int)OHW);
    }
    s->d = d;
    s->colT = colT;
    qat_node *node = qat__record(ctx, "qat_conv2d", conv_bw, y, x, w, b);
    if (node) node->saved = s;
    return y;
}
