/* Integer programs written by hand through the program's public fields
 * (qat/runtime.h), with every op kind the runtime and the generator run:
 * program_a and program_b; the average pools that keep their input's
 * quantization: program_c (global) and program_d (windows, padded);
 * program_e, every kind within TFLite's int8 rules. Shared by
 * test_codegen_program (the generated C against the runtime), test_export
 * (the numpy readers against the integer engine), tests/aarch64 (the
 * runtime on another architecture against this one) and test_tflite
 * (TFLite's kernels against the runtime). The includer defines
 * PROG_CHECK(cond), which must not return when cond is false. */
#ifndef QAT_TESTS_PROGRAMS_H
#define QAT_TESTS_PROGRAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/runtime.h"

enum { MAX_T = 32, MAX_MEM = 256 };
typedef struct {
    qat_qmodel q;
    qat_qtensor t[MAX_T];
    qat_qop o[MAX_T];
    void *mem[MAX_MEM];
    int nmem;
    uint64_t rng;
    qat_normalization norm;
    bool from_scales; /* weights(): the output scale set so that M = s_in·s_w[o]/s_out, as TFLite derives it */
} prog;

static uint32_t rnd(prog *p) { /* xorshift64* */
    p->rng ^= p->rng >> 12, p->rng ^= p->rng << 25, p->rng ^= p->rng >> 27;
    return (uint32_t)((p->rng * 2685821657736338717ULL) >> 32);
}
static int32_t rnd_in(prog *p, int32_t lo, int32_t hi) { return lo + (int32_t)(rnd(p) % (uint32_t)(hi - lo + 1)); }
static float rnd_f(prog *p, float lo, float hi) { return lo + (hi - lo) * (float)(rnd(p) >> 8) / 16777216.0f; }

static void *palloc(prog *p, size_t bytes) {
    PROG_CHECK(p->nmem < MAX_MEM);
    return p->mem[p->nmem++] = calloc(1, bytes ? bytes : 1);
}

static void prog_init(prog *p, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    p->q.tensors = p->t, p->q.ops = p->o;
    snprintf(p->q.producer, sizeof p->q.producer, "tests/programs.h");
    p->q.config = "";
}

static void prog_free(prog *p) {
    for (int i = 0; i < p->nmem; i++) free(p->mem[i]);
}

/* qat_runtime_run's output integers for n samples of input integers xq
 * ([n][input numel]), malloc'd ([n][output numel]; the caller frees them).
 * The buffers are zeroed as the engines' are: the GEMM reads padding whose
 * values it multiplies by zero weights or drops (src/runtime/kernels.h),
 * which valgrind cannot tell from a read that counts. */
static inline int8_t *prog_run(const qat_qmodel *q, const int8_t *xq, int n) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, n, off, &plan, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    PROG_CHECK(st == QAT_OK);
    size_t cb = (size_t)(plan.const_bytes + 63) / 64 * 64 + 64, ab = (size_t)(plan.arena_bytes + 63) / 64 * 64 + 64,
           sb = (size_t)(plan.scratch_bytes + 63) / 64 * 64 + 64;
    void *consts = aligned_alloc(64, cb), *arena = aligned_alloc(64, ab), *scratch = aligned_alloc(64, sb);
    PROG_CHECK(off && consts && arena && scratch);
    memset(consts, 0, cb), memset(arena, 0, ab), memset(scratch, 0, sb);
    qat_runtime_prepare(q, &plan, consts);
    memcpy((int8_t *)arena + plan.offset[q->input], xq, (size_t)(n * qat_qtensor_numel(&q->tensors[q->input])));
    PROG_CHECK(qat_runtime_run(q, &plan, consts, arena, scratch, n) == QAT_OK);
    int64_t out = qat_qtensor_numel(&q->tensors[q->output]);
    int8_t *y = malloc((size_t)(n * out));
    PROG_CHECK(y != NULL);
    memcpy(y, (int8_t *)arena + plan.offset[q->output], (size_t)(n * out));
    free(consts), free(arena), free(scratch), free(off);
    return y;
}

/* A new int8 tensor of random quantization (shape filled by its op). */
static int tensor(prog *p, const char *name) {
    int t = p->q.n_tensors++;
    PROG_CHECK(t < MAX_T);
    qat_qtensor *x = &p->t[t];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->q = (qat_aparams){.scale = rnd_f(p, 0.02f, 0.08f), .zero_point = rnd_in(p, -20, 20), .bits = 8,
                         .is_signed = true, .qmin = -128, .qmax = 127};
    return t;
}

static int input(prog *p, int rank, int64_t c, int64_t h, int64_t w) {
    int t = tensor(p, "input");
    p->t[t].rank = rank, p->t[t].shape[0] = c, p->t[t].shape[1] = h, p->t[t].shape[2] = w;
    p->q.input = t;
    return t;
}

static void mult(int32_t *m, int32_t *s, double M) {
    int sh;
    PROG_CHECK(qat_quantize_multiplier(M, m, &sh) == QAT_OK);
    *s = sh;
}

/* A new op reading ins, making a new tensor (its shape from the op); the
 * output clamp is the output's range. */
static qat_qop *op(prog *p, qat_qop_kind kind, const char *name, int n, const int *ins, bool same_q) {
    qat_qop *o = &p->o[p->q.n_ops++];
    o->kind = kind, o->n_inputs = n, o->groups = 1;
    snprintf(o->name, sizeof o->name, "%s", name);
    for (int j = 0; j < n; j++) o->inputs[j] = ins[j];
    o->output = tensor(p, name);
    if (same_q) p->t[o->output].q = p->t[ins[0]].q;
    o->act_min = p->t[o->output].q.qmin, o->act_max = p->t[o->output].q.qmax;
    return o;
}

static void shape_of(prog *p, qat_qop *o) {
    char why[200];
    qat_qtensor *y = &p->t[o->output];
    qat_status st = qat_qop_output_shape(&p->q, o, &y->rank, y->shape, why, sizeof why);
    if (st) printf("\n  %s: %s\n", o->name, why);
    PROG_CHECK(st == QAT_OK);
}

/* Per-output-channel int8 weights (symmetric, narrow), an int32 bias and
 * the multipliers s_in·s_w[o]/s_out of a linear or conv2d op. */
static void weights(prog *p, qat_qop *o, int64_t O, int64_t per, int rank, const int64_t *shape) {
    qat_qtype *w = &o->wq;
    *w = (qat_qtype){.bits = 8, .is_signed = true, .qmin = -127, .qmax = 127, .rank = rank, .nparams = O};
    for (int d = 0; d < rank; d++) w->shape[d] = shape[d], w->block[d] = d ? shape[d] : 1, w->pshape[d] = d ? 1 : O;
    w->scale = palloc(p, (size_t)O * sizeof *w->scale);
    w->zero_point = palloc(p, (size_t)O * sizeof *w->zero_point);
    o->weight = palloc(p, (size_t)(O * per) * sizeof *o->weight);
    o->bias = palloc(p, (size_t)O * sizeof *o->bias);
    o->bias_scale = palloc(p, (size_t)O * sizeof *o->bias_scale);
    o->n_mult = (int)O;
    o->multiplier = palloc(p, (size_t)O * sizeof *o->multiplier);
    o->shift = palloc(p, (size_t)O * sizeof *o->shift);
    float s_in = p->t[o->inputs[0]].q.scale;
    int64_t root = 1;
    while (root * root < per) root++;
    for (int64_t c = 0; c < O; c++) w->scale[c] = rnd_f(p, 0.002f, 0.01f);
    if (p->from_scales) p->t[o->output].q.scale = (float)((double)s_in * 0.006 * (double)root / 0.01);
    for (int64_t c = 0; c < O; c++) {
        o->bias_scale[c] = s_in * w->scale[c];
        o->bias[c] = rnd_in(p, -3000, 3000);
        /* not s_in·s_w/s_out (the weights are random, not trained): a sum of
         * `per` products of spread integers (about root·60·73) to outputs
         * of about ±40, so that they spread over the range */
        double M = p->from_scales ? (double)s_in * (double)w->scale[c] / (double)p->t[o->output].q.scale
                                  : 0.01 / (double)root;
        mult(&o->multiplier[c], &o->shift[c], M);
    }
    for (int64_t i = 0; i < O * per; i++) o->weight[i] = rnd_in(p, -127, 127);
}

static qat_qop *conv(prog *p, const char *name, int x, int O, int kh, int kw, int sh, int sw, int ph, int pw,
                     int groups, qat_act_kind act) {
    qat_qop *o = op(p, QAT_QOP_CONV2D, name, 1, &x, false);
    o->kh = kh, o->kw = kw, o->stride_h = sh, o->stride_w = sw, o->pad_h = ph, o->pad_w = pw, o->groups = groups;
    int64_t C = p->t[x].shape[0];
    int64_t wshape[4] = {O, C / groups, kh, kw};
    weights(p, o, O, C / groups * kh * kw, 4, wshape);
    shape_of(p, o);
    const qat_aparams *y = &p->t[o->output].q;
    o->act = act;
    if (act != QAT_ACT_NONE) o->act_min = y->zero_point;
    if (act == QAT_ACT_RELU6) {
        int64_t six = y->zero_point + (int64_t)(6.0f / y->scale);
        o->act_max = six < y->qmax ? (int32_t)six : y->qmax;
    }
    return o;
}

static qat_qop *linear(prog *p, const char *name, int x, int O) {
    qat_qop *o = op(p, QAT_QOP_LINEAR, name, 1, &x, false);
    int64_t K = p->t[x].shape[0], wshape[2] = {O, K};
    p->t[o->output].rank = 1, p->t[o->output].shape[0] = O;
    weights(p, o, O, K, 2, wshape);
    return o;
}

static qat_qop *pool(prog *p, qat_qop_kind kind, const char *name, int x, int k, int s, int pad) {
    qat_qop *o = op(p, kind, name, 1, &x, kind == QAT_QOP_MAXPOOL2D);
    o->kh = o->kw = k, o->stride_h = o->stride_w = s, o->pad_h = o->pad_w = pad;
    shape_of(p, o);
    if (kind == QAT_QOP_AVGPOOL2D) {
        o->n_mult = 1;
        o->multiplier = palloc(p, sizeof *o->multiplier), o->shift = palloc(p, sizeof *o->shift);
        mult(o->multiplier, o->shift, (double)p->t[x].q.scale / ((double)p->t[o->output].q.scale * k * k));
    }
    return o;
}

static qat_qop *global_avgpool(prog *p, const char *name, int x) {
    qat_qop *o = op(p, QAT_QOP_GLOBAL_AVGPOOL, name, 1, &x, false);
    shape_of(p, o);
    o->n_mult = 1;
    o->multiplier = palloc(p, sizeof *o->multiplier), o->shift = palloc(p, sizeof *o->shift);
    double hw = (double)(p->t[x].shape[1] * p->t[x].shape[2]);
    mult(o->multiplier, o->shift, (double)p->t[x].q.scale / ((double)p->t[o->output].q.scale * hw));
    return o;
}

/* An average pool that keeps its input's quantization (keeps_scale): the
 * input's parameters, no multiplier. global_avgpool when k is 0. */
static qat_qop *pool_keep(prog *p, const char *name, int x, int k, int s, int pad) {
    qat_qop *o = op(p, k ? QAT_QOP_AVGPOOL2D : QAT_QOP_GLOBAL_AVGPOOL, name, 1, &x, true);
    o->keeps_scale = true;
    o->kh = o->kw = k, o->stride_h = o->stride_w = s, o->pad_h = o->pad_w = pad;
    shape_of(p, o);
    return o;
}

/* TFLite's ADD as lowering makes it: both inputs at twice the larger scale. */
static qat_qop *add(prog *p, const char *name, int a, int b, qat_act_kind act) {
    int ins[2] = {a, b};
    qat_qop *o = op(p, QAT_QOP_ADD, name, 2, ins, false);
    shape_of(p, o);
    o->n_mult = 3, o->left_shift = QAT_ADD_LEFT_SHIFT;
    o->multiplier = palloc(p, 3 * sizeof *o->multiplier), o->shift = palloc(p, 3 * sizeof *o->shift);
    double sa = p->t[a].q.scale, sb = p->t[b].q.scale, twice = 2.0 * (sa > sb ? sa : sb);
    mult(&o->multiplier[0], &o->shift[0], sa / twice);
    mult(&o->multiplier[1], &o->shift[1], sb / twice);
    mult(&o->multiplier[2], &o->shift[2], twice / ((double)(1 << QAT_ADD_LEFT_SHIFT) * p->t[o->output].q.scale));
    o->act = act;
    if (act == QAT_ACT_RELU) o->act_min = p->t[o->output].q.zero_point;
    return o;
}

/* TFLite's MUL as lowering makes it: s_a·s_b / s_out. */
static qat_qop *mul(prog *p, const char *name, int a, int b) {
    int ins[2] = {a, b};
    qat_qop *o = op(p, QAT_QOP_MUL, name, 2, ins, false);
    shape_of(p, o);
    o->n_mult = 1;
    o->multiplier = palloc(p, sizeof *o->multiplier), o->shift = palloc(p, sizeof *o->shift);
    mult(o->multiplier, o->shift, (double)p->t[a].q.scale * (double)p->t[b].q.scale / (double)p->t[o->output].q.scale);
    return o;
}

static qat_qop *concat(prog *p, const char *name, int n, const int *ins) {
    qat_qop *o = op(p, QAT_QOP_CONCAT, name, n, ins, false);
    shape_of(p, o);
    o->n_mult = n;
    o->multiplier = palloc(p, (size_t)n * sizeof *o->multiplier), o->shift = palloc(p, (size_t)n * sizeof *o->shift);
    for (int j = 0; j < n; j++)
        mult(&o->multiplier[j], &o->shift[j], (double)p->t[ins[j]].q.scale / (double)p->t[o->output].q.scale);
    return o;
}

static qat_qop *lut(prog *p, const char *name, int x, qat_lut_fn fn) {
    qat_qop *o = op(p, QAT_QOP_LUT, name, 1, &x, false);
    shape_of(p, o);
    o->lut = fn, o->table_len = 256;
    o->table = palloc(p, 256 * sizeof *o->table);
    for (int i = 0; i < 256; i++) o->table[i] = rnd_in(p, -128, 127); /* any table: the integers are what counts */
    return o;
}

static qat_qop *unary(prog *p, qat_qop_kind kind, const char *name, int x) {
    qat_qop *o = op(p, kind, name, 1, &x, true);
    shape_of(p, o);
    if (kind == QAT_QOP_RELU) o->act_min = p->t[o->output].q.zero_point; /* as lowering: the clamp is the ReLU */
    return o;
}

static void finish(prog *p) {
    p->q.output = p->o[p->q.n_ops - 1].output;
    char msg[400];
    qat_status st = qat_qmodel_check(&p->q, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    PROG_CHECK(st == QAT_OK);
}

/* Every kind but global average pooling, on a [3, 9, 10] input. */
static void program_a(prog *p) {
    prog_init(p, 1);
    int x = input(p, 3, 3, 9, 10);
    int c1 = conv(p, "wide", x, 8, 3, 5, 1, 1, 1, 2, 1, QAT_ACT_RELU)->output;          /* rows of 5 taps */
    int dw = conv(p, "dw", c1, 8, 3, 3, 2, 2, 1, 1, 8, QAT_ACT_RELU6)->output;           /* depthwise, strided */
    int pw = conv(p, "pw", dw, 8, 1, 1, 1, 1, 0, 0, 2, QAT_ACT_NONE)->output;            /* grouped pointwise */
    int s = add(p, "sum", pw, dw, QAT_ACT_NONE)->output;
    int r = unary(p, QAT_QOP_RELU, "relu", s)->output;
    int mp = pool(p, QAT_QOP_MAXPOOL2D, "mp", r, 3, 2, 1)->output;
    int ap = pool(p, QAT_QOP_AVGPOOL2D, "ap", r, 3, 2, 1)->output;
    int ins[2] = {mp, ap};
    int cat = concat(p, "cat", 2, ins)->output;
    int t = lut(p, "table", cat, QAT_LUT_SIGMOID)->output;
    int t2 = lut(p, "table2", t, QAT_LUT_TABLE)->output; /* a function only the table knows (leaky_relu's) */
    int pr = mul(p, "prod", t2, t)->output; /* one shape */
    int f = unary(p, QAT_QOP_FLATTEN, "flat", pr)->output;
    linear(p, "fc", f, 6);
    finish(p);
}

/* A normalized input (its own floats), a convolution over channel pairs
 * (4 channels: the DSP pairs), global average pooling, a linear head. */
static void program_b(prog *p) {
    prog_init(p, 2);
    int x = input(p, 3, 4, 5, 5);
    p->norm = (qat_normalization){.channels = 4, .divisor = 255.0f, .mean = {0.5f, 0.25f, 0.125f, 0.75f},
                                  .std = {0.25f, 0.5f, 0.3f, 0.2f}};
    p->q.norm = &p->norm;
    int c = conv(p, "pairs", x, 8, 3, 3, 1, 1, 1, 1, 1, QAT_ACT_RELU)->output;
    int sq = pool(p, QAT_QOP_AVGPOOL2D, "sq", c, 5, 5, 0)->output; /* [8, 1, 1] */
    int se = mul(p, "se", c, sq)->output;                           /* a factor per channel */
    int g = global_avgpool(p, "gap", se)->output;
    linear(p, "head", g, 5);
    finish(p);
}

/* Global average pooling that keeps its input's quantization (TFLite's
 * rule) over a convolution's signed outputs (no ReLU: sums of both signs,
 * H·W = 42 even, so halves occur), a linear head. */
static void program_c(prog *p) {
    prog_init(p, 3);
    int x = input(p, 3, 3, 7, 6);
    int c = conv(p, "conv", x, 8, 3, 3, 1, 1, 1, 1, 1, QAT_ACT_NONE)->output;
    int g = pool_keep(p, "gap", c, 0, 0, 0)->output;
    linear(p, "head", g, 5);
    finish(p);
}

/* Average pooling that keeps its input's quantization: 3x3, stride 2,
 * padding 1 (windows clipped to 4 and 6 input positions at the borders,
 * 9 inside), then 2x2 unpadded (4 positions: halves), over signed
 * convolution outputs; flatten, a linear head. */
static void program_d(prog *p) {
    prog_init(p, 4);
    int x = input(p, 3, 2, 9, 8);
    int c = conv(p, "conv", x, 6, 3, 3, 1, 1, 1, 1, 1, QAT_ACT_NONE)->output;
    int a = pool_keep(p, "clipped", c, 3, 2, 1)->output; /* [6, 5, 4] */
    int b = pool_keep(p, "halves", a, 2, 1, 0)->output;  /* [6, 4, 3] */
    int f = unary(p, QAT_QOP_FLATTEN, "flat", b)->output;
    linear(p, "head", f, 6);
    finish(p);
}

/* Every kind the TFLite export takes, within TFLite's int8 rules, on a
 * [3, 10, 10] input: paddings SAME reproduces and one it does not (an
 * explicit PAD), depthwise with multipliers 1 and 2, fused and standalone
 * ReLU and ReLU6 at TFLite's clamps, pools that keep their quantization,
 * a concatenation at one quantization, a per-channel product, flattens
 * read by a linear op (its columns permuted) and by a ReLU (a transpose). */
static void program_e(prog *p) {
    prog_init(p, 5);
    p->from_scales = true;
    int x = input(p, 3, 3, 10, 10);
    int c1 = conv(p, "same", x, 8, 3, 3, 1, 1, 1, 1, 1, QAT_ACT_RELU)->output;
    qat_qop *o = conv(p, "padded", c1, 8, 3, 3, 2, 2, 1, 1, 1, QAT_ACT_RELU6); /* 10 -> 5: SAME pads 0 before */
    const qat_aparams *y = &p->t[o->output].q;
    int32_t six = y->zero_point + (int32_t)(6.0f / y->scale + 0.5f); /* TFLite's RELU6 clamp: round(6 / s) */
    o->act_max = six < y->qmax ? six : y->qmax;
    int dw = conv(p, "dw", o->output, 16, 3, 3, 1, 1, 1, 1, 8, QAT_ACT_RELU)->output; /* depth multiplier 2 */
    int dw1 = conv(p, "dw1", dw, 16, 3, 3, 1, 1, 1, 1, 16, QAT_ACT_NONE)->output;
    int s = add(p, "sum", dw1, dw, QAT_ACT_RELU)->output;
    int mp = pool(p, QAT_QOP_MAXPOOL2D, "mp", s, 3, 1, 1)->output;   /* SAME */
    int r = unary(p, QAT_QOP_RELU, "relu", mp)->output;
    int ap = pool_keep(p, "ap", r, 2, 1, 0)->output; /* VALID, [16, 4, 4] */
    int mp2 = pool(p, QAT_QOP_MAXPOOL2D, "mp2", mp, 2, 1, 0)->output;
    /* both inputs at mp's quantization (the pools keep it): TFLite's CONCATENATION */
    qat_qop *cat = op(p, QAT_QOP_CONCAT, "cat", 2, (int[]){mp2, ap}, false);
    cat->act_min = -128, cat->act_max = 127;
    p->t[cat->output].q = p->t[mp2].q;
    shape_of(p, cat);
    cat->n_mult = 2;
    cat->multiplier = palloc(p, 2 * sizeof *cat->multiplier), cat->shift = palloc(p, 2 * sizeof *cat->shift);
    for (int j = 0; j < 2; j++) mult(&cat->multiplier[j], &cat->shift[j], 1.0);
    int g = pool_keep(p, "gap", cat->output, 0, 0, 0)->output; /* [32] */
    int sq = pool_keep(p, "sq", cat->output, 4, 4, 0)->output; /* [32, 1, 1] */
    int se = mul(p, "se", cat->output, sq)->output;
    int f = unary(p, QAT_QOP_FLATTEN, "flat", se)->output;
    int fr = unary(p, QAT_QOP_RELU, "flat_relu", f)->output;  /* a flatten read by a ReLU: in qat's order */
    int h = linear(p, "hidden", fr, 12)->output;
    int f2 = unary(p, QAT_QOP_FLATTEN, "flat2", se)->output;  /* read by a linear op alone: columns permuted */
    int h2 = linear(p, "hidden2", f2, 12)->output;
    int both = add(p, "both", h, h2, QAT_ACT_NONE)->output;
    int h3 = linear(p, "hidden3", g, 12)->output;
    int all = add(p, "all", both, h3, QAT_ACT_NONE)->output;
    linear(p, "head", all, 5);
    finish(p);
}

/* Maps wide enough for the kernels' eight-position steps (qk.h's NEON
 * paths on aarch64), each with a remainder the scalar path finishes: on a
 * [5, 11, 21] input (231 positions, not a multiple of 8), 3x3 convolutions
 * over 5 channels (the channel-pair layout, a channel past the last four)
 * at stride 1 (runs starting a column left of the row and ending one right
 * of it) and 2, a 5x5 stride-2 one (the general kernel), depthwise 3x3 at
 * strides 1 and 2 (rows of 21 and 11), pointwise over 8 and 5 channels,
 * output channel blocks of 4, 3 and 1, and a linear op over 105 inputs
 * (six steps of 16 and a remainder). */
__attribute__((unused)) /* the TFLite tests do not take it (its pools have their own scales) */
static void program_f(prog *p) {
    prog_init(p, 6);
    int x = input(p, 3, 5, 11, 21);
    int c1 = conv(p, "pairs", x, 8, 3, 3, 1, 1, 1, 1, 1, QAT_ACT_RELU)->output;      /* [8, 11, 21] */
    int c2 = conv(p, "pairs_s2", c1, 6, 3, 3, 2, 2, 1, 1, 1, QAT_ACT_NONE)->output; /* [6, 6, 11] */
    int g = conv(p, "wide_s2", x, 3, 5, 5, 2, 2, 2, 2, 1, QAT_ACT_NONE)->output;    /* [3, 6, 11] */
    int d1 = conv(p, "dw", c1, 8, 3, 3, 1, 1, 1, 1, 8, QAT_ACT_RELU6)->output;      /* [8, 11, 21] */
    int d2 = conv(p, "dw_s2", d1, 8, 3, 3, 2, 2, 1, 1, 8, QAT_ACT_NONE)->output;    /* [8, 6, 11] */
    int pw = conv(p, "pw", d2, 6, 1, 1, 1, 1, 0, 0, 1, QAT_ACT_NONE)->output;       /* [6, 6, 11] */
    int s = add(p, "sum", pw, c2, QAT_ACT_NONE)->output;
    int pw5 = conv(p, "pw5", x, 7, 1, 1, 1, 1, 0, 0, 1, QAT_ACT_RELU)->output;      /* [7, 11, 21] over 5 */
    int m = pool(p, QAT_QOP_MAXPOOL2D, "mp", pw5, 2, 2, 0)->output;                 /* [7, 5, 10] */
    int a = pool(p, QAT_QOP_AVGPOOL2D, "ap", s, 2, 2, 0)->output;                   /* [6, 3, 5] */
    int b = pool(p, QAT_QOP_AVGPOOL2D, "bp", g, 2, 2, 0)->output;                   /* [3, 3, 5] */
    int f = unary(p, QAT_QOP_FLATTEN, "flat", a)->output;                           /* [90] */
    int fb = unary(p, QAT_QOP_FLATTEN, "flat_b", b)->output;                        /* [45] */
    int fm = unary(p, QAT_QOP_FLATTEN, "flat_m", m)->output;                        /* [350] */
    int h = linear(p, "hidden", fm, 9)->output;
    int h2 = linear(p, "hidden2", f, 9)->output;
    int h3 = linear(p, "hidden3", fb, 9)->output;
    int both = add(p, "both", h, h2, QAT_ACT_NONE)->output;
    int all = add(p, "all", both, h3, QAT_ACT_NONE)->output;
    linear(p, "head", all, 4);
    finish(p);
}

#endif
