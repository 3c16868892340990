/* The bottom module: the multiplier taken from a double's bits equals the
 * contract's frexp/llround definition, everywhere, subnormals included. */
#include <float.h>
#include <math.h>

#include "qat/core.h"
#include "test_util.h"

/* The contract's QuantizeMultiplier, written with libm as it reads. */
static void reference(double M, int32_t *m0, int *shift) {
    if (M == 0.0) {
        *m0 = 0, *shift = 0;
        return;
    }
    int e;
    double q = frexp(M, &e);
    long long fixed = llround(q * 2147483648.0);
    if (fixed == 2147483648LL) fixed /= 2, e++;
    if (e < -31) fixed = 0, e = 0;
    if (e > 30) fixed = 2147483647LL, e = 30;
    *m0 = (int32_t)fixed, *shift = e;
}

static void check(double M) {
    int32_t a, b;
    int sa, sb;
    CU_ASSERT_EQUAL_FATAL(qat_quantize_multiplier(M, &a, &sa), QAT_OK);
    reference(M, &b, &sb);
    if (a != b || sa != sb) printf("\n  M = %.17g: %d·2^%d, want %d·2^%d\n", M, a, sa, b, sb);
    CU_ASSERT(a == b && sa == sb);
}

static void test_multiplier_matches_frexp(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < 200000; i++) { /* log-uniform over the whole range */
        double e = -1080.0 + 2100.0 * qat_rng_uniform(&rng);
        check(ldexp(1.0 + qat_rng_uniform(&rng), (int)e));
    }
    /* ties of the rounding: q·2^31 ending in exactly .5, and the carry to 2^31 */
    for (int k = 0; k < 64; k++) {
        check(ldexp(1.0 + ldexp(2 * k + 1, -32), k - 20));
        check(ldexp(1.0 - ldexp(1.0, -33), k - 20));
    }
    const double edges[] = {0.0, -0.0, DBL_MIN, DBL_TRUE_MIN, 4.9e-324 * 3, DBL_MAX, 1.0, 0.5, 0.25, 1e-10,
                            ldexp(1.0, -31), ldexp(1.0, -32), ldexp(0.75, -31), ldexp(1.0, 30), ldexp(1.0, 31)};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check(edges[i]);
    int32_t m;
    int s;
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-1e-3, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(INFINITY, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(NAN, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-DBL_TRUE_MIN, &m, &s), QAT_ERR_ARG);
}

static void test_status_strings(void) {
    CU_ASSERT_STRING_EQUAL(qat_status_str(QAT_OK), "ok");
    CU_ASSERT_STRING_EQUAL(qat_status_str(QAT_ERR_FORMAT), "bad file format");
    CU_ASSERT_STRING_EQUAL(qat_status_str((qat_status)42), "unknown status");
}

int main(int argc, char **argv) {
    static const qat_test_case cases[] = {
        {"the multiplier from a double's bits equals frexp/llround", test_multiplier_matches_frexp},
        {"status strings", test_status_strings},
        {NULL, NULL}};
    return qat_test_main("core", cases, argc, argv);
}
