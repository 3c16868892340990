/* The depthwise convolution's row copies with AVX-512, picked at run time
 * by ops_conv_depthwise.c. Its rows are 7 to 28 floats; the compiler's
 * vector loops leave a row shorter than a vector to scalar code, which ran
 * 5x slower than this (45-61 ns against 9-12 ns for the 7 rows of a 7x7
 * plane). Here a row takes one masked load and one masked store per 16
 * floats (masked lanes touch no memory); the leading zeros of a placed row
 * come from a lane shift (an expanding load past the first 16), so no
 * pointer before src is formed. Copies and the one add per element are
 * the portable code's: the same bits. */
#include "internal.h"

#if QAT__CONV_AVX512
#include <immintrin.h>

#define QAT_AVX512 __attribute__((target("avx512f")))

/* Lanes [lo, hi) of 16, clipped to [0, 16). */
static inline __mmask16 lanes(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* Destination rows of at most 16 floats: the masks and the lane shift are
 * the same for every row. Lane q of the loaded row moves to lane q + at. */
QAT_AVX512 static void place_narrow(const qat__rows *g, float *dst, const float *src) {
    const __mmask16 in = lanes(0, g->width), out = lanes(0, g->dwidth), moved = lanes(g->at, g->at + g->width);
    const __m512i shift = _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)g->at));
    for (int64_t p = 0; p < g->planes; p++) {
        float *d = dst + p * g->dplane;
        const float *s = src + p * g->splane;
        if (g->at == 0)
            for (int64_t r = 0; r < g->rows; r++)
                _mm512_mask_storeu_ps(d + r * g->dpitch, out, _mm512_maskz_loadu_ps(in, s + r * g->spitch));
        else
            for (int64_t r = 0; r < g->rows; r++)
                _mm512_mask_storeu_ps(d + r * g->dpitch, out,
                                      _mm512_maskz_permutexvar_ps(moved, shift, _mm512_maskz_loadu_ps(in, s + r * g->spitch)));
    }
}

/* Any width: 16 destination columns at a time. */
QAT_AVX512 static void place_wide(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *d = dst + p * g->dplane + r * g->dpitch;
            const float *s = src + p * g->splane + r * g->spitch;
            for (int64_t c = 0; c < g->dwidth; c += 16) {
                /* destination lanes c + [0, 16) take source elements lane + c - at */
                __mmask16 m = lanes(g->at - c, g->at + g->width - c), out = lanes(0, g->dwidth - c);
                __m512 v = c < g->at ? _mm512_maskz_expandloadu_ps(m, s) : _mm512_maskz_loadu_ps(m, s + (c - g->at));
                _mm512_mask_storeu_ps(d + c, out, v);
            }
        }
}

QAT_AVX512 void qat__rows_place_avx512(const qat__rows *g, float *dst, const float *src) {
    if (g->dwidth <= 16 && g->at < 16) place_narrow(g, dst, src);
    else place_wide(g, dst, src);
}

QAT_AVX512 void qat__rows_add_avx512(const qat__rows *g, float *dst, const float *src) {
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t r = 0; r < g->rows; r++) {
            float *d = dst + p * g->dplane + r * g->dpitch + g->at;
            const float *s = src + p * g->splane + r * g->spitch;
            for (int64_t c = 0; c < g->width; c += 16) {
                __mmask16 m = lanes(0, g->width - c);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + c), _mm512_maskz_loadu_ps(m, s + c));
                _mm512_mask_storeu_ps(d + c, m, v);
            }
        }
}
#endif
