/* Range observers for activations (contract §4; seed
 * fluid-quantized-training-design.md). Each batch is reduced to one range,
 * then folded into the estimate by the observer's rule. */
#include <string.h>

#include "autograd/op_api.h"
#include "internal.h"

const char *qat_observer_kind_str(qat_observer_kind kind) {
    switch (kind) {
    case QAT_OBS_MINMAX: return "minmax";
    case QAT_OBS_EMA: return "ema";
    case QAT_OBS_WINDOW_MEAN: return "window-mean";
    case QAT_OBS_WINDOW_MAX: return "window-max";
    case QAT_OBS_EMA_BIAS_CORRECTED: return "ema-bias-corrected";
    }
    return "unknown";
}

qat_status qat_observer_init(qat_ctx *ctx, qat_observer *o, qat_observer_kind kind, bool symmetric,
                             int window, float k) {
    if (!ctx) return QAT_ERR_ARG;
    if (!o || (unsigned)kind > QAT_OBS_EMA_BIAS_CORRECTED)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "observer: bad kind");
    bool windowed = kind == QAT_OBS_WINDOW_MEAN || kind == QAT_OBS_WINDOW_MAX;
    if (windowed && (window < 1 || window > QAT_OBS_MAX_WINDOW))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "observer: window %d outside 1..%d", window,
                            QAT_OBS_MAX_WINDOW);
    if (!(k >= 0.0f && k < 1.0f)) return qat_ctx_fail(ctx, QAT_ERR_ARG, "observer: k = %g outside [0, 1)", (double)k);
    memset(o, 0, sizeof *o);
    o->kind = kind, o->symmetric = symmetric, o->window = windowed ? window : 0, o->k = k;
    return QAT_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QAT__MINMAX_X86 1

/* AVX-512 min/max: the compiler turns the portable loop's sixteen lanes
 * into sixteen scalar chains, not vectors. min_ps(v, acc) returns acc when
 * v is NaN, the portable rule; two accumulator pairs hide the latency;
 * the tail is a masked load. */
__attribute__((target("avx512f"))) static void minmax_avx512(const float *x, int64_t n, float *lo, float *hi) {
    __m512 l0 = _mm512_set1_ps(*lo), h0 = _mm512_set1_ps(*hi), l1 = l0, h1 = h0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        l0 = _mm512_min_ps(a, l0), h0 = _mm512_max_ps(a, h0);
        l1 = _mm512_min_ps(b, l1), h1 = _mm512_max_ps(b, h1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        l0 = _mm512_mask_min_ps(l0, m, a, l0), h0 = _mm512_mask_max_ps(h0, m, a, h0);
    }
    *lo = _mm512_reduce_min_ps(_mm512_min_ps(l0, l1));
    *hi = _mm512_reduce_max_ps(_mm512_max_ps(h0, h1));
}

/* The same with AVX2, eight lanes: GCC left the portable loop's AVX2
 * copy scalar too (vminss/vmaxss through the stack: 1.9 % of a ResNet-8
 * QAT step on a Zen core). Four accumulator pairs, so that no min or
 * max waits on the one before; the tail in scalar, the portable rule. */
__attribute__((target("avx2"))) static void minmax_avx2(const float *x, int64_t n, float *lo, float *hi) {
    __m256 l0 = _mm256_set1_ps(*lo), h0 = _mm256_set1_ps(*hi), l1 = l0, h1 = h0, l2 = l0, h2 = h0, l3 = l0, h3 = h0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
        l0 = _mm256_min_ps(a, l0), h0 = _mm256_max_ps(a, h0), l1 = _mm256_min_ps(b, l1), h1 = _mm256_max_ps(b, h1);
        l2 = _mm256_min_ps(c, l2), h2 = _mm256_max_ps(c, h2), l3 = _mm256_min_ps(d, l3), h3 = _mm256_max_ps(d, h3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        l0 = _mm256_min_ps(a, l0), h0 = _mm256_max_ps(a, h0);
    }
    float l[8], h[8];
    _mm256_storeu_ps(l, _mm256_min_ps(_mm256_min_ps(l0, l1), _mm256_min_ps(l2, l3)));
    _mm256_storeu_ps(h, _mm256_max_ps(_mm256_max_ps(h0, h1), _mm256_max_ps(h2, h3)));
    for (; i < n; i++) l[0] = x[i] < l[0] ? x[i] : l[0], h[0] = x[i] > h[0] ? x[i] : h[0];
    for (int j = 0; j < 8; j++) *lo = l[j] < *lo ? l[j] : *lo, *hi = h[j] > *hi ? h[j] : *hi;
}
#else
#define QAT__MINMAX_X86 0
#endif

static void minmax_portable(const float *restrict x, int64_t n, float *lo, float *hi) {
    enum { L = 16 };
    float l[L], h[L];
    for (int j = 0; j < L; j++) l[j] = *lo, h[j] = *hi;
    int64_t i = 0;
    for (; i + L <= n; i += L)
        for (int j = 0; j < L; j++) {
            float v = x[i + j];
            l[j] = v < l[j] ? v : l[j]; /* NaN compares false: ignored */
            h[j] = v > h[j] ? v : h[j];
        }
    for (; i < n; i++) {
        float v = x[i];
        l[0] = v < l[0] ? v : l[0];
        h[0] = v > h[0] ? v : h[0];
    }
    for (int j = 0; j < L; j++) *lo = l[j] < *lo ? l[j] : *lo, *hi = h[j] > *hi ? h[j] : *hi;
}

void qat__minmax_at(qat__simd level, const float *x, int64_t n, float *lo, float *hi) {
#if QAT__MINMAX_X86
    if (level == QAT__SIMD_AVX512) {
        minmax_avx512(x, n, lo, hi);
        return;
    }
    if (level == QAT__SIMD_AVX2) {
        minmax_avx2(x, n, lo, hi);
        return;
    }
#endif
    (void)level;
    minmax_portable(x, n, lo, hi);
}

void qat__minmax(const float *x, int64_t n, float *lo, float *hi) {
    qat__minmax_at(qat__simd_level(), x, n, lo, hi); /* a call per tensor or per 64 Ki floats */
}

/* The range over the context's pool: tasks of at least 64 Ki floats (at
 * most 256 of them), each its own partial range, folded in task order.
 * min and max are exact: the same range for any number of threads. */
#define MINMAX_GRAIN ((int64_t)1 << 16)
#define MINMAX_TASKS 256

typedef struct {
    const float *x;
    int64_t n, grain;
    float lo[MINMAX_TASKS], hi[MINMAX_TASKS];
} minmax_job;

static void minmax_task(void *u, int64_t t, int worker) {
    minmax_job *j = u;
    (void)worker;
    int64_t i0 = t * j->grain, i1 = i0 + j->grain < j->n ? i0 + j->grain : j->n;
    j->lo[t] = INFINITY, j->hi[t] = -INFINITY;
    qat__minmax(j->x + i0, i1 - i0, &j->lo[t], &j->hi[t]);
}

void qat__minmax_par(qat_ctx *ctx, const float *x, int64_t n, float *lo, float *hi) {
    int64_t grain = (n + MINMAX_TASKS - 1) / MINMAX_TASKS;
    if (grain < MINMAX_GRAIN) grain = MINMAX_GRAIN;
    if (n <= grain) {
        qat__minmax(x, n, lo, hi);
        return;
    }
    minmax_job j = {.x = x, .n = n, .grain = grain};
    int64_t tasks = (n + grain - 1) / grain;
    qat__par(ctx, tasks, minmax_task, &j);
    for (int64_t t = 0; t < tasks; t++) {
        *lo = j.lo[t] < *lo ? j.lo[t] : *lo;
        *hi = j.hi[t] > *hi ? j.hi[t] : *hi;
    }
}

void qat_observer_update(qat_observer *o, const float *x, int64_t n) {
    if (!o || !x) return;
    float lo = INFINITY, hi = -INFINITY;
    qat__minmax(x, n, &lo, &hi);
    if (lo > hi) return; /* empty or all NaN: nothing learned */
    if (o->symmetric) {
        float m = fmaxf(-lo, hi);
        lo = -m, hi = m;
    }
    int64_t t = o->updates++;
    switch (o->kind) {
    case QAT_OBS_MINMAX:
        o->min = t ? fminf(o->min, lo) : lo;
        o->max = t ? fmaxf(o->max, hi) : hi;
        break;
    case QAT_OBS_EMA: { /* PyTorch: min = min + c * (cur - min), c = 1 - k */
        float c = 1.0f - o->k;
        o->min = t ? o->min + c * (lo - o->min) : lo;
        o->max = t ? o->max + c * (hi - o->max) : hi;
        break;
    }
    case QAT_OBS_EMA_BIAS_CORRECTED:
        o->state = o->k * o->state + 1.0f;
        o->acc_min = o->k * o->acc_min + lo;
        o->acc_max = o->k * o->acc_max + hi;
        o->min = o->acc_min / o->state;
        o->max = o->acc_max / o->state;
        break;
    case QAT_OBS_WINDOW_MEAN:
    case QAT_OBS_WINDOW_MAX: {
        int w = o->window, slot = (int)(t % w), have = t + 1 < w ? (int)(t + 1) : w;
        o->win_min[slot] = lo, o->win_max[slot] = hi;
        double smin = 0, smax = 0;
        float emin = INFINITY, emax = -INFINITY;
        for (int i = 0; i < have; i++) {
            smin += o->win_min[i], smax += o->win_max[i];
            emin = fminf(emin, o->win_min[i]), emax = fmaxf(emax, o->win_max[i]);
        }
        if (o->kind == QAT_OBS_WINDOW_MEAN) o->min = (float)(smin / have), o->max = (float)(smax / have);
        else o->min = emin, o->max = emax;
        break;
    }
    }
}

void qat_observer_qparams(const qat_observer *o, qat_qtype *q) {
    if (!o || !q) return;
    qat_qparams_from_range(o->updates ? o->min : 0.0f, o->updates ? o->max : 0.0f, q->qmin, q->qmax,
                           o->symmetric, q->is_signed, &q->scale[0], &q->zero_point[0]);
}

/* Each channel's values come in runs of `inner` floats, `outer` times. The
 * batch range is gathered into a scratch pair per channel, then folded in
 * with the single-tensor rule (update on a two-element {min, max} batch). */
qat_status qat_observer_update_channels(qat_ctx *ctx, qat_observer *obs, const qat_tensor *x, int axis) {
    if (!ctx) return QAT_ERR_ARG;
    if (!obs || !x || axis < 0 || axis >= x->rank || !qat_tensor_is_contiguous(x))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "observer: bad per-channel arguments");
    int64_t C = x->shape[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < x->rank; d++) inner *= x->shape[d];
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int64_t c = 0; c < C; c++) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t o = 0; o < outer; o++) qat__minmax(x->data + (o * C + c) * inner, inner, &lo, &hi);
        float pair[2] = {lo, hi};
        if (lo <= hi) qat_observer_update(&obs[c], pair, 2);
    }
    return QAT_OK;
}

void qat_observer_qparams_channels(const qat_observer *obs, qat_qtype *q) {
    if (!obs || !q) return;
    for (int64_t c = 0; c < q->nparams; c++) {
        const qat_observer *o = &obs[c];
        qat_qparams_from_range(o->updates ? o->min : 0.0f, o->updates ? o->max : 0.0f, q->qmin, q->qmax,
                               o->symmetric, q->is_signed, &q->scale[c], &q->zero_point[c]);
    }
}
