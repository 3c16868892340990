/* The depthwise convolution's row copies with AVX2, for CPUs without
 * AVX-512, picked at run time by ops_conv_depthwise.c. Its rows are 4 to
 * 28 floats; the portable loops leave each row's last floats, and a row
 * shorter than a vector, to scalar code. Here a row goes 8 floats at a
 * time. Its last 1-7 floats take a masked load (vmaskmovps reads nothing
 * in the lanes off and never faults there) and a whole store that writes
 * back, in the lanes past the row, what the destination held: those lanes
 * are the row's gap or the next row of the same plane, which this call
 * alone writes, later. Masked stores, slow on AMD's cores, are left for a
 * plane's last row, which another channel's plane (another thread's) may
 * follow, and for rows shorter than 8 floats, where the next row's own
 * write-back would load what this store had just written (a store that
 * cannot forward: the whole stores lost 4-6 % of a MobileNet step that way
 * on a Zen 5). Copies, and the one add per element, are the portable code's:
 * the same bits (a lane past the row keeps its float, -0 included). */
#include "internal.h"

#if QAT__CONV_AVX2
#include <immintrin.h>

#define QAT_AVX2 __attribute__((target("avx2")))

/* The first n of 8 lanes on (0 <= n <= 8). */
QAT_AVX2 static inline __m256i first(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One row: width floats from s to d, copied or added. tail: first(width % 8); last: the plane's
 * last row. */
QAT_AVX2 static inline void row(float *d, const float *s, int64_t width, __m256i tail, bool add, bool last) {
    int64_t q = 0;
    for (; q + 8 <= width; q += 8) {
        __m256 v = _mm256_loadu_ps(s + q);
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(d + q), v);
        _mm256_storeu_ps(d + q, v);
    }
    if (q == width) return;
    __m256 v = _mm256_maskload_ps(s + q, tail);
    if (last || width < 8) {
        if (add) v = _mm256_add_ps(_mm256_maskload_ps(d + q, tail), v);
        _mm256_maskstore_ps(d + q, tail, v);
        return;
    }
    __m256 old = _mm256_loadu_ps(d + q); /* within the plane: the next row starts within 8 floats of here */
    if (add) v = _mm256_add_ps(old, v);
    _mm256_storeu_ps(d + q, _mm256_blendv_ps(old, v, _mm256_castsi256_ps(tail)));
}

/* The sizes in locals: the stores may alias anything, so the compiler would
 * reload every field after each one. */
QAT_AVX2 static void rows(const qat__rows *g, float *dst, const float *src, bool add) {
    const int64_t planes = g->planes, nrows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, width = g->width;
    const __m256i tail = first(width % 8);
    for (int64_t p = 0; p < planes; p++) {
        float *d = dst + p * dplane;
        const float *s = src + p * splane;
        qat__rows_prefetch(g, dst, src, p, 1);
        for (int64_t r = 0; r < nrows; r++) row(d + r * dpitch, s + r * spitch, width, tail, add, r == nrows - 1);
    }
}

QAT_AVX2 void qat__rows_copy_avx2(const qat__rows *g, float *dst, const float *src) { rows(g, dst, src, false); }
QAT_AVX2 void qat__rows_add_avx2(const qat__rows *g, float *dst, const float *src) { rows(g, dst, src, true); }
#endif
