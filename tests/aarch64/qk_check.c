/* qk.h's NEON requantization (qk_store8) against its scalar one, lane by
 * lane, on aarch64: random sums (and the int32 extremes), multipliers in
 * [2^30, 2^31) or 0, shifts in [-31, 30] (what qat_qmodel_check lets
 * through), zero points and clamps in int8. Built once per rounding
 * (-DQK_SINGLE_ROUNDING=0 or 1) by tests/aarch64/run.sh and run under
 * qemu-aarch64; exit 1 with the first difference. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/qk.h"

#if !Q_NEON
#error "qk_check is for a build with qk.h's NEON paths (aarch64)"
#endif

static uint64_t state = 0x9E3779B97F4A7C15u;
static uint32_t next(void) { /* xorshift64* */
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return (uint32_t)((state * 0x2545F4914F6CDD1Du) >> 32);
}

/* A sum: anywhere in int32, mostly in the range real products make, now and then an extreme. */
static int32_t sum(void) {
    switch (next() % 8) {
    case 0: return (int32_t)next();
    case 1: return next() % 2 ? INT32_MAX - (int32_t)(next() % 4) : INT32_MIN + (int32_t)(next() % 4);
    case 2: return (int32_t)(next() % 65) - 32;
    default: return (int32_t)(next() % 2000001) - 1000000;
    }
}

int main(void) {
    long checked = 0;
    for (int trial = 0; trial < 200000; trial++) {
        const int32_t m0 = next() % 16 ? (int32_t)(0x40000000u + next() % 0x40000000u) : 0;
        const int shift = (int)(next() % 62) - 31;
        const int32_t zp = (int32_t)(next() % 256) - 128;
        int32_t lo = (int32_t)(next() % 256) - 128, hi = (int32_t)(next() % 256) - 128;
        if (lo > hi) { int32_t t = lo; lo = hi; hi = t; }
        if (next() % 2) lo = -128, hi = 127;
        int32_t acc[8];
        int8_t got[8];
        for (int i = 0; i < 8; i++) acc[i] = sum();
        qk_store8(vld1q_s32(acc), vld1q_s32(acc + 4), m0, shift, zp, lo, hi, got);
        for (int i = 0; i < 8; i++, checked++) {
            const int8_t want = q_out(qk_rq(acc[i], m0, shift) + zp, lo, hi);
            if (got[i] != want) {
                fprintf(stderr, "qk_check (rounding %s): acc %d m0 %d shift %d zp %d [%d, %d]: NEON %d, scalar %d\n",
                        QK_SINGLE_ROUNDING ? "single" : "double", acc[i], m0, shift, zp, lo, hi, got[i], want);
                return 1;
            }
        }
    }
    printf("qk_check (rounding %s): %ld lanes equal the scalar requantization\n", QK_SINGLE_ROUNDING ? "single" : "double",
           checked);
    return 0;
}
