/* conv2d as im2col + cblas_sgemm, one sample (and one group) at a time.
 *
 * Two forms of columns. The full one (caffe's): col_n [C*KH*KW, OH*OW],
 * y_n = w · col_n, one sgemm. The kernel-row form, for stride 1 down: the
 * columns of a 1 x KW kernel over the same padded input, [C*KW, Hp*OW]
 * (Hp = H + 2·ph rows), and KH sgemm calls, call kh reading them kh·OW
 * columns on (output row oh meets padded row oh + kh) against kernel row
 * kh's weights, wk [KH][O][C*KW], permuted once a forward. The columns
 * are about KH times smaller: a third of the copying for 3x3 kernels, and
 * of the memory OpenBLAS packs from (measured: QAT__ROWS_MIN_K).
 *
 * Sample n's columns col_n [C*KH*KW, OH*OW] (caffe's layout: im2col
 * writes contiguous rows) are built just before its sgemm, while they are
 * in cache, and its NCHW output is the contiguous [O, OH*OW] block
 * y_n = w · col_n, written in place. Backward reads the same columns for
 * dw (rebuilding them cost more than keeping them) and reads dy in place,
 * so no transposition buffer is ever needed. A grouped convolution does
 * the same per group: group g's channels are a contiguous block of x, of
 * w and of y, so its columns and its sgemm are the dense case's on that
 * block. Depthwise convolutions (one input channel per group) go to the
 * direct kernels of ops_conv_depthwise.c. */
#include <cblas.h>
#include <string.h>

#include "internal.h"

typedef qat__conv_dims conv_dims;

/* The valid output columns [lo, hi) of kernel column kw at stride 1. */
static inline void valid_cols(const conv_dims *d, int64_t kw, int64_t *lo, int64_t *hi) {
    *lo = d->pw - kw > 0 ? d->pw - kw : 0;
    *hi = d->W + d->pw - kw < d->OW ? d->W + d->pw - kw : d->OW;
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
    if (hi <= lo) { /* this kernel column reaches no input (W <= padding): all zeros */
        memset(row, 0, (size_t)(d->OH * OW) * sizeof(float));
        return;
    }
    int64_t oh0 = d->ph - kh > 0 ? d->ph - kh : 0;                   /* first valid output row */
    int64_t oh1 = d->H + d->ph - kh < d->OH ? d->H + d->ph - kh : d->OH; /* one past the last */
    if (oh0 > d->OH) oh0 = d->OH; /* inputs shorter than the kernel's reach */
    if (oh1 < oh0) oh1 = oh0;
    memset(row, 0, (size_t)(oh0 * OW) * sizeof(float));
    memset(row + oh1 * OW, 0, (size_t)((d->OH - oh1) * OW) * sizeof(float));
    if (oh1 == oh0) return;
    /* skip the first row's leading and the last row's trailing invalid
     * columns: they would read outside the channel */
    int64_t first = oh0 * OW + lo, last = (oh1 - 1) * OW + hi;
    memcpy(row + first, xc + (oh0 + kh - d->ph) * W + kw - d->pw + lo, (size_t)(last - first) * sizeof(float));
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
                if (d->sh == 1 && d->sw == 1 && d->OW == d->W) {
                    im2col_row_same(d, xc, kh, kw, row);
                    continue;
                }
                int64_t lo, hi;
                valid_cols(d, kw, &lo, &hi);
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t ih = oh * d->sh - d->ph + kh;
                    float *restrict r = row + oh * d->OW;
                    if (ih < 0 || ih >= d->H) {
                        memset(r, 0, (size_t)d->OW * sizeof(float));
                    } else if (d->sw == 1) { /* a shifted copy of one input row */
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0.0f;
                        copy_run(r + lo, xc + ih * d->W - d->pw + kw + lo, hi - lo);
                        for (int64_t ow = hi; ow < d->OW; ow++) r[ow] = 0.0f;
                    } else {
                        for (int64_t ow = 0; ow < d->OW; ow++) {
                            int64_t iw = ow * d->sw - d->pw + kw;
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
                    int64_t ih = oh * d->sh - d->ph + kh;
                    if (ih < 0 || ih >= d->H) continue;
                    const float *restrict r = row + oh * d->OW;
                    if (d->sw == 1) { /* add a shifted run into one input row */
                        float *restrict g = gc + ih * d->W - d->pw + kw;
                        for (int64_t ow = lo; ow < hi; ow++) g[ow] += r[ow];
                        continue;
                    }
                    for (int64_t ow = 0; ow < d->OW; ow++) {
                        int64_t iw = ow * d->sw - d->pw + kw;
                        if (iw >= 0 && iw < d->W) gc[ih * d->W + iw] += r[ow];
                    }
                }
            }
}

/* db[o] += Σ over samples and pixels of dy: 8 float lanes within a plane,
 * double across planes. Channels [o0, o1) of O. */
static void bias_grad_range(int64_t N, int64_t O, int64_t OHW, const float *gy, float *gb, int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o++) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const float *g = gy + (n * O + o) * OHW;
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
    int64_t N, O, OHW;
    const float *gy;
    float *gb;
} bias_job;

static void bias_task(void *u, int64_t t, int worker) {
    const bias_job *j = u;
    (void)worker;
    bias_grad_range(j->N, j->O, j->OHW, j->gy, j->gb, t, t + 1);
}

/* Each channel is one task, summed in the same order on any thread: the
 * bits of the one-thread loop. */
void qat__conv_bias_grad(qat_ctx *ctx, int64_t N, int64_t O, int64_t OHW, const float *gy, float *gb) {
    bias_job j = {N, O, OHW, gy, gb};
    if (N * O * OHW < QAT__GRAIN) bias_grad_range(N, O, OHW, gy, gb, 0, O);
    else qat__par(ctx, O, bias_task, &j);
}

/* How a convolution's products run: nk sgemm calls over the columns of
 * cd (the dims im2col and col2im take), call kh reading them kh·OW
 * columns on, against the weights wk [G][nk][O][K]; a column row is L
 * long. The full form: cd = d, nk 1, K = C·KH·KW, L = OH·OW, wk = w. */
typedef struct {
    conv_dims cd;
    int64_t nk, K, L;
} conv_form;

/* The kernel-row form from this reduction per call on (C·KW): below it,
 * OpenBLAS's many thin calls cost more than the copies save (a 1-channel
 * 3x3 stem: 1.1 µs a sample as one sgemm of K 9, 2.3 µs as three of K 3,
 * while 16 channels at 28x28 went 23 -> 18 µs forward and 34 -> 25 µs for
 * the weight gradient, OpenBLAS's SkylakeX kernels, AMD Zen 5). */
#define QAT__ROWS_MIN_K 16

static conv_form conv_form_of(const conv_dims *d) {
    conv_form f = {.cd = *d, .nk = 1, .K = d->C * d->KH * d->KW, .L = d->OH * d->OW};
    if (d->sh == 1 && d->KH > 1 && d->C * d->KW >= QAT__ROWS_MIN_K) {
        f.cd.KH = 1, f.cd.OH = d->H + 2 * d->ph; /* a 1 x KW kernel: one output row per padded row */
        f.nk = d->KH, f.K = d->C * d->KW, f.L = f.cd.OH * d->OW;
    }
    return f;
}

typedef struct {
    conv_dims d;
    conv_form f;
    const float *wk; /* the weights in the form's order (w itself in the full form) */
    /* [N, G, K, L]: every sample's and group's columns, for dw; NULL
     * for a pointwise conv (its input is its columns) and when they would
     * take more than QAT__KEEP_COLS bytes: then backward builds them again */
    float *cols;
} conv_saved;

/* Keeping the columns from forward to backward saves an im2col per
 * sample, but they are KW (row form) or KH·KW times the input: ResNet-8's
 * 16-channel 3x3 convs at 28x28 would keep 10 MiB each at batch 64 (29 in
 * the full form). Up to this size they are kept; beyond, rebuilt (same
 * bits: a copy). Keeping up to 12 MiB was measured: no faster (1 787-1 832
 * against 1 848 samples/s), 25 MiB more at ResNet-8's peak. */
#define QAT__KEEP_COLS ((size_t)6 << 20)

/* The im2col and col2im rows for a shape: the AVX-512 ones when they
 * apply (stride 1, or 2 across; rows of up to 128): 2-3x the portable
 * rows on every layer of the reference models (bench: 5.5 vs 11.7 µs for
 * a 16-channel 28x28 3x3 sample, 1.2 vs 3.7 for LeNet's second layer);
 * below that level the AVX2 ones, on the same shapes; else the portable
 * loops. col2im NULL: the portable loop, which only adds (a new gradient
 * is zeroed first), where the rows can also write a new gradient row by
 * row. */
typedef void (*col2im_rows)(const conv_dims *, const float *, float *, bool overwrite);
typedef struct {
    void (*im2col)(const conv_dims *, const float *, float *);
    col2im_rows col2im;
} conv_rows;

static conv_rows conv_rows_for(const conv_dims *d) {
#if QAT__CONV_AVX512
    if (qat__conv_avx512_fits(d)) return (conv_rows){qat__im2col_avx512, qat__col2im_add_avx512};
#endif
#if QAT__CONV_AVX2
    if (qat__conv_avx2_fits(d)) return (conv_rows){qat__im2col_avx2, qat__col2im_add_avx2};
#endif
    (void)d;
    return (conv_rows){qat__im2col, NULL};
}

/* A 1x1 convolution with stride 1 and no padding: each sample's input is
 * already its column matrix [C, H·W], so there is no im2col to build or
 * keep, and the input gradient is the column gradient itself. */
static bool pointwise(const conv_dims *d) {
    return d->KH == 1 && d->KW == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
}

/* One sample's and group's share of the backward: gyg [O, OHW] is its
 * output gradient, colg its columns, wg [nk][O][K] its weights in the
 * form's order; gwg (the same order) and gxg (NULL when not wanted) its
 * weight and input gradients. */
static void conv_bw_group(const conv_dims *d, const conv_form *f, const float *gyg, const float *colg,
                          const float *wg, float *gwg, float *gxg, float *dcol, col2im_rows rows, bool store) {
    int64_t OHW = d->OH * d->OW, K = f->K, L = f->L;
    for (int64_t kh = 0; gwg && kh < f->nk; kh++) /* dw [O, K] += dy · colᵀ, per kernel row */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d->O, (int)K, (int)OHW, 1.0f, gyg, (int)OHW,
                    colg + kh * d->OW, (int)L, 1.0f, gwg + kh * d->O * K, (int)K);
    if (!gxg) return;
    /* dcol [K, L] = Σ_kh wᵀ · dy, call kh adding onto the columns from
     * kh·OW, then col2im; a pointwise conv's col2im is the identity: a
     * new gradient is written in place */
    bool direct = pointwise(d) && store;
    float *dst = direct ? gxg : dcol;
    /* zeroed here and every call given beta 1: OpenBLAS's beta-0 pass
     * (sgemm_beta) took 3.3 % of a ResNet-8 step on a Zen core, the
     * memset 1.8 %, with the same bits (0 + p = p) */
    memset(dst, 0, (size_t)(K * L) * sizeof(float));
    for (int64_t kh = 0; kh < f->nk; kh++)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)OHW, (int)d->O, 1.0f, wg + kh * d->O * K,
                    (int)K, gyg, (int)OHW, 1.0f, dst + kh * d->OW, (int)L);
    if (direct) return;
    if (pointwise(d)) {
        for (int64_t i = 0; i < K * OHW; i++) gxg[i] += dcol[i];
        return;
    }
    if (rows) rows(&f->cd, dcol, gxg, store);
    else qat__col2im_add(&f->cd, dcol, gxg);
}

/* The weight gradient is a sum over samples. It is summed in fixed
 * chunks of this many samples, each into its own partial (the chunk's
 * first sample stores, the others add, sample by sample as before), and
 * the partials are then added into dw in chunk order: the chunks are the
 * tasks, so the bits are the same for any number of threads. */
#define DW_CHUNK 8

typedef struct {
    const conv_dims *d;
    const conv_saved *sv;
    const float *x, *gy;
    float *partial;   /* [chunks][G·O·C·KH·KW] in the form's order, or NULL (no dw wanted) */
    float *gx;        /* or NULL */
    float *dcol, *col; /* [workers][K·L] each, or NULL */
    void (*im2col)(const conv_dims *, const float *, float *);
    col2im_rows col2im;
    bool store, rebuild, zero_gx;
} conv_bw_job;

static void conv_bw_task(void *u, int64_t chunk, int worker) {
    const conv_bw_job *j = u;
    const conv_dims *d = j->d;
    const conv_form *f = &j->sv->f;
    int64_t G = d->G, OHW = d->OH * d->OW, KL = f->K * f->L, CHW = d->C * d->H * d->W, OKK = d->O * d->C * d->KH * d->KW;
    int64_t n0 = chunk * DW_CHUNK, n1 = n0 + DW_CHUNK < d->N ? n0 + DW_CHUNK : d->N;
    float *dcol = j->dcol ? j->dcol + worker * KL : NULL, *col = j->col ? j->col + worker * KL : NULL;
    float *part = j->partial ? j->partial + chunk * G * OKK : NULL;
    if (j->zero_gx) memset(j->gx + n0 * G * CHW, 0, (size_t)((n1 - n0) * G * CHW) * sizeof(float));
    for (int64_t n = n0; n < n1; n++)
        for (int64_t g = 0; g < G; g++) {
            int64_t ng = n * G + g;
            const float *colg = j->sv->cols ? j->sv->cols + ng * KL : j->x + ng * CHW;
            if (j->rebuild) j->im2col(&f->cd, j->x + ng * CHW, col), colg = col;
            float *gwg = part ? part + g * OKK : NULL;
            if (gwg && n == n0) memset(gwg, 0, (size_t)OKK * sizeof(float));
            conv_bw_group(d, f, j->gy + ng * d->O * OHW, colg, j->sv->wk + g * OKK, gwg,
                          j->gx ? j->gx + ng * CHW : NULL, dcol, j->col2im, j->store);
        }
}

typedef struct {
    float *gw;
    float *partial; /* the row form sums into the first */
    int64_t n, chunks;
    const conv_dims *rows; /* the partials are in the row form's order: its dims; else NULL */
} dw_sum_job;

/* The row form's partials: summed in chunk order in wk's order, where
 * they are contiguous, into partial 0; then each sum added to its weight
 * (w's order: the index kept by counters, wk's being (g, kh, o, c, kw)). */
static void dw_sum_rows(const dw_sum_job *j, int64_t i0, int64_t i1) {
    const conv_dims *d = j->rows;
    float *s = j->partial;
    for (int64_t c = 1; c < j->chunks; c++)
        for (int64_t i = i0; i < i1; i++) s[i] += j->partial[c * j->n + i];
    int64_t CK = d->C * d->KW, KK = d->KH * d->KW;
    int64_t kw = i0 % d->KW, ch = i0 / d->KW % d->C, o = i0 / CK % d->O, kh = i0 / (CK * d->O) % d->KH;
    int64_t g = i0 / (CK * d->O * d->KH);
    for (int64_t i = i0; i < i1; i++) {
        j->gw[((g * d->O + o) * d->C + ch) * KK + kh * d->KW + kw] += s[i];
        if (++kw < d->KW) continue;
        kw = 0;
        if (++ch < d->C) continue;
        ch = 0;
        if (++o < d->O) continue;
        o = 0;
        if (++kh == d->KH) kh = 0, g++;
    }
}

static void dw_sum_task(void *u, int64_t t, int worker) {
    const dw_sum_job *j = u;
    (void)worker;
    int64_t i0 = t * QAT__GRAIN, i1 = i0 + QAT__GRAIN < j->n ? i0 + QAT__GRAIN : j->n;
    if (j->rows) {
        dw_sum_rows(j, i0, i1);
        return;
    }
    for (int64_t c = 0; c < j->chunks; c++) {
        const float *p = j->partial + c * j->n;
        for (int64_t i = i0; i < i1; i++) j->gw[i] += p[i];
    }
}

static void conv_bw(qat_ctx *ctx, qat_node *node) {
    const conv_saved *sv = node->saved;
    const conv_dims *d = &sv->d;
    qat_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int64_t G = d->G, OHW = d->OH * d->OW, KL = sv->f.K * sv->f.L;
    int64_t chunks = (d->N + DW_CHUNK - 1) / DW_CHUNK, workers = qat__workers(ctx), nw = w->numel;
    const float *gy = node->out->grad; /* [N, G*O, OHW] */
    float *gw = qat__wants_grad(w) ? qat__grad(ctx, w) : NULL;
    bool store = false; /* store: gx is new, not zeroed */
    float *gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &store) : NULL;
    /* Working memory only this call reads: from the recycled blocks, and
     * given back at the end, so that a step's convolutions share it (the
     * partial weight gradients of MobileNet's 13 pointwise layers took
     * 8 MiB of the step's peak when each kept its own). */
    size_t cols_bytes = (size_t)(workers * KL) * sizeof(float), part_bytes = (size_t)(chunks * nw) * sizeof(float);
    float *dcol = gx ? qat__step_recycled(ctx, cols_bytes) : NULL;
    bool rebuild = !sv->cols && !pointwise(d);
    float *col = rebuild ? qat__step_recycled(ctx, cols_bytes) : NULL;
    float *partial = gw ? qat__step_recycled(ctx, part_bytes) : NULL;
    if ((gx && !dcol) || (rebuild && !col) || (qat__wants_grad(w) && (!gw || !partial)) || (qat__wants_grad(x) && !gx))
        goto done;
    conv_rows rows = conv_rows_for(&sv->f.cd);
    conv_bw_job j = {.d = d, .sv = sv, .x = x->data, .gy = gy, .partial = partial, .gx = gx, .dcol = dcol,
                     .col = col, .im2col = rows.im2col, .col2im = rows.col2im, .store = store, .rebuild = rebuild};
    j.zero_gx = gx && store && !j.col2im && !pointwise(d);
    qat__par(ctx, chunks, conv_bw_task, &j);
    if (gw) {
        dw_sum_job s = {gw, partial, nw, chunks, sv->f.nk > 1 ? d : NULL};
        qat__par(ctx, qat__n_tasks(nw, QAT__GRAIN), dw_sum_task, &s);
    }
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (gb) qat__conv_bias_grad(ctx, d->N, G * d->O, OHW, gy, gb);
    }
done:
    qat__step_release(ctx, dcol, cols_bytes);
    qat__step_release(ctx, col, cols_bytes);
    qat__step_release(ctx, partial, part_bytes);
}

/* Forward: samples are independent; tasks of FW_CHUNK samples. */
#define FW_CHUNK 2

typedef struct {
    const conv_dims *d;
    const conv_form *f;
    const float *x, *wk, *b;
    float *y, *cols;
    bool keep, pw;
    void (*im2col)(const conv_dims *, const float *, float *);
} conv_fw_job;

static void conv_fw_task(void *u, int64_t chunk, int worker) {
    const conv_fw_job *j = u;
    const conv_dims *d = j->d;
    const conv_form *f = j->f;
    int64_t G = d->G, OHW = d->OH * d->OW, KL = f->K * f->L, CHW = d->C * d->H * d->W;
    int64_t n0 = chunk * FW_CHUNK, n1 = n0 + FW_CHUNK < d->N ? n0 + FW_CHUNK : d->N;
    for (int64_t n = n0; n < n1; n++) {
        if (j->b) /* start from the bias, accumulate the products onto it */
            for (int64_t o = 0; o < G * d->O; o++)
                for (int64_t i = 0; i < OHW; i++) j->y[(n * G * d->O + o) * OHW + i] = j->b[o];
        else /* as the backward's dcol: zeroed, then beta 1 */
            memset(j->y + n * G * d->O * OHW, 0, (size_t)(G * d->O * OHW) * sizeof(float));
        for (int64_t g = 0; g < G; g++) {
            const float *col = j->x + (n * G + g) * CHW;
            if (!j->pw) {
                float *c = j->cols + (j->keep ? (n * G + g) * KL : worker * KL);
                j->im2col(&f->cd, col, c);
                col = c;
            }
            for (int64_t kh = 0; kh < f->nk; kh++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d->O, (int)OHW, (int)f->K, 1.0f,
                            j->wk + (g * f->nk + kh) * d->O * f->K, (int)f->K, col + kh * d->OW, (int)f->L,
                            1.0f, j->y + (n * G + g) * d->O * OHW, (int)OHW);
        }
    }
}

/* The im2col path: dense and grouped convolutions. */
static qat_tensor *conv_im2col(qat_ctx *ctx, const char *name, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                               const conv_dims *dp) {
    conv_dims d = *dp;
    conv_form f = conv_form_of(&d);
    int64_t G = d.G, KL = f.K * f.L;
    int64_t shape[4] = {d.N, G * d.O, d.OH, d.OW};
    qat_tensor *y = qat__new_out(ctx, 4, shape);
    conv_saved *s = qat__step_alloc(ctx, sizeof *s);
    /* columns are kept only for a backward that will come */
    bool record = qat_ctx_grad_enabled(ctx) && (x->requires_grad || w->requires_grad || (b && b->requires_grad));
    bool pw = pointwise(&d), keep = record && !pw && (size_t)(d.N * G * KL) * sizeof(float) <= QAT__KEEP_COLS;
    /* kept: every sample's columns; not kept: one sample's per thread, reused */
    int64_t workers = qat__workers(ctx);
    float *cols = pw ? NULL : qat__step_scratch(ctx, (size_t)((keep ? d.N * G : workers) * KL) * sizeof(float));
    float *wk = f.nk > 1 ? qat__step_scratch(ctx, (size_t)w->numel * sizeof(float)) : NULL;
    if (!y || !s || (!pw && !cols) || (f.nk > 1 && !wk)) return NULL;
    if (wk) { /* w [G][O][C][KH][KW] as wk [G][KH][O][C·KW] */
        const float *src = w->data;
        for (int64_t g = 0; g < G; g++)
            for (int64_t o = 0; o < d.O; o++)
                for (int64_t c = 0; c < d.C; c++)
                    for (int64_t kh = 0; kh < d.KH; kh++)
                        for (int64_t kw = 0; kw < d.KW; kw++)
                            wk[((g * d.KH + kh) * d.O + o) * f.K + c * d.KW + kw] = *src++;
    }
    conv_fw_job j = {.d = &d, .f = &f, .x = x->data, .wk = wk ? wk : w->data, .b = b ? b->data : NULL,
                     .y = y->data, .cols = cols, .keep = keep, .pw = pw, .im2col = conv_rows_for(&f.cd).im2col};
    qat__par(ctx, (d.N + FW_CHUNK - 1) / FW_CHUNK, conv_fw_task, &j);
    *s = (conv_saved){.d = d, .f = f, .wk = j.wk, .cols = keep ? cols : NULL};
    qat_node *node = qat__record(ctx, name, conv_bw, y, x, w, b);
    if (node) node->saved = s, node->out_free = true;
    return y;
}

/* Checks the operands against the parameters and fills the sizes. */
static bool conv_dims_of(qat_ctx *ctx, const char *name, const qat_tensor *x, const qat_tensor *w,
                         const qat_tensor *b, const qat_conv2d_params *p, conv_dims *d) {
    char s1[64], s2[64];
    if (p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 || p->groups < 1) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: stride %dx%d, padding %dx%d, groups %d", name, p->stride_h,
                     p->stride_w, p->pad_h, p->pad_w, p->groups);
        return false;
    }
    int64_t G = p->groups;
    if (x->rank != 4 || w->rank != 4 || !qat_tensor_is_contiguous(x) || !qat_tensor_is_contiguous(w) ||
        x->shape[1] % G || w->shape[0] % G || x->shape[1] / G != w->shape[1]) {
        if (G == 1)
            qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: input %s and weight %s: want contiguous [N, C, H, W] and "
                         "[O, C, KH, KW]", name, qat_shape_str(x, s1, sizeof s1), qat_shape_str(w, s2, sizeof s2));
        else
            qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: input %s and weight %s with groups %d: want contiguous "
                         "[N, C, H, W] and [O, C/groups, KH, KW], C and O divisible by groups", name,
                         qat_shape_str(x, s1, sizeof s1), qat_shape_str(w, s2, sizeof s2), p->groups);
        return false;
    }
    *d = (conv_dims){.N = x->shape[0], .C = x->shape[1] / G, .H = x->shape[2], .W = x->shape[3],
                     .O = w->shape[0] / G, .KH = w->shape[2], .KW = w->shape[3], .sh = p->stride_h,
                     .sw = p->stride_w, .ph = p->pad_h, .pw = p->pad_w, .G = G};
    if (d->H + 2 * d->ph < d->KH || d->W + 2 * d->pw < d->KW) {
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: kernel %s larger than input %s with padding %dx%d", name,
                     qat_shape_str(w, s2, sizeof s2), qat_shape_str(x, s1, sizeof s1), p->pad_h, p->pad_w);
        return false;
    }
    if (b && (b->numel != G * d->O || !qat_tensor_is_contiguous(b))) {
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: bias has %lld elements, want %lld", name, (long long)b->numel,
                     (long long)(G * d->O));
        return false;
    }
    d->OH = (d->H + 2 * d->ph - d->KH) / d->sh + 1;
    d->OW = (d->W + 2 * d->pw - d->KW) / d->sw + 1;
    return true;
}

static qat_tensor *conv2d(qat_ctx *ctx, const char *name, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                          const qat_conv2d_params *p) {
    qat_tensor *ins[2] = {x, w};
    if (!qat__inputs_ok(ctx, name, 2, ins)) return NULL;
    if (!p) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: NULL parameters", name), NULL;
    conv_dims d;
    if (!conv_dims_of(ctx, name, x, w, b, p, &d)) return NULL;
    /* one input channel per group: depthwise. (C == 1 with groups 1, e.g.
     * LeNet's first layer, stays a single sgemm.) */
    if (d.C == 1 && d.G > 1) return qat__conv2d_depthwise(ctx, name, x, w, b, &d);
    return conv_im2col(ctx, name, x, w, b, &d);
}

qat_tensor *qat_conv2d_ex(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b, const qat_conv2d_params *p) {
    return conv2d(ctx, "qat_conv2d_ex", x, w, b, p);
}

qat_tensor *qat_conv2d(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b, int stride, int padding) {
    qat_conv2d_params p = {stride, stride, padding, padding, 1};
    return conv2d(ctx, "qat_conv2d", x, w, b, &p);
}
