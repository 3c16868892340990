/* The quantized export and the engines: a two-layer model computed by
 * hand, the integer kernels against a plain reference, lowering against
 * the fake-quantized model it comes from, file round trips, damaged files,
 * what the integer engine refuses, rebuilding a model from a training
 * checkpoint, and a model with an input normalization from training to
 * its file, the engines and the numpy reader on raw inputs. */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdlib.h>

#include "internals.h"
#include "qat/analyze.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/io.h"
#include "qat/optim.h"
#include "test_util.h"

static char dir[256];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* ---- a model small enough to compute by hand ------------------------------------ */

static qat_aparams ap(float s, int32_t zp) {
    return (qat_aparams){.scale = s, .zero_point = zp, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
}

/* A linear op from tensor t_in to tensor t_in + 1. */
static void hand_linear(qat_ctx *ctx, qat_qop *op, const char *name, int t_in, int in, int out, const int32_t *w,
                        const float *sw, const int32_t *b, qat_aparams x, qat_aparams y, qat_act_kind act) {
    memset(op, 0, sizeof *op);
    op->kind = QAT_QOP_LINEAR;
    snprintf(op->name, sizeof op->name, "%s", name);
    op->act = act, op->groups = 1;
    op->n_inputs = 1, op->inputs[0] = t_in, op->output = t_in + 1, op->n_mult = out;
    int64_t shape[2] = {out, in};
    CU_ASSERT_EQUAL(qat_qtype_init_axis(ctx, &op->wq, 8, true, true, 2, shape, 0), QAT_OK);
    op->weight = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(in * out) * sizeof(int32_t));
    op->bias = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)out * sizeof(int32_t));
    op->bias_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)out * sizeof(float));
    op->multiplier = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)out * sizeof(int32_t));
    op->shift = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)out * sizeof(int32_t));
    memcpy(op->weight, w, (size_t)(in * out) * sizeof *w);
    for (int o = 0; o < out; o++) {
        int sh;
        op->wq.scale[o] = sw[o];
        op->bias[o] = b[o];
        op->bias_scale[o] = x.scale * sw[o];
        qat_quantize_multiplier((double)x.scale * sw[o] / y.scale, &op->multiplier[o], &sh);
        op->shift[o] = sh;
    }
    op->act_min = act == QAT_ACT_RELU ? y.zero_point : y.qmin, op->act_max = y.qmax;
}

static qat_qtensor vector(const char *name, int64_t n, qat_aparams q) {
    qat_qtensor t = {.rank = 1, .shape = {n}, .q = q};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* input s 0.5 zp -1; fc1 2->2 relu, s_w (0.25, 0.5), out s 1 zp 0;
 * fc2 2->1, s_w 0.1, out s 0.2 zp 10. */
static void hand_model(qat_ctx *ctx, qat_qmodel *q) {
    memset(q, 0, sizeof *q);
    q->tensors = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 3 * sizeof *q->tensors);
    q->ops = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof *q->ops);
    q->n_tensors = 3, q->n_ops = 2, q->input = 0, q->output = 2, q->config = "{}";
    q->tensors[0] = vector("input", 2, ap(0.5f, -1));
    q->tensors[1] = vector("fc1", 2, ap(1.0f, 0));
    q->tensors[2] = vector("fc2", 1, ap(0.2f, 10));
    snprintf(q->producer, sizeof q->producer, "test");
    hand_linear(ctx, &q->ops[0], "fc1", 0, 2, 2, (int32_t[]){2, -1, 1, 3}, (float[]){0.25f, 0.5f},
                (int32_t[]){4, -2}, q->tensors[0].q, ap(1.0f, 0), QAT_ACT_RELU);
    hand_linear(ctx, &q->ops[1], "fc2", 1, 2, 1, (int32_t[]){3, -2}, (float[]){0.1f}, (int32_t[]){5},
                ap(1.0f, 0), ap(0.2f, 10), QAT_ACT_NONE);
}

static void test_hand_computed_model(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    hand_model(ctx, &q);
    char path[300];
    path_of(path, sizeof path, "hand.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &q, path), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, l), QAT_OK);
    qat_engine *e = qat_engine_new(ctx, l, QAT_ENGINE_INT, 4);
    qat_engine *f = qat_engine_new(ctx, l, QAT_ENGINE_FAKE, 4);
    CU_ASSERT_FATAL(e && f);
    /* sample 1: x = (1, -0.5) -> q = (1, -2), x - zp = (2, -1).
     *   fc1: acc = (2·2 + -1·-1 + 4, 1·2 + 3·-1 - 2) = (9, -3);
     *        9·0.125 = 1.125 -> 1; -3·0.25 = -0.75 -> -1, ReLU -> 0.
     *   fc2: acc = 3·1 - 2·0 + 5 = 8; 8·0.5 = 4; + zp 10 = 14 (0.8).
     * sample 2: x = (-1, 3) -> q = (-3, 5), x - zp = (-2, 6).
     *   fc1: acc = (-4 - 6 + 4, -2 + 18 - 2) = (-6, 14); -0.75 -> -1 -> ReLU 0;
     *        14·0.25 = 3.5 -> 4 (ties away from zero).
     *   fc2: acc = 0 - 8 + 5 = -3; -3·0.5 = -1.5: gemmlowp's SRDHM rounds the
     *        tie up to -1 -> 9; the fake quantization's round-half-even
     *        gives -2 -> 8: the one-step difference the contract expects. */
    float x[4] = {1.0f, -0.5f, -1.0f, 3.0f}, logits[2], flog[2];
    int32_t qi[2], qf[2];
    CU_ASSERT_EQUAL(qat_engine_run(e, x, 2, logits, qi), QAT_OK);
    CU_ASSERT_EQUAL(qi[0], 14);
    CU_ASSERT_EQUAL(qi[1], 9);
    ASSERT_CLOSE(logits[0], 0.8, 1e-6);
    ASSERT_CLOSE(logits[1], -0.2, 1e-6);
    CU_ASSERT_EQUAL(qat_engine_run(f, x, 2, flog, qf), QAT_OK);
    CU_ASSERT_EQUAL(qf[0], 14);
    CU_ASSERT_EQUAL(qf[1], 8);
    /* hybrid: float input, dequantized weights and bias, no activation grid:
     * fc1 = relu(0.5 + 0.125 + 0.5, 0.5 - 0.75 - 0.5) = (1.125, 0),
     * fc2 = 0.3·1.125 + 0.5 = 0.8375 */
    qat_engine *h = qat_engine_new(ctx, l, QAT_ENGINE_HYBRID, 4);
    CU_ASSERT_FATAL(h != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(h, x, 1, flog, NULL), QAT_OK);
    ASSERT_CLOSE(flog[0], 0.8375, 1e-6);
    CU_ASSERT_EQUAL(qat_engine_run(h, x, 1, flog, qi), QAT_ERR_ARG); /* no integer logits */
    CU_ASSERT_EQUAL(qat_engine_run(e, x, 5, logits, NULL), QAT_ERR_ARG); /* over max_batch */
    /* NaN input: the int engine quantizes it to the zero point (real 0), so
     * x = (NaN, -0.5) runs with x - zp = (0, -1). fc1: acc = (1 + 4, -3 - 2)
     * = (5, -5); 5·0.125 = 0.625 -> 1, -5·0.25 = -1.25 -> -1 -> ReLU 0.
     * fc2: 3·1 + 5 = 8 -> 4 -> 14. */
    float xn[2] = {NAN, -0.5f};
    CU_ASSERT_EQUAL(qat_engine_run(e, xn, 1, logits, qi), QAT_OK);
    CU_ASSERT_EQUAL(qi[0], 14);
    qat_engine_free(e), qat_engine_free(f), qat_engine_free(h);
    qat_ctx_free(ctx);
}

/* ---- kernels --------------------------------------------------------------------- */

/* One GEMM problem: random weights, columns, biases and requantization;
 * out/ref have room for O·P results. */
typedef struct {
    int O, P, Kp, Pp;
    int16_t *w, *col;
    int8_t *out, *ref;
    int32_t *bias, *m0, *sh;
} gemm_case;

static const int gemm_shapes[][3] = {{1, 1, 16},  {3, 17, 16},  {6, 784, 32}, {16, 100, 160},
                                     {13, 40, 48}, {10, 64, 96}, {7, 20, 26}};
enum { N_GEMM_SHAPES = sizeof gemm_shapes / sizeof *gemm_shapes };

static void gemm_case_init(gemm_case *g, const int shape[3], qat_rng *rng) {
    int O = shape[0], P = shape[1], Kp = shape[2], Pp = (int)qat__round_up(P, QAT_PPAD);
    int Op = (int)qat__round_up(O, QAT_WROWS);
    *g = (gemm_case){.O = O, .P = P, .Kp = Kp, .Pp = Pp};
    g->w = calloc((size_t)(Op * Kp), 2), g->col = calloc((size_t)(Kp * Pp), 2);
    g->out = calloc((size_t)(O * P), 1), g->ref = calloc((size_t)(O * P), 1);
    g->bias = malloc((size_t)O * 4), g->m0 = malloc((size_t)O * 4), g->sh = malloc((size_t)O * 4);
    for (int i = 0; i < O * Kp; i++) g->w[i] = (int16_t)((int)qat_rng_below(rng, 255) - 127);
    for (int i = 0; i < Kp * Pp; i++) g->col[i] = (int16_t)((int)qat_rng_below(rng, 511) - 255);
    for (int o = 0; o < O; o++) {
        g->bias[o] = (int32_t)qat_rng_below(rng, 20001) - 10000;
        g->m0[o] = (int32_t)((1u << 30) + qat_rng_below(rng, 1u << 30));
        g->sh[o] = (int)qat_rng_below(rng, 14) - 11; /* -11..2: positive shifts too */
    }
}

static void gemm_case_free(gemm_case *g) {
    free(g->w), free(g->col), free(g->out), free(g->ref), free(g->bias), free(g->m0), free(g->sh);
}

/* Arguments writing to out; layout 0: conv (out[o][p]), 1: linear (out[p][o]). */
static qat__gemm_args gemm_args(const gemm_case *g, int layout, int8_t *out) {
    return (qat__gemm_args){.w = g->w, .col = g->col, .O = g->O, .P = g->P, .Kp = g->Kp, .Pp = g->Pp,
                            .bias = g->bias, .m0 = g->m0, .shift = g->sh, .zp = -7, .lo = -128, .hi = 127,
                            .out = out, .so = layout ? 1 : g->P, .sp = layout ? g->O : 1};
}

/* The portable kernel against the public requantization, element by element. */
static void test_gemm_reference_kernel(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    for (int t = 0; t < N_GEMM_SHAPES; t++) {
        gemm_case g;
        gemm_case_init(&g, gemm_shapes[t], &rng);
        qat__gemm_args a = gemm_args(&g, 1, g.ref); /* linear: ref[p·O + o] */
        qat__gemm_requant_ref(&a);
        int bad = 0;
        for (int o = 0; o < g.O; o++)
            for (int p = 0; p < g.P; p++) {
                int32_t acc = g.bias[o];
                for (int k = 0; k < g.Kp; k++) acc += g.w[o * g.Kp + k] * g.col[k * g.Pp + p];
                int64_t v = (int64_t)qat_multiply_by_quantized_multiplier(acc, g.m0[o], g.sh[o]) - 7;
                v = v < -128 ? -128 : v > 127 ? 127 : v;
                bad += g.ref[p * g.O + o] != v;
            }
        CU_ASSERT_EQUAL(bad, 0);
        gemm_case_free(&g);
    }
}

/* Every SIMD kernel this CPU runs gives the portable kernel's integers. */
static void test_gemm_kernels_agree_with_reference(void) {
    const char *missing = NULL;
    int present = 0;
    for (int i = 1; i < 3; i++) {
        const char *name;
        if (qat__gemm_kernel(i, &name)) present++;
        else missing = name;
    }
    if (!present) QAT_TEST_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI: only the portable kernel runs");
    if (missing) printf("\n  (this CPU has no %s: that kernel is not checked)", missing);
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    for (int t = 0; t < N_GEMM_SHAPES; t++) {
        gemm_case g;
        gemm_case_init(&g, gemm_shapes[t], &rng);
        int elems = g.O * g.P;
        for (int layout = 0; layout < 2; layout++) {
            qat__gemm_args r = gemm_args(&g, layout, g.ref);
            qat__gemm_requant_ref(&r);
            for (int i = 1; i < 3; i++) {
                const char *name;
                qat__gemm_fn fn = qat__gemm_kernel(i, &name);
                if (!fn) continue;
                memset(g.out, 0x55, (size_t)elems);
                qat__gemm_args a = gemm_args(&g, layout, g.out);
                fn(&a);
                if (memcmp(g.out, g.ref, (size_t)elems)) printf("\n  %s kernel differs (shape %d)\n", name, t);
                CU_ASSERT_EQUAL(memcmp(g.out, g.ref, (size_t)elems), 0);
            }
        }
        gemm_case_free(&g);
    }
}

static void test_im2col_matches_direct_convolution(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    /* C, H, W, kh, kw, sh, sw, ph, pw: square and not, strided, padded */
    int cases[][9] = {{1, 8, 8, 3, 3, 1, 1, 1, 1}, {2, 7, 9, 3, 3, 2, 2, 0, 0}, {3, 6, 6, 5, 5, 1, 1, 2, 2},
                      {1, 28, 28, 5, 5, 1, 1, 2, 2}, {1, 28, 28, 10, 4, 2, 2, 4, 1}, {2, 9, 11, 1, 3, 1, 2, 0, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int C = cases[t][0], H = cases[t][1], W = cases[t][2], kh = cases[t][3], kw = cases[t][4];
        int sh = cases[t][5], sw = cases[t][6], ph = cases[t][7], pw = cases[t][8];
        int OH = (H + 2 * ph - kh) / sh + 1, OW = (W + 2 * pw - kw) / sw + 1, P = OH * OW;
        int K = C * kh * kw, Pp = (int)qat__round_up(P, QAT_PPAD), Hp = H + 2 * ph, Wp = W + 2 * pw;
        int8_t *x = malloc((size_t)(C * H * W));
        int16_t *xp = malloc((size_t)(C * Hp * Wp + QAT_IM2COL_CHUNK) * 2);
        int16_t *col = malloc((size_t)(K * Pp + QAT_IM2COL_CHUNK) * 2);
        for (int i = 0; i < C * H * W; i++) x[i] = (int8_t)((int)qat_rng_below(&rng, 256) - 128);
        int32_t zp = 5;
        qat__pad_s8(x, C, H, W, ph, pw, zp, xp);
        qat__im2col_s16(xp, C, Hp, Wp, kh, kw, sh, sw, OH, OW, Pp, col);
        int bad = 0;
        for (int c = 0; c < C; c++)
            for (int ky = 0; ky < kh; ky++)
                for (int kx = 0; kx < kw; kx++)
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) {
                            int iy = oy * sh + ky - ph, ix = ox * sw + kx - pw;
                            int want = iy < 0 || iy >= H || ix < 0 || ix >= W ? 0 : x[(c * H + iy) * W + ix] - zp;
                            bad += col[((c * kh + ky) * kw + kx) * Pp + oy * OW + ox] != want;
                        }
        CU_ASSERT_EQUAL(bad, 0);
        free(x), free(xp), free(col);
    }
}

static void test_maxpool_simd_equals_scalar(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    int shapes[][3] = {{6, 28, 28}, {16, 10, 10}, {3, 7, 8}, {2, 9, 9}, {1, 2, 2}, {4, 6, 34}, {3, 64, 66}};
    static int8_t x[3 * 64 * 66], a[3 * 32 * 33], b[3 * 32 * 33], tmp[64 * 66];
    if (!qat__maxpool2_s8_simd(x, 1, 2, 2, b, tmp)) QAT_TEST_SKIP("this CPU has no AVX2: the SIMD pooling never runs");
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int C = shapes[t][0], H = shapes[t][1], W = shapes[t][2], n = C * (H / 2) * (W / 2);
        for (int i = 0; i < C * H * W; i++) x[i] = (int8_t)((int)qat_rng_below(&rng, 256) - 128);
        qat__maxpool_s8(x, C, H, W, 2, 2, 2, 2, 0, 0, a);
        memset(b, 0x55, sizeof b);
        bool simd = qat__maxpool2_s8_simd(x, C, H, W, b, tmp);
        CU_ASSERT_EQUAL(simd, W % 2 == 0); /* it takes every even width */
        if (!simd) memcpy(b, a, (size_t)n * sizeof *b);
        CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * sizeof *a), 0);
    }
}

/* ---- lowering a real prepared model ---------------------------------------------- */

typedef struct {
    qat_ctx *ctx;
    qat_model *m;
    qat_rng rng;
} small;

/* 8x8 inputs, 5 outputs, prepared and run over a few training batches so
 * the observers and batchnorm statistics have moved:
 *   bn false: conv(1->3, 3x3, pad 1) relu maxpool2 flatten fc(48->5)
 *   bn true:  the same with a BatchNorm after the conv (no conv bias)
 *   SMALL_POOLS: conv(1->2, 3x3, pad 1) relu6 avgpool2 relu flatten fc(32->5) */
#define SMALL_POOLS 2
static void small_init(small *s, int variant, const qat_prepare_config *cfg) {
    bool bn = variant == 1;
    s->ctx = qat_ctx_new();
    s->m = qat_model_new(s->ctx);
    qat_rng_seed(&s->rng, 11);
    if (variant == SMALL_POOLS) {
        qat_model_add_conv2d(s->m, NULL, 1, 2, 3, 1, 1, true);
        qat_model_add_relu6(s->m);
        qat_model_add_avgpool2d(s->m, 2, 2);
        qat_model_add_relu(s->m);
        qat_model_add_flatten(s->m);
        qat_model_add_linear(s->m, NULL, 32, 5, true);
    } else {
        qat_model_add_conv2d(s->m, NULL, 1, 3, 3, 1, 1, !bn);
        if (bn) qat_model_add_batchnorm(s->m, NULL, 3, 0.1f, 1e-5f);
        qat_model_add_relu(s->m);
        qat_model_add_maxpool2d(s->m, 2, 2);
        qat_model_add_flatten(s->m);
        qat_model_add_linear(s->m, NULL, 48, 5, true);
    }
    CU_ASSERT_EQUAL(qat_model_build(s->m, 5), QAT_OK);
    CU_ASSERT_EQUAL(qat_prepare(s->m, cfg), QAT_OK);
    for (int step = 0; step < 5; step++) {
        qat_tensor *x = qat_tensor_new(s->ctx, QAT_MEM_STEP, 4, (int64_t[]){16, 1, 8, 8}, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&s->rng);
        CU_ASSERT(qat_model_forward(s->m, x) != NULL);
        qat_ctx_step_reset(s->ctx);
    }
    qat_model_train(s->m, false);
    qat_ctx_set_grad_enabled(s->ctx, false);
}

/* The model's own fake-quantized eval forward on n inputs. */
static void model_logits(small *s, const float *x, int n, float *out) {
    qat_tensor *t = qat_tensor_from(s->ctx, QAT_MEM_STEP, x, 4, (int64_t[]){n, 1, 8, 8}, false);
    qat_tensor *y = qat_model_forward(s->m, t);
    CU_ASSERT_FATAL(y != NULL);
    memcpy(out, y->data, (size_t)(n * 5) * sizeof *out);
    qat_ctx_step_reset(s->ctx);
}

/* m's own eval forward on n inputs of the given batch shape, k outputs each. */
static void model_logits_of(qat_model *m, const float *x, int n, const int64_t *shape, int k, float *out) {
    qat_ctx *ctx = qat_model_ctx(m);
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, shape, false);
    qat_tensor *y = qat_model_forward(m, t);
    CU_ASSERT_FATAL(y != NULL);
    memcpy(out, y->data, (size_t)(n * k) * sizeof *out);
    qat_ctx_step_reset(ctx);
}

static void check_lowering(int variant) {
    small s;
    qat_prepare_config cfg = qat_prepare_defaults();
    small_init(&s, variant, &cfg);
    qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, s.ctx, q), QAT_OK);
    bool pools = variant == SMALL_POOLS;
    CU_ASSERT_EQUAL(q->n_ops, pools ? 5 : 4); /* conv(+bn)(+relu[6]), pool, [relu,] flatten, fc */
    CU_ASSERT_EQUAL(q->ops[0].act, pools ? QAT_ACT_RELU6 : QAT_ACT_RELU);
    if (pools) CU_ASSERT(q->ops[1].kind == QAT_QOP_AVGPOOL2D && q->ops[2].kind == QAT_QOP_RELU);
    enum { N = 64 };
    float x[N * 64], ref[N * 5], fake[N * 5], ig[N * 5];
    int32_t qi[N * 5], qf[N * 5];
    for (int i = 0; i < N * 64; i++) x[i] = qat_rng_normal(&s.rng);
    model_logits(&s, x, N, ref);
    qat_engine *fe = qat_engine_new(s.ctx, q, QAT_ENGINE_FAKE, N), *ie = qat_engine_new(s.ctx, q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(fe && ie);
    CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, fake, qf), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run(ie, x, N, ig, qi), QAT_OK);
    /* the file's fake model is the QAT model up to the int32 rounding of the
     * bias: the logits agree on the grid, a step at most */
    float step = q->tensors[q->output].q.scale;
    int same_fake = 0, same_int = 0, far = 0;
    for (int i = 0; i < N * 5; i++) {
        same_fake += ref[i] == fake[i];
        far += fabsf(ref[i] - fake[i]) > 1.01f * step;
        same_int += qi[i] == qf[i];
        far += abs(qi[i] - qf[i]) > 2;
    }
    CU_ASSERT(same_fake >= N * 5 * 95 / 100);
    CU_ASSERT(same_int >= N * 5 * 90 / 100);
    CU_ASSERT_EQUAL(far, 0);
    /* At the first layer boundary (same integer input to both): at most one
     * step apart, and rarely. The contract's double rounding (SRDHM to an
     * integer, then RoundingDivideByPOT half away from zero) moves an exact
     * value just below k + 1/2 up to k + 1, never the other way for outputs
     * >= 0 (all of them, after the ReLU): int >= fake wherever they differ.
     * Any other difference would be a bug (contract §5). */
    qat_qmodel first = *q; /* the first op, then a flatten (a program ends in a vector) */
    qat_qtensor ts[3] = {q->tensors[q->ops[0].inputs[0]], q->tensors[q->ops[0].output]};
    qat_qop ops[2] = {q->ops[0]};
    int64_t n1 = qat_qtensor_numel(&ts[1]);
    ts[2] = ts[1], ts[2].rank = 1, ts[2].shape[0] = n1;
    ops[0].inputs[0] = 0, ops[0].output = 1;
    ops[1] = (qat_qop){.kind = QAT_QOP_FLATTEN, .name = "flat", .n_inputs = 1, .inputs = {1}, .output = 2, .groups = 1,
                       .act_min = ts[1].q.qmin, .act_max = ts[1].q.qmax};
    first.tensors = ts, first.ops = ops, first.n_tensors = 3, first.n_ops = 2, first.input = 0, first.output = 2;
    qat_engine *f1 = qat_engine_new(s.ctx, &first, QAT_ENGINE_FAKE, N), *i1 = qat_engine_new(s.ctx, &first, QAT_ENGINE_INT, N);
    int32_t *a1 = malloc(sizeof(int32_t) * N * 192), *b1 = malloc(sizeof(int32_t) * N * 192); /* 192 >= n1 */
    CU_ASSERT_EQUAL(qat_engine_run(i1, x, N, NULL, a1), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run(f1, x, N, NULL, b1), QAT_OK);
    int differ = 0, down = 0;
    for (int i = 0; i < N * n1; i++) {
        int d = a1[i] - b1[i];
        differ += d != 0, down += d < 0 || d > 1;
    }
    printf(" [first layer: %d of %lld differ, all by +1]", differ, (long long)(N * n1));
    CU_ASSERT_EQUAL(down, 0);
    CU_ASSERT(differ <= N * n1 / 100);
    free(a1), free(b1);
    qat_engine_free(f1), qat_engine_free(i1);
    qat_engine_free(fe), qat_engine_free(ie);
    qat_ctx_free(s.ctx);
}

static void test_lowering_agrees_with_the_fake_quantized_model(void) { check_lowering(0); }
static void test_lowering_folds_batchnorm(void) { check_lowering(1); }
static void test_lowering_of_relu6_avgpool_relu(void) { check_lowering(SMALL_POOLS); }

static void test_lowering_refuses_what_has_no_integer_form(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    qat_model_build(m, 1);
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    int64_t in = 784;
    CU_ASSERT_EQUAL(qat_qmodel_lower(m, 1, &in, ctx, q), QAT_ERR_STATE); /* not prepared */
    qat_ctx_clear_error(ctx);
    qat_prepare(m, NULL);
    CU_ASSERT_EQUAL(qat_qmodel_lower(m, 1, &in, ctx, q), QAT_ERR_STATE); /* never observed */
    CU_ASSERT(strstr(qat_ctx_error(ctx), "never observed") != NULL);
    qat_ctx_free(ctx);
    /* a BatchNorm left unfolded */
    small s;
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.fold_bn = false;
    small_init(&s, 1, &cfg);
    q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, s.ctx, q), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(s.ctx), "BatchNorm") != NULL);
    qat_ctx_clear_error(s.ctx);
    qat_ctx_free(s.ctx);
    /* a shape that does not chain */
    cfg.fold_bn = true;
    small_init(&s, 0, &cfg);
    q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL(qat_qmodel_lower(s.m, 3, (int64_t[]){2, 8, 8}, s.ctx, q), QAT_ERR_SHAPE);
    CU_ASSERT(strstr(qat_ctx_error(s.ctx), "conv1") != NULL);
    qat_ctx_free(s.ctx);
}

/* ---- files ------------------------------------------------------------------------ */

static bool same_qtype(const qat_qtype *a, const qat_qtype *b) {
    bool same = a->bits == b->bits && a->is_signed == b->is_signed && a->qmin == b->qmin && a->qmax == b->qmax &&
                a->rank == b->rank && a->nparams == b->nparams;
    for (int d = 0; same && d < a->rank; d++) same = a->shape[d] == b->shape[d] && a->block[d] == b->block[d];
    return same && !memcmp(a->scale, b->scale, (size_t)a->nparams * 4) &&
           !memcmp(a->zero_point, b->zero_point, (size_t)a->nparams * 4);
}

static bool same_aparams(const qat_aparams *a, const qat_aparams *b) {
    return a->scale == b->scale && a->zero_point == b->zero_point && a->bits == b->bits && a->qmin == b->qmin &&
           a->qmax == b->qmax && a->is_signed == b->is_signed;
}

static bool same_qmodel(const qat_qmodel *a, const qat_qmodel *b) {
    bool same = a->n_ops == b->n_ops && a->n_tensors == b->n_tensors && a->input == b->input && a->output == b->output;
    for (int t = 0; same && t < a->n_tensors; t++) {
        const qat_qtensor *x = &a->tensors[t], *y = &b->tensors[t];
        same = !strcmp(x->name, y->name) && x->rank == y->rank && !memcmp(x->shape, y->shape, sizeof x->shape) &&
               same_aparams(&x->q, &y->q);
    }
    for (int i = 0; same && i < a->n_ops; i++) {
        const qat_qop *x = &a->ops[i], *y = &b->ops[i];
        same = x->kind == y->kind && !strcmp(x->name, y->name) && x->act == y->act && x->kh == y->kh &&
               x->kw == y->kw && x->stride_h == y->stride_h && x->stride_w == y->stride_w && x->pad_h == y->pad_h &&
               x->pad_w == y->pad_w && x->groups == y->groups && x->act_min == y->act_min && x->act_max == y->act_max &&
               x->n_inputs == y->n_inputs && !memcmp(x->inputs, y->inputs, sizeof x->inputs) && x->output == y->output &&
               x->n_mult == y->n_mult && !x->multiplier == !y->multiplier && x->keeps_scale == y->keeps_scale;
        if (same && x->multiplier)
            same = !memcmp(x->multiplier, y->multiplier, (size_t)x->n_mult * 4) && !memcmp(x->shift, y->shift, (size_t)x->n_mult * 4);
        if (same && x->weight) {
            int64_t O = x->wq.shape[0], n = 1;
            for (int d = 0; d < x->wq.rank; d++) n *= x->wq.shape[d];
            same = same_qtype(&x->wq, &y->wq) && !memcmp(x->weight, y->weight, (size_t)n * 4) &&
                   !memcmp(x->bias, y->bias, (size_t)O * 4) && !memcmp(x->bias_scale, y->bias_scale, (size_t)O * 4);
        }
    }
    return same;
}

static void test_export_load_round_trip(void) {
    for (int gran = 0; gran < 3; gran++) { /* per-tensor, per-channel, sub-channel */
        small s;
        qat_prepare_config cfg = qat_prepare_defaults();
        cfg.wgran = gran == 0 ? QAT_GRAN_TENSOR : gran == 1 ? QAT_GRAN_CHANNEL : QAT_GRAN_BLOCK;
        cfg.block = 1; /* conv: 1 input channel; fc: blocks of 1 input */
        cfg.wbits = 4;
        small_init(&s, 0, &cfg);
        qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q), *l = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *l);
        char path[300];
        path_of(path, sizeof path, "round.qat.h5");
        CU_ASSERT_EQUAL_FATAL(qat_export(s.m, 3, (int64_t[]){1, 8, 8}, "{\"k\": 1}", path, NULL), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, s.ctx, q), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(s.ctx, path, l), QAT_OK);
        CU_ASSERT(same_qmodel(q, l));
        CU_ASSERT_STRING_EQUAL(l->config, "{\"k\": 1}");
        CU_ASSERT_EQUAL(l->ops[0].wq.bits, 4);
        /* the file records the type for other readers: MLIR string and
         * granularity (of fc1, op 3: the conv has one input channel, so
         * blocks of 1 are per-axis there) */
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        char mlir[4096] = "", granularity[32] = "";
        hid_t ms = H5Dopen2(f, "ops/3/weight_mlir", H5P_DEFAULT);
        H5Dread(ms, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, mlir); /* version 3: the text's bytes */
        H5Dclose(ms);
        H5LTget_attribute_string(f, "ops/3/weight", "granularity", granularity);
        H5Fclose(f);
        CU_ASSERT(strncmp(mlir, "!quant.uniform<i4<-7:7>:f32", 27) == 0);
        CU_ASSERT_STRING_EQUAL(granularity, gran == 0 ? "per-tensor" : gran == 1 ? "per-axis" : "sub-channel");
        /* every engine runs every granularity; sub-channel weights on
         * integers through the block conversions (docs/subchannel.md) */
        qat_engine *ie = qat_engine_new(s.ctx, l, QAT_ENGINE_INT, 4);
        qat_engine *he = qat_engine_new(s.ctx, l, QAT_ENGINE_HYBRID, 4);
        CU_ASSERT_FATAL(ie != NULL && he != NULL);
        CU_ASSERT_EQUAL(qat_qop_subchannel(&l->ops[3]), gran == 2);
        qat_engine_free(ie), qat_engine_free(he);
        qat_ctx_free(s.ctx);
    }
}

static void test_int_engine_refuses_wide_types(void) {
    small s;
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.abits = 12;
    small_init(&s, 0, &cfg);
    qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, s.ctx, q), QAT_OK);
    CU_ASSERT(qat_engine_new(s.ctx, q, QAT_ENGINE_INT, 4) == NULL);
    CU_ASSERT_EQUAL(qat_ctx_status(s.ctx), QAT_ERR_UNSUPPORTED);
    qat_ctx_clear_error(s.ctx);
    qat_engine *f = qat_engine_new(s.ctx, q, QAT_ENGINE_FAKE, 4);
    CU_ASSERT(f != NULL);
    qat_engine_free(f);
    qat_ctx_free(s.ctx);
}

/* Copies src to dst, keeping the first `keep` bytes (all if < 0). */
static void copy_file(const char *src, const char *dst, long keep) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    int ch;
    for (long n = 0; a && b && (keep < 0 || n < keep) && (ch = fgetc(a)) != EOF; n++) fputc(ch, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* Loads path and expects failure with `status` and `phrase` in the message. */
static void expect_refused(const char *path, qat_status status, const char *phrase) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    qat_status st = qat_qmodel_load(ctx, path, q);
    CU_ASSERT_EQUAL(st, status);
    if (!strstr(qat_ctx_error(ctx), phrase)) printf("\n  message: %s (want \"%s\")\n", qat_ctx_error(ctx), phrase);
    CU_ASSERT(strstr(qat_ctx_error(ctx), phrase) != NULL);
    CU_ASSERT(strstr(qat_ctx_error(ctx), path) != NULL); /* names the file */
    qat_ctx_free(ctx);
}

/* A copy of good with one attribute of object obj set to an integer v. */
static void tampered(const char *good, const char *path, const char *obj, const char *attr, long long v) {
    copy_file(good, path, -1);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5LTset_attribute_long_long(f, obj, attr, &v, 1);
    H5Fclose(f);
}

static void test_damaged_files_are_refused(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    hand_model(ctx, &q);
    char good[300], bad[300];
    path_of(good, sizeof good, "good.qat.h5");
    path_of(bad, sizeof bad, "bad.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &q, good), QAT_OK);
    path_of(bad, sizeof bad, "missing.qat.h5");
    expect_refused(bad, QAT_ERR_IO, "cannot open");
    path_of(bad, sizeof bad, "bad.qat.h5");
    FILE *f = fopen(bad, "wb");
    fputs("this is not HDF5", f);
    fclose(f);
    expect_refused(bad, QAT_ERR_FORMAT, "not an HDF5 file");
    FILE *g = fopen(good, "rb");
    fseek(g, 0, SEEK_END);
    long size = ftell(g);
    fclose(g);
    copy_file(good, bad, size / 2);
    qat_ctx *c2 = qat_ctx_new();
    qat_qmodel *q2 = qat_ctx_alloc(c2, QAT_MEM_PERSIST, sizeof *q2);
    CU_ASSERT_NOT_EQUAL(qat_qmodel_load(c2, bad, q2), QAT_OK); /* truncated */
    qat_ctx_free(c2);
    tampered(good, bad, "/", "version", 99);
    expect_refused(bad, QAT_ERR_UNSUPPORTED, "version 99");
    tampered(good, bad, "ops/0/weight", "qmax", 1); /* the type's two records disagree: refused before the range */
    expect_refused(bad, QAT_ERR_FORMAT, "weight_mlir does not spell the type");
    tampered(good, bad, "tensors/2", "zero_point", 500);
    expect_refused(bad, QAT_ERR_FORMAT, "zero point 500 outside [-128, 127]");
    tampered(good, bad, "ops/1", "act_min", -1000);
    expect_refused(bad, QAT_ERR_FORMAT, "act_min");
    tampered(good, bad, "/", "n_ops", 7);
    expect_refused(bad, QAT_ERR_FORMAT, "each op makes one"); /* 3 tensors hold 2 ops */
    tampered(good, bad, "tensors/1", "shape", 3); /* fc1's output is [2], not [3] */
    expect_refused(bad, QAT_ERR_SHAPE, "op 0 (linear fc1): its output tensor's shape does not follow");
    tampered(good, bad, "ops/1", "inputs", 2); /* fc2 reads its own output: a cycle */
    expect_refused(bad, QAT_ERR_FORMAT, "before any op makes it");
    tampered(good, bad, "ops/1", "output", 1); /* two ops write tensor 1, tensor 2 dangles */
    expect_refused(bad, QAT_ERR_FORMAT, "another op (or the input) already made");
    copy_file(good, bad, -1);
    hid_t h = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    int32_t m[1] = {5};
    hid_t set = H5Dopen2(h, "ops/1/multiplier", H5P_DEFAULT);
    H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, m);
    H5Dclose(set);
    H5Fclose(h);
    expect_refused(bad, QAT_ERR_FORMAT, "multiplier 5");
    /* a training checkpoint is not a quantized model */
    small s;
    qat_prepare_config cfg = qat_prepare_defaults();
    small_init(&s, 0, &cfg);
    CU_ASSERT_EQUAL(qat_checkpoint_save(s.m, NULL, NULL, NULL, bad), QAT_OK);
    expect_refused(bad, QAT_ERR_FORMAT, "not a qat quantized model");
    qat_ctx_free(s.ctx);
    qat_ctx_free(ctx);
}

/* tools/run_qat_h5.py runs a file with h5py and numpy from the
 * format document alone: its integers must be the C engine's, for every
 * op kind. */
static void test_numpy_reader_gives_the_same_integers(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    if (system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) {
        printf("\n  python3-h5py and python3-numpy are needed (scripts/test.sh installs them)\n");
        CU_FAIL("no h5py");
        return;
    }
    for (int variant = 1; variant <= SMALL_POOLS; variant++) {
        small s;
        qat_prepare_config cfg = qat_prepare_defaults();
        small_init(&s, variant, &cfg);
        char model[300], in[300], out[300], cmd[2048];
        path_of(model, sizeof model, "numpy.qat.h5");
        path_of(in, sizeof in, "in.f32");
        path_of(out, sizeof out, "out.i32");
        qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, s.ctx, q), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(s.ctx, q, model), QAT_OK);
        enum { N = 32 };
        float x[N * 64];
        int32_t c_out[N * 5], py_out[N * 5] = {0};
        for (int i = 0; i < N * 64; i++) x[i] = 1.5f * qat_rng_normal(&s.rng);
        qat_engine *e = qat_engine_new(s.ctx, q, QAT_ENGINE_INT, N);
        CU_ASSERT_EQUAL_FATAL(qat_engine_run(e, x, N, NULL, c_out), QAT_OK);
        FILE *f = fopen(in, "wb");
        fwrite(x, sizeof x, 1, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/run_qat_h5.py' '%s' '%s' %d '%s' >/dev/null",
                 src, model, in, N, out);
        CU_ASSERT_EQUAL(system(cmd), 0);
        f = fopen(out, "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(fread(py_out, sizeof py_out, 1, f), 1);
        fclose(f);
        CU_ASSERT_EQUAL(memcmp(c_out, py_out, sizeof c_out), 0);
        qat_engine_free(e);
        qat_ctx_free(s.ctx);
    }
}

static void test_save_is_atomic(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    hand_model(ctx, &q);
    char path[300];
    path_of(path, sizeof path, "no-such-dir/model.qat.h5");
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, &q, path), QAT_ERR_IO);
    qat_ctx_clear_error(ctx);
    /* an invalid model (0 ops) is refused before anything is written, and
     * the file already at the path stays as it was */
    path_of(path, sizeof path, "keep.qat.h5");
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, &q, path), QAT_OK);
    q.n_ops = 0;
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, &q, path), QAT_ERR_ARG);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL(qat_qmodel_load(ctx, path, l), QAT_OK);
    CU_ASSERT_EQUAL(l->n_ops, 2);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c qat-tmp >/dev/null", dir);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0); /* no temporary file left behind */
    qat_ctx_free(ctx);
}

/* ---- rebuilding from a training checkpoint ---------------------------------------- */

static void test_checkpoint_rebuilds_the_model(void) {
    small s;
    qat_prepare_config cfg = qat_prepare_defaults();
    small_init(&s, 1, &cfg);
    qat_prepare_config four = cfg;
    four.wbits = 4, four.io_bits = 6; /* fc1 is last: its output keeps io_bits */
    CU_ASSERT_EQUAL(qat_prepare_layer(s.m, "fc1", &four), QAT_OK); /* a per-layer override */
    qat_prepare_config axes = cfg; /* the seed's form on the conv's own axes, ragged: [3, 1, 3, 3] in {2, 1, 2, 3} */
    axes.wgran = QAT_GRAN_AXES, axes.ragged = true;
    axes.blocks[0] = 2, axes.blocks[2] = 2, axes.blocks[3] = 3;
    CU_ASSERT_EQUAL(qat_prepare_layer(s.m, "conv1", &axes), QAT_OK);
    qat_model_train(s.m, true);
    qat_ctx_set_grad_enabled(s.ctx, true);
    qat_tensor *x = qat_tensor_new(s.ctx, QAT_MEM_STEP, 4, (int64_t[]){8, 1, 8, 8}, false);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&s.rng);
    qat_model_forward(s.m, x); /* observe fc1's new activation point */
    qat_ctx_step_reset(s.ctx);
    qat_model_train(s.m, false);
    char path[300];
    path_of(path, sizeof path, "small.ckpt.h5");
    qat_train_state ts = {.config = "{\"model\": \"small\"}"};
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(s.m, NULL, NULL, &ts, path), QAT_OK);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = NULL;
    char config[64];
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, path, &m, config, sizeof config), QAT_OK);
    CU_ASSERT_STRING_EQUAL(config, "{\"model\": \"small\"}");
    CU_ASSERT_EQUAL(m->n_layers, s.m->n_layers);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(m->params, s.m->params, m->n_params, true), 0);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(m->buffers, s.m->buffers, m->n_buffers, true), 0);
    CU_ASSERT_EQUAL(m->layers[m->n_layers - 1].wq->bits, 4);
    CU_ASSERT_EQUAL(s.m->layers[m->n_layers - 1].aq->q.bits, 6);
    CU_ASSERT_EQUAL(m->layers[m->n_layers - 1].aq->q.bits, 6);
    CU_ASSERT_EQUAL(m->layers[1].fold_bn, 2);
    const qat_qtype *wa = s.m->layers[1].wq, *wb = m->layers[1].wq; /* the ragged axes type, restored */
    CU_ASSERT(wb->rank == 4 && wb->pshape[0] == 2 && wb->pshape[1] == 1 && wb->pshape[2] == 2 && wb->pshape[3] == 1);
    CU_ASSERT(!memcmp(wa->block, wb->block, sizeof wa->block) && !memcmp(wa->pshape, wb->pshape, sizeof wa->pshape));
    CU_ASSERT(m->layers[1].qcfg->ragged && m->layers[1].qcfg->wgran == QAT_GRAN_AXES);
    qat_qmodel *a = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *a), *b = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *b);
    CU_ASSERT_EQUAL(qat_qmodel_lower(s.m, 3, (int64_t[]){1, 8, 8}, ctx, a), QAT_OK);
    CU_ASSERT_EQUAL(qat_qmodel_lower(m, 3, (int64_t[]){1, 8, 8}, ctx, b), QAT_OK);
    CU_ASSERT(same_qmodel(a, b)); /* the same integers from the rebuilt model */
    qat_ctx_free(ctx);
    qat_ctx_free(s.ctx);
}

/* ---- the input normalization: checkpoint -> export -> load ------------------------------ */

/* conv(3→4, 3x3, pad 1) relu maxpool2 flatten fc(64→5) on [3, 8, 8] raw
 * pixels with a per-channel normalization, prepared and run over a few
 * batches of raw bytes (as floats), then eval. */
static void normalized_init(small *s, qat_normalization *n) {
    s->ctx = qat_ctx_new();
    s->m = qat_model_new(s->ctx);
    qat_rng_seed(&s->rng, 23);
    CU_ASSERT_EQUAL(qat_model_set_input_shape(s->m, 3, (int64_t[]){3, 8, 8}), QAT_OK);
    qat_model_add_conv2d(s->m, NULL, 3, 4, 3, 1, 1, true);
    qat_model_add_relu(s->m);
    qat_model_add_maxpool2d(s->m, 2, 2);
    qat_model_add_flatten(s->m);
    qat_model_add_linear(s->m, NULL, 64, 5, true);
    CU_ASSERT_EQUAL(qat_model_build(s->m, 5), QAT_OK);
    memset(n, 0, sizeof *n);
    n->channels = 3, n->divisor = 255.0f, n->raw_uint8 = true;
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    memcpy(n->mean, mean, sizeof mean), memcpy(n->std, std, sizeof std);
    CU_ASSERT_EQUAL(qat_model_set_normalization(s->m, n), QAT_OK);
    qat_prepare_config cfg = qat_prepare_defaults();
    CU_ASSERT_EQUAL(qat_prepare(s->m, &cfg), QAT_OK);
    for (int step = 0; step < 5; step++) {
        qat_tensor *x = qat_tensor_new(s->ctx, QAT_MEM_STEP, 4, (int64_t[]){16, 3, 8, 8}, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = (float)qat_rng_below(&s->rng, 256);
        CU_ASSERT(qat_model_forward(s->m, x) != NULL);
        qat_ctx_step_reset(s->ctx);
    }
    qat_model_train(s->m, false);
    qat_ctx_set_grad_enabled(s->ctx, false);
}

static bool same_norm(const qat_normalization *a, const qat_normalization *b) {
    if (!a || !b) return a == b;
    return a->channels == b->channels && a->divisor == b->divisor && a->raw_uint8 == b->raw_uint8 &&
           !memcmp(a->mean, b->mean, (size_t)a->channels * sizeof(float)) &&
           !memcmp(a->std, b->std, (size_t)a->channels * sizeof(float));
}

/* A model trained on raw pixels: its checkpoint rebuilds it with its
 * normalization, its export (version 4) carries it, and the loaded program
 * run on raw inputs gives — on the int engine, float or bytes, and the
 * numpy reader of the format document, float or bytes — the same integers;
 * the same program without the normalization fed the normalized images
 * too; and the fake engine on raw images is the model's own forward. */
static void test_normalized_checkpoint_export_load(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    small s;
    qat_normalization n;
    normalized_init(&s, &n);
    char ckpt[300], model[300], in[300], inb[300], out[300], cmd[2048];
    path_of(ckpt, sizeof ckpt, "norm.ckpt.h5");
    path_of(model, sizeof model, "norm.qat.h5");
    path_of(in, sizeof in, "norm.f32");
    path_of(inb, sizeof inb, "norm.u8");
    path_of(out, sizeof out, "norm.i32");
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(s.m, NULL, NULL, NULL, ckpt), QAT_OK);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, ckpt, &m, NULL, 0), QAT_OK);
    CU_ASSERT(same_norm(qat_model_normalization(m), &n));
    CU_ASSERT_EQUAL_FATAL(qat_export(m, 0, NULL, "{}", model, NULL), QAT_OK);
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q), *a = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *a);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, model, q), QAT_OK);
    CU_ASSERT_EQUAL(q->version, 4); /* double rounding: the version-4 layout */
    CU_ASSERT(same_norm(q->norm, &n));
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(s.m, 0, NULL, ctx, a), QAT_OK); /* the trained model's own program */
    CU_ASSERT(same_qmodel(a, q) && same_norm(a->norm, q->norm));
    enum { N = 48, IN = 3 * 8 * 8, K = 5 };
    static float x[N * IN], xn[N * IN], ref[N * K], fake[N * K];
    static uint8_t xb[N * IN];
    static int32_t qf[N * K], qb[N * K], qn[N * K], py[N * K];
    for (int i = 0; i < N * IN; i++) {
        xb[i] = (uint8_t)qat_rng_below(&s.rng, 256);
        x[i] = (float)xb[i];
    }
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, (int64_t[]){N, 3, 8, 8}, false);
    memcpy(xn, qat_normalize(ctx, t, &n)->data, sizeof xn);
    qat_ctx_step_reset(ctx);
    qat_engine *ie = qat_engine_new(ctx, q, QAT_ENGINE_INT, N), *fe = qat_engine_new(ctx, q, QAT_ENGINE_FAKE, N);
    CU_ASSERT_FATAL(ie && fe);
    CU_ASSERT_EQUAL(qat_engine_run(ie, x, N, NULL, qf), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run_u8(ie, xb, N, NULL, qb), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(qf, qb, sizeof qf), 0);
    qat_qmodel plain = *q;
    plain.norm = NULL;
    qat_engine *pe = qat_engine_new(ctx, &plain, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(pe != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(pe, xn, N, NULL, qn), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(qf, qn, sizeof qf), 0);
    /* the fake engine on raw images is the QAT model on them, up to the int32 bias rounding */
    CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, fake, NULL), QAT_OK);
    model_logits_of(s.m, x, N, (int64_t[]){N, 3, 8, 8}, K, ref);
    int same = 0;
    for (int i = 0; i < N * K; i++) same += ref[i] == fake[i];
    CU_ASSERT(same >= N * K * 95 / 100);
    /* the numpy reader, raw floats and raw bytes */
    for (int bytes = 0; bytes < 2; bytes++) {
        FILE *f = fopen(bytes ? inb : in, "wb");
        CU_ASSERT_FATAL(f != NULL);
        CU_ASSERT_EQUAL(bytes ? fwrite(xb, sizeof xb, 1, f) : fwrite(x, sizeof x, 1, f), 1);
        fclose(f);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/run_qat_h5.py' '%s' '%s' %d '%s' %s >/dev/null",
                 src, model, bytes ? inb : in, N, out, bytes ? "--u8" : "");
        CU_ASSERT_EQUAL(system(cmd), 0);
        memset(py, 0, sizeof py);
        f = fopen(out, "rb");
        CU_ASSERT_FATAL(f != NULL);
        CU_ASSERT_EQUAL(fread(py, sizeof py, 1, f), 1);
        fclose(f);
        if (memcmp(py, qf, sizeof py)) printf("\n  the numpy reader (%s) differs\n", bytes ? "bytes" : "floats");
        CU_ASSERT_EQUAL(memcmp(py, qf, sizeof py), 0);
    }
    qat_engine_free(ie), qat_engine_free(fe), qat_engine_free(pe);
    qat_ctx_free(ctx);
    qat_ctx_free(s.ctx);
}

/* ---- the reader written from the documents alone ------------------------------------- */

/* The numbers a reader derives rather than reads, as the loaded program
 * q holds them, for tests/docs_reader.py --form: for each linear and conv2d
 * op in order, bias, bias_scale (float32 bits), multiplier and shift [O]
 * (int32 each), then, for sub-channel weights, every block's multiplier
 * and shift [number of scales], or with compact block scales every
 * sub-scale. A version-2 file's sub-channel ops get all
 * of them at load; a version-3 or -4 file's the block conversions. */
static void write_form(const qat_qmodel *q, const char *path) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        size_t O = (size_t)op->wq.shape[0], np = (size_t)op->wq.nparams;
        CU_ASSERT(fwrite(op->bias, 4, O, f) == O && fwrite(op->bias_scale, 4, O, f) == O &&
                  fwrite(op->multiplier, 4, O, f) == O && fwrite(op->shift, 4, O, f) == O);
        if (op->subscale) { /* compact block scales */
            CU_ASSERT(fwrite(op->subscale, 4, np, f) == np);
        } else if (qat_qop_subchannel(op)) {
            CU_ASSERT(fwrite(op->block_multiplier, 4, np, f) == np && fwrite(op->block_shift, 4, np, f) == np);
        }
    }
    fclose(f);
}

/* tests/docs_reader.py (numpy and h5py, written from docs/ alone) on n
 * samples of the file at model: its output integers must equal want[0..count),
 * the int engine's, and the numbers it derives must be those of q, the
 * program qat loaded from the file (write_form). in: n raw samples
 * (float32, or bytes when flags holds --u8). flags: the reader's other
 * options (--u8, --verify). */
static void docs_reader_check(const char *tag, const char *model, const qat_qmodel *q, const void *in,
                              size_t in_bytes, int n, const char *flags, const int32_t *want, int count) {
    const char *src = getenv("QAT_SOURCE_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char inp[512], outp[512], formp[512], name[48], cmd[2560];
    snprintf(name, sizeof name, "docs-%s.form", tag);
    path_of(formp, sizeof formp, name);
    write_form(q, formp);
    snprintf(name, sizeof name, "docs-%s.in", tag);
    path_of(inp, sizeof inp, name);
    snprintf(name, sizeof name, "docs-%s.i32", tag);
    path_of(outp, sizeof outp, name);
    remove(outp);
    FILE *f = fopen(inp, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_EQUAL(fwrite(in, 1, in_bytes, f), in_bytes);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/docs_reader.py' '%s' '%s' %d '%s' '--form=%s' %s >/dev/null",
             src, model, inp, n, outp, formp, flags);
    int rc = system(cmd);
    if (rc) printf("\n  %s: the docs reader failed (%s)", tag, cmd);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int32_t *got = calloc((size_t)count, sizeof *got);
    CU_ASSERT_FATAL(got != NULL);
    f = fopen(outp, "rb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_EQUAL(fread(got, sizeof *got, (size_t)count, f), (size_t)count);
    CU_ASSERT_EQUAL(fgetc(f), EOF); /* exactly N x K integers */
    fclose(f);
    int diff = 0;
    for (int i = 0; i < count; i++) diff += got[i] != want[i];
    if (diff) printf("\n  %s: the docs reader and the int engine differ on %d of %d output integers", tag, diff, count);
    CU_ASSERT_EQUAL(diff, 0);
    free(got);
}

/* An input x with x · (1/scale) exactly k + 1/2 in float32 (a tie the
 * quantization must round to even), or 0 if none is within a few ulps. */
static float tie_input(float scale, int k) {
    float inv = 1.0f / scale, want = (float)k + 0.5f, x = want / inv;
    for (int i = 0; i < 8; i++) {
        if (x * inv == want) return x;
        x = nextafterf(x, x * inv < want ? INFINITY : -INFINITY);
    }
    return 0.0f;
}

/* Windows the every-op graph leaves out: max pooling over signed values
 * (no ReLU before it, so padding would win if it counted), a padded
 * non-square average pool, groups with O != C, a depthwise convolution
 * with two outputs per channel, and a concatenation of vectors. */
#define DOCS_POOLS_TEXT \
    "input shape=3,7,6\n" \
    "conv2d c input out=4 kernel=3 pad=1\n" \
    "maxpool2d mp c kernel=3 stride=2 pad=1\n" \
    "avgpool2d ap c kernel=3x2 stride=2x1 pad=1x1\n" \
    "conv2d g mp out=6 kernel=2x1 groups=2\n" \
    "conv2d dw ap out=8 kernel=3 pad=1 groups=depthwise\n" \
    "global_avgpool p1 g\n" \
    "global_avgpool p2 dw\n" \
    "concat cat p1,p2\n" \
    "linear fc cat out=5\n"

/* The graph of model-file text (input [C, H, W] = in) prepared with cfg
 * (and the layers g2 and fc with g2cfg and fccfg when given), with a
 * normalization when norm is given, its observers and BatchNorm run over
 * a few random batches (raw bytes as floats when the normalization is
 * uint8's), then eval. */
static qat_model *graph_model(qat_ctx *ctx, const char *text, const int64_t *in, const qat_prepare_config *cfg,
                              const qat_prepare_config *g2cfg, const qat_prepare_config *fccfg,
                              const qat_normalization *norm, qat_rng *rng) {
    qat_model *m = qat_model_new(ctx);
    qat_status st = qat_model_from_text(m, text, "docs");
    if (st == QAT_OK) st = qat_model_build(m, 7);
    if (st == QAT_OK && norm) st = qat_model_set_normalization(m, norm);
    if (st == QAT_OK) st = qat_prepare(m, cfg);
    if (st == QAT_OK && g2cfg) st = qat_prepare_layer(m, "g2", g2cfg);
    if (st == QAT_OK && fccfg) st = qat_prepare_layer(m, "fc", fccfg);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    for (int step = 0; step < 6; step++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){8, in[0], in[1], in[2]}, false);
        for (int64_t i = 0; i < x->numel; i++)
            x->data[i] = norm && norm->raw_uint8 ? (float)qat_rng_below(rng, 256) : 1.5f * qat_rng_normal(rng);
        CU_ASSERT_FATAL(qat_model_forward(m, x) != NULL);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    return m;
}

static const int64_t every_op_in[3] = {2, 10, 9};

/* m exported to tag.qat.h5 and loaded back into *q; the path in path. */
static void export_and_load(qat_ctx *ctx, qat_model *m, const char *tag, char *path, size_t len, qat_qmodel *q) {
    char name[48];
    snprintf(name, sizeof name, "docs-%s.qat.h5", tag);
    path_of(path, len, name);
    qat_status st = qat_export(m, 0, NULL, "{}", path, NULL);
    if (st == QAT_OK) st = qat_qmodel_load(ctx, path, q);
    if (st != QAT_OK) printf("\n  %s: %s\n", tag, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
}

/* The int engine's output integers on n raw float samples (or bytes). */
static void engine_integers(qat_ctx *ctx, const qat_qmodel *q, const float *x, const uint8_t *xb, int n, int32_t *out) {
    qat_engine *e = qat_engine_new(ctx, q, QAT_ENGINE_INT, n);
    if (!e) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(x ? qat_engine_run(e, x, n, NULL, out) : qat_engine_run_u8(e, xb, n, NULL, out), QAT_OK);
    qat_engine_free(e);
}

/* Random inputs of the every-op graph, with NaN, infinities, huge values,
 * -0 and exact ties of the input quantization at scale s among them. */
static void every_op_inputs(qat_rng *rng, float s, float *x, int count) {
    for (int i = 0; i < count; i++) x[i] = 1.5f * qat_rng_normal(rng);
    const float special[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, -0.0f, 1e-30f};
    for (int i = 0; i < 7; i++) x[13 * i + 1] = special[i];
    for (int k = -6; k < 6; k++) x[200 + 17 * (k + 6)] = tie_input(s, k);
}

/* A copy of the version-4 file src rewritten as version 2 (qat's layout
 * before version 3; tests/qmodel_as_v2.py), so that the loader's integer
 * form of version-2 sub-channel ops can be compared with the reader's. */
static void rewrite_as_v2(const char *src, const char *dst) {
    const char *dir_src = getenv("QAT_SOURCE_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/qmodel_as_v2.py' '%s' '%s'", dir_src, src, dst);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

/* tests/docs_reader.py, written from docs/quantized-model-format.md,
 * contract.md and subchannel.md alone, gives the int engine's integers bit
 * for bit: on the every-op graph at several weight granularities, bit
 * widths and packings (and with --verify, every multiplier, bias scale,
 * clamp and table the documents say how to compute is the file's), on a
 * model with a uint8 normalization through floats and bytes, on the
 * version 1 to 3 files of fuzz/seeds, and on a version-2 file with
 * sub-channel weights, whose integer form the loader must choose. */
static void test_docs_reader_gives_the_same_integers(void) {
    if (system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) {
        printf("\n  python3-h5py and python3-numpy are needed (scripts/test.sh installs them)\n");
        CU_FAIL("no h5py");
        return;
    }
    enum { N = 16, IN = 2 * 10 * 9, K = 5 };
    static float x[N * IN];
    static int32_t want[N * K];
    char path[512];
    /* 1. the every-op graph, five configurations, and the pools graph */
    for (int variant = 0; variant < 8; variant++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_rng rng;
        qat_rng_seed(&rng, 40 + (uint64_t)variant);
        qat_prepare_config cfg = qat_prepare_defaults(), g2 = qat_prepare_defaults();
        const qat_prepare_config *g2p = NULL;
        qat_normalization norm = {.channels = 2, .divisor = 1.0f, .mean = {0.25f, -0.5f}, .std = {0.75f, 1.5f}};
        const char *tag = "every-w8";
        if (variant == 1) { /* 4-bit packed, blocks of 4 along the reduction (ragged: 9 = 4 + 4 + 1) */
            cfg.wbits = 4, cfg.wgran = QAT_GRAN_BLOCK, cfg.block = 4, cfg.ragged = true, tag = "every-w4-block4";
        } else if (variant == 2) { /* 2-bit packed per tensor, 6-bit activations (16 .. 64-entry tables) */
            cfg.wbits = 2, cfg.wgran = QAT_GRAN_TENSOR, cfg.abits = 6, tag = "every-w2-a6";
        } else if (variant == 3) { /* 3-bit in nibbles, blocks on the weight's axes, rows sharing scales in g2 */
            cfg.wbits = 3, cfg.wgran = QAT_GRAN_AXES, cfg.ragged = true, cfg.blocks[0] = 2, cfg.blocks[1] = 1;
            g2 = cfg, g2.blocks[0] = 4, g2.blocks[1] = 2, g2p = &g2, tag = "every-w3-axes";
        } else if (variant == 4) { /* a 2-channel float normalization */
            tag = "every-norm";
        } else if (variant == 5) {
            tag = "pools";
        } else if (variant == 6) { /* compact block scales, 4-bit sub-scales packed two to a byte */
            cfg.wbits = 4, cfg.wgran = QAT_GRAN_BLOCK, cfg.block = 4, cfg.ragged = true, cfg.block_scale_bits = 4;
            tag = "every-w4-block4-u4";
        } else if (variant == 7) { /* compact, 7-bit sub-scales a byte each, on axes, rows sharing scales in g2 */
            cfg.wbits = 6, cfg.wgran = QAT_GRAN_AXES, cfg.ragged = true, cfg.blocks[0] = 1, cfg.blocks[1] = 2;
            cfg.block_scale_bits = 7;
            g2 = cfg, g2.blocks[0] = 4, g2.blocks[1] = 2, g2p = &g2, tag = "every-w6-axes-u7";
        }
        static const int64_t pools_in[3] = {3, 7, 6};
        qat_model *m = graph_model(ctx, variant == 5 ? DOCS_POOLS_TEXT : QAT_TEST_EVERY_OP,
                                   variant == 5 ? pools_in : every_op_in, &cfg, g2p, NULL, variant == 4 ? &norm : NULL, &rng);
        qat_qmodel q;
        export_and_load(ctx, m, tag, path, sizeof path, &q);
        int compact = 0;
        for (int i = 0; i < q.n_ops; i++) compact += q.ops[i].subscale != NULL;
        CU_ASSERT(variant < 6 ? compact == 0 : compact >= 2); /* the compact form itself went through the file */
        memset(x, 0, sizeof x);
        every_op_inputs(&rng, q.tensors[q.input].q.scale, x, N * (int)qat_qtensor_numel(&q.tensors[q.input]));
        engine_integers(ctx, &q, x, NULL, N, want);
        docs_reader_check(tag, path, &q, x, (size_t)(N * qat_qtensor_numel(&q.tensors[q.input])) * sizeof *x, N, "--verify",
                          want, N * K);
        qat_ctx_free(ctx);
    }
    /* 2. version 2 with sub-channel weights, 4-bit: g2 in blocks {0:4, 1:2} (rows sharing
     * scales), fc in {0:1, 1:2}, the others per channel */
    {
        qat_ctx *ctx = qat_ctx_new();
        qat_rng rng;
        qat_rng_seed(&rng, 50);
        qat_prepare_config cfg = qat_prepare_defaults(), g2, fc;
        cfg.wbits = 4;
        g2 = cfg, g2.wgran = QAT_GRAN_AXES, g2.blocks[0] = 4, g2.blocks[1] = 2;
        fc = g2, fc.blocks[0] = 1;
        qat_model *m = graph_model(ctx, QAT_TEST_EVERY_OP, every_op_in, &cfg, &g2, &fc, NULL, &rng);
        qat_qmodel q, q2;
        char v2[512];
        export_and_load(ctx, m, "every-axes", path, sizeof path, &q);
        path_of(v2, sizeof v2, "docs-every-axes-v2.qat.h5");
        rewrite_as_v2(path, v2);
        qat_status st = qat_qmodel_load(ctx, v2, &q2);
        if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
        CU_ASSERT_EQUAL(q2.version, 2);
        int sub = 0;
        for (int i = 0; i < q2.n_ops; i++) sub += qat_qop_subchannel(&q2.ops[i]);
        CU_ASSERT(sub >= 2); /* g2 and fc */
        every_op_inputs(&rng, q2.tensors[q2.input].q.scale, x, N * IN);
        engine_integers(ctx, &q2, x, NULL, N, want);
        docs_reader_check("every-axes-v2", v2, &q2, x, sizeof x, N, "", want, N * K);
        engine_integers(ctx, &q, x, NULL, N, want);
        docs_reader_check("every-axes", path, &q, x, sizeof x, N, "--verify", want, N * K);
        qat_ctx_free(ctx);
    }
    /* 3. a model trained on raw bytes with a per-channel uint8 normalization: floats and bytes */
    {
        small s;
        qat_normalization n;
        normalized_init(&s, &n);
        qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
        export_and_load(s.ctx, s.m, "norm-u8", path, sizeof path, q);
        enum { NN = 48, NIN = 3 * 8 * 8 };
        static float xf[NN * NIN];
        static uint8_t xu[NN * NIN];
        static int32_t wf[NN * K], wb[NN * K];
        for (int i = 0; i < NN * NIN; i++) xu[i] = (uint8_t)qat_rng_below(&s.rng, 256), xf[i] = (float)xu[i];
        for (int i = 0; i < 256; i++) xu[i] = (uint8_t)i, xf[i] = (float)i; /* every byte value once */
        engine_integers(s.ctx, q, xf, NULL, NN, wf);
        engine_integers(s.ctx, q, NULL, xu, NN, wb);
        CU_ASSERT_EQUAL(memcmp(wf, wb, sizeof wf), 0);
        docs_reader_check("norm-u8-floats", path, q, xf, sizeof xf, NN, "--verify", wf, NN * K);
        docs_reader_check("norm-u8-bytes", path, q, xu, sizeof xu, NN, "--u8 --verify", wb, NN * K);
        qat_ctx_free(s.ctx);
    }
    /* 4. the files of earlier versions kept as fuzzing seeds (versions 1, 2, 3) */
    const char *seeds[] = {"lenet-w8a8-v1.h5", "lenet-w4a4-tensor-v1.h5", "lenet-w8a8-v2.h5", "lenet-w4a4-tensor-v2.h5",
                           "ds-cnn-w8a8-v2.h5", "resnet8-w8a8-v2.h5", "lenet-w8a8-v3.h5", "lenet-w4a4-tensor-v3.h5",
                           "lenet-w4a8-block16-v3.h5"};
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        snprintf(path, sizeof path, "%s/fuzz/seeds/qmodel/%s", getenv("QAT_SOURCE_DIR"), seeds[i]);
        qat_status st = qat_qmodel_load(ctx, path, &q);
        if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
        int64_t per = qat_qtensor_numel(&q.tensors[q.input]), k = qat_qtensor_numel(&q.tensors[q.output]);
        enum { NS = 8 };
        float *xs = malloc((size_t)(NS * per) * sizeof *xs);
        int32_t *ws = malloc((size_t)(NS * k) * sizeof *ws);
        CU_ASSERT_FATAL(xs && ws);
        qat_rng rng;
        qat_rng_seed(&rng, 60 + i);
        for (int64_t j = 0; j < NS * per; j++) xs[j] = 1.2f * qat_rng_normal(&rng);
        engine_integers(ctx, &q, xs, NULL, NS, ws);
        docs_reader_check(seeds[i], path, &q, xs, (size_t)(NS * per) * sizeof *xs, NS, "", ws, (int)(NS * k));
        free(xs), free(ws);
        qat_ctx_free(ctx);
    }
}

/* A copy of good whose /normalization has one float attribute or dataset changed. */
static void tampered_norm(const char *good, const char *path, const char *name, const float *v, hsize_t n) {
    copy_file(good, path, -1);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (n == 0) {
        H5LTset_attribute_float(f, "normalization", name, v, 1);
    } else {
        hid_t g = H5Gopen2(f, "normalization", H5P_DEFAULT);
        H5Ldelete(g, name, H5P_DEFAULT);
        H5LTmake_dataset_float(g, name, 1, &n, v);
        H5Gclose(g);
    }
    H5Fclose(f);
}

/* A hostile /normalization is refused, naming the file and the field; a
 * version-3 file loads as a program without one (it cannot have one). */
static void test_normalization_hostile_files(void) {
    small s;
    qat_normalization n;
    normalized_init(&s, &n);
    char good[300], bad[300];
    path_of(good, sizeof good, "norm-good.qat.h5");
    path_of(bad, sizeof bad, "norm-bad.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_export(s.m, 0, NULL, NULL, good, NULL), QAT_OK);
    tampered(good, bad, "normalization", "channels", 0);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: channels = 0 is outside [1, 1024]");
    tampered(good, bad, "normalization", "channels", 1 << 30);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: channels = 1073741824 is outside [1, 1024]");
    tampered(good, bad, "normalization", "channels", 2);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization/mean has 3 value(s), channels says 2");
    tampered(good, bad, "normalization", "raw_uint8", -1);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: raw_uint8 = -1 is outside [0, 1]");
    const float zero = 0.0f, big = INFINITY, two[2] = {0.5f, 0.5f};
    tampered_norm(good, bad, "divisor", &zero, 0);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: divisor 0 is not a positive normal float");
    tampered_norm(good, bad, "divisor", &big, 0);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: divisor inf is not a positive normal float");
    float bad_mean[3] = {0.5f, NAN, 0.5f}, bad_std[3] = {0.5f, 0.5f, -2.0f};
    tampered_norm(good, bad, "mean", bad_mean, 3);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: mean[1] = nan is not finite");
    tampered_norm(good, bad, "std", bad_std, 3);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: std[2] = -2 is not a positive normal float");
    /* two channels on a [3, 8, 8] input */
    tampered(good, bad, "normalization", "channels", 2);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "normalization", H5P_DEFAULT);
    hsize_t two_n = 2;
    H5Ldelete(g, "mean", H5P_DEFAULT), H5Ldelete(g, "std", H5P_DEFAULT);
    H5LTmake_dataset_float(g, "mean", 1, &two_n, two), H5LTmake_dataset_float(g, "std", 1, &two_n, two);
    H5Gclose(g), H5Fclose(f);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization: channels 2, the input [3, 8, 8] has 3");
    /* a group that is not one */
    copy_file(good, bad, -1);
    f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "normalization", H5P_DEFAULT);
    H5LTmake_dataset_float(f, "normalization", 1, &two_n, two);
    H5Fclose(f);
    expect_refused(bad, QAT_ERR_FORMAT, "normalization");
    /* version 3: no normalization, whatever the file holds */
    tampered(good, bad, "/", "version", 3);
    qat_qmodel *q = qat_ctx_alloc(s.ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL(qat_qmodel_load(s.ctx, bad, q), QAT_OK);
    CU_ASSERT_EQUAL(q->version, 3);
    CU_ASSERT_PTR_NULL(q->norm);
    qat_ctx_free(s.ctx);
}

/* ---- names of the longest length --------------------------------------------------- */

/* QAT_NAME_LEN - 1 = 31 characters is the longest name (docs/model-format.md).
 * The writer stores such a name as a 32-byte HDF5 string with its NUL; the
 * readers must take it back: a model with 31-character names trains,
 * saves its checkpoint, rebuilds from it, exports, loads as a quantized
 * model and is summarized. A 32-character name is refused when the layer
 * is added. */
static void test_names_of_31_characters_survive_every_file(void) {
    const char *conv = "conv_with_a_name_of_31_chars_ab", *fc = "fc_0123456789012345678901234567";
    CU_ASSERT_EQUAL_FATAL(strlen(conv), QAT_NAME_LEN - 1);
    CU_ASSERT_EQUAL_FATAL(strlen(fc), QAT_NAME_LEN - 1);
    char text[512];
    snprintf(text, sizeof text, "input shape=1,8,8\nconv2d %s input out=3 kernel=3\nrelu r %s\nflatten f r\n"
             "linear %s f out=4\n", conv, conv, fc);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "long-names"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat_prepare_config cfg = qat_prepare_defaults();
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &cfg), QAT_OK);
    /* a few steps of training */
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim opt;
    CU_ASSERT_EQUAL_FATAL(qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m)), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    int32_t labels[8];
    qat_model_train(m, true);
    for (int step = 0; step < 3; step++) {
        qat_ctx_set_grad_enabled(ctx, true);
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){8, 1, 8, 8}, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
        for (int i = 0; i < 8; i++) labels[i] = i % 4;
        CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), labels)), QAT_OK);
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 1e-3f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    char ckpt[300], qpath[300];
    path_of(ckpt, sizeof ckpt, "long-names.ckpt.h5");
    path_of(qpath, sizeof qpath, "long-names.qat.h5");
    qat_train_state ts = {.config = "{}"};
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, &opt, NULL, &ts, ckpt), QAT_OK);
    /* the checkpoint rebuilds (summary --checkpoint, export, analyze) */
    qat_ctx *c2 = qat_ctx_new();
    qat_model *r = NULL;
    qat_status st = qat_checkpoint_model(c2, ckpt, &r, NULL, 0);
    CU_ASSERT_EQUAL(st, QAT_OK);
    if (st != QAT_OK) printf("\n%s\n", qat_ctx_error(c2));
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_STRING_EQUAL(qat_model_layer_name(r, 1), conv);
    CU_ASSERT_EQUAL(qat_model_find_layer(r, fc), qat_model_n_layers(r) - 1);
    /* it exports, and the quantized model loads back with the names whole */
    CU_ASSERT_EQUAL_FATAL(qat_export(r, 3, (int64_t[]){1, 8, 8}, "{}", qpath, NULL), QAT_OK);
    qat_qmodel *q = qat_ctx_alloc(c2, QAT_MEM_PERSIST, sizeof *q);
    st = qat_qmodel_load(c2, qpath, q);
    CU_ASSERT_EQUAL(st, QAT_OK);
    if (st != QAT_OK) printf("\n%s\n", qat_ctx_error(c2));
    else {
        CU_ASSERT_STRING_EQUAL(q->ops[0].name, conv);
        CU_ASSERT_STRING_EQUAL(q->ops[q->n_ops - 1].name, fc);
        CU_ASSERT_STRING_EQUAL(q->tensors[q->output].name, fc);
        qat_summary qs;
        CU_ASSERT_EQUAL(qat_qmodel_summary(q, c2, &qs), QAT_OK);
    }
    /* the rebuilt model is summarized, with its memory plan */
    qat_summary s;
    CU_ASSERT_EQUAL(qat_model_summary(r, 0, NULL, c2, &s), QAT_OK);
    CU_ASSERT_STRING_EQUAL(s.rows[1].name, conv);
    CU_ASSERT(s.peak_activation_bytes > 0);
    /* one more character is refused, with the limit in the message */
    qat_model *m2 = qat_model_new(c2);
    char name32[QAT_NAME_LEN + 1];
    memset(name32, 'a', QAT_NAME_LEN), name32[QAT_NAME_LEN] = '\0';
    CU_ASSERT_EQUAL(qat_layer_relu(m2, name32, 0), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(c2), "31"));
    qat_ctx_free(c2);
    qat_ctx_free(ctx);
}

/* ---- average pools that keep their input's quantization (TFLite's int8 rule) ----------- */

#define PROG_CHECK(cond) CU_ASSERT_FATAL(cond)
#include "programs.h"

/* q's output integers (n samples of input integers x) at the portable
 * level into y, and at every other level this CPU has, which must equal
 * them. */
static void run_every_level(const qat_qmodel *q, const int8_t *x, int n, int8_t *y) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, n, off, &plan, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    size_t cb = (size_t)(plan.const_bytes + 127) / 64 * 64, ab = (size_t)(plan.arena_bytes + 127) / 64 * 64,
           sb = (size_t)(plan.scratch_bytes + 127) / 64 * 64;
    uint8_t *consts = aligned_alloc(64, cb), *scratch = aligned_alloc(64, sb);
    int8_t *arena = aligned_alloc(64, ab);
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    for (int l = QAT_LEVEL_PORTABLE; l <= (int)qat__cpu_level(); l++) {
        memset(consts, 0, cb), memset(arena, 0, ab), memset(scratch, 0, sb);
        memcpy(arena + plan.offset[q->input], x, (size_t)(n * in));
        qat__runtime_prepare_level(q, &plan, consts, (qat__level)l);
        CU_ASSERT_EQUAL(qat__runtime_run_level(q, &plan, consts, arena, scratch, n, (qat__level)l), QAT_OK);
        if (l == QAT_LEVEL_PORTABLE) memcpy(y, arena + plan.offset[q->output], (size_t)(n * out));
        else if (memcmp(y, arena + plan.offset[q->output], (size_t)(n * out))) {
            printf("\n  level %s differs from the portable one\n", qat__level_name((qat__level)l));
            CU_FAIL("a level differs");
        }
    }
    free(consts), free(arena), free(scratch), free(off);
}

/* tools/run_qat_h5.py on n raw float samples x: its output integers
 * (count of them) into got; false when it failed. */
static bool numpy_reader_outputs(const char *tag, const char *model, const float *x, int64_t numel, int n, int32_t *got,
                                 int64_t count) {
    char in[300], out[300], name[40], cmd[2048];
    snprintf(name, sizeof name, "%s.f32", tag);
    path_of(in, sizeof in, name);
    snprintf(name, sizeof name, "%s.i32", tag);
    path_of(out, sizeof out, name);
    remove(out);
    FILE *f = fopen(in, "wb");
    bool ok = f && fwrite(x, sizeof *x, (size_t)numel, f) == (size_t)numel;
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/run_qat_h5.py' '%s' '%s' %d '%s' >/dev/null",
             getenv("QAT_SOURCE_DIR"), model, in, n, out);
    ok = ok && system(cmd) == 0 && (f = fopen(out, "rb")) != NULL;
    if (ok) ok = fread(got, sizeof *got, (size_t)count, f) == (size_t)count && fgetc(f) == EOF, fclose(f);
    return ok;
}

/* Program p saved as tag.qat.h5 and loaded back into *l (the same
 * program); the path in path. */
static void save_and_load(qat_ctx *ctx, const qat_qmodel *q, const char *tag, char path[300], size_t len, qat_qmodel *l) {
    char name[40];
    snprintf(name, sizeof name, "%s.qat.h5", tag);
    path_of(path, len, name);
    qat_status st = qat_qmodel_save(ctx, q, path);
    if (st == QAT_OK) st = qat_qmodel_load(ctx, path, l);
    if (st != QAT_OK) printf("\n  %s: %s\n", tag, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT(same_qmodel(q, l));
    CU_ASSERT_EQUAL(l->version, qat_qmodel_file_version(q));
}

/* One average pool that keeps its input's quantization, by hand: input
 * [C, H, W] at scale 1 and zero point 3 (the raw float v - 3 is the
 * integer v: the rule must use v, not v - 3), a kh x kw window (kh 0:
 * global), then flatten when windowed. */
static void keep_program(prog *p, int64_t C, int64_t H, int64_t W, int kh, int kw, int s_h, int s_w, int pad) {
    prog_init(p, 5);
    int x = input(p, 3, C, H, W);
    p->t[x].q = (qat_aparams){.scale = 1.0f, .zero_point = 3, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
    qat_qop *o = pool_keep(p, kh ? "pool" : "gap", x, kh ? 1 : 0, 1, 0);
    o->kh = kh, o->kw = kw, o->stride_h = s_h, o->stride_w = s_w, o->pad_h = o->pad_w = pad;
    shape_of(p, o);
    if (kh) unary(p, QAT_QOP_FLATTEN, "flat", o->output);
    finish(p);
}

/* The rule by hand: acc = Σ x over the window's input positions (the raw
 * integers), n their count, acc > 0 ? (acc + n/2) / n : (acc - n/2) / n
 * in C — half away from zero, where round-half-even, or the sum of
 * x - zp, or padding counted in n would each give other integers. Every
 * level of the runtime, both numpy readers of the file, and the fake
 * engine within the tie step. */
static void test_keep_scale_rule_by_hand(void) {
    if (system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) QAT_TEST_SKIP("no python3-h5py/numpy");
    static const struct {
        const char *tag;
        int64_t C, H, W;
        int kh, kw, sh, sw, pad;
        int8_t x[16], want[9];
        int n_out;
    } cases[] = {
        /* pairs, n = 2: 3+4 = 7 -> 4; -7 -> -4; -5 -> -3; 5 -> 3; 1 -> 1; -1 -> -1; 0 -> 0; 253 -> 127 */
        {"keep-pairs", 1, 2, 8, 1, 2, 1, 2, 0,
         {3, 4, -3, -4, -2, -3, 2, 3, 0, 1, 0, -1, 5, -5, 127, 126}, {4, -4, -3, 3, 1, -1, 0, 127}, 8},
        /* 3x3, stride 1, padding 1 over
         *   -1 -3 -8
         *   -2  0  1
         *    9  3 -2
         * window sums / inside positions: -6/4 -13/6 -10/4 | 6/6 -3/9 -9/6 | 10/4 9/6 2/4 */
        {"keep-clipped", 1, 3, 3, 3, 3, 1, 1, 1, {-1, -3, -8, -2, 0, 1, 9, 3, -2}, {-2, -2, -3, 1, 0, -2, 3, 2, 1}, 9},
        /* global over H·W = 2: 7 -> 4, -7 -> -4, -5 -> -3, 3 -> 2 */
        {"keep-global", 4, 1, 2, 0, 0, 0, 0, 0, {3, 4, -3, -4, -2, -3, 1, 2}, {4, -4, -3, 2}, 4},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        prog p;
        keep_program(&p, cases[k].C, cases[k].H, cases[k].W, cases[k].kh, cases[k].kw, cases[k].sh, cases[k].sw,
                     cases[k].pad);
        int64_t in = qat_qtensor_numel(&p.q.tensors[p.q.input]), out = qat_qtensor_numel(&p.q.tensors[p.q.output]);
        CU_ASSERT_EQUAL_FATAL(out, cases[k].n_out);
        int8_t y[16] = {0};
        run_every_level(&p.q, cases[k].x, 1, y);
        int wrong = 0;
        for (int i = 0; i < out; i++) wrong += y[i] != cases[k].want[i];
        if (wrong) {
            printf("\n  %s:", cases[k].tag);
            for (int i = 0; i < out; i++) printf(" %d (want %d)", y[i], cases[k].want[i]);
        }
        CU_ASSERT_EQUAL(wrong, 0);
        /* the file, and the two numpy readers on raw floats v - 3 */
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
        char path[300];
        save_and_load(ctx, &p.q, cases[k].tag, path, sizeof path, l);
        float xf[16];
        int32_t want[9], got[9];
        for (int i = 0; i < in; i++) xf[i] = (float)(cases[k].x[i] - 3);
        for (int i = 0; i < out; i++) want[i] = cases[k].want[i];
        CU_ASSERT(numpy_reader_outputs(cases[k].tag, path, xf, in, 1, got, out));
        CU_ASSERT_EQUAL(memcmp(got, want, (size_t)out * sizeof *got), 0);
        docs_reader_check(cases[k].tag, path, l, xf, (size_t)in * sizeof *xf, 1, "--verify", want, (int)out);
        /* the int engine from raw floats; the fake one computes the mean in
         * float and rounds half to even: a tie may differ by one step */
        int32_t qi[9], qf[9];
        qat_engine *ie = qat_engine_new(ctx, l, QAT_ENGINE_INT, 1), *fe = qat_engine_new(ctx, l, QAT_ENGINE_FAKE, 1);
        CU_ASSERT_FATAL(ie && fe);
        CU_ASSERT_EQUAL(qat_engine_run(ie, xf, 1, NULL, qi), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run(fe, xf, 1, NULL, qf), QAT_OK);
        CU_ASSERT_EQUAL(memcmp(qi, want, (size_t)out * sizeof *qi), 0);
        for (int i = 0; i < out; i++) CU_ASSERT(abs(qf[i] - qi[i]) <= 1);
        qat_engine_free(ie), qat_engine_free(fe);
        qat_ctx_free(ctx);
        prog_free(&p);
    }
}

/* A batch larger than the executor's chunk (the whole program runs on one
 * chunk of samples, then the next, with the input and the output in the
 * arena for every sample) gives every sample the integers it gets in a
 * batch of one chunk. A wide input (2048 values a sample: chunks of ~200
 * samples) through three linear ops, 512, 1024 and 8 wide: one sample's
 * lifetimes put fc2's output over the input's bytes and the output after
 * it, at half the input's buffer, where chunk 0's outputs would overwrite
 * the inputs of samples ~300 on, which a later chunk had yet to read. */
static void test_chunked_batch_equals_one_at_a_time(void) {
    prog p;
    prog_init(&p, 41);
    int x = input(&p, 1, 2048, 0, 0);
    int h1 = linear(&p, "fc1", x, 512)->output;
    int h2 = linear(&p, "fc2", h1, 1024)->output;
    linear(&p, "fc3", h2, 8);
    finish(&p);
    enum { N = 600, PIECE = 50, IN = 2048, OUT = 8 };
    int8_t *xq = malloc((size_t)N * IN);
    CU_ASSERT_FATAL(xq != NULL);
    for (int64_t i = 0; i < (int64_t)N * IN; i++) xq[i] = (int8_t)rnd_in(&p, -128, 127);
    int8_t *all = prog_run(&p.q, xq, N);
    int differ = 0;
    for (int i = 0; i < N; i += PIECE) {
        int8_t *piece = prog_run(&p.q, xq + (int64_t)i * IN, PIECE);
        for (int k = 0; k < PIECE; k++) differ += memcmp(piece + k * OUT, all + (i + k) * OUT, OUT) != 0;
        free(piece);
    }
    CU_ASSERT_EQUAL(differ, 0);
    free(all), free(xq);
    prog_free(&p);
}

/* The hand-written programs of tests/programs.h — every op kind, and the
 * average pools that keep their input's quantization (program_c, _d),
 * every kind within TFLite's rules (program_e) —
 * through the file: the same program back, the dividing rule spelled
 * "divide" and nothing new in the other files, and both numpy readers
 * give the integer engine's integers. */
static void test_hand_programs_through_the_file(void) {
    if (system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) QAT_TEST_SKIP("no python3-h5py/numpy");
    void (*const make[])(prog *) = {program_a, program_b, program_c, program_d, program_e, program_f};
    enum { N = 12 };
    int64_t differ = 0; /* output integers where the two roundings disagree, over every program */
    for (int k = 0; k < 12; k++) {
        prog p;
        make[k / 2](&p);
        p.q.rounding = k % 2 ? QAT_ROUNDING_SINGLE : QAT_ROUNDING_DOUBLE;
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
        char tag[32], path[300];
        snprintf(tag, sizeof tag, "program-%c-%s", 'a' + k / 2, qat_rounding_str(p.q.rounding));
        save_and_load(ctx, &p.q, tag, path, sizeof path, l);
        CU_ASSERT_EQUAL(l->rounding, p.q.rounding);
        int keeps = 0, roundings = 0;
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        char rounding[16] = "";
        /* only a program that rounds once says so (version 5) */
        bool said = H5Aexists(f, "requant_rounding") > 0 &&
                    H5LTget_attribute_string(f, "/", "requant_rounding", rounding) >= 0 && !strcmp(rounding, "single");
        CU_ASSERT_EQUAL(said, k % 2 == 1);
        {   /* every level of this CPU gives the same integers; the other rounding, other ones somewhere */
            int64_t nin = qat_qtensor_numel(&l->tensors[l->input]), nout = qat_qtensor_numel(&l->tensors[l->output]);
            int8_t *x8 = malloc((size_t)(N * nin)), *y[2] = {malloc((size_t)(N * nout)), malloc((size_t)(N * nout))};
            prog r8 = {.rng = 90 + (uint64_t)k / 2};
            for (int64_t i = 0; i < N * nin; i++) x8[i] = (int8_t)rnd_in(&r8, -128, 127);
            for (int rr = 0; rr < 2; rr++) {
                l->rounding = rr ? QAT_ROUNDING_SINGLE : QAT_ROUNDING_DOUBLE;
                run_every_level(l, x8, N, y[rr]);
            }
            l->rounding = p.q.rounding;
            if (k % 2)
                for (int64_t i = 0; i < N * nout; i++) differ += y[0][i] != y[1][i];
            free(x8), free(y[0]), free(y[1]);
        }
        for (int i = 0; i < l->n_ops; i++) {
            char g[32], v[16] = "";
            snprintf(g, sizeof g, "ops/%d", i);
            keeps += l->ops[i].keeps_scale;
            if (H5Aexists_by_name(f, g, "rounding", H5P_DEFAULT) > 0) {
                roundings++;
                CU_ASSERT(H5LTget_attribute_string(f, g, "rounding", v) >= 0 && !strcmp(v, "divide"));
                CU_ASSERT(l->ops[i].keeps_scale && H5Lexists(f, strcat(g, "/multiplier"), H5P_DEFAULT) <= 0);
            }
        }
        H5Fclose(f);
        CU_ASSERT_EQUAL(keeps, k / 2 == 2 ? 1 : k / 2 == 3 ? 2 : k / 2 == 4 ? 3 : 0);
        CU_ASSERT_EQUAL(roundings, keeps);
        int64_t in = qat_qtensor_numel(&l->tensors[l->input]), K = qat_qtensor_numel(&l->tensors[l->output]);
        float *x = malloc(sizeof *x * (size_t)(N * in));
        int32_t *want = malloc(sizeof *want * (size_t)(N * K)), *got = calloc((size_t)(N * K), sizeof *got);
        prog r = {.rng = 40 + (uint64_t)k / 2};
        for (int64_t i = 0; i < N * in; i++) x[i] = l->norm ? (float)rnd_in(&r, 0, 255) : rnd_f(&r, -3.0f, 3.0f);
        qat_engine *e = qat_engine_new(ctx, l, QAT_ENGINE_INT, N);
        CU_ASSERT_FATAL(e != NULL);
        CU_ASSERT_EQUAL(qat_engine_run(e, x, N, NULL, want), QAT_OK);
        CU_ASSERT(numpy_reader_outputs(tag, path, x, N * in, N, got, N * K));
        if (memcmp(got, want, sizeof *got * (size_t)(N * K))) printf("\n  %s: run_qat_h5.py differs\n", tag);
        CU_ASSERT_EQUAL(memcmp(got, want, sizeof *got * (size_t)(N * K)), 0);
        docs_reader_check(tag, path, l, x, sizeof *x * (size_t)(N * in), N, "", want, (int)(N * K));
        qat_engine_free(e);
        free(x), free(want), free(got);
        qat_ctx_free(ctx);
        prog_free(&p);
    }
    CU_ASSERT(differ > 0); /* else the roundings were never told apart */
}

/* A copy of good with a string attribute of object obj set to v. */
static void tampered_text(const char *good, const char *path, const char *obj, const char *attr, const char *v) {
    copy_file(good, path, -1);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5LTset_attribute_string(f, obj, attr, v);
    H5Fclose(f);
}

/* The rounding in the file: version 5 and requant_rounding "single" only
 * where the program rounds once (a double-rounding program is the
 * version-4 file it was); a value that is neither, a version 5 without the
 * attribute, and a version 4 file claiming it (an older reader would run
 * it with the double rounding: it stays double) are each handled. */
static void test_rounding_in_the_file(void) {
    prog p;
    program_a(&p);
    qat_ctx *ctx = qat_ctx_new();
    char good[300], bad[300], text[16] = "";
    path_of(good, sizeof good, "rounding-good.qat.h5");
    path_of(bad, sizeof bad, "rounding-bad.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, good), QAT_OK);
    hid_t f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT(H5Aexists(f, "requant_rounding") == 0); /* double: nothing new in the file */
    H5Fclose(f);
    p.q.rounding = QAT_ROUNDING_SINGLE;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, good), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, good, l), QAT_OK);
    CU_ASSERT(l->version == 5 && l->rounding == QAT_ROUNDING_SINGLE);
    f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT(H5LTget_attribute_string(f, "/", "requant_rounding", text) >= 0 && !strcmp(text, "single"));
    H5Fclose(f);
    tampered_text(good, bad, "/", "requant_rounding", "triple");
    expect_refused(bad, QAT_ERR_FORMAT, "requant_rounding: \"triple\" (double or single)");
    copy_file(good, bad, -1);
    f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "requant_rounding");
    H5Fclose(f);
    expect_refused(bad, QAT_ERR_FORMAT, "requant_rounding");
    tampered(good, bad, "/", "version", 4); /* a version-4 reader knows no such attribute: double */
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, bad, l), QAT_OK);
    CU_ASSERT(l->version == 4 && l->rounding == QAT_ROUNDING_DOUBLE);
    p.q.rounding = (qat_rounding)7; /* not a rounding: the check refuses it before anything is written */
    char msg[300];
    CU_ASSERT_EQUAL(qat_qmodel_check(&p.q, msg, sizeof msg), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(msg, "rounding 7") != NULL);
    qat_ctx_free(ctx);
    prog_free(&p);
}

/* What the check and the reader refuse about the dividing rule, each
 * with a message naming the op; "multiplier" spelled out is today's rule. */
static void test_keep_scale_refusals(void) {
    prog p;
    program_d(&p); /* ops: conv, clipped (keeps), halves (keeps), flat, head */
    char msg[400], good[300], bad[300];
    qat_qop *clipped = &p.o[1];
    CU_ASSERT_FATAL(clipped->keeps_scale && clipped->kind == QAT_QOP_AVGPOOL2D);
    p.o[4].keeps_scale = true; /* a linear op cannot */
    CU_ASSERT_EQUAL(qat_qmodel_check(&p.q, msg, sizeof msg), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(msg, "op 4 (linear head)") && strstr(msg, "only an average pool"));
    p.o[4].keeps_scale = false;
    int32_t m = 1 << 30, sh = 0;
    clipped->n_mult = 1, clipped->multiplier = &m, clipped->shift = &sh;
    CU_ASSERT_EQUAL(qat_qmodel_check(&p.q, msg, sizeof msg), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(msg, "op 1 (avgpool2d clipped)") && strstr(msg, "no multiplier"));
    clipped->n_mult = 0, clipped->multiplier = clipped->shift = NULL;
    p.t[clipped->output].q.zero_point++; /* the output's quantization is not the input's */
    CU_ASSERT_EQUAL(qat_qmodel_check(&p.q, msg, sizeof msg), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(msg, "op 1 (avgpool2d clipped)") && strstr(msg, "keep its input's quantization"));
    p.t[clipped->output].q.zero_point--;
    CU_ASSERT_EQUAL(qat_qmodel_check(&p.q, msg, sizeof msg), QAT_OK);
    /* padding must leave an input position in every window: a 1x1 window padded by 1 (the shape follows) */
    prog w;
    prog_init(&w, 6);
    int x = input(&w, 3, 2, 3, 3);
    qat_qop *one = pool_keep(&w, "one", x, 1, 1, 0);
    one->pad_h = one->pad_w = 1;
    shape_of(&w, one);
    unary(&w, QAT_QOP_FLATTEN, "flat", one->output);
    w.q.output = w.o[1].output;
    CU_ASSERT_EQUAL(qat_qmodel_check(&w.q, msg, sizeof msg), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(msg, "op 0 (avgpool2d one)") && strstr(msg, "padding 1x1 with a 1x1 window"));
    prog_free(&w);
    /* the file */
    qat_ctx *ctx = qat_ctx_new();
    path_of(good, sizeof good, "keep-good.qat.h5");
    path_of(bad, sizeof bad, "keep-bad.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, good), QAT_OK);
    tampered_text(good, bad, "ops/1", "rounding", "nearest");
    expect_refused(bad, QAT_ERR_FORMAT, "op 1 (avgpool2d clipped): rounding \"nearest\" is neither");
    tampered_text(good, bad, "ops/1", "rounding", "multiplier"); /* the multiplier rule: none in the file */
    expect_refused(bad, QAT_ERR_FORMAT, "no dataset multiplier");
    tampered(good, bad, "tensors/2", "zero_point", 9); /* clipped's output */
    expect_refused(bad, QAT_ERR_FORMAT, "keep its input's quantization");
    copy_file(good, bad, -1); /* a divide op that carries a multiplier too: an older reader would run it */
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t one_v = 1;
    H5LTmake_dataset_int(f, "ops/1/multiplier", 1, &one_v, &m);
    H5Fclose(f);
    expect_refused(bad, QAT_ERR_FORMAT, "rounding \"divide\" takes no multiplier");
    /* program_a's average pool with rounding "multiplier" spelled out loads as the file without it */
    prog a;
    program_a(&a);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &a.q, good), QAT_OK);
    int ap = -1;
    for (int i = 0; i < a.q.n_ops; i++) ap = a.o[i].kind == QAT_QOP_AVGPOOL2D ? i : ap;
    char g[32];
    snprintf(g, sizeof g, "ops/%d", ap);
    tampered_text(good, bad, g, "rounding", "multiplier");
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL(qat_qmodel_load(ctx, bad, l), QAT_OK);
    CU_ASSERT(same_qmodel(&a.q, l));
    prog_free(&a);
    qat_ctx_free(ctx);
    prog_free(&p);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "export")) return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the tests' own HDF5 calls print nothing */
    const qat_test_case cases[] = {
        {"a two-layer model computed by hand (int, fake, hybrid)", test_hand_computed_model},
        {"a batch run in chunks gives each sample its integers alone", test_chunked_batch_equals_one_at_a_time},
        {"the reference GEMM kernel equals the public requantization", test_gemm_reference_kernel},
        {"SIMD GEMM kernels equal the reference kernel", test_gemm_kernels_agree_with_reference},
        {"im2col equals direct convolution indexing", test_im2col_matches_direct_convolution},
        {"SIMD 2x2 max pooling equals the scalar one", test_maxpool_simd_equals_scalar},
        {"lowering agrees with the fake-quantized model", test_lowering_agrees_with_the_fake_quantized_model},
        {"lowering folds BatchNorm", test_lowering_folds_batchnorm},
        {"lowering of ReLU6, average pooling and a lone ReLU", test_lowering_of_relu6_avgpool_relu},
        {"lowering refuses what has no integer form", test_lowering_refuses_what_has_no_integer_form},
        {"export -> load round trip, every granularity", test_export_load_round_trip},
        {"the int engine refuses types wider than 8 bits", test_int_engine_refuses_wide_types},
        {"damaged, truncated, wrong-version files are refused", test_damaged_files_are_refused},
        {"saving is atomic", test_save_is_atomic},
        {"the numpy reader of the format document gives the C engine's integers", test_numpy_reader_gives_the_same_integers},
        {"a training checkpoint rebuilds its model", test_checkpoint_rebuilds_the_model},
        {"normalization: checkpoint -> export -> load; engines and numpy reader on raw inputs", test_normalized_checkpoint_export_load},
        {"normalization: hostile attributes are refused; version 3 loads as none", test_normalization_hostile_files},
        {"names of 31 characters survive checkpoint, export, load and summary", test_names_of_31_characters_survive_every_file},
        {"the reader written from docs/ alone gives the int engine's integers, versions 1 to 4", test_docs_reader_gives_the_same_integers},
        {"the dividing rule of pools that keep their input's quantization, by hand: every level, both readers",
         test_keep_scale_rule_by_hand},
        {"tests/programs.h through the file: both numpy readers give the int engine's integers",
         test_hand_programs_through_the_file},
        {"the dividing rule: what the check and the reader refuse", test_keep_scale_refusals},
        {"the rounding in the file: version 5 only where it rounds once; hostile values", test_rounding_in_the_file},
        {NULL, NULL},
    };
    int rc = qat_test_main("export", cases, argc, argv);
    qat_test_rmdir(dir);
    return rc;
}
