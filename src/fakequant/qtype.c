/* The uniform quantized type: storage ranges, granularity as block sizes,
 * qparams from ranges (contract §3), quantize and dequantize. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "autograd/op_api.h"
#include "internal.h"

qat_status qat_qtype_init_blocks(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed, bool narrow, int rank,
                                 const int64_t *shape, const int64_t *block, bool ragged) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || rank < 0 || rank > QAT_MAX_RANK || (rank > 0 && !shape))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qtype: bad arguments");
    memset(q, 0, sizeof *q);
    if (qat_storage_range(bits, is_signed, narrow, &q->qmin, &q->qmax) != QAT_OK)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qtype: %s%d%s is not a storage type (2 to 16 bits; "
                            "narrow range only for signed)", is_signed ? "i" : "u", bits, narrow ? " narrow" : "");
    q->bits = bits, q->is_signed = is_signed, q->rank = rank, q->nparams = 1;
    for (int d = 0; d < rank; d++) {
        int64_t n = shape[d], b = block && block[d] > 0 ? block[d] : n;
        if (n < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qtype: dimension %d is %lld", d, (long long)n);
        if (b > n && ragged) b = n; /* one block, shorter than asked: the whole dimension */
        if (b > n)
            return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qtype: block size %lld is larger than dimension %d of size "
                                "%lld (need 1 <= block <= dim)", (long long)b, d, (long long)n);
        if (n % b && !ragged)
            return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qtype: block size %lld does not divide dimension %d of size "
                                "%lld (need dim %% block == 0, or a ragged last block)", (long long)b, d, (long long)n);
        q->shape[d] = n, q->block[d] = b, q->pshape[d] = (n + b - 1) / b; /* ragged: the last block is shorter */
        q->nparams *= q->pshape[d];
    }
    q->scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)q->nparams * sizeof(float));
    q->zero_point = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)q->nparams * sizeof(int32_t));
    if (!q->scale || !q->zero_point) return qat_ctx_status(ctx);
    for (int64_t i = 0; i < q->nparams; i++) q->scale[i] = 1.0f;
    return QAT_OK;
}

qat_status qat_qtype_init(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed, bool narrow, int rank,
                          const int64_t *shape, const int64_t *block) {
    return qat_qtype_init_blocks(ctx, q, bits, is_signed, narrow, rank, shape, block, false);
}

qat_status qat_qtype_init_axis(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed, bool narrow,
                               int rank, const int64_t *shape, int axis) {
    if (ctx && (axis < 0 || axis >= rank))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qtype: axis %d outside a rank-%d tensor", axis, rank);
    int64_t block[QAT_MAX_RANK] = {0};
    block[axis] = 1;
    return qat_qtype_init(ctx, q, bits, is_signed, narrow, rank, shape, block);
}

int64_t qat__qtype_run_len(const qat_qtype *q, int64_t s) {
    int64_t inner = 1;
    for (int d = q->rank - 1; d >= 0; d--) {
        if (q->block[d] != q->shape[d]) { /* the innermost split dimension: its block (or the ragged rest) */
            int64_t c = (s / inner) % q->shape[d], end = (c / q->block[d] + 1) * q->block[d];
            return ((end < q->shape[d] ? end : q->shape[d]) - c) * inner;
        }
        inner *= q->shape[d];
    }
    return inner - s; /* per-tensor: everything from s */
}

int64_t qat__qtype_fixed_run(const qat_qtype *q) {
    int64_t inner = 1;
    for (int d = q->rank - 1; d >= 0; d--) {
        if (q->block[d] != q->shape[d]) return q->shape[d] % q->block[d] ? 0 : q->block[d] * inner;
        inner *= q->shape[d];
    }
    return inner;
}

int64_t qat__qtype_numel(const qat_qtype *q) {
    int64_t n = 1;
    for (int d = 0; d < q->rank; d++) n *= q->shape[d];
    return n;
}

void qat_qparams_from_range(float min, float max, int32_t qmin, int32_t qmax, bool symmetric,
                            bool is_signed, float *scale, int32_t *zp) {
    if (!scale || !zp) return;
    float lo = fminf(min, 0.0f), hi = fmaxf(max, 0.0f);
    float s;
    int32_t z;
    if (symmetric) {
        float m = fmaxf(-lo, hi);
        s = m / ((float)(qmax - qmin) / 2.0f);
        s = fmaxf(s, FLT_EPSILON);
        z = is_signed ? 0 : (qmin + qmax + 1) / 2;
    } else {
        s = (hi - lo) / (float)(qmax - qmin);
        s = fmaxf(s, FLT_EPSILON);
        float zf = (float)qmin - nearbyintf(lo / s);
        z = zf < (float)qmin ? qmin : zf > (float)qmax ? qmax : (int32_t)zf;
    }
    *scale = s;
    *zp = z;
}

void qat_qtype_calibrate(qat_qtype *q, const float *x, bool symmetric) {
    if (!q || !x) return;
    int64_t n = qat__qtype_numel(q), fixed = qat__qtype_fixed_run(q);
    /* One pass over x. Until the end, scale[p] holds the block's minimum and
     * zero_point[p] the bits of its maximum (same size; memcpy is the legal pun). */
    float neg_inf = -INFINITY;
    for (int64_t p = 0; p < q->nparams; p++) {
        q->scale[p] = INFINITY;
        memcpy(&q->zero_point[p], &neg_inf, sizeof(float));
    }
    for (int64_t s = 0, run; s < n; s += run) {
        run = QAT__RUN(q, fixed, s);
        int64_t p = qat_qtype_param_index(q, s);
        float lo = q->scale[p], hi;
        memcpy(&hi, &q->zero_point[p], sizeof hi);
        qat__minmax(x + s, run, &lo, &hi);
        q->scale[p] = lo;
        memcpy(&q->zero_point[p], &hi, sizeof hi);
    }
    for (int64_t p = 0; p < q->nparams; p++) {
        float lo = q->scale[p], hi;
        memcpy(&hi, &q->zero_point[p], sizeof hi);
        qat_qparams_from_range(lo, hi, q->qmin, q->qmax, symmetric, q->is_signed, &q->scale[p],
                               &q->zero_point[p]);
    }
}

void qat_quantize(const qat_qtype *q, const float *x, int32_t *out) {
    if (!q || !x || !out) return;
    int64_t n = qat__qtype_numel(q), fixed = qat__qtype_fixed_run(q);
    for (int64_t s = 0, run; s < n; s += run) {
        run = QAT__RUN(q, fixed, s);
        int64_t p = qat_qtype_param_index(q, s);
        float inv = 1.0f / q->scale[p];
        int32_t zp = q->zero_point[p];
        for (int64_t j = 0; j < run; j++) out[s + j] = qat__quant1(x[s + j], inv, zp, q->qmin, q->qmax, NULL);
    }
}

void qat_dequantize(const qat_qtype *q, const int32_t *qv, float *out) {
    if (!q || !qv || !out) return;
    int64_t n = qat__qtype_numel(q), fixed = qat__qtype_fixed_run(q);
    for (int64_t s = 0, run; s < n; s += run) {
        run = QAT__RUN(q, fixed, s);
        int64_t p = qat_qtype_param_index(q, s);
        for (int64_t j = 0; j < run; j++)
            out[s + j] = (float)(qv[s + j] - q->zero_point[p]) * q->scale[p];
    }
}

/* qat_qtype_calibrate over ctx's pool when the blocks allow it: one
 * (scale, zero point) for the whole tensor (its range over the pool), or
 * one per run in order (per-channel weights: a task per run of channels);
 * each block's range is computed as the one-thread loop computes it.
 * Other layouts (a block's runs scattered) stay on one thread. */
typedef struct {
    qat_qtype *q;
    const float *x;
    int64_t run, per_task, runs;
    bool symmetric;
} calib_job;

static void calib_task(void *u, int64_t t, int worker) {
    const calib_job *j = u;
    (void)worker;
    int64_t r1 = (t + 1) * j->per_task < j->runs ? (t + 1) * j->per_task : j->runs;
    for (int64_t r = t * j->per_task; r < r1; r++) {
        float lo = INFINITY, hi = -INFINITY;
        qat__minmax(j->x + r * j->run, j->run, &lo, &hi);
        qat_qparams_from_range(lo, hi, j->q->qmin, j->q->qmax, j->symmetric, j->q->is_signed, &j->q->scale[r],
                               &j->q->zero_point[r]);
    }
}

void qat__qtype_calibrate_par(qat_ctx *ctx, qat_qtype *q, const float *x, bool symmetric) {
    /* fixed: 0 when a ragged block makes runs of two lengths (one thread) */
    int64_t run = qat__qtype_fixed_run(q), n = qat__qtype_numel(q), runs = run > 0 ? n / run : 0;
    if (q->nparams == 1) {
        float lo = INFINITY, hi = -INFINITY;
        qat__minmax_par(ctx, x, n, &lo, &hi);
        qat_qparams_from_range(lo, hi, q->qmin, q->qmax, symmetric, q->is_signed, &q->scale[0], &q->zero_point[0]);
        return;
    }
    bool in_order = runs == q->nparams && n >= QAT__GRAIN;
    for (int64_t r = 0; in_order && r < runs; r++) in_order = qat_qtype_param_index(q, r * run) == r;
    if (!in_order) {
        qat_qtype_calibrate(q, x, symmetric);
        return;
    }
    calib_job j = {q, x, run, run >= QAT__GRAIN ? 1 : QAT__GRAIN / run, runs, symmetric};
    qat__par(ctx, (runs + j.per_task - 1) / j.per_task, calib_task, &j);
}

/* The least float32 of at most 16 significant bits that is >= u (u > 0,
 * in float32's normal range): its 16-bit mantissa rounded up. */
static float round_up_16(double u) {
    int e;
    double f = frexp(u, &e); /* u = f · 2^e, f in [1/2, 1) */
    return (float)ldexp(ceil(ldexp(f, 16)), e - 16);
}

void qat_qtype_compact_scales(qat_qtype *q, int bits, float *row_scale, int32_t *sub) {
    if (!q) return; /* row_scale and sub may be NULL */
    int64_t rows = q->rank ? q->pshape[0] : 1, J = q->nparams / rows;
    int32_t Q = (int32_t)((1u << bits) - 1);
    for (int64_t r = 0; r < rows; r++) {
        float *s = q->scale + r * J, smax = 0;
        for (int64_t j = 0; j < J; j++) smax = fmaxf(smax, s[j]);
        float so = round_up_16((double)smax / Q);
        if (row_scale) row_scale[r] = so;
        for (int64_t j = 0; j < J; j++) {
            /* ceil of the double quotient, corrected by exact products
             * (q · s_r has at most 8 + 24 bits: exact in double) */
            double c = ceil((double)s[j] / (double)so);
            int32_t k = c < 1 ? 1 : c > Q ? Q : (int32_t)c;
            while (k > 1 && (double)(k - 1) * so >= (double)s[j]) k--;
            while (k < Q && (double)k * so < (double)s[j]) k++;
            if (sub) sub[r * J + j] = k;
            s[j] = so * (float)k; /* exact: a 16-bit mantissa times an 8-bit integer */
        }
    }
}
