/* 2x2 / stride-2 max pooling rows with AVX2, for CPUs without AVX-512,
 * picked at run time by ops_pool.c below the AVX-512 rows: eight outputs
 * a step, the comparisons the portable loop's, in its order,
 * ordered-greater (false on NaN), so the same values and codes. A row's
 * last few outputs (fewer than eight) take the portable loop: AVX2's
 * masked stores cost more than it on AMD's cores, and the stores here
 * stay inside the row, whatever the caller's spill allows. */
#include "internal.h"

#if QAT__POOL_AVX2
#include <immintrin.h>
#include <string.h>

#define QAT_AVX2 __attribute__((target("avx2")))

/* The even and the odd lanes of 16 floats in two vectors, each in order. */
QAT_AVX2 static inline void deinterleave(__m256 a, __m256 b, __m256 *even, __m256 *odd) {
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}

QAT_AVX2 void qat__maxpool2_row_avx2(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW,
                                     bool spill) {
    /* byte 0 of each 32-bit lane, per 128-bit half */
    const __m256i bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                           -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    int64_t o = 0;
    for (; o + 8 <= OW; o += 8) {
        __m256 m, v1, v2, v3;
        deinterleave(_mm256_loadu_ps(r0 + 2 * o), _mm256_loadu_ps(r0 + 2 * o + 8), &m, &v1);
        deinterleave(_mm256_loadu_ps(r1 + 2 * o), _mm256_loadu_ps(r1 + 2 * o + 8), &v2, &v3);
        __m256i k = _mm256_setzero_si256();
        __m256 g = _mm256_cmp_ps(v1, m, _CMP_GT_OQ);
        m = _mm256_blendv_ps(m, v1, g), k = _mm256_blendv_epi8(k, _mm256_set1_epi32(1), _mm256_castps_si256(g));
        g = _mm256_cmp_ps(v2, m, _CMP_GT_OQ);
        m = _mm256_blendv_ps(m, v2, g), k = _mm256_blendv_epi8(k, _mm256_set1_epi32(2), _mm256_castps_si256(g));
        g = _mm256_cmp_ps(v3, m, _CMP_GT_OQ);
        m = _mm256_blendv_ps(m, v3, g), k = _mm256_blendv_epi8(k, _mm256_set1_epi32(3), _mm256_castps_si256(g));
        _mm256_storeu_ps(y + o, m);
        __m256i kb = _mm256_shuffle_epi8(k, bytes);
        __m128i k8 = _mm_unpacklo_epi32(_mm256_castsi256_si128(kb), _mm256_extracti128_si256(kb, 1));
        _mm_storel_epi64((__m128i *)(void *)(code + o), k8);
    }
    if (o < OW) qat__maxpool2_row(r0 + 2 * o, r1 + 2 * o, y + o, code + o, OW - o, spill);
}

QAT_AVX2 void qat__maxpool2_row_bw_store_avx2(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW,
                                              bool spill) {
    float *g1 = g0 + W;
    int64_t o = 0;
    for (; o + 8 <= OW; o += 8) {
        __m256i k = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(code + o)));
        /* + 0 as the portable store adds into zeros (a -0 gradient ends +0) */
        __m256 g = _mm256_add_ps(_mm256_loadu_ps(gy + o), _mm256_setzero_ps()), e[4];
        for (int j = 0; j < 4; j++) /* the gradient where the window's maximum is element j, +0 elsewhere */
            e[j] = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(j))));
        /* interleaved: row 0 takes elements 0 and 1 of each window, row 1 elements 2 and 3 */
        __m256 a = _mm256_unpacklo_ps(e[0], e[1]), b = _mm256_unpackhi_ps(e[0], e[1]);
        __m256 c = _mm256_unpacklo_ps(e[2], e[3]), d = _mm256_unpackhi_ps(e[2], e[3]);
        _mm256_storeu_ps(g0 + 2 * o, _mm256_permute2f128_ps(a, b, 0x20));
        _mm256_storeu_ps(g0 + 2 * o + 8, _mm256_permute2f128_ps(a, b, 0x31));
        _mm256_storeu_ps(g1 + 2 * o, _mm256_permute2f128_ps(c, d, 0x20));
        _mm256_storeu_ps(g1 + 2 * o + 8, _mm256_permute2f128_ps(c, d, 0x31));
    }
    /* the rest of both rows: zeros, then each gradient placed, as the
     * portable store */
    memset(g0 + 2 * o, 0, (size_t)(W - 2 * o) * sizeof(float));
    memset(g1 + 2 * o, 0, (size_t)(W - 2 * o) * sizeof(float));
    (void)spill;
    for (; o < OW; o++) g0[(code[o] >> 1) * W + 2 * o + (code[o] & 1)] += gy[o];
}
#endif
