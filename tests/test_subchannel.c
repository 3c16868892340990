/* Sub-channel (blockwise) weights on integers (docs/subchannel.md): the
 * block conversions and the sums against hand-computed integers, the
 * largest partial sums the bounds allow (and one more refused), blocks of
 * very different scales against the proven error bound, every SIMD
 * kernel against the portable one, export -> load -> run for blocks on
 * each axis (int and fake engines, the numpy reader), and files that lie
 * about sub-channel weights. */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdint.h>
#include <stdlib.h>

#include "internals.h"
#include "qat/export.h"
#include "qat/io.h"
#include "qat/infer.h"
#include "test_util.h"

static char dir[256];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static qat_aparams ap(float s, int32_t zp) {
    return (qat_aparams){.scale = s, .zero_point = zp, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
}

static qat_qtensor vec(const char *name, int64_t n, qat_aparams q) {
    qat_qtensor t = {.rank = 1, .shape = {n}, .q = q};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* A one-op program: input [K] -> linear [O] with weight type wbits and
 * blocks `block` on [O, K] (ragged allowed); the caller fills the type's
 * scales, the weights, the bias and the multipliers. */
typedef struct {
    qat_qmodel q;
    qat_qtensor t[2];
    qat_qop op;
} one_op;

static void one_linear(qat_ctx *ctx, one_op *p, int64_t O, int64_t K, const int64_t *block, int wbits, qat_aparams in,
                       qat_aparams out) {
    memset(p, 0, sizeof *p);
    p->t[0] = vec("input", K, in), p->t[1] = vec("fc", O, out);
    qat_qop *op = &p->op;
    op->kind = QAT_QOP_LINEAR, op->n_inputs = 1, op->inputs[0] = 0, op->output = 1, op->groups = 1;
    op->act_min = out.qmin, op->act_max = out.qmax;
    snprintf(op->name, sizeof op->name, "fc");
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &op->wq, wbits, true, true, 2, (int64_t[]){O, K}, block, true), QAT_OK);
    op->weight = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(O * K) * sizeof(int32_t));
    op->bias = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->bias_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(float));
    op->n_mult = (int)O;
    op->multiplier = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->shift = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->block_multiplier = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)op->wq.nparams * sizeof(int32_t));
    op->block_shift = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)op->wq.nparams * sizeof(int32_t));
    memset(op->weight, 0, (size_t)(O * K) * sizeof(int32_t));
    memset(op->bias, 0, (size_t)O * sizeof(int32_t));
    p->q = (qat_qmodel){.n_tensors = 2, .n_ops = 1, .tensors = p->t, .ops = op, .input = 0, .output = 1, .config = ""};
}

static void set_mult(int32_t *m, int32_t *s, double M) {
    int sh;
    CU_ASSERT_EQUAL(qat_quantize_multiplier(M, m, &sh), QAT_OK);
    *s = sh;
}

/* Runs the int engine on float inputs and gives the output integers. */
static bool run_int(qat_ctx *ctx, const qat_qmodel *q, const float *x, int n, int32_t *y) {
    qat_engine *e = qat_engine_new(ctx, q, QAT_ENGINE_INT, n);
    if (!e) printf("\n  %s\n", qat_ctx_error(ctx));
    bool ok = e && qat_engine_run(e, x, n, NULL, y) == QAT_OK;
    qat_engine_free(e);
    return ok;
}

/* The op's constants prepared, then kernel i over a col matrix: out [O][P]. */
static bool run_kernel(int i, const qat_qop *op, const int16_t *col, int P, int Pp, int32_t zp, bool single, int8_t *out) {
    qat__sc_fn fn = qat__sc_kernel(i, NULL);
    if (!fn) return false;
    void *c = aligned_alloc(64, (size_t)qat__round_up(qat__sc_const_bytes(op), 64));
    qat__sc_prepare(op, c);
    qat__sc_args a = {.op = op, .consts = c, .col = col, .O = (int)op->wq.shape[0], .P = P, .Pp = Pp, .o0 = 0,
                      .zp = zp, .lo = op->act_min, .hi = op->act_max, .out = out, .so = P, .sp = 1, .single = single};
    fn(&a);
    free(c);
    return true;
}

/* ---- hand-computed --------------------------------------------------------------- */

/* input [4] at s 0.5, zp 0: x = (2, -1, 1, 0). fc [2, 4] in blocks of 2:
 *   row 0: s_w (1, 2^-10), w (3, -2 | 95, 7), bias 3, s_acc 2^-5:
 *     block 0: P = 2·3 + (-1)(-2) = 8, M = 0.5·1/2^-5 = 16 (m 2^30, shift 5): 8·16 = 128
 *     block 1: P = 95, M = 0.5·2^-10/2^-5 = 2^-6 (m 2^30, shift -5):
 *              SRDHM(95, 2^30) = 48 (95.5 rounded toward zero... (95·2^30 + 2^30)/2^31 = 48),
 *              then 48 / 2^5 = 1.5, rounded away from zero: 2 (95/64 = 1.48: the contract's
 *              double rounding, one unit of the accumulator at most)
 *     total 3 + 128 + 2 = 133; output M = 2^-5/2^-2 = 2^-3: SRDHM(133) = 67, 67/4 = 16.75 -> 17
 *   row 1: s_w (0.25, 0.25), w (-7, 7 | 4, -4), bias -5, s_acc 2^-6:
 *     block 0: P = -14 - 7 = -21, M = 0.125/2^-6 = 8: -168;  block 1: P = 4, 32
 *     total -5 - 168 + 32 = -141; output M = 2^-4: SRDHM(-141) = -70 (toward zero of -70.5),
 *     -70/8 = -8.75 -> -9 */
static void hand_program(qat_ctx *ctx, one_op *p) {
    one_linear(ctx, p, 2, 4, (int64_t[]){1, 2}, 8, ap(0.5f, 0), ap(0.25f, 0));
    qat_qop *op = &p->op;
    const int32_t w[8] = {3, -2, 95, 7, -7, 7, 4, -4};
    const float sw[4] = {1.0f, 1.0f / 1024, 0.25f, 0.25f};
    memcpy(op->weight, w, sizeof w);
    memcpy(op->wq.scale, sw, sizeof sw);
    op->bias[0] = 3, op->bias[1] = -5;
    op->bias_scale[0] = 1.0f / 32, op->bias_scale[1] = 1.0f / 64;
    set_mult(&op->multiplier[0], &op->shift[0], 0.125);
    set_mult(&op->multiplier[1], &op->shift[1], 0.0625);
    set_mult(&op->block_multiplier[0], &op->block_shift[0], 16.0);
    set_mult(&op->block_multiplier[1], &op->block_shift[1], 1.0 / 64);
    set_mult(&op->block_multiplier[2], &op->block_shift[2], 8.0);
    set_mult(&op->block_multiplier[3], &op->block_shift[3], 8.0);
}

static void test_hand_computed(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    hand_program(ctx, &p);
    CU_ASSERT_EQUAL(p.op.block_multiplier[1], 1 << 30);
    CU_ASSERT_EQUAL(p.op.block_shift[1], -5);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    CU_ASSERT(qat_qop_subchannel(&p.op));
    /* the file's rule derives the same conversions from the scales */
    int32_t m[4], s[4];
    qat_qop d = p.op;
    d.block_multiplier = m, d.block_shift = s;
    qat__sc_derive(&d, 0.5f, 0, 2);
    CU_ASSERT(!memcmp(m, p.op.block_multiplier, sizeof m) && !memcmp(s, p.op.block_shift, sizeof s));
    float x[4] = {1.0f, -0.5f, 0.5f, 0.0f};
    int32_t y[2];
    CU_ASSERT_FATAL(run_int(ctx, &p.q, x, 1, y));
    CU_ASSERT_EQUAL(y[0], 17);
    CU_ASSERT_EQUAL(y[1], -9);
    /* the hybrid engine (weight-only, the hybrid seed): x · dequantize(w) + bias in float,
     * each block with its own scale: row 0 3 + 1 + 95/1024·0.5 + 3/32 = 4.1401367;
     * row 1 -1.75 - 0.875 + 0.5 - 5/64 = -2.203125 */
    qat_engine *he = qat_engine_new(ctx, &p.q, QAT_ENGINE_HYBRID, 1);
    float hy[2];
    CU_ASSERT_FATAL(he && qat_engine_run(he, x, 1, hy, NULL) == QAT_OK);
    ASSERT_CLOSE(hy[0], 4.1401367f, 1e-6);
    ASSERT_CLOSE(hy[1], -2.203125f, 1e-6);
    qat_engine_free(he);
    /* every kernel, directly: col [K][16] with the sample in column 0 */
    int16_t col[4 * 16] = {0};
    col[0] = 2, col[16] = -1, col[32] = 1, col[48] = 0;
    for (int i = 0; i < 3; i++) {
        int8_t out[2 * 16];
        if (!run_kernel(i, &p.op, col, 1, 16, 0, false, out)) continue;
        CU_ASSERT(out[0] == 17 && out[1] == -9); /* row stride P = 1 */
    }
    /* x = (1, -0.5, 0, 0): row 0's total is 3 + 128 + 0 = 131 and 131/8 = 16.375: one
     * rounding gives 16; the double rounding 17 (SRDHM: 65.5 -> 66, then 66/4 = 16.5 -> 17).
     * Row 1: -5 - 168 = -173, -10.8125 -> -11 either way. */
    col[32] = 0;
    for (int i = 0; i < 3; i++)
        for (int single = 0; single < 2; single++) {
            int8_t out[2 * 16];
            if (!run_kernel(i, &p.op, col, 1, 16, 0, single, out)) continue;
            CU_ASSERT(out[0] == (single ? 16 : 17) && out[1] == -11);
        }
    col[32] = 1;
    /* written and read back: the same integers from the file */
    char path[300];
    path_of(path, sizeof path, "hand.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, path), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, l), QAT_OK);
    CU_ASSERT(!memcmp(l->ops[0].block_multiplier, p.op.block_multiplier, sizeof m));
    CU_ASSERT_FATAL(run_int(ctx, l, x, 1, y));
    CU_ASSERT(y[0] == 17 && y[1] == -9);
    /* a conversion the rule would not derive is refused at save, naming the op */
    p.op.block_shift[1] = -6;
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, &p.q, path), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0 (linear fc)") && strstr(qat_ctx_error(ctx), "block multipliers"));
    qat_ctx_free(ctx);
}

/* ---- the largest partial sums --------------------------------------------------- */

/* input zp -128: |x - zp| reaches 255. fc [2, K] in blocks {1, KB}: block 0
 * of KB = 66311 weights of ±127, block 1 the one weight left. At x = 127:
 *   row 0: P0 = 66311·127·255 = 2147481735 (INT32_MAX is 2147483647),
 *          M0 = 2^-10 (shift -9): SRDHM = (P0 + 1)/2 = 1073740868, / 2^9 -> 2097150
 *          P1 = 127·255 = 32385, M1 = 1: 32385; total 2129535
 *          output M = 2^-15 (shift -14): SRDHM = 1064768, / 2^14 = 64.99 -> 65
 *   row 1: the same with -127: -2147481735 -> -2097150 (SRDHM -1073740867.5 -> -1073740867,
 *          / 2^9 = -2097150.13 -> -2097150); total -2129535 -> -65 */
enum { KB = 66311 };

static void extreme_program(qat_ctx *ctx, one_op *p, int64_t kb) {
    int64_t K = kb + 1;
    one_linear(ctx, p, 2, K, (int64_t[]){1, kb}, 8, ap(1.0f, -128), ap(1.0f, 0));
    qat_qop *op = &p->op;
    for (int64_t k = 0; k < K; k++) op->weight[k] = 127, op->weight[K + k] = -127;
    for (int64_t i = 0; i < op->wq.nparams; i++) op->wq.scale[i] = 1.0f;
    for (int o = 0; o < 2; o++) {
        op->bias_scale[o] = 1.0f;
        set_mult(&op->multiplier[o], &op->shift[o], 1.0 / 32768);
        set_mult(&op->block_multiplier[2 * o], &op->block_shift[2 * o], 1.0 / 1024);
        set_mult(&op->block_multiplier[2 * o + 1], &op->block_shift[2 * o + 1], 1.0);
    }
}

static void test_largest_partial_sums(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    extreme_program(ctx, &p, KB);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    int64_t K = KB + 1;
    float *x = malloc((size_t)K * sizeof *x);
    for (int64_t k = 0; k < K; k++) x[k] = 255.0f; /* (127 - (-128))·1: the integer 127 */
    int32_t y[2];
    CU_ASSERT_FATAL(run_int(ctx, &p.q, x, 1, y));
    CU_ASSERT_EQUAL(y[0], 65);
    CU_ASSERT_EQUAL(y[1], -65);
    int16_t *col = calloc((size_t)K * 16, sizeof *col);
    for (int64_t k = 0; k < K; k++) col[k * 16] = 255;
    for (int i = 0; i < 3; i++) {
        int8_t out[2 * 16];
        if (run_kernel(i, &p.op, col, 1, 16, 0, false, out)) CU_ASSERT(out[0] == 65 && out[1] == -65); /* row stride P = 1 */
    }
    free(col), free(x);
    /* one more weight in block 0: its partial sum could reach 2147514120 */
    one_op big;
    extreme_program(ctx, &big, KB + 1);
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &big.q), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "row 0, block 0: its partial sum can reach") != NULL);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0 (linear fc)") != NULL);
    qat_ctx_clear_error(ctx);
    /* a conversion whose left shift would saturate: block 1's 32385 · 2^17 */
    set_mult(&p.op.block_multiplier[1], &p.op.block_shift[1], 65536.0);
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "left shift by 17") != NULL);
    qat_ctx_clear_error(ctx);
    /* the sum: 2097150 + 32385 + bias; INT32_MAX - 2129535 is the largest bias that fits */
    set_mult(&p.op.block_multiplier[1], &p.op.block_shift[1], 1.0);
    p.op.bias[0] = INT32_MAX - 2129535;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    /* there the total is INT32_MAX: with an output multiplier just below 1
     * and zero point 100, every kernel clamps to 127 (no wrap of v + zp) */
    set_mult(&p.op.multiplier[0], &p.op.shift[0], 1.0 - ldexp(1.0, -30)); /* v = 2147483645 */
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    col = calloc((size_t)K * 16, sizeof *col);
    for (int64_t k = 0; k < K; k++) col[k * 16] = 255;
    for (int i = 0; i < 3; i++) {
        int8_t out[2 * 16];
        if (run_kernel(i, &p.op, col, 1, 16, 100, false, out)) CU_ASSERT(out[0] == 127 && out[1] == 35); /* row 1: -65 + 100 */
    }
    free(col);
    p.op.bias[0]++;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "row 0: the bias and the converted partial sums can reach 2147483648") != NULL);
    qat_ctx_free(ctx);
}

/* ---- lowering's accumulation scale and the error bound --------------------------- */

/* Random rows with block scales up to 2^24 apart: lowering's choice of the
 * accumulation scale (qat__sc_accumulation) keeps every bound, G is the
 * largest that does (G + 1 breaks one, or G is the cap), and the integer
 * total T before the output conversion is within the bound of
 * docs/subchannel.md of the exact real sum:
 *   |T·s_acc - (s_x Σ_j s_w[j] P_j + b)| <= s_acc·(1/2 + Σ_j (1/2 + [r_j > 0]·2^-(r_j+1) + |P_j| M_j 2^-31)),
 * r_j the conversion's right shift. The output integers equal the
 * formula's, computed here with the public fixed-point functions. With
 * r_j = 0 the second rounding is the identity, and its 2^-(r_j+1) is 0. */
static void test_accumulation_and_error_bound(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 12);
    int worst_bits = 0;
    for (int trial = 0; trial < 40; trial++) {
        int64_t O = 3, K = 5 + trial % 29, B = 1 + trial % 7;
        one_op p;
        qat_aparams in = ap(0.02f + 0.01f * qat_rng_uniform(&rng), (int32_t)(qat_rng_uniform(&rng) * 40) - 20);
        one_linear(ctx, &p, O, K, (int64_t[]){1, B}, trial % 2 ? 4 : 8, in, ap(0.05f, 3));
        qat_qop *op = &p.op;
        int32_t wmax = op->wq.qmax;
        for (int64_t i = 0; i < O * K; i++) op->weight[i] = (int32_t)(qat_rng_uniform(&rng) * (2 * wmax + 1)) - wmax;
        for (int64_t j = 0; j < op->wq.nparams; j++) /* scales spread over 2^24 */
            op->wq.scale[j] = 1e-3f * exp2f(-24.0f * qat_rng_uniform(&rng));
        double b[3];
        for (int o = 0; o < O; o++) b[o] = 2.0 * (qat_rng_uniform(&rng) - 0.5);
        char why[200];
        CU_ASSERT_FATAL(qat__sc_accumulation(op, &in, 0.05f, b, why, sizeof why));
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
        int64_t X = qat__sc_input_bound(&in), J = op->wq.nparams / O, work[64];
        for (int o = 0; o < O; o++) {
            /* G = log2(s_x·max s_w / s_acc) is the largest that holds */
            float smax = 0;
            for (int64_t j = 0; j < J; j++) smax = fmaxf(smax, op->wq.scale[o * J + j]);
            int G = (int)lround(log2((double)in.scale * smax / op->bias_scale[o]));
            if (G < QAT__SC_G_MAX) {
                qat_qop up = *op;
                int32_t bm[3 * 40], bs[3 * 40], bias[3], mo[3], so[3]; /* J <= 33 blocks a row */
                float bsc[3];
                memcpy(bias, op->bias, sizeof bias), memcpy(bsc, op->bias_scale, sizeof bsc);
                memcpy(mo, op->multiplier, sizeof mo), memcpy(so, op->shift, sizeof so);
                up.block_multiplier = bm, up.block_shift = bs, up.bias = bias, up.bias_scale = bsc;
                up.multiplier = mo, up.shift = so;
                bsc[o] = (float)ldexp((double)in.scale * smax, -(G + 1));
                bias[o] = (int32_t)fmax(-2147483647.0, fmin(2147483647.0, nearbyint(b[o] / bsc[o])));
                qat__sc_derive(&up, in.scale, o, o + 1);
                qat__sc_row_sums(&up, o, work);
                bool bias_fits = fabs(nearbyint(b[o] / bsc[o])) <= 2147483647.0;
                int32_t m_out;
                int s_out;
                qat_quantize_multiplier((double)bsc[o] / 0.05, &m_out, &s_out);
                CU_ASSERT(!bias_fits || m_out == 0 || !qat__sc_row_bounds(&up, o, X, work, NULL, 0));
            }
        }
        /* the error bound, on random inputs */
        for (int s = 0; s < 20; s++) {
            int32_t xq[40];
            float xf[40];
            for (int64_t k = 0; k < K; k++) {
                xq[k] = s == 0 ? (k % 2 ? in.qmax : in.qmin) : (int32_t)(qat_rng_uniform(&rng) * 256) - 128;
                xf[k] = (float)(xq[k] - in.zero_point) * in.scale;
            }
            int32_t y[3];
            CU_ASSERT_FATAL(run_int(ctx, &p.q, xf, 1, y));
            for (int o = 0; o < O; o++) {
                int64_t T = op->bias[o];
                double real = (double)op->bias[o] * op->bias_scale[o], bound = 0.5;
                for (int64_t j = 0; j < J; j++) {
                    int32_t P = 0;
                    for (int64_t k = j * B; k < K && k < (j + 1) * B; k++) P += (xq[k] - in.zero_point) * op->weight[o * K + k];
                    int32_t mj = op->block_multiplier[o * J + j];
                    int sh = op->block_shift[o * J + j];
                    T += qat_multiply_by_quantized_multiplier(P, mj, sh);
                    double M = (double)in.scale * op->wq.scale[o * J + j] / op->bias_scale[o];
                    real += (double)in.scale * op->wq.scale[o * J + j] * P;
                    bound += 0.5 + (sh < 0 ? ldexp(0.5, sh) : 0.0) + fabs((double)P) * M * ldexp(1, -31);
                }
                double err = fabs((double)T * op->bias_scale[o] - (real - ((double)op->bias[o] * op->bias_scale[o] - b[o])));
                /* real uses the rounded bias; the bound's 1/2 is that rounding */
                if (err > bound * op->bias_scale[o] * (1 + 1e-9))
                    printf("\n  trial %d row %d: error %g > bound %g\n", trial, o, err / op->bias_scale[o], bound);
                CU_ASSERT(err <= bound * op->bias_scale[o] * (1 + 1e-9));
                int32_t want = qat_multiply_by_quantized_multiplier((int32_t)T, op->multiplier[o], op->shift[o]) + 3;
                want = want < -128 ? -128 : want > 127 ? 127 : want;
                CU_ASSERT_EQUAL(y[o], want);
                int bits = (int)ceil(log2(bound));
                worst_bits = bits > worst_bits ? bits : worst_bits;
            }
        }
    }
    CU_ASSERT(worst_bits <= 6); /* a handful of accumulator units, whatever the scales */
    qat_ctx_free(ctx);
}

/* ---- kernels --------------------------------------------------------------------- */

/* Every SIMD kernel equals the portable one: block shapes of every kind
 * (ragged, boxes over a conv weight's own axes, blocks over rows, weight
 * zero points), row counts that are not a multiple of the kernel's, and
 * position counts around 16; once over the full int8 ranges, and once
 * with small values and an output multiplier near 1, where a conversion
 * one unit off changes the output integers. */
static void test_kernels_agree(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    static const int64_t shapes[][5] = {
        /* rank, then shape; blocks below */
        {2, 7, 37, 0, 0}, {2, 9, 50, 0, 0}, {4, 6, 3, 5, 5}, {4, 5, 4, 3, 3}, {2, 13, 3, 0, 0}, {2, 4, 200, 0, 0}};
    static const int64_t blocks[][4] = {{1, 16}, {2, 7}, {1, 2, 2, 5}, {3, 1, 2, 3}, {1, 1}, {1, 64}};
    int compared = 0;
    for (int small = 0; small < 3; small++) /* 2: compact block scales, full ranges, sub-scales up to 255 */
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            bool compact = small == 2;
            int rank = (int)shapes[c][0];
            qat_qop op = {.kind = QAT_QOP_LINEAR, .groups = 1, .act_min = -128, .act_max = 127};
            CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &op.wq, 8, true, false, rank, shapes[c] + 1, blocks[c], true),
                                  QAT_OK);
            int64_t O = op.wq.shape[0], n = 1;
            for (int d = 0; d < rank; d++) n *= op.wq.shape[d];
            int64_t K = n / O;
            int wr = small == 1 ? 8 : 127, xr = small == 1 ? 4 : 128;
            op.weight = malloc((size_t)n * sizeof *op.weight);
            op.bias = malloc((size_t)O * sizeof *op.bias);
            op.multiplier = malloc((size_t)O * sizeof(int32_t)), op.shift = malloc((size_t)O * sizeof(int32_t));
            op.block_multiplier = malloc((size_t)op.wq.nparams * sizeof(int32_t));
            op.block_shift = malloc((size_t)op.wq.nparams * sizeof(int32_t));
            for (int64_t p = 0; p < op.wq.nparams; p++) {
                op.wq.zero_point[p] = c == 3 && !compact ? (int32_t)(qat_rng_uniform(&rng) * 9) - 4 : 0;
                set_mult(&op.block_multiplier[p], &op.block_shift[p],
                         ldexp(1.0 + qat_rng_uniform(&rng), (int)(qat_rng_uniform(&rng) * 12) - 8));
            }
            int32_t *sub = NULL;
            if (compact) { /* sub-scales in [1, 255], the extremes included; no block multipliers */
                sub = malloc((size_t)op.wq.nparams * sizeof *sub);
                for (int64_t p = 0; p < op.wq.nparams; p++)
                    sub[p] = p % 5 == 0 ? 255 : p % 7 == 0 ? 1 : 1 + (int32_t)(qat_rng_uniform(&rng) * 255);
                op.subscale = sub, op.sub_bits = 8;
                free(op.block_multiplier), free(op.block_shift);
                op.block_multiplier = op.block_shift = NULL;
            }
            for (int64_t i = 0; i < n; i++) op.weight[i] = (int32_t)(qat_rng_uniform(&rng) * (2 * wr + 1)) - wr;
            for (int64_t o = 0; o < O; o++) {
                op.bias[o] = (int32_t)((qat_rng_uniform(&rng) - 0.5) * (small ? 100 : 20000));
                /* compact: |T| is about sqrt(K)·73·74·128; M takes it to tens of output steps */
                set_mult(&op.multiplier[o], &op.shift[o],
                         compact ? 40.0 / (sqrt((double)K) * 73 * 74 * 128) * (0.5 + qat_rng_uniform(&rng))
                         : small ? 0.25 + 0.7 * qat_rng_uniform(&rng)
                                 : ldexp(1.0 + qat_rng_uniform(&rng), -12 - (int)(qat_rng_uniform(&rng) * 4)));
            }
            for (int P = 1; P <= 40; P += 13) {
                int Pp = (int)qat__round_up(P, 16);
                int16_t *col = malloc((size_t)(K * Pp) * sizeof *col);
                for (int64_t i = 0; i < K * Pp; i++) col[i] = (int16_t)((int)(qat_rng_uniform(&rng) * (2 * xr)) - xr);
                int8_t *ref = malloc((size_t)(O * P)), *got = malloc((size_t)(O * P));
                bool single = P / 13 % 2; /* P = 14: the single rounding */
                CU_ASSERT_FATAL(run_kernel(0, &op, col, P, Pp, 5, single, ref));
                for (int i = 1; i < 3; i++) {
                    memset(got, 0x55, (size_t)(O * P));
                    if (!run_kernel(i, &op, col, P, Pp, 5, single, got)) continue;
                    compared++;
                    if (memcmp(ref, got, (size_t)(O * P))) printf("\n  kernel %d differs: case %zu, P %d\n", i, c, P);
                    CU_ASSERT_EQUAL(memcmp(ref, got, (size_t)(O * P)), 0);
                }
                int clamped = 0;
                for (int64_t i = 0; i < O * P; i++) clamped += ref[i] == -128 || ref[i] == 127;
                CU_ASSERT(clamped <= O * P / 2); /* the comparison sees values, not clamps */
                free(col), free(ref), free(got);
            }
            free(op.weight), free(op.bias), free(op.multiplier), free(op.shift), free(op.block_multiplier),
                free(op.block_shift), free(sub);
        }
    if (!compared) QAT_TEST_SKIP("this CPU has no SIMD sub-channel kernel (AVX2 or AVX-512 VNNI)");
    qat_ctx_free(ctx);
}

/* ---- export -> load -> run, blocks on each axis ---------------------------------- */

/* conv(2->4, 3x3, pad 1) relu maxpool2 conv(4->4 in 2 groups, 3x3) relu
 * flatten fc(16->5), on [2, 8, 8] inputs, prepared with cfg (conv_cfg, if
 * given, for the two convs alone), trained a few steps so that its
 * observers have seen data. */
static qat_model *small_model(qat_ctx *ctx, const qat_prepare_config *cfg, const qat_prepare_config *conv_cfg,
                              qat_rng *rng) {
    qat_model *m = qat_model_new(ctx);
    int x = qat_model_input(m);
    qat_model_set_input_shape(m, 3, (int64_t[]){2, 8, 8});
    x = qat_layer_conv2d(m, "conv1", x, &(qat_conv2d_spec){.in = 2, .out = 4, .kh = 3, .kw = 3, .stride_h = 1,
                                                            .stride_w = 1, .pad_h = 1, .pad_w = 1, .groups = 1, .bias = true});
    x = qat_layer_relu(m, NULL, x);
    x = qat_layer_maxpool2d(m, NULL, x, &(qat_pool2d_spec){2, 2, 2, 2, 0, 0});
    x = qat_layer_conv2d(m, "conv2", x, &(qat_conv2d_spec){.in = 4, .out = 4, .kh = 3, .kw = 3, .stride_h = 1,
                                                            .stride_w = 1, .pad_h = 0, .pad_w = 0, .groups = 2, .bias = true});
    x = qat_layer_relu(m, NULL, x);
    x = qat_layer_flatten(m, NULL, x);
    x = qat_layer_linear(m, "fc", x, 16, 5, true);
    CU_ASSERT_FATAL(x > 0);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 7), QAT_OK);
    qat_status st = qat_prepare(m, cfg);
    if (st == QAT_OK && conv_cfg) st = qat_prepare_layer(m, "conv1", conv_cfg);
    if (st == QAT_OK && conv_cfg) st = qat_prepare_layer(m, "conv2", conv_cfg);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    qat_model_train(m, true);
    for (int step = 0; step < 4; step++) {
        qat_tensor *t = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){16, 2, 8, 8}, false);
        for (int64_t i = 0; i < t->numel; i++) t->data[i] = qat_rng_normal(rng);
        CU_ASSERT(qat_model_forward(m, t) != NULL);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    return m;
}

static bool same_type(const qat_qtype *a, const qat_qtype *b) {
    return a->bits == b->bits && a->qmin == b->qmin && a->qmax == b->qmax && a->rank == b->rank &&
           !memcmp(a->shape, b->shape, sizeof a->shape) && !memcmp(a->block, b->block, sizeof a->block) &&
           a->nparams == b->nparams && !memcmp(a->scale, b->scale, (size_t)a->nparams * 4) &&
           !memcmp(a->zero_point, b->zero_point, (size_t)a->nparams * 4);
}

/* The numpy reader (tools/run_qat_h5.py) on the file: its output
 * integers, n samples of x. */
static bool numpy_reader(const char *model, const float *x, int n, int64_t in_numel, int32_t *out, int64_t out_n) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src || system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) return false;
    char in[300], o[300], cmd[2048];
    path_of(in, sizeof in, "x.f32");
    path_of(o, sizeof o, "y.i32");
    FILE *f = fopen(in, "wb");
    fwrite(x, sizeof *x, (size_t)(n * in_numel), f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/run_qat_h5.py' '%s' '%s' %d '%s' >/dev/null", src,
             model, in, n, o);
    if (system(cmd) != 0) return false;
    f = fopen(o, "rb");
    bool ok = f && fread(out, sizeof *out, (size_t)(n * out_n), f) == (size_t)(n * out_n);
    if (f) fclose(f);
    return ok;
}

static void test_export_load_run_every_axis(void) {
    bool have_numpy = getenv("QAT_SOURCE_DIR") && system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") == 0;
    if (!have_numpy) printf("\n  python3-h5py and python3-numpy are needed for the numpy reader's part\n");
    CU_ASSERT(have_numpy);
    struct {
        const char *what;
        qat_granularity g;
        int block, bits;
        int64_t blocks[4];
        bool ragged;
        int sbits; /* compact block scales: sub-scale bits (0: a float32 per block) */
    } cases[] = {
        {"block:4 on the flattened input (ragged: 18 = 4·4 + 2, 16, 36 = 9·4)", QAT_GRAN_BLOCK, 4, 4, {0}, true, 0},
        {"{0:3}: rows in blocks of 3 (ragged), whole rows", QAT_GRAN_AXES, 0, 8, {3, 0, 0, 0}, true, 0},
        {"{1:1}: one scale per input channel", QAT_GRAN_AXES, 0, 8, {0, 1, 0, 0}, false, 0},
        {"{0:1, 2:2}: kernel rows in blocks of 2 (ragged: 3 = 2 + 1)", QAT_GRAN_AXES, 0, 4, {1, 0, 2, 0}, true, 0},
        {"{0:1, 3:1}: one scale per kernel column", QAT_GRAN_AXES, 0, 8, {1, 0, 0, 1}, false, 0},
        {"{0:2, 1:2, 2:3, 3:1}: boxes over every axis", QAT_GRAN_AXES, 0, 3, {2, 2, 3, 1}, true, 0},
        {"block:1: every weight its own scale", QAT_GRAN_BLOCK, 1, 2, {0}, true, 0},
        {"block:4, compact 4-bit sub-scales", QAT_GRAN_BLOCK, 4, 4, {0}, true, 4},
        {"{0:1, 2:2}, compact 6-bit sub-scales", QAT_GRAN_AXES, 0, 8, {1, 0, 2, 0}, true, 6},
        {"{0:2, 1:2}: rows sharing, compact 8-bit sub-scales", QAT_GRAN_AXES, 0, 5, {2, 2, 0, 0}, true, 8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_rng rng;
        qat_rng_seed(&rng, 40 + (uint64_t)c);
        qat_prepare_config cfg = qat_prepare_defaults();
        cfg.wgran = cases[c].g, cfg.block = cases[c].block, cfg.wbits = cases[c].bits, cfg.ragged = cases[c].ragged;
        cfg.block_scale_bits = cases[c].sbits;
        memcpy(cfg.blocks, cases[c].blocks, sizeof cfg.blocks);
        /* blocks on dimensions 2 and 3 are for the convs: the fc is per output channel there */
        bool conv_only = cases[c].g == QAT_GRAN_AXES && (cases[c].blocks[2] || cases[c].blocks[3]);
        qat_prepare_config base = qat_prepare_defaults();
        base.wbits = cfg.wbits;
        qat_model *m = small_model(ctx, conv_only ? &base : &cfg, conv_only ? &cfg : NULL, &rng);
        qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q), *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 3, (int64_t[]){2, 8, 8}, ctx, q), QAT_OK);
        int sub = 0;
        for (int i = 0; i < q->n_ops; i++) sub += qat_qop_subchannel(&q->ops[i]);
        if (sub == 0) printf("\n  %s: no sub-channel op\n", cases[c].what);
        CU_ASSERT(sub >= 2);
        char path[300];
        if (cases[c].sbits) {
            /* the forward's weight scales (qat_model_weight_qtype, as the fake quantizer
             * applies them) are the program's, two-level: s_r · q exactly */
            int compact = 0;
            for (int i = 0; i < q->n_ops; i++) {
                const qat_qop *a = &q->ops[i];
                if (!a->subscale) continue;
                compact++;
                CU_ASSERT(a->sub_bits == cases[c].sbits && !a->block_multiplier);
                qat_qtype t;
                CU_ASSERT_EQUAL_FATAL(qat_model_weight_qtype(m, qat_model_find_layer(m, a->name), ctx, &t), QAT_OK);
                CU_ASSERT(!memcmp(t.scale, a->wq.scale, (size_t)a->wq.nparams * sizeof(float)));
                int64_t J = a->wq.nparams / a->wq.pshape[0];
                for (int64_t p = 0; p < a->wq.nparams; p++)
                    CU_ASSERT(a->wq.scale[p] == a->row_scale[p / J] * (float)a->subscale[p] && a->subscale[p] >= 1 &&
                              a->subscale[p] < 1 << cases[c].sbits);
            }
            CU_ASSERT(compact == sub);
            /* the checkpoint records the option; the rebuilt model lowers to the same program */
            path_of(path, sizeof path, "compact.ckpt.h5");
            CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, NULL, NULL, NULL, path), QAT_OK);
            qat_model *back = NULL;
            CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, path, &back, NULL, 0), QAT_OK);
            CU_ASSERT_EQUAL(qat_model_qat_config(back, "conv1")->block_scale_bits,
                            conv_only ? cases[c].sbits : qat_model_qat_config(m, "conv1")->block_scale_bits);
            qat_qmodel *qb = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *qb);
            CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(back, 3, (int64_t[]){2, 8, 8}, ctx, qb), QAT_OK);
            for (int i = 0; i < q->n_ops; i++)
                if (q->ops[i].subscale)
                    CU_ASSERT(qb->ops[i].subscale &&
                              !memcmp(qb->ops[i].subscale, q->ops[i].subscale, (size_t)q->ops[i].wq.nparams * 4) &&
                              !memcmp(qb->ops[i].bias, q->ops[i].bias, (size_t)q->ops[i].wq.shape[0] * 4));
        }
        path_of(path, sizeof path, "axes.qat.h5");
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, q, path), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, l), QAT_OK);
        CU_ASSERT_EQUAL(l->version, 4);
        for (int i = 0; i < q->n_ops; i++) {
            const qat_qop *a = &q->ops[i], *b = &l->ops[i];
            if (a->kind != QAT_QOP_LINEAR && a->kind != QAT_QOP_CONV2D) continue;
            int64_t n = 1;
            for (int d = 0; d < a->wq.rank; d++) n *= a->wq.shape[d];
            CU_ASSERT(same_type(&a->wq, &b->wq) && !memcmp(a->weight, b->weight, (size_t)n * 4));
            CU_ASSERT(!memcmp(a->bias, b->bias, (size_t)a->wq.shape[0] * 4));
            CU_ASSERT(!memcmp(a->multiplier, b->multiplier, (size_t)a->wq.shape[0] * 4));
            if (a->subscale) {
                CU_ASSERT(b->subscale && !memcmp(a->subscale, b->subscale, (size_t)a->wq.nparams * 4) &&
                          !memcmp(a->bias_scale, b->bias_scale, (size_t)a->wq.shape[0] * 4) &&
                          !memcmp(a->shift, b->shift, (size_t)a->wq.shape[0] * 4));
            } else if (qat_qop_subchannel(a)) {
                CU_ASSERT(!memcmp(a->block_multiplier, b->block_multiplier, (size_t)a->wq.nparams * 4) &&
                          !memcmp(a->block_shift, b->block_shift, (size_t)a->wq.nparams * 4));
            }
        }
        enum { N = 24 };
        float x[N * 128];
        for (int i = 0; i < N * 128; i++) x[i] = 1.2f * qat_rng_normal(&rng);
        int32_t yi[N * 5], yf[N * 5], yp[N * 5];
        float hf[N * 5];
        qat_engine *ie = qat_engine_new(ctx, l, QAT_ENGINE_INT, N), *fe = qat_engine_new(ctx, l, QAT_ENGINE_FAKE, N);
        qat_engine *he = qat_engine_new(ctx, l, QAT_ENGINE_HYBRID, N);
        CU_ASSERT_FATAL(ie && fe && he);
        CU_ASSERT_EQUAL(qat_engine_run(ie, x, N, NULL, yi), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, NULL, yf), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run(he, x, N, hf, NULL), QAT_OK);
        int same = 0, far = 0;
        for (int i = 0; i < N * 5; i++) same += yi[i] == yf[i], far += abs(yi[i] - yf[i]) > 2;
        if (same < N * 5 * 85 / 100 || far) printf("\n  %s: int = fake on %d of %d, %d far\n", cases[c].what, same, N * 5, far);
        CU_ASSERT(same >= N * 5 * 85 / 100);
        CU_ASSERT_EQUAL(far, 0);
        if (have_numpy) {
            memset(yp, 0, sizeof yp);
            CU_ASSERT(numpy_reader(path, x, N, 128, yp, 5));
            if (memcmp(yi, yp, sizeof yi)) printf("\n  %s: the numpy reader differs\n", cases[c].what);
            CU_ASSERT_EQUAL(memcmp(yi, yp, sizeof yi), 0);
        }
        qat_engine_free(ie), qat_engine_free(fe), qat_engine_free(he);
        qat_ctx_free(ctx);
    }
}

/* ---- files that lie -------------------------------------------------------------- */

static void copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    int ch;
    while (a && b && (ch = fgetc(a)) != EOF) fputc(ch, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

static void expect_refused(const char *path, qat_status st, const char *phrase) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    qat_status got = qat_qmodel_load(ctx, path, q);
    if (got != st) printf("\n  status %d, want %d: %s\n", (int)got, (int)st, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(got, st);
    if (!strstr(qat_ctx_error(ctx), phrase)) printf("\n  message: %s (want \"%s\")\n", qat_ctx_error(ctx), phrase);
    CU_ASSERT(strstr(qat_ctx_error(ctx), phrase) != NULL);
    qat_ctx_free(ctx);
}

/* Writes n bytes over dataset name (the same type and size). */
static void overwrite(const char *path, const char *name, hid_t mem, const void *data) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT);
    CU_ASSERT(d >= 0 && H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d), H5Fclose(f);
}

static void set_attr(const char *path, const char *obj, const char *name, const long long *v, size_t n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT(H5LTset_attribute_long_long(f, obj, name, v, n) >= 0);
    H5Fclose(f);
}

/* A 4-bit sub-channel program (packed weights, ragged blocks) and copies
 * of its file with one thing wrong each: refused, with the reason. */
static void test_lying_files(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    one_linear(ctx, &p, 3, 7, (int64_t[]){1, 3}, 4, ap(0.1f, 2), ap(0.2f, -3)); /* 7 = 3 + 3 + 1: 21 weights, 11 bytes */
    qat_qop *op = &p.op;
    for (int i = 0; i < 21; i++) op->weight[i] = i % 15 - 7;
    for (int64_t j = 0; j < op->wq.nparams; j++) op->wq.scale[j] = 0.01f * (float)(j + 1);
    double b[3] = {0.3, -0.2, 0.1};
    char why[200];
    CU_ASSERT_FATAL(qat__sc_accumulation(op, &p.t[0].q, 0.2f, b, why, sizeof why));
    char good[300], bad[300];
    path_of(good, sizeof good, "lie-good.qat.h5");
    path_of(bad, sizeof bad, "lie.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, good), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, good, l), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(l->ops[0].weight, op->weight, 21 * sizeof(int32_t)), 0);
    /* the packed bytes: weight i at bits 4·(i % 2) of byte i / 2, two's complement */
    uint8_t packed[11];
    hid_t f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "ops/0/weight", H5P_DEFAULT);
    CU_ASSERT(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, packed) >= 0);
    H5Dclose(d), H5Fclose(f);
    CU_ASSERT_EQUAL(packed[0], (uint8_t)((-7 & 15) | (-6 & 15) << 4)); /* weights 0, 1: -7, -6 */
    CU_ASSERT_EQUAL(packed[10] >> 4, 0);                                /* past weight 20: zero */
    /* an unused bit set */
    uint8_t mod[11];
    memcpy(mod, packed, sizeof mod);
    mod[10] |= 0x10;
    copy_file(good, bad), overwrite(bad, "ops/0/weight", H5T_NATIVE_UINT8, mod);
    expect_refused(bad, QAT_ERR_FORMAT, "bits set past the last weight");
    /* a packed -8 in a narrow [-7, 7] type */
    memcpy(mod, packed, sizeof mod);
    mod[3] = (uint8_t)((mod[3] & 0xF0) | 8);
    copy_file(good, bad), overwrite(bad, "ops/0/weight", H5T_NATIVE_UINT8, mod);
    expect_refused(bad, QAT_ERR_FORMAT, "weight integer -8 (element 6) outside [-7, 7]");
    /* blocks that do not fit, a type shape that does not hold the weight, a wrong packing */
    copy_file(good, bad), set_attr(bad, "ops/0/weight", "block_sizes", (long long[]){1, 8}, 2);
    expect_refused(bad, QAT_ERR_FORMAT, "block_sizes do not fit");
    copy_file(good, bad), set_attr(bad, "ops/0/weight", "quantized_shape", (long long[]){7, 3}, 2);
    expect_refused(bad, QAT_ERR_SHAPE, "quantized_shape does not hold the weight's elements");
    copy_file(good, bad), set_attr(bad, "ops/0/weight", "packed_bits", (long long[]){2}, 1);
    expect_refused(bad, QAT_ERR_FORMAT, "4-bit weights packed 4 to a byte");
    /* a scale the MLIR text does not say */
    float sc[9];
    memcpy(sc, op->wq.scale, sizeof sc);
    sc[4] *= 2;
    copy_file(good, bad), overwrite(bad, "ops/0/weight_scale", H5T_NATIVE_FLOAT, sc);
    expect_refused(bad, QAT_ERR_FORMAT, "weight_mlir does not spell the type");
    /* a bias too large for the row's int32 sums */
    int32_t bias[3] = {op->bias[0], INT32_MAX - 5, op->bias[2]};
    copy_file(good, bad), overwrite(bad, "ops/0/bias", H5T_NATIVE_INT32, bias);
    expect_refused(bad, QAT_ERR_FORMAT, "its sums could overflow: row 1");
    /* an output multiplier out of range */
    int32_t mult[3] = {op->multiplier[0], 12, op->multiplier[2]};
    copy_file(good, bad), overwrite(bad, "ops/0/multiplier", H5T_NATIVE_INT32, mult);
    expect_refused(bad, QAT_ERR_FORMAT, "multiplier 12");
    qat_ctx_free(ctx);
}


/* ---- compact block scales -------------------------------------------------------- */

/* qat_qtype_compact_scales by hand. 4 bits (Q = 15), one row of block
 * scales {1.2, s_r, 3·s_r, 0.5, 1e-6} (float32): max/15 = 0.0800000032 has
 * the 16-bit mantissa 41943.04, rounded UP to 41944 (to nearest it would
 * be 41943, below max/15: the largest block would need q = 16), so
 * s_r = 41944·2^-19 = 0.0800018310546875. Then q = ceil(s_j / s_r):
 * 1.2000000477 / s_r = 14.9997 -> 15 (= Q); s_r itself -> 1 and 3·s_r
 * -> 3 exactly (not 2 or 4: the quotient is an integer); 0.5 -> 6.2499
 * -> 7; 1e-6 -> 1 (the least). 8 bits (Q = 255), {1, 0.5}: 1/255 has the
 * mantissa 32896.502 -> 32897, s_r = 32897·2^-23; q = {255, 128}
 * (0.5 / s_r = 127.4996). */
static void test_compact_derivation(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtype q;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &q, 4, true, true, 2, (int64_t[]){2, 5}, (int64_t[]){1, 1}, true),
                          QAT_OK);
    const float sr = 41944.0f / 524288.0f;
    const float in[10] = {1.2f, sr, 3 * sr, 0.5f, 1e-6f, 1.2f, sr, 3 * sr, 0.5f, 1e-6f};
    memcpy(q.scale, in, sizeof in);
    float rs[2];
    int32_t sub[10];
    qat_qtype_compact_scales(&q, 4, rs, sub);
    CU_ASSERT_EQUAL(rs[0], sr);
    CU_ASSERT_EQUAL(rs[1], sr);
    const int32_t want[5] = {15, 1, 3, 7, 1};
    for (int j = 0; j < 10; j++) {
        CU_ASSERT_EQUAL(sub[j], want[j % 5]);
        CU_ASSERT_EQUAL(q.scale[j], sr * (float)want[j % 5]);
        CU_ASSERT((double)q.scale[j] == (double)sr * want[j % 5]); /* exact in float32 */
        CU_ASSERT(q.scale[j] >= in[j]);                            /* no block clips more than with its own */
    }
    /* idempotent: the derived scales derive themselves */
    float again[10];
    memcpy(again, q.scale, sizeof again);
    int32_t sub2[10];
    qat_qtype_compact_scales(&q, 4, rs, sub2);
    CU_ASSERT(!memcmp(again, q.scale, sizeof again) && !memcmp(sub, sub2, sizeof sub));
    CU_ASSERT_EQUAL(rs[0], sr);
    /* 8 bits */
    qat_qtype q8;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &q8, 4, true, true, 2, (int64_t[]){1, 2}, (int64_t[]){1, 1}, true),
                          QAT_OK);
    q8.scale[0] = 1.0f, q8.scale[1] = 0.5f;
    qat_qtype_compact_scales(&q8, 8, rs, sub);
    CU_ASSERT_EQUAL(rs[0], 32897.0f / 8388608.0f);
    CU_ASSERT(sub[0] == 255 && sub[1] == 128);
    /* random rows: every property at every width */
    qat_rng rng;
    qat_rng_seed(&rng, 77);
    qat_qtype qr;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &qr, 4, true, true, 2, (int64_t[]){50, 13}, (int64_t[]){1, 1}, true),
                          QAT_OK);
    float *orig = malloc(650 * sizeof *orig), rows[50];
    int32_t *sq = malloc(650 * sizeof *sq);
    for (int bits = 4; bits <= 8; bits++) {
        for (int i = 0; i < 650; i++) orig[i] = qr.scale[i] = (float)ldexp(1.0 + qat_rng_uniform(&rng), -(int)(qat_rng_uniform(&rng) * 12) - 3);
        qat_qtype_compact_scales(&qr, bits, rows, sq);
        for (int r = 0; r < 50; r++) {
            int32_t top = 0;
            uint32_t u;
            memcpy(&u, &rows[r], sizeof u);
            CU_ASSERT_EQUAL(u & 0xFF, 0); /* at most 16 significant bits */
            for (int j = 0; j < 13; j++) {
                int i = r * 13 + j;
                top = sq[i] > top ? sq[i] : top;
                CU_ASSERT(sq[i] >= 1 && sq[i] <= (1 << bits) - 1);
                CU_ASSERT((double)qr.scale[i] == (double)rows[r] * sq[i] && qr.scale[i] >= orig[i]);
                CU_ASSERT(sq[i] == 1 || (double)(sq[i] - 1) * rows[r] < (double)orig[i]); /* the least such q */
            }
            CU_ASSERT_EQUAL(top, (1 << bits) - 1);
        }
    }
    free(orig), free(sq);
    /* configurations the compact form cannot take are refused, saying why */
    qat_model *m = qat_model_new(ctx);
    qat_model_set_input_shape(m, 1, (int64_t[]){8});
    CU_ASSERT_FATAL(qat_layer_linear(m, "fc", qat_model_input(m), 8, 3, true) > 0);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    static const struct { int bits, wbits; qat_granularity g; bool lsq; const char *phrase; } bad[] = {
        {3, 4, QAT_GRAN_BLOCK, false, "0 (a float scale per block) or 4..8"},
        {9, 4, QAT_GRAN_BLOCK, false, "0 (a float scale per block) or 4..8"},
        {4, 4, QAT_GRAN_CHANNEL, false, "need sub-channel weights"},
        {4, 12, QAT_GRAN_BLOCK, false, "at most 8 bits"},
        {4, 4, QAT_GRAN_BLOCK, true, "choose one"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qat_prepare_config c = qat_prepare_defaults();
        c.block_scale_bits = bad[i].bits, c.wbits = bad[i].wbits, c.wgran = bad[i].g, c.block = 4, c.lsq = bad[i].lsq;
        qat_ctx_clear_error(ctx);
        CU_ASSERT_EQUAL(qat_prepare(m, &c), QAT_ERR_ARG);
        CU_ASSERT(strstr(qat_ctx_error(ctx), bad[i].phrase) != NULL);
    }
    qat_ctx_free(ctx);
}

/* A compact op by hand: input [4] at s_x 0.5, zp 0, x = (2, -1, 1, 0);
 * fc [2, 4] in blocks of 2, 4-bit sub-scales, output s_y 2^-6, zp 0:
 *   row 0: s_r 2^-6, q (5, 2), w (3, -2 | 1, 7), bias 3, s_acc = 0.5·2^-6 = 2^-7:
 *     P0 = 2·3 + (-1)(-2) = 8, P1 = 1·1 = 1: T = 3 + 8·5 + 1·2 = 45;
 *     M = 2^-7 / 2^-6 = 1/2 (m 2^30, shift 0): SRDHM(45) = (45·2^30 + 2^30) / 2^31 = 23
 *   row 1: s_r 2^-7, q (15, 1), w (-7, 7 | 4, -4), bias -5, s_acc 2^-8:
 *     P0 = -14 - 7 = -21, P1 = 4: T = -5 - 315 + 4 = -316;
 *     M = 1/4 (m 2^30, shift -1): SRDHM(-316) = -158 (-158.5 toward zero), -158 / 2 = -79
 * (the real values: 45·2^-7 / 2^-6 = 22.5 -> 23, half away from zero; -316·2^-8 / 2^-6 = -79). */
static void compact_program(qat_ctx *ctx, one_op *p) {
    one_linear(ctx, p, 2, 4, (int64_t[]){1, 2}, 8, ap(0.5f, 0), ap(1.0f / 64, 0));
    qat_qop *op = &p->op;
    const int32_t w[8] = {3, -2, 1, 7, -7, 7, 4, -4}, sub[4] = {5, 2, 15, 1};
    memcpy(op->weight, w, sizeof w);
    op->block_multiplier = op->block_shift = NULL;
    op->sub_bits = 4;
    op->row_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof(float));
    op->subscale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 4 * sizeof(int32_t));
    op->row_scale[0] = 1.0f / 64, op->row_scale[1] = 1.0f / 128;
    memcpy(op->subscale, sub, sizeof sub);
    for (int i = 0; i < 4; i++) op->wq.scale[i] = op->row_scale[i / 2] * (float)sub[i];
    op->bias[0] = 3, op->bias[1] = -5;
    op->bias_scale[0] = 1.0f / 128, op->bias_scale[1] = 1.0f / 256;
    set_mult(&op->multiplier[0], &op->shift[0], 0.5);
    set_mult(&op->multiplier[1], &op->shift[1], 0.25);
}

static void test_compact_hand_computed(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    compact_program(ctx, &p);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    float x[4] = {1.0f, -0.5f, 0.5f, 0.0f};
    int32_t y[2];
    CU_ASSERT_FATAL(run_int(ctx, &p.q, x, 1, y));
    CU_ASSERT_EQUAL(y[0], 23);
    CU_ASSERT_EQUAL(y[1], -79);
    int16_t col[4 * 16] = {0};
    col[0] = 2, col[16] = -1, col[32] = 1, col[48] = 0;
    for (int i = 0; i < 3; i++) {
        int8_t out[2 * 16];
        if (!run_kernel(i, &p.op, col, 1, 16, 0, false, out)) continue;
        CU_ASSERT(out[0] == 23 && out[1] == -79);
    }
    /* through the file: the row scales and sub-scales, the rest derived to the same numbers */
    char path[300];
    path_of(path, sizeof path, "compact.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, path), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, l), QAT_OK);
    const qat_qop *lo = &l->ops[0];
    CU_ASSERT(lo->sub_bits == 4 && lo->subscale && !lo->block_multiplier);
    CU_ASSERT(!memcmp(lo->subscale, p.op.subscale, 4 * sizeof(int32_t)) &&
              !memcmp(lo->row_scale, p.op.row_scale, 2 * sizeof(float)));
    CU_ASSERT(!memcmp(lo->bias_scale, p.op.bias_scale, 2 * sizeof(float)) &&
              !memcmp(lo->multiplier, p.op.multiplier, 2 * sizeof(int32_t)) &&
              !memcmp(lo->shift, p.op.shift, 2 * sizeof(int32_t)) && !memcmp(lo->wq.scale, p.op.wq.scale, 4 * sizeof(float)));
    CU_ASSERT_FATAL(run_int(ctx, l, x, 1, y));
    CU_ASSERT(y[0] == 23 && y[1] == -79);
    /* the packed sub-scales: two to a byte, the first in the low bits */
    uint8_t b[2];
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "ops/0/weight_subscale", H5P_DEFAULT);
    CU_ASSERT(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) >= 0);
    H5Dclose(d), H5Fclose(f);
    CU_ASSERT(b[0] == (5 | 2 << 4) && b[1] == (15 | 1 << 4));
    /* an output multiplier the rule would not derive is refused at save, naming the op */
    p.op.multiplier[1] += 1;
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, &p.q, path), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0 (linear fc)") != NULL);
    qat_ctx_free(ctx);
}

/* The bound |bias| + X·Σ_j q_j·W_j <= 2^31 - 1, at its edge: input zp
 * -128 (X = 255), fc [2, 256] in blocks of 8 (J = 32), every weight 127
 * (W_j = 1016), every sub-scale 255: X·Σ q·W = 255·32·1016·255 =
 * 2114092800, so |bias| may be 33390847 and not one more; at x = 127
 * every P_j·q_j is 1016·255·255 and T = bias + 2114092800 reaches
 * exactly 2^31 - 1 (row 0) and -(2^31 - 1) (row 1, weights -127). A
 * bound without the sub-scales, or without the bias, would let through a
 * program that overflows. */
static void test_compact_bound(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    one_linear(ctx, &p, 2, 256, (int64_t[]){1, 8}, 8, ap(1.0f, -128), ap(1.0f, 0));
    qat_qop *op = &p.op;
    op->block_multiplier = op->block_shift = NULL;
    op->sub_bits = 8;
    op->row_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof(float));
    op->subscale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 64 * sizeof(int32_t));
    op->row_scale[0] = op->row_scale[1] = 1.0f / 256;
    for (int i = 0; i < 64; i++) op->subscale[i] = 255, op->wq.scale[i] = 255.0f / 256;
    for (int k = 0; k < 256; k++) op->weight[k] = 127, op->weight[256 + k] = -127;
    op->bias[0] = 33390847, op->bias[1] = -33390847;
    for (int o = 0; o < 2; o++) op->bias_scale[o] = 1.0f / 256, set_mult(&op->multiplier[o], &op->shift[o], 1.0 / (1 << 25));
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    /* T = ±(2^31 - 1); output M = 2^-25: 2147483647 / 2^25 = 63.99999997 -> 64 */
    float x[256];
    for (int k = 0; k < 256; k++) x[k] = 255.0f;
    int32_t y[2];
    CU_ASSERT_FATAL(run_int(ctx, &p.q, x, 1, y));
    CU_ASSERT(y[0] == 64 && y[1] == -64);
    op->bias[1] = -33390848;
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "row 1") != NULL);
    op->bias[1] = -33390847, op->bias[0] = 33390848;
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_ERR_FORMAT);
    if (!strstr(qat_ctx_error(ctx), "row 0")) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "row 0") != NULL);
    /* the same sums with one sub-scale one less leave room for 255·1016 more bias */
    op->subscale[31] = 254, op->wq.scale[31] = 254.0f / 256;
    op->bias[0] = 33390847 + 255 * 1016;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_OK);
    op->bias[0] += 1;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &p.q), QAT_ERR_FORMAT);
    qat_ctx_free(ctx);
}

/* A compact file and copies of it with one thing wrong each. */
static void test_compact_lying_files(void) {
    qat_ctx *ctx = qat_ctx_new();
    one_op p;
    compact_program(ctx, &p);
    char good[300], bad[300];
    path_of(good, sizeof good, "compact-good.qat.h5");
    path_of(bad, sizeof bad, "compact-lie.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &p.q, good), QAT_OK);
    uint8_t b[2] = {5 | 0 << 4, 15 | 1 << 4}; /* a sub-scale 0 */
    copy_file(good, bad), overwrite(bad, "ops/0/weight_subscale", H5T_NATIVE_UINT8, b);
    expect_refused(bad, QAT_ERR_FORMAT, "sub-scale 1 is 0, outside [1, 15]");
    float rs[2] = {1.0f / 64, 0.1f}; /* 0.1f has 24 significant bits */
    copy_file(good, bad), overwrite(bad, "ops/0/weight_row_scale", H5T_NATIVE_FLOAT, rs);
    expect_refused(bad, QAT_ERR_FORMAT, "at most 16 significant bits");
    copy_file(good, bad), set_attr(bad, "ops/0/weight_subscale", "bits", (long long[]){9}, 1);
    expect_refused(bad, QAT_ERR_FORMAT, "bits");
    copy_file(good, bad), set_attr(bad, "ops/0/weight_subscale", "bits", (long long[]){5}, 1); /* 4 bytes wanted */
    expect_refused(bad, QAT_ERR_SHAPE, "weight_subscale has another shape");
    int32_t bias[2] = {3, INT32_MIN + 1};
    copy_file(good, bad), overwrite(bad, "ops/0/bias", H5T_NATIVE_INT32, bias);
    expect_refused(bad, QAT_ERR_FORMAT, "its sums could overflow: row 1");
    { /* a derived dataset given too */
        hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
        copy_file(good, bad);
        H5Fclose(f);
        f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
        int32_t m[2] = {1 << 30, 1 << 30};
        CU_ASSERT(H5LTmake_dataset_int(f, "ops/0/multiplier", 1, (hsize_t[]){2}, m) >= 0);
        H5Fclose(f);
        expect_refused(bad, QAT_ERR_FORMAT, "a multiplier dataset");
    }
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "subchannel")) return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const qat_test_case cases[] = {
        {"hand-computed block conversions and sums (every kernel, through the file)", test_hand_computed},
        {"the largest partial sums the bounds allow run exactly; one more is refused", test_largest_partial_sums},
        {"accumulation scale: the largest G; the error bound holds for scales 2^24 apart",
         test_accumulation_and_error_bound},
        {"every SIMD kernel equals the portable one", test_kernels_agree},
        {"export -> load -> run, blocks on each axis (int = fake, numpy reader = int)", test_export_load_run_every_axis},
        {"files that lie about sub-channel weights are refused", test_lying_files},
        {"compact block scales: the row scale rounded up, the least sub-scales, by hand", test_compact_derivation},
        {"compact block scales: hand-computed exact sums (every kernel, through the file)", test_compact_hand_computed},
        {"compact block scales: the int32 bound at its edge", test_compact_bound},
        {"files that lie about compact block scales are refused", test_compact_lying_files},
        {NULL, NULL},
    };
    int rc = qat_test_main("subchannel", cases, argc, argv);
    qat_test_rmdir(dir);
    return rc;
}
