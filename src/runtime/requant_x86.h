/* The AVX2 requantization of int32 sums to int8, 8 lanes at a time, for
 * the x86 kernels (kernels_x86.c, kernels_wino.c): the portable
 * qat_requantize_r lane by lane. Include after <immintrin.h> and QAT_AVX2,
 * inside the x86 guard. */
#ifndef QAT_RUNTIME_REQUANT_X86_H
#define QAT_RUNTIME_REQUANT_X86_H

#include <string.h>

#include "kernels.h"

/* The one-floor forms (single, or nonneg: mbqm8), right > 0: floor((x·m0 + half) / 2^(31+right)) with half
 * from one_floor_half, as the sums' high words shifted by right - 1 (cnt). */
static inline int64_t one_floor_half(int right, bool single) {
    return single ? 1LL << (30 + right) : (1LL << 30) + (1LL << (30 + right));
}
QAT_AVX2 static inline __m256i one_floor8(__m256i x, __m256i m0, __m256i half, __m128i cnt) {
    __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, m0), half);
    __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m0), half);
    return _mm256_sra_epi32(_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA), cnt);
}

/* RoundingDivideByPOT(SRDHM(x, m0), right): qat_multiply_by_quantized_multiplier with shift = -right <= 0;
 * single: qat_multiply_by_quantized_multiplier_single, floor((x·m0 + 2^(t-1)) / 2^t) with t = 31 + right.
 * AVX2 has no 64-bit arithmetic shift: for t >= 32 that is the sum's high word (a signed int32: |x·m0| <
 * 2^62) shifted right by t - 32 in 32 bits (a floor of a floor); for t = 31 (right 0) both roundings are
 * floor((x·m0 + 2^30) / 2^31), an int32 (m0 < 2^31), whose low word a logical shift gives.
 * nonneg (double rounding, for outputs clamped at or above the zero point, where every negative result
 * clamps alike): with u = x·m0 + 2^30, SRDHM is floor(u / 2^31), and for u >= 0 the second rounding
 * floor((floor(u / 2^31) + 2^(right-1)) / 2^right) = floor((u + 2^(30+right)) / 2^(31+right)), one
 * floor as in the single form; for u < 0 both that and the exact result are <= 0, which the clamp maps
 * to the same byte. No sign term: 8 operations instead of 15. */
QAT_AVX2 static inline __m256i mbqm8(__m256i x, __m256i m0, int right, bool single, bool nonneg) {
    if ((single || nonneg) && right > 0)
        return one_floor8(x, m0, _mm256_set1_epi64x(one_floor_half(right, single)), _mm_cvtsi32_si128(right - 1));
    const __m256i half = _mm256_set1_epi64x(1LL << 30);
    __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, m0), half);
    __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m0), half);
    /* low 32 bits of each 64-bit >> 31: the logical shift gives the same bits */
    even = _mm256_srli_epi64(even, 31);
    odd = _mm256_slli_epi64(_mm256_srli_epi64(odd, 31), 32);
    __m256i v = _mm256_blend_epi32(even, odd, 0xAA);
    if (right > 0) {
        __m128i cnt = _mm_cvtsi32_si128(right);
        __m256i mask = _mm256_set1_epi32((int32_t)((1LL << right) - 1));
        __m256i rem = _mm256_and_si256(v, mask);
        /* threshold = mask/2 + (v < 0) */
        __m256i thr = _mm256_sub_epi32(_mm256_srai_epi32(mask, 1), _mm256_srai_epi32(v, 31));
        v = _mm256_sub_epi32(_mm256_sra_epi32(v, cnt), _mm256_cmpgt_epi32(rem, thr));
    }
    return v;
}

/* clamp(zp + v, lo, hi) as the portable code's 64-bit sum: v clamped to
 * [lo - zp, hi - zp] first (a multiplier above 1 can saturate v to
 * INT32_MAX, where a 32-bit zp + v would wrap) */
QAT_AVX2 static inline __m256i clamp_zp8(__m256i v, __m256i zp, __m256i lo_zp, __m256i hi_zp) {
    return _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(v, lo_zp), hi_zp), zp);
}

/* zp + mbqm8(x), clamped; shift <= 0. nonneg: lo >= zp (mbqm8). */
QAT_AVX2 static inline __m256i requant8(__m256i x, __m256i m0, int right, __m256i zp, __m256i lo, __m256i hi,
                                        bool single, bool nonneg) {
    return clamp_zp8(mbqm8(x, m0, right, single, nonneg), zp, _mm256_sub_epi32(lo, zp), _mm256_sub_epi32(hi, zp));
}

/* 16 int32 within int8 (r0: positions 0-7, r1: 8-15) as 16 bytes in order:
 * packs works per 128-bit lane, the permute restores the order (the values
 * are clamped to 8 bits: the packs never saturate). */
QAT_AVX2 static inline __m128i pack16(__m256i r0, __m256i r1) {
    __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);
    return _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
}

/* One output channel's requantization (a qat__direct_args' output o),
 * its vectors built once for all of the channel's blocks. */
typedef struct {
    __m256i bias, m0, zp, lo, hi;
    int32_t m0s, shift, zps, los, his; /* a shift > 0: the scalar path's */
    bool single, nonneg;
} out_requant;

QAT_AVX2 static inline out_requant out_requant_of(const qat__direct_args *a, int o) {
    return (out_requant){.bias = _mm256_set1_epi32(a->bias[o]), .m0 = _mm256_set1_epi32(a->m0[o]),
                         .zp = _mm256_set1_epi32(a->zp), .lo = _mm256_set1_epi32(a->lo), .hi = _mm256_set1_epi32(a->hi),
                         .m0s = a->m0[o], .shift = a->shift[o], .zps = a->zp, .los = a->lo, .his = a->hi,
                         .single = a->single, .nonneg = a->lo >= a->zp};
}

/* np < 16 positions are stored 16 bytes wide when the 16 bytes end within
 * the channel's plane (spill): the bytes past np fall on the next rows of
 * the same channel, which later blocks write (rows go up within a block of
 * output channels); near a plane's end they are stored exactly. */
QAT_AVX2 static inline void store_requant(const out_requant *q, int8_t *dst, int np, bool spill, __m256i s0,
                                          __m256i s1) {
    s0 = _mm256_add_epi32(s0, q->bias), s1 = _mm256_add_epi32(s1, q->bias);
    if (q->shift <= 0) {
        __m256i r0 = requant8(s0, q->m0, -q->shift, q->zp, q->lo, q->hi, q->single, q->nonneg),
                r1 = requant8(s1, q->m0, -q->shift, q->zp, q->lo, q->hi, q->single, q->nonneg);
        __m128i b8 = pack16(r0, r1);
        if (np == 16 || spill) _mm_storeu_si128((__m128i *)dst, b8);
        else {
            int8_t t[16];
            _mm_storeu_si128((__m128i *)t, b8);
            memcpy(dst, t, (size_t)np);
        }
        return;
    }
    int32_t v[16]; /* a multiplier >= 1: the saturating left shift, in scalar code */
    _mm256_storeu_si256((__m256i *)v, s0);
    _mm256_storeu_si256((__m256i *)(v + 8), s1);
    for (int i = 0; i < np; i++) dst[i] = (int8_t)qat_requantize_r(v[i], q->m0s, q->shift, q->zps, q->los, q->his, q->single);
}

QAT_AVX2 static inline void direct_store(const qat__direct_args *a, int o, int8_t *dst, int np, bool spill,
                                         __m256i s0, __m256i s1) {
    out_requant q = out_requant_of(a, o);
    store_requant(&q, dst, np, spill, s0, s1);
}

#endif
