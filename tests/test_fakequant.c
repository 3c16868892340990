/* Quantized types and fake quantization: hand-computed cases for every
 * granularity and several widths, golden vectors from PyTorch 1.13 (bit for
 * bit, forward and gradient), observer qparams, and the MLIR spelling. */
#include <stdlib.h>
#include <string.h>

#include "internals.h"
#include "golden/fakequant_golden.h"
#include "qat/fakequant.h"
#include "qat/layers.h"
#include "test_util.h"

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The batch range every observer starts from: each copy this CPU can run
 * (AVX-512, AVX2, portable) equals a one-element-at-a-time loop for every
 * length 0..100 (masked and scalar tails, the unrolled bodies), with NaNs
 * ignored and infinities kept; qat__minmax takes the active level's. */
static void test_minmax_matches_simple_loop(void) {
    const struct {
        qat__simd level;
        qat_isa isa;
    } levels[] = {{QAT__SIMD_BASE, QAT_ISA_PORTABLE}, {QAT__SIMD_AVX2, QAT_ISA_AVX2}, {QAT__SIMD_AVX512, QAT_ISA_AVX512}};
    qat_rng rng;
    qat_rng_seed(&rng, 31);
    float x[100];
    int ran = 0;
    for (int n = 0; n <= 100; n++) {
        for (int i = 0; i < n; i++) x[i] = 8.0f * qat_rng_normal(&rng);
        if (n > 3) x[qat_rng_below(&rng, (uint32_t)n)] = NAN;
        if (n > 50) x[qat_rng_below(&rng, (uint32_t)n)] = -INFINITY;
        float rl = INFINITY, rh = -INFINITY;
        for (int i = 0; i < n; i++) rl = x[i] < rl ? x[i] : rl, rh = x[i] > rh ? x[i] : rh;
        for (int k = 0; k < 4; k++) {
            if (k < 3 && !qat_isa_cpu_has(levels[k].isa)) continue;
            float lo = INFINITY, hi = -INFINITY;
            if (k < 3) qat__minmax_at(levels[k].level, x, n, &lo, &hi), ran += n == 100;
            else qat__minmax(x, n, &lo, &hi);
            CU_ASSERT(lo == rl && hi == rh);
            /* folding into an existing range */
            lo = -1.0f, hi = 1.0f;
            if (k < 3) qat__minmax_at(levels[k].level, x, n, &lo, &hi);
            else qat__minmax(x, n, &lo, &hi);
            CU_ASSERT(lo == (rl < -1.0f ? rl : -1.0f) && hi == (rh > 1.0f ? rh : 1.0f));
        }
    }
    CU_ASSERT(ran >= 1 + qat_isa_cpu_has(QAT_ISA_AVX2)); /* the portable copy and each the CPU has */
}

static void test_storage_ranges(void) {
    int32_t lo, hi;
    CU_ASSERT_EQUAL(qat_storage_range(8, true, false, &lo, &hi), QAT_OK);
    CU_ASSERT(lo == -128 && hi == 127);
    qat_storage_range(8, true, true, &lo, &hi);
    CU_ASSERT(lo == -127 && hi == 127);
    qat_storage_range(8, false, false, &lo, &hi);
    CU_ASSERT(lo == 0 && hi == 255);
    qat_storage_range(2, true, false, &lo, &hi);
    CU_ASSERT(lo == -2 && hi == 1);
    qat_storage_range(4, true, true, &lo, &hi);
    CU_ASSERT(lo == -7 && hi == 7);
    qat_storage_range(16, false, false, &lo, &hi);
    CU_ASSERT(lo == 0 && hi == 65535);
    CU_ASSERT_EQUAL(qat_storage_range(1, true, false, &lo, &hi), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_storage_range(17, true, false, &lo, &hi), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_storage_range(8, false, true, &lo, &hi), QAT_ERR_ARG);
}

static void test_granularities(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    int64_t s64[2] = {6, 4}, b12[2] = {1, 2};
    CU_ASSERT_EQUAL(qat_qtype_init(ctx, &q, 8, true, false, 2, s64, NULL), QAT_OK);
    CU_ASSERT_EQUAL(q.nparams, 1);
    CU_ASSERT_EQUAL(qat_qtype_axis(&q), -1);
    CU_ASSERT_EQUAL(qat_qtype_init_axis(ctx, &q, 8, true, true, 2, s64, 1), QAT_OK);
    CU_ASSERT_EQUAL(q.nparams, 4);
    CU_ASSERT_EQUAL(qat_qtype_axis(&q), 1);
    CU_ASSERT_EQUAL(qat_qtype_param_index(&q, 1 * 4 + 3), 3);
    CU_ASSERT_EQUAL(qat_qtype_init(ctx, &q, 8, true, false, 2, s64, b12), QAT_OK);
    CU_ASSERT_EQUAL(q.nparams, 12); /* [6, 4] / [1, 2] = [6, 2] */
    CU_ASSERT_EQUAL(q.pshape[1], 2);
    CU_ASSERT_EQUAL(qat_qtype_axis(&q), -2);
    CU_ASSERT_EQUAL(qat_qtype_param_index(&q, 2 * 4 + 3), 2 * 2 + 1); /* (2,3) -> block (2,1) */
    CU_ASSERT_EQUAL(qat_qtype_param_index(&q, 5 * 4 + 0), 10);
    int64_t bad[2] = {4, 3}; /* 4 does not divide 6... and 3 does not divide 4 */
    CU_ASSERT_EQUAL(qat_qtype_init(ctx, &q, 8, true, false, 2, s64, bad), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "does not divide"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_qtype_init_axis(ctx, &q, 8, true, false, 2, s64, 2), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

/* A ragged last block (blocks of 2 along a dimension of 5: 2, 2, 1),
 * hand-computed: parameter shape, indices, calibration, quantization and
 * the fake quantization of each block with its own scale. */
static void test_ragged_blocks(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    int64_t s[2] = {2, 5}, b[2] = {1, 2}, big[2] = {1, 6};
    CU_ASSERT_EQUAL(qat_qtype_init(ctx, &q, 4, true, true, 2, s, b), QAT_ERR_SHAPE); /* strict: refused */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_qtype_init(ctx, &q, 4, true, true, 2, s, big), QAT_ERR_SHAPE); /* block > dim */
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "larger than dimension"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_qtype_init_blocks(ctx, &q, 4, true, true, 2, s, big, true), QAT_OK); /* ragged: whole */
    CU_ASSERT(q.block[1] == 5 && q.nparams == 2 && qat_qtype_axis(&q) == 0);
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &q, 4, true, true, 2, s, b, true), QAT_OK);
    CU_ASSERT(q.pshape[0] == 2 && q.pshape[1] == 3 && q.nparams == 6);
    CU_ASSERT_EQUAL(qat_qtype_axis(&q), -2);
    int64_t want_p[10] = {0, 0, 1, 1, 2, 3, 3, 4, 4, 5};
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(qat_qtype_param_index(&q, i), want_p[i]);
    /* blocks: {0.7, -1.4} {2.1, 0} {-0.35} | {7, 1} {-3.5, 3.5} {0} -> narrow i4, M / 7 */
    float w[10] = {0.7f, -1.4f, 2.1f, 0.0f, -0.35f, 7.0f, 1.0f, -3.5f, 3.5f, 0.0f};
    qat_qtype_calibrate(&q, w, true);
    float want_s[6] = {0.2f, 0.3f, 0.05f, 1.0f, 0.5f, 1.1920929e-07f};
    for (int p = 0; p < 6; p++) ASSERT_CLOSE(q.scale[p], want_s[p], 1e-7);
    int32_t v[10];
    qat_quantize(&q, w, v);
    int32_t want_v[10] = {4, -7, 7, 0, -7, 7, 1, -7, 7, 0}; /* 0.7f·(1/0.2f) is 3.5f exactly: to even, 4 */
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(v[i], want_v[i]);
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_PERSIST, w, 2, s, true);
    qat_tensor *y = qat_fake_quant(ctx, t, &q, QAT_STE_CLIPPED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int i = 0; i < 10; i++) CU_ASSERT(y->data[i] == (float)want_v[i] * q.scale[want_p[i]]);
    qat_ctx_free(ctx);
}

/* Hand-computed: scale 0.5, zp 0, int8. Ties go to even. */
static void test_hand_values(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    int64_t s[1] = {8};
    qat_qtype_init(ctx, &q, 8, true, false, 1, s, NULL);
    q.scale[0] = 0.5f;
    float x[8] = {0.25f, 0.75f, -0.25f, -0.75f, 100.0f, -100.0f, 0.6f, 63.6f};
    float want[8] = {0.0f, 1.0f, -0.0f, -1.0f, 63.5f, -64.0f, 0.5f, 63.5f};
    int32_t want_q[8] = {0, 2, 0, -2, 127, -128, 1, 127};
    int32_t qv[8];
    qat_quantize(&q, x, qv);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(qv[i], want_q[i]);
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_PERSIST, x, 1, s, true);
    qat_tensor *y = qat_fake_quant(ctx, t, &q, QAT_STE_CLIPPED);
    for (int i = 0; i < 8; i++) ASSERT_CLOSE(y->data[i], want[i], 0);
    /* clipped STE: 100 -> 200 and -100 -> -200 and 63.6 -> 127.2 -> 127 (in range) */
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
    float want_g[8] = {1, 1, 1, 1, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++) ASSERT_CLOSE(t->grad[i], want_g[i], 0);
    qat_ctx_step_reset(ctx);
    qat_tensor_zero_grad(t);
    y = qat_fake_quant(ctx, t, &q, QAT_STE_PLAIN);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
    for (int i = 0; i < 8; i++) ASSERT_CLOSE(t->grad[i], 1, 0);
    /* sub-channel [2, 4], blocks [1, 2]: four scales */
    qat_qtype b;
    int64_t s24[2] = {2, 4}, b12[2] = {1, 2};
    qat_qtype_init(ctx, &b, 4, true, false, 2, s24, b12);
    float sc[4] = {1, 0.5f, 0.25f, 2}, xb[8] = {1.4f, 2.6f, 1.4f, 2.6f, 1.4f, 2.6f, 1.4f, 2.6f};
    int32_t zb[4] = {0, 1, -2, 3};
    memcpy(b.scale, sc, sizeof sc);
    memcpy(b.zero_point, zb, sizeof zb);
    /* block (0,0): s 1 z 0 -> q 1, 3 -> 1, 3.  (0,1): s .5 z 1 -> 3+1=4, 5+1=6 -> 7 max: 1.5, 2.5
       (1,0): s .25 z -2 -> 6-2=4, 10-2=8 -> 7 -> (4+2)*.25=1.5, (7+2)*.25=2.25
       (1,1): s 2 z 3 -> 1+3=4, 1+3=4 -> 2, 2 */
    float want_b[8] = {1, 3, 1.5f, 2.5f, 1.5f, 2.25f, 2, 2};
    int32_t qb[8];
    float back[8];
    qat_quantize(&b, xb, qb);
    qat_dequantize(&b, qb, back);
    for (int i = 0; i < 8; i++) ASSERT_CLOSE(back[i], want_b[i], 0);
    qat_ctx_free(ctx);
}

/* Every width 2..16, signed and unsigned: grid points survive a round trip,
 * and the extremes clamp to qmin/qmax. */
static void test_all_widths(void) {
    qat_ctx *ctx = qat_ctx_new();
    for (int bits = 2; bits <= 16; bits++)
        for (int sg = 0; sg < 2; sg++) {
            qat_qtype q;
            int64_t s[1] = {5};
            CU_ASSERT_EQUAL_FATAL(qat_qtype_init(ctx, &q, bits, sg, false, 1, s, NULL), QAT_OK);
            q.scale[0] = 0.125f;
            q.zero_point[0] = sg ? 0 : 1;
            float x[5] = {(float)(q.qmin - q.zero_point[0]) * 0.125f, 0.125f, 0.0f, 1e9f, -1e9f};
            int32_t v[5];
            float back[5];
            qat_quantize(&q, x, v);
            qat_dequantize(&q, v, back);
            CU_ASSERT_EQUAL(v[0], q.qmin);
            CU_ASSERT_EQUAL(v[3], q.qmax);
            CU_ASSERT_EQUAL(v[4], q.qmin);
            ASSERT_CLOSE(back[0], x[0], 0);
            if (q.qmax - q.zero_point[0] >= 1) ASSERT_CLOSE(back[1], 0.125f, 0);
            ASSERT_CLOSE(back[2], 0.0f, 0);
        }
    qat_ctx_free(ctx);
}

static void check_golden(qat_qtype *q, int rank, const int64_t *shape, const float *x,
                         const float *dy, const float *y, const float *dx, int64_t n) {
    qat_ctx *ctx = qat_ctx_new();
    qat_tensor *tx = qat_tensor_from(ctx, QAT_MEM_PERSIST, x, rank, shape, true);
    qat_tensor *tdy = qat_tensor_from(ctx, QAT_MEM_STEP, dy, rank, shape, false);
    qat_tensor *out = qat_fake_quant(ctx, tx, q, QAT_STE_CLIPPED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(out->data, y, n, true), 0);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, out, tdy))), QAT_OK);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(tx->grad, dx, n, false), 0);
    qat_ctx_free(ctx);
}

#define PT_CASE(name, bits, sg)                                                    \
    do {                                                                            \
        qat_qtype q;                                                                \
        int64_t s[1] = {64};                                                        \
        CU_ASSERT_EQUAL_FATAL(qat_qtype_init(ctx, &q, bits, sg, name##_qmin == -name##_qmax, 1, s, NULL), QAT_OK); \
        CU_ASSERT(q.qmin == name##_qmin && q.qmax == name##_qmax);                  \
        q.scale[0] = name##_scale;                                                  \
        q.zero_point[0] = name##_zp;                                                \
        check_golden(&q, 1, s, name##_x, name##_dy, name##_y, name##_dx, 64);       \
    } while (0)

static void test_golden_per_tensor(void) {
    qat_ctx *ctx = qat_ctx_new();
    PT_CASE(pt_i8, 8, true);
    PT_CASE(pt_u8, 8, false);
    PT_CASE(pt_i4n, 4, true);
    PT_CASE(pt_i2, 2, true);
    PT_CASE(pt_u16, 16, false);
    qat_ctx_free(ctx);
}

static void test_golden_per_channel(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    int64_t s0[2] = {4, 16};
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_axis(ctx, &q, 8, true, false, 2, s0, 0), QAT_OK);
    memcpy(q.scale, pc_a0_scale, sizeof pc_a0_scale);
    memcpy(q.zero_point, pc_a0_zp, sizeof pc_a0_zp);
    check_golden(&q, 2, s0, pc_a0_x, pc_a0_dy, pc_a0_y, pc_a0_dx, 64);
    int64_t s1[3] = {3, 4, 5};
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_axis(ctx, &q, 2, true, false, 3, s1, 1), QAT_OK);
    CU_ASSERT(q.qmin == pc_a1_qmin && q.qmax == pc_a1_qmax);
    memcpy(q.scale, pc_a1_scale, sizeof pc_a1_scale);
    memcpy(q.zero_point, pc_a1_zp, sizeof pc_a1_zp);
    check_golden(&q, 3, s1, pc_a1_x, pc_a1_dy, pc_a1_y, pc_a1_dx, 60);
    qat_ctx_free(ctx);
}

static void test_golden_observer_qparams(void) {
    for (int i = 0; i < OBS_N; i++) {
        const int *sch = obs_schemes[i % OBS_SCHEMES];
        float s;
        int32_t z;
        qat_qparams_from_range(obs_min[i], obs_max[i], sch[2], sch[3], sch[0], sch[1], &s, &z);
        if (!same_bits(s, obs_scale[i]) || z != obs_zp[i])
            printf("\n  case %d: got %.9g:%d want %.9g:%d\n", i, s, z, obs_scale[i], obs_zp[i]);
        CU_ASSERT(same_bits(s, obs_scale[i]));
        CU_ASSERT_EQUAL(z, obs_zp[i]);
    }
}

static void test_calibrate_per_channel_weights(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    int64_t s[2] = {2, 3};
    qat_qtype_init_axis(ctx, &q, 8, true, true, 2, s, 0);
    float w[6] = {0.5f, -1.27f, 0.2f, 0.0f, 0.0f, 0.0f};
    qat_qtype_calibrate(&q, w, true);
    ASSERT_CLOSE(q.scale[0], 1.27f / 127.0f, 1e-9); /* narrow int8: M / 127 */
    CU_ASSERT_EQUAL(q.zero_point[0], 0);
    CU_ASSERT(same_bits(q.scale[1], 1.1920929e-07f)); /* all zero: FLT_EPSILON */
    qat_ctx_free(ctx);
}

static void roundtrip(const char *text, int rank, const int64_t *shape, int64_t nparams) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype a, b;
    qat_status st = qat_qtype_from_mlir(ctx, text, rank, shape, &a);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL(a.nparams, nparams);
    char buf[512];
    int n = qat_qtype_to_mlir(&a, buf, sizeof buf);
    CU_ASSERT(n > 0 && n < (int)sizeof buf);
    CU_ASSERT_EQUAL_FATAL(qat_qtype_from_mlir(ctx, buf, rank, shape, &b), QAT_OK);
    CU_ASSERT_EQUAL(a.qmin, b.qmin);
    CU_ASSERT_EQUAL(a.qmax, b.qmax);
    CU_ASSERT_EQUAL(memcmp(a.block, b.block, sizeof a.block), 0);
    CU_ASSERT_EQUAL(memcmp(a.scale, b.scale, (size_t)a.nparams * 4), 0);
    CU_ASSERT_EQUAL(memcmp(a.zero_point, b.zero_point, (size_t)a.nparams * 4), 0);
    qat_ctx_free(ctx);
}

static void test_mlir(void) {
    int64_t s1[1] = {10}, s23[2] = {2, 3}, s64[2] = {6, 4}, s4d[4] = {6, 4, 6, 4};
    /* the seeds' examples */
    roundtrip("!quant.uniform<i8:f32, 0.01:50>", 1, s1, 1);
    roundtrip("!quant.uniform<i8:f32:1, {0.2:20, 0.1:10, 0.3:30}>", 2, s23, 3);
    roundtrip("!quant.uniform<u8:f32, 3.400000e+01:16>", 1, s1, 1);
    roundtrip("!quant.uniform<ui8:f32, 34.0:16>", 1, s1, 1);
    roundtrip("!quant.uniform<i8:f32, 1.000000e+00>", 1, s1, 1);
    roundtrip("!quant.uniform<i8:f32:{0:1, 1:2}, {{1:1, 2:2}, {3:3, 4:4}, {5:5, 6:6}, {1:1, 2:2}, "
              "{3:3, 4:4}, {5:5, 6:6}}>", 2, s64, 12);
    roundtrip("!quant.uniform<i8<-128:127>:f32:{1:2, 3:2}, {{1.0:1, 2.0:2}, {3.0:3, 4.0:4}}>", 4, s4d, 4);
    roundtrip("!quant.uniform<i8<-127:127>:f32:0, {0.5:0, 0.25:0}>", 2, s23, 2);
    /* the sub-channel RFC's lowering examples: three nestings of one type */
    roundtrip("!quant.uniform<i8<-128:127>:f32:{1:2, 3:2}, {{{1.0:1, 2.0:2}},{{3.0:3, 4.0:4}}}>", 4, s4d, 4);
    roundtrip("!quant.uniform<i8<-128:127>:f32:{1:2, 3:2}, {1.0:1, 2.0:2, 3.0:3, 4.0:4}>", 4, s4d, 4);
    /* the StableHLO seed's spellings */
    roundtrip("!quant.uniform<i8:f32, 1.5e-01:-1>", 1, s1, 1);
    roundtrip("!quant.uniform<i8:f32,1.0:0>", 1, s1, 1);
    roundtrip("!quant.uniform<i8:f32, 2.000000e+00:1>", 1, s1, 1);
    /* blocks on every axis of a conv weight, and a block equal to its dimension (whole) */
    int64_t sconv[4] = {4, 6, 5, 5};
    roundtrip("!quant.uniform<i4:f32:{0:2, 1:3, 2:5, 3:1}, {{{{0.1:0, 0.2:0, 0.3:0, 0.4:0, 0.5:0}}, {{0.1:0, 0.2:0, "
              "0.3:0, 0.4:0, 0.5:0}}}, {{{0.1:0, 0.2:0, 0.3:0, 0.4:0, 0.5:0}}, {{0.1:0, 0.2:0, 0.3:0, 0.4:0, 0.5:0}}}}>",
              4, sconv, 20);
    /* exact printed forms */
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    char buf[256];
    qat_qtype_init_axis(ctx, &q, 8, true, true, 2, s23, 0);
    q.scale[0] = 0.2f, q.scale[1] = 0.1f;
    qat_qtype_to_mlir(&q, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "!quant.uniform<i8<-127:127>:f32:0, {0.2:0, 0.1:0}>");
    qat_qtype_init(ctx, &q, 4, false, false, 1, s1, NULL);
    q.zero_point[0] = 8;
    qat_qtype_to_mlir(&q, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "!quant.uniform<u4:f32, 1:8>");
    CU_ASSERT_EQUAL(qat_qtype_to_mlir(&q, buf, 5), (int)strlen("!quant.uniform<u4:f32, 1:8>"));
    /* the sub-channel RFC's running example, [6, 4] in blocks {0:1, 1:2}: scales [6, 2], one brace
     * level per dimension, and it reads back to the same blocks and parameters */
    int64_t b12[2] = {1, 2};
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init(ctx, &q, 8, true, false, 2, s64, b12), QAT_OK);
    for (int i = 0; i < 12; i++) q.scale[i] = 0.5f * (float)(i + 1), q.zero_point[i] = i - 6;
    qat_qtype_to_mlir(&q, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "!quant.uniform<i8:f32:{0:1, 1:2}, {{0.5:-6, 1:-5}, {1.5:-4, 2:-3}, {2.5:-2, 3:-1}, "
                                "{3.5:0, 4:1}, {4.5:2, 5:3}, {5.5:4, 6:5}}>");
    qat_qtype r;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_from_mlir(ctx, buf, 2, s64, &r), QAT_OK);
    CU_ASSERT(r.block[0] == 1 && r.block[1] == 2 && r.pshape[0] == 6 && r.pshape[1] == 2);
    CU_ASSERT(r.scale[3] == 2.0f && r.zero_point[11] == 5);
    /* a ragged type ([6, 4] in blocks of 3 along dimension 1: two blocks, of 3 and 1) is refused
     * by the strict parser and read by the ragged one */
    const char *rag = "!quant.uniform<i8:f32:{0:1, 1:3}, {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}>";
    CU_ASSERT_EQUAL(qat_qtype_from_mlir(ctx, rag, 2, s64, &r), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "does not divide"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_qtype_from_mlir_blocks(ctx, rag, 2, s64, true, &r), QAT_OK);
    CU_ASSERT(r.pshape[1] == 2 && r.nparams == 12 && r.scale[11] == 12.0f);
    CU_ASSERT_EQUAL(qat_qtype_param_index(&r, 1 * 4 + 3), 3); /* (1, 3) is in the short block (1, 1) */
    /* errors */
    const char *bad[] = {"!quant.uniform<i8:f32, 0.01:50", "!quant.uniform<x8:f32, 1:0>",
                         "!quant.uniform<i8:f32:1, {0.2:20, 0.1:10}>", "!quant.uniform<i8:f32, -1:0>",
                         "!quant.uniform<i8:f32, 1:300>", "!quant.uniform<i8<-100:100>:f32, 1:0>",
                         "!quant.uniform<i8:f32, 1:0> junk", "!quant.uniform<i8:f32:{1:1, 1:3}, {1, 2, 3}>",
                         "!quant.uniform<i8:f32:{1:4}, {1, 2}>", "!quant.uniform<i8:f32:{2:1}, {1, 2}>",
                         "!quant.uniform<i8:f32:{0:0}, {1, 2}>"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qat_ctx_clear_error(ctx);
        CU_ASSERT_NOT_EQUAL(qat_qtype_from_mlir(ctx, bad[i], 2, s23, &q), QAT_OK);
        CU_ASSERT(strlen(qat_ctx_error(ctx)) > 0);
    }
    qat_ctx_free(ctx);
}

static void test_golden_ema_observer(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_observer o;
    qat_qtype q;
    CU_ASSERT_EQUAL_FATAL(qat_observer_init(ctx, &o, QAT_OBS_EMA, false, 0, 0.9f), QAT_OK);
    qat_qtype_init(ctx, &q, 8, true, false, 0, NULL, NULL);
    for (int b = 0; b < 6; b++) {
        qat_observer_update(&o, ema_batches + 40 * b, 40);
        qat_observer_qparams(&o, &q);
        /* torch computes c = 0.1 in float32; 1 - 0.9f rounds differently by an ulp, so
           compare the running range to a few ulps and the qparams exactly or within one ulp */
        ASSERT_CLOSE(o.min, ema_min[b], 4e-7 * fabs(ema_min[b]) + 1e-7);
        ASSERT_CLOSE(o.max, ema_max[b], 4e-7 * fabs(ema_max[b]) + 1e-7);
        ASSERT_CLOSE(q.scale[0], ema_scale[b], 4e-7 * ema_scale[b]);
        CU_ASSERT_EQUAL(q.zero_point[0], ema_zp[b]);
    }
    qat_ctx_free(ctx);
}

/* A scripted sequence of batches with max-abs 1, 3, 2, 8, 4 (symmetric). */
static void test_observers_scripted(void) {
    qat_ctx *ctx = qat_ctx_new();
    const float batches[5][2] = {{1, -0.5f}, {-3, 2}, {2, 0}, {-8, 1}, {4, -4}};
    struct { qat_observer_kind kind; int w; float want[5]; } cases[] = {
        {QAT_OBS_MINMAX, 0, {1, 3, 3, 8, 8}},
        {QAT_OBS_WINDOW_MEAN, 3, {1, 2, 2, 13.0f / 3, 14.0f / 3}},
        {QAT_OBS_WINDOW_MAX, 2, {1, 3, 3, 8, 8}},
        /* EMA k = 0.5: first raw, then v = v + 0.5 (m - v) */
        {QAT_OBS_EMA, 0, {1, 2, 2, 5, 4.5f}},
        /* bias-corrected k = 0.5: acc/state with state 1, 1.5, 1.75, 1.875, 1.9375 */
        {QAT_OBS_EMA_BIAS_CORRECTED, 0, {1, 3.5f / 1.5f, 3.75f / 1.75f, 9.875f / 1.875f, 8.9375f / 1.9375f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        qat_observer o;
        CU_ASSERT_EQUAL_FATAL(qat_observer_init(ctx, &o, cases[c].kind, true, cases[c].w, 0.5f), QAT_OK);
        for (int b = 0; b < 5; b++) {
            qat_observer_update(&o, batches[b], 2);
            if (fabsf(o.max - cases[c].want[b]) > 1e-6f)
                printf("\n  %s batch %d: %g want %g\n", qat_observer_kind_str(cases[c].kind), b, o.max, cases[c].want[b]);
            ASSERT_CLOSE(o.max, cases[c].want[b], 1e-6);
            ASSERT_CLOSE(o.min, -cases[c].want[b], 1e-6);
        }
    }
    /* asymmetric minmax tracks min and max separately */
    qat_observer o;
    qat_observer_init(ctx, &o, QAT_OBS_MINMAX, false, 0, 0.9f);
    for (int b = 0; b < 5; b++) qat_observer_update(&o, batches[b], 2);
    ASSERT_CLOSE(o.min, -8, 0);
    ASSERT_CLOSE(o.max, 4, 0);
    CU_ASSERT_EQUAL(qat_observer_init(ctx, &o, QAT_OBS_WINDOW_MEAN, true, 0, 0.9f), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_observers_per_channel(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_observer obs[3];
    for (int c = 0; c < 3; c++) qat_observer_init(ctx, &obs[c], QAT_OBS_EMA, false, 0, 0.5f);
    /* [2, 3, 2]: channel c of sample n holds {n*10 + c, -(n + c)} */
    float v[12];
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 3; c++) v[(n * 3 + c) * 2] = (float)(n * 10 + c), v[(n * 3 + c) * 2 + 1] = (float)-(n + c);
    int64_t s[3] = {2, 3, 2};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_STEP, v, 3, s, false);
    CU_ASSERT_EQUAL(qat_observer_update_channels(ctx, obs, x, 1), QAT_OK);
    for (int c = 0; c < 3; c++) {
        ASSERT_CLOSE(obs[c].max, 10 + c, 0);  /* first batch raw */
        ASSERT_CLOSE(obs[c].min, -(1 + c), 0);
    }
    for (int i = 0; i < 12; i++) v[i] *= 0.0f; /* second batch: all zero -> halfway (k = 0.5) */
    x = qat_tensor_from(ctx, QAT_MEM_STEP, v, 3, s, false);
    qat_observer_update_channels(ctx, obs, x, 1);
    ASSERT_CLOSE(obs[2].max, 6, 0);
    ASSERT_CLOSE(obs[2].min, -1.5f, 0);
    qat_qtype q;
    qat_qtype_init_axis(ctx, &q, 8, false, false, 3, s, 1);
    qat_observer_qparams_channels(obs, &q);
    float sc;
    int32_t zp;
    qat_qparams_from_range(-1.5f, 6, 0, 255, false, false, &sc, &zp);
    CU_ASSERT(same_bits(q.scale[2], sc) && q.zero_point[2] == zp);
    CU_ASSERT_EQUAL(qat_observer_update_channels(ctx, obs, x, 3), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_prepare_quantizes_every_layer(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, false);
    qat_model_build(m, 1);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(m->layers[0].aq); /* the input */
    int quantized_outputs = 0;
    for (int i = 1; i < m->n_layers; i++) {
        qat__layer *l = &m->layers[i];
        if (l->kind == QAT_LAYER_LINEAR || l->kind == QAT_LAYER_CONV2D) {
            CU_ASSERT_PTR_NOT_NULL(l->wq);
            CU_ASSERT_EQUAL(qat_qtype_axis(l->wq), 0); /* per output channel */
            CU_ASSERT_EQUAL(l->wq->qmin, -127);        /* narrow */
        }
        quantized_outputs += l->aq != NULL;
    }
    CU_ASSERT_EQUAL(quantized_outputs, 5); /* after conv1+relu, conv2+relu, fc1+relu, fc2+relu, fc3 */
    CU_ASSERT_PTR_NOT_NULL(m->layers[2].aq); /* relu after conv1, not conv1 itself */
    CU_ASSERT_PTR_NULL(m->layers[1].aq);
    CU_ASSERT_PTR_NOT_NULL(m->layers[m->n_layers - 1].aq);
    CU_ASSERT_EQUAL(qat_prepare(m, NULL), QAT_ERR_STATE);
    qat_ctx_clear_error(ctx);

    /* forward in training: observers learn, outputs sit on the quantization grid */
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    int64_t sx[4] = {4, 1, 28, 28};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 2, false);
    qat_tensor *y = qat_model_forward(m, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    qat__act_quant *out = m->layers[m->n_layers - 1].aq;
    CU_ASSERT_EQUAL(out->obs.updates, 1);
    for (int64_t i = 0; i < y->numel; i++) {
        float k = y->data[i] / out->q.scale[0] + (float)out->q.zero_point[0];
        ASSERT_CLOSE(k, nearbyintf(k), 1e-3);
    }
    /* gradients reach every parameter through the straight-through estimator */
    int32_t lab[4] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, y, lab)), QAT_OK);
    for (int t = 0; t < m->n_param_tensors; t++) {
        double g = 0;
        for (int64_t i = 0; i < m->param_list[t].tensor->numel; i++) g += fabs(m->param_list[t].tensor->grad[i]);
        CU_ASSERT(g > 0);
    }
    qat_ctx_step_reset(ctx);
    /* eval: ranges frozen */
    qat_model_train(m, false);
    float scale = out->q.scale[0];
    x = t_rand(ctx, &rng, 4, sx, -10, 20, false);
    qat_model_forward(m, x);
    CU_ASSERT_EQUAL(out->obs.updates, 1);
    CU_ASSERT(same_bits(out->q.scale[0], scale));
    qat_ctx_free(ctx);
}

static void test_prepare_block_and_errors(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    qat_model_build(m, 1);
    qat_prepare_config c = qat_prepare_defaults();
    c.wgran = QAT_GRAN_BLOCK, c.block = 3; /* 3 does not divide 784 */
    CU_ASSERT_EQUAL(qat_prepare(m, &c), QAT_ERR_SHAPE);
    qat_ctx_clear_error(ctx);
    qat_model *m2 = qat_model_new(ctx);
    qat_model_mlp(m2);
    qat_model_build(m2, 1);
    c.block = 16, c.wbits = 4;
    CU_ASSERT_EQUAL(qat_prepare(m2, &c), QAT_OK);
    CU_ASSERT_EQUAL(m2->layers[1].wq->nparams, 256 * (784 / 16));
    c.wbits = 1;
    CU_ASSERT_EQUAL(qat_prepare_layer(m2, "fc3", &c), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    c = qat_prepare_defaults();
    c.wgran = QAT_GRAN_TENSOR, c.wbits = 2;
    CU_ASSERT_EQUAL(qat_prepare_layer(m2, "fc3", &c), QAT_OK); /* per-layer override */
    CU_ASSERT_EQUAL(m2->layers[5].wq->nparams, 1);
    CU_ASSERT_EQUAL(m2->layers[5].wq->qmax, 1);
    CU_ASSERT_EQUAL(qat_prepare_layer(m2, "relu1", &c), QAT_ERR_ARG);
    /* low-bit activations keep the input and the logits at io_bits */
    qat_ctx_clear_error(ctx);
    qat_model *m3 = qat_model_new(ctx);
    qat_model_mlp(m3);
    qat_model_build(m3, 1);
    c = qat_prepare_defaults();
    c.abits = 2;
    CU_ASSERT_EQUAL(qat_prepare(m3, &c), QAT_OK);
    CU_ASSERT_EQUAL(m3->layers[0].aq->q.qmax, 127); /* the input */
    CU_ASSERT_EQUAL(m3->layers[2].aq->q.qmax, 1);  /* relu1: 2 bits */
    CU_ASSERT_EQUAL(m3->layers[5].aq->q.qmax, 127); /* fc3 logits: 8 bits */
    qat_ctx_free(ctx);
}

/* Sub-channel granularities on LeNet: block:16 types each Conv weight as
 * its [O, C·kh·kw] matrix in blocks of 16 along the flattened input, with
 * a ragged last block where 16 does not divide (conv1: 25 = 16 + 9; fc2:
 * 120 = 7·16 + 8); the seed's {axis:block} form blocks the weight's own
 * axes, strictly unless ragged; the fake-quantized weight equals
 * quantize/dequantize with the layer's type; LSQ learns one scale per
 * block of the matrix view. */
static void test_prepare_subchannel_lenet(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, false);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.wgran = QAT_GRAN_BLOCK, c.block = 16, c.wbits = 4;
    CU_ASSERT_EQUAL(qat_prepare(m, &c), QAT_ERR_SHAPE); /* strict: 16 does not divide conv1's 25 inputs */
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "conv1's weight [6, 25]"));
    qat_ctx_clear_error(ctx);
    c.ragged = true;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    const qat_qtype *w1 = m->layers[qat_model_find_layer(m, "conv1")].wq;
    const qat_qtype *w2 = m->layers[qat_model_find_layer(m, "conv2")].wq;
    const qat_qtype *f2 = m->layers[qat_model_find_layer(m, "fc2")].wq;
    CU_ASSERT(w1->rank == 2 && w1->shape[1] == 25 && w1->pshape[1] == 2 && w1->nparams == 12);
    CU_ASSERT(w2->rank == 2 && w2->shape[1] == 150 && w2->pshape[1] == 10 && w2->nparams == 160);
    CU_ASSERT(f2->rank == 2 && f2->shape[1] == 120 && f2->pshape[1] == 8);
    CU_ASSERT_EQUAL(qat_qtype_param_index(w2, 150 + 149), 10 + 9); /* row 1's last block holds 6 */
    /* the forward fake-quantizes conv2's weight through the matrix view */
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    int64_t sx[4] = {2, 1, 28, 28};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 1, false);
    qat_model_train(m, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(qat_model_forward(m, x));
    qat_tensor *w = m->layers[qat_model_find_layer(m, "conv2")].weight;
    int32_t *qi = malloc((size_t)w->numel * sizeof *qi);
    float *back = malloc((size_t)w->numel * sizeof *back);
    qat_quantize(w2, w->data, qi);
    qat_dequantize(w2, qi, back);
    int extremes = 0;
    for (int64_t i = 0; i < w->numel; i++) extremes += qi[i] == 7 || qi[i] == -7;
    CU_ASSERT(extremes >= 160); /* min-max per block: every block reaches its range */
    qat_tensor *fq = qat_fake_quant(ctx, qat_reshape(ctx, w, 2, w2->shape), w2, QAT_STE_CLIPPED);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(fq->data, back, w->numel, true), 0);
    free(qi), free(back);
    qat_ctx_step_reset(ctx);
    /* the seed's form on conv2's own axes: {0:1, 1:2, 2:5} strict is fine there ([16, 6, 5, 5]) */
    qat_prepare_config a = c;
    a.wgran = QAT_GRAN_AXES, a.ragged = false;
    a.blocks[0] = 1, a.blocks[1] = 2, a.blocks[2] = 5;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "conv2", &a), QAT_OK);
    w2 = m->layers[qat_model_find_layer(m, "conv2")].wq;
    CU_ASSERT(w2->rank == 4 && w2->pshape[0] == 16 && w2->pshape[1] == 3 && w2->pshape[2] == 1 && w2->pshape[3] == 1);
    a.blocks[1] = 4; /* 4 does not divide 6 */
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "conv2", &a), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "conv2's weight [16, 6, 5, 5]"));
    qat_ctx_clear_error(ctx);
    a.ragged = true; /* 6 = 4 + 2 */
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "conv2", &a), QAT_OK);
    CU_ASSERT_EQUAL(m->layers[qat_model_find_layer(m, "conv2")].wq->pshape[1], 2);
    a.blocks[3] = 5; /* fc1 has two dimensions */
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "fc1", &a), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "fc1"));
    qat_ctx_clear_error(ctx);
    /* LSQ on the matrix view: one learned scale per block */
    qat_prepare_config l = c;
    l.lsq = true;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "conv1", &l), QAT_OK);
    CU_ASSERT_EQUAL(m->layers[qat_model_find_layer(m, "conv1")].wscale->numel, 12);
    qat_model_train(m, true);
    qat_tensor *y = qat_model_forward(m, x);
    int32_t lab[2] = {3, 7};
    CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_cross_entropy(ctx, y, lab)), QAT_OK);
    int nonzero = 0;
    for (int64_t i = 0; i < 12; i++) nonzero += m->layers[qat_model_find_layer(m, "conv1")].wscale->grad[i] != 0;
    CU_ASSERT(nonzero >= 6);
    qat_ctx_free(ctx);
}

static void lsq_case(int rank, const int64_t *shape, int axis, int bits, const float *x, const float *dy,
                     const float *sc, const float *zp, int np, float gf, const float *y, const float *dx,
                     const float *dsc, const float *dzp) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    if (axis < 0) qat_qtype_init(ctx, &q, bits, true, false, rank, shape, NULL);
    else qat_qtype_init_axis(ctx, &q, bits, true, false, rank, shape, axis);
    int64_t n = 1, sp[1] = {np};
    for (int d = 0; d < rank; d++) n *= shape[d];
    qat_tensor *tx = qat_tensor_from(ctx, QAT_MEM_PERSIST, x, rank, shape, true);
    qat_tensor *ts = qat_tensor_from(ctx, QAT_MEM_PERSIST, sc, 1, sp, true);
    qat_tensor *tz = qat_tensor_from(ctx, QAT_MEM_PERSIST, zp, 1, sp, true);
    qat_tensor *tdy = qat_tensor_from(ctx, QAT_MEM_STEP, dy, rank, shape, false);
    qat_tensor *out = qat_fake_quant_lsq(ctx, tx, ts, tz, &q, gf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(out->data, y, n, true), 0);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, out, tdy))), QAT_OK);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(tx->grad, dx, n, false), 0);
    /* the scale and zero-point gradients are sums: torch's reduction order differs */
    for (int p = 0; p < np; p++) {
        if (fabs(ts->grad[p] - dsc[p]) > 1e-5 * (fabs(dsc[p]) + 1e-3) || fabs(tz->grad[p] - dzp[p]) > 1e-5 * (fabs(dzp[p]) + 1e-3))
            printf("\n  param %d: dscale %.9g want %.9g, dzp %.9g want %.9g\n", p, ts->grad[p], dsc[p], tz->grad[p], dzp[p]);
        ASSERT_CLOSE(ts->grad[p], dsc[p], 1e-5 * (fabs(dsc[p]) + 1e-3));
        ASSERT_CLOSE(tz->grad[p], dzp[p], 1e-5 * (fabs(dzp[p]) + 1e-3));
    }
    qat_ctx_free(ctx);
}

static void test_golden_lsq(void) {
    int64_t s1[1] = {64}, s2[2] = {4, 16};
    float sc = 0.1f, zp = 2.3f;
    lsq_case(1, s1, -1, 8, lsq_pt_x, lsq_pt_dy, &sc, &zp, 1, lsq_pt_gf, lsq_pt_y, lsq_pt_dx,
             &lsq_pt_dscale, &lsq_pt_dzp);
    lsq_case(2, s2, 0, 4, lsq_pc_x, lsq_pc_dy, lsq_pc_scale, lsq_pc_zp, 4, 0.25f, lsq_pc_y, lsq_pc_dx,
             lsq_pc_dscale, lsq_pc_dzp);
    ASSERT_CLOSE(qat_lsq_grad_factor(64, 127), 1.0 / sqrt(64.0 * 127), 1e-7);
}

static void test_prepare_lsq(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    qat_model_build(m, 2);
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true, c.wbits = 2;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    CU_ASSERT_EQUAL(m->n_qparams, 256 + 128 + 10); /* one learned scale per output channel */
    qat__layer *fc2 = &m->layers[qat_model_find_layer(m, "fc2")];
    CU_ASSERT_PTR_EQUAL(fc2->wscale->data, m->qparams + 256);
    double a = 0; /* LSQ init: 2 mean|w| / sqrt(qmax), qmax = 1 */
    for (int j = 0; j < 256; j++) a += fabsf(fc2->weight->data[j]);
    ASSERT_CLOSE(fc2->wscale->data[0], 2 * a / 256, 1e-6);
    qat_rng rng;
    qat_rng_seed(&rng, 4);
    int64_t sx[2] = {8, 784};
    qat_tensor *x = t_rand(ctx, &rng, 2, sx, -1, 1, false);
    int32_t lab[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), lab)), QAT_OK);
    int nonzero = 0;
    for (int64_t i = 0; i < m->n_qparams; i++) nonzero += m->qgrads[i] != 0;
    CU_ASSERT(nonzero > m->n_qparams / 2); /* the scales learn */
    qat_model_zero_grad(m);
    CU_ASSERT_EQUAL(m->qgrads[3], 0);
    qat_ctx_free(ctx);
}

/* The clipped-STE mask is kept as packed bits: at lengths around and
 * between multiples of 8 (tails of 1..7 bits), with a per-channel type
 * whose channel runs start inside a byte, both backward paths (added into
 * a leaf's gradient; masked in place for a step tensor) pass the gradient
 * exactly where the unclamped integer is in range, computed here apart. */
static void test_ste_mask_bits(void) {
    for (int64_t n = 1; n <= 41; n += 4)
        for (int via_step = 0; via_step < 2; via_step++) {
            qat_ctx *ctx = qat_ctx_new();
            qat_rng rng;
            qat_rng_seed(&rng, (uint64_t)(n * 2 + via_step));
            int64_t s[2] = {3, n};
            qat_qtype q;
            CU_ASSERT_EQUAL_FATAL(qat_qtype_init_axis(ctx, &q, 4, true, false, 2, s, 0), QAT_OK); /* per row */
            CU_ASSERT_EQUAL_FATAL(q.nparams, 3);
            for (int c = 0; c < 3; c++) q.scale[c] = 0.25f * (float)(1 << c), q.zero_point[c] = 0; /* exact 1/s */
            qat_tensor *w = t_rand(ctx, &rng, 2, s, -4, 4, true);
            qat_tensor *x = w;
            if (via_step) { /* a step tensor: fake quant's backward masks the gradient in place */
                qat_tensor *one = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, &s[1], false);
                for (int64_t i = 0; i < n; i++) one->data[i] = 1.0f;
                x = qat_mul(ctx, w, one);
            }
            qat_tensor *y = qat_fake_quant(ctx, x, &q, QAT_STE_CLIPPED);
            CU_ASSERT_FATAL(y != NULL);
            CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
            int wrong = 0;
            for (int c = 0; c < 3; c++)
                for (int64_t i = 0; i < n; i++) {
                    float v = w->data[c * n + i], r = rintf(v / q.scale[c]);
                    float want = r >= (float)q.qmin && r <= (float)q.qmax ? 1.0f : 0.0f;
                    wrong += w->grad[c * n + i] != want;
                }
            CU_ASSERT_EQUAL(wrong, 0);
            qat_ctx_free(ctx);
        }
}

/* The activation quantizer with a ReLU/ReLU6 fused in, written over its
 * input, equals qat_relu/qat_clamp then qat_fake_quant: values and input
 * gradients, bit for bit (clipped and plain STE). */
static void test_fused_relu_fake_quant(void) {
    for (int k = 0; k < 4; k++) {
        bool six = k & 1;
        qat_ste ste = k & 2 ? QAT_STE_PLAIN : QAT_STE_CLIPPED;
        float res[2][24], grad[2][24];
        for (int fused = 0; fused < 2; fused++) {
            qat_ctx *ctx = qat_ctx_new();
            qat_rng rng;
            qat_rng_seed(&rng, 4);
            int64_t s[2] = {4, 6};
            qat_tensor *w = t_rand(ctx, &rng, 2, s, -4, 9, true); /* a leaf; x = w·1 is a step tensor */
            qat_tensor *one = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, (int64_t[]){6}, false);
            for (int i = 0; i < 6; i++) one->data[i] = 1.0f;
            qat_tensor *x = qat_mul(ctx, w, one); /* out_free: it may be written over */
            qat_qtype q;
            qat_qtype_init(ctx, &q, 4, true, false, 0, NULL, NULL);
            q.scale[0] = 0.4f, q.zero_point[0] = -6;
            qat_tensor *y = fused ? qat__fake_quant_over(ctx, x, &q, ste, 0.0f, six ? 6.0f : INFINITY)
                                  : qat_fake_quant(ctx, six ? qat_clamp(ctx, x, 0.0f, 6.0f) : qat_relu(ctx, x), &q, ste);
            CU_ASSERT_FATAL(y != NULL);
            if (fused) CU_ASSERT_PTR_EQUAL(y->data, x->data); /* written over x */
            memcpy(res[fused], y->data, sizeof res[fused]);
            qat_tensor *wt = qat_tensor_new(ctx, QAT_MEM_STEP, 2, s, false);
            for (int i = 0; i < 24; i++) wt->data[i] = (float)(i % 7) - 3.0f;
            CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, wt))), QAT_OK);
            memcpy(grad[fused], w->grad, sizeof grad[fused]);
            qat_ctx_free(ctx);
        }
        CU_ASSERT_EQUAL(qat_test_bit_diffs(res[0], res[1], 24, true), 0);
        CU_ASSERT_EQUAL(qat_test_bit_diffs(grad[0], grad[1], 24, false), 0);
    }
}

/* Bits equal, or both NaN (a NaN's sign and payload are the CPU's). */
static int64_t bits_or_nan_diffs(const float *a, const float *b, int64_t n, bool signed_zeros) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) bad += !(isnan(a[i]) && isnan(b[i]));
        else bad += qat_test_bit_diffs(a + i, b + i, 1, signed_zeros);
    }
    return bad;
}

/* One of the sign cases: x as a step leaf, through concat (whose backward
 * stores the gradient as it is, so its sign reaches the leaf), then
 * pre = 0: fake quant; 1: relu then fake quant; 2: relu6 then fake quant;
 * 3: LSQ. fused: the quantizer with the ReLU/ReLU6 done over its input. */
static void sign_case(int pre, bool fused, const float *dy, const float *want_y, const float *want_dx) {
    qat_ctx *ctx = qat_ctx_new();
    int64_t n = 48, one = 1;
    qat_tensor *leaf = qat_tensor_from(ctx, QAT_MEM_STEP, sign_x, 1, &n, true);
    qat_tensor *x = qat_concat(ctx, 1, &leaf, 0);
    qat_qtype q;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init(ctx, &q, 4, true, false, 0, NULL, NULL), QAT_OK);
    q.scale[0] = sign_scale, q.zero_point[0] = sign_zp;
    CU_ASSERT_EQUAL_FATAL(q.qmin, sign_qmin);
    qat_tensor *y;
    if (pre == 3) {
        qat_tensor *sc = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &one, false), *zp = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &one, false);
        sc->data[0] = sign_scale, zp->data[0] = (float)sign_lsq_zp;
        y = qat_fake_quant_lsq(ctx, x, sc, zp, &q, 1.0f);
    } else if (fused) {
        y = qat__fake_quant_over(ctx, x, &q, QAT_STE_CLIPPED, 0.0f, pre == 1 ? INFINITY : 6.0f);
        CU_ASSERT_PTR_EQUAL(y->data, x->data); /* written over x: the fused op ran */
    } else {
        qat_tensor *r = pre == 0 ? x : pre == 1 ? qat_relu(ctx, x) : qat_clamp(ctx, x, 0.0f, 6.0f);
        y = qat_fake_quant(ctx, r, &q, QAT_STE_CLIPPED);
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(y->data, want_y, n, true), 0);
    qat_tensor *tdy = qat_tensor_from(ctx, QAT_MEM_STEP, dy, 1, &n, false);
    CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, tdy))), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(leaf->grad);
    int64_t bad = bits_or_nan_diffs(leaf->grad, want_dx, n, true);
    if (bad) printf("\n  sign case %d%s: %lld gradients differ from torch's\n", pre, fused ? " fused" : "", (long long)bad);
    CU_ASSERT_EQUAL(bad, 0);
    qat_ctx_free(ctx);
}

/* The clipped STE multiplies by its mask as torch does (dY * mask): a
 * clipped element's gradient is dy·0, -0.0 for a negative dy and NaN for a
 * NaN or infinite dy, where an AND with the mask gave +0.0. After a ReLU or
 * ReLU6, fused into the quantizer or not, the elements they clip get the
 * +0.0 of torch's threshold/hardtanh backward. LSQ's dx likewise. Golden
 * vectors from torch 1.13 (make_fakequant_golden.py). */
static void test_golden_gradient_signs(void) {
    sign_case(0, false, sign_dy, sign_fq_y, sign_fq_dx);
    sign_case(1, false, sign_dy, sign_relu_y, sign_relu_dx);
    sign_case(1, true, sign_dy, sign_relu_y, sign_relu_dx);
    sign_case(2, false, sign_dy, sign_relu6_y, sign_relu6_dx);
    sign_case(2, true, sign_dy, sign_relu6_y, sign_relu6_dx);
    sign_case(3, false, sign_lsq_dy, sign_lsq_y, sign_lsq_dx);
    /* a persistent leaf adds into its zeroed gradient, as torch's after
     * zero_grad(): +0 + -0 is +0, but NaN still propagates */
    qat_ctx *ctx = qat_ctx_new();
    int64_t n = 48;
    qat_tensor *w = qat_tensor_from(ctx, QAT_MEM_PERSIST, sign_x, 1, &n, true);
    qat_qtype q;
    qat_qtype_init(ctx, &q, 4, true, false, 0, NULL, NULL);
    q.scale[0] = sign_scale, q.zero_point[0] = sign_zp;
    qat_tensor *tdy = qat_tensor_from(ctx, QAT_MEM_STEP, sign_dy, 1, &n, false);
    CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, qat_fake_quant(ctx, w, &q, QAT_STE_CLIPPED), tdy))), QAT_OK);
    CU_ASSERT_EQUAL(bits_or_nan_diffs(w->grad, sign_fq_dx, n, false), 0);
    int nans = 0;
    for (int i = 0; i < 48; i++) nans += isnan(w->grad[i]);
    CU_ASSERT(nans >= 8); /* NaN and infinite dy on clipped elements give NaN, not 0 */
    qat_ctx_free(ctx);
}

static void test_bn_folding(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_add_conv2d(m, NULL, 1, 2, 3, 1, 0, false);
    qat_model_add_batchnorm(m, NULL, 2, 0.1f, 1e-5f);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    qat__layer *conv = &m->layers[1], *bn = &m->layers[2];
    bn->gamma->data[0] = 1.5f, bn->gamma->data[1] = -0.7f, bn->beta->data[0] = 0.2f, bn->beta->data[1] = -0.1f;
    bn->running_mean[0] = 0.3f, bn->running_mean[1] = -0.4f, bn->running_var[0] = 2.0f, bn->running_var[1] = 0.5f;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    CU_ASSERT_EQUAL(conv->fold_bn, 2);
    CU_ASSERT(bn->folded);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    int64_t sx[4] = {2, 1, 5, 5};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 1, false);
    /* training: batch statistics, gradients reach weight, gamma and beta */
    qat_tensor *y = qat_model_forward(m, x);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, y))), QAT_OK);
    CU_ASSERT(fabsf(conv->weight->grad[0]) > 0 && fabsf(bn->gamma->grad[1]) > 0 && fabsf(bn->beta->grad[0]) > 0);
    qat_ctx_step_reset(ctx);
    /* eval, frozen: equals conv(x, fq(w·sf)) + beta - mean·sf */
    qat_model_train(m, false);
    m->bn_frozen = true;
    m->layers[0].aq = NULL; /* compare before input and output quantization */
    bn->aq = NULL;
    y = qat_model_forward(m, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    float sf[2], wf[18];
    for (int c = 0; c < 2; c++) sf[c] = bn->gamma->data[c] / sqrtf(bn->running_var[c] + 1e-5f);
    for (int i = 0; i < 18; i++) wf[i] = conv->weight->data[i] * sf[i / 9];
    qat_qtype q;
    int64_t ws[4] = {2, 1, 3, 3};
    qat_qtype_init_axis(ctx, &q, 8, true, true, 4, ws, 0);
    qat_qtype_calibrate(&q, wf, true);
    int32_t qi[18];
    float wq[18];
    qat_quantize(&q, wf, qi);
    qat_dequantize(&q, qi, wq);
    qat_tensor *tw = qat_tensor_from(ctx, QAT_MEM_STEP, wq, 4, ws, false);
    qat_tensor *ref = qat_conv2d(ctx, x, tw, NULL, 1, 0);
    double worst = 0;
    for (int64_t i = 0; i < ref->numel; i++) {
        int c = (int)((i / 9) % 2);
        double want = ref->data[i] + bn->beta->data[c] - bn->running_mean[c] * sf[c];
        worst = fmax(worst, fabs(want - y->data[i]));
    }
    CU_ASSERT(worst < 1e-5);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"storage ranges: full, narrow, 2 to 16 bits", test_storage_ranges},
        {"batch range: fast path equals a simple loop", test_minmax_matches_simple_loop},
        {"granularities: tensor, axis, blocks; constraints", test_granularities},
        {"a ragged last block: parameters, indices, calibration, quantization (hand-computed)", test_ragged_blocks},
        {"hand-computed: ties, clamping, STE masks, sub-channel", test_hand_values},
        {"the STE mask as packed bits: odd lengths, channel runs inside a byte, both backward paths", test_ste_mask_bits},
        {"every width 2..16 quantizes and clamps", test_all_widths},
        {"golden: fake_quantize_per_tensor_affine (torch 1.13)", test_golden_per_tensor},
        {"golden: fake_quantize_per_channel_affine (torch 1.13)", test_golden_per_channel},
        {"golden: MinMaxObserver qparams (torch 1.13)", test_golden_observer_qparams},
        {"calibrate: per-channel symmetric weights", test_calibrate_per_channel_weights},
        {"MLIR spelling: seeds' examples round-trip, errors", test_mlir},
        {"golden: MovingAverageMinMaxObserver (torch 1.13)", test_golden_ema_observer},
        {"golden: LSQ learnable fake quant, per tensor and channel (torch 1.13)", test_golden_lsq},
        {"observers over a scripted sequence of batches", test_observers_scripted},
        {"observers: per-channel variants", test_observers_per_channel},
        {"prepare: every Linear/Conv quantized, STE, frozen in eval", test_prepare_quantizes_every_layer},
        {"prepare: block granularity, per-layer override, errors", test_prepare_block_and_errors},
        {"prepare: LSQ weight scales are learned", test_prepare_lsq},
        {"prepare: sub-channel LeNet (block:16 on the flattened input, ragged; the seed's axes form; LSQ)",
         test_prepare_subchannel_lenet},
        {"a ReLU/ReLU6 fused into the quantizer, written over its input: the same values and gradients",
         test_fused_relu_fake_quant},
        {"golden: gradient signs of clipped elements, NaN dy, after ReLU/ReLU6, LSQ (torch 1.13)",
         test_golden_gradient_signs},
        {"prepare: Conv+BatchNorm folding (Jacob et al.)", test_bn_folding},
        {NULL, NULL},
    };
    return qat_test_main("fakequant", cases, argc, argv);
}
