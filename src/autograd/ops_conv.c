/* conv2d as im2col + one cblas_sgemm over the whole batch.
 *
 * Layout (caffe's): colT [C*KH*KW, N*OH*OW], so im2col writes contiguous
 * rows, and  out_r [O, N*OH*OW] = w [O, C*KH*KW] · colT.  out_r and the
 * NCHW output differ only in the order of the O and N blocks of OH*OW
 * floats, so the reorder is a memcpy per block. */
#include <cblas.h>
#include <string.h>

#include "internal.h"

typedef struct {
    int64_t N, C, H, W, O, KH, KW, OH, OW, stride, pad;
} conv_dims;

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
    const float *gy = node->out->grad;
    /* gy [N, O, OHW] -> gr [O, N*OHW] */
    float *gr = qat__step_alloc(ctx, (size_t)(d->O * P) * sizeof(float));
    if (!gr) return;
    for (int64_t n = 0; n < d->N; n++)
        for (int64_t o = 0; o < d->O; o++)
            memcpy(gr + o * P + n * OHW, gy + (n * d->O + o) * OHW, (size_t)OHW * sizeof(float));
    if (qat__wants_grad(w)) { /* dw [O, CKK] += gr · colTᵀ */
        float *gw = qat__grad(ctx, w);
        if (!gw) return;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d->O, (int)CKK, (int)P, 1.0f, gr,
                    (int)P, s->colT, (int)P, 1.0f, gw, (int)CKK);
    }
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (!gb) return;
        for (int64_t o = 0; o < d->O; o++) {
            double acc = 0.0;
            for (int64_t p = 0; p < P; p++) acc += gr[o * P + p];
            gb[o] += (float)acc;
        }
    }
    if (qat__wants_grad(x)) { /* dcolT [CKK, P] = wᵀ · gr, then col2im */
        float *gx = qat__grad(ctx, x);
        float *dcol = qat__step_alloc(ctx, (size_t)(CKK * P) * sizeof(float));
        if (!gx || !dcol) return;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)CKK, (int)P, (int)d->O, 1.0f,
                    w->data, (int)CKK, gr, (int)P, 0.0f, dcol, (int)P);
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
    float *colT = qat__step_alloc(ctx, (size_t)(CKK * P) * sizeof(float));
    float *yr = qat__step_alloc(ctx, (size_t)(d.O * P) * sizeof(float));
    if (!y || !s || !colT || !yr) return NULL;
    im2col(&d, x->data, colT);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.O, (int)P, (int)CKK, 1.0f,
                w->data, (int)CKK, colT, (int)P, 0.0f, yr, (int)P);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t o = 0; o < d.O; o++) {
            float *dst = y->data + (n * d.O + o) * OHW;
            const float *src = yr + o * P + n * OHW;
            float bias = b ? b->data[o] : 0.0f;
            for (int64_t i = 0; i < OHW; i++) dst[i] = src[i] + bias;
        }
    s->d = d;
    s->colT = colT;
    qat_node *node = qat__record(ctx, "qat_conv2d", conv_bw, y, x, w, b);
    if (node) node->saved = s;
    return y;
}
