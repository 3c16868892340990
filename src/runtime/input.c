/* The raw input's way into the integer program (qat/runtime.h): the
 * program's normalization in float32, then the input quantization, as one
 * element function that both the float path and the byte table use, so
 * that the table holds the float path's integers by construction. The
 * host engines (qat/infer.h) and the C generator's byte table go through
 * it. Float at the edge of the program, no libm: the rounding is the
 * 2^23 trick. */
#include "qat/runtime.h"

/* round half to even of v clamped to [lo, hi] (|lo|, |hi| < 2^23): adding
 * ±2^23 leaves no fraction bits and rounds ties to even. The fake
 * quantization's qat__rint_clamped (src/fakequant/internal.h) takes the
 * sign by copysignf; the sign test gives the same value for every v but
 * NaN (a -0 and a +0 differ only in sign, which the integer conversion
 * drops), and the callers replace NaN before. */
static inline float rint_clamped(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    float t = v < 0.0f ? -8388608.0f : 8388608.0f;
    return (v + t) - t;
}

typedef struct {
    float inv, lo, hi; /* 1/scale, and qmin - zp, qmax - zp */
    int32_t zp;
    float d;           /* the divisor (normalized inputs only) */
} in_params;

static in_params params_of(const qat_qmodel *q) {
    const qat_aparams *a = &q->tensors[q->input].q;
    return (in_params){.inv = 1.0f / a->scale, .lo = (float)(a->qmin - a->zero_point),
                       .hi = (float)(a->qmax - a->zero_point), .zp = a->zero_point,
                       .d = q->norm ? q->norm->divisor : 1.0f};
}

/* clamp(round_half_even(v·(1/scale)) + zp, qmin, qmax), exactly as the
 * fake quantization rounds (the product in float32), branch-free; NaN
 * becomes zp (real 0): an integer has no NaN. */
static inline int8_t quantize1(float v, const in_params *p) {
    v *= p->inv;
    return (int8_t)((int32_t)rint_clamped(v == v ? v : 0.0f, p->lo, p->hi) + p->zp);
}

/* The normalization of channel (mu, sd), then the quantization: three
 * float32 operations each rounded, as the training forward (qat_normalize). */
static inline int8_t normalize_quantize1(float x, const in_params *p, float mu, float sd) {
    return quantize1(((x / p->d) - mu) / sd, p);
}

/* The channel planes of one sample: C of per elements (C = 1 without a
 * normalization, or with one of one channel: every element). */
static void planes(const qat_qmodel *q, int64_t *C, int64_t *per) {
    int64_t numel = qat_qtensor_numel(&q->tensors[q->input]);
    *C = q->norm ? q->norm->channels : 1;
    *per = numel / *C;
}

void qat_input_quantize(const qat_qmodel *q, const float *restrict x, int64_t n, int8_t *restrict out) {
    if (!q || !x || !out) return;
    in_params p = params_of(q);
    int64_t C, per;
    planes(q, &C, &per);
    if (!q->norm) { /* one loop the compiler vectorises */
        for (int64_t i = 0; i < n * C * per; i++) out[i] = quantize1(x[i], &p);
        return;
    }
    for (int64_t s = 0; s < n * C; s++) { /* plane s: channel s % C */
        float mu = q->norm->mean[s % C], sd = q->norm->std[s % C];
        const float *restrict xs = x + s * per;
        int8_t *restrict os = out + s * per;
        for (int64_t i = 0; i < per; i++) os[i] = normalize_quantize1(xs[i], &p, mu, sd);
    }
}

int qat_input_table_channels(const qat_qmodel *q) { return q && q->norm ? q->norm->channels : 1; }

qat_status qat_input_table(const qat_qmodel *q, int8_t *table) {
    if (!q || !table || !q->tensors || q->input < 0 || q->input >= q->n_tensors) return QAT_ERR_ARG;
    const qat_aparams *a = &q->tensors[q->input].q;
    if (a->qmin < INT8_MIN || a->qmax > INT8_MAX) return QAT_ERR_UNSUPPORTED; /* storage wider than a byte */
    in_params p = params_of(q);
    for (int c = 0; c < qat_input_table_channels(q); c++)
        for (int b = 0; b < 256; b++)
            table[c * 256 + b] = q->norm ? normalize_quantize1((float)b, &p, q->norm->mean[c], q->norm->std[c])
                                         : quantize1((float)b, &p);
    return QAT_OK;
}

void qat_input_lookup(const qat_qmodel *q, const int8_t *table, const uint8_t *restrict x, int64_t n,
                       int8_t *restrict out) {
    if (!q || !table || !x || !out) return;
    int64_t C, per;
    planes(q, &C, &per);
    for (int64_t s = 0; s < n * C; s++) {
        const int8_t *t = table + (s % C) * 256;
        for (int64_t i = 0; i < per; i++) out[s * per + i] = t[x[s * per + i]];
    }
}
