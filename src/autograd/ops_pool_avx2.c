/* 2x2 / stride-2 max pooling rows with AVX2, where the AVX-512 rows
 * (ops_pool_avx512.c) do not run: 8 outputs a step from two rows of 16
 * inputs, the same comparisons in the same order (ordered-greater: false on
 * NaN, so the first maximum wins), the same values and codes as the
 * portable rows. Masks are all-ones lanes (VMASKMOVPS never touches a
 * masked lane's memory). */
#include <string.h>

#include "internal.h"

#if QAT__POOL_AVX2
#include <immintrin.h>

#define QAT_AVX2 __attribute__((target("avx2")))

bool qat__have_avx2(void) { return qat_isa_allowed(QAT_ISA_AVX2); }

/* Lanes [0, n) of 8 (n clipped to [0, 8]) as an all-ones mask. */
QAT_AVX2 static inline __m256i first8(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Lanes 0..3: the even (odd) lanes of a; 4..7: those of b. */
QAT_AVX2 static inline __m256 pick(__m256 a, __m256 b, __m256i idx) {
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(a, idx), _mm256_permutevar8x32_ps(b, idx), 0xF0);
}

QAT_AVX2 void qat__maxpool2_row_avx2(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW, bool spill) {
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    for (int64_t o = 0; o < OW; o += 8) {
        const int64_t n = OW - o < 8 ? OW - o : 8;
        const __m256i mlo = first8(2 * n), mhi = first8(2 * n - 8);
        const float *p0 = r0 + 2 * o, *p1 = r1 + 2 * o;
        const __m256 t0 = _mm256_maskload_ps(p0, mlo), t1 = _mm256_maskload_ps(p0 + 8, mhi);
        const __m256 u0 = _mm256_maskload_ps(p1, mlo), u1 = _mm256_maskload_ps(p1 + 8, mhi);
        __m256 m = pick(t0, t1, even), v, g;
        __m256i k = _mm256_setzero_si256();
        v = pick(t0, t1, odd), g = _mm256_cmp_ps(v, m, _CMP_GT_OQ), m = _mm256_blendv_ps(m, v, g);
        k = _mm256_blendv_epi8(k, _mm256_set1_epi32(1), _mm256_castps_si256(g));
        v = pick(u0, u1, even), g = _mm256_cmp_ps(v, m, _CMP_GT_OQ), m = _mm256_blendv_ps(m, v, g);
        k = _mm256_blendv_epi8(k, _mm256_set1_epi32(2), _mm256_castps_si256(g));
        v = pick(u0, u1, odd), g = _mm256_cmp_ps(v, m, _CMP_GT_OQ), m = _mm256_blendv_ps(m, v, g);
        k = _mm256_blendv_epi8(k, _mm256_set1_epi32(3), _mm256_castps_si256(g));
        /* the codes as bytes: 0..3 survive both saturating packs */
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(k), _mm256_extracti128_si256(k, 1));
        const __m128i b8 = _mm_packus_epi16(w16, w16);
        /* whole vectors when the caller's next row overwrites the tail: a
         * spill of at most 7 must fall inside that row (OW >= 4) */
        if (n == 8 || (spill && OW >= 4)) {
            _mm256_storeu_ps(y + o, m);
            _mm_storel_epi64((__m128i *)(void *)(code + o), b8);
        } else {
            uint8_t bytes[16];
            _mm256_maskstore_ps(y + o, first8(n), m);
            _mm_storeu_si128((__m128i *)(void *)bytes, b8);
            memcpy(code + o, bytes, (size_t)n);
        }
    }
}

QAT_AVX2 void qat__maxpool2_row_bw_store_avx2(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW,
                                             bool spill) {
    (void)spill; /* masked stores for every partial step: rows are short here, one step or two */
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t o = 0; o < OW; o += 8) {
        const int64_t n = OW - o < 8 ? OW - o : 8;
        const __m256i mo = first8(n), mlo = first8(2 * n), mhi = first8(2 * n - 8);
        uint8_t bytes[8] = {0};
        memcpy(bytes, code + o, (size_t)n);
        const __m256i k = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)bytes));
        const __m256 g = _mm256_maskload_ps(gy + o, mo);
        __m256 e[4];
        for (int j = 0; j < 4; j++)
            e[j] = _mm256_blendv_ps(zero, g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(j))));
        /* interleave: (e0, e1) lane by lane gives the first row's pairs,
         * (e2, e3) the second's; unpack works within 128-bit halves */
        const __m256 l01 = _mm256_unpacklo_ps(e[0], e[1]), h01 = _mm256_unpackhi_ps(e[0], e[1]);
        const __m256 l23 = _mm256_unpacklo_ps(e[2], e[3]), h23 = _mm256_unpackhi_ps(e[2], e[3]);
        const __m256 a = _mm256_permute2f128_ps(l01, h01, 0x20), b = _mm256_permute2f128_ps(l01, h01, 0x31);
        const __m256 c = _mm256_permute2f128_ps(l23, h23, 0x20), dd = _mm256_permute2f128_ps(l23, h23, 0x31);
        float *p0 = g0 + 2 * o, *p1 = g0 + W + 2 * o;
        if (n == 8) {
            _mm256_storeu_ps(p0, a), _mm256_storeu_ps(p0 + 8, b);
            _mm256_storeu_ps(p1, c), _mm256_storeu_ps(p1 + 8, dd);
        } else {
            _mm256_maskstore_ps(p0, mlo, a), _mm256_maskstore_ps(p0 + 8, mhi, b);
            _mm256_maskstore_ps(p1, mlo, c), _mm256_maskstore_ps(p1 + 8, mhi, dd);
        }
    }
}
#endif
