/* The C generator with only core and the program: this suite links
 * against the libraries qat_codegen and qat_runtime alone (no training
 * side, no HDF5, no BLAS, no libm; tests/CMakeLists.txt) and includes
 * nothing but qat/codegen.h and the runner. It writes integer programs by
 * hand, through the program's public fields (qat/runtime.h), with every
 * op kind the generator emits (convolutions wide, padded, strided,
 * grouped, depthwise and pointwise; linear; max, average and global
 * average pooling; add; concat; a table; ReLU; flatten; a normalized
 * input), generates their C, compiles it with strict C99 warnings, and
 * checks that it computes qat_runtime_run's integers bit for bit on random
 * inputs, on the host and, where the Arm toolchain and qemu are
 * installed, on a Cortex-M4 (DSP path) and a Cortex-M3. */
#include <stdlib.h>

#include "qat/codegen.h"
#include "test_main.h"

int system(const char *command);

static char dir[256];

/* ---- programs by hand ------------------------------------------------------------------ */

enum { MAX_T = 16, MAX_MEM = 256 };
typedef struct {
    qat_qmodel q;
    qat_qtensor t[MAX_T];
    qat_qop o[MAX_T];
    void *mem[MAX_MEM];
    int nmem;
    uint64_t rng;
    qat_normalization norm;
} prog;

static uint32_t rnd(prog *p) { /* xorshift64* */
    p->rng ^= p->rng >> 12, p->rng ^= p->rng << 25, p->rng ^= p->rng >> 27;
    return (uint32_t)((p->rng * 2685821657736338717ULL) >> 32);
}
static int32_t rnd_in(prog *p, int32_t lo, int32_t hi) { return lo + (int32_t)(rnd(p) % (uint32_t)(hi - lo + 1)); }
static float rnd_f(prog *p, float lo, float hi) { return lo + (hi - lo) * (float)(rnd(p) >> 8) / 16777216.0f; }

static void *palloc(prog *p, size_t bytes) {
    CU_ASSERT_FATAL(p->nmem < MAX_MEM);
    return p->mem[p->nmem++] = calloc(1, bytes ? bytes : 1);
}

static void prog_init(prog *p, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    p->q.tensors = p->t, p->q.ops = p->o;
    snprintf(p->q.producer, sizeof p->q.producer, "test_codegen_program");
    p->q.config = "";
}

static void prog_free(prog *p) {
    for (int i = 0; i < p->nmem; i++) free(p->mem[i]);
}

/* A new int8 tensor of random quantization (shape filled by its op). */
static int tensor(prog *p, const char *name) {
    int t = p->q.n_tensors++;
    CU_ASSERT_FATAL(t < MAX_T);
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
    CU_ASSERT_EQUAL_FATAL(qat_quantize_multiplier(M, m, &sh), QAT_OK);
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
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
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
    for (int64_t c = 0; c < O; c++) {
        w->scale[c] = rnd_f(p, 0.002f, 0.01f);
        o->bias_scale[c] = s_in * w->scale[c];
        o->bias[c] = rnd_in(p, -3000, 3000);
        /* not s_in·s_w/s_out (the weights are random, not trained): a sum of
         * `per` products of spread integers (about root·60·73) to outputs
         * of about ±40, so that they spread over the range */
        double M = 0.01 / (double)root;
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
    if (kind == QAT_QOP_RELU) o->act = QAT_ACT_RELU, o->act_min = p->t[o->output].q.zero_point;
    return o;
}

static void finish(prog *p) {
    p->q.output = p->o[p->q.n_ops - 1].output;
    char msg[400];
    qat_status st = qat_qmodel_check(&p->q, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
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

/* ---- the generated C against the runtime ------------------------------------------------ */

/* qat_runtime_run's output integers of n raw samples x. */
static int8_t *runtime_outputs(const qat_qmodel *q, const float *x, int n) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, n, off, &plan, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    size_t cb = (size_t)(plan.const_bytes + 63) / 64 * 64 + 64, ab = (size_t)(plan.arena_bytes + 63) / 64 * 64 + 64,
           sb = (size_t)(plan.scratch_bytes + 63) / 64 * 64 + 64;
    void *consts = aligned_alloc(64, cb), *arena = aligned_alloc(64, ab), *scratch = aligned_alloc(64, sb);
    /* zeroed as the engines' are: the GEMM reads padding whose values it
     * multiplies by zero weights or drops (src/runtime/kernels.h), which
     * valgrind cannot tell from a read that counts */
    memset(consts, 0, cb), memset(arena, 0, ab), memset(scratch, 0, sb);
    qat_runtime_prepare(q, &plan, consts);
    qat_input_quantize(q, x, n, (int8_t *)arena + plan.offset[q->input]);
    CU_ASSERT_EQUAL(qat_runtime_run(q, &plan, consts, arena, scratch, n), QAT_OK);
    int64_t out = qat_qtensor_numel(&q->tensors[q->output]);
    int8_t *y = malloc((size_t)(n * out));
    memcpy(y, (int8_t *)arena + plan.offset[q->output], (size_t)(n * out));
    free(consts), free(arena), free(scratch), free(off);
    return y;
}

static bool write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, size, f) == size;
    return (f && fclose(f) == 0) && ok;
}

/* Generates q's C as NAME, compiles it with tests/mcu/host_main.c, runs it
 * on n random raw samples and compares with the runtime; then the same on
 * a Cortex-M4 and a Cortex-M3 under qemu when they are installed. */
static void check_program(const qat_qmodel *q, const char *name, int n, uint64_t seed) {
    if (system("cc --version >/dev/null 2>&1") != 0) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    if (!getenv("QAT_SOURCE_DIR")) QAT_TEST_SKIP("QAT_SOURCE_DIR (the harness's tree) is not set");
    qat_codegen_source src;
    char msg[400], path[512], cmd[4096];
    qat_status st = qat_codegen_generate(q, name, &src, msg, sizeof msg);
    if (st) printf("\n  %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL(src.info.n_ops, q->n_ops);
    CU_ASSERT_EQUAL(src.info.input_size, qat_qtensor_numel(&q->tensors[q->input]));
    /* NAME.c carries the runtime's portable kernels, src/runtime/qk.h, byte for byte */
    snprintf(path, sizeof path, "%s/src/runtime/qk.h", getenv("QAT_SOURCE_DIR"));
    FILE *kf = fopen(path, "rb");
    CU_ASSERT_FATAL(kf != NULL);
    static char kernels[1 << 17];
    size_t kn = fread(kernels, 1, sizeof kernels - 1, kf);
    fclose(kf);
    kernels[kn] = '\0';
    CU_ASSERT(kn > 1000 && kn < sizeof kernels - 1 && strstr(src.text[1], kernels) != NULL);
    for (int k = 0; k < QAT_CODEGEN_FILES; k++) {
        CU_ASSERT(src.size[k] > 0 && strlen(src.text[k]) == src.size[k]);
        snprintf(path, sizeof path, "%s/%s%s", dir, name, qat_codegen_suffix(k));
        CU_ASSERT_FATAL(write_file(path, src.text[k], src.size[k]));
    }
    qat_codegen_source_free(&src);
    qat_codegen_source_free(&src); /* twice: harmless */
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = malloc(sizeof *x * (size_t)(n * in));
    prog r = {.rng = seed};
    for (int64_t i = 0; i < n * in; i++) x[i] = q->norm ? (float)rnd_in(&r, 0, 255) : rnd_f(&r, -3.0f, 3.0f);
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    CU_ASSERT_FATAL(write_file(path, x, sizeof *x * (size_t)(n * in)));
    int8_t *want = runtime_outputs(q, x, n);
    bool seen[256] = {false};
    int distinct = 0;
    for (int64_t i = 0; i < n * out; i++) distinct += !seen[want[i] + 128], seen[want[i] + 128] = true;
    if (distinct < n * out / 4) printf("\n  %s: %d distinct outputs of %lld\n", name, distinct, (long long)(n * out));
    CU_ASSERT(distinct >= n * out / 4); /* outputs that spread, not a saturated constant */
    /* the runtime's integers in host_main's format */
    snprintf(path, sizeof path, "%s/%s.want", dir, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d:", i);
        for (int64_t k = 0; k < out; k++) fprintf(f, " %d", want[i * out + k]);
        fprintf(f, "\n");
    }
    fclose(f);
    char up[64];
    size_t k = 0;
    for (; name[k] && k < sizeof up - 1; k++) up[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    up[k] = '\0';
    const char *src_dir = getenv("QAT_SOURCE_DIR");
    const char *strict = "-std=c99 -Wall -Wextra -Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion -O2";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc %s -c %s.c -o %s.o && cc %s -DQAT_MODEL=%s -DQAT_MODEL_UP=%s -DQAT_MODEL_HEADER='\"%s.h\"' "
             "-I. '%s/tests/mcu/host_main.c' %s_io.c %s.o -o %s.host && ./%s.host %s.f32 %d %s.out %s.inc && "
             "cmp %s.out %s.want",
             dir, strict, name, name, strict, name, up, name, src_dir, name, name, name, name, name, n, name, name,
             name, name);
    int rc = system(cmd);
    if (rc) printf("\n  failed: %s\n", cmd);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0 && system("command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null") == 0) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && bash '%s/tests/mcu/qemu_run.sh' . %s %s.inc %s-mcu >/dev/null && "
                 "grep '^[0-9]*:' %s-mcu/cortex-m4.txt | cmp -s - %s.want && "
                 "grep '^[0-9]*:' %s-mcu/cortex-m3.txt | cmp -s - %s.want",
                 dir, src_dir, name, name, name, name, name, name, name);
        rc = system(cmd);
        if (rc) printf("\n  failed: %s\n", cmd);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0) printf(" [%s: host, Cortex-M4 and Cortex-M3 equal the runtime]", name);
    } else if (rc == 0) {
        printf(" [%s: host equals the runtime; no arm-none-eabi-gcc/qemu-system-arm]", name);
    }
    free(x), free(want);
}

static void test_every_kind(void) {
    prog p;
    program_a(&p);
    check_program(&p.q, "prog_a", 12, 7);
    prog_free(&p);
}

static void test_normalized_pairs_global(void) {
    prog p;
    program_b(&p);
    check_program(&p.q, "prog_b", 12, 8);
    prog_free(&p);
}

/* Refusals come back as a status and one line in the caller's buffer. */
static void test_refusals(void) {
    prog p;
    program_b(&p);
    qat_codegen_source src;
    char msg[400];
    CU_ASSERT_EQUAL(qat_codegen_generate(&p.q, "not-c", &src, msg, sizeof msg), QAT_ERR_ARG);
    CU_ASSERT(strstr(msg, "not a C identifier") != NULL);
    CU_ASSERT(src.text[0] == NULL && src.text[1] == NULL && src.text[2] == NULL);
    CU_ASSERT_EQUAL(qat_codegen_generate(NULL, "m", &src, msg, sizeof msg), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_codegen_generate(&p.q, "m", NULL, NULL, 0), QAT_ERR_ARG);
    p.o[0].weight[0] = 200; /* outside the weight's storage range: the runtime's plan refuses it */
    CU_ASSERT_NOT_EQUAL(qat_codegen_generate(&p.q, "m", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT(strncmp(msg, "codegen: ", 9) == 0);
    CU_ASSERT(src.text[0] == NULL);
    CU_ASSERT_STRING_EQUAL(qat_codegen_suffix(1), ".c");
    CU_ASSERT(qat_codegen_suffix(3) == NULL);
    prog_free(&p);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "codegen_program")) return 2;
    static const qat_test_case cases[] = {
        {"every op kind, by hand: the generated C equals qat_runtime_run", test_every_kind},
        {"a normalized input, channel pairs, global pooling: the generated C equals the runtime",
         test_normalized_pairs_global},
        {"refusals: a status and one line, nothing generated", test_refusals},
        {NULL, NULL},
    };
    int rc = qat_test_main("codegen_program", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
