/* The C generator (qat/codegen.h) on the host: the generated files compile
 * with strict C99 warnings and compute the integer engine's integers, bit
 * for bit, on a graph with every op kind (trained a little), on a linear
 * op whose multipliers reach every branch of the requantization (left
 * shifts that saturate, a zero multiplier, the largest right shift,
 * rounding ties), and the float edges equal the engine's input
 * quantization and output dequantization on awkward values; where the Arm
 * toolchain and qemu are installed, the same inputs run on a Cortex-M4
 * (the DSP path) and a Cortex-M3 too. The same with the single rounding
 * (QAT_ROUNDING_SINGLE), told apart from the double one, and no float or
 * 64-bit shift helper in the Cortex-M builds. Refusals name what they
 * refuse. (tests/mcu/run.sh runs the reference models on MNIST images.) */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "qat/codegen.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/optim.h"
#include "model_util.h"
#include "test_util.h"

static char dir[256];

/* Compiles the generated NAME.c with strict C99 warnings and NAME_io.c and
 * tests/mcu/host_main.c beside it, runs it on n inputs x [n][in] (floats,
 * or with bytes raw bytes through NAME_quantize_input_u8: the harness's
 * -DQAT_INPUT_U8), and compares its output integers with want [n][out]
 * and (when wantf is given) its dequantized outputs with wantf. false with
 * a message when a step fails. */
static bool run_generated_ex(const char *name, const void *x, bool bytes, int n, int64_t in, const int32_t *want,
                             const float *wantf, int64_t out) {
    const char *src = getenv("QAT_SOURCE_DIR");
    char up[64], cmd[4096], path[512];
    size_t k = 0;
    for (; name[k] && k < sizeof up - 1; k++) up[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    up[k] = '\0';
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    size_t elem = bytes ? 1 : sizeof(float);
    if (!f || fwrite(x, elem * (size_t)in, (size_t)n, f) != (size_t)n) return false;
    fclose(f);
    const char *strict = "-std=c99 -Wall -Wextra -Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion -O2";
    const char *u8 = bytes ? "-DQAT_INPUT_U8" : "";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc %s -c %s.c -o %s.o && cc %s %s -DQAT_MODEL=%s -DQAT_MODEL_UP=%s "
             "-DQAT_MODEL_HEADER='\"%s.h\"' -I. '%s/tests/mcu/host_main.c' %s_io.c %s.o -o %s.host && "
             "./%s.host %s.f32 %d %s.out %s.inc %s.deq",
             dir, strict, name, name, strict, u8, name, up, name, src, name, name, name, name, name, n, name, name, name);
    if (system(cmd) != 0) return printf("\n  failed: %s\n", cmd), false;
    snprintf(path, sizeof path, "%s/%s.out", dir, name);
    FILE *o = fopen(path, "r");
    snprintf(path, sizeof path, "%s/%s.deq", dir, name);
    FILE *d = fopen(path, "r");
    int same = 0, total = 0;
    for (int i = 0; o && d && i < n; i++) {
        int idx = -1;
        if (fscanf(o, "%d:", &idx) != 1 || idx != i || fscanf(d, "%d:", &idx) != 1) break;
        for (int64_t j = 0; j < out; j++) {
            int v = 0;
            char hex[64] = "";
            if (fscanf(o, "%d", &v) != 1 || fscanf(d, "%63s", hex) != 1) break;
            float r = strtof(hex, NULL);
            total++;
            same += v == want[i * out + j] && (!wantf || memcmp(&r, &wantf[i * out + j], sizeof r) == 0);
        }
    }
    if (o) fclose(o);
    if (d) fclose(d);
    if (same != n * out) printf("\n  %s: %d of %lld outputs equal the engine's (%d read)\n", name, same, (long long)(n * out), total);
    if (same != n * out) return false;
    /* the same inputs on a Cortex-M4 (the DSP path) and a Cortex-M3 under
     * qemu, when the Arm toolchain is here: the same integers as the host */
    if (system("command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null") != 0) {
        printf(" [no arm-none-eabi-gcc/qemu-system-arm: host only]");
        return true;
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && MCU_DEFS='%s' bash '%s/tests/mcu/qemu_run.sh' . %s %s.inc %s-mcu >/dev/null && "
             "grep '^[0-9]*:' %s-mcu/cortex-m4.txt | cmp -s - %s.out && grep '^[0-9]*:' %s-mcu/cortex-m3.txt | cmp -s - %s.out",
             dir, u8, src, name, name, name, name, name, name, name);
    if (system(cmd) != 0) return printf("\n  failed: %s\n", cmd), false;
    printf(" [%s: host, Cortex-M4 and Cortex-M3 equal the engine]", name);
    return true;
}

static bool run_generated(const char *name, const float *x, int n, int64_t in, const int32_t *want,
                          const float *wantf, int64_t out) {
    return run_generated_ex(name, x, false, n, in, want, wantf, out);
}

static bool have_cc(void) { return system("cc --version >/dev/null 2>&1") == 0; }

/* Cortex-M builds of NAME.c: every core at -O2, and a Cortex-M0+ at -Os,
 * where GCC calls a helper for a 64-bit variable shift (the Thumb-2 cores
 * shift inline at every level); or only the Cortex-M0+'s two. */
#define HELPER_BUILDS_ALL "cortex-m0plus:-Os cortex-m0plus:-O2 cortex-m3:-O2 cortex-m4:-O2 cortex-m7:-O2 cortex-m33:-O2"
#define HELPER_BUILDS_M0PLUS "cortex-m0plus:-Os cortex-m0plus:-O2"

/* NAME.c (in dir) compiled with the strict flags for each of builds
 * ("core:-Ox ...") references no float routine (__aeabi_f*, __aeabi_d*)
 * and no 64-bit shift helper (__aeabi_llsl, __aeabi_llsr, __aeabi_lasr).
 * false, with the build, when one appears; true without the Arm toolchain. */
static bool no_helpers(const char *name, const char *builds) {
    if (system("command -v arm-none-eabi-gcc >/dev/null && command -v arm-none-eabi-nm >/dev/null") != 0) {
        printf(" [no arm-none-eabi-gcc: no helper check]");
        return true;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for c in %s; do arm-none-eabi-gcc -mcpu=${c%%%%:*} -mthumb -mfloat-abi=soft ${c#*:} -std=c99 -Wall -Wextra "
             "-Wpedantic -Werror -Wdouble-promotion -Wfloat-conversion -c %s.c -o %s-helpers.o || exit 2; "
             "if arm-none-eabi-nm -u %s-helpers.o | grep -E '__aeabi_([fd]|ll(sl|sr)|lasr)'; then echo \"  in %s.c on $c\"; "
             "exit 1; fi; done",
             dir, builds, name, name, name, name);
    return system(cmd) == 0;
}

/* ---- every op kind ---------------------------------------------------------------- */

static const char *const every_op_text = QAT_TEST_EVERY_OP;

/* A wide first convolution (7 taps a row: a DSP word and three single
 * taps, border columns on both sides, stride 2), a pointwise one over 6
 * channels (a group of four, then two one by one) with a 1x2 stride, a
 * 3x2 one over the same channels with padding wider than the kernel, a
 * depthwise one with two outputs per channel, then a flatten. */
static const char *const conv_text =
        "input shape=3,13,12\n"
        "conv2d    c1   input out=6 kernel=5x7 stride=2 pad=2x3\n"
        "relu      r1   c1\n"
        "conv2d    pw   r1 out=6 kernel=1 stride=1x2\n"
        "relu      rp   pw\n"
        "conv2d    c3   rp out=6 kernel=3x2 pad=1x2\n"
        "relu      r3   c3\n"
        "conv2d    dw   r3 out=12 kernel=3 pad=2 groups=depthwise\n"
        "relu      r2   dw\n"
        "maxpool2d mp   r2 kernel=2\n"
        "flatten   f    mp\n"
        "linear    fc   f out=7\n";

/* The model of text, built, prepared and trained 6 steps on random data
 * (rng seeded with seed, left for the caller's inputs). */
static qat_model *trained_model(qat_ctx *ctx, const char *text, const char *name, int seed, qat_rng *rng) {
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, name), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    qat_status st = qat_prepare(m, NULL);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    qat_rng_seed(rng, (uint64_t)seed);
    int64_t shape[3];
    int rank = qat_model_input_shape(m, shape);
    qat_test_warm_up(m, rank, shape, 6, rng);
    return m;
}

/* How many of the n·out output integers yq the program's other rounding
 * changes (the integer engine on q rounding the other way, inputs x). */
static int other_rounding_differs(qat_ctx *ctx, const qat_qmodel *q, const float *x, int n, const int32_t *yq) {
    qat_qmodel other = *q; /* the same arrays, the same multipliers */
    other.rounding = q->rounding == QAT_ROUNDING_SINGLE ? QAT_ROUNDING_DOUBLE : QAT_ROUNDING_SINGLE;
    int64_t out = qat_qtensor_numel(&q->tensors[q->output]);
    int32_t *y2 = malloc(sizeof *y2 * (size_t)(n * out));
    qat_engine *e = qat_engine_new(ctx, &other, QAT_ENGINE_INT, n);
    CU_ASSERT_FATAL(e != NULL && y2 != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, n, NULL, y2), QAT_OK);
    int differ = 0;
    for (int64_t i = 0; i < n * out; i++) differ += y2[i] != yq[i];
    qat_engine_free(e);
    free(y2);
    return differ;
}

/* 24 random inputs through the integer engine and the generated NAME (in
 * dir): the same integers (run_generated). Returns how many of them the
 * program's other rounding changes. */
static int same_as_engine(qat_ctx *ctx, const qat_qmodel *q, const char *name, qat_rng *rng) {
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    enum { N = 24 };
    float *x = malloc(sizeof *x * (size_t)(N * in)), *yf = malloc(sizeof *yf * (size_t)(N * out));
    int32_t *yq = malloc(sizeof *yq * (size_t)(N * out));
    for (int64_t i = 0; i < N * in; i++) x[i] = 1.5f * qat_rng_normal(rng);
    qat_engine *e = qat_engine_new(ctx, q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    CU_ASSERT(run_generated(name, x, N, in, yq, yf, out));
    int differ = other_rounding_differs(ctx, q, x, N, yq);
    qat_engine_free(e);
    free(x), free(yf), free(yq);
    return differ;
}

/* Runs the graph through the generator and the engine; returns the
 * generated constants' bytes (info.weight_bytes), -1 when skipped. */
static int64_t check_graph(const char *text, const char *name, int seed) {
    if (!have_cc()) {
        qat_test__skip("no C compiler (cc) on this machine");
        return -1;
    }
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_model *m = trained_model(ctx, text, name, seed, &rng);
    qat_codegen_info info;
    qat_status st = qat_codegen_model(m, 0, NULL, dir, name, &info); /* the library call from a trained model */
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    int64_t weight_bytes = info.weight_bytes;
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    int64_t in = qat_qtensor_numel(&q.tensors[q.input]), out = qat_qtensor_numel(&q.tensors[q.output]);
    CU_ASSERT_EQUAL(info.input_size, in);
    CU_ASSERT_EQUAL(info.output_size, out);
    CU_ASSERT(info.arena_bytes > 0 && info.weight_bytes > 0);
    same_as_engine(ctx, &q, name, &rng);
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
    return weight_bytes;
}

/* Rings of input rows (qk_conv_ring): a 3-channel stem and an 8-channel
 * 3x3 layer at stride 1 take the doubled ring (2), the stride-2 layer the
 * ring that moves its shared row (1); c1 has no ReLU, so its requantization
 * keeps the double rounding's sign term, the others' clamp lets it go.
 * The integers equal the engine's (on the Cortex-M4's DSP path too where
 * qemu is here: run_generated). */
static const char *const ring_text =
        "input shape=3,48,16\n"
        "conv2d    c0   input out=8 kernel=3 pad=1\n"
        "relu      r0   c0\n"
        "conv2d    c1   r0 out=8 kernel=3 pad=1\n"
        "conv2d    c2   c1 out=8 kernel=3 stride=2 pad=1\n"
        "relu      r2   c2\n"
        "flatten   f    r2\n"
        "linear    fc   f out=5\n";

/* The same with packed weights: 4 and 2 bits on the two 3x3 layers and 4
 * on a pointwise one, which runs as one row of positions (unpacked in the
 * DSP's dot), 2-bit taps in the depthwise kernel (unpacked once a channel)
 * and a 4-bit stem (re-laid as int8 for its ring once a run). */
static const char *const ring4_text =
        "input shape=3,48,16\n"
        "conv2d    c0   input out=8 kernel=3 pad=1 wbits=4\n"
        "relu      r0   c0\n"
        "conv2d    c1   r0 out=16 kernel=3 pad=1 wbits=4\n"
        "conv2d    c2   c1 out=8 kernel=3 stride=2 pad=1 wbits=2\n"
        "relu      r2   c2\n"
        "conv2d    dw   r2 out=8 kernel=3 pad=1 groups=depthwise wbits=2\n"
        "relu      rd   dw\n"
        "conv2d    pw   rd out=6 kernel=1 wbits=4\n"
        "relu      rp   pw\n"
        "flatten   f    rp\n"
        "linear    fc   f out=5\n";

/* Generates text's C as name: each of calls in it, the integers the engine's. */
static void check_calls(const char *text, const char *name, const char *const *calls, int n) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new(), *pctx = qat_ctx_new();
    qat_rng rng;
    qat_model *m = trained_model(ctx, text, name, 5, &rng);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    qat_codegen_source src;
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&q, name, &src, NULL, 0), QAT_OK);
    for (int k = 0; k < n; k++) {
        if (!strstr(src.text[1], calls[k])) printf("\n  no \"%s\" in the generated C", calls[k]);
        CU_ASSERT_PTR_NOT_NULL(strstr(src.text[1], calls[k]));
    }
    qat_codegen_source_free(&src);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_model(m, 0, NULL, dir, name, NULL), QAT_OK);
    same_as_engine(ctx, &q, name, &rng);
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
}

static void test_rings(void) {
    static const char *const calls[] = {"qk_conv_cols(x0, op0_w, 8, QK_COLS, 2, ", "qk_conv_rows(x0, op1_w, 8, QK_COLS, 2, ",
                                        "qk_conv_rows(x0, op2_w, 8, QK_COLS, 1, "};
    check_calls(ring_text, "rings", calls, 3);
    static const char *const calls4[] = {"qk_conv_cols(x0, op0_w, 4, QK_COLS, 2, ", "qk_conv_rows(x0, op1_w, 4, QK_COLS, 2, ",
                                         "qk_conv_rows(x0, op2_w, 2, QK_COLS, 1, ",
                                         "qk_dwconv3_padded(x0, op3_w, 2, ",
                                         "qk_conv_rows(x0, op4_w, 4, QK_COLS, 0, 8, 1, 192, 6, 1, 192, 1, 1, "};
    check_calls(ring4_text, "rings4", calls4, 5);
}

static void test_every_op(void) { check_graph(every_op_text, "every_op", 9); }
static void test_conv_shapes(void) { check_graph(conv_text, "convs", 4); }

/* The small-RAM plan's three forms (plan_rules.h): depthwise written over
 * its input at stride 1 and at stride 2 (a smaller map: the buffer's tail
 * freed), pointwise over its input with more output channels than input
 * (12 over 8, 99 positions: runs of 4 and a last of 3) and with fewer (6
 * over 12, 30 positions: a last run of 2), and convolutions fused with
 * the max pool after them: a pairs-kernel 3x2 (6 channels), a 1x1 with a
 * 3x3 pool, and conv_text's depthwise with two outputs per channel. */
static const char *const small_text =
        "input shape=3,11,9\n"
        "conv2d    c1   input out=8 kernel=3 pad=1\n"
        "relu      r1   c1\n"
        "conv2d    dw1  r1 out=8 kernel=3 pad=1 groups=depthwise\n"
        "relu      rd1  dw1\n"
        "conv2d    pw1  rd1 out=12 kernel=1\n"
        "relu      rp1  pw1\n"
        "conv2d    dw2  rp1 out=12 kernel=3 stride=2 pad=1 groups=depthwise\n"
        "relu      rd2  dw2\n"
        "conv2d    pw2  rd2 out=6 kernel=1\n"
        "relu      rp2  pw2\n"
        "conv2d    c3   rp2 out=8 kernel=3x2 pad=1\n"
        "relu      r3   c3\n"
        "maxpool2d mp   r3 kernel=2\n"
        "conv2d    c4   mp out=4 kernel=1\n"
        "maxpool2d mp2  c4 kernel=3\n"
        "flatten   f    mp2\n"
        "linear    fc   f out=5\n";

/* small_text with packed weights: 4 bits on dw1, pw1 and the fused c3, 2
 * on dw2, pw2 and the fused c4: each unpacked into the scratch (a
 * channel's row, or the pointwise matrix) before the int8 kernels. */
static const char *const small_packed_text =
        "input shape=3,11,9\n"
        "conv2d    c1   input out=8 kernel=3 pad=1\n"
        "relu      r1   c1\n"
        "conv2d    dw1  r1 out=8 kernel=3 pad=1 groups=depthwise wbits=4\n"
        "relu      rd1  dw1\n"
        "conv2d    pw1  rd1 out=12 kernel=1 wbits=4\n"
        "relu      rp1  pw1\n"
        "conv2d    dw2  rp1 out=12 kernel=3 stride=2 pad=1 groups=depthwise wbits=2\n"
        "relu      rd2  dw2\n"
        "conv2d    pw2  rd2 out=6 kernel=1 wbits=2\n"
        "relu      rp2  pw2\n"
        "conv2d    c3   rp2 out=8 kernel=3x2 pad=1 wbits=4\n"
        "relu      r3   c3\n"
        "maxpool2d mp   r3 kernel=2\n"
        "conv2d    c4   mp out=4 kernel=1 wbits=2\n"
        "maxpool2d mp2  c4 kernel=3\n"
        "flatten   f    mp2\n"
        "linear    fc   f out=5\n";

/* Generates the model's C with the small-RAM plan as NAME: the same
 * integers as the engine (host; Cortex-M4 and M3 under qemu when the
 * tools are here), in a smaller arena than the default plan's. */
static void check_small(const char *text, const char *name, int seed, const char *const *forms, int n_forms) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_model *m = trained_model(ctx, text, name, seed, &rng);
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    qat_codegen_source fast, small;
    qat_codegen_options opt = {.small_ram = true};
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&q, name, &fast, NULL, 0), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate_ex(&q, name, &opt, &small, NULL, 0), QAT_OK);
    printf(" [%s: arena %lld -> %lld bytes]", name, (long long)fast.info.arena_bytes, (long long)small.info.arena_bytes);
    CU_ASSERT(small.info.arena_bytes < fast.info.arena_bytes);
    CU_ASSERT_EQUAL(small.info.weight_bytes, fast.info.weight_bytes);
    for (int k = 0; k < n_forms; k++) {
        if (!strstr(small.text[1], forms[k])) {
            printf("\n  %s: no \"%s\" in the C; its lines with the form's first word:", name, forms[k]);
            char word[32];
            snprintf(word, sizeof word, "%.*s", (int)strcspn(forms[k], "("), forms[k]);
            for (const char *l = small.text[1]; (l = strstr(l, word)) != NULL; l++)
                printf("\n    %.*s", (int)strcspn(l, "\n"), l);
        }
        CU_ASSERT_PTR_NOT_NULL(strstr(small.text[1], forms[k]));
    }
    qat_codegen_source_free(&fast), qat_codegen_source_free(&small);
    CU_ASSERT_EQUAL_FATAL(qat_export_all(m, 0, NULL, &(qat_export_targets){.c_dir = dir, .c_name = name, .c_options = &opt},
                                         NULL), QAT_OK);
    same_as_engine(ctx, &q, name, &rng);
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
}

static void test_small_ram(void) {
    static const char *const forms[] = {"written over its input (y is x0)", "memcpy(y + (int32_t)c * 99",
                                        "memcpy(y + (int32_t)c * 30", "n = 99 - p <= 5 ? 99 - p : 4",
                                        "n = 30 - p <= 5 ? 30 - p : 4", "qk_conv_pairs(x0, op",
                                        "qk_maxpool(arena.b + ", "qk_conv_pw(x0, op"};
    check_small(small_text, "small", 5, forms, (int)(sizeof forms / sizeof *forms));
    static const char *const conv_forms[] = {"qk_conv(x0 + (int32_t)(o / 2) * "}; /* the depthwise, 2 outputs per channel */
    check_small(conv_text, "small_convs", 4, conv_forms, 1);
    static const char *const packed_forms[] = { /* ops: c1, dw1, pw1, dw2, pw2, c3 with mp, mp, c4 with mp2, ... */
        "qk_unpack(op1_w, c * 9, (c + 1) * 9, 4, arena.b + ", "qk_unpack(op2_w, 0, 96, 4, arena.b + ",
        "qk_unpack(op3_w, c * 9, (c + 1) * 9, 2, arena.b + ", "qk_unpack(op4_w, 0, 72, 2, arena.b + ",
        "qk_unpack(op5_w, o * 36, (o + 1) * 36, 4, arena.b + ", "qk_unpack(op7_w, o * 8, (o + 1) * 8, 2, arena.b + "};
    check_small(small_packed_text, "small_packed", 6, packed_forms, 6);
}

/* ---- per-tensor weights: one multiplier and shift an op ------------------------------ */

/* text with granularity=tensor on every conv2d and linear line (into out),
 * and in *channels_saved the sum over them of out= less one: the pairs a
 * per-channel program stores that a per-tensor one does not. */
static void per_tensor_text(const char *text, char *out, size_t len, int64_t *channels_saved) {
    size_t at = 0;
    *channels_saved = 0;
    for (const char *l = text; *l && at < len;) {
        size_t n = strcspn(l, "\n");
        bool weighted = !strncmp(l, "conv2d", 6) || !strncmp(l, "linear", 6);
        at += (size_t)snprintf(out + at, len - at, "%.*s%s\n", (int)n, l, weighted ? " granularity=tensor" : "");
        const char *o = weighted ? strstr(l, " out=") : NULL;
        if (o && o < l + n) *channels_saved += atoi(o + 5) - 1;
        l += n + (l[n] == '\n');
    }
    CU_ASSERT_FATAL(at < len);
}

/* The generated C's constant bytes of text's model (trained as check_graph
 * trains it), without compiling it. */
static int64_t generated_bytes(const char *text, const char *name, int seed) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_model *m = trained_model(ctx, text, name, seed, &rng);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    qat_codegen_source src;
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&q, name, &src, NULL, 0), QAT_OK);
    int64_t bytes = src.info.weight_bytes;
    qat_codegen_source_free(&src);
    qat_ctx_free(ctx);
    return bytes;
}

/* Per-tensor weights give every output channel of an op the same
 * multiplier and shift; the generated C stores that pair once (qk.h's
 * MS = 0), 8 bytes a channel fewer than per channel, and every kernel form
 * reads it there: conv_text's (strided stem, pointwise, the pairs kernel,
 * depthwise, a paired linear), the rings' (int8 and packed), every op kind,
 * and the small-RAM plan's channel-at-a-time and over-input forms. The
 * integers equal the engine's (host; Cortex-M4 and M3 under qemu where the
 * tools are). */
static void test_per_tensor_one_pair(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    static const struct {
        const char *text, *name;
        int seed;
    } graphs[] = {{conv_text, "pt_convs", 4}, {ring_text, "pt_rings", 3}, {ring4_text, "pt_rings4", 3},
                  {every_op_text, "pt_every_op", 9}};
    static char text[4096];
    for (size_t k = 0; k < sizeof graphs / sizeof *graphs; k++) {
        int64_t saved;
        per_tensor_text(graphs[k].text, text, sizeof text, &saved);
        int64_t per_channel = generated_bytes(graphs[k].text, graphs[k].name, graphs[k].seed);
        int64_t per_tensor = check_graph(text, graphs[k].name, graphs[k].seed);
        printf(" [%s: %lld -> %lld bytes]", graphs[k].name, (long long)per_channel, (long long)per_tensor);
        CU_ASSERT_EQUAL(per_channel - per_tensor, 8 * saved);
    }
    int64_t saved;
    per_tensor_text(small_text, text, sizeof text, &saved);
    check_small(text, "pt_small", 5, NULL, 0);
}

/* conv_text's layers with narrow weights, then two linear ops: each
 * kernel's packed form (docs/codegen.md, "Packed weights"). c1: qk_conv,
 * 4 bits, channel rows of 105 starting mid-group; pw: qk_conv_pairs over
 * a group of four and two single channels, 2 bits; c3: pairs, 3 bits
 * (stored at 4); dw: depthwise qk_conv, two outputs a block; fc1: 4 bits,
 * K = 192 whole groups; fc2: 2 bits, K = 20, a group of 16 and a tail. */
#define QAT_PACKED_TEXT(c1, pw, c3, dw, fc1, fc2)                               \
    "input shape=3,13,12\n"                                                     \
    "conv2d    c1   input out=6 kernel=5x7 stride=2 pad=2x3" c1 "\n"            \
    "relu      r1   c1\n"                                                       \
    "conv2d    pw   r1 out=6 kernel=1 stride=1x2" pw "\n"                       \
    "relu      rp   pw\n"                                                       \
    "conv2d    c3   rp out=6 kernel=3x2 pad=1x2" c3 "\n"                        \
    "relu      r3   c3\n"                                                       \
    "conv2d    dw   r3 out=12 kernel=3 pad=2 groups=depthwise" dw "\n"          \
    "relu      r2   dw\n"                                                       \
    "maxpool2d mp   r2 kernel=2\n"                                              \
    "flatten   f    mp\n"                                                       \
    "linear    fc1  f out=20" fc1 "\n"                                          \
    "relu      r4   fc1\n"                                                      \
    "linear    fc2  r4 out=7" fc2 "\n"

/* The packed kernels equal the engine (host, and the Cortex-M4's DSP path
 * and the M3's portable one where the tools are), and the constants shrink
 * by exactly the packed layout's bytes: c1 630 weights -> 316 bytes, pw 36
 * -> 12, c3 216 -> 108, dw 108 -> 56, fc1 20 rows of 192 -> 96 bytes each,
 * fc2 7 rows of 20 -> 8 bytes each (the same program at 8 bits stores a
 * byte a weight). */
static void test_packed_weights(void) {
    int64_t packed = check_graph(QAT_PACKED_TEXT(" wbits=4", " wbits=2", " wbits=3", " wbits=4", " wbits=4", " wbits=2"),
                                 "packed", 5);
    int64_t whole = check_graph(QAT_PACKED_TEXT("", "", "", "", "", ""), "unpacked", 5);
    if (packed < 0 || whole < 0) return;
    int64_t saved = (630 - 316) + (36 - 12) + (216 - 108) + (108 - 56) + 20 * (192 - 96) + 7 * (20 - 8);
    CU_ASSERT_EQUAL(packed, whole - saved);
}

/* ---- hand-made programs: the requantization's branches, the float edges ------------ */

static qat_aparams ap(float s, int32_t zp) {
    return (qat_aparams){.scale = s, .zero_point = zp, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
}

static qat_qtensor vec(const char *name, int64_t n, qat_aparams q) {
    qat_qtensor t = {.rank = 1, .shape = {n}, .q = q};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

enum { HK = 13, HO = 12, PK_MAX = 348, PO = 4, PAIRED_N = 40 };

/* A hand-made linear op: linear_program's input [13] -> linear [12] with
 * per-channel weights (zero points 0, one channel's 1 to check the
 * subtraction), biases up to ±2^15 and one multiplier per branch of
 * MultiplyByQuantizedMultiplier; or paired_program's input [K <= PK_MAX]
 * -> [PO]. */
typedef struct {
    qat_qtensor ts[2];
    qat_qop op;
    qat_qmodel q;
    int32_t w[PO * PK_MAX], b[HO], wzp[HO], mult[HO], shift[HO];
    float bs[HO], wsc[HO];
} linear_fixture;

static void linear_program(linear_fixture *f, qat_rng *rng) {
    qat_qmodel *q = &f->q;
    qat_qtensor *ts = f->ts;
    qat_qop *op = &f->op;
    int32_t *w = f->w, *b = f->b, *wzp = f->wzp, *mult = f->mult, *shift = f->shift;
    float *bs = f->bs, *wsc = f->wsc;
    ts[0] = vec("input", HK, ap(0.05f, -7));
    ts[1] = vec("fc", HO, ap(0.1f, 5));
    for (int i = 0; i < HO * HK; i++) w[i] = (int32_t)(qat_rng_uniform(rng) * 254.0f) - 127;
    for (int o = 0; o < HO; o++) {
        b[o] = (int32_t)((qat_rng_uniform(rng) - 0.5f) * 65536.0f);
        bs[o] = 0.001f, wsc[o] = 0.01f, wzp[o] = 0;
    }
    wzp[3] = 1;
    for (int i = 0; i < HK; i++) w[3 * HK + i] = w[3 * HK + i] > 120 ? 120 : w[3 * HK + i];
    const int32_t m[HO] = {1 << 30, 1 << 30, 2147483647, 1 << 30, 0, 1518500250, 1 << 30, 1 << 30, 1 << 30,
                           1999999999, 1 << 30, 1073741825};
    const int32_t s[HO] = {-8, -9, 30, -10, 0, -31, -5, -12, 1, -20, -11, 18};
    memcpy(mult, m, sizeof m), memcpy(shift, s, sizeof s);
    *op = (qat_qop){.kind = QAT_QOP_LINEAR, .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1, .act_min = -128,
                    .act_max = 127, .weight = w, .bias = b, .bias_scale = bs, .n_mult = HO, .multiplier = mult,
                    .shift = shift};
    snprintf(op->name, sizeof op->name, "fc");
    op->wq = (qat_qtype){.bits = 8, .is_signed = true, .qmin = -127, .qmax = 127, .rank = 2, .shape = {HO, HK},
                         .block = {1, HK}, .pshape = {HO, 1}, .nparams = HO, .scale = wsc, .zero_point = wzp};
    *q = (qat_qmodel){.n_tensors = 2, .n_ops = 1, .tensors = ts, .ops = op, .input = 0, .output = 1, .config = ""};
}

enum { BRANCH_N = 200 };

/* linear_program f through the C (as name) against the engine on
 * BRANCH_N inputs past both clamps: x and the engine's integers yq out. */
static void branches_run(qat_ctx *ctx, linear_fixture *f, qat_rng *rng, const char *name, float *x, int32_t *yq) {
    enum { N = BRANCH_N };
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &f->q), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &f->q, dir, name, NULL), QAT_OK);
    float yf[N * HO];
    for (int i = 0; i < N * HK; i++) x[i] = (qat_rng_uniform(rng) - 0.5f) * 14.0f; /* past both ends */
    qat_engine *e = qat_engine_new(ctx, &f->q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    int low = 0, high = 0, inside = 0;
    for (int i = 0; i < N * HO; i++) low += yq[i] == -128, high += yq[i] == 127, inside += yq[i] > -128 && yq[i] < 127;
    if (!(low > 0 && high > 0 && inside > N * HO / 3)) printf("\n  %d low, %d high, %d inside\n", low, high, inside);
    CU_ASSERT(low > 0 && high > 0 && inside > N * HO / 3); /* the test sees both clamps and the values between */
    CU_ASSERT(run_generated(name, x, N, HK, yq, yf, HO));
    CU_ASSERT(no_helpers(name, HELPER_BUILDS_ALL));
    qat_engine_free(e);
}

static void test_requant_branches(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    linear_fixture f;
    linear_program(&f, &rng);
    float x[BRANCH_N * HK];
    int32_t yq[BRANCH_N * HO];
    branches_run(ctx, &f, &rng, "branches", x, yq);
    qat_ctx_free(ctx);
}

/* A 4-bit linear op whose zero points are not all 0 (channel 3's is 1):
 * the generator packs w - zp while every difference fits 4 bits (and the
 * packed code equals the engine on the requantization's branches), and
 * stores the op as int8 when one leaves them (channel 3's -8 - 1 = -9), so
 * the result never depends on a zero point. The constants count the bytes
 * stored: 12 rows of 13 weights packed in 8 bytes each, else 13. */
static void test_packed_zero_points(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    linear_fixture f;
    linear_program(&f, &rng);
    f.op.wq.bits = 4, f.op.wq.qmin = -8, f.op.wq.qmax = 7;
    for (int i = 0; i < HO * HK; i++) f.w[i] = (int32_t)(qat_rng_uniform(&rng) * 15.0f) - 7; /* [-7, 7] */
    f.w[3 * HK + 5] = -7, f.w[3 * HK + 6] = 7;                                                 /* minus 1: -8 and 6 */
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &f.q), QAT_OK);
    qat_codegen_source src;
    char msg[256];
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&f.q, "pz", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT_EQUAL(src.info.weight_bytes, HO * 8 + 3 * 4 * HO);
    CU_ASSERT(strstr(src.text[1], "4 bits each, packed") != NULL);
    qat_codegen_source_free(&src);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &f.q, dir, "pz", NULL), QAT_OK);
    enum { N = 200 };
    float x[N * HK], yf[N * HO];
    int32_t yq[N * HO];
    for (int i = 0; i < N * HK; i++) x[i] = (qat_rng_uniform(&rng) - 0.5f) * 14.0f;
    qat_engine *e = qat_engine_new(ctx, &f.q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    CU_ASSERT(run_generated("pz", x, N, HK, yq, yf, HO));
    qat_engine_free(e);
    f.w[3 * HK + 5] = -8; /* -8 - 1 = -9: not 4 bits */
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&f.q, "pz", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT_EQUAL(src.info.weight_bytes, HO * HK + 3 * 4 * HO);
    CU_ASSERT(strstr(src.text[1], "bits each, packed") == NULL);
    qat_codegen_source_free(&src);
    qat_ctx_free(ctx);
}

/* The input quantization (NAME_quantize_input) against the engine's:
 * a ReLU that clamps nothing passes the quantized input through. Ties
 * (round half to even), the clamps, NaN, infinities, -0 and values one
 * float step either side of a tie. */
static void test_io_equals_engine(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    enum { K = 16, N = 64 };
    const float s = 0.0372f;
    qat_qtensor ts[2] = {vec("input", K, ap(s, -11)), vec("r", K, ap(s, -11))};
    ts[0].q.qmin = ts[1].q.qmin = -100, ts[0].q.qmax = ts[1].q.qmax = 90; /* a narrower storage range */
    qat_qop op = {.kind = QAT_QOP_RELU, .name = "r", .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1,
                  .act_min = -100, .act_max = 90};
    qat_qmodel q = {.n_tensors = 2, .n_ops = 1, .tensors = ts, .ops = &op, .input = 0, .output = 1, .config = ""};
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &q), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &q, dir, "io", NULL), QAT_OK);
    float x[N * K], yf[N * K];
    int32_t yq[N * K];
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    for (int i = 0; i < N * K; i++) {
        float t = (float)((int)(qat_rng_uniform(&rng) * 240.0f) - 120) + 0.5f; /* a tie, in steps */
        int kind = i % 6;
        x[i] = kind == 0 ? t * s : kind == 1 ? nextafterf(t * s, 0.0f) : kind == 2 ? nextafterf(t * s, 1e9f)
             : kind == 3 ? (qat_rng_uniform(&rng) - 0.5f) * 10.0f : (float)((int)(qat_rng_uniform(&rng) * 250.0f) - 125) * s;
    }
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f, x[4] = 1e30f, x[5] = -1e30f, x[6] = 1e-40f;
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    CU_ASSERT(run_generated("io", x, N, K, yq, yf, K));
    qat_engine_free(e);
    qat_ctx_free(ctx);
}

/* ---- the input normalization: raw floats and raw bytes ----------------------------------- */

/* A program whose output is its input integers ([3, 16, 16] -> flatten),
 * with a per-channel normalization of raw bytes: one sample holds every
 * byte value once per channel. NAME_quantize_input_u8 (its table, in
 * NAME.c) and NAME_quantize_input on raw floats give the engine's
 * integers, on the host and (where qemu runs) on the Cortex-M, whose
 * harness quantizes the bytes on the device. */
static void test_normalized_input_every_byte(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    static qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = 3, n.divisor = 255.0f, n.raw_uint8 = true;
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    memcpy(n.mean, mean, sizeof mean), memcpy(n.std, std, sizeof std);
    qat_aparams a = ap(0.0171f, 3);
    a.qmin = -120, a.qmax = 110; /* a storage range narrower than the type: the clamp shows */
    qat_qtensor ts[2] = {{.rank = 3, .shape = {3, 16, 16}, .q = a}, vec("flat", 768, a)};
    snprintf(ts[0].name, sizeof ts[0].name, "input");
    qat_qop op = {.kind = QAT_QOP_FLATTEN, .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1, .act_min = a.qmin,
                  .act_max = a.qmax};
    snprintf(op.name, sizeof op.name, "flat");
    qat_qmodel q = {.n_tensors = 2, .n_ops = 1, .tensors = ts, .ops = &op, .input = 0, .output = 1, .config = "",
                    .norm = &n};
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &q), QAT_OK);
    qat_codegen_info info;
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &q, dir, "norm_bytes", &info), QAT_OK);
    CU_ASSERT(info.weight_bytes >= 3 * 256); /* the table, in flash */
    enum { N = 3, IN = 768 };
    static uint8_t xb[N * IN];
    static float x[N * IN], yf[N * IN];
    static int32_t yq[N * IN], yb[N * IN];
    qat_rng rng;
    qat_rng_seed(&rng, 12);
    for (int i = 0; i < N * IN; i++) xb[i] = (uint8_t)(i < IN ? (uint32_t)(i % 256) : qat_rng_below(&rng, 256));
    for (int i = 0; i < N * IN; i++) x[i] = i < IN ? (float)xb[i] : qat_rng_uniform(&rng) * 300.0f - 20.0f;
    x[IN] = NAN, x[IN + 1] = INFINITY, x[IN + 2] = -INFINITY;
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run_u8(e, xb, N, NULL, yb), QAT_OK);
    CU_ASSERT(run_generated_ex("norm_bytes", xb, true, N, IN, yb, NULL, IN));
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    CU_ASSERT(run_generated("norm_bytes", x, N, IN, yq, yf, IN));
    qat_engine_free(e);
    qat_ctx_free(ctx);
}

/* The every-op graph trained on raw bytes with a two-channel
 * normalization: the generated C on raw floats and on raw bytes equals
 * the engine's qat_engine_run / qat_engine_run_u8. Without raw_uint8 no
 * byte function is written. */
static void test_normalized_model(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, every_op_text, "every_op"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    static qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = 2, n.divisor = 255.0f, n.raw_uint8 = true;
    n.mean[0] = 0.35f, n.std[0] = 0.21f, n.mean[1] = 0.6f, n.std[1] = 0.33f;
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 21);
    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m));
    for (int i = 0; i < 6; i++) { /* a few steps on raw bytes */
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){8, 2, 10, 9}, false);
        for (int64_t j = 0; x && j < x->numel; j++) x->data[j] = (float)qat_rng_below(&rng, 256);
        int32_t y[8] = {0, 1, 2, 3, 4, 0, 1, 2};
        CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), y)), QAT_OK);
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 1e-3f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &q, dir, "norm_every", NULL), QAT_OK);
    enum { N = 8, IN = 2 * 10 * 9, K = 5 };
    static uint8_t xb[N * IN];
    static float x[N * IN], yf[N * K];
    static int32_t yq[N * K], yb[N * K];
    for (int i = 0; i < N * IN; i++) xb[i] = (uint8_t)qat_rng_below(&rng, 256), x[i] = (float)xb[i] + 0.25f;
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run_u8(e, xb, N, NULL, yb), QAT_OK);
    CU_ASSERT(run_generated_ex("norm_every", xb, true, N, IN, yb, NULL, K));
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    CU_ASSERT(run_generated("norm_every", x, N, IN, yq, yf, K));
    qat_engine_free(e);
    /* float features (raw_uint8 off): no table, no byte function */
    qat_normalization f = n;
    f.raw_uint8 = false;
    q.norm = &f;
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &q, dir, "norm_float", NULL), QAT_OK);
    char path[400], cmd[1200];
    snprintf(path, sizeof path, "%s/norm_float.h", dir);
    snprintf(cmd, sizeof cmd, "grep -q quantize_input_u8 '%s' || grep -q input_table '%s/norm_float.c'", path, dir);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q NORM_CHANNELS '%s'", path);
    CU_ASSERT_EQUAL(system(cmd), 0);
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
}

/* ---- refusals --------------------------------------------------------------------- */

static void test_refusals_name_the_op(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    linear_fixture f;
    linear_program(&f, &rng);
    /* not a C identifier */
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, dir, "my-model", NULL), QAT_ERR_ARG);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "\"my-model\" is not a C identifier") != NULL);
    qat_ctx_clear_error(ctx);
    /* a directory that does not exist */
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, "/nonexistent/qat-dir", "m", NULL), QAT_ERR_IO);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "/nonexistent/qat-dir/m.h: cannot create a file beside it: No such file") != NULL);
    qat_ctx_clear_error(ctx);
    /* asymmetric weights whose difference from the zero point leaves int8 */
    f.wzp[5] = -100;
    f.w[5 * HK] = 100;
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, dir, "m", NULL), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0 (linear fc)") != NULL);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "do not fit int8") != NULL);
    qat_ctx_clear_error(ctx);
    f.wzp[5] = 0;
    /* 16-bit activations: the runtime's plan refuses them, naming the op */
    f.ts[1].q.bits = 16, f.ts[1].q.qmin = -32768, f.ts[1].q.qmax = 32767;
    f.op.act_min = -32768, f.op.act_max = 32767;
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, dir, "m", NULL), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0 (linear fc)") != NULL);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "i16") != NULL);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, NULL, dir, "m", NULL), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    /* sub-channel weights (blocks of 4 along the 13 inputs, the last one
     * ragged): generated for a linear op (test_subchannel_linear checks
     * them against the engine); a convolution's are refused by name
     * (test_subchannel_conv_refused) */
    f.ts[1].q.bits = 8, f.ts[1].q.qmin = -128, f.ts[1].q.qmax = 127;
    f.op.act_min = -128, f.op.act_max = 127;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &f.op.wq, 8, true, true, 2, (int64_t[]){HO, HK}, (int64_t[]){1, 4}, true),
                          QAT_OK);
    int32_t bm[HO * 4], bsh[HO * 4];
    for (int p = 0; p < HO * 4; p++) { /* s_in·s_w / s_acc = 16: multiplier 2^30, shift 5 */
        f.op.wq.scale[p] = 0.01f;
        int sh;
        CU_ASSERT_EQUAL(qat_quantize_multiplier(16.0, &bm[p], &sh), QAT_OK);
        bsh[p] = sh;
    }
    for (int o = 0; o < HO; o++) {
        f.bs[o] = 0.05f * 0.01f / 16.0f, f.b[o] /= 64;
        CU_ASSERT_EQUAL(qat_quantize_multiplier((double)f.bs[o] / 0.1, &f.mult[o], &f.shift[o]), QAT_OK);
    }
    f.op.block_multiplier = bm, f.op.block_shift = bsh;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &f.q), QAT_OK);
    qat_engine *e = qat_engine_new(ctx, &f.q, QAT_ENGINE_INT, 4);
    CU_ASSERT(e != NULL);
    qat_engine_free(e);
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, dir, "sub", NULL), QAT_OK);
    enum { N = 100 };
    float x[N * HK], yf[N * HO];
    int32_t yq[N * HO];
    for (int i = 0; i < N * HK; i++) x[i] = (qat_rng_uniform(&rng) - 0.5f) * 14.0f;
    e = qat_engine_new(ctx, &f.q, QAT_ENGINE_INT, N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
    if (have_cc()) CU_ASSERT(run_generated("sub", x, N, HK, yq, yf, HO));
    qat_engine_free(e);
    qat_ctx_free(ctx);
}

/* Sub-channel linear ops trained in a graph: 4 bits in blocks of 16
 * (packed; three blocks a row), 4 bits in blocks of 4 (a block shorter
 * than a packed group: stored as int8) and 2 bits in blocks of 16
 * (packed): the blocks' conversions in qk_linear, through packed and int8
 * rows, equal the engine. (Ragged last blocks: test_refusals_name_the_op's
 * hand-made program.) */
static void test_subchannel_linear(void) {
    check_graph("input shape=48\n"
                "linear fc1 input out=12 granularity=block:16 wbits=4\n"
                "relu   r1  fc1\n"
                "linear fc2 r1 out=32 granularity=block:4 wbits=4\n"
                "relu   r2  fc2\n"
                "linear fc3 r2 out=10 granularity=block:16 wbits=2\n",
                "sublin", 6);
}

/* A convolution with sub-channel weights: refused, naming the op. */
static void test_subchannel_conv_refused(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m,
                                              "input shape=2,6,6\n"
                                              "conv2d c1 input out=4 kernel=3 granularity=block:9\n"
                                              "flatten f c1\n"
                                              "linear fc f out=3\n",
                                              "subconv"),
                          QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 2);
    qat_test_warm_up(m, 3, (int64_t[]){2, 6, 6}, 2, &rng);
    CU_ASSERT_EQUAL(qat_codegen_model(m, 0, NULL, dir, "subconv", NULL), QAT_ERR_UNSUPPORTED);
    if (!strstr(qat_ctx_error(ctx), "sub-channel")) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "(conv2d c1)") != NULL);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "sub-channel") != NULL);
    qat_ctx_free(ctx);
}

/* qat export --quantized MODEL --c DIR [--name NAME]: the files, the
 * JSON line, and the refusals (no --c; a name that is not a C identifier). */
static void test_cli_export_c(void) {
    const char *bin = getenv("QAT_BIN");
    if (!bin) QAT_TEST_SKIP("QAT_BIN is not set (ctest sets it)");
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    linear_fixture f;
    linear_program(&f, &rng);
    char path[512], cmd[2048], out[600];
    snprintf(path, sizeof path, "%s/cli.qat.h5", dir);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &f.q, path), QAT_OK);
    snprintf(out, sizeof out, "%s/cli-json.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' export --quantized '%s' --c '%s' --name cli_model --json > '%s' 2>/dev/null", bin, path,
             dir, out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    const char *ext[3] = {".h", ".c", "_io.c"};
    for (int k = 0; k < 3; k++) {
        char f[600];
        snprintf(f, sizeof f, "%s/cli_model%s", dir, ext[k]);
        FILE *fp = fopen(f, "r");
        CU_ASSERT(fp != NULL);
        if (fp) fclose(fp);
    }
    char line[512] = "";
    FILE *fp = fopen(out, "r");
    CU_ASSERT_FATAL(fp != NULL);
    CU_ASSERT(fgets(line, sizeof line, fp) != NULL);
    fclose(fp);
    CU_ASSERT(strstr(line, "\"name\": \"cli_model\"") != NULL && strstr(line, "\"input_size\": 13") != NULL);
    /* --quantized without --c, and a bad name: usage errors (exit 2), the name's with the reason */
    snprintf(cmd, sizeof cmd, "'%s' export --quantized '%s' >/dev/null 2>&1", bin, path);
    int rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    /* a name whose NAME.h would hide a standard header from a build that includes DIR */
    CU_ASSERT(!qat_codegen_name_ok("stdint") && qat_codegen_name_reserved("stdint"));
    CU_ASSERT(!qat_codegen_name_ok("arm_acle") && !qat_codegen_name_ok("string"));
    CU_ASSERT(qat_codegen_name_ok("stdint2") && qat_codegen_name_ok("strings") && !qat_codegen_name_reserved("model"));
    snprintf(cmd, sizeof cmd, "'%s' export --quantized '%s' --c '%s' --name 9lives 2>&1 | grep -q 'not a C identifier'", bin,
             path, dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s' export --quantized '%s' --c '%s' --name 9lives >/dev/null 2>&1", bin, path, dir);
    rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    qat_ctx_free(ctx);
}

/* ---- names from files never reach the generated source raw ------------------------- */

/* Reads a whole file into buf (len bytes at most); its length or -1. */
static long slurp(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* ---- paired-byte weights (qk_linear_paired) --------------------------------------- */

/* input [K] -> linear [PO], every weight pair (a, b) of row o from pick */
static void paired_program(linear_fixture *f, int K, void (*pick)(int o, int k, int32_t *a, int32_t *b, qat_rng *rng),
                           qat_rng *rng) {
    f->ts[0] = vec("input", K, ap(0.05f, -7));
    f->ts[1] = vec("fc", PO, ap(40.0f, 3));
    for (int o = 0; o < PO; o++) {
        for (int k = 0; k < K; k += 2) pick(o, k, &f->w[o * K + k], &f->w[o * K + k + 1], rng);
        f->b[o] = (o - 2) * 40000, f->bs[o] = 0.0005f, f->wsc[o] = 0.01f, f->wzp[o] = 0;
        f->mult[o] = 1518500250, f->shift[o] = (K > 200 ? -16 : -11) - o % 2;
    }
    f->op = (qat_qop){.kind = QAT_QOP_LINEAR, .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1, .act_min = -128,
                      .act_max = 127, .weight = f->w, .bias = f->b, .bias_scale = f->bs, .n_mult = PO,
                      .multiplier = f->mult, .shift = f->shift};
    snprintf(f->op.name, sizeof f->op.name, "fc");
    f->op.wq = (qat_qtype){.bits = 8, .is_signed = true, .qmin = -128, .qmax = 127, .rank = 2, .shape = {PO, K},
                           .block = {1, K}, .pshape = {PO, 1}, .nparams = PO, .scale = f->wsc, .zero_point = f->wzp};
    f->q = (qat_qmodel){.n_tensors = 2, .n_ops = 1, .tensors = f->ts, .ops = &f->op, .input = 0, .output = 1,
                        .config = ""};
}

/* the pairs that test the stored form's edges: a of -128 (the low byte's
 * largest borrow), b of -128 after a >= 0 and -127 after a < 0 (the
 * stored odd byte at -128), 127 beside either sign; random elsewhere */
static void pick_edges(int o, int k, int32_t *a, int32_t *b, qat_rng *rng) {
    static const int32_t pairs[][2] = {{-128, 127}, {-128, -127}, {127, -128}, {-1, -127}, {0, -128}, {127, 127},
                                       {-128, -128 + 1}, {1, -128}};
    int j = (k / 2 + o) % 12;
    if (j < 8) *a = pairs[j][0], *b = pairs[j][1];
    else *a = (int32_t)(qat_rng_uniform(rng) * 255.0f) - 128, *b = (int32_t)(qat_rng_uniform(rng) * 254.0f) - 127;
}
/* every pair at the bound's worst, |a| = |b| = 127, one sign per row
 * (row 0 all -127: at inputs all 127 its sum is -2^31 + 256·2 002) */
static void pick_full(int o, int k, int32_t *a, int32_t *b, qat_rng *rng) {
    (void)k, (void)rng;
    *a = o == 0 || o == 3 ? -127 : 127, *b = o == 0 || o == 2 ? -127 : 127;
}
/* one pair the stored form cannot hold: b = -128 after a negative a */
static void pick_unpairable(int o, int k, int32_t *a, int32_t *b, qat_rng *rng) {
    pick_edges(o, k, a, b, rng);
    if (o == 2 && k == 6) *a = -3, *b = -128;
}

/* The program through the C against the engine on PAIRED_N inputs (all at
 * the top, all at the bottom, alternating, then random past both ends);
 * paired: whether its C takes qk_linear_paired. */
static void paired_check(linear_fixture *f, int K, const char *name, bool paired, int min_inside, qat_rng *rng) {
    qat_ctx *ctx = qat_ctx_new();
    static float x[PAIRED_N * PK_MAX], yf[PAIRED_N * PO];
    static int32_t yq[PAIRED_N * PO];
    static char text[1 << 20];
    char path[512];
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &f->q), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(ctx, &f->q, dir, name, NULL), QAT_OK);
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    CU_ASSERT_FATAL(slurp(path, text, sizeof text) > 0);
    CU_ASSERT_EQUAL(strstr(text, "    qk_linear_paired(x0") != NULL, paired);
    for (int i = 0; i < PAIRED_N; i++)
        for (int k = 0; k < K; k++)
            x[i * K + k] = i == 0 ? 9.0f : i == 1 ? -9.0f : i == 2 ? (k % 2 ? 9.0f : -9.0f)
                         : i == 3 ? (k % 2 ? -9.0f : 9.0f) : (qat_rng_uniform(rng) - 0.5f) * 14.0f;
    qat_engine *e = qat_engine_new(ctx, &f->q, QAT_ENGINE_INT, PAIRED_N);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, PAIRED_N, yf, yq), QAT_OK);
    int inside = 0;
    for (int i = 0; i < PAIRED_N * PO; i++) inside += yq[i] > -128 && yq[i] < 127;
    if (inside < min_inside) printf("\n  %s: %d outputs inside the clamps\n", name, inside);
    CU_ASSERT(inside >= min_inside); /* the sums reach the output, not only its clamps */
    CU_ASSERT(run_generated(name, x, PAIRED_N, K, yq, yf, PO));
    qat_engine_free(e);
    qat_ctx_free(ctx);
}

/* Linear ops whose weights the DSP reads as halfword pairs: the edges of
 * the stored form, and the accumulator's bound (every pair at ±127: 172
 * pairs are under 2^23 / (127·384), 174 are not), equal the engine on the
 * host, a Cortex-M4 (the paired kernel) and a Cortex-M3 (the plain one);
 * what the stored form cannot hold, or the bound refuses, runs the plain
 * kernel everywhere. */
static void test_paired_weights(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    static linear_fixture f;
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    paired_program(&f, 96, pick_edges, &rng);
    paired_check(&f, 96, "paired_edges", true, PAIRED_N * PO / 3, &rng);
    paired_program(&f, 344, pick_full, &rng);
    paired_check(&f, 344, "paired_bound", true, PAIRED_N * PO / 3, &rng);
    paired_program(&f, 348, pick_full, &rng);
    paired_check(&f, 348, "paired_over", false, PAIRED_N * PO / 3, &rng);
    paired_program(&f, 96, pick_unpairable, &rng);
    paired_check(&f, 96, "paired_unpairable", false, PAIRED_N * PO / 3, &rng);
}

/* The SN literal of NAME.c's paired linear call (the one after its three
 * arrays and the multiplier step), -1 where there is none. */
static int generated_sn(const char *name) {
    char path[512];
    static char text[1 << 20];
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    if (slurp(path, text, sizeof text) <= 0) return -1;
    const char *call = strstr(text, "    qk_linear_paired(x0"), *at = call ? strstr(call, "op0_s, ") : NULL;
    at = at ? strchr(at + 7, ',') : NULL; /* past the multiplier step (MS) */
    return at ? atoi(at + 2) : -1;
}

/* The output's zero point folded into the requantization's nudge (every
 * shift in [-23, -2]: SN = 2, q_requant_fold), at both ends of that range
 * and of the zero point's, on the paired kernel: the same integers as the
 * engine on the host, a Cortex-M4 and a Cortex-M3; a shift of -24 or -1
 * beside them leaves the fold (SN = 1), with the same integers. So do one
 * shift for every channel (SN = 1 - shift: 3 and 24), accumulators at the
 * fold's bound (2^29: the DSP's SMMLAR takes them doubled) and just past
 * it. */
static void test_requant_fold(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    static linear_fixture f;
    static const int32_t zps[] = {-128, 127, 0}, mults[PO] = {1 << 30, 2147483647, 1518500250, 1073741825};
    static const int32_t shifts[][PO] = {{-2, -23, -9, -3}, {-22, -2, -14, -23}, {-24, -5, -9, -2}, {-1, -6, -9, -12}};
    static const char *const names[] = {"fold_a", "fold_b", "fold_c", "fold_d", "nofold_a", "nofold_b"};
    qat_rng rng;
    qat_rng_seed(&rng, 6);
    int k = 0;
    for (int s = 0; s < 4; s++)
        for (int z = 0; z < (s < 2 ? 2 : 1); z++, k++) {
            paired_program(&f, 96, pick_edges, &rng);
            f.ts[1].q.zero_point = zps[s < 2 ? z : 2];
            memcpy(f.mult, mults, sizeof mults), memcpy(f.shift, shifts[s], sizeof shifts[s]);
            paired_check(&f, 96, names[k], true, 0, &rng);
            CU_ASSERT_EQUAL(generated_sn(names[k]), s < 2 ? 2 : 1);
        }
    /* one shift for every channel, at both ends of the range: SN = 1 - shift, the shift a literal */
    static const int32_t same[2] = {-2, -23};
    for (int j = 0; j < 2; j++) {
        paired_program(&f, 96, pick_edges, &rng);
        f.ts[1].q.zero_point = zps[j];
        for (int o = 0; o < PO; o++) f.mult[o] = mults[o], f.shift[o] = same[j];
        if (j == 1)
            for (int o = 0; o < PO; o++) f.b[o] *= 2000; /* sums that reach the output past a shift of 23 */
        const char *name = j ? "fold_same_b" : "fold_same_a";
        paired_check(&f, 96, name, true, 0, &rng);
        CU_ASSERT_EQUAL(generated_sn(name), 1 - same[j]);
    }
    /* the accumulators' bound of the fold (the DSP doubles them for SMMLAR): biases that put
     * |bias| + 255·Σ|w| of each row at 2^29 - 1 (fold, sums near ±2^29) and at 2^29 (no fold) */
    static const int32_t deep[PO] = {-23, -22, -23, -22};
    for (int over = 0; over < 2; over++) {
        paired_program(&f, 96, pick_edges, &rng);
        for (int o = 0; o < PO; o++) {
            int32_t sum = 0;
            for (int k = 0; k < 96; k++) sum += 255 * abs(f.w[o * 96 + k]);
            f.b[o] = (o % 2 ? 1 : -1) * ((1 << 29) - sum - 1 + over);
        }
        memcpy(f.mult, mults, sizeof mults), memcpy(f.shift, deep, sizeof deep);
        f.ts[1].q.zero_point = 0;
        const char *name = over ? "nofold_bound" : "fold_bound";
        paired_check(&f, 96, name, true, PAIRED_N * PO / 2, &rng);
        CU_ASSERT_EQUAL(generated_sn(name), over ? 1 : 2);
    }
}

/* A quantized model whose op name holds a comment's end, a newline and C
 * code (written into the file with HDF5 directly, as an attacker would)
 * is refused on load by the name rule of every name, with a one-line
 * message naming the op; `export --quantized M --c DIR` then writes
 * nothing. The same name put in a program in memory (no loader) is
 * refused by the generator's own check, which writes nothing either. */
static void test_op_name_with_code_is_refused(void) {
    static const char *const evil = "x*/int evil=1;\n/*"; /* 18 bytes: fits a name */
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    linear_fixture f;
    linear_program(&f, &rng);
    char path[512], outdir[512], cmd[4096];
    snprintf(path, sizeof path, "%s/evil.qat.h5", dir);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &f.q, path), QAT_OK);
    for (int k = 0; k < 2; k++) { /* the op's name, then the tensor's */
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(ctx, &f.q, path), QAT_OK);
        H5E_BEGIN_TRY {
            hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
            const char *group = k == 0 ? "ops/0" : "tensors/1";
            CU_ASSERT(f >= 0 && H5Adelete_by_name(f, group, "name", H5P_DEFAULT) >= 0);
            CU_ASSERT(H5LTset_attribute_string(f, group, "name", evil) >= 0);
            H5Fclose(f);
        }
        H5E_END_TRY;
        qat_qmodel *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l);
        CU_ASSERT_EQUAL(qat_qmodel_load(ctx, path, l), QAT_ERR_FORMAT);
        const char *msg = qat_ctx_error(ctx);
        if (!strstr(msg, "bad name")) printf("\n  %s\n", msg);
        CU_ASSERT(strstr(msg, k == 0 ? "op 0: bad name" : "tensor 1: bad name") != NULL);
        CU_ASSERT(strstr(msg, "holds '/' at byte 2") != NULL);
        CU_ASSERT(strchr(msg, '\n') == NULL); /* one line: the name is shown escaped */
        CU_ASSERT(strstr(msg, "int evil") != NULL && strstr(msg, "\\x0a") != NULL);
        qat_ctx_clear_error(ctx);
    }
    const char *bin = getenv("QAT_BIN");
    if (bin) { /* the command line: exit status 1, nothing written */
        snprintf(outdir, sizeof outdir, "%s/evil-out", dir);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && '%s' export --quantized '%s' --c '%s' --name evil 2>/dev/null; "
                 "rc=$?; [ $rc = 1 ] && [ -z \"$(ls -A '%s')\" ]", outdir, bin, path, outdir, outdir);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    /* in memory, past the loader: the generator checks the names itself */
    snprintf(f.op.name, sizeof f.op.name, "%.31s", evil);
    snprintf(outdir, sizeof outdir, "%s/evil-mem", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", outdir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    CU_ASSERT_EQUAL(qat_codegen_c(ctx, &f.q, outdir, "evil", NULL), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "op 0: bad name") != NULL);
    snprintf(cmd, sizeof cmd, "[ -z \"$(ls -A '%s')\" ]", outdir);
    CU_ASSERT_EQUAL(system(cmd), 0);
    qat_ctx_free(ctx);
}

/* Names the rule admits may still hold C's special characters: '*', a
 * backslash (which splices lines), "??=" (a trigraph, '#'), quotes.
 * None reaches the generated files raw: each appears as its %XX escape,
 * the files compile with trigraphs on and strict warnings (-Wcomment
 * catches a comment opened inside a comment), and the run matches the
 * engine as usual. */
static void test_generated_source_escapes_names(void) {
    static const char *const names[] = {"cz*", "rz\\", "fz\?\?=", "fcz\"';{}", "p-q_9"}; /* "??=": a trigraph of '#' */
    char text[600];
    snprintf(text, sizeof text, "input shape=1,6,6\nconv2d %s input out=2 kernel=3\nrelu %s %s\nflatten %s %s\n"
             "linear %s %s out=3\nrelu %s %s\n", names[0], names[1], names[0], names[2], names[1], names[3], names[2],
             names[4], names[3]);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_status st = qat_model_from_text(m, text, "names");
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 2);
    qat_test_warm_up(m, 3, (int64_t[]){1, 6, 6}, 4, &rng);
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/names.qat.h5", dir); /* through a file, as export --quantized reads it */
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_save(pctx, &q, path), QAT_OK);
    qat_qmodel *l = qat_ctx_alloc(pctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(pctx, path, l), QAT_OK);
    CU_ASSERT_STRING_EQUAL(l->ops[0].name, names[0]); /* the conv (ReLU fused), then flatten, then the linear */
    CU_ASSERT_STRING_EQUAL(l->ops[l->n_ops - 1].name, names[3]);
    CU_ASSERT_EQUAL_FATAL(qat_codegen_c(pctx, l, dir, "names", NULL), QAT_OK);
    static char body[1 << 20];
    const char *ext[3] = {".h", ".c", "_io.c"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/names%s", dir, ext[k]);
        CU_ASSERT_FATAL(slurp(path, body, sizeof body) > 0);
        for (int i = 0; i < 4; i++) CU_ASSERT(strstr(body, names[i]) == NULL); /* the last one needs no escape */
        if (k == 1) { /* in NAME.c, each op's comments carry the escaped form */
            CU_ASSERT(strstr(body, "/* op 0: conv2d cz%2A, ") != NULL);
            CU_ASSERT(strstr(body, "linear fcz%22%27%3B%7B%7D */") != NULL);
        }
    }
    if (have_cc()) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -trigraphs -Wall -Wextra -Wpedantic -Wcomment -Werror "
                 "-fsyntax-only names.c names_io.c", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        int64_t in = qat_qtensor_numel(&l->tensors[l->input]), out = qat_qtensor_numel(&l->tensors[l->output]);
        enum { N = 8 };
        float x[N * 36], yf[N * 3];
        int32_t yq[N * 3];
        CU_ASSERT_FATAL(in == 36 && out == 3);
        for (int i = 0; i < N * 36; i++) x[i] = qat_rng_normal(&rng);
        qat_engine *e = qat_engine_new(pctx, l, QAT_ENGINE_INT, N);
        CU_ASSERT_FATAL(e != NULL);
        CU_ASSERT_EQUAL(qat_engine_run(e, x, N, yf, yq), QAT_OK);
        CU_ASSERT(run_generated("names", x, N, in, yq, yf, out));
        qat_engine_free(e);
    }
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
}

/* ---- the single rounding (QAT_ROUNDING_SINGLE) ------------------------------------------ */

/* Whether the generated C switches the kernels to the single rounding. */
static bool has_single_switch(const char *c_text) { return strstr(c_text, "\n#define QK_SINGLE_ROUNDING 1\n") != NULL; }

/* The model of text trained as check_graph's and exported with the single
 * rounding, as `qat export --checkpoint C --rounding single --c DIR` does
 * (qat_export_all; small: the small-RAM plan): NAME.c switches the
 * kernels, equals the engine rounding once (host; Cortex-M4 and M3 where
 * qemu runs) and calls no helper on a Cortex-M0+. Returns how many of the
 * engine's output integers rounding twice changes, -1 when skipped. */
static int check_single(const char *text, const char *name, int seed, bool small) {
    if (!have_cc()) {
        qat_test__skip("no C compiler (cc) on this machine");
        return -1;
    }
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_model *m = trained_model(ctx, text, name, seed, &rng);
    qat_codegen_options opt = {.small_ram = small};
    qat_status st = qat_export_all(
        m, 0, NULL, &(qat_export_targets){.c_dir = dir, .c_name = name, .c_options = &opt, .rounding = QAT_ROUNDING_SINGLE},
        NULL);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    char path[512];
    static char body[1 << 20];
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    CU_ASSERT_FATAL(slurp(path, body, sizeof body) > 0);
    CU_ASSERT(has_single_switch(body));
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
    q.rounding = QAT_ROUNDING_SINGLE;
    int differ = same_as_engine(ctx, &q, name, &rng);
    printf(" [%s: rounding twice changes %d integers]", name, differ);
    CU_ASSERT(no_helpers(name, HELPER_BUILDS_M0PLUS)); /* (the Thumb-2 builds: qemu_run.sh's, and the branches') */
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
    return differ;
}

/* Each kernel path check_graph and check_small cover, rounded once: every
 * op kind; wide, strided, padded and depthwise convolutions; packed
 * weights at 4, 3 and 2 bits; sub-channel linear ops (each block's sum
 * converted by q_mbqm, whose shifts are >= 0); the small-RAM plan's forms
 * (on packed weights: the same int8 kernels after the unpacking). Each
 * equals the engine. Rounding twice changes an output integer rarely (a
 * right shift by e changes in some 2^-e of the values, then the next
 * layers may hide it), so not every graph's outputs tell the roundings
 * apart on 24 inputs: their sum must, and test_single_requant_branches's
 * must, so C that rounded twice (no switch, or kernels that ignore it)
 * fails here. */
static void test_single_graphs(void) {
    const struct {
        const char *text, *name;
        int seed;
        bool small;
    } g[] = {
        {every_op_text, "every_op_s", 9, false},
        {conv_text, "convs_s", 4, false},
        {QAT_PACKED_TEXT(" wbits=4", " wbits=2", " wbits=3", " wbits=4", " wbits=4", " wbits=2"), "packed_s", 5, false},
        {"input shape=48\n"
         "linear fc1 input out=12 granularity=block:16 wbits=4\n"
         "relu   r1  fc1\n"
         "linear fc2 r1 out=32 granularity=block:4 wbits=4\n"
         "relu   r2  fc2\n"
         "linear fc3 r2 out=10 granularity=block:16 wbits=2\n",
         "sublin_s", 6, false},
        {small_packed_text, "small_packed_s", 6, true},
    };
    int differ = 0;
    for (size_t k = 0; k < sizeof g / sizeof *g; k++) {
        int d = check_single(g[k].text, g[k].name, g[k].seed, g[k].small);
        if (d < 0) return;
        differ += d;
    }
    CU_ASSERT(differ > 0);
}

/* linear_program's branches of the requantization (left shifts that
 * saturate, a zero multiplier, the largest right shift, ties) rounded
 * once: the C equals the engine on both clamps and between, and on these
 * inputs the roundings give different integers (a tie of a negative
 * product: half up against half away from zero). The double program's C
 * has no switch. And the helper check can fail: a 64-bit variable shift
 * on a Cortex-M0+ at -Os calls __aeabi_llsl. */
static void test_single_requant_branches(void) {
    if (!have_cc()) QAT_TEST_SKIP("no C compiler (cc) on this machine");
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    linear_fixture f;
    linear_program(&f, &rng);
    qat_codegen_source src;
    char msg[256];
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&f.q, "branches_d", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT(!has_single_switch(src.text[1]));
    qat_codegen_source_free(&src);
    f.q.rounding = QAT_ROUNDING_SINGLE;
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&f.q, "branches_s", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT(has_single_switch(src.text[1]));
    qat_codegen_source_free(&src);
    float x[BRANCH_N * HK];
    int32_t yq[BRANCH_N * HO];
    branches_run(ctx, &f, &rng, "branches_s", x, yq);
    int differ = other_rounding_differs(ctx, &f.q, x, BRANCH_N, yq);
    printf(" [rounding twice changes %d of %d integers]", differ, BRANCH_N * HO);
    CU_ASSERT(differ > 0);
    if (system("command -v arm-none-eabi-gcc >/dev/null && command -v arm-none-eabi-nm >/dev/null") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "cd '%s' && printf 'long long q(long long x, int s) { return x << s; }\\n' > llsl.c && "
                 "arm-none-eabi-gcc -mcpu=cortex-m0plus -mthumb -Os -c llsl.c -o llsl.o && "
                 "arm-none-eabi-nm -u llsl.o | grep -q __aeabi_llsl", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "codegen")) return 2;
    const qat_test_case cases[] = {
        {"every op kind: the generated C equals the integer engine on the host", test_every_op},
        {"wide, strided, padded and depthwise convolutions equal the engine", test_conv_shapes},
        {"rings of rows, doubled at stride 1, the sign left out under a ReLU, packed weights: = the engine", test_rings},
        {"the small-RAM plan: convolutions over their input and fused with pools, = the engine", test_small_ram},
        {"per-tensor weights: one multiplier and shift an op in flash, = the engine in every kernel form",
         test_per_tensor_one_pair},
        {"4-, 3- and 2-bit weights packed in flash equal the engine, in fewer bytes", test_packed_weights},
        {"4-bit weights with zero points: packed while w - zp fits, else int8", test_packed_zero_points},
        {"sub-channel linear ops at 4, 8 and 2 bits equal the engine", test_subchannel_linear},
        {"a sub-channel convolution is refused by name", test_subchannel_conv_refused},
        {"every branch of the requantization equals the engine", test_requant_branches},
        {"paired-byte weights: their edges and bound equal the engine, the rest runs plain", test_paired_weights},
        {"the zero point folded into the nudge (shifts -23..-2) equals the engine", test_requant_fold},
        {"NAME_quantize_input / NAME_dequantize_output equal the engine's", test_io_equals_engine},
        {"normalized input: every byte of every channel, raw bytes and raw floats", test_normalized_input_every_byte},
        {"normalized model: the generated C on raw floats and raw bytes equals the engine", test_normalized_model},
        {"refusals name the op or the argument", test_refusals_name_the_op},
        {"qat export --quantized MODEL --c DIR --name NAME", test_cli_export_c},
        {"an op name holding C code is refused on load and by the generator", test_op_name_with_code_is_refused},
        {"names reach the generated source only escaped", test_generated_source_escapes_names},
        {"rounded once: every kernel path's C equals the engine, and differs from rounding twice", test_single_graphs},
        {"rounded once: every branch of the requantization equals the engine, no helper on any core",
         test_single_requant_branches},
        {NULL, NULL},
    };
    int rc = qat_test_main("codegen", cases, argc, argv);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
