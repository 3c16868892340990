/* im2col and col2im with AVX2, for CPUs without AVX-512 (and QAT_MAX_ISA=avx2):
 * the AVX-512 rows' method (ops_conv_avx512.c) on 8-float chunks, picked at
 * run time by ops_conv.c where the AVX-512 rows are not. AVX2 has masked
 * loads and stores (VMASKMOVPS: a masked lane never touches memory) but no
 * mask registers: a mask is a vector of all-ones lanes, and a masked add is
 * an add followed by a blend that keeps the lanes the mask leaves out (an
 * add of 0 would turn a -0 gradient into +0). The additions reach each
 * element in the portable loop's order, so the bits are the portable ones. */
#include "internal.h"

#if QAT__CONV_AVX2
#include <immintrin.h>
#include <string.h>

#define QAT_AVX2 __attribute__((target("avx2")))
#define MAX_CHUNKS 16 /* rows of up to 128 outputs */

bool qat__conv_avx2_fits(const qat__conv_dims *d) {
    return ((d->sw == 1 && d->sh == 1) || d->sw == 2) && d->OW <= 8 * MAX_CHUNKS && qat_isa_allowed(QAT_ISA_AVX2);
}

/* Lanes [lo, hi) of 8 (clipped to [0, 8)) as an all-ones mask. */
QAT_AVX2 static inline __m256i lanes8(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), iota),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), iota));
}

QAT_AVX2 static inline bool any8(__m256i m) { return !_mm256_testz_si256(m, m); }

/* Lanes 0..3 of the result: the even lanes of a; 4..7: the even lanes of b. */
QAT_AVX2 static inline __m256 even_lanes(__m256 a, __m256 b) {
    const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(a, pick), _mm256_permutevar8x32_ps(b, pick), 0xF0);
}

QAT_AVX2 void qat__im2col_avx2(const qat__conv_dims *d, const float *xn, float *col) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh, sw = d->sw, nch = (OW + 7) / 8;
    const __m256 zero = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi32(-1);
    float *row = col;
    /* chunks are stored whole (zeros past OW) in address order: a row's
     * last store spills into the next row, which writes it again; only the
     * sample's last chunk is a masked store */
    const float *end = col + C * KH * KW * OH * OW;
    __m256i all[MAX_CHUNKS], m0[MAX_CHUNKS], m1[MAX_CHUNKS];
    for (int64_t j = 0; j < nch; j++) all[j] = lanes8(0, OW - 8 * j);
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                const int64_t shift = kw - pw; /* output column ow reads input column sw·ow + shift */
                for (int64_t j = 0; j < nch; j++) {
                    const int64_t base = sw * 8 * j + shift; /* the input column of the chunk's lane 0 */
                    m0[j] = _mm256_and_si256(lanes8(-base, W - base), sw == 1 ? all[j] : ones);
                    m1[j] = lanes8(-base - 8, W - base - 8);
                }
                for (int64_t oh = 0; oh < OH; oh++) {
                    const int64_t ih = oh * sh - ph + kh;
                    const bool in = ih >= 0 && ih < H;
                    const float *src = xn + (c * H + ih) * W + shift; /* only read when in */
                    float *at = row + oh * OW;
                    for (int64_t j = 0; j < nch; j++, at += 8) {
                        __m256 v = zero;
                        if (in && sw == 1) {
                            v = _mm256_maskload_ps(src + 8 * j, m0[j]);
                        } else if (in) { /* every other input lane, from two vectors */
                            __m256 v0 = _mm256_maskload_ps(src + 16 * j, m0[j]);
                            __m256 v1 = _mm256_maskload_ps(src + 16 * j + 8, m1[j]);
                            v = _mm256_and_ps(even_lanes(v0, v1), _mm256_castsi256_ps(all[j]));
                        }
                        if (at + 8 <= end) _mm256_storeu_ps(at, v);
                        else _mm256_maskstore_ps(at, all[j], v);
                    }
                }
            }
}

/* Channels summed side by side: each chunk's sum is a serial chain of
 * KH·KW dependent adds, so several channels' chains interleave. */
#define COL2IM_LANES 4

/* Stride 2 across (any stride down): the portable order (c, kh, kw, oh),
 * each chunk of 8 outputs spread to the even lanes of two vectors and added
 * into its input row with masked loads and stores. */
QAT_AVX2 static void col2im_add_strided(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh;
    const __m256i lo_half = _mm256_setr_epi32(0, 0, 1, 0, 2, 0, 3, 0), hi_half = _mm256_setr_epi32(4, 0, 5, 0, 6, 0, 7, 0);
    const __m256i even = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
    if (overwrite) memset(gxn, 0, (size_t)(C * H * W) * sizeof(float)); /* adding into +0, as the portable path */
    const float *row = col;
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                const int64_t shift = kw - pw;
                for (int64_t oh = 0; oh < OH; oh++) {
                    const int64_t ih = oh * sh - ph + kh;
                    if (ih < 0 || ih >= H) continue;
                    float *g = gxn + (c * H + ih) * W;
                    for (int64_t b = 0; b < OW; b += 8) {
                        const int64_t base = 2 * b + shift, n2 = 2 * (OW - b); /* input lanes [0, n2) from base */
                        const __m256 r = _mm256_maskload_ps(row + oh * OW + b, lanes8(0, OW - b));
                        const __m256i m0 = _mm256_and_si256(even, _mm256_and_si256(lanes8(-base, W - base), lanes8(0, n2)));
                        const __m256i m1 = _mm256_and_si256(
                            even, _mm256_and_si256(lanes8(-base - 8, W - base - 8), lanes8(-8, n2 - 8)));
                        if (any8(m0)) {
                            __m256 a = _mm256_maskload_ps(g + base, m0);
                            _mm256_maskstore_ps(g + base, m0, _mm256_add_ps(a, _mm256_permutevar8x32_ps(r, lo_half)));
                        }
                        if (any8(m1)) {
                            __m256 a = _mm256_maskload_ps(g + base + 8, m1);
                            _mm256_maskstore_ps(g + base + 8, m1, _mm256_add_ps(a, _mm256_permutevar8x32_ps(r, hi_half)));
                        }
                    }
                }
            }
}

QAT_AVX2 void qat__col2im_add_avx2(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    if (d->sw == 2) {
        col2im_add_strided(d, col, gxn, overwrite);
        return;
    }
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t OHW = OH * OW, CS = KH * KW * OHW; /* col's stride from one channel to the next */
    for (int64_t c0 = 0; c0 < C; c0 += COL2IM_LANES) {
        const int64_t nc = C - c0 < COL2IM_LANES ? C - c0 : COL2IM_LANES;
        for (int64_t ih = 0; ih < H; ih++)
            for (int64_t b = 0; b < W; b += 8) {
                const __m256i row_lanes = lanes8(0, W - b);
                __m256 acc[COL2IM_LANES];
                for (int j = 0; j < COL2IM_LANES; j++)
                    acc[j] = j < nc && !overwrite ? _mm256_maskload_ps(gxn + ((c0 + j) * H + ih) * W + b, row_lanes)
                                                  : _mm256_setzero_ps();
                for (int64_t kh = 0; kh < KH; kh++) {
                    const int64_t oh = ih + ph - kh;
                    if (oh < 0 || oh >= OH) continue;
                    for (int64_t kw = 0; kw < KW; kw++) {
                        const int64_t shift = kw - pw; /* input column iw takes output column iw - shift */
                        const __m256i m = _mm256_and_si256(lanes8(shift - b, shift + OW - b), row_lanes);
                        const __m256 mf = _mm256_castsi256_ps(m);
                        const float *r = col + c0 * CS + (kh * KW + kw) * OHW + oh * OW - shift + b;
                        for (int j = 0; j < COL2IM_LANES; j++)
                            if (j < nc)
                                acc[j] = _mm256_blendv_ps(acc[j], _mm256_add_ps(acc[j], _mm256_maskload_ps(r + j * CS, m)), mf);
                    }
                }
                for (int j = 0; j < COL2IM_LANES; j++)
                    if (j < nc) _mm256_maskstore_ps(gxn + ((c0 + j) * H + ih) * W + b, row_lanes, acc[j]);
            }
    }
}
#endif
