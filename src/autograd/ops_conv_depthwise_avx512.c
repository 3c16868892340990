/* The depthwise convolution's row copies with AVX-512, picked at run time
 * by ops_conv_depthwise.c. Its rows are 7 to 28 floats; the compiler's
 * vector loops leave a row shorter than a vector to scalar code, which ran
 * 5x slower than this (45-61 ns against 9-12 ns for the 7 rows of a 7x7
 * plane). Here each 16 floats of a row take one masked load and one
 * masked store (masked lanes touch no memory), and the rows of a plane
 * QAT__ROWS_AHEAD planes on are prefetched. Copies, and the one add per
 * element, are the portable code's: the same bits. */
#include "internal.h"

#if QAT__CONV_AVX512
#include <immintrin.h>
#include <stdbool.h>

#define QAT_AVX512 __attribute__((target("avx512f")))

/* The first n of 16 lanes (n >= 16: all). */
static inline __mmask16 first(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* Short rows, k to a vector (k = 16 / max pitch >= 2: a 7x7 plane's rows
 * at pitches 7 and 8): lane j of a destination group takes source lane
 * (j / dpitch)·spitch + j % dpitch when j % dpitch < width; the other
 * destination lanes (the gaps between rows) are not written. Groups of
 * fewer rows at a plane's end mask the rest. add: the destination's value
 * plus the source's. */
typedef struct {
    int64_t k;          /* rows per vector */
    __m512i idx;        /* source lane of each destination lane */
    __mmask16 out[17];  /* destination lanes written, for 0..k rows */
    __mmask16 in[17];   /* source lanes read, for 0..k rows */
} row_groups;

QAT_AVX512 static bool groups_of(const qat__rows *g, row_groups *rg) {
    int64_t pitch = g->dpitch > g->spitch ? g->dpitch : g->spitch;
    rg->k = pitch > 0 ? 16 / pitch : 0;
    if (rg->k < 2 || g->width > g->dpitch || g->width > g->spitch) return false;
    int32_t idx[16] = {0};
    for (int j = 0; j < 16; j++) idx[j] = (int32_t)((j / g->dpitch) * g->spitch + j % g->dpitch) & 15;
    rg->idx = _mm512_loadu_si512(idx);
    for (int64_t n = 0; n <= rg->k; n++) {
        unsigned o = 0, i = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t q = 0; q < g->width; q++) o |= 1u << (r * g->dpitch + q), i |= 1u << (r * g->spitch + q);
        rg->out[n] = (__mmask16)o;
        rg->in[n] = (__mmask16)i;
    }
    return true;
}

QAT_AVX512 static void copy_groups(const qat__rows *g, const row_groups *rg, float *dst, const float *src, bool add) {
    const int64_t planes = g->planes, rows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, k = rg->k;
    for (int64_t p = 0; p < planes; p++) {
        float *d = dst + p * dplane;
        const float *s = src + p * splane;
        qat__rows_prefetch(g, dst, src, p, k);
        for (int64_t r = 0; r < rows; r += k) {
            int64_t n = rows - r < k ? rows - r : k;
            __mmask16 in = rg->in[n], out = rg->out[n];
            __m512 v = _mm512_maskz_permutexvar_ps(out, rg->idx, _mm512_maskz_loadu_ps(in, s + r * spitch));
            if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(out, d + r * dpitch));
            _mm512_mask_storeu_ps(d + r * dpitch, out, v);
        }
    }
}

QAT_AVX512 void qat__rows_copy_avx512(const qat__rows *g, float *dst, const float *src) {
    row_groups rg;
    if (groups_of(g, &rg)) {
        copy_groups(g, &rg, dst, src, false);
        return;
    }
    /* the sizes in locals: the masked stores may alias anything, so the
     * compiler would reload every field after each one */
    const int64_t planes = g->planes, rows = g->rows, dplane = g->dplane, dpitch = g->dpitch, splane = g->splane,
                  spitch = g->spitch, width = g->width;
    if (width <= 16) { /* one masked load and store per row, the mask hoisted */
        const __mmask16 m = first(width);
        for (int64_t p = 0; p < planes; p++) {
            float *d = dst + p * dplane;
            const float *s = src + p * splane;
            qat__rows_prefetch(g, dst, src, p, 1);
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
    row_groups rg;
    if (groups_of(g, &rg)) {
        copy_groups(g, &rg, dst, src, true);
        return;
    }
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
