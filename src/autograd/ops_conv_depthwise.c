/* Depthwise 2-d convolution (groups == input channels): direct kernels,
 * no im2col and no sgemm. x [N, C, H, W], w [C*M, 1, KH, KW] (M outputs
 * per channel, output o = c*M + m reads channel c), b [C*M] or NULL,
 * y [N, C*M, OH, OW].
 *
 * Each output plane is a sum of KH*KW shifted copies of its input plane,
 * each scaled by one weight. To make every shifted copy one contiguous run
 * (the compiler vectorises a contiguous loop; the rows themselves are only
 * 7 to 28 floats), the zero-padded input plane [Hp, Wp] is split into
 * sh*sw "phase planes", phase (a, b) holding the padded elements (r*sh + a,
 * q*sw + b), all at one row pitch P = ceil(Wp / sw). Output (oh, ow) then
 * reads tap (kh, kw) from phase (kh % sh, kw % sw) at flat index
 * oh*P + ow + off(kh, kw), off = (kh / sh)*P + kw / sw: the same shift for
 * every output. So the output is computed at pitch P too, OH rows of P
 * floats flattened into one run (the columns past OW are thrown away), and
 * every loop runs over whole blocks of DW_LANES floats, with no tails
 * (the buffers are padded with zeros to fit). At stride 1 there is one
 * phase: the padded plane itself.
 *
 * Backward rebuilds the phase planes (cheaper than the memory traffic of
 * keeping every sample's). dw[o, tap] correlates the output gradient (at
 * pitch P, zeros in the thrown-away columns) with the tap's shifted run;
 * dx is the adjoint, gathered per phase plane: each element sums w * dy
 * over the taps that read it, then lands in x's gradient. Every sum has a
 * fixed order, whatever the vector width: outputs add the bias then the
 * taps in (kh, kw) order; input gradients add over m then (kh, kw); each
 * weight gradient keeps DW_LANES float lanes (lane j sums the elements
 * j mod DW_LANES of each run, sample after sample), folded in halves at
 * the end.
 *
 * The work goes a whole sample at a time, each stage over all its
 * channels: fewer calls per (tiny) plane, and each stage's loads come well
 * after the previous stage stored their data (a load that spans several
 * recent stores waits for them). The row copies into and out of the
 * pitch-P layout are qat__rows_place / _add, with AVX-512 versions. */
#include <string.h>

#include "internal.h"

#define DW_LANES 32

/* GCC's -O3 unroll-and-jam fuses the term loops below with the block
 * loops around them and turns the vector code into scalar code running
 * 3-4x slower; this keeps the loops as written. */
#if defined(__GNUC__) && !defined(__clang__)
#define DW_NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define DW_NO_JAM
#endif
#ifdef __GNUC__
#define DW_INLINE static inline __attribute__((always_inline))
#else
#define DW_INLINE static inline
#endif

typedef struct {
    qat__conv_dims d; /* C == 1, O == M, G == channels */
    int64_t P;        /* pitch of every phase plane and of the output runs */
    int64_t PH;       /* rows of a phase plane: ceil(Hp / sh) */
    int64_t L;        /* an output run: OH*P rounded up to DW_LANES */
    int64_t LG;       /* a phase plane's real part PH*P rounded up to DW_LANES */
    int64_t max_off;  /* the largest tap offset */
    int64_t PL;       /* floats per phase plane: real part, then zeros */
    int64_t CS;       /* floats per channel's planes: phases*PL */
    int64_t E;        /* floats per output-gradient run: max_off zeros, the run, zeros */
    int64_t phases;   /* sh*sw */
    int64_t *tap_off; /* [KH*KW] offset of each tap in its phase plane */
    int64_t *tap_ph;  /* [KH*KW] its phase plane */
    int64_t *tap_at;  /* [KH*KW] where its run starts in a channel's planes: tap_ph*PL + tap_off */
    qat__rows_fn place, add;
} dw_plan;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static bool dw_plan_init(qat_ctx *ctx, dw_plan *pl, const qat__conv_dims *d) {
    pl->d = *d;
    int64_t Hp = d->H + 2 * d->ph, Wp = d->W + 2 * d->pw, KK = d->KH * d->KW;
    pl->P = (Wp + d->sw - 1) / d->sw;
    pl->PH = (Hp + d->sh - 1) / d->sh;
    pl->L = round_up(d->OH * pl->P, DW_LANES);
    pl->LG = round_up(pl->PH * pl->P, DW_LANES);
    pl->max_off = (d->KH - 1) / d->sh * pl->P + (d->KW - 1) / d->sw;
    int64_t need = pl->L + pl->max_off > pl->PH * pl->P ? pl->L + pl->max_off : pl->PH * pl->P;
    pl->PL = round_up(need, 16); /* 64-byte aligned planes */
    pl->phases = d->sh * d->sw;
    pl->CS = pl->phases * pl->PL;
    pl->E = round_up(pl->max_off + (pl->L > pl->LG ? pl->L : pl->LG), 16);
    pl->place = qat__rows_place;
    pl->add = qat__rows_add;
#if QAT__CONV_AVX512
    if (qat__have_avx512f()) pl->place = qat__rows_place_avx512, pl->add = qat__rows_add_avx512;
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

void qat__rows_place(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *restrict d = dst + p * g->dplane + r * g->dpitch;
            const float *restrict s = src + p * g->splane + r * g->spitch;
            for (int64_t q = 0; q < g->at; q++) d[q] = 0.0f;
            for (int64_t q = 0; q < g->width; q++) d[g->at + q] = s[q];
            for (int64_t q = g->at + g->width; q < g->dwidth; q++) d[q] = 0.0f;
        }
}

void qat__rows_add(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *restrict d = dst + p * g->dplane + r * g->dpitch + g->at;
            const float *restrict s = src + p * g->splane + r * g->spitch;
            for (int64_t q = 0; q < g->width; q++) d[q] += s[q];
        }
}

/* ---- the phase planes ---------------------------------------------------------------- */

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

/* The phase planes [C, phases, PL] of one sample xs [C, H, W]. Only the
 * rows that hold input are written: the rest (padding rows, the zero
 * tail) were zeroed once, when the buffer was allocated, and stay zero. */
static void build_planes(const dw_plan *pl, const float *xs, float *planes) {
    const qat__conv_dims *d = &pl->d;
    for (int64_t a = 0; a < d->sh; a++)
        for (int64_t b = 0; b < d->sw; b++) {
            float *p = planes + (a * d->sw + b) * pl->PL;
            int64_t r0, r1, q0, q1;
            phase_range(a, d->sh, d->ph, d->H, pl->PH, &r0, &r1);
            phase_range(b, d->sw, d->pw, d->W, pl->P, &q0, &q1);
            if (r1 == r0) continue;
            const float *x0 = xs + (r0 * d->sh + a - d->ph) * d->W; /* the input row of plane row r0 */
            if (d->sw == 1) { /* each row: pw zeros, the input row, zeros */
                qat__rows g = {.planes = d->G, .rows = r1 - r0, .dplane = pl->CS, .dpitch = pl->P, .dwidth = pl->P,
                               .splane = d->H * d->W, .spitch = d->sh * d->W, .at = d->pw, .width = d->W};
                pl->place(&g, p + r0 * pl->P, x0);
                continue;
            }
            for (int64_t c = 0; c < d->G; c++) /* every sw-th input element */
                for (int64_t r = r0; r < r1; r++) {
                    float *restrict row = p + c * pl->CS + r * pl->P;
                    const float *restrict xr = x0 + c * d->H * d->W + (r - r0) * d->sh * d->W;
                    for (int64_t q = 0; q < q0; q++) row[q] = 0.0f;
                    for (int64_t q = q0; q < q1; q++) row[q] = xr[q * d->sw + b - d->pw]; /* padded column q*sw + b */
                    for (int64_t q = q1; q < pl->P; q++) row[q] = 0.0f;
                }
        }
}

/* The inverse for a gradient: phase planes gplanes [C, phases, LG] back
 * into one sample's gxs [C, H, W], dropping the padding; stored or added.
 * Every input element sits in exactly one phase plane, so storing writes
 * all of gxs. */
static void unphase_planes(const dw_plan *pl, const float *gplanes, float *gxs, bool store) {
    const qat__conv_dims *d = &pl->d;
    for (int64_t a = 0; a < d->sh; a++)
        for (int64_t b = 0; b < d->sw; b++) {
            const float *p = gplanes + (a * d->sw + b) * pl->LG;
            int64_t r0, r1, q0, q1;
            phase_range(a, d->sh, d->ph, d->H, pl->PH, &r0, &r1);
            phase_range(b, d->sw, d->pw, d->W, pl->P, &q0, &q1);
            if (r1 == r0) continue;
            float *g0 = gxs + (r0 * d->sh + a - d->ph) * d->W;
            if (d->sw == 1) {
                qat__rows g = {.planes = d->G, .rows = r1 - r0, .dplane = d->H * d->W, .dpitch = d->sh * d->W,
                               .dwidth = d->W, .splane = pl->phases * pl->LG, .spitch = pl->P, .at = 0, .width = d->W};
                (store ? pl->place : pl->add)(&g, g0, p + r0 * pl->P + d->pw);
                continue;
            }
            for (int64_t c = 0; c < d->G; c++)
                for (int64_t r = r0; r < r1; r++) {
                    float *restrict gr = g0 + c * d->H * d->W + (r - r0) * d->sh * d->W;
                    const float *restrict row = p + c * pl->phases * pl->LG + r * pl->P;
                    int64_t off = b - d->pw;
                    if (store)
                        for (int64_t q = q0; q < q1; q++) gr[q * d->sw + off] = row[q];
                    else
                        for (int64_t q = q0; q < q1; q++) gr[q * d->sw + off] += row[q];
                }
        }
}

/* ---- the kernels ----------------------------------------------------------------------- */

/* out[0..len) = init + Σ_t wts[t] · base[offs[t] .. offs[t] + len), the
 * terms added in t order, in blocks of DW_LANES held in registers across
 * the terms. len is a multiple of DW_LANES. */
DW_INLINE void weighted_run(const float *restrict base, const int64_t *restrict offs, const float *restrict wts,
                            int64_t n, float init, int64_t len, float *restrict out) {
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

/* One sample's output runs yr [C*M, L]: bias plus the taps, from its phase
 * planes [C, CS]. */
QAT__SIMD_CLONES DW_NO_JAM
static void dw_forward_sample(const dw_plan *pl, const float *planes, const float *w, const float *bias, float *yr) {
    int64_t KK = pl->d.KH * pl->d.KW, M = pl->d.O;
    for (int64_t o = 0; o < pl->d.G * M; o++)
        weighted_run(planes + o / M * pl->CS, pl->tap_at, w + o * KK, KK, bias ? bias[o] : 0.0f, pl->L, yr + o * pl->L);
}

/* The input gradient's terms, grouped by the phase plane they land in:
 * phase q's are [start[q], start[q+1]), in (m, kh, kw) order; term k reads
 * a channel's output-gradient runs [M, E] from offset off[k]. wts [C, T]
 * holds each channel's weight for each term (T terms in all). */
typedef struct {
    int64_t *start, *off, T;
    float *wts;
} dw_terms;

static bool dw_terms_init(qat_ctx *ctx, const dw_plan *pl, const float *w, dw_terms *tm) {
    int64_t KK = pl->d.KH * pl->d.KW, M = pl->d.O, C = pl->d.G, k = 0;
    tm->T = M * KK;
    tm->start = qat__step_scratch(ctx, (size_t)(pl->phases + 1 + tm->T) * sizeof(int64_t));
    tm->wts = qat__step_scratch(ctx, (size_t)(C * tm->T) * sizeof(float));
    if (!tm->start || !tm->wts) return false;
    tm->off = tm->start + pl->phases + 1;
    for (int64_t q = 0; q < pl->phases; q++) {
        tm->start[q] = k;
        for (int64_t m = 0; m < M; m++)
            for (int64_t t = 0; t < KK; t++)
                if (pl->tap_ph[t] == q) {
                    tm->off[k] = m * pl->E + pl->max_off - pl->tap_off[t];
                    for (int64_t c = 0; c < C; c++) tm->wts[c * tm->T + k] = w[(c * M + m) * KK + t];
                    k++;
                }
    }
    tm->start[pl->phases] = k;
    return true;
}

/* One sample's input gradient, phase plane by phase plane: gplanes
 * [C, phases, LG] from its output-gradient runs gyr [C*M, E]. */
QAT__SIMD_CLONES DW_NO_JAM
static void dw_input_grad_sample(const dw_plan *pl, const dw_terms *tm, const float *gyr, float *gplanes) {
    for (int64_t c = 0; c < pl->d.G; c++)
        for (int64_t q = 0; q < pl->phases; q++)
            weighted_run(gyr + c * pl->d.O * pl->E, tm->off + tm->start[q], tm->wts + c * tm->T + tm->start[q],
                         tm->start[q + 1] - tm->start[q], 0.0f, pl->LG, gplanes + (c * pl->phases + q) * pl->LG);
}

/* lanes [C*M, KK, DW_LANES] += one sample's products: for output o and tap
 * t, lane j adds g[i] · (tap t's run)[i] for i = j mod DW_LANES, in
 * increasing i, g the output-gradient run of o. A tap's lanes stay in
 * registers across the run. */
QAT__SIMD_CLONES DW_NO_JAM
static void dw_weight_lanes_sample(const dw_plan *pl, const float *planes, const float *gyr, float *lanes) {
    int64_t KK = pl->d.KH * pl->d.KW, M = pl->d.O;
    for (int64_t o = 0; o < pl->d.G * M; o++) {
        const float *restrict g = gyr + o * pl->E + pl->max_off, *restrict base = planes + o / M * pl->CS;
        for (int64_t t = 0; t < KK; t++) {
            float *restrict lt = lanes + (o * KK + t) * DW_LANES, a[DW_LANES];
            const float *restrict s = base + pl->tap_at[t];
            for (int j = 0; j < DW_LANES; j++) a[j] = lt[j];
            for (int64_t i = 0; i < pl->L; i += DW_LANES)
                for (int j = 0; j < DW_LANES; j++) a[j] += g[i + j] * s[i + j];
            for (int j = 0; j < DW_LANES; j++) lt[j] = a[j];
        }
    }
}

/* Σ of DW_LANES lanes, folded in halves. */
static float fold_lanes(float *lane) {
    for (int w = DW_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) lane[j] += lane[j + w];
    return lane[0];
}

/* ---- backward ---------------------------------------------------------------------------- */

typedef struct {
    dw_plan pl;
} dw_saved;

/* Working memory of the backward, for one sample at a time. */
typedef struct {
    float *planes;  /* [C, CS] the sample's phase planes (for dw) */
    float *gyr;     /* [C*M, E] its output-gradient runs: max_off zeros, the
                     * rows at pitch P with zeros past OW, zeros */
    float *gplanes; /* [C, phases, LG] its input gradient, phase by phase */
    float *lanes;   /* [C*M, KK, DW_LANES] the weight-gradient lanes, over all samples */
    dw_terms tm;
} dw_work;

static bool dw_work_init(qat_ctx *ctx, const dw_plan *pl, const float *w, bool want_w, bool want_x, dw_work *wk) {
    int64_t C = pl->d.G, CM = C * pl->d.O, KK = pl->d.KH * pl->d.KW;
    /* zeroed once: the row copies only ever write the rows holding data */
    wk->gyr = qat__step_alloc(ctx, (size_t)(CM * pl->E) * sizeof(float));
    wk->planes = want_w ? qat__step_alloc(ctx, (size_t)(C * pl->CS) * sizeof(float)) : NULL;
    wk->lanes = want_w ? qat__step_alloc(ctx, (size_t)(CM * KK * DW_LANES) * sizeof(float)) : NULL;
    wk->gplanes = want_x ? qat__step_scratch(ctx, (size_t)(C * pl->phases * pl->LG) * sizeof(float)) : NULL;
    if (!wk->gyr || (want_w && (!wk->planes || !wk->lanes)) || (want_x && !wk->gplanes)) return false;
    return !want_x || dw_terms_init(ctx, pl, w, &wk->tm);
}

static void dw_bw(qat_ctx *ctx, qat_node *node) {
    const dw_plan *pl = &((const dw_saved *)node->saved)->pl;
    const qat__conv_dims *d = &pl->d;
    qat_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int64_t C = d->G, CM = C * d->O, KK = d->KH * d->KW, CHW = C * d->H * d->W, OHW = d->OH * d->OW;
    const float *gy = node->out->grad; /* [N, C*M, OH, OW] */
    bool store = false;
    float *gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &store) : NULL;
    float *gw = qat__wants_grad(w) ? qat__grad(ctx, w) : NULL;
    dw_work wk;
    if ((qat__wants_grad(x) && !gx) || (qat__wants_grad(w) && !gw) || !dw_work_init(ctx, pl, w->data, gw != NULL, gx != NULL, &wk))
        return;
    qat__rows runs = {.planes = CM, .rows = d->OH, .dplane = pl->E, .dpitch = pl->P, .dwidth = pl->P,
                      .splane = OHW, .spitch = d->OW, .at = 0, .width = d->OW};
    for (int64_t n = 0; n < d->N; n++) {
        pl->place(&runs, wk.gyr + pl->max_off, gy + n * CM * OHW);
        if (gw) {
            build_planes(pl, x->data + n * CHW, wk.planes);
            dw_weight_lanes_sample(pl, wk.planes, wk.gyr, wk.lanes);
        }
        if (gx) {
            dw_input_grad_sample(pl, &wk.tm, wk.gyr, wk.gplanes);
            unphase_planes(pl, wk.gplanes, gx + n * CHW, store);
        }
    }
    if (gw)
        for (int64_t k = 0; k < CM * KK; k++) gw[k] += fold_lanes(wk.lanes + k * DW_LANES);
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (gb) qat__conv_bias_grad(d->N, CM, OHW, gy, gb);
    }
}

/* ---- forward ----------------------------------------------------------------------------- */

qat_tensor *qat__conv2d_depthwise(qat_ctx *ctx, const char *name, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                                  const qat__conv_dims *d) {
    int64_t C = d->G, CM = C * d->O, CHW = C * d->H * d->W, OHW = d->OH * d->OW;
    int64_t shape[4] = {d->N, CM, d->OH, d->OW};
    dw_saved *s = qat__step_alloc(ctx, sizeof *s);
    if (!s || !dw_plan_init(ctx, &s->pl, d)) return NULL;
    const dw_plan *pl = &s->pl;
    qat_tensor *y = qat__new_out(ctx, 4, shape);
    float *planes = qat__step_alloc(ctx, (size_t)(C * pl->CS) * sizeof(float)); /* one sample's; zeroed once */
    float *yr = qat__step_scratch(ctx, (size_t)(CM * pl->L) * sizeof(float));   /* its output runs */
    if (!y || !planes || !yr) return NULL;
    qat__rows out = {.planes = CM, .rows = d->OH, .dplane = OHW, .dpitch = d->OW, .dwidth = d->OW,
                     .splane = pl->L, .spitch = pl->P, .at = 0, .width = d->OW};
    for (int64_t n = 0; n < d->N; n++) {
        build_planes(pl, x->data + n * CHW, planes);
        dw_forward_sample(pl, planes, w->data, b ? b->data : NULL, yr);
        pl->place(&out, y->data + n * CM * OHW, yr);
    }
    qat_node *node = qat__record(ctx, name, dw_bw, y, x, w, b);
    if (node) node->saved = s;
    return y;
}
