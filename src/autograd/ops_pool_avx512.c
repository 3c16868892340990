/* 2x2 / stride-2 max pooling rows with AVX-512, picked at run time by
 * ops_pool.c. LeNet's output rows are 14 and 5 wide: too short for the
 * compiler's vector loops, and the scalar loop's data-dependent branches
 * mispredict on quantized activations full of ties. Here one step does up
 * to 16 outputs, the row ends are masked loads and stores (a masked lane
 * never touches memory), and the comparisons are the portable loop's, in
 * its order, ordered-greater (false on NaN): the same values and codes. */
#include "internal.h"

#if QAT__POOL_AVX512
#include <immintrin.h>

#define QAT_AVX512 __attribute__((target("avx512f")))

#define QAT_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The hand-written AVX-512 rows run at the avx512 level and above, when
 * the CPU has it and QAT_MAX_ISA allows it (qat/core.h). */
bool qat__have_avx512f(void) { return qat_isa_allowed(QAT_ISA_AVX512); }
bool qat__have_avx512bw(void) { return qat__have_avx512f(); /* the avx512 level includes BW and VL */ }

/* Masks for a step of n outputs (1..16): 2n inputs in two halves. */
QAT_AVX512 __attribute__((always_inline)) static inline void step_masks(int64_t n, __mmask16 *out, __mmask16 *lo, __mmask16 *hi) {
    *out = (__mmask16)((1u << n) - 1);
    *lo = (__mmask16)(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1);
    *hi = (__mmask16)(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
}

QAT_AVX512 void qat__maxpool2_row_avx512(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW,
                                         bool spill) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t o = 0; o < OW; o += 16) {
        __mmask16 mo, mlo, mhi;
        step_masks(OW - o < 16 ? OW - o : 16, &mo, &mlo, &mhi);
        const float *p0 = r0 + 2 * o, *p1 = r1 + 2 * o;
        __m512 t0 = _mm512_maskz_loadu_ps(mlo, p0), t1 = _mm512_maskz_loadu_ps(mhi, p0 + 16);
        __m512 u0 = _mm512_maskz_loadu_ps(mlo, p1), u1 = _mm512_maskz_loadu_ps(mhi, p1 + 16);
        __m512 m = _mm512_permutex2var_ps(t0, even, t1), v;
        __m512i k = _mm512_setzero_si512();
        __mmask16 g;
        v = _mm512_permutex2var_ps(t0, odd, t1);
        g = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ), m = _mm512_mask_mov_ps(m, g, v);
        k = _mm512_mask_mov_epi32(k, g, _mm512_set1_epi32(1));
        v = _mm512_permutex2var_ps(u0, even, u1);
        g = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ), m = _mm512_mask_mov_ps(m, g, v);
        k = _mm512_mask_mov_epi32(k, g, _mm512_set1_epi32(2));
        v = _mm512_permutex2var_ps(u0, odd, u1);
        g = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ), m = _mm512_mask_mov_ps(m, g, v);
        k = _mm512_mask_mov_epi32(k, g, _mm512_set1_epi32(3));
        /* whole vectors when the caller's next row overwrites the tail: it
         * must fall inside that row (OW >= 8), never beyond */
        if (spill && OW >= 8) {
            _mm512_storeu_ps(y + o, m);
            _mm_storeu_si128((__m128i *)(void *)(code + o), _mm512_cvtepi32_epi8(k));
        } else {
            _mm512_mask_storeu_ps(y + o, mo, m);
            _mm512_mask_cvtepi32_storeu_epi8(code + o, mo, k);
        }
    }
}

QAT_AVX512BW void qat__maxpool2_row_bw_store_avx512(float *g0, int64_t W, const float *gy, const uint8_t *code,
                                                  int64_t OW, bool spill) {
    /* interleave two vectors of 16: lanes 0..7 of each, then 8..15 */
    const __m512i il_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i il_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t o = 0; o < OW; o += 16) {
        int64_t n = OW - o < 16 ? OW - o : 16;
        __mmask16 mo, mlo, mhi;
        step_masks(n, &mo, &mlo, &mhi);
        __m512i k = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mo, code + o));
        /* + 0 as the portable store adds into zeros (a -0 gradient ends +0) */
        __m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(mo, gy + o), zero), e[4];
        for (int j = 0; j < 4; j++)
            e[j] = _mm512_mask_mov_ps(zero, _mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(j)), g);
        float *p0 = g0 + 2 * o, *p1 = g0 + W + 2 * o;
        /* Rows of one step 16 to 32 floats wide (8 <= OW <= 16: LeNet's
         * first pooling): whole vectors where the tail is written again
         * later and lies inside what writes it — the first row's tail in
         * the second row (stored after it here), the second row's in the
         * caller's next row pair (spill). A vector wholly past the row
         * (no tail) is not stored. Other rows: masked stores (a shorter
         * row's tail would reach past the next row; a longer row's last
         * step would write over the second row's start, stored in an
         * earlier step). */
        __m512 a = _mm512_permutex2var_ps(e[0], il_lo, e[1]), b = _mm512_permutex2var_ps(e[0], il_hi, e[1]);
        __m512 c = _mm512_permutex2var_ps(e[2], il_lo, e[3]), dd = _mm512_permutex2var_ps(e[2], il_hi, e[3]);
        bool tail = 2 * n > 16;
        if (OW >= 8 && OW <= 16) {
            _mm512_storeu_ps(p0, a);
            if (tail) _mm512_storeu_ps(p0 + 16, b);
            if (spill) {
                _mm512_storeu_ps(p1, c);
                if (tail) _mm512_storeu_ps(p1 + 16, dd);
            } else {
                _mm512_mask_storeu_ps(p1, mlo, c);
                if (tail) _mm512_mask_storeu_ps(p1 + 16, mhi, dd);
            }
        } else {
            _mm512_mask_storeu_ps(p0, mlo, a);
            _mm512_mask_storeu_ps(p0 + 16, mhi, b);
            _mm512_mask_storeu_ps(p1, mlo, c);
            _mm512_mask_storeu_ps(p1 + 16, mhi, dd);
        }
    }
}
#endif
