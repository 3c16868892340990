/* qk.h — qat's portable integer kernels, the one source of each. The
 * runtime's portable level (src/runtime/kernels.c) calls them, and the C
 * generator writes this file, byte for byte, into every generated NAME.c
 * (embedded into qat_codegen at build time), where each op's function is
 * one call with literal arguments: the kernels are always inlined, so the
 * compiler specialises each by its op's constants.
 *
 * C99 on integers: <stdint.h> and <string.h> (memcpy) only, no float, no
 * allocation; every function static. The requantization helpers are
 * src/core/requant.h's formulas rewritten for fewer instructions with the
 * same results under what qat_qmodel_check guarantees (m0 in [2^30, 2^31)
 * or 0, shift in [-31, 30]); docs/codegen.md derives each step. Storage
 * integers are int8 (zero points, lo and hi in [-128, 127]). */
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
#if defined(__GNUC__)
#define Q_NOINLINE __attribute__((noinline)) /* one copy, one frame at a time */
#define Q_MAYBE_UNUSED __attribute__((unused))
#define QK_INLINE static inline __attribute__((always_inline, unused))
#else
#define Q_NOINLINE
#define Q_MAYBE_UNUSED
#define QK_INLINE static inline
#endif

/* gemmlowp's MultiplyByQuantizedMultiplier. SRDHM(x, m0) = (x·m0 + nudge) / 2^31
 * truncated, nudge 2^30 or 1 - 2^30 by the product's sign, is floor((x·m0 + 2^30)
 * / 2^31) for both signs (m0 >= 0 rules out INT32_MIN·INT32_MIN); the rounding
 * right shift by e (half away from zero) is floor((v + 2^(e-1) - [v < 0]) / 2^e). */
static inline int32_t q_mbqm(int32_t x, int32_t m0, int shift) {
    int32_t v;
    if (shift > 0) { /* the left shift saturates to int32 */
        int64_t s = (int64_t)x * ((int64_t)1 << shift);
        x = s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : (int32_t)s;
    }
    v = (int32_t)(((int64_t)x * m0 + ((int64_t)1 << 30)) >> 31);
    if (shift < 0)
        v = (int32_t)(((int64_t)v + ((int64_t)1 << (-shift - 1)) - (v < 0)) >> -shift);
    return v;
}

/* requant(acc), then the output: zp added and clamped to [lo, hi]. Clamping v to
 * [-256, 255] first changes no output (lo - zp >= -255, hi - zp <= 255) and keeps
 * v + zp from overflowing; the clamp stays at the call, where lo, hi, zp are literals. */
static Q_NOINLINE Q_MAYBE_UNUSED int32_t q_requant(int32_t acc, int32_t m0, int shift) {
    int32_t v = q_mbqm(acc, m0, shift);
    return v < -256 ? -256 : v > 255 ? 255 : v;
}
static inline int8_t q_out(int32_t v, int32_t lo, int32_t hi) { return (int8_t)(v < lo ? lo : v > hi ? hi : v); }

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
#else
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

/* y = clamp(zp_out + requant(Σ_window (x - zp_in), m0, shift), lo, hi). */
QK_INLINE void qk_avgpool(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                          int OH, int OW, int32_t zp_in, int32_t m0, int shift, int32_t zp_out, int32_t lo,
                          int32_t hi, int8_t *y) {
    int c, oy, ox, yy, xx;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * H * W;
        int8_t *yc = y + (int32_t)c * OH * OW;
        for (oy = 0; oy < OH; oy++)
            for (ox = 0; ox < OW; ox++) {
                int ya = oy * sh - ph, yb = ya + kh, xa = ox * sw - pw, xb = xa + kw;
                int32_t s = 0;
                if (ph || pw) {
                    ya = ya < 0 ? 0 : ya, yb = yb > H ? H : yb;
                    xa = xa < 0 ? 0 : xa, xb = xb > W ? W : xb;
                }
                for (yy = ya; yy < yb; yy++)
                    for (xx = xa; xx < xb; xx++) s += xc[yy * W + xx] - zp_in;
                yc[oy * OW + ox] = q_out(q_requant(s, m0, shift) + zp_out, lo, hi);
            }
    }
}

/* y[c] = clamp(zp_out + requant(Σ_{i < HW} x[c·HW + i] - zp_in·HW), lo, hi);
 * the plan refuses HW·255 > INT32_MAX. */
QK_INLINE void qk_global_avgpool(const int8_t *x, int C, int HW, int32_t zp_in, int32_t m0, int shift, int32_t zp_out,
                                 int32_t lo, int32_t hi, int8_t *y) {
    int c, k;
    for (c = 0; c < C; c++) {
        const int8_t *xc = x + (int32_t)c * HW;
        int32_t s = 0;
        for (k = 0; k < HW; k++) s += xc[k];
        y[c] = q_out(q_requant(s - zp_in * HW, m0, shift) + zp_out, lo, hi);
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

#endif
