/* Private helpers of the fakequant module; what other modules use is in
 * kernels.h. */
#ifndef QAT_FAKEQUANT_INTERNAL_H
#define QAT_FAKEQUANT_INTERNAL_H

#include "autograd/op_api.h" /* qat__simd */
#include "kernels.h"

/* The length of the run that starts at flat index s: kernels.h.
 * The length every run has, when they all have one (no ragged block in the
 * last split dimension); 0 otherwise. Loops take it once and call
 * qat__qtype_run_len only when it is 0 (QAT__RUN). */
int64_t qat__qtype_fixed_run(const qat_qtype *q);
#define QAT__RUN(q, fixed, s) ((fixed) ? (fixed) : qat__qtype_run_len((q), (s)))
int64_t qat__qtype_numel(const qat_qtype *q);

/* Folds the range of x[0..n) into *lo, *hi (NaNs ignored: they compare
 * false). Sixteen independent lanes, so the loop vectorises: a single
 * running min with this NaN rule is not a reduction compilers vectorise
 * without finite-math flags. min and max are exact, so the result equals
 * the one-lane loop's (up to the sign of a zero, which no range-to-qparams
 * formula sees). */
void qat__minmax(const float *x, int64_t n, float *lo, float *hi);
/* ... with the copy of one level (AVX-512, AVX2 or the portable loop;
 * the caller checks that the CPU has it), for the tests; qat__minmax
 * takes qat__simd_level()'s. */
void qat__minmax_at(qat__simd level, const float *x, int64_t n, float *lo, float *hi);

/* round_half_even(clamp(v, lo, hi)) for integer-valued lo, hi with
 * |lo|, |hi| < 2^23: clamping first makes the 2^23 trick exact with no
 * guard, and the loop that calls it has no branch, so compilers vectorise
 * it (the guard in qat__rint keeps GCC from doing so under its default
 * -ftrapping-math). Equal to clamp(round(v), lo, hi), since rounding
 * commutes with clamping to integers. NaN stays NaN. */
static inline float qat__rint_clamped(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    float t = copysignf(8388608.0f, v);
    return (v + t) - t;
}

#endif
