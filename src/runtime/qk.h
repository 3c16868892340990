/* qk.h — qat's portable integer kernels, the one source of each. The
 * runtime's portable level (src/runtime/kernels.c) calls them, and the C
 * generator writes this file, byte for byte, into every generated NAME.c
 * (embedded into qat_codegen at build time), where each op's function is
 * one call with literal arguments: the kernels are always inlined, so the
 * compiler specialises each by its op's constants.
 *
 * C99 on integers: <stdint.h> and <string.h> (memcpy) only, no float, no
 * allocation; every function static. The requantization helpers are
 * qat/core.h's requantization rewritten for fewer instructions with the
 * same results under what qat_qmodel_check guarantees (m0 in [2^30, 2^31)
 * or 0, shift in [-31, 30]); docs/codegen.md derives each step. Storage
 * integers are int8 (zero points, lo and hi in [-128, 127]); weights are
 * int8, or packed at 4 or 2 bits ("packed weights" below). Every kernel
 * that requantizes output channels takes m0 and shift with MS, their
 * step: 1, channel o's pair at m0[o], shift[o]; 0, one pair for every
 * channel at m0[0], shift[0] (an op whose channels share it: per-tensor
 * weights; the generated C then stores the pair once, a literal 0 that
 * folds away).
 * Shared with: src/codegen
 */
#ifndef QAT_QK_H
#define QAT_QK_H

#include <stdint.h>
#include <string.h>

#ifndef Q_DSP
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(QAT_NO_DSP)
#include <arm_acle.h>
#define Q_DSP 1 /* SMLAD on pairs of int16 unpacked from int8 by SXTB16/SXTAB16 */
#else
#define Q_DSP 0
#endif
#endif
/* Some convolutions' functions in the generated C (the generator says
 * which) are built without GCC's first scheduling pass on the DSP: it moves
 * the kernels' loads apart, among the multiplies, to hide their latency. On
 * a Cortex-M4 that costs: a load is one cycle when it follows a load, two
 * otherwise, and the multiplies wait for nothing (docs/codegen.md has the
 * figures). */
#if Q_DSP && defined(__GNUC__) && !defined(__clang__)
#define QK_NO_SCHED __attribute__((optimize("no-schedule-insns", "no-schedule-insns2")))
#else
#define QK_NO_SCHED
#endif
/* A fence between two steps of a long straight-line dot product: without
 * it the register allocator spreads one step's loads among the previous
 * step's multiplies, each load then two cycles instead of one (ResNet-8's
 * whole 3x3 dots: +14 %). It orders memory only and emits nothing. */
#if Q_DSP && defined(__GNUC__)
#define QK_STEP_FENCE() __asm__ volatile("" ::: "memory")
#else
#define QK_STEP_FENCE() ((void)0)
#endif
/* Six loaded words all in registers here: an empty asm that claims to
 * change them, so that GCC cannot sink a load below it to its use (it did
 * with the packed weights' masks between, each load then two cycles). */
#if Q_DSP && defined(__GNUC__)
#define QK_LOADS_DONE(a, b, c, d, e, f) __asm__("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f))
#else
#define QK_LOADS_DONE(a, b, c, d, e, f) ((void)0)
#endif

/* AArch64's Advanced SIMD (always there on aarch64): the convolutions
 * and the linear op take 8 output positions (or 16 inputs) a step, the
 * inputs widened to int16 as x - zp and multiplied by int16 weights into
 * int32 lanes (SMLAL). The sums are the scalar path's, exact in any
 * order, so the integers are the same; the requantization stays scalar. */
#ifndef Q_NEON
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(QAT_NO_NEON)
#include <arm_neon.h>
#define Q_NEON 1
#else
#define Q_NEON 0
#endif
#endif
/* The dot-product extension (Armv8.2-A's SDOT, where the compiler is told
 * the core has it, -march=armv8.2-a+dotprod): four int8 products summed
 * into an int32 lane. It takes the raw int8 inputs, so a sum over a row
 * of weights w is Σ w·x - zp·Σ w (exact in int32 wherever the x - zp form
 * is). The pointwise convolution and the linear op use it. */
#ifndef Q_DOT
#if Q_NEON && defined(__ARM_FEATURE_DOTPROD) && !defined(QAT_NO_DOT)
#define Q_DOT 1
#else
#define Q_DOT 0
#endif
#endif
#if defined(__GNUC__)
#define Q_NOINLINE __attribute__((noinline)) /* one copy, one frame at a time */
#define Q_MAYBE_UNUSED __attribute__((unused))
#define QK_INLINE static inline __attribute__((always_inline, unused))
#else
#define Q_NOINLINE
#define Q_MAYBE_UNUSED
#define QK_INLINE static inline
#endif
/* Loops over a kernel row's taps: unrolled whole (GCC unrolls a loop with
 * a growing body at -O2 only when told). Clang unrolls short loops of a
 * known count by itself, and its explicit hint is an error under -Werror
 * where the count is not a constant (the runtime's calls): no hint. */
#if defined(__GNUC__) && !defined(__clang__)
#define QK_UNROLL _Pragma("GCC unroll 8")
#define QK_UNROLL16 _Pragma("GCC unroll 16")
#else
#define QK_UNROLL
#define QK_UNROLL16
#endif
/* An unpadded convolution's kernel rows: unrolled with the DSP path (each
 * row a few SMLADs); without it the unrolled rows' loads outnumber the
 * registers (measured on a Cortex-M3: LeNet 1.69 M instructions unrolled,
 * 1.54 M not). */
#if Q_DSP
#define QK_UNROLL_ROWS QK_UNROLL
#else
#define QK_UNROLL_ROWS
#endif

/* The program's rounding (qat/runtime.h, qat_rounding): 0, the contract's
 * double rounding; 1, one rounding of the exact product. The generated C
 * defines it before this text; the runtime compiles the portable kernels
 * once with each (kernels_qk.c). */
#ifndef QK_SINGLE_ROUNDING
#define QK_SINGLE_ROUNDING 0
#endif

/* A branch the compiler should lay out as taken rarely: a negative shift
 * (a multiplier below one half: every layer of every model measured) then
 * falls through to the inline one-SMLAL path, one compare and one branch
 * not taken, the general path out of line. */
#if defined(__GNUC__)
#define Q_LIKELY(c) __builtin_expect(!!(c), 1)
#else
#define Q_LIKELY(c) (c)
#endif

/* r clamped to [-256, 255]: one SSAT on the DSP. */
static inline int32_t q_clamp9(int32_t r) {
#if Q_DSP
    return __ssat(r, 9);
#else
    return r < -256 ? -256 : r > 255 ? 255 : r;
#endif
}

#if QK_SINGLE_ROUNDING
/* qat_multiply_by_quantized_multiplier_single: floor((x·m0 + 2^(t-1)) / 2^t),
 * t = 31 - shift, saturated to int32, with no 64-bit variable shift (a
 * Cortex-M0+ at -Os calls libgcc's __aeabi_llsl/__aeabi_lasr for one, and
 * every 32-bit core spends a branch and some 8 instructions on it).
 * |x·m0| < 2^62, so every sum below fits 64 bits.
 *
 * shift < 0, e = -shift in [1, 31]: t = 31 + e >= 32, so the result is the
 * sum's high word shifted right by e - 1 (a floor of a floor), and the
 * nudge 2^(30+e) = u·2^31, u = 2^(e-1), is the 64-bit word (u >> 1, u << 31):
 * one SMLAL and a shift on a Cortex-M4. The result fits int32. */
static inline int32_t q_single_neg(int32_t x, int32_t m0, int e) {
    const uint32_t u = (uint32_t)1 << (e - 1);
    const int64_t n = (int64_t)(((uint64_t)(u >> 1) << 32) | (uint32_t)(u << 31));
    return (int32_t)(((int64_t)x * m0 + n) >> 32) >> (e - 1);
}

/* shift >= 0: t in [1, 31], the nudge 2^(t-1) a 32-bit word. With the sum
 * p = hi·2^32 + lo, floor(p / 2^(31+t)) = hi >> (t - 1) is 0 or -1 exactly
 * when floor(p / 2^t) fits int32 (else the sign says which end it
 * saturates to), and then that result's 32 bits are hi's low t bits above
 * lo's high 32 - t. */
static inline int32_t q_mbqm(int32_t x, int32_t m0, int shift) {
    if (shift < 0) return q_single_neg(x, m0, -shift);
    {
        const int t = 31 - shift;
        const int64_t p = (int64_t)x * m0 + ((int32_t)1 << (t - 1));
        const int32_t hi = (int32_t)(p >> 32), top = hi >> (t - 1);
        if (top > 0) return INT32_MAX;
        if (top < -1) return INT32_MIN;
        return (int32_t)(((uint32_t)hi << (32 - t)) | ((uint32_t)p >> t));
    }
}

/* q_requant for shift < 0: the above, clamped to [-256, 255] like q_requant. */
static inline int32_t q_requant_neg(int32_t acc, int32_t m0, int shift) {
    return q_clamp9(q_single_neg(acc, m0, -shift));
}
#else
/* gemmlowp's MultiplyByQuantizedMultiplier. SRDHM(x, m0) = (x·m0 + nudge) / 2^31
 * truncated, nudge 2^30 or 1 - 2^30 by the product's sign, is floor((x·m0 + 2^30)
 * / 2^31) for both signs (m0 >= 0 rules out INT32_MIN·INT32_MIN); the rounding
 * right shift by e (half away from zero) is floor((v + 2^(e-1) - [v < 0]) / 2^e).
 * That shift stays in 32 bits (e <= 31, the program's range): with v = q·2^e + r,
 * 0 <= r < 2^e, it is q + [r > 2^(e-1) - 1 + [v < 0]], q = v >> e. A 64-bit
 * variable shift costs a 32-bit core (a Cortex-M4) some 20 instructions and a
 * branch more. */
static inline int32_t q_mbqm(int32_t x, int32_t m0, int shift) {
    int32_t v;
    if (shift > 0) { /* the left shift saturates to int32 */
        int64_t s = (int64_t)x * ((int32_t)1 << shift); /* 2^shift <= 2^30: a 32-bit word */
        x = s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : (int32_t)s;
    }
    v = (int32_t)(((int64_t)x * m0 + ((int64_t)1 << 30)) >> 31);
    if (shift < 0) {
        const int e = -shift;
        const int32_t mask = (int32_t)(((uint32_t)1 << e) - 1u);
        v = (v >> e) + ((v & mask) > (mask >> 1) + (v < 0));
    }
    return v;
}

/* q_requant(acc, m0, shift) for shift < 0 in one SMLAL: with e = -shift,
 * v = floor(p / 2^31), p = acc·m0 + 2^30 (SRDHM), the rounded shift
 * floor((v + 2^(e-1) - [v < 0]) / 2^e) is floor((p + (2^(e-1) - [v < 0])·
 * 2^31) / 2^(31+e)) (a floor of a floor), and [v < 0] may be read as
 * [acc < 0]: they differ only where -2^30 <= acc·m0 < 0, where both give
 * 0. 31 + e >= 32, so the result is the high word shifted by e - 1
 * (docs/codegen.md). Clamped to [-256, 255] like q_requant. */
static inline int32_t q_requant_neg(int32_t acc, int32_t m0, int shift) {
    const uint32_t t = ((uint32_t)1 << (-shift - 1)) - ((uint32_t)acc >> 31); /* 2^(e-1) - [acc < 0], >= 0 */
    const int64_t n = (int64_t)(((uint64_t)(t >> 1) << 32) | ((t << 31) | 0x40000000u));
    return q_clamp9((int32_t)(((int64_t)acc * m0 + n) >> 32) >> (-shift - 1));
}
#endif

/* requant(acc), then the output: zp added and clamped to [lo, hi]. Clamping v to
 * [-256, 255] first changes no output (lo - zp >= -255, hi - zp <= 255) and keeps
 * v + zp from overflowing; the clamp stays at the call, where lo, hi, zp are literals. */
static Q_NOINLINE Q_MAYBE_UNUSED int32_t q_requant(int32_t acc, int32_t m0, int shift) {
    int32_t v;
    if (shift < 0) return q_requant_neg(acc, m0, shift);
    v = q_mbqm(acc, m0, shift);
    return q_clamp9(v);
}
static inline int8_t q_out(int32_t v, int32_t lo, int32_t hi) {
#if Q_DSP
    /* SSAT to int8 first, one instruction: lo and hi are literals at the calls, inside int8, so
     * the tests below fold away where the clamp is int8's own (no ReLU) */
    v = __ssat(v, 8);
    if (lo > -128 && v < lo) v = lo;
    if (hi < 127 && v > hi) v = hi;
    return (int8_t)v;
#else
    return (int8_t)(v < lo ? lo : v > hi ? hi : v);
#endif
}

/* q_requant inlined where its shift is negative (the new kernels'
 * epilogues, whose frames have room for it). */
QK_INLINE int32_t qk_rq(int32_t acc, int32_t m0, int shift) {
    return Q_LIKELY(shift < 0) ? q_requant_neg(acc, m0, shift) : q_requant(acc, m0, shift);
}

/* qk_rq where SN (a literal at the generated calls) says every shift of the
 * op is negative: then no test at all. */
QK_INLINE int32_t qk_rqn(int32_t acc, int32_t m0, int shift, int SN) {
    return SN ? q_requant_neg(acc, m0, shift) : qk_rq(acc, m0, shift);
}

/* requant(acc) + zp, unclamped, for an op whose every shift lies in
 * [-23, -2] and whose accumulators stay below 2^29 in magnitude (SN = 2,
 * the generator's check): zp·2^(31+e) (e = -shift) added to the 64-bit
 * nudge adds zp to the result of its floor division by 2^(31+e) exactly,
 * and is nh·2^32 with nh = (2·zp + 1)·2^(e-2) the nudge's own high word
 * included (2^(30+e)); the double rounding's -[acc < 0]·2^31 (q_requant_neg)
 * is then the high word's -1 and the low word 2^30 + 2^31 (no carry), where
 * the single rounding's low word is 0. The sum's high word fits int32
 * (|acc·m0| < 2^62, |nh| < 2^29 for e <= 23), and v + zp clamped to int8
 * (q_out's SSAT) is clamp9(v) + zp clamped: one shift, one add and one
 * clamp fewer an output.
 *
 * On the DSP the same floor of twice the numerator over twice the divisor,
 * by SMMLAR (the top word of Ra·2^32 + Rn·Rm + 2^31) or SMMLA (of Ra·2^32
 * + Rn·Rm): with n2 = 2·nh = (2·zp + 1)·2^(e-1), n2·2^32 = zp·2^(32+e) +
 * 2^(31+e) is the output's zero point and the second rounding's half, so
 *   double: floor((2·acc·m0 + 2^31 + (n2 - [acc < 0])·2^32) / 2^(32+e)),
 *   single: floor((2·acc·m0 + n2·2^32) / 2^(32+e)),
 * the instruction's word shifted right by e (nested floors). The sign in
 * one add, the product and every nudge in one instruction: three fewer an
 * output. |2·acc| < 2^30, and the word fits int32: |acc·m0 / 2^31| +
 * |n2| + 1 < 2^29 + 255·2^22 + 1 < 2^31. */
#if Q_DSP
#if defined(__GNUC__) /* no ACLE intrinsic says them */
static inline int32_t q_smmlar(int32_t a, int32_t b, int32_t c) {
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
static inline int32_t q_smmla(int32_t a, int32_t b, int32_t c) {
    int32_t r;
    __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
#else
static inline int32_t q_smmla(int32_t a, int32_t b, int32_t c) {
    return (int32_t)((int64_t)(((uint64_t)(uint32_t)c << 32) + (uint64_t)((int64_t)a * b)) >> 32);
}
static inline int32_t q_smmlar(int32_t a, int32_t b, int32_t c) {
    return (int32_t)((int64_t)(((uint64_t)(uint32_t)c << 32) + (uint64_t)((int64_t)a * b) + 0x80000000u) >> 32);
}
#endif
/* q_requant_fold of acc2 = 2·acc, sg = -[acc < 0] (from whichever of the
 * two the caller has: one add with a shifted operand). */
QK_INLINE int32_t q_requant_fold_dsp(int32_t acc2, int32_t sg, int32_t m0, int shift, int32_t zp) {
    const int e1 = -shift - 1;
    const int32_t n2 = (int32_t)((uint32_t)(2 * zp + 1) << e1);
#if QK_SINGLE_ROUNDING
    (void)sg;
    return q_smmla(acc2, m0, n2) >> (e1 + 1);
#else
    return q_smmlar(acc2, m0, n2 + sg) >> (e1 + 1);
#endif
}
#endif
QK_INLINE int32_t q_requant_fold(int32_t acc, int32_t m0, int shift, int32_t zp) {
#if Q_DSP
    return q_requant_fold_dsp((int32_t)((uint32_t)acc << 1), acc >> 31, m0, shift, zp);
#else
    const int e1 = -shift - 1;
    const int32_t nh = (int32_t)((uint32_t)(2 * zp + 1) << e1) >> 1; /* even before the shift: exact */
#if QK_SINGLE_ROUNDING
    const int64_t n = (int64_t)((uint64_t)(uint32_t)nh << 32);
#else
    const int32_t sg = acc >> 31;
    const int64_t n = (int64_t)(((uint64_t)(uint32_t)(nh + sg) << 32) | (0x40000000u - ((uint32_t)sg << 31)));
#endif
    return (int32_t)(((int64_t)acc * m0 + n) >> 32) >> e1;
#endif
}

/* SN above 2 (a literal at the generated calls): SN 2's fold where every
 * shift of the op is 1 - SN, so the shift is a literal too (the nudge's
 * high word a constant, the final shift folded into SSAT's operand, no
 * per-channel work). qk_sh: the shift of a channel whose array holds s. */
QK_INLINE int qk_sh(int SN, int s) { return SN > 2 ? 1 - SN : s; }

/* requant(acc) + zp by SN: 2 and above q_requant_fold, else qk_rqn's. */
QK_INLINE int32_t qk_rqz(int32_t acc, int32_t m0, int shift, int SN, int32_t zp) {
    return SN >= 2 ? q_requant_fold(acc, m0, qk_sh(SN, shift), zp) : qk_rqn(acc, m0, shift, SN) + zp;
}

/* The paired kernels' D (a literal at their calls): 1 where SN is 2 or
 * above, their accumulators then 2·acc (qk_dot_2x2's PB 2: the sums
 * >> 7, the biases doubled by the generator); qk_rqzd requantizes either
 * (D is 1 only on the DSP, the one place the paired form runs and the
 * only one that doubles). */
#define QK_DOUBLED(PB, SN) ((PB) && (SN) >= 2)
/* lo: the clamp the caller applies next (q_out). Where lo >= zp (a ReLU's
 * clamp: lo and zp are literals at the generated calls) the DSP's fold
 * leaves the double rounding's sign term out: a negative accumulator
 * then gives at most zp either way (its product is negative and the nudge
 * n2·2^32 + 2^31 < (zp + 1)·2^(32+e) for e >= 1), which the clamp makes
 * lo, so the bytes are the same, for two instructions fewer an output. */
QK_INLINE int32_t qk_rqzd(int32_t acc, int32_t m0, int shift, int SN, int D, int32_t zp, int32_t lo) {
#if Q_DSP
    if (SN >= 2) /* q_requant_fold's form; with D acc is 2·acc already */
        return q_requant_fold_dsp(D ? acc : (int32_t)((uint32_t)acc << 1), lo >= zp ? 0 : acc >> 31, m0,
                                  qk_sh(SN, shift), zp);
#else
    (void)D, (void)lo;
#endif
    return qk_rqz(acc, m0, shift, SN, zp);
}

#if Q_DSP
static inline uint32_t q_ld32(const int8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
#if defined(__GNUC__) /* the rotation folded into the instruction (the intrinsics cannot say it) */
static inline int32_t q_sxtb16_ror8(uint32_t v) {
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
static inline int32_t q_sxtab16_ror8(int32_t a, uint32_t v) {
    int32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(v));
    return r;
}
static inline uint32_t q_uxtb16_ror8(uint32_t v) {
    uint32_t r;
    __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
#else
static inline uint32_t q_uxtb16_ror8(uint32_t v) { return v >> 8 & 0x00FF00FFu; }
static inline int32_t q_ror8(uint32_t v) { return (int32_t)((v >> 8) | (v << 24)); }
static inline int32_t q_sxtb16_ror8(uint32_t v) { return __sxtb16(q_ror8(v)); }
static inline int32_t q_sxtab16_ror8(int32_t a, uint32_t v) { return __sxtab16(a, q_ror8(v)); }
#endif
#endif

/* ---- pooling ------------------------------------------------------------------------
 * x [C, H, W] -> y [C, OH, OW], OH = (H + 2·ph - kh) / sh + 1 (floor), the
 * same across. Each window is clipped to the input: padding never wins a
 * max and adds 0 to an average's sum of x - zp. Without padding every
 * window is whole (the bounds need no clipping). */
QK_INLINE void qk_maxpool(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                          int OH, int OW, int8_t *y) {
    int c, oy, ox, yy, xx;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * H * W;
        int8_t *yc = y + (int32_t)c * OH * OW;
        for (oy = 0; oy < OH; oy++)
            for (ox = 0; ox < OW; ox++) {
                int ya = oy * sh - ph, yb = ya + kh, xa = ox * sw - pw, xb = xa + kw;
                int32_t m = -128;
                if (ph || pw) {
                    ya = ya < 0 ? 0 : ya, yb = yb > H ? H : yb;
                    xa = xa < 0 ? 0 : xa, xb = xb > W ? W : xb;
                }
                for (yy = ya; yy < yb; yy++)
                    for (xx = xa; xx < xb; xx++) m = xc[yy * W + xx] > m ? xc[yy * W + xx] : m;
                yc[oy * OW + ox] = (int8_t)m;
            }
    }
}

/* Σ of the n int8 at p. On the DSP four a word: USADA8 sums the bytes as
 * unsigned, x + 128 each (the sign bit flipped), less 128·4 a word; n·255
 * fits (the plan bounds a window's n·255 by INT32_MAX). */
static inline int32_t qk_sum_i8(const int8_t *p, int32_t n) {
    int32_t s = 0, k = 0;
#if Q_DSP
    uint32_t u = 0;
    for (; k + 4 <= n; k += 4) u = __usada8(q_ld32(p + k) ^ 0x80808080u, 0u, u);
    s = (int32_t)(u - 128u * (uint32_t)k);
#endif
    for (; k < n; k++) s += p[k];
    return s;
}

/* The sum of x - zp over window (oy, ox)'s positions inside the [H, W]
 * map xc, and their count in *n: the one window walk of both average
 * pools (padding is skipped). */
static inline int32_t qk_window_sum(const int8_t *xc, int H, int W, int oy, int ox, int kh, int kw, int sh, int sw,
                                    int ph, int pw, int32_t zp, int32_t *n) {
    int ya = oy * sh - ph, yb = ya + kh, xa = ox * sw - pw, xb = xa + kw, yy;
    int32_t s = 0;
    if (ph || pw) {
        ya = ya < 0 ? 0 : ya, yb = yb > H ? H : yb;
        xa = xa < 0 ? 0 : xa, xb = xb > W ? W : xb;
    }
    *n = (yb - ya) * (xb - xa);
    if (xa == 0 && xb == W) return qk_sum_i8(xc + ya * W, *n) - zp * *n; /* whole rows: one run */
    for (yy = ya; yy < yb; yy++) s += qk_sum_i8(xc + yy * W + xa, xb - xa);
    return s - zp * *n;
}

/* y = clamp(zp_out + requant(Σ_window (x - zp_in), m0, shift), lo, hi). */
QK_INLINE void qk_avgpool(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                          int OH, int OW, int32_t zp_in, int32_t m0, int shift, int32_t zp_out, int32_t lo,
                          int32_t hi, int8_t *y) {
    int c, oy, ox;
    int32_t n;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * H * W;
        int8_t *yc = y + (int32_t)c * OH * OW;
        for (oy = 0; oy < OH; oy++)
            for (ox = 0; ox < OW; ox++) {
                int32_t s = qk_window_sum(xc, H, W, oy, ox, kh, kw, sh, sw, ph, pw, zp_in, &n);
                yc[oy * OW + ox] = q_out(q_requant(s, m0, shift) + zp_out, lo, hi);
            }
    }
}

/* An average pool that keeps its input's quantization (TFLite's int8
 * AVERAGE_POOL_2D): the sum of the raw integers of a window's n >= 1
 * positions divided by n, half away from zero (C's division truncates
 * toward zero). The one definition of the rule: every kernel that keeps
 * the scale calls it. |acc| <= 128·n and the plan bounds n·255 by
 * 2^31 - 1 (a window is at most 64x64), so acc ± n/2 stays in int32. */
static inline int32_t qk_div_round(int32_t acc, int32_t n) { return acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n; }

/* y = clamp(qk_div_round(Σ_window x, n), lo, hi), n the window's positions
 * inside the input (padding is skipped, not counted). */
QK_INLINE void qk_avgpool_keep(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                               int OH, int OW, int32_t lo, int32_t hi, int8_t *y) {
    int c, oy, ox;
    int32_t n;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * H * W;
        int8_t *yc = y + (int32_t)c * OH * OW;
        for (oy = 0; oy < OH; oy++)
            for (ox = 0; ox < OW; ox++) {
                int32_t s = qk_window_sum(xc, H, W, oy, ox, kh, kw, sh, sw, ph, pw, 0, &n);
                yc[oy * OW + ox] = q_out(qk_div_round(s, n), lo, hi);
            }
    }
}

/* y[c] = clamp(zp_out + requant(Σ_{i < HW} x[c·HW + i] - zp_in·HW), lo, hi);
 * the plan refuses HW·255 > INT32_MAX. */
QK_INLINE void qk_global_avgpool(const int8_t *x, int C, int HW, int32_t zp_in, int32_t m0, int shift, int32_t zp_out,
                                 int32_t lo, int32_t hi, int8_t *y) {
    int c;
    for (c = 0; c < C; c++)
        y[c] = q_out(q_requant(qk_sum_i8(x + (int32_t)c * HW, HW) - zp_in * HW, m0, shift) + zp_out, lo, hi);
}

/* y[c] = clamp(qk_div_round(Σ_{i < HW} x[c·HW + i], HW), lo, hi): the
 * global pool that keeps its input's quantization. */
QK_INLINE void qk_global_avgpool_keep(const int8_t *x, int C, int HW, int32_t lo, int32_t hi, int8_t *y) {
    int c, k;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * HW;
        int32_t s = 0;
        for (k = 0; k < HW; k++) s += xc[k];
        y[c] = q_out(qk_div_round(s, HW), lo, hi);
    }
}

/* ---- elementwise --------------------------------------------------------------------- */

/* y = clamp(zp_out + requant(x - zp_in), lo, hi) over n elements (each of
 * concat's inputs, at its place in the output). */
QK_INLINE void qk_requant_s8(const int8_t *x, int32_t n, int32_t zp_in, int32_t m0, int shift, int32_t zp_out,
                             int32_t lo, int32_t hi, int8_t *y) {
    int32_t k;
    for (k = 0; k < n; k++) y[k] = q_out(q_requant(x[k] - zp_in, m0, shift) + zp_out, lo, hi);
}

/* TFLite's ADD: each input's x - zp shifted left, scaled by its
 * multiplier, the sum requantized by the output's. */
QK_INLINE void qk_add(const int8_t *a, const int8_t *b, int32_t n, int32_t zp_a, int32_t zp_b, int left_shift,
                      int32_t m_a, int sh_a, int32_t m_b, int sh_b, int32_t m_out, int sh_out, int32_t zp_out,
                      int32_t lo, int32_t hi, int8_t *y) {
    int32_t k;
    for (k = 0; k < n; k++) {
        int32_t xa = (int32_t)((uint32_t)(a[k] - zp_a) << left_shift);
        int32_t xb = (int32_t)((uint32_t)(b[k] - zp_b) << left_shift);
        int32_t s = q_mbqm(xa, m_a, sh_a) + q_mbqm(xb, m_b, sh_b);
        y[k] = q_out(q_requant(s, m_out, sh_out) + zp_out, lo, hi);
    }
}

/* qk_add with tables where tab is given (512 int32, 4-byte aligned: the
 * generated C's scratch): each input's term q_mbqm((x - zp) << left_shift,
 * m, sh) depends on its byte alone, so it is made once for each of the
 * 256 bytes of each input (ta, tb, indexed by the byte), and then an
 * element is two table loads, their sum and the output's requantization
 * (SN: qk_rqz's): the same integers for a few instructions instead of
 * three 64-bit products. Worth it where n is large beside the 512 terms
 * (the generator's choice). */
QK_INLINE void qk_add_tab(const int8_t *a, const int8_t *b, int32_t n, int32_t zp_a, int32_t zp_b, int left_shift,
                          int32_t m_a, int sh_a, int32_t m_b, int sh_b, int32_t m_out, int sh_out, int SN,
                          int32_t zp_out, int32_t lo, int32_t hi, int32_t *tab, int8_t *y) {
    int32_t k;
    int v;
    if (!tab) {
        (void)SN;
        qk_add(a, b, n, zp_a, zp_b, left_shift, m_a, sh_a, m_b, sh_b, m_out, sh_out, zp_out, lo, hi, y);
        return;
    }
    const int D = Q_DSP && SN >= 2; /* the terms doubled: the sum is 2·acc (qk_rqzd's D) */
    const int32_t *tb = tab + 256;
    for (v = -128; v < 128; v++) { /* indexed by the byte as stored (its two's complement) */
        tab[(uint8_t)v] = q_mbqm((int32_t)((uint32_t)(v - zp_a) << left_shift), m_a, sh_a) * (1 + D);
        tab[256 + (uint8_t)v] = q_mbqm((int32_t)((uint32_t)(v - zp_b) << left_shift), m_b, sh_b) * (1 + D);
    }
    k = 0;
#if Q_DSP
    for (; k + 4 <= n; k += 4) { /* a word of each input: a byte field each, no byte loads */
        const uint32_t u = q_ld32(a + k), w = q_ld32(b + k);
#define QK_ADD_TAB(j)                                                                                 \
    (y[k + (j)] = q_out(qk_rqzd(tab[(u >> 8 * (j)) & 0xFFu] + tb[(w >> 8 * (j)) & 0xFFu], m_out, sh_out, SN, D, \
                                zp_out, lo),                                                               \
                        lo, hi))
        QK_ADD_TAB(0), QK_ADD_TAB(1), QK_ADD_TAB(2), QK_ADD_TAB(3);
#undef QK_ADD_TAB
    }
#endif
    for (; k < n; k++)
        y[k] = q_out(qk_rqzd(tab[(uint8_t)a[k]] + tb[(uint8_t)b[k]], m_out, sh_out, SN, D, zp_out, lo), lo, hi);
}

/* TFLite's MUL: the int32 product of the offsets (|.| <= 2^16),
 * requantized; b's element is a's own (per = 1) or its channel's (b of
 * [C, 1, 1], per = H·W: element k / per). */
QK_INLINE void qk_mul(const int8_t *a, const int8_t *b, int32_t n, int32_t per, int32_t zp_a, int32_t zp_b,
                      int32_t m0, int shift, int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
    int32_t k;
    for (k = 0; k < n; k++) {
        int32_t p = ((int32_t)a[k] - zp_a) * ((int32_t)b[k / per] - zp_b);
        y[k] = q_out(q_requant(p, m0, shift) + zp_out, lo, hi);
    }
}

/* y[k] = table[x[k] - qmin] (table of up to 256 bytes indexed from qmin). */
QK_INLINE void qk_lut(const int8_t *x, int32_t n, const int8_t *table, int32_t qmin, int8_t *y) {
    int32_t k;
    for (k = 0; k < n; k++) y[k] = table[x[k] - qmin];
}

/* y[k] = clamp(x[k], lo, hi) (ReLU and ReLU6 of the storage integers). */
QK_INLINE void qk_clamp(const int8_t *x, int32_t n, int32_t lo, int32_t hi, int8_t *y) {
    int32_t k;
    for (k = 0; k < n; k++) {
        int32_t v = x[k];
        y[k] = (int8_t)(v < lo ? lo : v > hi ? hi : v);
    }
}

/* ---- linear and convolution --------------------------------------------------------
 * y[o] = clamp(zp_out + requant(b[o] + Σ w·(x - zp)), lo, hi) with int8
 * weights (w - zp_w, which the callers check fits int8). B output channels
 * (qk_block: 4, 3, 2 or 1, dividing the channels of a group) are computed
 * together: their accumulators in registers, each input unpacked once.
 * The int32 sums are exact in any order (|x - zp| <= 255, |w| <= 128, and
 * the plan checks K·255·255 + |b| < 2^31), so the DSP and portable paths
 * give the same integers. With the DSP extension, four inputs at a time:
 * one LDR and two SXTAB16 give the pairs (x0 - zp, x2 - zp) and
 * (x1 - zp, x3 - zp); the weights unpack the same way (SXTB16), so the
 * pairs match without reordering; SMLAD adds both products. */
/* S(j) for each channel j < B of a block, j a constant in each (so that
 * the accumulators are scalars from the start, in registers) */
#define QK_INIT(j) (acc[j] = bias[o + (j)])
#define QK_EACH(B, S) \
    do {              \
        S(0);         \
        if ((B) > 1) S(1); \
        if ((B) > 2) S(2); \
        if ((B) > 3) S(3); \
    } while (0)

QK_INLINE int qk_block(int n) { return n % 4 == 0 ? 4 : n % 3 == 0 ? 3 : n % 2 == 0 ? 2 : 1; }

/* The packed pair (-zp, -zp) that SXTAB16 adds to two unpacked bytes. */
QK_INLINE int32_t qk_neg_zp_pair(int32_t zp) {
    uint32_t h = (uint32_t)(uint16_t)(int16_t)-zp;
    uint32_t v = h | (h << 16);
    return v > INT32_MAX ? -(int32_t)(~v) - 1 : (int32_t)v;
}

/* The B outputs o .. o + B - 1 of acc, requantized, at y, y + ys, ... */
QK_INLINE void qk_store(const int32_t *acc, int B, int o, const int32_t *m0, const int32_t *shift, int MS, int32_t zp_out,
                        int32_t lo, int32_t hi, int8_t *y, int32_t ys) {
#define QK_STORE(j) y[(j) * ys] = q_out(qk_rq(acc[j], m0[(o + (j)) * MS], shift[(o + (j)) * MS]) + zp_out, lo, hi)
    QK_EACH(B, QK_STORE);
#undef QK_STORE
}

#if Q_NEON
/* q_mbqm on four lanes, the same integers. Single rounding: the exact
 * 64-bit products (SMULL), one rounding shift right by t = 31 - shift
 * (SRSHL by -t: floor((p + 2^(t-1)) / 2^t), computed without overflow),
 * narrowed with saturation. Double rounding: the saturating left shift for
 * shift > 0; SRDHM is SQRDMULH (floor((2·x·m0 + 2^31) / 2^32), which
 * saturates only for INT32_MIN·INT32_MIN, never here: m0 >= 0); the
 * rounding right shift by e = -shift, half away from zero, is a rounding
 * shift half up (SRSHL by -e) of v - [v < 0] (saturating: at INT32_MIN the
 * floor is the same). */
QK_INLINE int32x4_t qk_mbqm4(int32x4_t x, int32_t m0, int shift) {
#if QK_SINGLE_ROUNDING
    const int64x2_t t = vdupq_n_s64(shift - 31);
    const int64x2_t pl = vrshlq_s64(vmull_n_s32(vget_low_s32(x), m0), t), ph = vrshlq_s64(vmull_high_n_s32(x, m0), t);
    return vcombine_s32(vqmovn_s64(pl), vqmovn_s64(ph));
#else
    int32x4_t v;
    if (shift > 0) x = vqshlq_s32(x, vdupq_n_s32(shift));
    v = vqrdmulhq_n_s32(x, m0);
    if (shift < 0) v = vrshlq_s32(vqaddq_s32(v, vshrq_n_s32(v, 31)), vdupq_n_s32(shift));
    return v;
#endif
}

/* q_out(q_requant(acc) + zp_out, lo, hi) on four lanes (q_requant's clamp
 * to [-256, 255] changes no output, as there; the zero point is added
 * with saturation instead). */
QK_INLINE int32x4_t qk_out4(int32x4_t a, int32_t m0, int shift, int32_t zp_out, int32_t lo, int32_t hi) {
    return vminq_s32(vmaxq_s32(vqaddq_s32(qk_mbqm4(a, m0, shift), vdupq_n_s32(zp_out)), vdupq_n_s32(lo)), vdupq_n_s32(hi));
}

/* Eight positions' sums of output channel o (lanes 0-3 in a, 4-7 in b),
 * requantized into y[0 .. 7]. */
QK_INLINE void qk_store8(int32x4_t a, int32x4_t b, int32_t m0, int shift, int32_t zp_out, int32_t lo, int32_t hi,
                         int8_t *y) {
    a = qk_out4(a, m0, shift, zp_out, lo, hi), b = qk_out4(b, m0, shift, zp_out, lo, hi);
    vst1_s8(y, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
}

/* Four positions' sums, requantized into y[0 .. 3]. */
QK_INLINE void qk_store4(int32x4_t a, int32_t m0, int shift, int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
    const int16x4_t n = vmovn_s32(qk_out4(a, m0, shift, zp_out, lo, hi));
    const uint32_t w = vget_lane_u32(vreinterpret_u32_s8(vmovn_s16(vcombine_s16(n, n))), 0);
    memcpy(y, &w, 4);
}
/* The eight bytes of row at columns a .. a + 7, a in [-1, W - 7], W >= 8:
 * a column outside the row (padding) holds z's byte, so that x - zp is 0. */
QK_INLINE int8x8_t qk_ld8(const int8_t *row, int a, int W, int8x8_t z) {
    if (a < 0) return vext_s8(z, vld1_s8(row), 7);
    if (a + 8 > W) return vext_s8(vld1_s8(row + W - 8), z, 1);
    return vld1_s8(row + a);
}
#if Q_DOT
/* qk_ld8 for sixteen bytes: a in [-1, W - 15], W >= 16. */
QK_INLINE int8x16_t qk_ld16(const int8_t *row, int a, int W, int8x16_t z) {
    if (a < 0) return vextq_s8(z, vld1q_s8(row), 15);
    if (a + 16 > W) return vextq_s8(vld1q_s8(row + W - 16), z, 1);
    return vld1q_s8(row + a);
}
/* Four rows of sixteen bytes (r0..r3) as sixteen lanes of four bytes, lane i
 * holding (r0[i], r1[i], r2[i], r3[i]): q[0] lanes 0-3, q[1] 4-7, ... */
QK_INLINE void qk_quads(int8x16_t r0, int8x16_t r1, int8x16_t r2, int8x16_t r3, int8x16_t *q) {
    const int16x8_t t0 = vreinterpretq_s16_s8(vzip1q_s8(r0, r1)), t1 = vreinterpretq_s16_s8(vzip2q_s8(r0, r1));
    const int16x8_t t2 = vreinterpretq_s16_s8(vzip1q_s8(r2, r3)), t3 = vreinterpretq_s16_s8(vzip2q_s8(r2, r3));
    q[0] = vreinterpretq_s8_s16(vzip1q_s16(t0, t2)), q[1] = vreinterpretq_s8_s16(vzip2q_s16(t0, t2));
    q[2] = vreinterpretq_s8_s16(vzip1q_s16(t1, t3)), q[3] = vreinterpretq_s8_s16(vzip2q_s16(t1, t3));
}
/* a4[j][0..3] += SDOT of the quads q with output channel j's stored weight word at w. */
#define QK_DOT4(j, w)                                                                                      \
    do {                                                                                                   \
        uint32_t w_;                                                                                       \
        int8x16_t wq_;                                                                                     \
        memcpy(&w_, (w), 4);                                                                               \
        wq_ = vreinterpretq_s8_u32(vdupq_n_u32(w_));                                                       \
        a4[j][0] = vdotq_s32(a4[j][0], q[0], wq_), a4[j][1] = vdotq_s32(a4[j][1], q[1], wq_);             \
        a4[j][2] = vdotq_s32(a4[j][2], q[2], wq_), a4[j][3] = vdotq_s32(a4[j][3], q[3], wq_);             \
    } while (0)
/* a4[j][0..3] += w·(x - zp) over sixteen positions (xv: their bytes). */
#define QK_SMLAL16(j, w)                                                                                   \
    do {                                                                                                   \
        const int16_t w_ = (int16_t)(w);                                                                   \
        const int16x8_t l_ = vsubl_s8(vget_low_s8(xv), vget_low_s8(vzq)), h_ = vsubl_high_s8(xv, vzq);     \
        a4[j][0] = vmlal_n_s16(a4[j][0], vget_low_s16(l_), w_), a4[j][1] = vmlal_high_n_s16(a4[j][1], l_, w_); \
        a4[j][2] = vmlal_n_s16(a4[j][2], vget_low_s16(h_), w_), a4[j][3] = vmlal_high_n_s16(a4[j][3], h_, w_); \
    } while (0)
#define QK_ST16(j, y)                                                                                      \
    (qk_store8(a4[j][0], a4[j][1], m0[(o + (j)) * MS], shift[(o + (j)) * MS], zp_out, lo, hi, (y)),                      \
     qk_store8(a4[j][2], a4[j][3], m0[(o + (j)) * MS], shift[(o + (j)) * MS], zp_out, lo, hi, (y) + 8))
#endif
/* acc_lo/acc_hi[j] += w·(x - zp) over eight positions, x widened once (xv). */
#define QK_N8(j, w)                                                                   \
    (al[j] = vmlal_n_s16(al[j], vget_low_s16(xv), (int16_t)(w)),                      \
     ah[j] = vmlal_high_n_s16(ah[j], xv, (int16_t)(w)))
#define QK_N8_INIT(j) (al[j] = ah[j] = vdupq_n_s32(bias[o + (j)]))
/* ... and stored at output (oy, ox) of the map [O][OH][OW] of channel o + j (row yr) */
#define QK_ST8_MAP(j) qk_store8(al[j], ah[j], m0[(o + (j)) * MS], shift[(o + (j)) * MS], zp_out, lo, hi, yr + (int32_t)(j) * OH * OW + ox)
#endif

/* ---- packed weights ----------------------------------------------------------------
 * Weights of at most 4 (or 2) bits, P = 4 (2) bits each in flash. A packed
 * row is a run of L weights in the order the int8 kernel reads them, cut
 * into groups of G = 32/P weights (8, or 16), 4 bytes a group: weight i of
 * a group is in byte i % 4, bits (i / 4)·P .. (i / 4)·P + P - 1 (bit 0 the
 * least significant), in two's complement; the last group is padded with
 * zero weights, so a row takes qk_packed_row(L, P) bytes. A linear op
 * stores each output channel's K weights as one row (rows qk_packed_row(K,
 * P) bytes apart); a convolution stores its whole int8 array (O·KK
 * weights, qk_conv's or qk_conv_pairs' order) as one row. P = 8 is the
 * int8 array itself. Why this order: four consecutive weights share a
 * field position across the four bytes of a word, as four consecutive
 * inputs share one int8 word, so on the DSP path one mask (and a shift)
 * turns a packed word into four int8 lanes that SXTB16 unpacks in the
 * pairs the inputs unpack in (qk_dot_packed). */
QK_INLINE int32_t qk_packed_row(int32_t L, int P) { return P >= 8 ? L : (L + 32 / P - 1) / (32 / P) * 4; }

/* The P-bit field of byte b at bit s, sign-extended (defined C: no shift
 * of a negative value). */
QK_INLINE int32_t qk_field(uint32_t b, int s, int P) {
    int32_t m = (1 << P) - 1, h = 1 << (P - 1);
    return (((int32_t)(b >> s) & m) ^ h) - h;
}

/* Weight i of a packed row. */
QK_INLINE int32_t qk_packed_weight(const int8_t *row, int32_t i, int P) {
    const int32_t G = 32 / P, r = i % G;
    return qk_field((uint8_t)row[i / G * 4 + r % 4], (int)(r / 4) * P, P);
}

/* A convolution's rows o .. o + B - 1 of L weights as int8: in place for
 * P = 8; else weights o·L .. (o + B)·L - 1 of the packed row w unpacked
 * into s (B·L bytes), once for all the output positions of the block, so
 * the convolutions' inner loops are the int8 ones. Whole groups a word at
 * a time: field q of the four bytes (weights 4q .. 4q + 3) is moved to the
 * bottom of each byte and masked, t in [0, 2^P) per byte; each byte's
 * ((t ^ 2^(P-1)) + 0x80 - 2^(P-1)) ^ 0x80 is its field sign-extended to
 * int8 with no carry between bytes (the sum stays below 0x100), so four
 * weights cost a few word operations and one store, in either byte order
 * (the word is stored as it was loaded). The ends (where o·L is not a
 * multiple of G) weight by weight. One shared copy, not inlined: it runs
 * once per block of channels, and inlined into each convolution it cost
 * ~150 bytes of code each. */
static Q_NOINLINE Q_MAYBE_UNUSED void qk_unpack(const int8_t *w, int32_t i0, int32_t e, int P, int8_t *s) {
    const int32_t G = 32 / P;
    const uint32_t m = 0x01010101u * ((1u << P) - 1), h = 0x01010101u << (P - 1);
    const uint32_t a = 0x01010101u * (0x80u - (1u << (P - 1)));
    int32_t i = i0;
    int q;
    for (; i < e && i % G; i++) s[i - i0] = (int8_t)qk_packed_weight(w, i, P);
    for (; i + G <= e; i += G) {
        uint32_t v, t;
        memcpy(&v, w + i / G * 4, 4);
        for (q = 0; q < G / 4; q++) {
            t = ((((v >> (q * P)) & m) ^ h) + a) ^ 0x80808080u;
            memcpy(s + (i - i0) + 4 * q, &t, 4);
        }
    }
    for (; i < e; i++) s[i - i0] = (int8_t)qk_packed_weight(w, i, P);
}

QK_INLINE const int8_t *qk_rows(const int8_t *w, int o, int32_t L, int P, int B, int8_t *s) {
    if (P >= 8) return w + (int32_t)o * L;
    qk_unpack(w, (int32_t)o * L, (int32_t)(o + B) * L, P, s);
    return s;
}

/* n contiguous inputs xr against B packed rows of P bits wr, wr + ws, ...
 * (ws in bytes): each weight read once (a linear op's), so unpacked in
 * registers. With the DSP extension, field q of a packed word (weights
 * 4q .. 4q + 3 of its group), shifted to the top of each byte and masked
 * (one AND with a shifted operand), is four int8 lanes holding 2^(8-P)·w;
 * SXTB16 and its rotated form give the pairs (w_4q, w_4q+2) and
 * (w_4q+1, w_4q+3), as the inputs' word unpacks. One pass over the row per
 * field keeps the loop's live values close to the int8 loop's (a word is
 * loaded once per field instead of once; holding a whole group's words
 * for four rows spilled to the stack: the autoencoder's W4A8 inference
 * took 738 K instructions on a Cortex-M4 so, 651 K this way). The scaled
 * products go to their own sums, divided by 2^(8-P) at the end (exact:
 * every term is a multiple); |2^(8-P)·w| <= 128, the int8 bound, so no
 * sum can overflow where the int8 one cannot. */
QK_INLINE void qk_dot_packed(const int8_t *xr, const int8_t *wr, int n, int ws, int P, int B, int32_t zp,
                             int32_t *acc) {
    const int G = 32 / P, nG = n / G * G;
    int k = nG;
#if Q_DSP
    {
        uint32_t top = 0x01010101u * (0x100u - (0x100u >> P)); /* each byte's top P bits */
        int32_t sc[4] = {0, 0, 0, 0};
        int q;
#if defined(__GNUC__) /* the mask in a register: the shift folds into the AND (one instruction, not two) */
        __asm__("" : "+r"(top));
#endif
        QK_UNROLL
        for (q = 0; q < G / 4; q++) {
            const int8_t *xp = xr + 4 * q, *wp = wr, *we = wr + nG / G * 4;
            for (; wp < we; xp += G, wp += 4) {
                uint32_t xv = q_ld32(xp), f;
                int32_t xa = __sxtab16(qk_neg_zp_pair(zp), (int32_t)xv), xb = q_sxtab16_ror8(qk_neg_zp_pair(zp), xv);
#define QK_SMLAD(j)                                                                                  \
    (f = (q_ld32(wp + (j) * ws) << (8 - P - q * P)) & top, sc[j] = __smlad(__sxtb16((int32_t)f), xa, sc[j]), \
     sc[j] = __smlad(q_sxtb16_ror8(f), xb, sc[j]))
                QK_EACH(B, QK_SMLAD);
#undef QK_SMLAD
            }
        }
#define QK_UNSCALE(j) (acc[j] += sc[j] >> (8 - P)) /* exact: a multiple of 2^(8-P) */
        QK_EACH(B, QK_UNSCALE);
#undef QK_UNSCALE
    }
#else
    int k0 = 0; /* the groups done below (NEON) */
#if Q_NEON
    {
        /* 16 packed bytes a step (32 weights at P = 4, 64 at P = 2), unpacked into int8
         * lanes in the row's order: each byte's fields sign-extended by a shift left and
         * an arithmetic shift right, then the four-byte groups' fields interleaved (field
         * f of group g holds weights G·g + 4f .. G·g + 4f + 3) */
        const int step = 4 * G;
        int32x4_t s4[4];
#if Q_DOT
        int32x4_t r4[4];
#define QK_PZ(j) (s4[j] = r4[j] = vdupq_n_s32(0))
#else
        const int8x16_t vz = vdupq_n_s8((int8_t)zp);
#define QK_PZ(j) (s4[j] = vdupq_n_s32(0))
#endif
        QK_EACH(B, QK_PZ);
#undef QK_PZ
        for (; k0 + step <= nG; k0 += step) {
            int8x16_t wv[4], xq[4];
#if !Q_DOT
            int16x8_t xl[4], xh[4];
#endif
            int q;
            for (q = 0; q < step / 16; q++) {
                xq[q] = vld1q_s8(xr + k0 + 16 * q);
#if !Q_DOT
                xl[q] = vsubl_s8(vget_low_s8(xq[q]), vget_low_s8(vz)), xh[q] = vsubl_high_s8(xq[q], vz);
#endif
            }
#define QK_PUNPACK(j)                                                                                   \
    do {                                                                                                \
        const int8x16_t b_ = vld1q_s8(wr + (j) * ws + k0 / G * 4);                                      \
        if (P == 4) {                                                                                   \
            const int32x4_t lo_ = vreinterpretq_s32_s8(vshrq_n_s8(vshlq_n_s8(b_, 4), 4));               \
            const int32x4_t hi_ = vreinterpretq_s32_s8(vshrq_n_s8(b_, 4));                              \
            wv[0] = vreinterpretq_s8_s32(vzip1q_s32(lo_, hi_)), wv[1] = vreinterpretq_s8_s32(vzip2q_s32(lo_, hi_)); \
        } else {                                                                                        \
            const int32x4_t f0_ = vreinterpretq_s32_s8(vshrq_n_s8(vshlq_n_s8(b_, 6), 6));               \
            const int32x4_t f1_ = vreinterpretq_s32_s8(vshrq_n_s8(vshlq_n_s8(b_, 4), 6));               \
            const int32x4_t f2_ = vreinterpretq_s32_s8(vshrq_n_s8(vshlq_n_s8(b_, 2), 6));               \
            const int32x4_t f3_ = vreinterpretq_s32_s8(vshrq_n_s8(b_, 6));                              \
            const int64x2_t a_ = vreinterpretq_s64_s32(vzip1q_s32(f0_, f1_));                          \
            const int64x2_t c_ = vreinterpretq_s64_s32(vzip1q_s32(f2_, f3_));                          \
            const int64x2_t d_ = vreinterpretq_s64_s32(vzip2q_s32(f0_, f1_));                          \
            const int64x2_t e_ = vreinterpretq_s64_s32(vzip2q_s32(f2_, f3_));                          \
            wv[0] = vreinterpretq_s8_s64(vzip1q_s64(a_, c_)), wv[1] = vreinterpretq_s8_s64(vzip2q_s64(a_, c_)); \
            wv[2] = vreinterpretq_s8_s64(vzip1q_s64(d_, e_)), wv[3] = vreinterpretq_s8_s64(vzip2q_s64(d_, e_)); \
        }                                                                                               \
        QK_PMAC(j);                                                                                     \
    } while (0)
#if Q_DOT /* the raw inputs by SDOT, and the weights' sum by SDOT with ones (zp's share) */
#define QK_PMAC(j)                                                                                      \
    for (q = 0; q < step / 16; q++)                                                                     \
    s4[j] = vdotq_s32(s4[j], xq[q], wv[q]), r4[j] = vdotq_s32(r4[j], vdupq_n_s8(1), wv[q])
#else
#define QK_PMAC(j)                                                                                      \
    for (q = 0; q < step / 16; q++) {                                                                   \
        const int16x8_t wl_ = vmovl_s8(vget_low_s8(wv[q])), wh_ = vmovl_high_s8(wv[q]);                 \
        s4[j] = vmlal_s16(s4[j], vget_low_s16(xl[q]), vget_low_s16(wl_));                               \
        s4[j] = vmlal_high_s16(s4[j], xl[q], wl_);                                                      \
        s4[j] = vmlal_s16(s4[j], vget_low_s16(xh[q]), vget_low_s16(wh_));                               \
        s4[j] = vmlal_high_s16(s4[j], xh[q], wh_);                                                      \
    }
#endif
            QK_EACH(B, QK_PUNPACK);
#undef QK_PUNPACK
        }
#undef QK_PMAC
#if Q_DOT
#define QK_PSUM(j) (acc[j] += vaddvq_s32(s4[j]) - zp * vaddvq_s32(r4[j]))
#else
#define QK_PSUM(j) (acc[j] += vaddvq_s32(s4[j]))
#endif
        QK_EACH(B, QK_PSUM);
#undef QK_PSUM
    }
#endif
    /* byte by byte: byte b of a group holds weights b, b + 4, ... */
    for (k = k0; k < nG; k += G) {
        int b, q;
        QK_UNROLL
        for (b = 0; b < 4; b++) {
            uint32_t wb[4];
#define QK_LOADB(j) (wb[j] = (uint8_t)wr[(j) * ws + k / G * 4 + b])
            QK_EACH(B, QK_LOADB);
#undef QK_LOADB
            QK_UNROLL
            for (q = 0; q < G / 4; q++) {
                int32_t xv = xr[k + 4 * q + b] - zp;
#define QK_MAC(j) (acc[j] += qk_field(wb[j], q * P, P) * xv)
                QK_EACH(B, QK_MAC);
#undef QK_MAC
            }
        }
    }
#endif
    for (; k < n; k++) {
        int32_t xv = xr[k] - zp;
#define QK_MAC(j) (acc[j] += qk_packed_weight(wr + (j) * ws, k, P) * xv)
        QK_EACH(B, QK_MAC);
#undef QK_MAC
    }
}

/* n contiguous inputs xr against B weight rows wr, wr + ws, ... */
QK_INLINE void qk_dot(const int8_t *xr, const int8_t *wr, int n, int ws, int B, int32_t zp, int32_t *acc) {
    int k = 0;
#if Q_DSP
    QK_UNROLL
    for (; k + 4 <= n; k += 4) {
        uint32_t xv = q_ld32(xr + k), wv;
        int32_t xa = __sxtab16(qk_neg_zp_pair(zp), (int32_t)xv), xb = q_sxtab16_ror8(qk_neg_zp_pair(zp), xv);
#define QK_SMLAD(j)                                          \
    (wv = q_ld32(wr + (j) * ws + k), acc[j] = __smlad(__sxtb16((int32_t)wv), xa, acc[j]), \
     acc[j] = __smlad(q_sxtb16_ror8(wv), xb, acc[j]))
        QK_EACH(B, QK_SMLAD);
#undef QK_SMLAD
    }
#endif
    QK_UNROLL
    for (; k < n; k++) {
        int32_t xv = xr[k] - zp;
#define QK_MAC(j) (acc[j] += wr[(j) * ws + k] * xv)
        QK_EACH(B, QK_MAC);
#undef QK_MAC
    }
}

/* The same over a long row (a linear op's K): a loop, not unrolled. */
QK_INLINE void qk_dot_long(const int8_t *xr, const int8_t *wr, int n, int ws, int B, int32_t zp, int32_t *acc) {
    int k = 0;
#if Q_DOT
    if (n >= 16) { /* sixteen inputs a step: SDOT of the raw inputs, and of ones for the row's Σ w (zp's share) */
        const int8x16_t ones = vdupq_n_s8(1);
        int32x4_t s[4], r[4];
#define QK_LZ(j) (s[j] = r[j] = vdupq_n_s32(0))
        QK_EACH(B, QK_LZ);
#undef QK_LZ
        for (; k + 16 <= n; k += 16) {
            const int8x16_t xv = vld1q_s8(xr + k);
#define QK_LD(j)                                                                                  \
    do {                                                                                          \
        const int8x16_t wv_ = vld1q_s8(wr + (j) * ws + k);                                        \
        s[j] = vdotq_s32(s[j], xv, wv_), r[j] = vdotq_s32(r[j], ones, wv_);                       \
    } while (0)
            QK_EACH(B, QK_LD);
#undef QK_LD
        }
#define QK_LSUM(j) (acc[j] += vaddvq_s32(s[j]) - zp * vaddvq_s32(r[j]))
        QK_EACH(B, QK_LSUM);
#undef QK_LSUM
    }
#elif Q_NEON
    if (n >= 16) { /* sixteen inputs a step, x - zp and w widened to int16, four int32 lanes per row */
        const int8x16_t vz = vdupq_n_s8((int8_t)zp);
        int32x4_t s[4];
#define QK_LZ(j) (s[j] = vdupq_n_s32(0))
        QK_EACH(B, QK_LZ);
#undef QK_LZ
        for (; k + 16 <= n; k += 16) {
            const int8x16_t xv = vld1q_s8(xr + k);
            const int16x8_t xl = vsubl_s8(vget_low_s8(xv), vget_low_s8(vz)), xh = vsubl_high_s8(xv, vz);
#define QK_LN(j)                                                                                  \
    do {                                                                                          \
        const int8x16_t wv_ = vld1q_s8(wr + (j) * ws + k);                                        \
        const int16x8_t wl_ = vmovl_s8(vget_low_s8(wv_)), wh_ = vmovl_high_s8(wv_);              \
        s[j] = vmlal_s16(s[j], vget_low_s16(xl), vget_low_s16(wl_)), s[j] = vmlal_high_s16(s[j], xl, wl_); \
        s[j] = vmlal_s16(s[j], vget_low_s16(xh), vget_low_s16(wh_)), s[j] = vmlal_high_s16(s[j], xh, wh_); \
    } while (0)
            QK_EACH(B, QK_LN);
#undef QK_LN
        }
#define QK_LSUM(j) (acc[j] += vaddvq_s32(s[j]))
        QK_EACH(B, QK_LSUM);
#undef QK_LSUM
    }
#endif
#if Q_DSP
    /* sixteen inputs a pass: the loop's bound, add and branch once per 16·B products */
#define QK_LDW(j) (wv[j] = q_ld32(wr + (j) * ws + k))
#define QK_SMLAD(j) \
    (acc[j] = __smlad(__sxtb16((int32_t)wv[j]), xa, acc[j]), acc[j] = __smlad(q_sxtb16_ror8(wv[j]), xb, acc[j]))
#define QK_STEP4                                                                                        \
    do { /* the loads first, back to back (a load after a load is one cycle) */                         \
        uint32_t xv = q_ld32(xr + k), wv[4];                                                            \
        int32_t xa, xb;                                                                                 \
        QK_EACH(B, QK_LDW);                                                                             \
        xa = __sxtab16(qk_neg_zp_pair(zp), (int32_t)xv), xb = q_sxtab16_ror8(qk_neg_zp_pair(zp), xv);   \
        QK_EACH(B, QK_SMLAD);                                                                           \
    } while (0)
    for (; k + 16 <= n; k += 4) {
        QK_STEP4;
        k += 4;
        QK_STEP4;
        k += 4;
        QK_STEP4;
        k += 4;
        QK_STEP4;
    }
    for (; k + 4 <= n; k += 4) QK_STEP4;
#undef QK_STEP4
#undef QK_SMLAD
#undef QK_LDW
#endif
    for (; k < n; k++) {
        int32_t xv = xr[k] - zp;
#define QK_MAC(j) (acc[j] += wr[(j) * ws + k] * xv)
        QK_EACH(B, QK_MAC);
#undef QK_MAC
    }
}

/* B partial dot products of a linear op: inputs k0 .. k0 + n - 1 against
 * rows o .. o + B - 1 of its weights, int8 rows of K (P = 8) or packed
 * rows (k0 then a multiple of the group, 32 / P). */
QK_INLINE void qk_dot_rows(const int8_t *x, const int8_t *w, int P, int K, int o, int k0, int n, int B, int32_t zp,
                           int32_t *acc) {
    if (P >= 8) qk_dot_long(x + k0, w + (int32_t)o * K + k0, n, K, B, zp, acc);
    else qk_dot_packed(x + k0, w + o * qk_packed_row(K, P) + k0 / (32 / P) * 4, n, qk_packed_row(K, P), P, B, zp, acc);
}

/* Linear: x [K], w [O][K] int8 (P = 8) or O packed rows of P = 4 or 2
 * bits, y [O]; B = qk_block(O). bm = NULL: one sum a row (NB unused).
 * Sub-channel weights (bm, bs: [O][J]): each row's K inputs split into
 * J = ceil(K / NB) blocks of NB (the last may be shorter), each with its
 * own scale; a block's partial sum is converted to the row's accumulation
 * scale by MBQM(sum, bm[o·J + j], bs[o·J + j]) and added to the bias in
 * block order, as the runtime's src/runtime/subchannel.c (whose plan
 * bounds every partial and converted sum: docs/subchannel.md). */
QK_INLINE void qk_linear(const int8_t *x, const int8_t *w, int P, int K, int O, int B, int NB, const int32_t *bm,
                         const int32_t *bs, const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int32_t zp,
                         int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
    int o, k0;
    for (o = 0; o < O; o += B) {
        int32_t acc[4];
        QK_EACH(B, QK_INIT);
        if (!bm) {
            qk_dot_rows(x, w, P, K, o, 0, K, B, zp, acc);
        } else {
            const int J = (K + NB - 1) / NB;
            for (k0 = 0; k0 < K; k0 += NB) {
                int32_t part[4] = {0, 0, 0, 0};
                qk_dot_rows(x, w, P, K, o, k0, K - k0 < NB ? K - k0 : NB, B, zp, part);
#define QK_CONVERT(j) (acc[j] += q_mbqm(part[j], bm[(o + (j)) * J + k0 / NB], (int)bs[(o + (j)) * J + k0 / NB]))
                QK_EACH(B, QK_CONVERT);
#undef QK_CONVERT
            }
        }
        qk_store(acc, B, o, m0, shift, MS, zp_out, lo, hi, y + o, 1);
    }
}

/* ---- paired-byte weights (the DSP) -----------------------------------------------------
 * SMLAD multiplies halfwords. A word of four int8 weights (a0, b0, a1, b1),
 * read whole, is the halfword pair (256·b0 + a0, 256·b1 + a1) when each odd
 * byte is stored as b - [a < 0] (the low byte's borrow undone): the C
 * generator stores the weights so (qat__cg_pair_rows; the pair's value must fit
 * int16, so no b = -128 beside a negative a). SXTB16 gives (a0, a1). With
 * raw inputs (u, v) for (a, b) and the input words
 *     A = 256·(u + 1) - (v + 129)   (in [-32768, 32767]),   B = v + 129,
 * a·A + (256·b + a)·B = 256·(a·(u + 1) + b·(v + 129)): one SXTB16 and two
 * SMLADs per four products, against two SXTB16s unpacked per word
 * otherwise. The row's sum s is 256·T, T = Σ w·x + Σ_even w + 129·Σ_odd w
 * (x raw); the generator folds the constant and the zero point into the
 * bias (bias - Σ_even w·(1 + zp) - Σ_odd w·(129 + zp)) and takes the op
 * only where every row's bound Σ_even |w|·128 + Σ_odd |w|·256 < 2^23, so
 * s fits int32 and T = s >> 8 exactly (SMLAD's sums wrap, the last is
 * exact). The column kernels below take the same form where their PB (a
 * literal at the calls) is 1, the generator having checked the same bound
 * over their rows. */
#if Q_DSP
/* The paired form's input words (also the column kernels', PB = 1 at
 * their calls): of raw int8 inputs u (meeting a weight pair's low byte)
 * and v (its high byte), A = 256·(u + 1) - (v + 129) and B = v + 129. ua
 * and vb hold the u's and v's bytes at bits 0 and 16 (bits 8..15 and
 * 24..31 zero); 256·(u + 1) ≡ 256·u8 + 256 (mod 2^16), so A is ua moved up
 * a byte less (v - 127), by SSUB16, which wraps each halfword. */
QK_INLINE int32_t qk_pair_a(uint32_t ua, uint32_t vb) {
    return __ssub16((int32_t)(ua << 8), __sxtab16(qk_neg_zp_pair(127), (int32_t)vb));
}
QK_INLINE int32_t qk_pair_b(uint32_t vb) { return __sxtab16(qk_neg_zp_pair(-129), (int32_t)vb); }
/* The words of a padding tap (x = zp): A and B of u = v = zp, in both halves. */
QK_INLINE void qk_pair_pad(int32_t zp, int32_t *a, int32_t *b) {
    const uint32_t z = (uint32_t)(uint8_t)(int8_t)zp * 0x10001u;
    *a = qk_pair_a(z, z), *b = qk_pair_b(z);
}
/* n int16 of a column or ring (n a multiple of 4) as padding: 0 (x - zp =
 * 0), or with PB the paired form's padding words. */
QK_INLINE void qk_pad_q15(int16_t *p, int32_t n, int32_t zp, int PB) {
    int32_t a, b, k;
    if (!PB) {
        memset(p, 0, (size_t)n * sizeof *p);
        return;
    }
    qk_pair_pad(zp, &a, &b);
    for (k = 0; k < n; k += 4) memcpy(p + k, &a, 4), memcpy(p + k + 2, &b, 4);
}

#endif

/* A linear op in the paired form on the DSP. xs: the input words, built
 * once per call, K / 4 words A then K / 4 words B (2·K bytes, 4-byte
 * aligned; apart, so that the compiler does not pair their loads into an
 * LDRD, which costs a Cortex-M4 a cycle more than two LDRs after a load).
 * Without the DSP: qk_linear over the weights as they are (the
 * generator's other copy). */
QK_INLINE void qk_linear_paired(const int8_t *x, const int8_t *w, int32_t *xs, int K, int O, int B,
                                const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int SN, int32_t zp,
                                int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
#if Q_DSP
    const int D = QK_DOUBLED(1, SN);
    int o, k;
    (void)zp; /* in the bias */
    for (k = 0; k < K; k += 4) {
        const uint32_t u = q_ld32(x + k), v = u >> 8 & 0x00FF00FFu; /* the odd bytes at bits 0 and 16 */
        xs[k / 4] = qk_pair_a(u & 0x00FF00FFu, v);
        xs[K / 4 + k / 4] = qk_pair_b(v);
    }
    for (o = 0; o < O; o += B) {
        const int8_t *wp = w + (int32_t)o * K;
        const int32_t *xp = xs, *xe = xs + K / 4;
        int32_t acc[4] = {0, 0, 0, 0};
#define QK_LDW(j) (wv[j] = q_ld32(wp + (j) * K + off))
#define QK_PAIR(j) (acc[j] = __smlad(__sxtb16((int32_t)wv[j]), xa, acc[j]), acc[j] = __smlad((int32_t)wv[j], xb, acc[j]))
#define QK_STEP4(s)                                                                \
    do { /* the loads first, back to back */                                     \
        const int off = 4 * (s);                                                   \
        const int32_t xa = xp[s], xb = xp[K / 4 + (s)];                            \
        uint32_t wv[4];                                                            \
        QK_EACH(B, QK_LDW);                                                        \
        QK_EACH(B, QK_PAIR);                                                       \
    } while (0)
        for (; xp + 8 <= xe; xp += 8, wp += 32) { /* the loop's add, compare and branch once per 32·B products */
            QK_STEP4(0);
            QK_STEP4(1);
            QK_STEP4(2);
            QK_STEP4(3);
            QK_STEP4(4);
            QK_STEP4(5);
            QK_STEP4(6);
            QK_STEP4(7);
        }
        for (; xp < xe; xp++, wp += 4) QK_STEP4(0);
#undef QK_STEP4
#undef QK_PAIR
#undef QK_LDW
#define QK_UNPAIR(j)                                                                                       \
    (y[o + (j)] = q_out(qk_rqzd(bias[o + (j)] + (acc[j] >> (8 - D)), m0[(o + (j)) * MS], shift[(o + (j)) * MS], SN, D, zp_out, \
                                lo),                                                                               \
                        lo, hi))
        QK_EACH(B, QK_UNPAIR);
#undef QK_UNPAIR
    }
#else
    (void)xs, (void)SN;
    qk_linear(x, w, 8, K, O, B, 0, NULL, NULL, bias, m0, shift, MS, zp, zp_out, lo, hi, y);
#endif
}

/* Convolution, dense, grouped or depthwise (one group per input channel):
 * x [C, H, W] -> y [O, OH, OW], G groups (group g: input channels
 * [g·C/G, (g + 1)·C/G), outputs [g·O/G, (g + 1)·O/G)), w [O][C/G][KH][KW]
 * int8 (P = 8), or its rows packed at P = 4 or 2 bits, which qk_rows
 * unpacks B rows at a time into s (B·KK bytes; unused for P = 8: pass
 * NULL); B = qk_block(O/G). No padded copy: each
 * output row clips its kernel rows to the input; the columns split into
 * the interior, where every tap of a kernel row lies inside the input (a
 * kernel row is KW contiguous inputs: qk_dot), and the border, where each
 * tap is tested. For kernel rows shorter than a DSP word over >= 4 input
 * channels per group, qk_conv_pairs is faster. */
QK_INLINE void qk_conv(const int8_t *x, const int8_t *w, int P, int8_t *s, int C, int H, int W, int O, int OH, int OW,
                       int KH, int KW, int SH, int SW, int PH, int PW, int G, int B, const int32_t *bias,
                       const int32_t *m0, const int32_t *shift, int MS, int32_t zp, int32_t zp_out, int32_t lo, int32_t hi,
                       int8_t *y) {
    const int CG = C / G, OG = O / G, KK = CG * KH * KW;
    /* interior columns: ox·SW - PW >= 0 and ox·SW - PW + KW <= W */
    int oxa = (PW + SW - 1) / SW, oxb = W + PW - KW >= 0 ? (W + PW - KW) / SW + 1 : 0;
    int o, oy, ox, c, ky, kx;
    if (oxb > OW) oxb = OW;
    if (oxb < oxa) oxb = oxa;
    for (o = 0; o < O; o += B) {
        const int8_t *xg = x + (int32_t)(o / OG) * CG * H * W; /* the group's input channels */
        const int8_t *wo = qk_rows(w, o, KK, P, B, s);
        for (oy = 0; oy < OH; oy++) {
            const int iy = oy * SH - PH;
            const int ky0 = PH && iy < 0 ? -iy : 0, ky1 = PH && iy + KH > H ? H - iy : KH;
            int8_t *yr = y + ((int32_t)o * OH + oy) * OW;
            for (ox = oxa; ox < oxb; ox++) { /* the interior */
                const int ix = ox * SW - PW;
                int32_t acc[4];
#if Q_NEON
                if (ox + 8 <= oxb && (SW == 1 || (SW == 2 && ix + KW + 15 <= W))) {
                    /* eight interior positions, each tap's eight inputs one load (stride 2:
                     * the even bytes of a deinterleaving load of 16) */
                    const int8x8_t vz = vdup_n_s8((int8_t)zp);
                    int32x4_t al[4], ah[4];
                    QK_EACH(B, QK_N8_INIT);
                    for (c = 0; c < CG; c++)
                        for (ky = ky0; ky < ky1; ky++) {
                            const int8_t *xr = xg + (c * H + iy + ky) * W + ix, *wt = wo + (c * KH + ky) * KW;
                            for (kx = 0; kx < KW; kx++) {
                                const int16x8_t xv = vsubl_s8(SW == 1 ? vld1_s8(xr + kx) : vld2_s8(xr + kx).val[0], vz);
#define QK_CN(j) QK_N8(j, wt[(j) * KK + kx])
                                QK_EACH(B, QK_CN);
#undef QK_CN
                            }
                        }
                    QK_EACH(B, QK_ST8_MAP);
                    ox += 7;
                    continue;
                }
#endif
                QK_EACH(B, QK_INIT);
                for (c = 0; c < CG; c++) {
                    if (!PH) {
                        QK_UNROLL_ROWS
                        for (ky = 0; ky < KH; ky++)
                            qk_dot(xg + (c * H + iy + ky) * W + ix, wo + (c * KH + ky) * KW, KW, KK, B, zp, acc);
                    } else {
                        for (ky = ky0; ky < ky1; ky++)
                            qk_dot(xg + (c * H + iy + ky) * W + ix, wo + (c * KH + ky) * KW, KW, KK, B, zp, acc);
                    }
                }
                qk_store(acc, B, o, m0, shift, MS, zp_out, lo, hi, yr + ox, OH * OW);
            }
            for (ox = 0; ox < OW && (oxa > 0 || oxb < OW); ox++) { /* the border: each tap tested */
                int ix, kx0, kx1;
                int32_t acc[4];
                if (ox == oxa) ox = oxb; /* skip the interior */
                if (ox >= OW) break;
                ix = ox * SW - PW;
                kx0 = ix < 0 ? -ix : 0;
                kx1 = ix + KW > W ? W - ix : KW;
                QK_EACH(B, QK_INIT);
                for (c = 0; c < CG; c++)
                    for (ky = ky0; ky < ky1; ky++)
                        for (kx = kx0; kx < kx1; kx++) {
                            int32_t xv = xg[(c * H + iy + ky) * W + ix + kx] - zp;
                            const int8_t *wr = wo + (c * KH + ky) * KW + kx;
#define QK_MAC(j) (acc[j] += wr[(j) * KK] * xv)
                            QK_EACH(B, QK_MAC);
#undef QK_MAC
                        }
                qk_store(acc, B, o, m0, shift, MS, zp_out, lo, hi, yr + ox, OH * OW);
            }
        }
    }
}

/* The stored byte of weight (o, t, c) in qk_conv_pairs' layout: the
 * weights are [O][KH·KW][C/G], each group of four channels stored as
 * (c, c+2, c+1, c+3) (channels past the last whole four in order), so that
 * SXTB16 gives (w_c, w_c+1) and its rotated form (w_c+2, w_c+3). Returns
 * the channel stored at position c of a tap's row of CG. */
QK_INLINE int qk_pair_channel(int c, int CG) {
    static const int perm[4] = {0, 2, 1, 3};
    return c < CG / 4 * 4 ? c / 4 * 4 + perm[c % 4] : c;
}

/* Convolution whose kernel rows are shorter than a DSP word (3x3, 1x1)
 * over at least 4 input channels per group (ResNet's, MobileNet's
 * pointwise, DS-CNN's): the reduction runs over channels, a plane apart,
 * so the DSP pairs channels instead of taps: (x_c - zp, x_c+1 - zp)
 * packed from two loads and one SADD16. Weights in qk_pair_channel's
 * layout (P = 8, or those rows packed: P and s as qk_conv's); the
 * portable path reads the same layout. Each output position clips its
 * taps to the input (padding adds nothing). */
/* Output positions p, p + 1 of a stride-1 row for the nb (1 or 2) output
 * channels j0, j0 + 1 of qk_conv_pairs' block (weights wo, rows KK apart),
 * both positions' taps inside the input across (the caller checks), rows
 * ky0 .. ky1 - 1: each input word and weight word unpacked once and used
 * for both positions. DSP: a channel's two positions are adjacent bytes
 * (one halfword); two channels' halfwords in a word give, by SXTAB16 and
 * its rotated form, (x_c, x_c+1) at p and at p + 1 (qk_conv_pw's scheme),
 * against the pair layout's weight word: 4·nb SMLADs per 4 channels and
 * tap. Sums to a[0..nb) (position p) and d[0..nb) (p + 1). */
QK_INLINE void qk_pairs_two(const int8_t *xg, const int8_t *wo, int CG, int HW, int W, int KW, int KK, int iy,
                            int ix, int ky0, int ky1, int j0, int nb, int32_t zp, int32_t *a, int32_t *d) {
    const int C4 = CG / 4 * 4;
    int ky, kx, c;
    int32_t a0 = a[0], a1 = nb > 1 ? a[1] : 0, d0 = d[0], d1 = nb > 1 ? d[1] : 0;
    for (ky = ky0; ky < ky1; ky++)
        for (kx = 0; kx < KW; kx++) {
            const int8_t *xp = xg + (iy + ky) * W + ix + kx;
            const int8_t *w0 = wo + (int32_t)j0 * KK + (ky * KW + kx) * CG, *w1 = w0 + KK;
            for (c = 0; c < C4; c += 4) {
                const int8_t *xc = xp + (int32_t)c * HW;
#if Q_DSP
                uint16_t h0, h1, h2, h3;
                uint32_t wv;
                int32_t t01, t23, x01p, x01q, x23p, x23q, wa, wb;
                memcpy(&h0, xc, 2), memcpy(&h1, xc + HW, 2), memcpy(&h2, xc + 2 * HW, 2), memcpy(&h3, xc + 3 * HW, 2);
                t01 = (int32_t)((uint32_t)h0 | ((uint32_t)h1 << 16)); /* (x_c,p  x_c,p+1  x_c+1,p  x_c+1,p+1) */
                t23 = (int32_t)((uint32_t)h2 | ((uint32_t)h3 << 16));
                x01p = __sxtab16(qk_neg_zp_pair(zp), t01), x01q = q_sxtab16_ror8(qk_neg_zp_pair(zp), (uint32_t)t01);
                x23p = __sxtab16(qk_neg_zp_pair(zp), t23), x23q = q_sxtab16_ror8(qk_neg_zp_pair(zp), (uint32_t)t23);
                wv = q_ld32(w0 + c), wa = __sxtb16((int32_t)wv), wb = q_sxtb16_ror8(wv);
                a0 = __smlad(wa, x01p, a0), d0 = __smlad(wa, x01q, d0);
                a0 = __smlad(wb, x23p, a0), d0 = __smlad(wb, x23q, d0);
                if (nb > 1) {
                    wv = q_ld32(w1 + c), wa = __sxtb16((int32_t)wv), wb = q_sxtb16_ror8(wv);
                    a1 = __smlad(wa, x01p, a1), d1 = __smlad(wa, x01q, d1);
                    a1 = __smlad(wb, x23p, a1), d1 = __smlad(wb, x23q, d1);
                }
#else
                const int32_t p0 = xc[0] - zp, p1 = xc[HW] - zp, p2 = xc[2 * HW] - zp, p3 = xc[3 * HW] - zp;
                const int32_t q0 = xc[1] - zp, q1 = xc[HW + 1] - zp, q2 = xc[2 * HW + 1] - zp, q3 = xc[3 * HW + 1] - zp;
                /* the pair layout stores channels c, c+2, c+1, c+3 */
                a0 += w0[c] * p0 + w0[c + 2] * p1 + w0[c + 1] * p2 + w0[c + 3] * p3;
                d0 += w0[c] * q0 + w0[c + 2] * q1 + w0[c + 1] * q2 + w0[c + 3] * q3;
                if (nb > 1) {
                    a1 += w1[c] * p0 + w1[c + 2] * p1 + w1[c + 1] * p2 + w1[c + 3] * p3;
                    d1 += w1[c] * q0 + w1[c + 2] * q1 + w1[c + 1] * q2 + w1[c + 3] * q3;
                }
#endif
            }
            for (c = C4; c < CG; c++) {
                const int32_t p = xp[(int32_t)c * HW] - zp, q = xp[(int32_t)c * HW + 1] - zp;
                a0 += w0[c] * p, d0 += w0[c] * q;
                if (nb > 1) a1 += w1[c] * p, d1 += w1[c] * q;
            }
        }
    a[0] = a0, d[0] = d0;
    if (nb > 1) a[1] = a1, d[1] = d1;
}

#if Q_DSP
/* The int16 words of four channels' inputs at xp, xp + HW, xp + 2·HW,
 * xp + 3·HW (a column's or a ring's): (x_c - zp, x_c+1 - zp) and (x_c+2 -
 * zp, x_c+3 - zp), their bytes at bits 0 and 16 and SXTAB16 adding nz =
 * (-zp, -zp); with PB the paired form's A and B of the same pairs. */
QK_INLINE void qk_quad_q15(const int8_t *xp, int32_t HW, int32_t nz, int PB, int16_t *out) {
    const uint32_t e = (uint32_t)(uint8_t)xp[0] | ((uint32_t)(uint8_t)xp[HW] << 16);
    const uint32_t f = (uint32_t)(uint8_t)xp[2 * HW] | ((uint32_t)(uint8_t)xp[3 * HW] << 16);
    const int32_t v = PB ? qk_pair_a(e, f) : __sxtab16(nz, (int32_t)e);
    const int32_t u = PB ? qk_pair_b(f) : __sxtab16(nz, (int32_t)f);
    memcpy(out, &v, 4), memcpy(out + 2, &u, 4);
}

/* qk_quad_q15's words for two adjacent positions at once (xp and xp + 1 of
 * each of the four channels: one halfword load gives both), into p's
 * column and q's: the pointwise convolution's two columns in one pass. */
QK_INLINE void qk_quad_q15_pair(const int8_t *xp, int32_t HW, int32_t nz, int PB, int16_t *op, int16_t *oq) {
    uint16_t h0, h1, h2, h3;
    uint32_t t01, t23;
    memcpy(&h0, xp, 2), memcpy(&h1, xp + HW, 2), memcpy(&h2, xp + 2 * HW, 2), memcpy(&h3, xp + 3 * HW, 2);
    /* (x_c,p  x_c,q  x_c+1,p  x_c+1,q) and the same of channels c+2, c+3 */
    t01 = (uint32_t)h0 | (uint32_t)h1 << 16, t23 = (uint32_t)h2 | (uint32_t)h3 << 16;
    {
        const uint32_t ep = __uxtb16(t01), eq = q_uxtb16_ror8(t01), fp = __uxtb16(t23), fq = q_uxtb16_ror8(t23);
        const int32_t vp = PB ? qk_pair_a(ep, fp) : __sxtab16(nz, (int32_t)ep);
        const int32_t up = PB ? qk_pair_b(fp) : __sxtab16(nz, (int32_t)fp);
        const int32_t vq = PB ? qk_pair_a(eq, fq) : __sxtab16(nz, (int32_t)eq);
        const int32_t uq = PB ? qk_pair_b(fq) : __sxtab16(nz, (int32_t)fq);
        memcpy(op, &vp, 4), memcpy(op + 2, &up, 4), memcpy(oq, &vq, 4), memcpy(oq + 2, &uq, 4);
    }
}

/* Output position (iy, ix)'s column for the pair layout, as int16: col[t·CG
 * + c] = x[c][iy + ky][ix + kx] - zp for tap t = ky·KW + kx, 0 where the
 * tap falls outside (padding: its x is zp). Channels in natural order: a
 * word (x_c, x_c+1) meets SXTB16 of the weight word (w_c, w_c+2, w_c+1,
 * w_c+3) as stored, its rotation (x_c+2, x_c+3). With PB the paired
 * form's words instead (qk_pair_a of (x_c, x_c+1) and (x_c+2, x_c+3), then
 * qk_pair_b), padding as qk_pair_pad's. */
QK_INLINE void qk_col_q15(const int8_t *xg, int CG, int H, int W, int KH, int KW, int iy, int ix, int32_t zp, int PB,
                          int16_t *col) {
    const int HW = H * W;
    const int32_t nz = qk_neg_zp_pair(zp);
    int ky, kx, c;
    for (ky = 0; ky < KH; ky++)
        for (kx = 0; kx < KW; kx++) {
            int16_t *ct = col + (ky * KW + kx) * CG;
            const int yy = iy + ky, xx = ix + kx;
            const int8_t *xp;
            if (yy < 0 || yy >= H || xx < 0 || xx >= W) {
                qk_pad_q15(ct, CG, zp, PB);
                continue;
            }
            xp = xg + yy * W + xx; /* formed only inside the input */
            /* two channels a word: their bytes at bits 0 and 16, SXTAB16 adds -zp to both;
             * four channels a step (CG is a multiple of 4 at the calls; a count down: no bound
             * to reload) */
            for (c = CG / 4; c > 0; c--, xp += 4 * HW, ct += 4) qk_quad_q15(xp, HW, nz, PB, ct);
        }
}

/* Weights i .. i + 3 (i a multiple of 4) of a row at w as four int8 lanes
 * in one word, in two halves so that a step's loads stay together: the
 * word that holds them (qk_wload), then the lanes (qk_wlanes). For P = 8
 * the int8 row's word itself; for P = 4 or 2 (qk_packed_row's layout, i
 * counted from a multiple of its group, 32 / P) field q = i / 4 % (8 / P)
 * of the packed word moved to the top of each byte and masked, lanes
 * holding 2^(8-P)·w: one or two instructions (0xF0F0F0F0 and 0xC0C0C0C0
 * are immediates of Thumb-2's AND). */
QK_INLINE uint32_t qk_wload(const int8_t *w, int32_t i, int P) { return q_ld32(w + (P < 8 ? i / (32 / P) * 4 : i)); }
QK_INLINE uint32_t qk_wlanes(uint32_t v, int32_t i, int P) {
    if (P >= 8) return v;
    return (v << (8 - P - i / 4 % (8 / P) * P)) & (0x01010101u * (0x100u - (0x100u >> P)));
}
/* Where weight i (a multiple of 32 / P for packed weights) of a row at w starts. */
QK_INLINE const int8_t *qk_wrow(const int8_t *w, int32_t i, int P) { return w + (P < 8 ? i / 8 * P : i); }

/* Two output channels' accumulators at two positions over R runs of n (a
 * multiple of 4) reduction steps, run r at c0 + r·cs, c1 + r·cs (the
 * positions' int16 columns: each four steps as two words, (x_k, x_k+2) and
 * (x_k+1, x_k+3)) and w0 + r·ws, w1 + r·ws (the channels' int8 weights in
 * order: a word of each unpacked by SXTB16 and its rotation). Per four
 * steps six loads, back to back, then 4 SXTB16 and 8 SMLAD; the R runs'
 * steps in passes over all R (R and the strides are literals at the calls:
 * every address an immediate offset of two pointers), whole when R·n is at
 * most 144 (n 64 with R 1), else 48 steps a run a pass when n allows,
 * else 16 (with R 1: 64 a pass when n allows, else 32). PB (a literal):
 * the weights and columns in the paired form
 * (qk_linear_paired: the words A and B, the weight word itself meeting B,
 * 2 SXTB16 a step), the sums then 256 times theirs, added >> 8 (PB 1) or
 * >> 7, doubled (PB 2: QK_DOUBLED). P (a literal): 8, or 4 or 2 for
 * weights packed as qk_packed_row's one row, w0 and w1 then byte pointers
 * to weight indices that are multiples of 32 / P and the offsets weight
 * indices (qk_wload). */
QK_INLINE void qk_dot_2x2(const int16_t *c0, const int16_t *c1, const int8_t *w0, const int8_t *w1, int n, int R,
                          int32_t cs, int32_t ws, int P, int PB, int32_t *a0, int32_t *d0, int32_t *a1,
                          int32_t *d1) {
    /* the sums are 2^SC·T: 256·T with PB, 2^(8-P)·T with packed weights (qk_wlanes) */
    const int SC = PB ? 8 : P < 8 ? 8 - P : 0;
    int32_t s0 = SC ? 0 : *a0, t0 = SC ? 0 : *d0, s1 = SC ? 0 : *a1, t1 = SC ? 0 : *d1;
    /* the fence where the body is long: the stem's 36 products (R·n 36) are faster without it */
    const int fence = R > 1 && R * n > 36;
    int k, r, j;
#define QK_Q15_STEP(kc, kw)                                                                   \
    do {                                                                                      \
        int32_t xa, xb, ya, yb, wa;                                                           \
        uint32_t wv = qk_wload(w0, kw, P), wu = qk_wload(w1, kw, P);                          \
        memcpy(&xa, c0 + (kc), 4), memcpy(&ya, c1 + (kc), 4);                                 \
        memcpy(&xb, c0 + (kc) + 2, 4), memcpy(&yb, c1 + (kc) + 2, 4);                         \
        if (P < 8) QK_LOADS_DONE(wv, wu, xa, xb, ya, yb);                                     \
        wv = qk_wlanes(wv, kw, P), wu = qk_wlanes(wu, kw, P);                                 \
        wa = __sxtb16((int32_t)wv), s0 = __smlad(wa, xa, s0), t0 = __smlad(wa, ya, t0);       \
        wa = __sxtb16((int32_t)wu), s1 = __smlad(wa, xa, s1), t1 = __smlad(wa, ya, t1);       \
        wa = PB ? (int32_t)wv : q_sxtb16_ror8(wv), s0 = __smlad(wa, xb, s0), t0 = __smlad(wa, yb, t0); \
        wa = PB ? (int32_t)wu : q_sxtb16_ror8(wu), s1 = __smlad(wa, xb, s1), t1 = __smlad(wa, yb, t1); \
        if (fence) QK_STEP_FENCE();                                                           \
    } while (0)
    if (R == 1 && n <= 64) { /* whole: no loop (n a literal at the calls; 16 steps at most) */
        QK_UNROLL16
        for (k = 0; k < n; k += 4) QK_Q15_STEP(k, k);
    } else if (R == 1 && n % 64 == 0) {
        for (k = 0; k < n; k += 64) {
            QK_UNROLL16
            for (r = 0; r < 64; r += 4) QK_Q15_STEP(k + r, k + r);
        }
    } else if (R == 1) {
        for (k = 0; k + 32 <= n; k += 32) {
            QK_UNROLL
            for (r = 0; r < 32; r += 4) QK_Q15_STEP(k + r, k + r);
        }
        if (k + 16 <= n) {
            QK_UNROLL
            for (r = 0; r < 16; r += 4) QK_Q15_STEP(k + r, k + r);
            k += 16;
        }
        for (; k < n; k += 4) QK_Q15_STEP(k, k);
    } else if (R * n <= 144) { /* whole: no loop (ResNet-8's 16-channel 3x3 layers, the stems) */
        QK_UNROLL16
        for (r = 0; r < R; r++) {
            QK_UNROLL16
            for (k = 0; k < n; k += 4) QK_Q15_STEP(r * cs + k, r * ws + k);
        }
    } else if (n % 48 == 0) { /* 12 steps a row a pass: R·12 (ResNet-8's 32 and 64 channels: 3 and 4 passes) */
        for (k = 0; k < n; k += 48) {
            QK_UNROLL
            for (r = 0; r < R; r++) {
                QK_UNROLL16
                for (j = 0; j < 48; j += 4) QK_Q15_STEP(r * cs + k + j, r * ws + k + j);
            }
        }
    } else {
        for (k = 0; k + 16 <= n; k += 16) {
            QK_UNROLL
            for (r = 0; r < R; r++) {
                QK_Q15_STEP(r * cs + k, r * ws + k);
                QK_Q15_STEP(r * cs + k + 4, r * ws + k + 4);
                QK_Q15_STEP(r * cs + k + 8, r * ws + k + 8);
                QK_Q15_STEP(r * cs + k + 12, r * ws + k + 12);
            }
        }
        if (k + 8 <= n) {
            QK_UNROLL
            for (r = 0; r < R; r++) {
                QK_Q15_STEP(r * cs + k, r * ws + k);
                QK_Q15_STEP(r * cs + k + 4, r * ws + k + 4);
            }
            k += 8;
        }
        if (k < n) {
            QK_UNROLL
            for (r = 0; r < R; r++) QK_Q15_STEP(r * cs + k, r * ws + k);
        }
    }
#undef QK_Q15_STEP
    if (PB) /* 256 times the sums (qk_linear_paired), >> 7 for twice them (PB 2: QK_DOUBLED) */
        *a0 += s0 >> (9 - PB), *d0 += t0 >> (9 - PB), *a1 += s1 >> (9 - PB), *d1 += t1 >> (9 - PB);
    else if (SC) /* 2^(8-P) times the sums: exact */
        *a0 += s0 >> SC, *d0 += t0 >> SC, *a1 += s1 >> SC, *d1 += t1 >> SC;
    else
        *a0 = s0, *d0 = t0, *a1 = s1, *d1 = t1;
}

/* A 2x2 block's outputs: channel o's at positions p and p + 1 (p + 1
 * only when two), channel o1's likewise when pair (an odd last channel is
 * computed twice and stored once); yo: channel o's output at p, o1's
 * (o1 - o)·NP bytes on (one pointer: every store an immediate offset). */
QK_INLINE void qk_store_2x2(int8_t *yo, int32_t NP, int o, int o1, int two, int pair, int32_t a0, int32_t d0,
                            int32_t a1, int32_t d1, const int32_t *m0, const int32_t *shift, int MS, int SN, int D,
                            int32_t zp_out, int32_t lo, int32_t hi) {
    yo[0] = q_out(qk_rqzd(a0, m0[o * MS], shift[o * MS], SN, D, zp_out, lo), lo, hi);
    if (two) yo[1] = q_out(qk_rqzd(d0, m0[o * MS], shift[o * MS], SN, D, zp_out, lo), lo, hi);
    if (pair) {
        yo[NP] = q_out(qk_rqzd(a1, m0[o1 * MS], shift[o1 * MS], SN, D, zp_out, lo), lo, hi);
        if (two) yo[NP + 1] = q_out(qk_rqzd(d1, m0[o1 * MS], shift[o1 * MS], SN, D, zp_out, lo), lo, hi);
    }
}

/* qk_conv_pairs with int8 weights and CG a multiple of 4, on the DSP:
 * CMSIS-NN's scheme. Two output positions' columns are built as int16
 * (qk_col_q15, 2·KK values in cols: the input read and unpacked once per
 * position for every output channel), then two output channels at a time
 * run over them: per 4 reduction steps two column words per position and
 * one weight word (two SXTB16) feed 8 SMLADs, 32 multiply-accumulates in
 * about 18 instructions. An odd last position or channel is computed
 * twice and stored once. */
QK_INLINE void qk_conv_q15(const int8_t *x, const int8_t *w, int P, int16_t *cols, int C, int H, int W, int O, int OH,
                           int OW, int KH, int KW, int SH, int SW, int PH, int PW, int G, const int32_t *bias,
                           const int32_t *m0, const int32_t *shift, int MS, int SN, int PB, int32_t zp, int32_t zp_out, int32_t lo,
                           int32_t hi, int8_t *y) {
    const int CG = C / G, OG = O / G, KK = CG * KH * KW, NP = OH * OW;
    int16_t *c0 = cols, *c1 = cols + KK;
    int g, p, o;
    for (g = 0; g < G; g++) {
        const int8_t *xg = x + (int32_t)g * CG * H * W;
        for (p = 0; p < NP; p += 2) {
            /* an odd last position as the pair (NP - 2, NP - 1), NP - 2's integers written
             * again: two is a literal, no test in the blocks' epilogues */
            if (NP > 1 && p + 1 == NP) p = NP - 2;
            const int two = NP > 1, q = two ? p + 1 : p;
            if (KH == 1 && KW == 1 && H == 1 && SW == 1 && PW == 0 && two) { /* pointwise: p and q adjacent */
                const int8_t *xp = xg + p;
                int16_t *cp = c0, *cq = c1;
                int c;
                for (c = CG / 4; c > 0; c--, xp += 4 * W, cp += 4, cq += 4)
                    qk_quad_q15_pair(xp, W, qk_neg_zp_pair(zp), PB, cp, cq);
            } else {
                qk_col_q15(xg, CG, H, W, KH, KW, p / OW * SH - PH, p % OW * SW - PW, zp, PB, c0);
                qk_col_q15(xg, CG, H, W, KH, KW, q / OW * SH - PH, q % OW * SW - PW, zp, PB, c1);
            }
            for (o = g * OG; o < (g + 1) * OG; o += 2) {
                const int pair = o + 1 < (g + 1) * OG, o1 = pair ? o + 1 : o;
                /* the second row KK bytes after the first (an immediate offset: one
                 * register less in the loop) where OG is even, as it is at the calls */
                const int8_t *w0 = qk_wrow(w, (int32_t)o * KK, P),
                             *w1 = OG % 2 == 0 ? qk_wrow(w0, KK, P) : qk_wrow(w, (int32_t)o1 * KK, P);
                /* with PB or packed weights the biases after the dot: not live in registers through it */
                int32_t a0 = PB || P < 8 ? 0 : bias[o], a1 = PB || P < 8 ? 0 : bias[o1], d0 = a0, d1 = a1;
                qk_dot_2x2(c0, c1, w0, w1, KK, 1, 0, 0, P, PB + QK_DOUBLED(PB, SN), &a0, &d0, &a1, &d1);
                if (PB || P < 8) a0 += bias[o], d0 += bias[o], a1 += bias[o1], d1 += bias[o1];
                qk_store_2x2(y + (int32_t)o * NP + p, NP, o, o1, two, pair, a0, d0, a1, d1, m0, shift, MS, SN,
                         QK_DOUBLED(PB, SN), zp_out, lo, hi);
            }
        }
    }
}
/* Position (iy, ix)'s column in qk_conv's weight order, k = (c·KH + ky)·KW
 * + kx: the input bytes, zp's byte where the tap is padding (so x - zp is 0
 * there). */
QK_INLINE void qk_col_bytes(const int8_t *x, int C, int H, int W, int KH, int KW, int iy, int ix, int32_t zp,
                            int8_t *col) {
    const int inside = ix >= 0 && ix + KW <= W;
    int c, ky, kx;
    for (c = 0; c < C; c++)
        for (ky = 0; ky < KH; ky++, col += KW) {
            const int yy = iy + ky;
            if (yy < 0 || yy >= H) {
                memset(col, (int)(uint8_t)(int8_t)zp, (size_t)KW);
            } else { /* the row's pointers formed only inside the input */
                const int8_t *xrow = x + ((int32_t)c * H + yy) * W;
                if (inside) memcpy(col, xrow + ix, (size_t)KW);
                else
                    for (kx = 0; kx < KW; kx++) col[kx] = ix + kx < 0 || ix + kx >= W ? (int8_t)zp : xrow[ix + kx];
            }
        }
}

/* A dense convolution in qk_conv's layout (w [O][C][KH][KW], int8) on the
 * DSP, for the ones qk_conv_pairs does not take (kernel rows of 4 or more,
 * or fewer than 4 input channels: a network's first layer). Each of two
 * output positions' windows is copied as bytes into the upper half of its
 * column (qk_col_bytes), then unpacked forward, in place, four bytes a
 * word into two int16 words (x_k - zp, x_k+2 - zp) and (x_k+1 - zp, x_k+3
 * - zp) by SXTAB16 and its rotation (a write never reaches a byte not yet
 * read); two output channels at a time then run qk_dot_2x2 over them, the
 * last KK % 4 steps scalar over the bytes left in place. cols: two columns
 * of KS = KK rounded up to 4 int16 (4·KS bytes, 4-byte aligned). An odd
 * last position or channel is computed twice and stored once. */
QK_INLINE void qk_conv_bytes(const int8_t *x, const int8_t *w, int16_t *cols, int C, int H, int W, int O, int OH, int OW,
                             int KH, int KW, int SH, int SW, int PH, int PW, const int32_t *bias, const int32_t *m0,
                             const int32_t *shift, int MS, int SN, int PB, int32_t zp, int32_t zp_out, int32_t lo, int32_t hi,
                             int8_t *y) {
    const int KK = C * KH * KW, K4 = KK / 4 * 4, KS = (KK + 3) / 4 * 4, NP = OH * OW;
    const int32_t nz = qk_neg_zp_pair(zp);
    int16_t *c0 = cols, *c1 = cols + KS;
    const int8_t *b0 = (const int8_t *)(void *)c0 + KS, *b1 = (const int8_t *)(void *)c1 + KS;
    int p, o, k;
    for (p = 0; p < NP; p += 2) {
        /* an odd last position as the pair (NP - 2, NP - 1) (qk_conv_q15) */
        if (NP > 1 && p + 1 == NP) p = NP - 2;
        const int two = NP > 1, q = two ? p + 1 : p;
        qk_col_bytes(x, C, H, W, KH, KW, p / OW * SH - PH, p % OW * SW - PW, zp, (int8_t *)(void *)c0 + KS);
        qk_col_bytes(x, C, H, W, KH, KW, q / OW * SH - PH, q % OW * SW - PW, zp, (int8_t *)(void *)c1 + KS);
        for (k = 0; k < K4; k += 4) {
            const uint32_t u = q_ld32(b0 + k), v = q_ld32(b1 + k);
            int32_t ua, ub, va, vb;
            if (PB) /* the odd bytes (v of each pair) moved down to bits 0 and 16 */
                ua = qk_pair_a(u & 0x00FF00FFu, u >> 8 & 0x00FF00FFu), ub = qk_pair_b(u >> 8 & 0x00FF00FFu),
                va = qk_pair_a(v & 0x00FF00FFu, v >> 8 & 0x00FF00FFu), vb = qk_pair_b(v >> 8 & 0x00FF00FFu);
            else
                ua = __sxtab16(nz, (int32_t)u), ub = q_sxtab16_ror8(nz, u), va = __sxtab16(nz, (int32_t)v),
                vb = q_sxtab16_ror8(nz, v);
            memcpy(c0 + k, &ua, 4), memcpy(c0 + k + 2, &ub, 4), memcpy(c1 + k, &va, 4), memcpy(c1 + k + 2, &vb, 4);
        }
        for (o = 0; o < O; o += 2) {
            const int pair = o + 1 < O, o1 = pair ? o + 1 : o;
            const int8_t *w0 = w + (int32_t)o * KK, *w1 = O % 2 == 0 ? w0 + KK : w + (int32_t)o1 * KK;
            /* with PB the biases after the dot: not live in registers through it */
            int32_t a0 = PB ? 0 : bias[o], a1 = PB ? 0 : bias[o1], d0 = a0, d1 = a1;
            qk_dot_2x2(c0, c1, w0, w1, K4, 1, 0, 0, 8, PB + QK_DOUBLED(PB, SN), &a0, &d0, &a1, &d1);
            if (PB) a0 += bias[o], d0 += bias[o], a1 += bias[o1], d1 += bias[o1];
            for (k = K4; k < KK; k++) { /* doubled as the sums are (QK_DOUBLED) */
                const int32_t xk = (b0[k] - zp) * (1 + QK_DOUBLED(PB, SN)),
                              yk = (b1[k] - zp) * (1 + QK_DOUBLED(PB, SN));
                a0 += w0[k] * xk, d0 += w0[k] * yk, a1 += w1[k] * xk, d1 += w1[k] * yk;
            }
            qk_store_2x2(y + (int32_t)o * NP + p, NP, o, o1, two, pair, a0, d0, a1, d1, m0, shift, MS, SN,
                         QK_DOUBLED(PB, SN), zp_out, lo, hi);
        }
    }
}
#endif


/* The bytes of qk_conv_ring's rows: KH padded input rows of W + 2·PW
 * positions, each position's C channels as int16; 2·KH - 1 rows in the
 * doubled ring (D). */
QK_INLINE int32_t qk_ring_bytes(int C, int W, int KH, int PW, int D) {
    return (int32_t)(D ? 2 * KH - 1 : KH) * (W + 2 * PW) * C * 2;
}

#if Q_DSP
/* Input row iy of x [CX, H, W] into a ring row: position ix's C >= CX
 * channels (C a multiple of 4) at r + (ix + PW)·C as int16 x - zp, in
 * channel order (a word (x_c, x_c+1) meets SXTB16 of qk_pair_channel's
 * weight word, its rotation (x_c+2, x_c+3)), channels from CX on 0; a row
 * outside the input is zeros. The padding positions are zeros from the
 * start. With PB the paired form's words, as qk_col_q15's. */
QK_INLINE void qk_ring_row(const int8_t *x, int CX, int C, int H, int W, int PW, int iy, int32_t zp, int PB, int16_t *r) {
    const int32_t nz = qk_neg_zp_pair(zp), HW = H * W;
    int ix, c;
    r += PW * C;
    if (iy < 0 || iy >= H) {
        qk_pad_q15(r, (int32_t)W * C, zp, PB);
        return;
    }
    ix = 0;
    if (CX % 4 == 0 && CX == C) /* whole fours: two positions a step, one halfword of each channel */
        for (; ix + 2 <= W; ix += 2, r += 2 * C) {
            const int8_t *xp = x + (int32_t)iy * W + ix;
            int16_t *rc = r;
            for (c = CX / 4; c > 0; c--, xp += 4 * HW, rc += 4) qk_quad_q15_pair(xp, HW, nz, PB, rc, rc + C);
        }
    for (; ix < W; ix++, r += C) {
        const int8_t *xp = x + (int32_t)iy * W + ix;
        int16_t *rc = r;
        for (c = CX / 4; c > 0; c--, xp += 4 * HW, rc += 4) qk_quad_q15(xp, HW, nz, PB, rc); /* four channels a step */
        if (CX % 4) { /* the last channels, the rest of their four 0 (raw 0 with PB: their weights are 0, and a
                       * pair's A and B see the same input); whole fours of zeros after them */
            uint32_t v, u;
            if (PB) {
                const uint32_t e = (uint32_t)(uint8_t)xp[0] | (CX % 4 > 1 ? (uint32_t)(uint8_t)xp[HW] << 16 : 0u);
                const uint32_t f = CX % 4 > 2 ? (uint32_t)(uint8_t)xp[2 * HW] : 0u;
                v = (uint32_t)qk_pair_a(e, f), u = (uint32_t)qk_pair_b(f);
            } else {
                const int32_t t0 = xp[0] - zp, t1 = CX % 4 > 1 ? xp[HW] - zp : 0, t2 = CX % 4 > 2 ? xp[2 * HW] - zp : 0;
                v = (uint32_t)(uint16_t)t0 | (uint32_t)t1 << 16, u = (uint32_t)(uint16_t)t2;
            }
            memcpy(rc, &v, 4), memcpy(rc + 2, &u, 4), rc += 4;
        }
        for (c = (CX + 3) / 4 * 4; c < C; c++) *rc++ = 0;
    }
}

/* A dense convolution in qk_conv_pairs' layout (int8 weights [O][KH][KW][C],
 * C a multiple of 4; x has CX <= C channels, the weights of the others 0)
 * on the DSP, over KH input rows unpacked to int16 once
 * each (ring: qk_ring_bytes, 4-byte aligned), not once per output position
 * as qk_conv_q15's columns. For output row oy the ring holds input rows
 * oy·SH - PH .. + KH - 1 in order, one every RW int16 (the rows the
 * previous output row shares moved up, the others built); in the doubled
 * ring (D, a literal, for SH < KH) input row iy lives in row iy mod KH and,
 * below KH - 1, in row iy mod KH + KH too, so that a window's rows are
 * always KH consecutive ring rows from its first row's, and the shared
 * rows stay where they are (a row copied once instead of KH - SH rows
 * moved, for KH - 1 rows more RAM); an output
 * position's taps of kernel row ky are then KW·C contiguous int16 of ring
 * row ky, as its weights are of their row: two positions and two output
 * channels at a time, one qk_dot_2x2 over the KH rows. An odd last
 * position or channel is computed twice and stored once. */
QK_INLINE void qk_conv_ring(const int8_t *x, const int8_t *w, int P, int16_t *ring, int CX, int C, int H, int W, int O,
                            int OH,
                            int OW, int KH, int KW, int SH, int SW, int PH, int PW, int D, const int32_t *bias,
                            const int32_t *m0, const int32_t *shift, int MS, int SN, int PB, int32_t zp, int32_t zp_out, int32_t lo,
                            int32_t hi, int8_t *y) {
    const int RW = (W + 2 * PW) * C, KK = KH * KW * C, NP = OH * OW;
    int oy, ox, o, ky, b = 0; /* b: the ring row of the window's first input row */
    qk_pad_q15(ring, qk_ring_bytes(C, W, KH, PW, D) / 2, zp, PB);
    for (oy = 0; oy < OH; oy++) {
        const int iy = oy * SH - PH, keep = oy > 0 && SH < KH ? KH - SH : 0; /* rows shared with oy - 1 */
        if (D && oy > 0)
            b = (b + SH) % KH;
        else if (keep)
            memmove(ring, ring + SH * RW, (size_t)keep * (size_t)RW * sizeof *ring);
        for (ky = keep; ky < KH; ky++) {
            const int m = D ? (b + ky) % KH : ky;
            int16_t *row = ring + m * RW;
            qk_ring_row(x, CX, C, H, W, PW, iy + ky, zp, PB, row);
            if (D && m < KH - 1) memcpy(row + KH * RW, row, (size_t)RW * sizeof *row);
        }
        const int16_t *rows = ring + b * RW;
        for (ox = 0; ox < OW; ox += 2) {
            /* an odd last position as the pair (OW - 2, OW - 1) (qk_conv_q15) */
            if (OW > 1 && ox + 1 == OW) ox = OW - 2;
            const int two = OW > 1, ox1 = two ? ox + 1 : ox, p = oy * OW + ox;
            /* c1 a literal offset from c0: every column address an immediate of one pointer */
            const int16_t *c0 = rows + ox * SW * C, *c1 = c0 + (ox1 - ox) * SW * C;
            for (o = 0; o < O; o += 2) {
                const int pair = o + 1 < O, o1 = pair ? o + 1 : o;
                const int8_t *w0 = qk_wrow(w, (int32_t)o * KK, P),
                             *w1 = O % 2 == 0 ? qk_wrow(w0, KK, P) : qk_wrow(w, (int32_t)o1 * KK, P);
                /* with PB or packed weights the biases after the dot: not live in registers through it */
                int32_t a0 = PB || P < 8 ? 0 : bias[o], a1 = PB || P < 8 ? 0 : bias[o1], d0 = a0, d1 = a1;
                qk_dot_2x2(c0, c1, w0, w1, KW * C, KH, RW, KW * C, P, PB + QK_DOUBLED(PB, SN), &a0, &d0, &a1,
                           &d1);
                if (PB || P < 8) a0 += bias[o], d0 += bias[o], a1 += bias[o1], d1 += bias[o1];
                qk_store_2x2(y + (int32_t)o * NP + p, NP, o, o1, two, pair, a0, d0, a1, d1, m0, shift, MS, SN,
                             QK_DOUBLED(PB, SN), zp_out, lo, hi);
            }
        }
    }
}
#endif

/* The bytes qk_conv_cols takes in its ring form: the ring of rows of C
 * rounded up to 4 channels, then the weights re-laid for it. */
QK_INLINE int32_t qk_padded_ring_bytes(int C, int W, int O, int KH, int KW, int PW, int D) {
    const int C4 = (C + 3) / 4 * 4;
    return qk_ring_bytes(C4, W, KH, PW, D) + (int32_t)O * KH * KW * C4;
}

/* w [O][C][T] (T taps; int8, or P < 8 bits packed as one row) re-laid as
 * qk_conv_pairs' int8 [O][T][C4] into wp, C4 = C rounded up to 4, each 4
 * channels in qk_pair_channel's order, 0 for the missing ones: the weights
 * of qk_conv_cols' ring form (and, in the C generator, the rows whose
 * paired form it checks). */
QK_INLINE void qk_relay_c4(const int8_t *w, int P, int O, int C, int T, int8_t *wp) {
    const int C4 = (C + 3) / 4 * 4;
    int o, t, c;
    for (o = 0; o < O; o++)
        for (t = 0; t < T; t++)
            for (c = 0; c < C4; c++) {
                const int cs = qk_pair_channel(c, C4); /* the channel stored at c */
                const int32_t at = ((int32_t)o * C + cs) * T + t;
                wp[((int32_t)o * T + t) * C4 + c] = (int8_t)(cs >= C ? 0 : P < 8 ? qk_packed_weight(w, at, P) : w[at]);
            }
}

/* A dense convolution with int8 weights in qk_conv's layout (or, in the
 * ring form only, P < 8 bits packed as one row), over the DSP's
 * columns where cols is given (qk_conv_bytes), by qk_conv otherwise. With
 * ring 1 (2: the doubled ring), cols holds qk_padded_ring_bytes instead: the weights are
 * re-laid once into its tail as qk_conv_pairs' [O][KH][KW][C4] (C4 = C
 * rounded up to 4, qk_pair_channel's order, 0 for the missing channels),
 * and qk_conv_ring runs over its head. */
QK_INLINE void qk_conv_cols(const int8_t *x, const int8_t *w, int P, int16_t *cols, int ring, int C, int H, int W, int O,
                            int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int B, const int32_t *bias,
                            const int32_t *m0, const int32_t *shift, int MS, int SN, int PB, int32_t zp, int32_t zp_out, int32_t lo,
                            int32_t hi, int8_t *y) {
#if Q_DSP
    if (cols && ring) {
        const int C4 = (C + 3) / 4 * 4, T = KH * KW;
        int8_t *wp = (int8_t *)(void *)cols + qk_ring_bytes(C4, W, KH, PW, ring == 2);
        int c;
        qk_relay_c4(w, P, O, C, T, wp);
        if (PB) /* each odd byte less the borrow of the even byte before it (qk_linear_paired) */
            for (c = 0; c < O * T * C4; c += 2) wp[c + 1] = (int8_t)(wp[c + 1] - (wp[c] < 0));
        qk_conv_ring(x, wp, 8, cols, C, C4, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, ring == 2, bias, m0, shift, MS, SN, PB, zp,
                     zp_out, lo, hi, y);
        return;
    }
    if (cols) {
        qk_conv_bytes(x, w, cols, C, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, bias, m0, shift, MS, SN, PB, zp, zp_out, lo, hi,
                      y);
        return;
    }
#else
    (void)ring, (void)SN, (void)PB;
#endif
    /* packed weights (the ring form's only) unpack a block of channels at a time into cols */
    qk_conv(x, w, P, P < 8 ? (int8_t *)(void *)cols : NULL, C, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, 1, B, bias, m0,
            shift, MS, zp, zp_out, lo, hi, y);
}

/* The DSP's int16 columns of these convolutions are qk_conv_rows' (the
 * generated C's); this loop serves every other core and plan. */
QK_INLINE void qk_conv_pairs(const int8_t *x, const int8_t *w, int P, int8_t *s, int C, int H, int W,
                             int O, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int G, int B,
                             const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int32_t zp, int32_t zp_out,
                             int32_t lo, int32_t hi, int8_t *y) {
    const int CG = C / G, OG = O / G, HW = H * W, C4 = CG / 4 * 4, KK = CG * KH * KW;
    int o, oy, ox, ky, kx, c;
    for (o = 0; o < O; o += B) {
        const int8_t *xg = x + (int32_t)(o / OG) * CG * HW; /* the group's input channels */
        const int8_t *wo = qk_rows(w, o, KK, P, B, s);
        for (oy = 0; oy < OH; oy++) {
            const int iy = oy * SH - PH;
            const int ky0 = PH && iy < 0 ? -iy : 0, ky1 = PH && iy + KH > H ? H - iy : KH;
            int8_t *yr = y + ((int32_t)o * OH + oy) * OW;
            for (ox = 0; ox < OW; ox++) {
                const int ix = ox * SW - PW;
                const int kx0 = PW && ix < 0 ? -ix : 0, kx1 = PW && ix + KW > W ? W - ix : KW;
                int32_t acc[4];
#if Q_DOT
                if (SW == 1 && C4 && W >= 16 && ox + 16 <= OW && ix >= -1 && ix + KW + 14 <= W) {
                    /* sixteen positions, each tap's four channels in the weights' stored order
                     * as each position's four inputs (qk_quads; the padding column's lane holds
                     * zp, which adds w·zp - zp·w = 0), one SDOT per output channel and four
                     * positions; zp's share b - zp·Σ w over the rows inside and the fours */
                    const int8x16_t vzq = vdupq_n_s8((int8_t)zp);
                    int32x4_t a4[4][4];
#define QK_DI(j)                                                                                 \
    do {                                                                                         \
        int32_t s_ = 0;                                                                          \
        int t_;                                                                                  \
        for (ky = ky0; ky < ky1; ky++)                                                           \
            for (t_ = ky * KW * CG; t_ < (ky + 1) * KW * CG; t_ += CG)                           \
                for (c = 0; c < C4; c++) s_ += wo[(j) * KK + t_ + c];                            \
        a4[j][0] = a4[j][1] = a4[j][2] = a4[j][3] = vdupq_n_s32(bias[o + (j)] - zp * s_);        \
    } while (0)
                    QK_EACH(B, QK_DI);
#undef QK_DI
                    for (ky = ky0; ky < ky1; ky++)
                        for (kx = 0; kx < KW; kx++) {
                            const int8_t *xr = xg + (iy + ky) * W, *wt = wo + (ky * KW + kx) * CG;
                            const int a = ix + kx;
                            for (c = 0; c < C4; c += 4) {
                                const int8_t *xc = xr + (int32_t)c * HW;
                                int8x16_t q[4];
                                qk_quads(qk_ld16(xc, a, W, vzq), qk_ld16(xc + 2 * HW, a, W, vzq),
                                         qk_ld16(xc + HW, a, W, vzq), qk_ld16(xc + 3 * HW, a, W, vzq), q);
#define QK_DPR(j) QK_DOT4(j, wt + (j) * KK + c)
                                QK_EACH(B, QK_DPR);
#undef QK_DPR
                            }
                            for (c = C4; c < CG; c++) {
                                const int8x16_t xv = qk_ld16(xr + (int32_t)c * HW, a, W, vzq);
#define QK_DT(j) QK_SMLAL16(j, wt[(j) * KK + c])
                                QK_EACH(B, QK_DT);
#undef QK_DT
                            }
                        }
#define QK_DST(j) QK_ST16(j, yr + (int32_t)(j) * OH * OW + ox)
                    QK_EACH(B, QK_DST);
#undef QK_DST
                    ox += 15;
                    continue;
                }
#endif
#if Q_NEON
                if (ox + 8 <= OW && (SW == 1 ? W >= 8 && ix >= -1 && ix + KW + 6 <= W : SW == 2 && ix >= 0 && ix + 15 + KW <= W)) {
                    /* eight positions, each channel's eight inputs of a tap one load (stride 1:
                     * a run starting one column left of the row, or ending one right of it,
                     * takes the padding's zp in that lane, qk_ld8; stride 2: the even bytes of a
                     * deinterleaving load, inside the row) */
                    const int8x8_t vz = vdup_n_s8((int8_t)zp);
                    int32x4_t al[4], ah[4];
                    QK_EACH(B, QK_N8_INIT);
                    for (ky = ky0; ky < ky1; ky++)
                        for (kx = 0; kx < KW; kx++) {
                            const int8_t *xr = xg + (iy + ky) * W, *wt = wo + (ky * KW + kx) * CG;
                            const int a = ix + kx;
                            int16x8_t xv;
#define QK_LD8(ch) \
    vsubl_s8(SW == 1 ? qk_ld8(xr + (int32_t)(ch) * HW, a, W, vz) : vld2_s8(xr + (int32_t)(ch) * HW + a).val[0], vz)
#define QK_PRN(j) QK_N8(j, wt[(j) * KK + s_])
                            for (c = 0; c < C4; c += 4) { /* channels c, c+1, c+2, c+3 stored at c, c+2, c+1, c+3 */
                                int s_ = c;
                                xv = QK_LD8(c);
                                QK_EACH(B, QK_PRN);
                                xv = QK_LD8(c + 1), s_ = c + 2;
                                QK_EACH(B, QK_PRN);
                                xv = QK_LD8(c + 2), s_ = c + 1;
                                QK_EACH(B, QK_PRN);
                                xv = QK_LD8(c + 3), s_ = c + 3;
                                QK_EACH(B, QK_PRN);
                            }
                            for (c = C4; c < CG; c++) {
                                const int s_ = c;
                                xv = QK_LD8(c);
                                QK_EACH(B, QK_PRN);
                            }
#undef QK_PRN
#undef QK_LD8
                        }
                    QK_EACH(B, QK_ST8_MAP);
                    ox += 7;
                    continue;
                }
#endif
                if (Q_DSP && SW == 1 && ox + 1 < OW && ix >= 0 && ix + 1 + KW <= W) {
                    /* two positions whose taps are all inside across, channels two at a time:
                     * with the DSP, one input halfword per channel serves both (without it, the
                     * per-position loop below is as fast: Cortex-M0+ and M3 measured) */
                    int j;
                    for (j = 0; j < B; j += 2) {
                        const int nb = B - j < 2 ? 1 : 2;
                        int32_t a[2], d[2];
                        a[0] = d[0] = bias[o + j];
                        if (nb > 1) a[1] = d[1] = bias[o + j + 1];
                        qk_pairs_two(xg, wo, CG, HW, W, KW, KK, iy, ix, ky0, ky1, j, nb, zp, a, d);
                        qk_store(a, nb, o + j, m0, shift, MS, zp_out, lo, hi, yr + (int32_t)j * OH * OW + ox, OH * OW);
                        qk_store(d, nb, o + j, m0, shift, MS, zp_out, lo, hi, yr + (int32_t)j * OH * OW + ox + 1, OH * OW);
                    }
                    ox++;
                    continue;
                }
                QK_EACH(B, QK_INIT);
                for (ky = ky0; ky < ky1; ky++)
                    for (kx = kx0; kx < kx1; kx++) {
                        const int8_t *xp = xg + (iy + ky) * W + ix + kx;
                        const int8_t *wt = wo + (ky * KW + kx) * CG;
                        for (c = 0; c < C4; c += 4) {
#if Q_DSP
                            uint32_t wv;
                            int32_t x01 = __sadd16((int32_t)(((uint32_t)xp[c * HW] & 0xFFFFu) |
                                                             ((uint32_t)xp[(c + 1) * HW] << 16)),
                                                   qk_neg_zp_pair(zp));
                            int32_t x23 = __sadd16((int32_t)(((uint32_t)xp[(c + 2) * HW] & 0xFFFFu) |
                                                             ((uint32_t)xp[(c + 3) * HW] << 16)),
                                                   qk_neg_zp_pair(zp));
#define QK_SMLAD(j)                                                                   \
    (wv = q_ld32(wt + (j) * KK + c), acc[j] = __smlad(__sxtb16((int32_t)wv), x01, acc[j]), \
     acc[j] = __smlad(q_sxtb16_ror8(wv), x23, acc[j]))
                            QK_EACH(B, QK_SMLAD);
#undef QK_SMLAD
#else
                            int32_t xa = xp[c * HW] - zp, xb = xp[(c + 1) * HW] - zp;
                            int32_t xc = xp[(c + 2) * HW] - zp, xd = xp[(c + 3) * HW] - zp;
#define QK_MAC4(j)                                                                    \
    (acc[j] += wt[(j) * KK + c] * xa + wt[(j) * KK + c + 2] * xb + wt[(j) * KK + c + 1] * xc + \
               wt[(j) * KK + c + 3] * xd)
                            QK_EACH(B, QK_MAC4);
#undef QK_MAC4
#endif
                        }
                        for (c = C4; c < CG; c++) {
                            int32_t xv = xp[c * HW] - zp;
#define QK_MAC(j) (acc[j] += wt[(j) * KK + c] * xv)
                            QK_EACH(B, QK_MAC);
#undef QK_MAC
                        }
                    }
                qk_store(acc, B, o, m0, shift, MS, zp_out, lo, hi, yr + ox, OH * OW);
            }
        }
    }
}

/* qk_conv_pairs (groups of a multiple of 4 channels; int8 weights, or P =
 * 4 or 2 packed ones with rows of a multiple of 32 / P) on the DSP over the scratch
 * s where it is given: with R (a literal), a ring of rows (qk_conv_ring:
 * one group, windows that overlap; R 2 the doubled ring), else int16
 * columns (qk_conv_q15: a residual net's 1x1 strided shortcuts), each
 * with its SN and PB; elsewhere qk_conv_pairs, which unpacks packed
 * weights into s. */
QK_INLINE void qk_conv_rows(const int8_t *x, const int8_t *w, int P, int16_t *s, int R, int C, int H, int W, int O,
                            int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int G, int B, const int32_t *bias,
                            const int32_t *m0, const int32_t *shift, int MS, int SN, int PB, int32_t zp, int32_t zp_out,
                            int32_t lo, int32_t hi, int8_t *y) {
#if Q_DSP
    if (s && R) {
        qk_conv_ring(x, w, P, s, C, C, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, R == 2, bias, m0, shift, MS, SN, PB, zp, zp_out,
                     lo, hi, y);
        return;
    }
    if (s) {
        qk_conv_q15(x, w, P, s, C, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, G, bias, m0, shift, MS, SN, PB, zp, zp_out, lo,
                    hi, y);
        return;
    }
#else
    (void)R, (void)SN, (void)PB;
#endif
    /* packed weights unpack a block of channels at a time into s */
    qk_conv_pairs(x, w, P, P < 8 ? (int8_t *)(void *)s : NULL, C, H, W, O, OH, OW, KH, KW, SH, SW, PH, PW, G, B, bias,
                  m0, shift, MS, zp, zp_out, lo, hi, y);
}

/* Which convolution kernel an op takes: qk_conv_pairs for kernel rows
 * shorter than a DSP word over >= 4 input channels per group. */
QK_INLINE int qk_conv_uses_pairs(int C, int G, int KW) { return KW < 4 && C / G >= 4; }

/* ---- depthwise 3x3 and the fast requantization ------------------------------------- */

/* Four bytes of an input row at columns ix .. ix + 3 as one little-endian
 * word, the columns outside [0, W) (padding) holding zp's byte, so that
 * x - zp is 0 there: a plain load inside the row; at the left edge
 * (ix = -1) the word at 0 shifted up a byte; at the right edge (ix + 4 >
 * W, ix <= W - 2) the word at W - 4 shifted down. W >= 4. */
QK_INLINE uint32_t qk_dw_word(const int8_t *row, int ix, int W, uint32_t zp4) {
    uint32_t v;
    if (ix < 0) {
        memcpy(&v, row, 4);
        return (v << 8) | (zp4 >> 24);
    }
    if (ix + 4 > W) {
        int s = 8 * (ix + 4 - W);
        memcpy(&v, row + W - 4, 4);
        return (v >> s) | (zp4 << (32 - s));
    }
    memcpy(&v, row + ix, 4);
    return v;
}

/* One kernel row of a 3x3 depthwise channel: the row's taps (k0, k1, k2)
 * against the input bytes (p0, p1, p2, p3) of word v: two outputs side by
 * side (stride 1: acc0 over p0..p2, acc1 over p1..p3), or one (acc0).
 * DSP: SXTAB16 gives (p0 - zp, p2 - zp) and (p1 - zp, p3 - zp); with the
 * taps packed as k02 = (k0, k2) and k1, each output is one SMLAD and one
 * SMLABB/SMLABT: 4 bytes, 3 unpacking instructions, 6 MACs in 4. */
#if Q_DSP
#define QK_DW_ROW2(v, k02, k1, nzp, acc0, acc1)                                      \
    do {                                                                              \
        int32_t a02_ = __sxtab16((nzp), (int32_t)(v)), a13_ = q_sxtab16_ror8((nzp), (v)); \
        (acc0) = __smlabb((k1), a13_, __smlad((k02), a02_, (acc0)));                  \
        (acc1) = __smlabt((k1), a02_, __smlad((k02), a13_, (acc1)));                  \
    } while (0)
#define QK_DW_ROW1(v, k02, k1, nzp, acc0)                                            \
    do {                                                                              \
        int32_t a02_ = __sxtab16((nzp), (int32_t)(v)), a13_ = q_sxtab16_ror8((nzp), (v)); \
        (acc0) = __smlabb((k1), a13_, __smlad((k02), a02_, (acc0)));                  \
    } while (0)
/* The same over bytes whose zero point is folded elsewhere (SXTB16, no addend). */
#define QK_DW_ROW2X(v, k02, k1, acc0, acc1)                                          \
    do {                                                                              \
        int32_t a02_ = __sxtb16((int32_t)(v)), a13_ = q_sxtb16_ror8(v);              \
        (acc0) = __smlabb((k1), a13_, __smlad((k02), a02_, (acc0)));                  \
        (acc1) = __smlabt((k1), a02_, __smlad((k02), a13_, (acc1)));                  \
    } while (0)
#define QK_DW_ROW1X(v, k02, k1, acc0)                                                \
    do {                                                                              \
        int32_t a02_ = __sxtb16((int32_t)(v)), a13_ = q_sxtb16_ror8(v);              \
        (acc0) = __smlabb((k1), a13_, __smlad((k02), a02_, (acc0)));                  \
    } while (0)
#else
#define QK_DW_ROW2(v, k0, k1, k2, zp, acc0, acc1)                                    \
    do {                                                                              \
        int32_t p0_ = (int8_t)(v & 0xFFu) - (zp), p1_ = (int8_t)((v >> 8) & 0xFFu) - (zp); \
        int32_t p2_ = (int8_t)((v >> 16) & 0xFFu) - (zp), p3_ = (int8_t)(v >> 24) - (zp); \
        (acc0) += (k0) * p0_ + (k1) * p1_ + (k2) * p2_;                               \
        (acc1) += (k0) * p1_ + (k1) * p2_ + (k2) * p3_;                               \
    } while (0)
#define QK_DW_ROW1(v, k0, k1, k2, zp, acc0)                                          \
    do {                                                                              \
        int32_t p0_ = (int8_t)(v & 0xFFu) - (zp), p1_ = (int8_t)((v >> 8) & 0xFFu) - (zp); \
        int32_t p2_ = (int8_t)((v >> 16) & 0xFFu) - (zp);                             \
        (acc0) += (k0) * p0_ + (k1) * p1_ + (k2) * p2_;                               \
    } while (0)
#endif

/* Which convolutions take qk_dwconv3: depthwise (one input and one output
 * channel per group) 3x3, padding at most 1, the stride across 1 or 2 and
 * rows of at least 4 inputs (a word). */
QK_INLINE int qk_conv_uses_dw3(int C, int O, int G, int W, int KH, int KW, int SW, int PH, int PW) {
    return G == C && O == C && KH == 3 && KW == 3 && PH <= 1 && PW <= 1 && (SW == 1 || SW == 2) && W >= 4;
}
/* Which take qk_dwconv3_padded in the generated C: the same at any width
 * (the padded rows are at least a word longer than the widest window;
 * narrower rows take qk_conv where the DSP's rows are not there). */
QK_INLINE int qk_conv_uses_dw3_rows(int C, int O, int G, int W, int KH, int KW, int SW, int PH, int PW) {
    return qk_conv_uses_dw3(C, O, G, W < 4 ? 4 : W, KH, KW, SW, PH, PW);
}

/* Depthwise 3x3 convolution: x [C, H, W] -> y [C, OH, OW], w [C][3][3]
 * int8 (qk_conv's layout), one channel at a time: its 9 taps in registers
 * (DSP: packed (k0, k2) and k1 per row), its bias and requantization
 * hoisted; each output row's kernel rows clipped to the input (a row
 * outside adds nothing); across, stride 1 computes two outputs per word
 * loaded (QK_DW_ROW2), stride 2 one, padding columns read as zp
 * (qk_dw_word), so every output takes the same instructions. */
QK_INLINE void qk_dwconv3(const int8_t *x, const int8_t *w, int C, int H, int W, int OH, int OW, int SH, int SW,
                          int PH, int PW, const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int32_t zp,
                          int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
    const uint32_t zp4 = (uint32_t)(uint8_t)(int8_t)zp * 0x01010101u;
    int c, oy, ox;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * H * W, *wc = w + c * 9;
        const int32_t b = bias[c], mc = m0[c * MS];
        const int sc = shift[c * MS];
#if Q_DSP
        const int32_t nzp = qk_neg_zp_pair(zp);
#define QK_K02(r) ((int32_t)(((uint32_t)(uint16_t)(int16_t)wc[3 * (r)]) | ((uint32_t)(int32_t)wc[3 * (r) + 2] << 16)))
        const int32_t k02_0 = QK_K02(0), k02_1 = QK_K02(1), k02_2 = QK_K02(2);
#undef QK_K02
        const int32_t k1_0 = wc[1], k1_1 = wc[4], k1_2 = wc[7];
#define QK_R2(v, r, a0, a1) QK_DW_ROW2(v, k02_##r, k1_##r, nzp, a0, a1)
#define QK_R1(v, r, a0) QK_DW_ROW1(v, k02_##r, k1_##r, nzp, a0)
#else
        const int32_t k0_0 = wc[0], k1_0 = wc[1], k2_0 = wc[2], k0_1 = wc[3], k1_1 = wc[4], k2_1 = wc[5];
        const int32_t k0_2 = wc[6], k1_2 = wc[7], k2_2 = wc[8];
#define QK_R2(v, r, a0, a1) QK_DW_ROW2(v, k0_##r, k1_##r, k2_##r, zp, a0, a1)
#define QK_R1(v, r, a0) QK_DW_ROW1(v, k0_##r, k1_##r, k2_##r, zp, a0)
#endif
        int8_t *yc = y + (int32_t)c * OH * OW;
        for (oy = 0; oy < OH; oy++) {
            const int iy = oy * SH - PH;
            /* kernel row 0 lies inside where iy >= 0, row 2 where iy + 2 < H; row 1 always
             * (iy >= -1, and iy <= H - 2 by OH's floor) */
            const int t = iy >= 0, u = iy + 2 < H;
            const int8_t *r1 = xc + (int32_t)(iy + 1) * W, *r0 = t ? r1 - W : r1, *r2 = u ? r1 + W : r1;
            int8_t *yr = yc + oy * OW;
            int na = 0, nb = 0; /* outputs [na, nb) done eight at a time (NEON) */
#if Q_NEON
            {
                /* eight outputs a step. Stride 1 (OW, W >= 8): every output, the last step
                 * ending at OW - 1 (it may overlap the one before), a tap's run of inputs
                 * starting at most one column left of the row or ending one right of it
                 * (qk_ld8: zp there). Stride 2: the outputs whose taps all lie inside, ix =
                 * 2·ox - PW >= 0 and ix + 18 <= W (16 bytes deinterleaved from ix and ix + 2). */
                const int8x8_t vz = vdup_n_s8((int8_t)zp);
                const int whole = SW == 1 && OW >= 8 && W >= 8;
                const int last = whole ? OW - 8 : SW == 2 && W - 18 + PW >= 0 ? (W - 18 + PW) / 2 : -1;
                na = whole ? 0 : (PW + 1) / 2;
                for (ox = na; ox <= last || (whole && ox < OW); ox += 8) {
                    int ix;
                    int32x4_t al = vdupq_n_s32(b), ah = al;
                    if (whole && ox > last) ox = last;
                    ix = ox * SW - PW;
#define QK_DWN(x, k)                                                                       \
    do {                                                                                   \
        const int16x8_t xv_ = vsubl_s8((x), vz);                                           \
        al = vmlal_n_s16(al, vget_low_s16(xv_), (int16_t)(k)), ah = vmlal_high_n_s16(ah, xv_, (int16_t)(k)); \
    } while (0)
#define QK_DWROW(row, r)                                                                   \
    do {                                                                                   \
        if (SW == 1) {                                                                     \
            QK_DWN(qk_ld8((row), ix, W, vz), k0_##r);                                      \
            QK_DWN(qk_ld8((row), ix + 1, W, vz), k1_##r);                                  \
            QK_DWN(qk_ld8((row), ix + 2, W, vz), k2_##r);                                  \
        } else {                                                                           \
            const int8x8x2_t e_ = vld2_s8((row) + ix);                                     \
            QK_DWN(e_.val[0], k0_##r);                                                     \
            QK_DWN(e_.val[1], k1_##r);                                                     \
            QK_DWN(vld2_s8((row) + ix + 2).val[0], k2_##r);                                \
        }                                                                                  \
    } while (0)
                    if (t) QK_DWROW(r0, 0);
                    QK_DWROW(r1, 1);
                    if (u) QK_DWROW(r2, 2);
#undef QK_DWROW
#undef QK_DWN
                    qk_store8(al, ah, mc, sc, zp_out, lo, hi, yr + ox);
                }
                nb = whole ? OW : ox > na ? ox : na;
                if (SW == 1 && !whole && OW >= 4 && W >= 4) {
                    /* rows of 4 to 7 outputs (KWS's depthwise layers: 5): four a step, the last
                     * ending at OW - 1; each tap's four inputs one word, zp in a padding column
                     * (qk_dw_word: the run starts at ox - PW + kx >= -1 and ends by W) */
                    for (ox = 0; ox < OW; ox += 4) {
                        int ix;
                        int32x4_t a4 = vdupq_n_s32(b);
                        if (ox > OW - 4) ox = OW - 4;
                        ix = ox - PW;
#define QK_DW4(row, kx, k)                                                                           \
    (a4 = vmlal_n_s16(a4, vget_low_s16(vsubl_s8(vcreate_s8(qk_dw_word((row), ix + (kx), W, zp4)), vz)), \
                      (int16_t)(k)))
#define QK_DW4ROW(row, r) (QK_DW4(row, 0, k0_##r), QK_DW4(row, 1, k1_##r), QK_DW4(row, 2, k2_##r))
                        if (t) QK_DW4ROW(r0, 0);
                        QK_DW4ROW(r1, 1);
                        if (u) QK_DW4ROW(r2, 2);
#undef QK_DW4ROW
#undef QK_DW4
                        qk_store4(a4, mc, sc, zp_out, lo, hi, yr + ox);
                    }
                    na = 0, nb = OW;
                }
            }
#endif
            if (SW == 1) {
                /* pairs (ox, ox + 1), the word at ox - PW; the last pair ends at OW - 1 (it may
                 * overlap the one before, writing the same integers) */
                for (ox = 0; ox < OW; ox += 2) {
                    int32_t a0 = b, a1 = b;
                    int ix;
                    uint32_t v;
                    if (ox >= na && ox < nb) { /* done above */
                        ox = nb - 2;
                        continue;
                    }
                    if (ox > OW - 2) ox = OW - 2;
                    ix = ox - PW;
                    if (t) {
                        v = qk_dw_word(r0, ix, W, zp4);
                        QK_R2(v, 0, a0, a1);
                    }
                    v = qk_dw_word(r1, ix, W, zp4);
                    QK_R2(v, 1, a0, a1);
                    if (u) {
                        v = qk_dw_word(r2, ix, W, zp4);
                        QK_R2(v, 2, a0, a1);
                    }
                    yr[ox] = q_out(qk_rq(a0, mc, sc) + zp_out, lo, hi);
                    yr[ox + 1] = q_out(qk_rq(a1, mc, sc) + zp_out, lo, hi);
                }
            } else {
                for (ox = 0; ox < OW; ox++) {
                    int32_t a0 = b;
                    const int ix = ox * SW - PW;
                    uint32_t v;
                    if (ox >= na && ox < nb) { /* done above */
                        ox = nb - 1;
                        continue;
                    }
                    if (t) {
                        v = qk_dw_word(r0, ix, W, zp4);
                        QK_R1(v, 0, a0);
                    }
                    v = qk_dw_word(r1, ix, W, zp4);
                    QK_R1(v, 1, a0);
                    if (u) {
                        v = qk_dw_word(r2, ix, W, zp4);
                        QK_R1(v, 2, a0);
                    }
                    yr[ox] = q_out(qk_rq(a0, mc, sc) + zp_out, lo, hi);
                }
            }
        }
#undef QK_R2
#undef QK_R1
    }
}

/* qk_dwconv3 on the DSP over padded rows: each output row's three input
 * rows lie in rows, RS = qk_dw_row_stride(W, PW) bytes apart, with zp's
 * byte in the padding columns and in a row outside the input (x - zp is 0
 * there), so every output takes the same few instructions: three word
 * loads, three QK_DW_ROW2 (stride 1, two outputs) or QK_DW_ROW1 (stride
 * 2), no edge tests. PL (a literal) 0: the three rows are copied in for
 * each output row (rows: 3·RS bytes); 1: each channel's whole plane is
 * copied in once, H + 2·PH padded rows (qk_dw_plane_bytes), and output
 * row oy reads rows oy·SH .. + 2 of it in place: one copy of each input
 * row where the three-row form makes 3 / SH (narrow maps, where the
 * copies are much of the work: the generator's choice). */
QK_INLINE int qk_dw_row_stride(int W, int PW) { return (W + 2 * PW + 3 + 3) / 4 * 4; }
QK_INLINE int32_t qk_dw_plane_bytes(int H, int W, int PH, int PW) { return (int32_t)(H + 2 * PH) * qk_dw_row_stride(W, PW); }

#if Q_DSP
QK_INLINE void qk_dwconv3_rows(const int8_t *x, const int8_t *w, int P, int8_t *rows, int PL, int C, int H, int W,
                               int OH, int OW, int SH, int SW, int PH, int PW, const int32_t *bias, const int32_t *m0,
                               const int32_t *shift, int MS, int SN, int32_t zp, int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
    const int RS = qk_dw_row_stride(W, PW);
    int c, oy, ox, r;
    memset(rows, (int)(uint8_t)(int8_t)zp, (size_t)(PL ? qk_dw_plane_bytes(H, W, PH, PW) : 3 * RS));
    for (c = 0; c < C; c++) {
        /* the channel's 9 taps, read once each: packed ones (P < 8, one row of C·9) unpacked here */
        int8_t wk[9];
        const int8_t *xc = x + (int32_t)c * H * W, *wc = P < 8 ? wk : w + c * 9;
        for (r = 0; P < 8 && r < 9; r++) wk[r] = (int8_t)qk_packed_weight(w, c * 9 + r, P);
        /* zp's share folded into the bias: every tap reads a byte, zp's in the padding,
         * so Σ k·x + (b - zp·Σ k) = Σ k·(x - zp) + b, and the bytes unpack without it.
         * |zp·Σ k| <= 128·9·128 and the plan bounds |b| + 9·255·255 by INT32_MAX, so
         * neither the fold nor any partial sum after it leaves int32. */
        /* with SN 2 or above the taps and the bias doubled (D): the sums are then 2·acc, what
         * qk_rqzd takes with D, for no instruction an output (|2·k| <= 256 fits the
         * halfwords; SN 2 bounds |acc| below 2^29) */
        const int D = SN >= 2;
        const int32_t b = (bias[c] - zp * (wc[0] + wc[1] + wc[2] + wc[3] + wc[4] + wc[5] + wc[6] + wc[7] + wc[8])) * (1 + D),
                      mc = m0[c * MS];
        const int sc = shift[c * MS];
#define QK_K02(r)                                                                                 \
    ((int32_t)(((uint32_t)(uint16_t)(int16_t)(wc[3 * (r)] * (1 + D))) |                          \
               ((uint32_t)(int32_t)(wc[3 * (r) + 2] * (1 + D)) << 16)))
        const int32_t k02_0 = QK_K02(0), k02_1 = QK_K02(1), k02_2 = QK_K02(2);
#undef QK_K02
        const int32_t k1_0 = wc[1] * (1 + D), k1_1 = wc[4] * (1 + D), k1_2 = wc[7] * (1 + D);
        int8_t *yr = y + (int32_t)c * OH * OW;
        if (PL) { /* the plane's padding rows and columns keep zp from the memset; eight
                   * rows a pass (GCC reloads the loop's bound from the literal pool each pass) */
            QK_UNROLL
            for (r = 0; r < H; r++) memcpy(rows + (r + PH) * RS + PW, xc + (int32_t)r * W, (size_t)W);
        }
        for (oy = 0; oy < OH; oy++, yr += OW) {
            const int iy = oy * SH - PH;
            const int8_t *rb = PL ? rows + oy * SH * RS : rows; /* the output row's first input row */
            for (r = 0; !PL && r < 3; r++) { /* the padding columns keep zp from the memset */
                if (iy + r >= 0 && iy + r < H) memcpy(rows + r * RS + PW, xc + (int32_t)(iy + r) * W, (size_t)W);
                else memset(rows + r * RS + PW, (int)(uint8_t)(int8_t)zp, (size_t)W);
            }
            if (SW == 1) {
                for (ox = 0; ox + 4 <= OW; ox += 4) { /* four outputs a step: the taps' registers reloaded once */
                    int32_t a0 = b, a1 = b, a2 = b, a3 = b;
                    const uint32_t v0 = q_ld32(rb + ox), v1 = q_ld32(rb + RS + ox), v2 = q_ld32(rb + 2 * RS + ox);
                    const uint32_t u0 = q_ld32(rb + ox + 2), u1 = q_ld32(rb + RS + ox + 2),
                                   u2 = q_ld32(rb + 2 * RS + ox + 2);
                    QK_DW_ROW2X(v0, k02_0, k1_0, a0, a1);
                    QK_DW_ROW2X(u0, k02_0, k1_0, a2, a3);
                    QK_DW_ROW2X(v1, k02_1, k1_1, a0, a1);
                    QK_DW_ROW2X(u1, k02_1, k1_1, a2, a3);
                    QK_DW_ROW2X(v2, k02_2, k1_2, a0, a1);
                    QK_DW_ROW2X(u2, k02_2, k1_2, a2, a3);
                    yr[ox] = q_out(qk_rqzd(a0, mc, sc, SN, D, zp_out, lo), lo, hi);
                    yr[ox + 1] = q_out(qk_rqzd(a1, mc, sc, SN, D, zp_out, lo), lo, hi);
                    yr[ox + 2] = q_out(qk_rqzd(a2, mc, sc, SN, D, zp_out, lo), lo, hi);
                    yr[ox + 3] = q_out(qk_rqzd(a3, mc, sc, SN, D, zp_out, lo), lo, hi);
                }
                for (; ox + 2 <= OW; ox += 2) {
                    int32_t a0 = b, a1 = b;
                    const uint32_t v0 = q_ld32(rb + ox), v1 = q_ld32(rb + RS + ox), v2 = q_ld32(rb + 2 * RS + ox);
                    QK_DW_ROW2X(v0, k02_0, k1_0, a0, a1);
                    QK_DW_ROW2X(v1, k02_1, k1_1, a0, a1);
                    QK_DW_ROW2X(v2, k02_2, k1_2, a0, a1);
                    yr[ox] = q_out(qk_rqzd(a0, mc, sc, SN, D, zp_out, lo), lo, hi);
                    yr[ox + 1] = q_out(qk_rqzd(a1, mc, sc, SN, D, zp_out, lo), lo, hi);
                }
            } else {
                ox = 0;
            }
            for (; ox < OW; ox++) { /* stride 2, or stride 1's odd last output */
                int32_t a0 = b;
                const int ix = ox * SW;
                const uint32_t v0 = q_ld32(rb + ix), v1 = q_ld32(rb + RS + ix), v2 = q_ld32(rb + 2 * RS + ix);
                QK_DW_ROW1X(v0, k02_0, k1_0, a0);
                QK_DW_ROW1X(v1, k02_1, k1_1, a0);
                QK_DW_ROW1X(v2, k02_2, k1_2, a0);
                yr[ox] = q_out(qk_rqzd(a0, mc, sc, SN, D, zp_out, lo), lo, hi);
            }
        }
    }
}
#endif

/* qk_dwconv3 with the DSP's padded rows where rows is given (qk_dwconv3_rows, PL its form). P: the
 * weights' bits (8, or packed as one row: qk_packed_row), which qk_conv unpacks into rows elsewhere. */
QK_INLINE void qk_dwconv3_padded(const int8_t *x, const int8_t *w, int P, int8_t *rows, int PL, int C, int H, int W,
                                 int OH, int OW, int SH, int SW, int PH, int PW, const int32_t *bias, const int32_t *m0,
                                 const int32_t *shift, int MS, int SN, int32_t zp, int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
#if Q_DSP
    if (rows) {
        qk_dwconv3_rows(x, w, P, rows, PL, C, H, W, OH, OW, SH, SW, PH, PW, bias, m0, shift, MS, SN, zp, zp_out, lo, hi, y);
        return;
    }
#else
    (void)PL, (void)SN;
#endif
    if (W < 4 || P < 8) /* narrow rows (qk_conv_uses_dw3_rows), or packed taps: the general loop, a channel a group */
        qk_conv(x, w, P, P < 8 ? rows : NULL, C, H, W, C, OH, OW, 3, 3, SH, SW, PH, PW, C, 1, bias, m0, shift, MS, zp, zp_out,
                lo, hi, y);
    else
        qk_dwconv3(x, w, C, H, W, OH, OW, SH, SW, PH, PW, bias, m0, shift, MS, zp, zp_out, lo, hi, y);
}

/* qk_conv_pw's output channels per pass: 2 (4 accumulators with its two
 * positions fit the registers with the inputs and weights; 4 would spill). */
QK_INLINE int qk_pw_block(int O) { return O % 2 == 0 ? 2 : 1; }

/* Which convolutions take qk_conv_pw: pointwise (1x1, stride 1, no
 * padding, one group) over at least 4 input channels and 2 positions. */
QK_INLINE int qk_conv_uses_pw(int C, int G, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW) {
    return G == 1 && C >= 4 && KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0 && PW == 0 && H * W >= 2;
}

/* Pointwise convolution: x [C, HW] -> y [O, HW], w [O][C] in
 * qk_pair_channel's layout (qk_conv_pairs' with one tap); channel c of x
 * starts XS elements after channel c - 1, channel o of y YS after o - 1
 * (both HW for whole maps; a run of positions of a larger map, into a
 * scratch, for a convolution written over its input). B output
 * channels (qk_block(O)) at two positions p, p + 1 at a time: 2·B
 * accumulators, each input pair and each weight word unpacked once and
 * used twice. DSP: the two positions of a channel are adjacent bytes
 * (one halfword); two channels' halfwords packed into a word give, by
 * SXTAB16 and its rotated form, (x_c, x_c+1) at p and at p + 1; a weight
 * word gives (w_c, w_c+1) and (w_c+2, w_c+3): per 4 channels, 10
 * instructions unpack the inputs, 3 each output channel's weights, and
 * 4·B SMLADs make 16·B products. An odd last position is computed as the
 * pair (HW - 2, HW - 1), writing HW - 2's integers again. */
QK_INLINE void qk_conv_pw(const int8_t *x, const int8_t *w, int C, int HW, int XS, int O, int YS, int B,
                          const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int32_t zp, int32_t zp_out,
                          int32_t lo, int32_t hi, int8_t *y) {
    const int C4 = C / 4 * 4;
    int o, p, c;
    for (o = 0; o < O; o += B) {
        const int8_t *wo = w + (int32_t)o * C;
        int8_t *yo = y + (int32_t)o * YS;
#if Q_DOT
        if (HW >= 16 && C4) {
            /* sixteen positions a step: four channels' rows of 16 bytes in the weights' stored
             * order (c, c+2, c+1, c+3) turned into each position's four inputs (qk_quads), one
             * SDOT per output channel and four positions with the weight word broadcast; the
             * inputs' zero point taken out of the bias (b - zp·Σ w over the fours), the
             * channels past the last four as x - zp (SMLAL) */
            const int8x16_t vzq = vdupq_n_s8((int8_t)zp);
            int32_t b0[4];
#define QK_DB(j)                                                              \
    do {                                                                      \
        int32_t s_ = 0;                                                       \
        for (c = 0; c < C4; c++) s_ += wo[(j) * C + c];                       \
        b0[j] = bias[o + (j)] - zp * s_;                                      \
    } while (0)
            QK_EACH(B, QK_DB);
#undef QK_DB
            for (p = 0; p < HW; p += 16) {
                int32x4_t a4[4][4];
                const int8_t *xp;
                if (p > HW - 16) p = HW - 16;
                xp = x + p;
#define QK_DI(j) (a4[j][0] = a4[j][1] = a4[j][2] = a4[j][3] = vdupq_n_s32(b0[j]))
                QK_EACH(B, QK_DI);
#undef QK_DI
                for (c = 0; c < C4; c += 4) {
                    const int8_t *xc = xp + (int32_t)c * XS;
                    int8x16_t q[4];
                    qk_quads(vld1q_s8(xc), vld1q_s8(xc + 2 * XS), vld1q_s8(xc + XS), vld1q_s8(xc + 3 * XS), q);
#define QK_DPW(j) QK_DOT4(j, wo + (j) * C + c)
                    QK_EACH(B, QK_DPW);
#undef QK_DPW
                }
                for (c = C4; c < C; c++) {
                    const int8x16_t xv = vld1q_s8(xp + (int32_t)c * XS);
#define QK_DT(j) QK_SMLAL16(j, wo[(j) * C + c])
                    QK_EACH(B, QK_DT);
#undef QK_DT
                }
#define QK_DST(j) QK_ST16(j, yo + (j) * YS + p)
                QK_EACH(B, QK_DST);
#undef QK_DST
            }
            continue;
        }
#endif
#if Q_NEON
        if (HW >= 8) { /* eight positions a step, the last step ending at HW (it may overlap the one before) */
            const int8x8_t vz = vdup_n_s8((int8_t)zp);
            for (p = 0; p < HW; p += 8) {
                int32x4_t al[4], ah[4];
                const int8_t *xp;
                if (p > HW - 8) p = HW - 8;
                xp = x + p;
                QK_EACH(B, QK_N8_INIT);
                for (c = 0; c < C4; c += 4) { /* the weights of channels c, c+1, c+2, c+3 at c, c+2, c+1, c+3 */
                    const int8_t *xc = xp + (int32_t)c * XS, *wt = wo + c;
                    int16x8_t xv = vsubl_s8(vld1_s8(xc), vz);
#define QK_PWN(j, s) QK_N8(j, wt[(j) * C + (s)])
#define QK_PWN0(j) QK_PWN(j, 0)
#define QK_PWN1(j) QK_PWN(j, 2)
#define QK_PWN2(j) QK_PWN(j, 1)
#define QK_PWN3(j) QK_PWN(j, 3)
                    QK_EACH(B, QK_PWN0);
                    xv = vsubl_s8(vld1_s8(xc + XS), vz);
                    QK_EACH(B, QK_PWN1);
                    xv = vsubl_s8(vld1_s8(xc + 2 * XS), vz);
                    QK_EACH(B, QK_PWN2);
                    xv = vsubl_s8(vld1_s8(xc + 3 * XS), vz);
                    QK_EACH(B, QK_PWN3);
                }
                for (c = C4; c < C; c++) { /* past the last four: in order */
                    const int16x8_t xv = vsubl_s8(vld1_s8(xp + (int32_t)c * XS), vz);
#define QK_PWT(j) QK_N8(j, wo[(j) * C + c])
                    QK_EACH(B, QK_PWT);
#undef QK_PWT
                }
#undef QK_PWN
#undef QK_PWN0
#undef QK_PWN1
#undef QK_PWN2
#undef QK_PWN3
#define QK_ST8(j) qk_store8(al[j], ah[j], m0[(o + (j)) * MS], shift[(o + (j)) * MS], zp_out, lo, hi, yo + (j) * YS + p)
                QK_EACH(B, QK_ST8);
#undef QK_ST8
            }
            continue;
        }
#endif
        for (p = 0; p < HW; p += 2) {
            int32_t acc[4], acd[4]; /* position p, p + 1 */
            const int8_t *xp;
            if (p > HW - 2) p = HW - 2;
            xp = x + p;
#define QK_INIT2(j) (acc[j] = acd[j] = bias[o + (j)])
            QK_EACH(B, QK_INIT2);
#undef QK_INIT2
            for (c = 0; c < C4; c += 4) {
                const int8_t *xc = xp + (int32_t)c * XS;
#if Q_DSP
                uint16_t h0, h1, h2, h3;
                uint32_t wv;
                int32_t t01, t23, x01p, x01q, x23p, x23q;
                memcpy(&h0, xc, 2), memcpy(&h1, xc + XS, 2), memcpy(&h2, xc + 2 * XS, 2), memcpy(&h3, xc + 3 * XS, 2);
                t01 = (int32_t)((uint32_t)h0 | ((uint32_t)h1 << 16)); /* (x_c,p  x_c,p+1  x_c+1,p  x_c+1,p+1) */
                t23 = (int32_t)((uint32_t)h2 | ((uint32_t)h3 << 16));
                x01p = __sxtab16(qk_neg_zp_pair(zp), t01), x01q = q_sxtab16_ror8(qk_neg_zp_pair(zp), (uint32_t)t01);
                x23p = __sxtab16(qk_neg_zp_pair(zp), t23), x23q = q_sxtab16_ror8(qk_neg_zp_pair(zp), (uint32_t)t23);
#define QK_PW(j)                                                                                   \
    do {                                                                                           \
        int32_t wa_, wb_;                                                                          \
        wv = q_ld32(wo + (j) * C + c), wa_ = __sxtb16((int32_t)wv), wb_ = q_sxtb16_ror8(wv);       \
        acc[j] = __smlad(wa_, x01p, acc[j]), acd[j] = __smlad(wa_, x01q, acd[j]);                  \
        acc[j] = __smlad(wb_, x23p, acc[j]), acd[j] = __smlad(wb_, x23q, acd[j]);                  \
    } while (0)
#else
                const int32_t a0 = xc[0] - zp, a1 = xc[XS] - zp, a2 = xc[2 * XS] - zp, a3 = xc[3 * XS] - zp;
                const int32_t d0 = xc[1] - zp, d1 = xc[XS + 1] - zp, d2 = xc[2 * XS + 1] - zp, d3 = xc[3 * XS + 1] - zp;
#define QK_PW(j)                                                                                   \
    do {                                                                                           \
        const int8_t *wt_ = wo + (j) * C + c; /* channels c, c+2, c+1, c+3 */                      \
        acc[j] += wt_[0] * a0 + wt_[2] * a1 + wt_[1] * a2 + wt_[3] * a3;                           \
        acd[j] += wt_[0] * d0 + wt_[2] * d1 + wt_[1] * d2 + wt_[3] * d3;                           \
    } while (0)
#endif
                QK_EACH(B, QK_PW);
#undef QK_PW
            }
            for (c = C4; c < C; c++) {
                const int32_t a = xp[(int32_t)c * XS] - zp, d = xp[(int32_t)c * XS + 1] - zp;
#define QK_MAC2(j) (acc[j] += wo[(j) * C + c] * a, acd[j] += wo[(j) * C + c] * d)
                QK_EACH(B, QK_MAC2);
#undef QK_MAC2
            }
            qk_store(acc, B, o, m0, shift, MS, zp_out, lo, hi, yo + p, YS);
            qk_store(acd, B, o, m0, shift, MS, zp_out, lo, hi, yo + p + 1, YS);
        }
    }
}

/* qk_conv_pw over whole maps with the DSP's int16 columns where cols is
 * given (2·C int16, 4-byte aligned) and C is a multiple of 4: qk_conv_q15
 * as a 1 x HW map (each position's C inputs unpacked once for every output
 * channel, not once per pair of them). */
QK_INLINE void qk_conv_pw_cols(const int8_t *x, const int8_t *w, int16_t *cols, int C, int HW, int O, int B,
                               const int32_t *bias, const int32_t *m0, const int32_t *shift, int MS, int SN, int PB, int32_t zp,
                               int32_t zp_out, int32_t lo, int32_t hi, int8_t *y) {
#if Q_DSP
    if (cols && C % 4 == 0) {
        qk_conv_q15(x, w, 8, cols, C, 1, HW, O, 1, HW, 1, 1, 1, 1, 0, 0, 1, bias, m0, shift, MS, SN, PB, zp, zp_out, lo, hi, y);
        return;
    }
#else
    (void)cols, (void)SN, (void)PB;
#endif
    qk_conv_pw(x, w, C, HW, HW, O, HW, B, bias, m0, shift, MS, zp, zp_out, lo, hi, y);
}

#endif
