/* The depthwise convolution's row copies with AVX-512, picked at run time
 * by ops_conv_depthwise.c. Its rows are 7 to 28 floats; the compiler's
 * vector loops leave a row shorter than a vector to scalar code, which ran
 * 5x slower than this (45-61 ns against 9-12 ns for the 7 rows of a 7x7
 * plane). Here each 16 floats of a row take one masked load and one
 * masked store (masked lanes touch no memory), and the rows of a plane
 * DW_AHEAD planes on are prefetched. Copies, and the one add per
 * element, are the portable code's: the same bits. */
#include "internal.h"

#if QAT__CONV_AVX512
#include <immintrin.h>

#define QAT_AVX512 __attribute__((target("avx512f")))

/* How many planes ahead to prefetch. */
#define DW_AHEAD 16

/* The first n of 16 lanes (n >= 16: all). */
static inline __mmask16 first(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

QAT_AVX512 void qat__rows_copy_avx512(const qat__rows *g, float *dst, const float *src) {
    /* the sizes in locals: the masked stores may alias anything, so the
     * compiler would reload every field after each one */
    const int64_t planes = g->planes, rows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, width = g->width;
    if (width <= 16) { /* one masked load and store per row, the mask hoisted */
        const __mmask16 m = first(width);
        for (int64_t p = 0; p < planes; p++) {
            float *d = dst + p * dplane;
            const float *s = src + p * splane;
            /* planes far apart (a channel's planes, sample after sample)
             * defeat the hardware prefetcher: ask for a later plane's rows */
            if (p + DW_AHEAD < planes)
                for (int64_t r = 0; r < rows; r++) {
                    _mm_prefetch((const char *)(s + DW_AHEAD * splane + r * spitch), _MM_HINT_T0);
                    _mm_prefetch((const char *)(d + DW_AHEAD * dplane + r * dpitch), _MM_HINT_T0);
                }
            for (int64_t r = 0; r < rows; r++)
                _mm512_mask_storeu_ps(d + r * dpitch, m, _mm512_maskz_loadu_ps(m, s + r * spitch));
        }
        return;
    }
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r = 0; r < rows; r++) {
            float *d = dst + p * dplane + r * dpitch;
            const float *s = src + p * splane + r * spitch;
            for (int64_t c = 0; c < width; c += 16) {
                __mmask16 m = first(width - c);
                _mm512_mask_storeu_ps(d + c, m, _mm512_maskz_loadu_ps(m, s + c));
            }
        }
}

QAT_AVX512 void qat__rows_add_avx512(const qat__rows *g, float *dst, const float *src) {
    const int64_t planes = g->planes, rows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, width = g->width;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r = 0; r < rows; r++) {
            float *d = dst + p * dplane + r * dpitch;
            const float *s = src + p * splane + r * spitch;
            for (int64_t c = 0; c < width; c += 16) {
                __mmask16 m = first(width - c);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + c), _mm512_maskz_loadu_ps(m, s + c));
                _mm512_mask_storeu_ps(d + c, m, v);
            }
        }
}
#endif
