/* Inline forms of the fixed-point requantization (contract §5) for the
 * integer kernels; src/core/core.c exposes the same functions. */
#ifndef QAT_CORE_REQUANT_H
#define QAT_CORE_REQUANT_H

#include <stdint.h>

/* Saturating rounding doubling high multiply (gemmlowp). */
static inline int32_t qat__srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31)); /* C division truncates toward zero */
}

/* x / 2^exponent, rounded half away from zero (0 <= exponent <= 31). */
static inline int32_t qat__rdivpot(int32_t x, int exponent) {
    if (exponent <= 0) return x;
    int32_t mask = (int32_t)((1LL << exponent) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* >> of a negative int is arithmetic on every compiler this builds with */
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* RoundingDivideByPOT(SRDHM(x·2^max(shift,0), m0), max(-shift,0)); the
 * left shift saturates to int32. */
static inline int32_t qat__mbqm(int32_t x, int32_t m0, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int64_t shifted = (int64_t)x * ((int64_t)1 << (left < 32 ? left : 31));
    if (shifted > INT32_MAX) shifted = INT32_MAX;
    if (shifted < INT32_MIN) shifted = INT32_MIN;
    return qat__rdivpot(qat__srdhm((int32_t)shifted, m0), right > 31 ? 31 : right);
}

/* One output integer: zp + requant(acc), clamped to [lo, hi]. */
static inline int32_t qat__requant(int32_t acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi) {
    int32_t v = qat__mbqm(acc, m0, shift);
    /* a multiplier above 1 can saturate v to INT32_MAX: add zp in 64 bits */
    int64_t y = (int64_t)v + zp;
    return y < lo ? lo : y > hi ? hi : (int32_t)y;
}

#endif
