/* conv2d as im2col + cblas_sgemm, one sample at a time.
 *
 * Sample n's columns col_n [C*KH*KW, OH*OW] (caffe's layout: im2col
 * writes contiguous rows) are built just before its sgemm, while they are
 * in cache, and its NCHW output is the contiguous [O, OH*OW] block
 * y_n = w · col_n, written in place. Backward reads the same columns for
 * dw (rebuilding them cost more than keeping them) and reads dy in place,
 * so no transposition buffer is ever needed. */
#include <cblas.h>
#include <string.h>

#include "internal.h"

typedef qat__conv_dims conv_dims;

/* The valid output columns [lo, hi) of kernel column kw at stride 1. */
static inline void valid_cols(const conv_dims *d, int64_t kw, int64_t *lo, int64_t *hi) {
    *lo = d->pad - kw > 0 ? d->pad - kw : 0;
    *hi = d->W + d->pad - kw < d->OW ? d->W + d->pad - kw : d->OW;
    if (*hi < *lo) *hi = *lo;
}

/* dst[0..n) = src[0..n) in 8-float blocks the compiler turns into vector
 * moves: the runs are 10 to 28 floats, too short for a libc call. */
static inline void copy_run(float *restrict dst, const float *restrict src, int64_t n) {
    if (n < 8) {
        for (int64_t i = 0; i < n; i++) dst[i] = src[i];
        return;
    }
    /* whole blocks, then one last block ending at n (it may overlap) */
    for (int64_t i = 0; i + 8 < n; i += 8) memcpy(dst + i, src + i, 8 * sizeof(float));
    memcpy(dst + n - 8, src + n - 8, 8 * sizeof(float));
}

/* One im2col row at stride 1 when the output is as wide as the input
 * ("same" padding, OW == W): the valid rows are one contiguous shifted
 * copy of the channel; then the columns that wrapped around from the
 * neighbouring row are zeroed. */
static void im2col_row_same(const conv_dims *d, const float *xc, int64_t kh, int64_t kw, float *row) {
    int64_t W = d->W, OW = d->OW, lo, hi;
    valid_cols(d, kw, &lo, &hi);
    int64_t oh0 = d->pad - kh > 0 ? d->pad - kh : 0;                   /* first valid output row */
    int64_t oh1 = d->H + d->pad - kh < d->OH ? d->H + d->pad - kh : d->OH; /* one past the last */
    if (oh0 > d->OH) oh0 = d->OH; /* inputs shorter than the kernel's reach */
    if (oh1 < oh0) oh1 = oh0;
    memset(row, 0, (size_t)(oh0 * OW) * sizeof(float));
    memset(row + oh1 * OW, 0, (size_t)((d->OH - oh1) * OW) * sizeof(float));
    if (oh1 == oh0) return;
    /* skip the first row's leading and the last row's trailing invalid
     * columns: they would read outside the channel */
    int64_t first = oh0 * OW + lo, last = (oh1 - 1) * OW + hi;
    memcpy(row + first, xc + (oh0 + kh - d->pad) * W + kw - d->pad + lo, (size_t)(last - first) * sizeof(float));
    for (int64_t oh = oh0; oh < oh1; oh++) {
        for (int64_t ow = 0; ow < lo; ow++) row[oh * OW + ow] = 0.0f;
        for (int64_t ow = hi; ow < OW; ow++) row[oh * OW + ow] = 0.0f;
    }
}

/* col [CKK, OHW] of one sample xn [C, H, W]. */
void qat__im2col(const conv_dims *d, const float *restrict xn, float *restrict col) {
    int64_t OHW = d->OH * d->OW;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                float *row = col + ((c * d->KH + kh) * d->KW + kw) * OHW;
                const float *xc = xn + c * d->H * d->W;
                if (d->stride == 1 && d->OW == d->W) {
                    im2col_row_same(d, xc, kh, kw, row);
                    continue;
                }
                int64_t lo, hi;
                valid_cols(d, kw, &lo, &hi);
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t ih = oh * d->stride - d->pad + kh;
                    float *restrict r = row + oh * d->OW;
                    if (ih < 0 || ih >= d->H) {
                        memset(r, 0, (size_t)d->OW * sizeof(float));
                    } else if (d->stride == 1) { /* a shifted copy of one input row */
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0.0f;
                        copy_run(r + lo, xc + ih * d->W - d->pad + kw + lo, hi - lo);
                        for (int64_t ow = hi; ow < d->OW; ow++) r[ow] = 0.0f;
                    } else {
                        for (int64_t ow = 0; ow < d->OW; ow++) {
                            int64_t iw = ow * d->stride - d->pad + kw;
                            r[ow] = (iw >= 0 && iw < d->W) ? xc[ih * d->W + iw] : 0.0f;
                        }
                    }
                }
            }
}

/* The adjoint of im2col: scatter-add one sample's col into gxn [C, H, W]. */
void qat__col2im_add(const conv_dims *d, const float *restrict col, float *restrict gxn) {
    int64_t OHW = d->OH * d->OW;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                const float *row = col + ((c * d->KH + kh) * d->KW + kw) * OHW;
                float *gc = gxn + c * d->H * d->W;
                int64_t lo, hi;
                valid_cols(d, kw, &lo, &hi);
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t ih = oh * d->stride - d->pad + kh;
                    if (ih < 0 || ih >= d->H) continue;
                    const float *restrict r = row + oh * d->OW;
                    if (d->stride == 1) { /* add a shifted run into one input row */
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

/* db[o] += Σ over samples and pixels of dy: 8 float lanes within a row,
 * double across rows. */
static void bias_grad(const conv_dims *d, const float *gy, float *gb) {
    int64_t OHW = d->OH * d->OW;
    for (int64_t o = 0; o < d->O; o++) {
        double acc = 0.0;
        for (int64_t n = 0; n < d->N; n++) {
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

typedef struct {
    conv_dims d;
    float *cols; /* [N, CKK, OHW]: every sample's columns, for dw */
} conv_saved;

static void conv_bw(qat_ctx *ctx, qat_node *node) {
    const conv_saved *sv = node->saved;
    const conv_dims *d = &sv->d;
    qat_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int64_t OHW = d->OH * d->OW, CKK = d->C * d->KH * d->KW, CHW = d->C * d->H * d->W;
    const float *gy = node->out->grad; /* [N, O, OHW] */
    float *gw = qat__wants_grad(w) ? qat__grad(ctx, w) : NULL;
    bool store = false, wide = false; /* store: gx is new, not zeroed */
    float *gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &store) : NULL;
    float *dcol = gx ? qat__step_scratch(ctx, (size_t)(CKK * OHW) * sizeof(float)) : NULL;
    if ((gx && !dcol) || (qat__wants_grad(w) && !gw) || (qat__wants_grad(x) && !gx)) return;
#if QAT__CONV_AVX512
    wide = qat__conv_avx512_fits(d); /* it can write a new gradient row by row */
#endif
    if (store && !wide) memset(gx, 0, (size_t)(d->N * CHW) * sizeof(float));
    for (int64_t n = 0; n < d->N; n++) {
        const float *gyn = gy + n * d->O * OHW;
        if (gw) { /* dw [O, CKK] += dy_n · col_nᵀ */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d->O, (int)CKK, (int)OHW, 1.0f, gyn,
                        (int)OHW, sv->cols + n * CKK * OHW, (int)OHW, 1.0f, gw, (int)CKK);
        }
        if (gx) { /* dcol_n [CKK, OHW] = wᵀ · dy_n, then col2im */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)CKK, (int)OHW, (int)d->O, 1.0f, w->data,
                        (int)CKK, gyn, (int)OHW, 0.0f, dcol, (int)OHW);
#if QAT__CONV_AVX512
            if (wide) {
                qat__col2im_add_avx512(d, dcol, gx + n * CHW, store);
                continue;
            }
#endif
            qat__col2im_add(d, dcol, gx + n * CHW);
        }
    }
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (gb) bias_grad(d, gy, gb);
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
    int64_t OHW = d.OH * d.OW, CKK = d.C * d.KH * d.KW, CHW = d.C * d.H * d.W;
    int64_t shape[4] = {d.N, d.O, d.OH, d.OW};
    qat_tensor *y = qat__new_out(ctx, 4, shape);
    conv_saved *s = qat__step_alloc(ctx, sizeof *s);
    float *cols = qat__step_scratch(ctx, (size_t)(d.N * CKK * OHW) * sizeof(float));
    if (!y || !s || !cols) return NULL;
    void (*im2col)(const conv_dims *, const float *, float *) = qat__im2col;
#if QAT__CONV_AVX512
    if (qat__conv_avx512_fits(&d)) im2col = qat__im2col_avx512;
#endif
    for (int64_t n = 0; n < d.N; n++) {
        float *yn = y->data + n * d.O * OHW;
        if (b) /* start from the bias, accumulate the product onto it */
            for (int64_t o = 0; o < d.O; o++)
                for (int64_t i = 0; i < OHW; i++) yn[o * OHW + i] = b->data[o];
        float *col = cols + n * CKK * OHW;
        im2col(&d, x->data + n * CHW, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.O, (int)OHW, (int)CKK, 1.0f, w->data,
                    (int)CKK, col, (int)OHW, b ? 1.0f : 0.0f, yn, (int)OHW);
    }
    s->d = d;
    s->cols = cols;
    qat_node *node = qat__record(ctx, "qat_conv2d", conv_bw, y, x, w, b);
    if (node) node->saved = s;
    return y;
}
