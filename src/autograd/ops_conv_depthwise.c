/* Depthwise 2-d convolution (groups == input channels): direct kernels,
 * no im2col and no sgemm. x [N, C, H, W], w [C*M, 1, KH, KW] (M outputs
 * per channel, output o = c*M + m reads channel c), b [C*M] or NULL,
 * y [N, C*M, OH, OW].
 *
 * Each output plane is a sum of KH*KW shifted copies of its input plane,
 * each scaled by one weight, and every sample of a channel uses the same
 * weights. So the zero-padded input planes of one channel, all samples,
 * are laid out one after the other at one row pitch P, R rows per sample
 * (a "stack"), and each tap becomes one contiguous shifted run over the
 * whole stack: output (n, oh, ow) sits at n*R*P + oh*P + ow and reads tap
 * (kh, kw) at that index plus off(kh, kw) = kh*P + kw. The compiler
 * vectorises such runs (the rows themselves are only 7 to 28 floats, and
 * the planes tiny); the positions past OW or past OH in a sample's block
 * are computed and thrown away. At stride 1 (with padding under the
 * kernel's size) the padding is shared: P = W + pw and R = H + ph, a
 * row's right padding being the next row's left padding and a sample's
 * bottom padding the next sample's top padding. Otherwise the padded
 * planes are split into sh*sw "phase planes", phase (a, b) holding the
 * padded elements (r*sh + a, q*sw + b), with P = ceil(Wp / sw) and
 * R = ceil(Hp / sh): tap (kh, kw) reads phase (kh % sh, kw % sw) at
 * offset (kh / sh)*P + kw / sw (one phase at stride 1).
 *
 * Backward builds the stack again (cheaper than keeping it) and the stack
 * of output gradients (zeros at the thrown-away positions). dw[o, tap]
 * correlates the two over the whole stack; dx is the adjoint, gathered per
 * phase plane: each element sums w * dy over the taps that read it, then
 * lands in x's gradient. Every sum has a fixed order, whatever the vector
 * width: outputs add the bias then the taps in (kh, kw) order; input
 * gradients add over m then (kh, kw); each weight and bias gradient keeps
 * DW_LANES float lanes, lane j summing the stack's elements j mod
 * DW_LANES in order, folded in halves at the end.
 *
 * The row copies into and out of the stacks are qat__rows_copy / _add,
 * with AVX-512 versions (one masked load and store per row) and AVX2 ones
 * (8 floats at a time, a masked tail). Buffers are
 * zeroed once: the copies only ever write the positions that hold data. */
#include <string.h>

#include "internal.h"

#define DW_LANES 64

/* GCC's -O3 unroll-and-jam fuses the term loops below with the block
 * loops around them and turns the vector code into scalar code running
 * 3-4x slower; this keeps the loops as written. */
#if defined(__GNUC__) && !defined(__clang__)
#define DW_NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define DW_NO_JAM
#endif

typedef struct {
    qat__conv_dims d; /* C == 1, O == M, G == channels */
    bool shared;      /* padding shared between rows and samples (stride 1) */
    int64_t P, R;     /* row pitch; rows per sample block */
    int64_t B;        /* floats per sample block: R*P */
    int64_t L;        /* a stack's run: N*B rounded up to DW_LANES */
    int64_t max_off;  /* the largest tap offset */
    int64_t PL;       /* floats per phase plane stack: the run, then zeros the taps read */
    int64_t E;        /* floats per output-gradient stack: max_off zeros, the run */
    int64_t phases;   /* sh*sw */
    int64_t *tap_off; /* [KH*KW] offset of each tap in its phase plane */
    int64_t *tap_ph;  /* [KH*KW] its phase plane */
    int64_t *tap_at;  /* [KH*KW] where its run starts among the phase planes: tap_ph*PL + tap_off */
    qat__rows_fn copy, add;
    qat__simd simd;   /* the copy of the runs and sums (op_api.h) */
} dw_plan;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static bool dw_plan_init(qat_ctx *ctx, dw_plan *pl, const qat__conv_dims *d) {
    pl->d = *d;
    pl->simd = qat__simd_level();
    int64_t Hp = d->H + 2 * d->ph, Wp = d->W + 2 * d->pw, KK = d->KH * d->KW;
    /* sharing needs the output no wider than the pitch: padding under the
     * kernel's size (always so for "same" padding) */
    pl->shared = d->sh == 1 && d->sw == 1 && d->pw < d->KW && d->ph < d->KH;
    pl->P = pl->shared ? d->W + d->pw : (Wp + d->sw - 1) / d->sw;
    pl->R = pl->shared ? d->H + d->ph : (Hp + d->sh - 1) / d->sh;
    pl->B = pl->R * pl->P;
    pl->L = round_up(d->N * pl->B, DW_LANES);
    pl->max_off = (d->KH - 1) / d->sh * pl->P + (d->KW - 1) / d->sw;
    /* the run's reads end at L + max_off; with shared padding the stack's
     * last sample also needs its bottom padding, ph rows after N*B */
    pl->PL = round_up(pl->L + pl->max_off + d->ph * pl->P + d->pw, 16); /* 64-byte aligned stacks */
    pl->E = round_up(pl->max_off + pl->L, 16);
    pl->phases = d->sh * d->sw;
    pl->copy = qat__rows_copy;
    pl->add = qat__rows_add;
#if QAT__CONV_AVX512
    if (qat__have_avx512f()) pl->copy = qat__rows_copy_avx512, pl->add = qat__rows_add_avx512;
#endif
#if QAT__CONV_AVX2
    if (pl->copy == qat__rows_copy && qat_isa_allowed(QAT_ISA_AVX2))
        pl->copy = qat__rows_copy_avx2, pl->add = qat__rows_add_avx2;
#endif
    pl->tap_off = qat__step_scratch(ctx, (size_t)(3 * KK) * sizeof(int64_t));
    if (!pl->tap_off) return false;
    pl->tap_ph = pl->tap_off + KK;
    pl->tap_at = pl->tap_ph + KK;
    for (int64_t kh = 0; kh < d->KH; kh++)
        for (int64_t kw = 0; kw < d->KW; kw++) {
            int64_t t = kh * d->KW + kw;
            pl->tap_off[t] = kh / d->sh * pl->P + kw / d->sw;
            pl->tap_ph[t] = kh % d->sh * d->sw + kw % d->sw;
            pl->tap_at[t] = pl->tap_ph[t] * pl->PL + pl->tap_off[t];
        }
    return true;
}

/* ---- rows: the portable copies (the AVX-512 ones do the same) --------------------- */

void qat__rows_copy(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *restrict d = dst + p * g->dplane + r * g->dpitch;
            const float *restrict s = src + p * g->splane + r * g->spitch;
            for (int64_t q = 0; q < g->width; q++) d[q] = s[q];
        }
}

void qat__rows_add(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *restrict d = dst + p * g->dplane + r * g->dpitch;
            const float *restrict s = src + p * g->splane + r * g->spitch;
            for (int64_t q = 0; q < g->width; q++) d[q] += s[q];
        }
}

/* ---- the stacks ---------------------------------------------------------------------- */

/* [lo, hi): the rows r of phase a (padded row r*s + a) or the columns q of
 * phase b that fall on the input: 0 <= r*s + a - pad < n; count at most. */
static void phase_range(int64_t a, int64_t s, int64_t pad, int64_t n, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t first = pad - a, end = n + pad - a; /* r*s in [first, end) */
    *lo = first > 0 ? (first + s - 1) / s : 0;
    *hi = end > 0 ? (end + s - 1) / s : 0;
    if (*hi > count) *hi = count;
    if (*lo > count) *lo = count;
    if (*hi < *lo) *hi = *lo;
}

/* The element of channel c's input (sample n) at phase plane row r,
 * column q of phase (a, b), and whether the element is there: the padded
 * element (r*sh + a, q*sw + b). */
typedef struct {
    int64_t r0, r1, q0, q1; /* the rows and columns that hold input */
} phase_box;

static phase_box phase_of(const dw_plan *pl, int64_t a, int64_t b) {
    const qat__conv_dims *d = &pl->d;
    phase_box x;
    phase_range(a, d->sh, d->ph, d->H, pl->R, &x.r0, &x.r1);
    phase_range(b, d->sw, d->pw, d->W, pl->P, &x.q0, &x.q1);
    return x;
}

/* Channel c's stack of phase planes [phases, PL] from x [N, C, H, W]. Only
 * the positions that hold input are written. */
static void stack_build(const dw_plan *pl, int64_t c, const float *x, float *planes) {
    const qat__conv_dims *d = &pl->d;
    int64_t HW = d->H * d->W, CHW = d->G * HW;
    if (pl->shared) { /* one phase; input row ih at block row ph + ih, column pw */
        qat__rows g = {.planes = d->N, .rows = d->H, .dplane = pl->B, .dpitch = pl->P, .splane = CHW, .spitch = d->W,
                       .width = d->W};
        pl->copy(&g, planes + d->ph * pl->P + d->pw, x + c * HW);
        return;
    }
    for (int64_t a = 0; a < d->sh; a++) /* every sh-th row, every sw-th column */
        for (int64_t b = 0; b < d->sw; b++) {
            phase_box bx = phase_of(pl, a, b);
            float *p = planes + (a * d->sw + b) * pl->PL;
            for (int64_t n = 0; n < d->N; n++)
                for (int64_t r = bx.r0; r < bx.r1; r++) {
                    float *restrict row = p + n * pl->B + r * pl->P;
                    const float *restrict xr = x + n * CHW + c * HW + (r * d->sh + a - d->ph) * d->W;
                    for (int64_t q = bx.q0; q < bx.q1; q++) row[q] = xr[q * d->sw + b - d->pw];
                }
        }
}

/* The inverse for a gradient: phase planes gplanes [phases, L] into
 * channel c of gx, stored or added. Every input element sits in exactly
 * one phase plane, so storing writes them all. */
static void stack_unbuild(const dw_plan *pl, int64_t c, const float *gplanes, float *gx, bool store) {
    const qat__conv_dims *d = &pl->d;
    int64_t HW = d->H * d->W, CHW = d->G * HW;
    if (pl->shared) {
        qat__rows g = {.planes = d->N, .rows = d->H, .dplane = CHW, .dpitch = d->W, .splane = pl->B, .spitch = pl->P,
                       .width = d->W};
        (store ? pl->copy : pl->add)(&g, gx + c * HW, gplanes + d->ph * pl->P + d->pw);
        return;
    }
    for (int64_t a = 0; a < d->sh; a++)
        for (int64_t b = 0; b < d->sw; b++) {
            phase_box bx = phase_of(pl, a, b);
            const float *p = gplanes + (a * d->sw + b) * pl->L;
            for (int64_t n = 0; n < d->N; n++)
                for (int64_t r = bx.r0; r < bx.r1; r++) {
                    const float *restrict row = p + n * pl->B + r * pl->P;
                    float *restrict gr = gx + n * CHW + c * HW + (r * d->sh + a - d->ph) * d->W;
                    if (store)
                        for (int64_t q = bx.q0; q < bx.q1; q++) gr[q * d->sw + b - d->pw] = row[q];
                    else
                        for (int64_t q = bx.q0; q < bx.q1; q++) gr[q * d->sw + b - d->pw] += row[q];
                }
        }
}

/* ---- the kernels ----------------------------------------------------------------------- */

/* out[0..len) = init + Σ_t wts[t] · base[offs[t] .. offs[t] + len), the
 * terms added in t order, in blocks of DW_LANES held in registers across
 * the terms. The forward (the taps of one output) and the input gradient
 * (the taps that read one phase plane) are both this. len is a multiple
 * of DW_LANES. */
QAT__SIMD_FN_ATTR(DW_NO_JAM, static, dw_weighted_run, (base, offs, wts, n, init, len, out), const float *restrict base,
                  const int64_t *restrict offs, const float *restrict wts, int64_t n, float init, int64_t len,
                  float *restrict out) {
    for (int64_t i = 0; i < len; i += DW_LANES) {
        float acc[DW_LANES];
        for (int j = 0; j < DW_LANES; j++) acc[j] = init;
        for (int64_t t = 0; t < n; t++) {
            const float *restrict s = base + offs[t] + i;
            const float wt = wts[t];
            for (int j = 0; j < DW_LANES; j++) acc[j] += wt * s[j];
        }
        for (int j = 0; j < DW_LANES; j++) out[i + j] = acc[j];
    }
}

/* *out += Σ g[i]·s[i] over len (a multiple of DW_LANES): lane j sums i = j
 * mod DW_LANES in increasing i; the lanes folded in halves. A fixed order,
 * whatever the vector width. */
QAT__SIMD_FN_ATTR(DW_NO_JAM, static, dw_dot, (g, s, len, out), const float *restrict g, const float *restrict s,
                  int64_t len, float *out) {
    float a[DW_LANES] = {0};
    for (int64_t i = 0; i < len; i += DW_LANES)
        for (int j = 0; j < DW_LANES; j++) a[j] += g[i + j] * s[i + j];
    for (int w = DW_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) a[j] += a[j + w];
    *out += a[0];
}

/* *out += Σ g[i] over len (a multiple of DW_LANES), in lanes as dw_dot. */
QAT__SIMD_FN_ATTR(DW_NO_JAM, static, dw_sum, (g, len, out), const float *restrict g, int64_t len, float *out) {
    float a[DW_LANES] = {0};
    for (int64_t i = 0; i < len; i += DW_LANES)
        for (int j = 0; j < DW_LANES; j++) a[j] += g[i + j];
    for (int w = DW_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) a[j] += a[j + w];
    *out += a[0];
}

/* ---- backward ---------------------------------------------------------------------------- */

typedef struct {
    dw_plan pl;
} dw_saved;

/* The input gradient's terms, grouped by the phase plane they land in:
 * phase q's are [start[q], start[q+1]), in (m, kh, kw) order; term k reads
 * the output-gradient stacks [M, E] from offset off[k], with weight
 * w_c[widx[k]]. */
typedef struct {
    int64_t *start, *off, *widx;
    float *wts; /* [T] one channel's weights, in term order */
} dw_terms;

static bool dw_terms_init(qat_ctx *ctx, const dw_plan *pl, dw_terms *tm) {
    int64_t KK = pl->d.KH * pl->d.KW, M = pl->d.O, k = 0;
    tm->start = qat__step_scratch(ctx, (size_t)(pl->phases + 1 + 2 * M * KK) * sizeof(int64_t));
    tm->wts = qat__step_scratch(ctx, (size_t)(M * KK) * sizeof(float));
    if (!tm->start || !tm->wts) return false;
    tm->off = tm->start + pl->phases + 1;
    tm->widx = tm->off + M * KK;
    for (int64_t q = 0; q < pl->phases; q++) {
        tm->start[q] = k;
        for (int64_t m = 0; m < M; m++)
            for (int64_t t = 0; t < KK; t++)
                if (pl->tap_ph[t] == q) {
                    tm->off[k] = m * pl->E + pl->max_off - pl->tap_off[t];
                    tm->widx[k++] = m * KK + t;
                }
    }
    tm->start[pl->phases] = k;
    return true;
}

/* Working memory of the backward, one channel at a time. */
typedef struct {
    float *planes;  /* [phases, PL] the channel's stack (for dw); zeroed once */
    float *gyr;     /* [M, E] its output-gradient stacks: max_off zeros, then
                     * dy at the stack's positions, zeros elsewhere; zeroed once */
    float *gplanes; /* [phases, L] its input gradient, phase plane by phase plane */
    dw_terms tm;
} dw_work;

static bool dw_work_init(qat_ctx *ctx, const dw_plan *pl, bool want_w, bool want_x, dw_work *wk) {
    wk->gyr = qat__step_alloc(ctx, (size_t)(pl->d.O * pl->E) * sizeof(float));
    wk->planes = want_w ? qat__step_alloc(ctx, (size_t)(pl->phases * pl->PL) * sizeof(float)) : NULL;
    wk->gplanes = want_x ? qat__step_scratch(ctx, (size_t)(pl->phases * pl->L) * sizeof(float)) : NULL;
    if (!wk->gyr || (want_w && !wk->planes) || (want_x && !wk->gplanes)) return false;
    return !want_x || dw_terms_init(ctx, pl, &wk->tm);
}

/* Channel c: its output-gradient stacks from gy, then db, dw and dx
 * (each when wanted; db from the stacks while they are in cache). */
static void dw_bw_channel(const dw_plan *pl, dw_work *wk, int64_t c, const float *x, const float *gy, const float *w,
                          float *gw, float *gb, float *gx, bool store) {
    const qat__conv_dims *d = &pl->d;
    int64_t M = d->O, CM = d->G * M, KK = d->KH * d->KW, OHW = d->OH * d->OW;
    for (int64_t m = 0; m < M; m++) {
        qat__rows g = {.planes = d->N, .rows = d->OH, .dplane = pl->B, .dpitch = pl->P, .splane = CM * OHW,
                       .spitch = d->OW, .width = d->OW};
        pl->copy(&g, wk->gyr + m * pl->E + pl->max_off, gy + (c * M + m) * OHW);
        if (gb) dw_sum_at(pl->simd, wk->gyr + m * pl->E + pl->max_off, pl->L, &gb[c * M + m]);
    }
    if (gw) {
        stack_build(pl, c, x, wk->planes);
        for (int64_t m = 0; m < M; m++)
            for (int64_t t = 0; t < KK; t++)
                dw_dot_at(pl->simd, wk->gyr + m * pl->E + pl->max_off, wk->planes + pl->tap_at[t], pl->L,
                          &gw[(c * M + m) * KK + t]);
    }
    if (!gx) return;
    const dw_terms *tm = &wk->tm;
    for (int64_t k = 0; k < tm->start[pl->phases]; k++) tm->wts[k] = w[c * M * KK + tm->widx[k]];
    for (int64_t q = 0; q < pl->phases; q++)
        dw_weighted_run_at(pl->simd, wk->gyr, tm->off + tm->start[q], tm->wts + tm->start[q],
                           tm->start[q + 1] - tm->start[q], 0.0f, pl->L, wk->gplanes + q * pl->L);
    stack_unbuild(pl, c, wk->gplanes, gx, store);
}

/* Channels are the pool's tasks (each writes only its own outputs and
 * gradients, computed as on one thread); each thread has its own
 * working memory. */
typedef struct {
    const dw_plan *pl;
    dw_work *wk; /* [workers] */
    const float *x, *gy, *w, *b;
    float *y, *gw, *gb, *gx, *planes, *yr;
    bool store;
} dw_job;

static void dw_bw_task(void *u, int64_t c, int worker) {
    const dw_job *j = u;
    dw_bw_channel(j->pl, &j->wk[worker], c, j->x, j->gy, j->w, j->gw, j->gb, j->gx, j->store);
}

static void dw_bw(qat_ctx *ctx, qat_node *node) {
    const dw_plan *pl = &((const dw_saved *)node->saved)->pl;
    const qat__conv_dims *d = &pl->d;
    qat_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    dw_job j = {.pl = pl, .x = x->data, .gy = node->out->grad, .w = w->data}; /* gy [N, C*M, OH, OW] */
    j.gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &j.store) : NULL;
    j.gw = qat__wants_grad(w) ? qat__grad(ctx, w) : NULL, j.gb = qat__wants_grad(b) ? qat__grad(ctx, b) : NULL;
    int workers = qat__workers(ctx);
    j.wk = qat__step_scratch(ctx, (size_t)workers * sizeof *j.wk);
    if ((qat__wants_grad(x) && !j.gx) || (qat__wants_grad(w) && !j.gw) || (qat__wants_grad(b) && !j.gb) || !j.wk)
        return;
    for (int i = 0; i < workers; i++)
        if (!dw_work_init(ctx, pl, j.gw != NULL, j.gx != NULL, &j.wk[i])) return;
    qat__par(ctx, d->G, dw_bw_task, &j);
}

static void dw_fw_task(void *u, int64_t c, int worker) {
    const dw_job *j = u;
    const dw_plan *pl = j->pl;
    const qat__conv_dims *d = &pl->d;
    int64_t M = d->O, CM = d->G * M, KK = d->KH * d->KW, OHW = d->OH * d->OW;
    float *planes = j->planes + worker * pl->phases * pl->PL, *yr = j->yr + worker * pl->L;
    qat__rows out = {.planes = d->N, .rows = d->OH, .dplane = CM * OHW, .dpitch = d->OW, .splane = pl->B,
                     .spitch = pl->P, .width = d->OW};
    stack_build(pl, c, j->x, planes);
    for (int64_t m = 0; m < M; m++) {
        int64_t o = c * M + m;
        dw_weighted_run_at(pl->simd, planes, pl->tap_at, j->w + o * KK, KK, j->b ? j->b[o] : 0.0f, pl->L, yr);
        pl->copy(&out, j->y + o * OHW, yr);
    }
}

/* ---- forward ----------------------------------------------------------------------------- */

qat_tensor *qat__conv2d_depthwise(qat_ctx *ctx, const char *name, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                                  const qat__conv_dims *d) {
    int64_t CM = d->G * d->O;
    int64_t shape[4] = {d->N, CM, d->OH, d->OW};
    dw_saved *s = qat__step_alloc(ctx, sizeof *s);
    if (!s || !dw_plan_init(ctx, &s->pl, d)) return NULL;
    const dw_plan *pl = &s->pl;
    qat_tensor *y = qat__new_out(ctx, 4, shape);
    int64_t workers = qat__workers(ctx);
    /* per thread: one channel's stack (zeroed once), one output's run */
    float *planes = qat__step_alloc(ctx, (size_t)(workers * pl->phases * pl->PL) * sizeof(float));
    float *yr = qat__step_scratch(ctx, (size_t)(workers * pl->L) * sizeof(float));
    if (!y || !planes || !yr) return NULL;
    dw_job j = {.pl = pl, .x = x->data, .w = w->data, .b = b ? b->data : NULL, .y = y->data, .planes = planes, .yr = yr};
    qat__par(ctx, d->G, dw_fw_task, &j);
    qat_node *node = qat__record(ctx, name, dw_bw, y, x, w, b);
    if (node) node->saved = s, node->out_free = true;
    return y;
}
