/* The C generator with only core and the program: this suite links
 * against the libraries qat_codegen and qat_runtime alone (no training
 * side, no HDF5, no BLAS, no libm; tests/CMakeLists.txt) and includes
 * nothing but qat/codegen.h and the runner. It writes integer programs by
 * hand, through the program's public fields (qat/runtime.h), with every
 * op kind the generator emits (convolutions wide, padded, strided,
 * grouped, depthwise and pointwise; linear; max, average and global
 * average pooling, requantizing or keeping their input's quantization;
 * add; concat; a table; ReLU; flatten; a normalized input; either
 * rounding), generates their C, compiles it with strict C99 warnings, and
 * checks that it computes qat_runtime_run's integers bit for bit on random
 * inputs, on the host and, where the Arm toolchain and qemu are
 * installed, on a Cortex-M4 (DSP path) and a Cortex-M3. */
#include <stdlib.h>

#include "qat/codegen.h"
#include "test_main.h"

int system(const char *command);

static char dir[256];

#define PROG_CHECK(cond) CU_ASSERT_FATAL(cond)
#include "programs.h"

/* ---- the generated C against the runtime ------------------------------------------------ */

/* qat_runtime_run's output integers of n raw samples x (the program's
 * input quantization first). */
static int8_t *runtime_outputs(const qat_qmodel *q, const float *x, int n) {
    int8_t *xq = malloc((size_t)(n * qat_qtensor_numel(&q->tensors[q->input])));
    CU_ASSERT_PTR_NOT_NULL_FATAL(xq);
    qat_input_quantize(q, x, n, xq);
    int8_t *y = prog_run(q, xq, n);
    free(xq);
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
    static char kernels[1 << 18];
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

/* The average pools that keep their input's quantization (TFLite's
 * dividing rule): global, and windowed with padding that clips windows. */
static void test_keep_scale_global(void) {
    prog p;
    program_c(&p);
    check_program(&p.q, "prog_c", 12, 9);
    prog_free(&p);
}

static void test_keep_scale_windows(void) {
    prog p;
    program_d(&p);
    check_program(&p.q, "prog_d", 12, 10);
    prog_free(&p);
}

/* Maps wide enough for the eight-position steps and their remainders
 * (program_f): on the host, the portable paths at those shapes. */
static void test_wide_maps(void) {
    prog p;
    program_f(&p);
    check_program(&p.q, "prog_f", 6, 12);
    prog_free(&p);
}

/* Every kind within TFLite's int8 rules (program_e). */
static void test_tflite_kinds(void) {
    prog p;
    program_e(&p);
    check_program(&p.q, "prog_e", 12, 11);
    prog_free(&p);
}

/* How many of the runtime's output integers on check_program's n inputs
 * of seed q's other rounding changes. */
static int other_rounding_differs(const qat_qmodel *q, int n, uint64_t seed) {
    qat_qmodel other = *q;
    other.rounding = q->rounding == QAT_ROUNDING_SINGLE ? QAT_ROUNDING_DOUBLE : QAT_ROUNDING_SINGLE;
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = malloc(sizeof *x * (size_t)(n * in));
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    prog r = {.rng = seed};
    for (int64_t i = 0; i < n * in; i++) x[i] = q->norm ? (float)rnd_in(&r, 0, 255) : rnd_f(&r, -3.0f, 3.0f);
    int8_t *a = runtime_outputs(q, x, n), *b = runtime_outputs(&other, x, n);
    int differ = 0;
    for (int64_t i = 0; i < n * out; i++) differ += a[i] != b[i];
    free(x), free(a), free(b);
    return differ;
}

/* Every op kind by hand (program_a) and every kind within TFLite's rules
 * (program_e), rounded once (QAT_ROUNDING_SINGLE): the C switches its
 * kernels and equals the runtime rounding once; on these inputs the
 * roundings give different integers, so C that rounded twice fails. */
static void test_single_rounding(void) {
    int differ = 0;
    prog p;
    program_a(&p);
    p.q.rounding = QAT_ROUNDING_SINGLE;
    qat_codegen_source src;
    char msg[400];
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&p.q, "prog_a_s", &src, msg, sizeof msg), QAT_OK);
    CU_ASSERT(strstr(src.text[1], "\n#define QK_SINGLE_ROUNDING 1\n") != NULL);
    qat_codegen_source_free(&src);
    check_program(&p.q, "prog_a_s", 12, 7);
    differ += other_rounding_differs(&p.q, 12, 7);
    prog_free(&p);
    program_e(&p);
    p.q.rounding = QAT_ROUNDING_SINGLE;
    check_program(&p.q, "prog_e_s", 12, 11);
    differ += other_rounding_differs(&p.q, 12, 11);
    prog_free(&p);
    printf(" [rounding twice changes %d integers]", differ);
    CU_ASSERT(differ > 0);
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
        {"global average pooling that keeps its input's quantization: the generated C equals the runtime",
         test_keep_scale_global},
        {"padded average pooling that keeps its input's quantization: the generated C equals the runtime",
         test_keep_scale_windows},
        {"pools that keep their quantization, depthwise multipliers, flattens (program_e): the generated C equals the runtime", test_tflite_kinds},
        {"rounded once (program_a, program_e): the generated C equals the runtime", test_single_rounding},
        {"maps wide enough for eight positions a step, and their remainders (program_f): the generated C equals the runtime",
         test_wide_maps},
        {"refusals: a status and one line, nothing generated", test_refusals},
        {NULL, NULL},
    };
    int rc = qat_test_main("codegen_program", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
