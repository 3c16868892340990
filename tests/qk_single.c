/* qk.h's requantization helpers compiled with the single rounding
 * (QK_SINGLE_ROUNDING, as the generated C of a program that rounds once
 * has them), under names test_kernels8 can call beside the double ones
 * its internals.h includes: one translation unit per rounding. */
#include <stdint.h>

#define QK_SINGLE_ROUNDING 1
#include "runtime/qk.h"

int32_t qk_single_mbqm(int32_t x, int32_t m0, int shift);
int32_t qk_single_requant(int32_t acc, int32_t m0, int shift);
int32_t qk_single_requant_neg(int32_t acc, int32_t m0, int shift);

int32_t qk_single_mbqm(int32_t x, int32_t m0, int shift) { return q_mbqm(x, m0, shift); }
int32_t qk_single_requant(int32_t acc, int32_t m0, int shift) { return q_requant(acc, m0, shift); }
int32_t qk_single_requant_neg(int32_t acc, int32_t m0, int shift) { return q_requant_neg(acc, m0, shift); }
