/* Integer inference: the fixed-point requantization against hand-computed
 * values and edge cases (negative values, ties, saturation, multipliers
 * below 2^-31), and against a double-precision reference. */
#include <math.h>

#include "qat/infer.h"
#include "layers/internal.h"
#include "test_util.h"

static void test_quantize_multiplier(void) {
    int32_t m0;
    int shift;
    CU_ASSERT_EQUAL(qat_quantize_multiplier(0.5, &m0, &shift), QAT_OK);
    CU_ASSERT(m0 == 1073741824 && shift == 0); /* 0.5 = 2^30 · 2^(0-31) */
    qat_quantize_multiplier(0.75, &m0, &shift);
    CU_ASSERT(m0 == 1610612736 && shift == 0);
    qat_quantize_multiplier(0.001, &m0, &shift); /* 0.001 = 0.512 · 2^-9 */
    CU_ASSERT_EQUAL(shift, -9);
    CU_ASSERT_EQUAL(m0, (int32_t)llround(0.512 * 2147483648.0));
    qat_quantize_multiplier(3.0, &m0, &shift); /* > 1: positive shift */
    CU_ASSERT(m0 == 1610612736 && shift == 2);
    /* q·2^31 rounding up to 2^31: becomes 2^30 with shift + 1 */
    qat_quantize_multiplier(1.0 - 1e-12, &m0, &shift);
    CU_ASSERT(m0 == 1073741824 && shift == 1);
    /* below 2^-31 (after rounding): nothing */
    qat_quantize_multiplier(ldexp(0.75, -40), &m0, &shift);
    CU_ASSERT(m0 == 0 && shift == 0);
    qat_quantize_multiplier(ldexp(0.75, 40), &m0, &shift);
    CU_ASSERT(m0 == INT32_MAX && shift == 30);
    qat_quantize_multiplier(0.0, &m0, &shift);
    CU_ASSERT(m0 == 0 && shift == 0);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-0.5, &m0, &shift), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(NAN, &m0, &shift), QAT_ERR_ARG);
}

static void test_srdhm(void) {
    CU_ASSERT_EQUAL(qat_srdhm(INT32_MIN, INT32_MIN), INT32_MAX); /* saturation */
    CU_ASSERT_EQUAL(qat_srdhm(1073741824, 1073741824), 536870912); /* 0.5 · 0.5 */
    CU_ASSERT_EQUAL(qat_srdhm(INT32_MAX, INT32_MAX), INT32_MAX - 1);
    /* ties: the nudge 2^30 (or 1 - 2^30 when negative) with truncating
     * division rounds half up: 1.5 -> 2, 0.5 -> 1, but -1.5 -> -1, -0.5 -> 0
     * (gemmlowp's behaviour, and the contract's formula) */
    CU_ASSERT_EQUAL(qat_srdhm(3, 1073741824), 2);
    CU_ASSERT_EQUAL(qat_srdhm(-3, 1073741824), -1);
    CU_ASSERT_EQUAL(qat_srdhm(1, 1073741824), 1);
    CU_ASSERT_EQUAL(qat_srdhm(-1, 1073741824), 0);
    CU_ASSERT_EQUAL(qat_srdhm(-5, 1073741824), -2); /* -2.5 -> -2 */
    CU_ASSERT_EQUAL(qat_srdhm(0, INT32_MIN), 0);
}

static void test_rounding_divide_by_pot(void) {
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(5, 1), 3);   /* 2.5 -> 3 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-5, 1), -3); /* -2.5 -> -3 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(7, 2), 2);   /* 1.75 -> 2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-7, 2), -2);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(6, 2), 2);   /* 1.5 -> 2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-6, 2), -2); /* -1.5 -> -2 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(-2, 2), -1); /* -0.5 -> -1 */
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(9, 0), 9);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(INT32_MAX, 31), 1);
    CU_ASSERT_EQUAL(qat_rounding_divide_by_pot(INT32_MIN, 31), -1);
}

/* Against x·M in double. The scheme rounds twice (SRDHM, then the shift),
 * as gemmlowp and TFLite do: when the first rounding lands on a half, the
 * second breaks that tie away from zero, so the error can exceed 0.5. It
 * never reaches 1. Hand case: x = -2123997, M = 0.2055433...: x·M·4 =
 * -1746293.6 rounds to -1746294, /4 = -436573.5 -> -436574 (exact -436573.4). */
static void test_against_double(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    int off = 0, n = 0;
    for (int k = 0; k < 2000; k++) {
        double M = ldexp(0.5 + 0.5 * qat_rng_uniform(&rng), -(int)qat_rng_below(&rng, 20));
        int32_t m0;
        int shift;
        qat_quantize_multiplier(M, &m0, &shift);
        for (int t = 0; t < 20; t++, n++) {
            int32_t x = (int32_t)(qat_rng_u32(&rng) >> 8) - (1 << 23);
            double want = x * M;
            int32_t got = qat_multiply_by_quantized_multiplier(x, m0, shift);
            double err = fabs((double)got - want);
            CU_ASSERT(err < 1.0);
            off += err > 0.5 + 1e-9;
        }
    }
    CU_ASSERT(off < n / 20); /* double-rounding ties only: about 2.5 % here */
    int32_t m0;
    int shift;
    qat_quantize_multiplier(0.205543324351, &m0, &shift);
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier(-2123997, m0, shift), -436574);
    /* saturating left shift */
    CU_ASSERT_EQUAL(qat_multiply_by_quantized_multiplier(INT32_MAX, 1073741824, 4), INT32_MAX / 2 + 1);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"QuantizeMultiplier: hand values and edge cases", test_quantize_multiplier},
        {"SRDHM: saturation, ties, signs", test_srdhm},
        {"RoundingDivideByPOT: ties away from zero, negatives", test_rounding_divide_by_pot},
        {"requantization against a double reference", test_against_double},
        {NULL, NULL},
    };
    return qat_test_main("infer", cases, argc, argv);
}
