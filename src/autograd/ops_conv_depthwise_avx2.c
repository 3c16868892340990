/* The depthwise convolution's row copies with AVX2, where the AVX-512 ones
 * (ops_conv_depthwise_avx512.c) do not run: each 8 floats of a row take
 * one masked load and one masked store (VMASKMOVPS: a masked lane touches
 * no memory), the masks of rows up to 16 wide hoisted, and the rows of a
 * plane DW_AHEAD planes on prefetched. The copies, and the one add per
 * element, are the portable code's: the same bits. */
#include "internal.h"

#if QAT__CONV_AVX2
#include <immintrin.h>

#define QAT_AVX2 __attribute__((target("avx2")))

/* How many planes ahead to prefetch (the AVX-512 rows' distance). */
#define DW_AHEAD 16

/* The first n of 8 lanes (n clipped to [0, 8]) as an all-ones mask. */
QAT_AVX2 static inline __m256i first8(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

QAT_AVX2 static void rows_avx2(const qat__rows *g, float *dst, const float *src, bool add) {
    /* the sizes in locals: the masked stores may alias anything */
    const int64_t planes = g->planes, rows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, width = g->width;
    const __m256i m0 = first8(width), m1 = first8(width - 8);
    for (int64_t p = 0; p < planes; p++) {
        float *d = dst + p * dplane;
        const float *s = src + p * splane;
        /* planes far apart (a channel's planes, sample after sample) defeat
         * the hardware prefetcher: ask for a later plane's rows */
        if (p + DW_AHEAD < planes)
            for (int64_t r = 0; r < rows; r++) {
                _mm_prefetch((const char *)(s + DW_AHEAD * splane + r * spitch), _MM_HINT_T0);
                _mm_prefetch((const char *)(d + DW_AHEAD * dplane + r * dpitch), _MM_HINT_T0);
            }
        for (int64_t r = 0; r < rows; r++) {
            float *dr = d + r * dpitch;
            const float *sr = s + r * spitch;
            if (width <= 16) { /* the depthwise planes' rows (7 to 14): one or two steps, masks hoisted */
                __m256 v = _mm256_maskload_ps(sr, m0);
                if (add) v = _mm256_add_ps(v, _mm256_maskload_ps(dr, m0));
                _mm256_maskstore_ps(dr, m0, v);
                if (width > 8) {
                    v = _mm256_maskload_ps(sr + 8, m1);
                    if (add) v = _mm256_add_ps(v, _mm256_maskload_ps(dr + 8, m1));
                    _mm256_maskstore_ps(dr + 8, m1, v);
                }
                continue;
            }
            for (int64_t c = 0; c < width; c += 8) {
                const __m256i m = first8(width - c);
                __m256 v = _mm256_maskload_ps(sr + c, m);
                if (add) v = _mm256_add_ps(v, _mm256_maskload_ps(dr + c, m));
                _mm256_maskstore_ps(dr + c, m, v);
            }
        }
    }
}

QAT_AVX2 void qat__rows_copy_avx2(const qat__rows *g, float *dst, const float *src) { rows_avx2(g, dst, src, false); }

QAT_AVX2 void qat__rows_add_avx2(const qat__rows *g, float *dst, const float *src) { rows_avx2(g, dst, src, true); }
#endif
