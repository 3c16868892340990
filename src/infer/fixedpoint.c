/* Fixed-point requantization (contract §5; gemmlowp's
 * SaturatingRoundingDoublingHighMul and RoundingDivideByPOT). */
#include <math.h>

#include "qat/infer.h"

qat_status qat_quantize_multiplier(double M, int32_t *m0, int *shift) {
    if (!m0 || !shift || !isfinite(M) || M < 0) return QAT_ERR_ARG;
    if (M == 0.0) {
        *m0 = 0, *shift = 0;
        return QAT_OK;
    }
    int e;
    double q = frexp(M, &e); /* M = q·2^e, q in [0.5, 1) */
    long long fixed = llround(q * 2147483648.0); /* half away from zero */
    if (fixed == 2147483648LL) fixed /= 2, e++;
    if (e < -31) fixed = 0, e = 0;
    if (e > 30) fixed = 2147483647LL, e = 30;
    *m0 = (int32_t)fixed;
    *shift = e;
    return QAT_OK;
}

int32_t qat_srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31)); /* C division truncates toward zero */
}

int32_t qat_rounding_divide_by_pot(int32_t x, int exponent) {
    if (exponent <= 0) return x;
    if (exponent > 31) exponent = 31;
    int32_t mask = (int32_t)((1LL << exponent) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* >> of a negative int is an arithmetic shift on every compiler this
     * builds with (GCC and Clang document it) */
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t qat_multiply_by_quantized_multiplier(int32_t x, int32_t m0, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int64_t shifted = (int64_t)x * ((int64_t)1 << (left < 32 ? left : 31));
    if (shifted > INT32_MAX) shifted = INT32_MAX;
    if (shifted < INT32_MIN) shifted = INT32_MIN;
    return qat_rounding_divide_by_pot(qat_srdhm((int32_t)shifted, m0), right);
}
