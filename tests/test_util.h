/* Shared by the CUnit suites: a runner and small tensor helpers. */
#ifndef QAT_TEST_UTIL_H
#define QAT_TEST_UTIL_H

#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qat/autograd.h"

typedef struct {
    const char *name;
    void (*fn)(void);
} qat_test_case;

/* Runs one suite in CUnit's basic mode; exit status = failures (capped). */
static inline int qat_test_main(const char *suite_name, const qat_test_case *cases) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
    if (!suite) return 2;
    for (const qat_test_case *c = cases; c->name; c++)
        if (!CU_add_test(suite, c->name, c->fn)) return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (ran == 0) return 3; /* a suite that runs nothing is a failure */
    return failed ? 1 : 0;
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
