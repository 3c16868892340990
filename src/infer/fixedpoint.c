/* Fixed-point requantization (contract §5; gemmlowp's
 * SaturatingRoundingDoublingHighMul and RoundingDivideByPOT). The
 * arithmetic itself is inline in requant.h, shared with the kernels. */
#include <math.h>

#include "qat/infer.h"
#include "requant.h"

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

int32_t qat_srdhm(int32_t a, int32_t b) { return qat__srdhm(a, b); }

int32_t qat_rounding_divide_by_pot(int32_t x, int exponent) {
    return qat__rdivpot(x, exponent > 31 ? 31 : exponent);
}

int32_t qat_multiply_by_quantized_multiplier(int32_t x, int32_t m0, int shift) {
    return qat__mbqm(x, m0, shift);
}
