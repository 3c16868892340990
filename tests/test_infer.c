/* Integer inference: the fixed-point requantization against hand-computed
 * values and edge cases (negative values, ties, saturation, multipliers
 * below 2^-31), and against a double-precision reference; the engines'
 * raw input path (normalization, then the input quantization) against the
 * documented formulas, on every byte value of every channel. */
#include <math.h>
#include <stdlib.h>

#include "qat/export.h"
#include "qat/infer.h"
#include "internals.h"
#include "test_util.h"

static void test_quantize_multiplier(void) {
    int32_t m0;
    int shift;
    CU_ASSERT_EQUAL(qat_quantize_multiplier(0.5, &m0, &shift), QAT_OK);
    CU_ASSERT(m0 == 1073741824 && shift == 0); /* 0.5 = 2^30 · 2^(0-31) */
    qat_quantize_multiplier(0.75, &m0, &shift);
    CU_ASSERT(m0 == 1610612736 && shift == 0);
    qat_quantize_multiplier(0.001, &m0, &shift); /* 0.001 = 0.512 · 2^-9 */
    CU_ASSERT_EQUAL(shift, -9);
    CU_ASSERT_EQUAL(m0, (int32_t)llround(0.512 * 2147483648.0));
    qat_quantize_multiplier(3.0, &m0, &shift); /* > 1: positive shift */
    CU_ASSERT(m0 == 1610612736 && shift == 2);
    /* q·2^31 rounding up to 2^31: becomes 2^30 with shift + 1 */
    qat_quantize_multiplier(1.0 - 1e-12, &m0, &shift);
    CU_ASSERT(m0 == 1073741824 && shift == 1);
    /* below 2^-31 (after rounding): nothing */
    qat_quantize_multiplier(ldexp(0.75, -40), &m0, &shift);
    CU_ASSERT(m0 == 0 && shift == 0);
    qat_quantize_multiplier(ldexp(0.75, 40), &m0, &shift);
    CU_ASSERT(m0 == INT32_MAX && shift == 30);
    qat_quantize_multiplier(0.0, &m0, &shift);
    CU_ASSERT(m0 == 0 && shift == 0);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-0.5, &m0, &shift), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(NAN, &m0, &shift), QAT_ERR_ARG);
}

static void test_srdhm(void) {
    CU_ASSERT_EQUAL(qat_srdhm(INT32_MIN, INT32_MIN), INT32_MAX); /* saturation */
    CU_ASSERT_EQUAL(qat_srdhm(1073741824, 1073741824), 536870912); /* 0.5 · 0.5 */
    CU_ASSERT_EQUAL(qat_srdhm(INT32_MAX, INT32_MAX), INT32_MAX - 1);
    /* ties: the nudge 2^30 (or 1 - 2^30 when negative) with truncating
     * division rounds half up: 1.5 -> 2, 0.5 -> 1, but -1.5 -> -1, -0.5 -> 0
     * (gemmlowp's behaviour, and the contract's formula) */
    CU_ASSERT_EQUAL(qat_srdhm(3, 1073741824), 2);
    CU_ASSERT_EQUAL(qat_srdhm(-3, 1073741824), -1);
    CU_ASSERT_EQUAL(qat_srdhm(1, 1073741824), 1);
    CU_ASSERT_EQUAL(qat_srdhm(-1, 1073741824), 0);
    CU_ASSERT_EQUAL(qat_srdhm(-5, 1073741824), -2); /* -2.5 -> -2 */
    CU_ASSERT_EQUAL(qat_srdhm(0, INT32_MIN), 0);
}

static void test_rounding_divide_by_pot(void) {
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(5, 1), 3);   /* 2.5 -> 3 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-5, 1), -3); /* -2.5 -> -3 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(7, 2), 2);   /* 1.75 -> 2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-7, 2), -2);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(6, 2), 2);   /* 1.5 -> 2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-6, 2), -2); /* -1.5 -> -2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-2, 2), -1); /* -0.5 -> -1 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(9, 0), 9);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(INT32_MAX, 31), 1);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(INT32_MIN, 31), -1);
}

/* Against x·M in double. The scheme rounds twice (SRDHM, then the shift),
 * as gemmlowp and TFLite do: when the first rounding lands on a half, the
 * second breaks that tie away from zero, so the error can exceed 0.5. It
 * never reaches 1. Hand case: x = -2123997, M = 0.2055433...: x·M·4 =
 * -1746293.6 rounds to -1746294, /4 = -436573.5 -> -436574 (exact -436573.4). */
static void test_against_double(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    int off = 0, n = 0;
    for (int k = 0; k < 2000; k++) {
        double M = ldexp(0.5 + 0.5 * qat_rng_uniform(&rng), -(int)qat_rng_below(&rng, 20));
        int32_t m0;
        int shift;
        qat_quantize_multiplier(M, &m0, &shift);
        for (int t = 0; t < 20; t++, n++) {
            int32_t x = (int32_t)(qat_rng_u32(&rng) >> 8) - (1 << 23);
            double want = x * M;
            int32_t got = qat_multiply_by_quantized_multiplier(x, m0, shift);
            double err = fabs((double)got - want);
            CU_ASSERT(err < 1.0);
            off += err > 0.5 + 1e-9;
        }
    }
    CU_ASSERT(off < n / 20); /* double-rounding ties only: about 2.5 % here */
    int32_t m0;
    int shift;
    qat_quantize_multiplier(0.205543324351, &m0, &shift);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier(-2123997, m0, shift), -436574);
    /* saturating left shift */
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier(INT32_MAX, 1073741824, 4), INT32_MAX / 2 + 1);
}

/* The single rounding (QAT_ROUNDING_SINGLE): the exact product x·m0
 * rounded once, half up, by t = 31 - shift. By hand: M = 1/4 (m0 = 2^30,
 * shift -1): 6/4 = 1.5 -> 2 and -6/4 = -1.5 -> -1 (up), where the double
 * rounding gives -2 (SRDHM: -3, then -1.5 away from zero); 5/4 = 1.25 -> 1,
 * -7/4 = -1.75 -> -2; the double rounding's hand case above, -436573.4,
 * -> -436573. Then the definition on random cases, in exact integers:
 * floor((x·m0 + 2^(t-1)) / 2^t) by division (not a shift), saturated. */
static void test_single_rounding(void) {
    const int32_t q = 1 << 30;
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(6, q, -1), 2);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(-6, q, -1), -1);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier(-6, q, -1), -2);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(5, q, -1), 1);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(-7, q, -1), -2);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(-5, q, 0), -2); /* -2.5 -> -2 */
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(5, q, 0), 3);   /* 2.5 -> 3 */
    int32_t m0;
    int shift;
    qat_quantize_multiplier(0.205543324351, &m0, &shift);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(-2123997, m0, shift), -436573);
    /* saturation (a multiplier of 8), and the extreme shifts */
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(INT32_MAX, q, 4), INT32_MAX);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(INT32_MIN, q, 4), INT32_MIN);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(INT32_MIN, INT32_MAX, 30), INT32_MIN);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(INT32_MAX, INT32_MAX, -31), 1); /* 1 - 2^-30 */
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier_single(INT32_MIN, q, -31), 0);         /* -1/2 -> 0 */
    CU_ASSERT_EQUAL(qat_requantize_single(-6, q, -1, 10, -128, 127), 9);
    CU_ASSERT_EQUAL(qat_requantize_single(INT32_MAX, q, 4, 10, -128, 127), 127);
    qat_rng rng;
    qat_rng_seed(&rng, 10);
    int bad = 0;
    for (int k = 0; k < 200000; k++) {
        int32_t x = (int32_t)qat_rng_u32(&rng), m = (int32_t)((1u << 30) + qat_rng_below(&rng, 1u << 30));
        int sh = (int)qat_rng_below(&rng, 62) - 31, t = 31 - sh;
        int32_t got = qat_multiply_by_quantized_multiplier_single(x, m, sh);
        /* floor(n / 2^t) by C's truncating division, corrected below zero, then saturated */
        int64_t n = (int64_t)x * m + ((int64_t)1 << (t - 1)), d = (int64_t)1 << t, want = n / d;
        if (n % d != 0 && n < 0) want--;
        want = want > INT32_MAX ? INT32_MAX : want < INT32_MIN ? INT32_MIN : want;
        bad += got != want;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* ---- the raw input: normalization, then quantization ------------------------------------ */

/* The documented input integer of raw value x in channel c
 * (docs/quantization.md, "Normalization"), written from the formulas:
 * each float32 operation rounded (volatile keeps every one), the product
 * by 1/scale, round half to even (nearbyintf), zero point, clamp. */
static int32_t documented(const qat_normalization *n, const qat_aparams *a, int c, float x) {
    volatile float v = x;
    if (n) {
        volatile float d = v / n->divisor;
        volatile float m = d - n->mean[c];
        v = m / n->std[c];
    }
    volatile float inv = 1.0f / a->scale;
    volatile float p = v * inv;
    if (p != p) return a->zero_point;
    float r = nearbyintf(p);
    if (r < (float)(a->qmin - a->zero_point)) return a->qmin;
    if (r > (float)(a->qmax - a->zero_point)) return a->qmax;
    return (int32_t)r + a->zero_point;
}

/* A program whose output is its input integers: [C, 16, 16] -> flatten
 * (C·256), so one sample holds every byte value once in every channel
 * (element i of channel c is the value i). */
typedef struct {
    qat_qtensor t[2];
    qat_qop op;
    qat_qmodel q;
} probe;

static void probe_init(probe *p, int C, qat_aparams a, const qat_normalization *n) {
    memset(p, 0, sizeof *p);
    snprintf(p->t[0].name, sizeof p->t[0].name, "input");
    snprintf(p->t[1].name, sizeof p->t[1].name, "flat");
    p->t[0].rank = 3, p->t[0].shape[0] = C, p->t[0].shape[1] = 16, p->t[0].shape[2] = 16, p->t[0].q = a;
    p->t[1].rank = 1, p->t[1].shape[0] = 256 * C, p->t[1].q = a;
    p->op = (qat_qop){.kind = QAT_QOP_FLATTEN, .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1,
                      .act_min = a.qmin, .act_max = a.qmax};
    snprintf(p->op.name, sizeof p->op.name, "flat");
    p->q = (qat_qmodel){.n_tensors = 2, .n_ops = 1, .tensors = p->t, .ops = &p->op, .input = 0, .output = 1,
                        .config = "", .norm = n};
}

/* Every byte value of every channel, through the int engine's float path
 * (qat_engine_run on (float)b), its byte path (qat_engine_run_u8, the
 * table), qat_input_table and the fake engine: each gives the documented
 * integer. Several normalizations and input quantizations: MNIST's, an
 * RGB one, one channel, a narrow storage range, a normalization that
 * pushes values past both clamps, none at all. */
static void test_raw_input_every_byte(void) {
    qat_ctx *ctx = qat_ctx_new();
    static qat_normalization ns[5];
    memset(ns, 0, sizeof ns);
    ns[0] = (qat_normalization){.channels = 1, .divisor = 255.0f, .raw_uint8 = true};
    ns[0].mean[0] = 0.1307f, ns[0].std[0] = 0.3081f;
    ns[1] = (qat_normalization){.channels = 3, .divisor = 255.0f, .raw_uint8 = true};
    const float rm[3] = {0.4914f, 0.4822f, 0.4465f}, rs[3] = {0.2470f, 0.2435f, 0.2616f};
    memcpy(ns[1].mean, rm, sizeof rm), memcpy(ns[1].std, rs, sizeof rs);
    ns[2] = (qat_normalization){.channels = 2, .divisor = 1.0f};
    ns[2].mean[0] = 127.5f, ns[2].std[0] = 3.0f, ns[2].mean[1] = -20.25f, ns[2].std[1] = 0.1f;
    ns[3] = (qat_normalization){.channels = 3, .divisor = 7.0f};
    for (int c = 0; c < 3; c++) ns[3].mean[c] = 1.0f / 3.0f * (float)c, ns[3].std[c] = 0.7f + 0.3f * (float)c;
    struct {
        int C;
        const qat_normalization *n;
        qat_aparams a;
    } cases[] = {
        {1, &ns[0], {.scale = 0.0255f, .zero_point = -14, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127}},
        {3, &ns[1], {.scale = 0.0171f, .zero_point = 3, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127}},
        {2, &ns[2], {.scale = 0.33f, .zero_point = 7, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127}},
        {3, &ns[3], {.scale = 0.0093f, .zero_point = -3, .bits = 6, .is_signed = true, .qmin = -32, .qmax = 31}},
        {3, &ns[1], {.scale = 0.0371f, .zero_point = 0, .bits = 8, .is_signed = true, .qmin = -100, .qmax = 90}},
        {2, NULL, {.scale = 1.1f, .zero_point = -128, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        probe p;
        int C = cases[k].C;
        probe_init(&p, C, cases[k].a, cases[k].n);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
        int n = 256 * C;
        float *x = malloc((size_t)n * sizeof *x);
        uint8_t *xb = malloc((size_t)n);
        int32_t *qf = malloc((size_t)n * sizeof *qf), *qb = malloc((size_t)n * sizeof *qb), *qk = malloc((size_t)n * sizeof *qk);
        int8_t *table = malloc((size_t)n);
        CU_ASSERT_FATAL(x && xb && qf && qb && qk && table);
        for (int i = 0; i < n; i++) xb[i] = (uint8_t)(i % 256), x[i] = (float)(i % 256);
        qat_engine *e = qat_engine_new(ctx, &p.q, QAT_ENGINE_INT, 1), *fe = qat_engine_new(ctx, &p.q, QAT_ENGINE_FAKE, 1);
        CU_ASSERT_FATAL(e && fe);
        CU_ASSERT_EQUAL(qat_engine_run(e, x, 1, NULL, qf), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run_u8(e, xb, 1, NULL, qb), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run_u8(fe, xb, 1, NULL, qk), QAT_OK);
        CU_ASSERT_EQUAL(qat_input_table_channels(&p.q), cases[k].n ? C : 1);
        CU_ASSERT_EQUAL(qat_input_table(&p.q, table), QAT_OK);
        int same = 0, clamped = 0;
        for (int i = 0; i < n; i++) {
            int c = i / 256;
            int32_t want = documented(cases[k].n, &cases[k].a, cases[k].n ? c : 0, x[i]);
            same += qf[i] == want && qb[i] == want && qk[i] == want &&
                    table[(cases[k].n ? c : 0) * 256 + i % 256] == want;
            clamped += want == cases[k].a.qmin || want == cases[k].a.qmax;
        }
        if (same != n) printf("\n  case %zu: %d of %d bytes give the documented integer\n", k, same, n);
        CU_ASSERT_EQUAL(same, n);
        if (k == 2 || k == 3) CU_ASSERT(clamped > 0 && clamped < n); /* both sides of the clamps seen */
        qat_engine_free(e), qat_engine_free(fe);
        free(x), free(xb), free(qf), free(qb), free(qk), free(table);
    }
    qat_ctx_free(ctx);
}

/* Raw floats: non-integer values, negatives, NaN (the zero point) and
 * infinities (the clamps) through the int engine's float path equal the
 * documented integers. The hybrid engine quantizes no activation, so its
 * output here is the normalized input itself: the formula's float32 bits. */
static void test_raw_input_floats(void) {
    qat_ctx *ctx = qat_ctx_new();
    static qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = 2, n.divisor = 3.0f;
    n.mean[0] = -0.4f, n.std[0] = 1.7f, n.mean[1] = 2.2f, n.std[1] = 0.6f;
    qat_aparams a = {.scale = 0.021f, .zero_point = 5, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
    probe p;
    probe_init(&p, 2, a, &n);
    enum { S = 3, NUM = 512 };
    float x[S * NUM], h[S * NUM];
    int32_t q[S * NUM];
    qat_rng rng;
    qat_rng_seed(&rng, 8);
    for (int i = 0; i < S * NUM; i++) x[i] = qat_rng_normal(&rng) * 6.0f;
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[300] = NAN, x[700] = -0.0f;
    qat_engine *e = qat_engine_new(ctx, &p.q, QAT_ENGINE_INT, S), *he = qat_engine_new(ctx, &p.q, QAT_ENGINE_HYBRID, S);
    CU_ASSERT_FATAL(e && he);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, S, NULL, q), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run(he, x, S, h, NULL), QAT_OK);
    int same = 0, hsame = 0;
    for (int i = 0; i < S * NUM; i++) {
        int c = i % NUM / 256;
        same += q[i] == documented(&n, &a, c, x[i]);
        float v = ((x[i] / n.divisor) - n.mean[c]) / n.std[c];
        hsame += memcmp(&v, &h[i], sizeof v) == 0;
    }
    CU_ASSERT_EQUAL(same, S * NUM);
    CU_ASSERT_EQUAL(hsame, S * NUM);
    CU_ASSERT_EQUAL(q[0], a.zero_point);
    CU_ASSERT(q[1] == a.qmax && q[2] == a.qmin);
    /* a NULL input is refused, naming it */
    CU_ASSERT_EQUAL(qat_engine_run_u8(e, NULL, 1, NULL, q), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "NULL input"));
    qat_engine_free(e), qat_engine_free(he);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"QuantizeMultiplier: hand values and edge cases", test_quantize_multiplier},
        {"SRDHM: saturation, ties, signs", test_srdhm},
        {"RoundingDivideByPOT: ties away from zero, negatives", test_rounding_divide_by_pot},
        {"single rounding: by hand, and exact to half a step everywhere", test_single_rounding},
        {"requantization against a double reference", test_against_double},
        {"raw bytes: every value of every channel gives the documented integer", test_raw_input_every_byte},
        {"raw floats: normalized and quantized as documented (NaN, infinities)", test_raw_input_floats},
        {NULL, NULL},
    };
    return qat_test_main("infer", cases, argc, argv);
}
