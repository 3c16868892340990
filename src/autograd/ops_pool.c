/* 2-D pooling over KH x KW windows with separate strides and padding,
 * floor output size (PyTorch's MaxPool2d / AvgPool2d, ceil_mode off):
 * max pooling pads with -inf (a padded element never wins), average
 * pooling with zeros that count in the divisor (count_include_pad), so
 * every window divides by KH*KW. Padding is at most half the window, as
 * PyTorch requires: every window then holds at least one input element.
 * And the mean over H and W (global average pooling). */
#include <float.h>
#include <string.h>

#include "internal.h"

typedef struct {
    int64_t N, C, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw;
} pool_dims;

static bool pool_dims_of(qat_ctx *ctx, const char *op, const qat_tensor *x, const qat_pool2d_params *p,
                         pool_dims *d) {
    char s[64];
    if (!p) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: NULL parameters", op);
        return false;
    }
    if (x->rank != 4 || !qat_tensor_is_contiguous(x)) {
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: want contiguous [N, C, H, W], got %s", op,
                     qat_shape_str(x, s, sizeof s));
        return false;
    }
    if (p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
        p->pad_h > p->kh / 2 || p->pad_w > p->kw / 2 || x->shape[2] + 2 * p->pad_h < p->kh ||
        x->shape[3] + 2 * p->pad_w < p->kw) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: window %dx%d, stride %dx%d, padding %dx%d do not fit input %s (padding "
                     "at most half the window)", op, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
                     qat_shape_str(x, s, sizeof s));
        return false;
    }
    *d = (pool_dims){.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3], .kh = p->kh,
                     .kw = p->kw, .sh = p->stride_h, .sw = p->stride_w, .ph = p->pad_h, .pw = p->pad_w};
    d->OH = (d->H + 2 * d->ph - d->kh) / d->sh + 1;
    d->OW = (d->W + 2 * d->pw - d->kw) / d->sw + 1;
    return true;
}

/* The input rows [*h0, *h1) and columns [*w0, *w1) of output (oh, ow)'s
 * window: the padded window clipped to the input. */
static void window(const pool_dims *d, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
    int64_t hs = oh * d->sh - d->ph, ws = ow * d->sw - d->pw;
    *h0 = hs > 0 ? hs : 0;
    *w0 = ws > 0 ? ws : 0;
    *h1 = hs + d->kh < d->H ? hs + d->kh : d->H;
    *w1 = ws + d->kw < d->W ? ws + d->kw : d->W;
}

/* Planes (n, c) are independent in every pooling: the pool's tasks are
 * runs of whole planes, about QAT__GRAIN input floats each. */
typedef struct {
    const pool_dims *d;
    const float *x, *gy;
    float *y, *gx;
    void *saved;
    int64_t per_task; /* planes */
    bool store;
    void (*row)(const float *, const float *, float *, uint8_t *, int64_t, bool);
    void (*put)(float *, int64_t, const float *, const uint8_t *, int64_t, bool);
} plane_job;

static int64_t planes_per_task(int64_t plane) { return plane >= QAT__GRAIN ? 1 : QAT__GRAIN / plane; }

/* Runs fn over the planes [p0, p1) of every task. */
static void run_planes(qat_ctx *ctx, plane_job *j, int64_t planes, int64_t plane_size, qat_task_fn fn) {
    j->per_task = planes_per_task(plane_size > 0 ? plane_size : 1);
    qat__par(ctx, (planes + j->per_task - 1) / j->per_task, fn, j);
}

static void plane_range(const plane_job *j, int64_t t, int64_t *p0, int64_t *p1) {
    int64_t planes = j->d->N * j->d->C;
    *p0 = t * j->per_task;
    *p1 = *p0 + j->per_task < planes ? *p0 + j->per_task : planes;
}

/* 2x2 windows at stride 2 (LeNet's): per output, which of the window's
 * four inputs is the maximum (0..3, row-major) as one byte. The first
 * maximum wins, as PyTorch. The rows are short (14 and 5 outputs in
 * LeNet): the compiler's vectorised forms of this loop ran slower than
 * it; the AVX-512 version (ops_pool_avx512.c) does the same comparisons
 * with masked row ends, the AVX2 one (ops_pool_avx2.c) eight outputs a
 * step and the row's last few by this loop. */
void qat__maxpool2_row(const float *restrict r0, const float *restrict r1, float *restrict y,
                       uint8_t *restrict code, int64_t OW, bool spill) {
    (void)spill;
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
                            const uint8_t *restrict code, int64_t OW, bool spill) {
    (void)spill;
    for (int64_t ow = 0; ow < OW; ow++) g0[(code[ow] >> 1) * W + 2 * ow + (code[ow] & 1)] += gy[ow];
}

/* The same into a gradient not written yet: every input of the row pair
 * is stored (the windows tile it), so nothing needs zeroing first. Zero
 * both rows, then place each gradient: in cache, cheaper than a select
 * per input. */
void qat__maxpool2_row_bw_store(float *restrict g0, int64_t W, const float *restrict gy,
                                const uint8_t *restrict code, int64_t OW, bool spill) {
    memset(g0, 0, (size_t)(2 * W) * sizeof(float));
    maxpool2_row_bw(g0, W, gy, code, OW, spill);
}

static void maxpool2_bw_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    int64_t p0, p1, H = j->d->H, W = j->d->W, OH = j->d->OH, OW = j->d->OW;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t o = (p * OH + oh) * OW;
            j->put(j->gx + (p * H + 2 * oh) * W, W, j->gy + o, (const uint8_t *)j->saved + o, OW,
                   p < p1 - 1 || oh < OH - 1); /* the task's last row pair stays inside */
        }
}

/* Each output adds into its window's maximum, which lies in its plane. */
static void maxpool_arg_bw_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    int64_t p0, p1, per = j->d->OH * j->d->OW;
    const int32_t *arg = j->saved;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    for (int64_t i = p0 * per; i < p1 * per; i++) j->gx[arg[i]] += j->gy[i];
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
        void (*put)(float *, int64_t, const float *, const uint8_t *, int64_t, bool) =
            store ? qat__maxpool2_row_bw_store : maxpool2_row_bw;
#if QAT__POOL_AVX2
        if (store && qat_isa_allowed(QAT_ISA_AVX2)) put = qat__maxpool2_row_bw_store_avx2;
#endif
#if QAT__POOL_AVX512
        if (store && qat__have_avx512bw()) put = qat__maxpool2_row_bw_store_avx512;
#endif
        pool_dims d = {.N = y->shape[0], .C = y->shape[1], .H = H, .W = W, .OH = OH, .OW = OW};
        plane_job j = {.d = &d, .gy = gy, .gx = gx, .saved = n->saved, .put = put};
        run_planes(ctx, &j, d.N * d.C, H * W, maxpool2_bw_task);
        return;
    }
    float *gx = qat__grad(ctx, x);
    if (!gx) return;
    pool_dims d = {.N = y->shape[0], .C = y->shape[1], .H = H, .W = W, .OH = OH, .OW = OW};
    plane_job j = {.d = &d, .gy = gy, .gx = gx, .saved = n->saved};
    run_planes(ctx, &j, d.N * d.C, H * W, maxpool_arg_bw_task);
}

/* Any window: the first maximum in (kh, kw) order wins, as in PyTorch
 * (which also lets a NaN win; here, as in the 2x2 rows, a NaN wins only
 * as the window's first element). */
static void maxpool_generic(const pool_dims *d, const float *x, float *y, int32_t *arg, int64_t p0, int64_t p1) {
    int64_t i = p0 * d->OH * d->OW;
    for (int64_t p = p0; p < p1; p++) {
        const float *xp = x + p * d->H * d->W;
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++, i++) {
                int64_t h0, h1, w0, w1;
                window(d, oh, ow, &h0, &h1, &w0, &w1);
                int64_t best = h0 * d->W + w0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        if (xp[ih * d->W + iw] > xp[best]) best = ih * d->W + iw;
                y[i] = xp[best];
                arg[i] = (int32_t)(p * d->H * d->W + best);
            }
    }
}

static void maxpool2_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    const pool_dims *d = j->d;
    int64_t p0, p1;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = j->x + pl * d->H * d->W;
        int64_t i = pl * d->OH * d->OW;
        for (int64_t oh = 0; oh < d->OH; oh++, i += d->OW)
            j->row(xp + 2 * oh * d->W, xp + (2 * oh + 1) * d->W, j->y + i, (uint8_t *)j->saved + i, d->OW,
                   pl < p1 - 1 || oh < d->OH - 1); /* the task's last row stays inside */
    }
}

static void maxpool_generic_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    int64_t p0, p1;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    maxpool_generic(j->d, j->x, j->y, j->saved, p0, p1);
}

static qat_tensor *maxpool(qat_ctx *ctx, const char *op, qat_tensor *x, const qat_pool2d_params *p) {
    pool_dims d;
    if (!qat__inputs_ok(ctx, op, 1, &x) || !pool_dims_of(ctx, op, x, p, &d)) return NULL;
    if (x->numel > INT32_MAX) return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: input too large", op), NULL;
    bool two = d.kh == 2 && d.kw == 2 && d.sh == 2 && d.sw == 2 && d.ph == 0 && d.pw == 0;
    int64_t os[4] = {d.N, d.C, d.OH, d.OW};
    qat_tensor *y = qat__new_out(ctx, 4, os);
    void *saved = y ? qat__step_scratch(ctx, (size_t)y->numel * (two ? 1 : sizeof(int32_t))) : NULL;
    if (!y || !saved) return NULL;
    plane_job j = {.d = &d, .x = x->data, .y = y->data, .saved = saved, .row = qat__maxpool2_row};
    if (two) { /* LeNet's 2x2 windows at stride 2: row by row */
#if QAT__POOL_AVX2
        if (qat_isa_allowed(QAT_ISA_AVX2)) j.row = qat__maxpool2_row_avx2;
#endif
#if QAT__POOL_AVX512
        if (qat__have_avx512f()) j.row = qat__maxpool2_row_avx512;
#endif
        run_planes(ctx, &j, d.N * d.C, d.H * d.W, maxpool2_task);
    } else {
        run_planes(ctx, &j, d.N * d.C, d.H * d.W, maxpool_generic_task);
    }
    qat_node *n = qat__record(ctx, op, maxpool_bw, y, x, NULL, NULL);
    if (n) {
        n->saved = saved;
        n->i[0] = two;
    }
    return y;
}

qat_tensor *qat_maxpool2d_ex(qat_ctx *ctx, qat_tensor *x, const qat_pool2d_params *p) {
    return maxpool(ctx, "qat_maxpool2d_ex", x, p);
}

qat_tensor *qat_maxpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride) {
    qat_pool2d_params p = {k, k, stride, stride, 0, 0};
    return maxpool(ctx, "qat_maxpool2d", x, &p);
}

/* Each output's gradient, divided by the window size, added to every
 * input of its window (as PyTorch: dy / (KH*KW), in output order). */
static void avgpool_bw_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    const pool_dims *d = j->d;
    int64_t p0, p1;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    const float div = (float)(d->kh * d->kw);
    int64_t i = p0 * d->OH * d->OW;
    for (int64_t p = p0; p < p1; p++) {
        float *gp = j->gx + p * d->H * d->W;
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++, i++) {
                int64_t h0, h1, w0, w1;
                window(d, oh, ow, &h0, &h1, &w0, &w1);
                float g = j->gy[i] / div;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) gp[ih * d->W + iw] += g;
            }
    }
}

static void avgpool_bw(qat_ctx *ctx, qat_node *n) {
    const pool_dims *d = n->saved;
    float *gx = qat__grad(ctx, n->in[0]);
    if (!gx) return;
    plane_job j = {.d = d, .gy = n->out->grad, .gx = gx};
    run_planes(ctx, &j, d->N * d->C, d->H * d->W, avgpool_bw_task);
}

static void avgpool_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    const pool_dims *d = j->d;
    int64_t p0, p1;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    const float div = (float)(d->kh * d->kw);
    int64_t i = p0 * d->OH * d->OW;
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = j->x + pl * d->H * d->W;
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++, i++) {
                int64_t h0, h1, w0, w1;
                window(d, oh, ow, &h0, &h1, &w0, &w1);
                float acc = 0.0f;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * d->W + iw];
                j->y[i] = acc / div;
            }
    }
}

/* Window sums in (kh, kw) order, then divided by KH*KW: PyTorch's
 * arithmetic, bit for bit (padding adds nothing to the sum). */
static qat_tensor *avgpool(qat_ctx *ctx, const char *op, qat_tensor *x, const qat_pool2d_params *p) {
    pool_dims d;
    if (!qat__inputs_ok(ctx, op, 1, &x) || !pool_dims_of(ctx, op, x, p, &d)) return NULL;
    int64_t os[4] = {d.N, d.C, d.OH, d.OW};
    qat_tensor *y = qat__new_out(ctx, 4, os);
    pool_dims *saved = qat__step_scratch(ctx, sizeof *saved);
    if (!y || !saved) return NULL;
    *saved = d;
    plane_job j = {.d = saved, .x = x->data, .y = y->data};
    run_planes(ctx, &j, d.N * d.C, d.H * d.W, avgpool_task);
    qat_node *n = qat__record(ctx, op, avgpool_bw, y, x, NULL, NULL);
    if (n) n->saved = saved, n->out_free = true;
    return y;
}

qat_tensor *qat_avgpool2d_ex(qat_ctx *ctx, qat_tensor *x, const qat_pool2d_params *p) {
    return avgpool(ctx, "qat_avgpool2d_ex", x, p);
}

qat_tensor *qat_avgpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride) {
    qat_pool2d_params p = {k, k, stride, stride, 0, 0};
    return avgpool(ctx, "qat_avgpool2d", x, &p);
}

/* ---- global average pooling ----------------------------------------------------------- */

/* dy / (H*W) spread over each plane; a new gradient is stored. */
static void global_avgpool_bw_task(void *u, int64_t t, int worker) {
    const plane_job *j = u;
    int64_t p0, p1, HW = j->d->H * j->d->W;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    const float div = (float)HW;
    for (int64_t p = p0; p < p1; p++) {
        float g = j->gy[p] / div, *restrict gp = j->gx + p * HW;
        if (j->store)
            for (int64_t i = 0; i < HW; i++) gp[i] = g;
        else
            for (int64_t i = 0; i < HW; i++) gp[i] += g;
    }
}

static void global_avgpool_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0];
    bool store = false;
    float *gx = qat__grad_dst(ctx, x, &store);
    if (!gx) return;
    pool_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3]};
    plane_job j = {.d = &d, .gy = n->out->grad, .gx = gx, .store = store};
    run_planes(ctx, &j, d.N * d.C, d.H * d.W, global_avgpool_bw_task);
}

static void global_avgpool_task(void *u, int64_t t, int worker) { /* each plane summed in double */
    const plane_job *j = u;
    int64_t p0, p1, HW = j->d->H * j->d->W;
    (void)worker;
    plane_range(j, t, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const float *xp = j->x + p * HW;
        double acc = 0.0;
        for (int64_t i = 0; i < HW; i++) acc += xp[i];
        j->y[p] = (float)(acc / (double)HW);
    }
}

qat_tensor *qat_global_avgpool2d(qat_ctx *ctx, qat_tensor *x) {
    const char *op = "qat_global_avgpool2d";
    if (!qat__inputs_ok(ctx, op, 1, &x)) return NULL;
    if (x->rank != 4 || !qat_tensor_is_contiguous(x)) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: want contiguous [N, C, H, W], got %s", op,
                            qat_shape_str(x, s, sizeof s)), NULL;
    }
    int64_t os[2] = {x->shape[0], x->shape[1]};
    qat_tensor *y = qat__new_out(ctx, 2, os);
    if (!y) return NULL;
    pool_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3]};
    plane_job j = {.d = &d, .x = x->data, .y = y->data};
    run_planes(ctx, &j, d.N * d.C, d.H * d.W, global_avgpool_task);
    qat_node *n = qat__record(ctx, op, global_avgpool_bw, y, x, NULL, NULL);
    if (n) n->out_free = true;
    return y;
}
