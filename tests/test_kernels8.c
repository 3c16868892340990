/* The runtime's kernels against the portable ones, integer for integer:
 * every kernel level this CPU has runs the same programs as the portable
 * level (random single ops with edge shapes, and every reference model),
 * and the int8 path's pieces (the GEMM in every tile shape, the
 * vectorised requantization and TFLite ADD) against the portable code on
 * random and extreme values. A level this CPU lacks is skipped, saying so. */
#include <stdlib.h>

#include "internals.h"
#include "qat/export.h"
#include "qat/layers.h"
#include "qat/optim.h"
#include "model_util.h"
#include "test_util.h"

static int32_t rnd(qat_rng *r, int32_t lo, int32_t hi) { return lo + (int32_t)qat_rng_below(r, (uint32_t)(hi - lo + 1)); }

/* ---- programs, run at every level ----------------------------------------------------- */

/* Runs q on n random input samples at every level this CPU has; every
 * level's whole arena (every tensor's final bytes) must equal the portable
 * level's. Returns the number of levels compared. */
static int run_levels(const qat_qmodel *q, int max_batch, int n, qat_rng *rng, const char *what, int fill) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, max_batch, off, &plan, msg, sizeof msg);
    if (st != QAT_OK) printf("\n  %s: %s\n", what, msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    size_t cb = (size_t)plan.const_bytes + 64, ab = (size_t)plan.arena_bytes + 64, sb = (size_t)plan.scratch_bytes + 64;
    uint8_t *consts = aligned_alloc(64, (cb + 63) / 64 * 64), *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
    int8_t *ref = aligned_alloc(64, (ab + 63) / 64 * 64), *arena = aligned_alloc(64, (ab + 63) / 64 * 64);
    memset(ref, 0, ab), memset(scratch, 0x5A, sb);
    const qat_qtensor *in = &q->tensors[q->input];
    int8_t *x = ref + plan.offset[q->input];
    for (int64_t i = 0; i < n * qat_qtensor_numel(in); i++) x[i] = (int8_t)(fill > 127 ? rnd(rng, in->q.qmin, in->q.qmax) : fill);
    memcpy(arena, ref, ab);
    memset(consts, 0x5A, cb); /* nor on constant bytes prepare did not write (below: another pattern) */
    qat__runtime_prepare_level(q, &plan, consts, QAT_LEVEL_PORTABLE);
    CU_ASSERT_EQUAL(qat__runtime_run_level(q, &plan, consts, ref, scratch, n, QAT_LEVEL_PORTABLE), QAT_OK);
    int levels = 0;
    for (int l = QAT_LEVEL_AVX2; l <= (int)qat__cpu_level(); l++, levels++) {
        int8_t *a = malloc(ab);
        memcpy(a, arena, ab);
        memset(scratch, 0xA5, sb); /* nothing may depend on what scratch held */
        memset(consts, 0xA5, cb);
        qat__runtime_prepare_level(q, &plan, consts, (qat__level)l);
        CU_ASSERT_EQUAL(qat__runtime_run_level(q, &plan, consts, a, scratch, n, (qat__level)l), QAT_OK);
        int bad = 0;
        for (size_t i = 0; i < ab; i++) bad += a[i] != ref[i]; /* and the 64 bytes past the arena: nothing writes there */
        if (bad) printf("\n  %s: level %s differs from the portable one in %d bytes\n", what, qat__level_name((qat__level)l), bad);
        CU_ASSERT_EQUAL(bad, 0);
        free(a);
    }
    free(consts), free(scratch), free(ref), free(arena), free(off);
    return levels;
}

static int run_every_level(const qat_qmodel *q, int max_batch, int n, qat_rng *rng, const char *what) {
    return run_levels(q, max_batch, n, rng, what, 128); /* 128: random inputs */
}

static qat_aparams act8(qat_rng *r) {
    return (qat_aparams){.scale = 0.05f, .zero_point = rnd(r, -128, 127), .bits = 8, .is_signed = true, .qmin = -128,
                         .qmax = 127};
}

static void name_tensor(qat_qtensor *t, const char *name, int rank, const int64_t *shape, qat_aparams q) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rank = rank;
    memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
    t->q = q;
}

/* Weights, bias and requantization of a linear/conv2d op of O outputs
 * and n weights: wmode 0 symmetric 8-bit (the int8 path), 1 unsigned 8-bit
 * with zero points near 128 (w - zp outside int8 now and then: the int16
 * path), 2 symmetric 4-bit, 3 symmetric 7-bit (the AVX2 direct
 * convolution's byte form), 4 the same at its extremes only (weights -64
 * or 63 and, with the right inputs, every pair sum at its largest), 5
 * symmetric 8-bit at its extremes (the AVX-VNNI level's byte form), 6
 * symmetric 8-bit with a left shift (shift 1) on every even output channel
 * and none on the odd ones (kernels that take such a channel apart). */
static void fill_weights(qat_ctx *ctx, qat_qop *op, int rank, const int64_t *wshape, int wmode, qat_rng *r) {
    int64_t O = wshape[0], n = 1;
    for (int d = 0; d < rank; d++) n *= wshape[d];
    int bits = wmode == 2 ? 4 : wmode == 3 || wmode == 4 ? 7 : 8;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_axis(ctx, &op->wq, bits, wmode != 1, wmode != 1, rank, wshape, 0), QAT_OK);
    op->weight = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n * sizeof(int32_t));
    op->bias = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->bias_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(float));
    op->multiplier = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->shift = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->n_mult = (int)O;
    for (int64_t o = 0; o < O; o++) {
        op->wq.scale[o] = 0.01f;
        op->wq.zero_point[o] = wmode == 1 ? rnd(r, 110, 145) : 0;
        op->bias[o] = rnd(r, -30000, 30000);
        op->bias_scale[o] = 0.0005f;
        bool zero = qat_rng_below(r, 16) == 0; /* a zero multiplier is legal */
        op->multiplier[o] = zero ? 0 : (int32_t)((1u << 30) + qat_rng_below(r, 1u << 30));
        op->shift[o] = zero ? 0 : rnd(r, -14, 2); /* positive: the saturating left shift */
        if (wmode == 6) {
            op->multiplier[o] = (int32_t)(1u << 30), op->shift[o] = o % 2 ? rnd(r, -14, 0) : 1;
            continue;
        }
        if (!zero && qat_rng_below(r, 16) == 0) { /* saturated: v near INT32_MIN/MAX, where zp + v wraps in 32 bits */
            op->bias[o] = qat_rng_below(r, 2) ? INT32_MAX / 2 : -(INT32_MAX / 2);
            op->multiplier[o] = INT32_MAX, op->shift[o] = 2;
        }
    }
    for (int64_t i = 0; i < n; i++)
        op->weight[i] =
            wmode == 4 || wmode == 5 ? (qat_rng_below(r, 2) ? op->wq.qmin : op->wq.qmax) : rnd(r, op->wq.qmin, op->wq.qmax);
}

/* input [C, H, W] -> conv2d -> flatten (the output must be a vector). */
typedef struct {
    int C, H, W, O, kh, kw, sh, sw, ph, pw, groups, wmode;
} conv_case;

static void conv_program(qat_ctx *ctx, const conv_case *k, qat_qmodel *q, qat_rng *r) {
    memset(q, 0, sizeof *q);
    q->n_tensors = 3, q->n_ops = 2, q->input = 0, q->output = 2, q->config = "";
    q->tensors = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 3 * sizeof *q->tensors);
    q->ops = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof *q->ops);
    memset(q->ops, 0, 2 * sizeof *q->ops);
    int OH = (k->H + 2 * k->ph - k->kh) / k->sh + 1, OW = (k->W + 2 * k->pw - k->kw) / k->sw + 1;
    qat_aparams xa = act8(r), ya = act8(r);
    name_tensor(&q->tensors[0], "input", 3, (int64_t[]){k->C, k->H, k->W}, xa);
    name_tensor(&q->tensors[1], "conv", 3, (int64_t[]){k->O, OH, OW}, ya);
    name_tensor(&q->tensors[2], "flat", 1, (int64_t[]){(int64_t)k->O * OH * OW}, ya);
    qat_qop *c = &q->ops[0], *f = &q->ops[1];
    c->kind = QAT_QOP_CONV2D, snprintf(c->name, sizeof c->name, "conv");
    c->n_inputs = 1, c->inputs[0] = 0, c->output = 1;
    c->kh = k->kh, c->kw = k->kw, c->stride_h = k->sh, c->stride_w = k->sw, c->pad_h = k->ph, c->pad_w = k->pw;
    c->groups = k->groups;
    fill_weights(ctx, c, 4, (int64_t[]){k->O, k->C / k->groups, k->kh, k->kw}, k->wmode, r);
    c->act_min = rnd(r, -128, 0), c->act_max = rnd(r, 0, 127);
    if (qat_rng_below(r, 2)) { /* a fused ReLU: the clamp starts at the zero point */
        c->act = QAT_ACT_RELU, c->act_min = ya.zero_point;
        if (c->act_max < c->act_min) c->act_max = c->act_min;
    }
    f->kind = QAT_QOP_FLATTEN, snprintf(f->name, sizeof f->name, "flat");
    f->n_inputs = 1, f->inputs[0] = 1, f->output = 2, f->act_min = -128, f->act_max = 127;
}

/* Convolutions of every kind the int8 path has (dense4 implicit and
 * compact, generic, grouped, depthwise, strided, padded, non-square),
 * with odd sizes: one output row, one output channel, K not a multiple of
 * 4, positions not a multiple of 16, several passes of samples. The
 * convolutions with one group, an even channel count and a horizontal
 * stride of 1 or 2 (or one channel at horizontal stride 1, or 2 over an
 * even padded width) run the AVX2 level's direct convolution. */
static void test_conv_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    static const conv_case cases[] = {
        {1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 0},   {16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 0},
        {16, 28, 28, 32, 3, 3, 2, 2, 1, 1, 1, 0},  {32, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 0},
        {16, 14, 14, 32, 1, 1, 2, 2, 0, 0, 1, 0},  {64, 15, 14, 64, 1, 1, 1, 1, 0, 0, 1, 0},
        {64, 15, 14, 64, 3, 3, 1, 1, 1, 1, 64, 0}, {1, 28, 28, 64, 10, 4, 2, 2, 5, 1, 1, 0},
        {8, 9, 11, 8, 3, 3, 2, 2, 1, 1, 8, 0},     {6, 12, 12, 16, 5, 5, 1, 1, 0, 0, 1, 0},
        {4, 5, 6, 3, 2, 3, 1, 2, 1, 0, 1, 0},      {3, 4, 4, 17, 3, 3, 1, 1, 1, 1, 1, 0},
        {8, 10, 9, 8, 1, 1, 1, 1, 0, 0, 2, 0},     {4, 6, 7, 8, 3, 3, 1, 3, 1, 1, 4, 0},
        {8, 2, 2, 33, 1, 1, 1, 1, 0, 0, 1, 0},     {12, 3, 1, 5, 3, 1, 1, 1, 1, 0, 1, 0},
        {8, 9, 9, 8, 3, 3, 1, 5, 1, 1, 8, 0},      {16, 10, 10, 20, 3, 3, 1, 1, 1, 1, 1, 1},
        {16, 10, 10, 20, 3, 3, 1, 1, 1, 1, 1, 2},  {4, 8, 8, 4, 7, 7, 1, 1, 3, 3, 4, 0},
        {5, 7, 7, 10, 3, 3, 3, 3, 1, 1, 5, 0},     {8, 16, 16, 8, 2, 2, 2, 2, 0, 0, 1, 0},
        /* the AVX2 level's direct convolution: a row of 16 + a tail of 8 or
         * fewer (a 3x3 of stride 1 with fewer than 8 channels: 8 or more take
         * Winograd, test_winograd_every_level), a padded 1x1 (not flattened),
         * 4 output rows (one 4 x 16 block) */
        {6, 6, 20, 12, 3, 3, 1, 1, 1, 1, 1, 0},    {8, 5, 9, 8, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 9, 18, 4, 3, 3, 1, 1, 1, 1, 1, 2},     {6, 9, 10, 8, 3, 3, 2, 1, 1, 1, 1, 0},
        {8, 9, 11, 8, 3, 3, 2, 2, 1, 1, 1, 1}, /* stride 2 over an odd padded width: phases of unequal length */
        /* depthwise tap pairs: a multiplier of 2 (one tap-pair plane, two outputs), an even kernel width */
        {4, 10, 12, 8, 3, 3, 1, 1, 1, 1, 4, 0},    {6, 9, 9, 6, 2, 4, 1, 1, 0, 1, 6, 1},
        /* ... and the first output of each input channel taken apart (a left shift), the second not */
        {4, 10, 12, 8, 3, 3, 1, 1, 1, 1, 4, 6},
        /* depthwise rows of 4 and 8 taps (every byte of the AVX-VNNI level's quads weighted); input rows
         * under 8 bytes and of exactly 16 (the byte plane's row copies) */
        {8, 9, 11, 8, 3, 4, 1, 1, 1, 1, 8, 0},     {4, 6, 12, 4, 2, 8, 1, 1, 0, 3, 4, 5},
        {8, 12, 6, 8, 3, 3, 1, 1, 1, 1, 8, 5},     {8, 5, 16, 8, 3, 3, 1, 1, 1, 1, 8, 5},
        /* depthwise rows of 16 or more (16 + an overlapping tail), at strides 1 and 2 */
        {6, 5, 20, 6, 3, 3, 1, 1, 1, 1, 6, 0},     {4, 6, 34, 4, 3, 3, 2, 2, 1, 1, 4, 0},
        /* one input channel at horizontal stride 2: the direct convolution's tap pairs (odd kw: a
         * zero weight past the row; stride 1 down; unsigned weights, w - zp beyond int8) */
        {1, 9, 12, 5, 3, 3, 2, 2, 1, 1, 1, 0},     {1, 11, 10, 12, 5, 5, 1, 2, 2, 2, 1, 1},
        {1, 8, 40, 8, 3, 3, 2, 2, 1, 1, 1, 0}, /* rows of more than one block */
        /* ... a 1x1 of stride 2 there (not the subsampled copy: one channel), small and large */
        {1, 8, 10, 4, 1, 1, 2, 2, 0, 0, 1, 0},     {1, 30, 30, 4, 1, 1, 2, 2, 0, 0, 1, 0},
        /* a 1x1 of stride 2 over odd sizes: the even rows' even columns copied out first */
        {6, 9, 7, 10, 1, 1, 2, 2, 0, 0, 1, 0},     {8, 9, 7, 12, 1, 1, 2, 2, 0, 0, 1, 3},
        {8, 3, 3, 8, 1, 1, 2, 2, 0, 0, 1, 3}, /* 4 pixels */
        /* pointwise over maps of 1, 4 and 9 positions: several samples' positions a row (qat__direct_batch),
         * pairs, 7-bit bytes and 8-bit bytes */
        {16, 1, 1, 24, 1, 1, 1, 1, 0, 0, 1, 0},    {12, 3, 3, 20, 1, 1, 1, 1, 0, 0, 1, 3},
        {32, 2, 2, 16, 1, 1, 1, 1, 0, 0, 1, 5},
        /* channels of fewer than 16 outputs: a row's 16-byte copy reaches past the next channel */
        {6, 8, 9, 6, 5, 5, 2, 2, 2, 0, 6, 0},
        /* the direct convolution's byte form: 7-bit weights, C % 4 == 0 */
        {16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 3},  {32, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 3},
        {16, 14, 14, 32, 1, 1, 2, 2, 0, 0, 1, 3},  {8, 9, 11, 8, 3, 3, 2, 2, 1, 1, 1, 3},
        {12, 5, 9, 8, 1, 1, 1, 1, 1, 1, 1, 3},     {64, 6, 6, 8, 1, 1, 1, 1, 0, 0, 1, 3},
    };
    qat_rng rng;
    qat_rng_seed(&rng, 21);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, &cases[t], &q, &rng);
        char what[64];
        snprintf(what, sizeof what, "conv case %zu", t);
        int B = t % 3 == 0 ? 40 : 7, n = t % 2 ? B : B - 2;
        run_every_level(&q, B, n, &rng, what);
        qat_ctx_free(ctx);
    }
    /* pointwise over small maps with several groups of samples a chunk, the last one short
     * (qat__direct_batch: 8 samples of 9 positions a group) */
    static const conv_case grouped[] = {{12, 3, 3, 20, 1, 1, 1, 1, 0, 0, 1, 0}, {16, 2, 2, 8, 1, 1, 1, 1, 0, 0, 1, 3}};
    for (size_t t = 0; t < sizeof grouped / sizeof *grouped; t++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, &grouped[t], &q, &rng);
        char what[64];
        snprintf(what, sizeof what, "grouped pointwise case %zu", t);
        run_levels(&q, 40, 38, &rng, what, 128);
        qat_ctx_free(ctx);
    }
    /* the byte forms at their extremes: weights at both ends of 7 and 8
     * bits, inputs all at one end (every byte 0 or 255 after the + 128), so
     * that vpmaddubsw's int16 pair sums reach their largest magnitudes and
     * vpdpbusd's int32 sums theirs */
    static const conv_case extreme[] = {{16, 9, 18, 8, 3, 3, 2, 1, 1, 1, 1, 4}, {8, 7, 7, 16, 1, 1, 1, 1, 0, 0, 1, 4},
                                        {16, 9, 18, 8, 3, 3, 1, 1, 1, 1, 1, 5}, {64, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 5}};
    for (size_t t = 0; t < 2 * sizeof extreme / sizeof *extreme; t++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, &extreme[t / 2], &q, &rng);
        char what[64];
        snprintf(what, sizeof what, "extreme byte-form case %zu", t);
        run_levels(&q, 4, 4, &rng, what, t % 2 ? 127 : -128);
        qat_ctx_free(ctx);
    }
    /* and random ones: any stride, padding (up to the window), window,
     * grouping and a tiny input, every path's edges */
    for (int t = 0; t < 60; t++) {
        conv_case k;
        k.C = rnd(&rng, 1, 9), k.H = rnd(&rng, 1, 13), k.W = rnd(&rng, 1, 13);
        k.kh = rnd(&rng, 1, 6), k.kw = rnd(&rng, 1, 6), k.sh = rnd(&rng, 1, 5), k.sw = rnd(&rng, 1, 5);
        k.ph = rnd(&rng, 0, k.kh - 1), k.pw = rnd(&rng, 0, k.kw - 1);
        if (k.H + 2 * k.ph < k.kh || k.W + 2 * k.pw < k.kw) continue;
        int g = rnd(&rng, 0, 2);
        k.groups = g == 0 ? 1 : g == 1 ? k.C : (k.C % 2 ? 1 : 2);
        k.O = k.groups * rnd(&rng, 1, k.groups == k.C ? 2 : 20), k.wmode = rnd(&rng, 0, 3);
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, &k, &q, &rng);
        char what[128];
        snprintf(what, sizeof what, "random conv C%d %dx%d O%d k%dx%d s%dx%d p%dx%d g%d", k.C, k.H, k.W, k.O, k.kh, k.kw,
                 k.sh, k.sw, k.ph, k.pw, k.groups);
        run_every_level(&q, 9, rnd(&rng, 1, 9), &rng, what);
        qat_ctx_free(ctx);
    }
}

/* How prepare at a level chose to run op 0 of q (qat__runtime_op_path). */
static const char *op0_path(const qat_qmodel *q, int max_batch, qat__level level) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, max_batch, off, &plan, msg, sizeof msg);
    if (st != QAT_OK) printf("\n  %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    uint8_t *consts = aligned_alloc(64, (size_t)qat__round_up(plan.const_bytes + 64, 64));
    qat__runtime_prepare_level(q, &plan, consts, level);
    const char *path = qat__runtime_op_path(&q->ops[0], consts + plan.const_offset[0]);
    free(consts), free(off);
    return path;
}

/* Depthwise convolutions of small maps, which run with the channels in
 * the lanes from the AVX2 level up (kernels_dw_lanes.c): channel counts
 * that are and are not multiples of 16; 1x1 to 4x4 outputs (and the
 * kernel's own forms for inputs of 1, 4 and whole 16s of pixels with
 * tails, outputs of 1, 4 and 16 positions); strides 1 and 2; windows of
 * an odd and an even number of taps; unsigned weights (w - zp beyond
 * int8); both roundings; the requantization vectorised (right shifts of
 * 0-3, where ties are frequent, and up to 31; zero multipliers, whose
 * shift is 0) and in scalar for blocks with a left shift. */
static void test_depthwise_lanes_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    static const conv_case cases[] = {
        {64, 2, 2, 64, 3, 3, 1, 1, 1, 1, 64, 0}, {40, 1, 1, 40, 3, 3, 1, 1, 1, 1, 40, 0},
        {24, 4, 4, 24, 3, 3, 2, 2, 1, 1, 24, 1}, {17, 3, 5, 17, 5, 5, 1, 1, 2, 2, 17, 0},
        {32, 2, 2, 32, 2, 2, 1, 1, 1, 1, 32, 6}, {16, 4, 4, 16, 1, 1, 1, 1, 0, 0, 16, 2},
        {48, 7, 7, 48, 3, 3, 2, 2, 1, 1, 48, 0}, {8, 3, 3, 8, 3, 3, 1, 1, 0, 0, 8, 1},
        {1024, 1, 1, 1024, 3, 3, 1, 1, 1, 1, 1024, 0}, {20, 2, 2, 20, 3, 3, 1, 1, 1, 1, 20, 0},
        {48, 2, 2, 48, 3, 3, 2, 2, 1, 1, 48, 1}, {32, 4, 4, 32, 3, 3, 1, 1, 1, 1, 32, 0},
        {36, 5, 7, 36, 3, 3, 2, 2, 1, 1, 36, 0},
    };
    qat_rng rng;
    qat_rng_seed(&rng, 33);
    for (size_t t = 0; t < 4 * sizeof cases / sizeof *cases; t++) {
        const conv_case *k = &cases[t / 4];
        bool single = t % 2, vector = t / 2 % 2;
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, k, &q, &rng);
        q.rounding = single ? QAT_ROUNDING_SINGLE : QAT_ROUNDING_DOUBLE;
        qat_qop *c = &q.ops[0];
        for (int o = 0; vector && k->wmode != 6 && o < k->O; o++) {
            bool zero = qat_rng_below(&rng, 16) == 0;
            c->multiplier[o] = zero ? 0 : (int32_t)((1u << 30) + qat_rng_below(&rng, 1u << 30));
            c->shift[o] = zero ? 0 : -(qat_rng_below(&rng, 2) ? rnd(&rng, 0, 3) : rnd(&rng, 0, 31));
        }
        char what[128];
        snprintf(what, sizeof what, "small depthwise C%d %dx%d k%dx%d s%d, %s rounding%s", k->C, k->H, k->W, k->kh, k->kw,
                 k->sh, single ? "single" : "double", vector ? ", right shifts" : "");
        const char *path = op0_path(&q, 5, QAT_LEVEL_AVX2);
        if (strcmp(path, "lanes") != 0) printf("\n  %s: the AVX2 level runs it as %s\n", what, path);
        CU_ASSERT_STRING_EQUAL(path, "lanes");
        CU_ASSERT(run_every_level(&q, 5, t % 3 ? 5 : 3, &rng, what) >= 1);
        qat_ctx_free(ctx);
    }
}

/* Run t of a table's case k (six runs a case): the program with the
 * rounding of t % 2 (single when odd), and the input fill run_levels
 * takes: random, every input -128, every input 127 (t / 2 % 3). what
 * names it (prefix, then the rounding and the fill). */
static int edge_run(qat_ctx *ctx, const conv_case *k, size_t t, qat_rng *rng, qat_qmodel *q, char *what, size_t n,
                    const char *prefix) {
    int edge = (int)(t / 2 % 3);
    conv_program(ctx, k, q, rng);
    q->rounding = t % 2 ? QAT_ROUNDING_SINGLE : QAT_ROUNDING_DOUBLE;
    snprintf(what, n, "%s, %s rounding%s", prefix, t % 2 ? "single" : "double", edge ? ", inputs at an end" : "");
    return edge == 0 ? 128 : edge == 1 ? -128 : 127;
}

/* One input channel in the direct convolution's tap quads (kernels.h),
 * from the AVX-VNNI level up and, with 7-bit weights, at AVX2 (else its
 * tap pairs, the int16 GEMM at stride 2 over an odd width): strides 1
 * and 2 (a padded width odd and even), vertical strides 1-3, kernel widths
 * 1-10 (a quad's zero weights past the row), rows of more than one block
 * and of more than the 64 pixels the quad plane is built in, rows of one
 * pixel; both roundings; weights and inputs at their extremes. */
static void test_tap_quads_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    bool vnni = qat__cpu_level() >= QAT_LEVEL_AVXVNNI; /* else (or capped) the AVX2 level's 7-bit quads only */
    static const conv_case cases[] = {
        {1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 0},  {1, 28, 28, 64, 10, 4, 2, 2, 5, 1, 1, 0},
        {1, 9, 12, 5, 3, 3, 2, 2, 1, 1, 1, 5},    {1, 11, 11, 12, 5, 5, 1, 2, 2, 2, 1, 0},
        {1, 7, 130, 8, 3, 7, 1, 1, 1, 3, 1, 3},   {1, 6, 150, 9, 2, 9, 1, 2, 0, 4, 1, 0},
        {1, 5, 5, 3, 1, 1, 1, 1, 0, 0, 1, 0},     {1, 4, 3, 20, 4, 8, 1, 1, 2, 3, 1, 5},
        {1, 13, 6, 17, 3, 2, 3, 1, 1, 1, 1, 0},   {1, 3, 1, 8, 3, 1, 1, 1, 1, 0, 1, 0},
        {1, 12, 40, 8, 3, 10, 2, 2, 1, 4, 1, 4},  {1, 10, 21, 6, 3, 3, 1, 1, 1, 1, 1, 3},
        /* a vertical stride above the window, padding as wide as the window, an odd padded width at
         * stride 2 in the AVX2 level's 7-bit quads, six taps a row */
        {1, 13, 9, 8, 2, 3, 3, 1, 0, 1, 1, 3},    {1, 9, 10, 4, 2, 2, 1, 1, 2, 2, 1, 3},
        {1, 9, 11, 6, 3, 5, 2, 2, 1, 1, 1, 3},    {1, 8, 20, 8, 3, 6, 1, 1, 1, 2, 1, 0},
    };
    qat_rng rng;
    qat_rng_seed(&rng, 34);
    for (size_t t = 0; t < 6 * sizeof cases / sizeof *cases; t++) {
        const conv_case *k = &cases[t / 6];
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        char name[96], what[160];
        snprintf(name, sizeof name, "one channel %dx%d k%dx%d s%dx%d p%dx%d w%d", k->H, k->W, k->kh, k->kw, k->sh, k->sw,
                 k->ph, k->pw, k->wmode);
        int fill = edge_run(ctx, k, t, &rng, &q, what, sizeof what, name);
        const char *at_vnni = vnni ? op0_path(&q, 5, QAT_LEVEL_AVXVNNI) : "vnni", *avx2 = op0_path(&q, 5, QAT_LEVEL_AVX2);
        bool bytes2 = true; /* weights within ±64: vpmaddubsw cannot saturate */
        for (int64_t i = 0; i < (int64_t)k->O * k->kh * k->kw; i++) bytes2 &= abs(q.ops[0].weight[i]) <= 64;
        /* else tap pairs: overlapping at stride 1, the plain plane's at stride 2 over an even width */
        const char *want2 = bytes2 ? "bytes" : k->sw == 1 || (k->W + 2 * k->pw) % 2 == 0 ? "direct" : "int16";
        if (strcmp(at_vnni, "vnni") || strcmp(avx2, want2)) printf("\n  %s: runs as %s, %s\n", what, at_vnni, avx2);
        CU_ASSERT_STRING_EQUAL(at_vnni, "vnni");
        CU_ASSERT_STRING_EQUAL(avx2, want2);
        CU_ASSERT(run_levels(&q, 5, t % 4 ? 5 : 3, &rng, what, fill) >= 1 + vnni);
        qat_ctx_free(ctx);
    }
}

/* 3x3 convolutions of stride 1 at the AVX2 level: Winograd F(2x2, 3x3)
 * (kernels_wino.c), whose sums must be the direct convolution's to the
 * bit. Rows of 14 tiles (two 8-tile chunks, overlapping), of 4 (one chunk
 * whose last lanes are the next row's), of 17 (three) and of exactly 8;
 * odd output sizes (a last tile half outside), no padding and a padding
 * of 2, one output row, one tile, O not a multiple of 4; 8-bit weights at
 * their extremes, unsigned ones (w - zp beyond int8), 4-bit ones and a
 * left shift; both roundings; inputs random and all at either end (|x -
 * zp| up to 255, the transforms' bounds). Below 8 channels, or where 4·y
 * could leave int32 (2048 channels of unsigned weights and an input zero
 * point of -128), the direct convolution runs instead. */
static void test_winograd_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    static const conv_case cases[] = {
        {16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 0}, {64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 5},
        {8, 5, 33, 12, 3, 3, 1, 1, 1, 1, 1, 0},   {8, 17, 15, 8, 3, 3, 1, 1, 0, 0, 1, 1},
        {8, 3, 3, 4, 3, 3, 1, 1, 2, 2, 1, 6},     {24, 1, 40, 8, 3, 3, 1, 1, 1, 1, 1, 5},
        {10, 6, 16, 22, 3, 3, 1, 1, 1, 1, 1, 2},  {32, 2, 2, 6, 3, 3, 1, 1, 1, 1, 1, 0},
        /* exactly 8 tiles with an odd width (one chunk, its first row's store spilling one byte onto the
         * second); input rows of 15 pixels (8-15-pixel pad rows, the left padding odd) */
        {8, 4, 15, 8, 3, 3, 1, 1, 1, 1, 1, 0},
    };
    qat_rng rng;
    qat_rng_seed(&rng, 35);
    for (size_t t = 0; t < 6 * sizeof cases / sizeof *cases; t++) {
        const conv_case *k = &cases[t / 6];
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        char name[96], what[160];
        snprintf(name, sizeof name, "Winograd C%d %dx%d O%d p%d w%d", k->C, k->H, k->W, k->O, k->ph, k->wmode);
        int fill = edge_run(ctx, k, t, &rng, &q, what, sizeof what, name);
        const char *path = op0_path(&q, 5, QAT_LEVEL_AVX2);
        if (strcmp(path, "winograd")) printf("\n  %s: runs as %s\n", what, path);
        CU_ASSERT_STRING_EQUAL(path, "winograd");
        CU_ASSERT(run_levels(&q, 5, t % 4 ? 5 : 3, &rng, what, fill) >= 1);
        qat_ctx_free(ctx);
    }
    /* 2048 channels of unsigned weights (max|w - zp_w| 128..145): 36·C·max|x - zp|·max|w - zp_w| is
     * above 2^31 with the input's zero point at -128 (inputs at 127: x - zp = 255), below it at 0
     * (inputs at -128: x - zp = -128) */
    static const struct {
        conv_case k;
        int32_t zp, fill;
        const char *path;
    } bounds[] = {{{6, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 0}, 0, 127, "direct"},
                  {{2048, 3, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1}, -128, 127, "direct"},
                  {{2048, 3, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1}, 0, -128, "winograd"}};
    for (size_t t = 0; t < sizeof bounds / sizeof *bounds; t++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        conv_program(ctx, &bounds[t].k, &q, &rng);
        q.tensors[0].q.zero_point = bounds[t].zp;
        for (int o = 0; o < bounds[t].k.O; o++) /* no saturated bias: 2048 channels' sums would leave int32 */
            q.ops[0].bias[o] = 0, q.ops[0].multiplier[o] = 1 << 30, q.ops[0].shift[o] = -12;
        CU_ASSERT_STRING_EQUAL(op0_path(&q, 3, QAT_LEVEL_AVX2), bounds[t].path);
        CU_ASSERT(run_levels(&q, 3, 3, &rng, "3x3 convolution at Winograd's bounds", bounds[t].fill) >= 1);
        qat_ctx_free(ctx);
    }
}

/* input [K] -> linear [O]: K not a multiple of 4, O not a multiple of 16,
 * batches that are not a multiple of the 8 rows of a tile. */
static void test_linear_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    static const int cases[][4] = {{784, 256, 64, 0}, {7, 3, 5, 0}, {64, 10, 13, 0}, {400, 120, 9, 2},
                                   {1, 1, 1, 0},       {33, 49, 17, 0}, {130, 40, 3, 1}, {16, 16, 8, 0}};
    qat_rng rng;
    qat_rng_seed(&rng, 22);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int K = cases[t][0], O = cases[t][1], B = cases[t][2];
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q = {.n_tensors = 2, .n_ops = 1, .input = 0, .output = 1, .config = ""};
        q.tensors = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof *q.tensors);
        q.ops = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q.ops);
        memset(q.ops, 0, sizeof *q.ops);
        name_tensor(&q.tensors[0], "input", 1, (int64_t[]){K}, act8(&rng));
        name_tensor(&q.tensors[1], "fc", 1, (int64_t[]){O}, act8(&rng));
        qat_qop *op = &q.ops[0];
        op->kind = QAT_QOP_LINEAR, snprintf(op->name, sizeof op->name, "fc"), op->groups = 1;
        op->n_inputs = 1, op->output = 1;
        fill_weights(ctx, op, 2, (int64_t[]){O, K}, cases[t][3], &rng);
        op->act_min = -128, op->act_max = 127;
        char what[64];
        snprintf(what, sizeof what, "linear %dx%d batch %d", O, K, B);
        run_every_level(&q, B, B, &rng, what);
        if (B > 1) run_every_level(&q, B, B - 1, &rng, what);
        qat_ctx_free(ctx);
    }
}

/* The largest sum the planner's bound allows, K·255·255 + bias =
 * INT32_MAX, with a multiplier of almost 1 and an output zero point of
 * 100: v = SRDHM(x, m0) is near INT32_MAX, and zp + v must be clamped as
 * the portable code's 64-bit sum (127), not wrapped in 32 bits (-128).
 * Unsigned weights at 255 with zero point 0, inputs at 127 with zero
 * point -128: every product is 255·255. Only a hand-made file gets here. */
static void test_saturated_sum_every_level(void) {
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    enum { K = 4, O = 16 };
    qat_rng rng;
    qat_rng_seed(&rng, 23);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q = {.n_tensors = 2, .n_ops = 1, .input = 0, .output = 1, .config = ""};
    q.tensors = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, 2 * sizeof *q.tensors);
    q.ops = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q.ops);
    memset(q.ops, 0, sizeof *q.ops);
    qat_aparams xa = act8(&rng), ya = act8(&rng);
    xa.zero_point = -128, ya.zero_point = 100;
    name_tensor(&q.tensors[0], "input", 1, (int64_t[]){K}, xa);
    name_tensor(&q.tensors[1], "fc", 1, (int64_t[]){O}, ya);
    qat_qop *op = &q.ops[0];
    op->kind = QAT_QOP_LINEAR, snprintf(op->name, sizeof op->name, "fc"), op->groups = 1;
    op->n_inputs = 1, op->output = 1;
    fill_weights(ctx, op, 2, (int64_t[]){O, K}, 1, &rng); /* unsigned 8-bit weights */
    for (int o = 0; o < O; o++) {
        op->wq.zero_point[o] = 0;
        for (int k = 0; k < K; k++) op->weight[o * K + k] = 255;
        op->bias[o] = INT32_MAX - K * 255 * 255 - o; /* the sums INT32_MAX - o */
        op->multiplier[o] = INT32_MAX - 1, op->shift[o] = 0;
    }
    op->act_min = -128, op->act_max = 127;
    run_levels(&q, 8, 8, &rng, "saturated linear", 127);
    qat_ctx_free(ctx);
}

/* Every reference model (residual adds, depthwise, strided and 1x1
 * convolutions, pooling, linear layers): every level's arena equals the
 * portable level's, over batches that take several passes. */
static void test_reference_models_every_level(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it)");
    if (qat__cpu_level() == QAT_LEVEL_PORTABLE) QAT_TEST_SKIP("this CPU has only the portable kernels");
    const char *names[] = {"resnet8", "ds-cnn", "mobilenet-v1", "lenet", "mlp"};
    for (int k = 0; k < 5; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = qat_model_new(ctx);
        char path[600];
        snprintf(path, sizeof path, "%s/models/%s.qnet", src, names[k]);
        CU_ASSERT_EQUAL_FATAL(qat_model_from_file(m, path), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 5), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        qat_rng rng;
        qat_rng_seed(&rng, 23);
        int64_t s[3];
        int rank = qat_model_input_shape(m, s);
        qat_test_warm_up(m, rank, s, 2, &rng);
        qat_qmodel q;
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
        run_every_level(&q, 45, 45, &rng, names[k]);
        run_every_level(&q, 45, 3, &rng, names[k]);
        qat_ctx_free(ctx);
    }
}

/* ---- the int8 path's pieces ------------------------------------------------------------ */

/* The int8 GEMM in every tile shape against the portable int16 kernel
 * (qat__gemm_requant_ref): random int8 weights (-128 included), inputs
 * and zero points, on grids with dropped positions (the implicit im2col's)
 * and on compact ones; no byte outside the outputs is written. */
static void test_gemm8_equals_int16_reference(void) {
    static const int tiles[][2] = {{4, 4}, {8, 2}, {16, 1}};
    /* O, K, samples m, grid rows Hq, row pitch Wq, valid OH x OW */
    static const int cases[][7] = {{16, 144, 2, 30, 30, 28, 28}, {3, 9, 1, 1, 17, 1, 17}, {17, 5, 3, 9, 9, 7, 7},
                                   {64, 577, 2, 1, 49, 1, 49},  {1, 1, 1, 1, 1, 1, 1},   {33, 40, 4, 4, 6, 2, 5},
                                   {8, 12, 1, 16, 16, 15, 14},  {13, 64, 5, 2, 2, 2, 2}};
    bool simd = qat__cpu_level() >= QAT_LEVEL_VNNI8;
    if (!simd) printf("\n  (this CPU has no AVX-512 VNNI/VBMI2: only the portable int8 kernel is checked)");
    qat_rng rng;
    qat_rng_seed(&rng, 24);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int O = cases[t][0], K = cases[t][1], m = cases[t][2], Hq = cases[t][3], Wq = cases[t][4];
        int OH = cases[t][5], OW = cases[t][6], P = OH * OW, K4 = (K + 3) / 4, Kp = (int)qat__round_up(K, 2);
        int Pp = (int)qat__round_up(P, QAT_PPAD);
        int64_t out_n = (int64_t)O * P, Qgrid = (int64_t)m * Hq * Wq, pitch = 4 * (Qgrid + 64) + 256;
        int8_t *w8 = malloc((size_t)O * K), *x = malloc((size_t)Qgrid);
        int32_t *bias = malloc(4 * (size_t)O), *m0 = malloc(4 * (size_t)O), *sh = malloc(4 * (size_t)O);
        int32_t zp_in = rnd(&rng, -128, 127), zp = rnd(&rng, -128, 127);
        bool single = t % 2; /* every other case rounds once (qat_rounding) */
        for (int i = 0; i < O * K; i++) w8[i] = (int8_t)rnd(&rng, -128, 127);
        for (int o = 0; o < O; o++) {
            bias[o] = rnd(&rng, -100000, 100000);
            m0[o] = (int32_t)((1u << 30) + qat_rng_below(&rng, 1u << 30)), sh[o] = rnd(&rng, -16, 3);
        }
        /* the reference: per sample, int16 columns of x - zp (x per position and k) */
        int16_t *w16 = calloc((size_t)qat__round_up(O, QAT_WROWS) * Kp, 2), *c16 = calloc((size_t)Kp * Pp, 2);
        uint8_t *col = malloc((size_t)(K4 * pitch));
        int8_t *want = malloc((size_t)(m * out_n)), *got = malloc((size_t)(m * out_n) + 128);
        for (int o = 0; o < O; o++)
            for (int k = 0; k < K; k++) w16[o * Kp + k] = w8[o * K + k];
        for (int64_t i = 0; i < K4 * pitch; i++) col[i] = (uint8_t)qat_rng_below(&rng, 256); /* dropped positions: anything */
        for (int s = 0; s < m; s++) {
            for (int k = 0; k < K; k++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        int8_t v = (int8_t)rnd(&rng, -128, 127);
                        int64_t q = ((int64_t)s * Hq + oy) * Wq + ox;
                        col[(k / 4) * pitch + 4 * q + k % 4] = (uint8_t)((uint8_t)v ^ 0x80);
                        c16[k * Pp + oy * OW + ox] = (int16_t)(v - zp_in);
                    }
            qat__gemm_args r = {.w = w16, .col = c16, .O = O, .P = P, .Kp = Kp, .Pp = Pp, .bias = bias, .m0 = m0,
                                .shift = sh, .zp = zp, .lo = -100, .hi = 120, .out = want + s * out_n, .so = P, .sp = 1,
                                .single = single};
            qat__gemm_requant_ref(&r);
        }
        int32_t *koff = malloc(4 * (size_t)K4);
        for (int k = 0; k < K4; k++) koff[k] = (int32_t)(k * pitch);
        qat__posmap map = {.first = malloc(4 * (size_t)(Qgrid / 16 + 2)),
                           .seg = malloc(sizeof(qat__seg) * (size_t)qat__posmap_max_segs(m, Hq, Wq, OH, OW))};
        int64_t Q = qat__posmap_build(m, Hq, Wq, OH, OW, out_n, &map);
        for (size_t ti = 0; ti < 2 * sizeof tiles / sizeof *tiles; ti++) {
            int R = tiles[ti / 2][0], TT = tiles[ti / 2][1], Op = (int)qat__round_up(O, R);
            bool use_simd = ti % 2;
            if (use_simd && !simd) continue;
            int8_t *wp = calloc((size_t)Op * K4 * 4, 1);
            int32_t *b8 = malloc(4 * (size_t)O);
            qat__rq *rq = malloc(sizeof *rq * (size_t)O);
            for (int o = 0; o < O; o++) {
                uint32_t sum = 0;
                for (int k = 0; k < K; k++) {
                    wp[(((int64_t)(o / R) * K4 + k / 4) * R + o % R) * 4 + k % 4] = w8[o * K + k];
                    sum += (uint32_t)w8[o * K + k];
                }
                b8[o] = (int32_t)((uint32_t)bias[o] - (uint32_t)(128 + zp_in) * sum);
                rq[o] = qat__rq_make(b8[o], m0[o], sh[o], zp, -100, single); /* the clamp below */
            }
            memset(got, 0x55, (size_t)(m * out_n) + 128);
            qat__gemm8_args a = {.col = col, .koff = koff, .w = wp, .K4 = K4, .O = O, .R = R, .TT = TT, .Q = Q,
                                 .rq = rq, .bias8 = b8, .m0 = m0, .shift = sh, .zp = zp, .lo = -100, .hi = 120,
                                 .out = got, .so = P, .map = &map, .single = single};
            (use_simd ? qat__gemm8_vnni : qat__gemm8_ref)(&a);
            int bad = 0, stray = 0;
            for (int64_t i = 0; i < m * out_n; i++) bad += got[i] != want[i];
            for (int i = 0; i < 128; i++) stray += got[m * out_n + i] != 0x55;
            if (bad || stray)
                printf("\n  case %zu, tile %dx%d (%s): %d differ, %d written past the end\n", t, R, 16 * TT,
                       use_simd ? "VNNI" : "portable", bad, stray);
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_EQUAL(stray, 0);
            free(wp), free(b8), free(rq);
        }
        free(w8), free(x), free(bias), free(m0), free(sh), free(w16), free(c16), free(col), free(want), free(got);
        free(koff), free(map.first), free(map.seg);
    }
}

/* A requantization case: extreme sums, exact ties of the rounding shift,
 * every shift, multipliers 0, 2^30 and near 2^31, clamps that bite. */
typedef struct {
    int32_t acc[16], m0, zp, lo, hi;
    int shift;
} requant_case;

static requant_case random_requant_case(qat_rng *rng, int it) {
    requant_case r;
    r.shift = rnd(rng, -31, 30);
    r.m0 = it % 7 == 0 ? 0 : it % 7 == 1 ? 1 << 30 : it % 7 == 2 ? INT32_MAX
                                                 : (int32_t)((1u << 30) + qat_rng_below(rng, 1u << 30));
    if (r.m0 == 0) r.shift = 0;
    r.zp = rnd(rng, -128, 127), r.lo = rnd(rng, -128, 127), r.hi = rnd(rng, -128, 127);
    if (r.lo > r.hi) {
        int32_t t = r.lo;
        r.lo = r.hi, r.hi = t;
    }
    if (it % 3 == 0) r.lo = -128, r.hi = 127; /* and the full range, most values unclamped */
    for (int i = 0; i < 16; i++) {
        switch (qat_rng_below(rng, 5)) {
        case 0: r.acc[i] = (int32_t)qat_rng_u32(rng); break;
        case 1: r.acc[i] = rnd(rng, -4096, 4096); break;
        case 2: r.acc[i] = (int32_t[]){INT32_MIN, INT32_MAX, 0, -1, 1, INT32_MIN + 1}[qat_rng_below(rng, 6)]; break;
        case 3: { /* near a tie of the rounding shift: ±(k + ½)·2^right / m0·2^31 */
            int right = r.shift < 0 ? -r.shift : 1;
            int64_t v = ((int64_t)rnd(rng, -200, 200) * 2 + 1) * (1LL << (right > 20 ? 20 : right - 1));
            r.acc[i] = (int32_t)(v + rnd(rng, -2, 2));
            break;
        }
        default: r.acc[i] = rnd(rng, -(1 << 20), 1 << 20);
        }
    }
    return r;
}

/* The vectorised requantization against qat_requantize. */
static void test_requant16_equals_scalar(void) {
    if (qat__cpu_level() < QAT_LEVEL_VNNI8) QAT_TEST_SKIP("this CPU has no AVX-512 VNNI/VBMI2: the vector requantization never runs");
    qat_rng rng;
    qat_rng_seed(&rng, 25);
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        requant_case r = random_requant_case(&rng, it);
        int32_t y[16];
        bool single = it % 2;
        qat__requant16_avx512(r.acc, r.m0, r.shift, r.zp, r.lo, r.hi, single, y);
        for (int i = 0; i < 16; i++) bad += y[i] != qat_requantize_r(r.acc[i], r.m0, r.shift, r.zp, r.lo, r.hi, single);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The kernels' own requantization (src/runtime/qk.h: the portable level's
 * and the generated C's, whose rounding shift stays in 32 bits) against
 * qat_requantize, on the same cases. */
static void test_qk_requant_equals_scalar(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 26);
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        requant_case r = random_requant_case(&rng, it);
        for (int i = 0; i < 16; i++)
            bad += q_out(q_requant(r.acc[i], r.m0, r.shift) + r.zp, r.lo, r.hi) !=
                   qat_requantize(r.acc[i], r.m0, r.shift, r.zp, r.lo, r.hi);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* qk.h's helpers compiled with the single rounding (tests/qk_single.c). */
int32_t qk_single_mbqm(int32_t x, int32_t m0, int shift);
int32_t qk_single_requant(int32_t acc, int32_t m0, int shift);
int32_t qk_single_requant_neg(int32_t acc, int32_t m0, int shift);

/* The generated C's single rounding (qk.h under QK_SINGLE_ROUNDING, which
 * computes it with 32-bit shifts only) against
 * qat_multiply_by_quantized_multiplier_single, on the same cases: q_mbqm
 * unclamped (its saturation to int32 at shifts up to 30 included),
 * q_requant, and q_requant_neg for every negative shift. */
static void test_qk_single_requant_equals_scalar(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 29);
    int bad = 0, saturated = 0, ties = 0;
    for (int it = 0; it < 20000; it++) {
        requant_case r = random_requant_case(&rng, it);
        for (int i = 0; i < 16; i++) {
            int32_t want = qat_multiply_by_quantized_multiplier_single(r.acc[i], r.m0, r.shift);
            int32_t clamped = want < -256 ? -256 : want > 255 ? 255 : want;
            bad += qk_single_mbqm(r.acc[i], r.m0, r.shift) != want;
            bad += qk_single_requant(r.acc[i], r.m0, r.shift) != clamped;
            if (r.shift < 0) bad += qk_single_requant_neg(r.acc[i], r.m0, r.shift) != clamped;
            saturated += want == INT32_MAX || want == INT32_MIN;
            ties += want != qat_multiply_by_quantized_multiplier(r.acc[i], r.m0, r.shift);
        }
    }
    if (bad || !saturated || !ties) printf("\n  %d differ; %d saturated, %d differ from rounding twice\n", bad, saturated, ties);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(saturated > 0 && ties > 0); /* the cases reach the saturation and tell the roundings apart */
}

/* TFLite's ADD (from its tables), the requantization of concatenated
 * inputs and global average pooling: the AVX-512 loops against the
 * portable ones, lengths that are not multiples of 64. */
/* Random ADD arguments over the ranges the checker admits: multipliers in
 * [2^30, 2^31), input shifts -8..0, output shifts -24..2 (a left shift
 * now and then); lo -128 or random. */
static qat__add_args random_add_args(qat_rng *rng, bool random_lo) {
    qat__add_args r = {.zp_a = rnd(rng, -128, 127), .zp_b = rnd(rng, -128, 127),
                       .m_a = (int32_t)((1u << 30) + qat_rng_below(rng, 1u << 30)),
                       .m_b = (int32_t)((1u << 30) + qat_rng_below(rng, 1u << 30)),
                       .m_out = (int32_t)((1u << 30) + qat_rng_below(rng, 1u << 30)), .sh_a = rnd(rng, -8, 0),
                       .sh_b = rnd(rng, -8, 0), .sh_out = rnd(rng, -24, 2), .left_shift = 20,
                       .zp_out = rnd(rng, -128, 127), .lo = random_lo ? rnd(rng, -128, 0) : -128, .hi = rnd(rng, 0, 127)};
    return r;
}

static void test_elementwise_avx512_equal_portable(void) {
    if (qat__cpu_level() < QAT_LEVEL_VNNI8) QAT_TEST_SKIP("this CPU has no AVX-512 VNNI/VBMI2: these loops never run");
    qat_rng rng;
    qat_rng_seed(&rng, 26);
    enum { N = 1000 };
    int8_t a[N], b[N], y0[N + 16], y1[N + 16];
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        int n = rnd(&rng, 1, N);
        for (int i = 0; i < n; i++) a[i] = (int8_t)rnd(&rng, -128, 127), b[i] = (int8_t)rnd(&rng, -128, 127);
        qat__add_args r = random_add_args(&rng, false);
        r.single = it % 2; /* and the single rounding, every other case */
        memset(y0, 0x55, sizeof y0), memset(y1, 0x55, sizeof y1);
        uint8_t tables[QAT_ADD_TABLE_BYTES];
        r.left_shift = it % 5 ? 20 : (int)qat_rng_below(&rng, 25); /* any shift the checker lets through */
        r.sh_a = r.left_shift > 20 ? rnd(&rng, -12, -4) : r.sh_a, r.sh_b = r.left_shift > 20 ? rnd(&rng, -12, -4) : r.sh_b;
        qat__add_tables(&r, tables);
        memset(y1, 0x55, sizeof y1);
        qat__add_s8(a, b, n, &r, y0);
        qat__add_s8_tab_avx512(a, b, n, &r, tables, y1);
        bad += memcmp(y0, y1, sizeof y0) != 0;
        qat__requant_args q = {.zp_in = r.zp_a, .m0 = r.m_out, .shift = rnd(&rng, -20, 3), .zp_out = r.zp_out,
                               .lo = r.lo, .hi = r.hi, .single = r.single};
        qat__requant_s8(a, n, &q, y0);
        qat__requant_s8_avx512(a, n, &q, y1);
        bad += memcmp(y0, y1, sizeof y0) != 0;
        int C = rnd(&rng, 1, 8), HW = n / C;
        q.shift = rnd(&rng, -31, -6);
        qat__global_avgpool_s8(a, C, HW, &q, y0);
        qat__global_avgpool_s8_avx512(a, C, HW, &q, y1);
        bad += memcmp(y0, y1, sizeof y0) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The portable kernels compiled with the single rounding (qk.h under
 * QK_SINGLE_ROUNDING: the generated C's arithmetic) against the scalar
 * definition, qat_multiply_by_quantized_multiplier_single: concat's
 * requantization (q_requant: shifts of both signs) and TFLite's ADD (the
 * inputs' rescales through q_mbqm, then the output's). */
static void test_qk_single_rounding_equals_scalar(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 28);
    enum { N = 500 };
    int8_t a[N], b[N], y[N];
    int bad = 0, differ = 0;
    for (int it = 0; it < 400; it++) {
        for (int i = 0; i < N; i++) a[i] = (int8_t)rnd(&rng, -128, 127), b[i] = (int8_t)rnd(&rng, -128, 127);
        qat__add_args r = random_add_args(&rng, true);
        r.single = true;
        qat__requant_args q = {.zp_in = r.zp_a, .m0 = r.m_out, .shift = rnd(&rng, -31, 6), .zp_out = r.zp_out,
                               .lo = r.lo, .hi = r.hi, .single = true};
        qat__requant_s8(a, N, &q, y);
        for (int i = 0; i < N; i++) {
            int32_t want = qat_requantize_single(a[i] - q.zp_in, q.m0, q.shift, q.zp_out, q.lo, q.hi);
            bad += y[i] != want;
            differ += want != qat_requantize(a[i] - q.zp_in, q.m0, q.shift, q.zp_out, q.lo, q.hi);
        }
        qat__add_s8(a, b, N, &r, y);
        for (int i = 0; i < N; i++) {
            int32_t sa = qat_multiply_by_quantized_multiplier_single((a[i] - r.zp_a) * (1 << r.left_shift), r.m_a, r.sh_a);
            int32_t sb = qat_multiply_by_quantized_multiplier_single((b[i] - r.zp_b) * (1 << r.left_shift), r.m_b, r.sh_b);
            bad += y[i] != qat_requantize_single(sa + sb, r.m_out, r.sh_out, r.zp_out, r.lo, r.hi);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(differ > 100); /* the two roundings were told apart */
}

/* The AVX2 add (8 lanes of the three rescales) against the portable
 * loop, on the argument ranges above, lengths not a multiple of 8, and
 * output shifts of both signs (a left shift takes the portable loop). */
static void test_add_avx2_equals_portable(void) {
    if (!qat_isa_cpu_has(QAT_ISA_AVX2)) QAT_TEST_SKIP("this CPU has no AVX2: the loop never runs");
    qat_rng rng;
    qat_rng_seed(&rng, 27);
    enum { N = 1000 };
    int8_t a[N], b[N], y0[N + 16], y1[N + 16];
    int bad = 0, vector = 0, split = 0;
    for (int it = 0; it < 600; it++) {
        int n = rnd(&rng, 1, N);
        for (int i = 0; i < n; i++) a[i] = (int8_t)rnd(&rng, -128, 127), b[i] = (int8_t)rnd(&rng, -128, 127);
        if (it % 7 == 0) /* both extremes of the bytes, against both extremes of the zero points */
            for (int i = 0; i < n; i++) a[i] = (int8_t)(i % 2 ? 127 : -128), b[i] = (int8_t)(i % 3 ? -128 : 127);
        qat__add_args r = random_add_args(&rng, true);
        r.single = it % 2;
        r.left_shift = it % 5 ? 20 : (int)qat_rng_below(&rng, 25);
        r.sh_a = r.left_shift > 20 ? rnd(&rng, -12, -4) : r.sh_a, r.sh_b = r.left_shift > 20 ? rnd(&rng, -12, -4) : r.sh_b;
        if (it % 4 == 1) { /* the split's edges: the widest multipliers, zero points and input shifts */
            r.m_a = it % 8 == 1 ? INT32_MAX : 1 << 30, r.m_b = it % 8 == 1 ? 1 << 30 : INT32_MAX;
            r.zp_a = it % 8 == 1 ? -128 : 127, r.zp_b = -r.zp_a - 1;
            r.sh_a = -(int)qat_rng_below(&rng, 32), r.sh_b = it % 3 ? 0 : -31;
        }
        memset(y0, 0x55, sizeof y0), memset(y1, 0x55, sizeof y1);
        qat__add_s8(a, b, n, &r, y0);
        qat__add_s8_level(a, b, n, &r, y1, QAT_LEVEL_AVX2);
        bad += memcmp(y0, y1, sizeof y0) != 0;
        vector += r.sh_out <= 0 && n >= 8;
        split += qat__add_split_avx2(&r) && n >= 8;
        /* global average pooling: channels of 1 to 1000 bytes (whole 32s and tails), requantized or
         * keeping the input's quantization */
        qat__requant_args q = {.zp_in = r.zp_a, .m0 = r.m_out, .shift = rnd(&rng, -31, -6), .zp_out = r.zp_out,
                               .lo = r.lo, .hi = r.hi, .keep = it % 3 == 0, .single = r.single};
        int C = rnd(&rng, 1, n < 8 ? n : 8), HW = n / C; /* HW >= 1 */
        memset(y0, 0x55, sizeof y0), memset(y1, 0x55, sizeof y1);
        qat__global_avgpool_s8(a, C, HW, &q, y0);
        qat__global_avgpool_s8_level(a, C, HW, &q, y1, QAT_LEVEL_AVX2);
        bad += memcmp(y0, y1, sizeof y0) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(vector > 200);
    CU_ASSERT(split > 150 && split < vector); /* both forms of the terms ran */
}

/* The AVX2 add's term in 32-bit lanes equals the scalar definition on
 * every input byte, for every zero point at the edges and across, both
 * roundings, every input shift and left shift the split takes, and
 * multipliers at both ends: a tie rounded the wrong way in a term seldom
 * reaches an add's output (the output's requantization divides it by
 * thousands), so the terms are compared themselves. */
static void test_add_terms_avx2_exact(void) {
    if (!qat_isa_cpu_has(QAT_ISA_AVX2)) QAT_TEST_SKIP("this CPU has no AVX2: the loop never runs");
    qat_rng rng;
    qat_rng_seed(&rng, 28);
    int8_t x[256];
    for (int i = 0; i < 256; i++) x[i] = (int8_t)(i - 128);
    int32_t got[256];
    int bad = 0, cases = 0;
    const int32_t zps[] = {-128, -1, 0, 1, 127};
    for (int single = 0; single < 2; single++)
        for (int ls = 8; ls <= 20; ls++)
            for (int shift = -31; shift <= 0; shift++)
                for (int z = 0; z < 7; z++) {
                    int32_t zp = z < 5 ? zps[z] : rnd(&rng, -128, 127);
                    int32_t m = z == 0 ? INT32_MAX : z == 1 ? 1 << 30 : (int32_t)((1u << 30) + qat_rng_below(&rng, 1u << 30));
                    qat__add_terms_avx2(x, zp, m, shift, ls, single, got);
                    for (int i = 0; i < 256; i++)
                        bad += got[i] != qat_multiply_by_quantized_multiplier_r((int32_t)((uint32_t)(x[i] - zp) << ls), m,
                                                                                shift, single);
                    cases++;
                }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(cases, 2 * 13 * 32 * 7);
}

/* The position map: every valid grid position goes to its output exactly
 * once, nothing else is stored, segments stay inside their chunk. */
static void test_position_map(void) {
    static const int grids[][5] = {{3, 30, 30, 28, 28}, {1, 1, 1, 1, 1}, {5, 2, 2, 2, 2}, {2, 9, 9, 7, 7},
                                   {4, 1, 49, 1, 49},   {2, 17, 16, 15, 14}};
    for (size_t t = 0; t < sizeof grids / sizeof *grids; t++) {
        int m = grids[t][0], Hq = grids[t][1], Wq = grids[t][2], OH = grids[t][3], OW = grids[t][4];
        int64_t out_n = (int64_t)OH * OW + 3, total = m * out_n;
        qat__posmap map = {.first = malloc(4 * (size_t)((int64_t)m * Hq * Wq / 16 + 2)),
                           .seg = malloc(sizeof(qat__seg) * (size_t)qat__posmap_max_segs(m, Hq, Wq, OH, OW))};
        int64_t Q = qat__posmap_build(m, Hq, Wq, OH, OW, out_n, &map);
        int *hits = calloc((size_t)total, sizeof *hits), bad = 0;
        for (int64_t c = 0; c < map.chunks; c++)
            for (int32_t s = map.first[c]; s < map.first[c + 1]; s++) {
                qat__seg g = map.seg[s];
                bad += g.mask == 0 || g.mask > 0xFFFF;
                int64_t d = g.dst;
                for (int l = 0; l < 16; l++) {
                    if (!(g.mask >> l & 1)) continue;
                    int64_t q = c * 16 + l, s_ = q / ((int64_t)Hq * Wq), oy = q % ((int64_t)Hq * Wq) / Wq, ox = q % Wq;
                    bad += q >= Q || oy >= OH || ox >= OW || d != s_ * out_n + oy * OW + ox;
                    if (d >= 0 && d < total) hits[d]++;
                    d++;
                }
            }
        for (int64_t i = 0; i < total; i++) bad += hits[i] != (i % out_n < (int64_t)OH * OW);
        CU_ASSERT_EQUAL(bad, 0);
        free(hits), free(map.first), free(map.seg);
    }
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"the largest sum the bound allows: zp + v clamped, not wrapped, at every level", test_saturated_sum_every_level},
        {"every level runs random convolutions as the portable level", test_conv_every_level},
        {"every level runs small-map depthwise convolutions (channels in the lanes) as the portable level",
         test_depthwise_lanes_every_level},
        {"every level runs one-channel convolutions (tap quads) as the portable level", test_tap_quads_every_level},
        {"the AVX2 level's Winograd 3x3 convolutions equal the portable level's", test_winograd_every_level},
        {"every level runs random linear ops as the portable level", test_linear_every_level},
        {"every level runs the reference models as the portable level", test_reference_models_every_level},
        {"the int8 GEMM equals the int16 reference in every tile shape", test_gemm8_equals_int16_reference},
        {"the vectorised requantization equals the scalar one", test_requant16_equals_scalar},
        {"the kernels' requantization (qk.h) equals the scalar one", test_qk_requant_equals_scalar},
        {"the kernels' single rounding (qk.h, 32-bit shifts) equals the scalar one", test_qk_single_requant_equals_scalar},
        {"AVX-512 add, requantization and global pooling equal the portable loops", test_elementwise_avx512_equal_portable},
        {"the AVX2 add and global average pooling equal the portable loops", test_add_avx2_equals_portable},
        {"the AVX2 add's terms in 32-bit lanes equal the scalar definition", test_add_terms_avx2_exact},
        {"the portable kernels' single rounding (qk.h's) equals the scalar definition", test_qk_single_rounding_equals_scalar},
        {"the position map stores every valid position once", test_position_map},
        {NULL, NULL},
    };
    return qat_test_main("kernels8", cases, argc, argv);
}
