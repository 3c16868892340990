/* qat/infer.h — integer-only inference (issue "Core 4/4").
 *
 * First piece: the fixed-point requantization of contract §5, as gemmlowp
 * and TFLite's MultiplyByQuantizedMultiplier compute it. An int32
 * accumulator at scale s_in·s_w becomes an output at scale s_out through
 * M = s_in·s_w/s_out, represented as M0·2^(shift-31) with M0 in [2^30, 2^31). */
#ifndef QAT_INFER_H
#define QAT_INFER_H

#include "qat/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* q = frexp(M, &shift); M0 = round(q·2^31) half away from zero; M0 == 2^31
 * becomes 2^30 with shift + 1; shift < -31 gives M0 = 0, shift = 0 (the
 * multiplier rounds to nothing); shift > 30 saturates to M0 = 2^31 - 1,
 * shift = 30. M must be finite and >= 0: QAT_ERR_ARG otherwise. */
QAT_API qat_status qat_quantize_multiplier(double M, int32_t *m0, int *shift);

/* Saturating rounding doubling high multiply: (a·b + nudge) / 2^31 in 64
 * bits with truncating division, nudge = 2^30 or 1 - 2^30 by the sign of
 * a·b; INT32_MIN·INT32_MIN saturates to INT32_MAX. */
QAT_API int32_t qat_srdhm(int32_t a, int32_t b);

/* x / 2^exponent rounded half away from zero (0 <= exponent <= 31). */
QAT_API int32_t qat_rounding_divide_by_pot(int32_t x, int exponent);

/* RoundingDivideByPOT(SRDHM(x·2^max(shift,0), m0), max(-shift,0)); the left
 * shift saturates to int32 instead of overflowing. */
QAT_API int32_t qat_multiply_by_quantized_multiplier(int32_t x, int32_t m0, int shift);

#ifdef __cplusplus
}
#endif
#endif
