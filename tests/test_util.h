/* Shared by the CUnit suites: a runner and small tensor helpers. */
#ifndef QAT_TEST_UTIL_H
#define QAT_TEST_UTIL_H

#include <CUnit/Basic.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "qat/autograd.h"

/* A graph with every op kind of the integer program, as model-file text
 * (docs/model-format.md): strided non-square conv + folded BatchNorm +
 * ReLU6, depthwise, grouped, add + ReLU, padded max and average pools, a
 * lone ReLU, concat, sigmoid, tanh, hard-swish, global average pooling,
 * dropout, linear. The graph, codegen and ONNX suites all run it. */
#define QAT_TEST_EVERY_OP \
    "input shape=2,10,9\n" \
    "conv2d    stem  input out=8 kernel=3x2 stride=1x2 pad=1x0\n" \
    "batchnorm bn    stem\n" \
    "relu6     r6    bn\n" \
    "conv2d    dw    r6 out=8 kernel=3 pad=1 groups=depthwise\n" \
    "relu      r1    dw\n" \
    "conv2d    g2    r1 out=8 kernel=1 groups=2\n" \
    "add       sum   g2,r6\n" \
    "relu      r2    sum\n" \
    "maxpool2d mp    r2 kernel=3 stride=2 pad=1\n" \
    "relu      rmp   mp\n" \
    "avgpool2d ap    r2 kernel=2x3 stride=2x2 pad=0x1\n" \
    "concat    cat   rmp,ap\n" \
    "sigmoid   sg    cat\n" \
    "tanh      th    cat\n" \
    "add       sum2  sg,th\n" \
    "hardswish hs    sum2\n" \
    "global_avgpool gap hs\n" \
    "dropout   d     gap p=0.1\n" \
    "linear    fc    d out=5\n"

typedef struct {
    const char *name;
    void (*fn)(void);
} qat_test_case;

/* Skipped tests: a test that cannot run here (the CPU lacks the
 * instructions it checks, the build has no such code) says so with
 * QAT_TEST_SKIP instead of passing without asserting anything. The count
 * lives in a function so that every suite (one translation unit) has its
 * own without a global definition. */
static inline unsigned *qat_test__skips(void) {
    static unsigned n;
    return &n;
}
static inline void qat_test__skip(const char *reason) {
    CU_pTest t = CU_get_current_test();
    printf("\nSKIPPED: %s: %s\n", t && t->pName ? t->pName : "(no test)", reason);
    ++*qat_test__skips();
}
/* Records a skip of the running test, with the reason, and returns from it. */
#define QAT_TEST_SKIP(reason)    \
    do {                         \
        qat_test__skip(reason);  \
        return;                  \
    } while (0)

#define QAT_TEST_EXIT_SKIPPED 77 /* ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt) */

/* Which cases to run, from the command line: none given runs them all;
 * otherwise each argument is a case's exact name. Returns 0 and fills
 * selected[], or prints what went wrong and returns 2. */
static inline int qat_test__select(const char *prog, const qat_test_case *cases, int argc, char **argv,
                                   bool *selected, int n_cases) {
    for (int c = 0; c < n_cases; c++) selected[c] = argc < 2;
    for (int i = 1; i < argc; i++) {
        int c = 0;
        while (c < n_cases && strcmp(cases[c].name, argv[i])) c++;
        if (c < n_cases) {
            selected[c] = true;
            continue;
        }
        fprintf(stderr, "%s: no test named \"%s\"; the tests are:\n", prog, argv[i]);
        for (c = 0; c < n_cases; c++) fprintf(stderr, "  %s\n", cases[c].name);
        return 2;
    }
    return 0;
}

/* Runs one suite in CUnit's basic mode: every case, or only the cases
 * named on the command line (exact names; `--list` prints them, one a
 * line). Exit status: 0 passed, 1 a failure, 2 a bad command line or
 * CUnit error, 3 nothing ran, 77 every test that ran was skipped. */
static inline int qat_test_main(const char *suite_name, const qat_test_case *cases, int argc, char **argv) {
    const char *prog = argc > 0 ? argv[0] : suite_name;
    int n_cases = 0;
    while (cases[n_cases].name) n_cases++;
    if (argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        if (strcmp(argv[1], "--list"))
            printf("usage: %s [--list | TEST...]: runs every test, or the tests named (exact names)\n", prog);
        else
            for (int c = 0; c < n_cases; c++) printf("%s\n", cases[c].name);
        return 0;
    }
    bool selected[256];
    if (n_cases > (int)(sizeof selected / sizeof *selected)) return fprintf(stderr, "%s: too many tests\n", prog), 2;
    if (qat_test__select(prog, cases, argc, argv, selected, n_cases)) return 2;
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
    if (!suite) return 2;
    for (int c = 0; c < n_cases; c++)
        if (selected[c] && !CU_add_test(suite, cases[c].name, cases[c].fn)) return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run(), skipped = *qat_test__skips();
    CU_cleanup_registry();
    printf("\n%s: %u test(s) run, %u skipped\n", suite_name, ran, skipped);
    if (ran == 0) return 3; /* a suite that runs nothing is a failure */
    if (failed) return 1;
    return skipped == ran ? QAT_TEST_EXIT_SKIPPED : 0;
}

/* Persistent tensor filled with uniform values in [lo, hi). */
static inline qat_tensor *t_rand(qat_ctx *ctx, qat_rng *rng, int rank, const int64_t *shape,
                                 float lo, float hi, bool grad) {
    qat_tensor *t = qat_tensor_new(ctx, QAT_MEM_PERSIST, rank, shape, grad);
    if (t)
        for (int64_t i = 0; i < t->numel; i++) t->data[i] = lo + (hi - lo) * qat_rng_uniform(rng);
    return t;
}

/* Uniform in [-1, 1] but at least `gap` away from zero: keeps kinks
 * (ReLU at 0) out of reach of the finite-difference step. */
static inline void t_away_from_zero(qat_tensor *t, float gap) {
    for (int64_t i = 0; i < t->numel; i++) {
        float v = t->data[i];
        if (fabsf(v) < gap) t->data[i] = v < 0 ? v - gap : v + gap;
    }
}

/* A fresh directory /tmp/qat-test-<name>-XXXXXX for a suite's files;
 * qat_test_rmdir removes it and everything in it (returns 0 on success). */
char *mkdtemp(char *template); /* POSIX; declared here for -std=c11 */
static inline bool qat_test_tmpdir(char *dir, size_t len, const char *name) {
    snprintf(dir, len, "/tmp/qat-test-%s-XXXXXX", name);
    return mkdtemp(dir) != NULL;
}
int system(const char *command);
static inline int qat_test_rmdir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* Elements whose float bits differ. With signed_zeros false, -0 and +0
 * count as equal: an accumulated gradient (0 + 0) cannot carry the sign of
 * a reference's dy·0. */
static inline int64_t qat_test_bit_diffs(const float *a, const float *b, int64_t n, bool signed_zeros) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = signed_zeros ? a[i] : a[i] + 0.0f, y = signed_zeros ? b[i] : b[i] + 0.0f;
        bad += memcmp(&x, &y, sizeof(float)) != 0;
    }
    return bad;
}

#define ASSERT_CLOSE(a, b, tol) CU_ASSERT(fabs((double)(a) - (double)(b)) <= (tol))
#define ASSERT_OK(ctx)                                                          \
    do {                                                                        \
        if (qat_ctx_status(ctx) != QAT_OK) printf("\n  error: %s\n", qat_ctx_error(ctx)); \
        CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_OK);                           \
    } while (0)

#endif
