/* im2col and col2im for one sample with AVX2, for CPUs without AVX-512:
 * the rows of ops_conv_avx512.c eight floats at a time, picked at run
 * time by ops_conv.c below them. The same shapes (stride 1, or 2 across
 * with any stride down; rows of up to 128 outputs) and every element's
 * additions in the portable loop's order, so the same bits.
 *
 * AVX2 has no mask registers: a lane mask is a vector whose lanes are all
 * ones or all zeros. A masked load (vmaskmovps) reads nothing in the
 * lanes off, never faults there, and gives 0. In col2im a tap's sum is
 * kept only on the lanes it reaches by a blend, so that an element it does
 * not reach gets nothing added, not +0 (which would turn -0 into +0). */
#include "internal.h"

#if QAT__CONV_AVX2
#include <immintrin.h>
#include <string.h>

#define QAT_AVX2 __attribute__((target("avx2")))
#define QAT__AVX2_MAX_CHUNKS 16 /* rows of up to 128 outputs */

_Static_assert(8 * QAT__AVX2_MAX_CHUNKS == 128, "the rows' masks cover qat__conv_rows_shape's widths");

bool qat__conv_avx2_fits(const qat__conv_dims *d) { return qat__conv_rows_shape(d) && qat_isa_allowed(QAT_ISA_AVX2); }

/* Lanes [lo, hi) of 8 on. */
QAT_AVX2 static inline __m256i lanes(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
}

QAT_AVX2 static inline bool any(__m256i m) { return !_mm256_testz_si256(m, m); }

/* The 8 floats at p on the lanes of m, 0 elsewhere. A masked load
 * (vmaskmovps) costs AMD's Zen cores several times a plain one, which
 * with the mask's AND gives the same lanes wherever all 8 floats lie in
 * [lo, hi), the sample's memory, and may be read. */
QAT_AVX2 static inline __m256 load_lanes(const float *p, __m256i m, bool whole, const float *lo, const float *hi) {
    if (whole) return _mm256_loadu_ps(p);
    if (p >= lo && p + 8 <= hi) return _mm256_and_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(m));
    return _mm256_maskload_ps(p, m);
}

/* v's lanes of m stored at p, the other floats left as they are: a
 * masked store (vmaskmovps) costs AMD's Zen cores far more than reading
 * the 8 floats, blending and writing them back, which is the same where
 * all 8 lie in [lo, hi) and no other thread writes there (one sample's
 * gradient: its task's alone). */
QAT_AVX2 static inline void store_lanes(float *p, __m256i m, bool whole, const float *lo, const float *hi, __m256 v) {
    if (whole) _mm256_storeu_ps(p, v);
    else if (p >= lo && p + 8 <= hi) _mm256_storeu_ps(p, _mm256_blendv_ps(_mm256_loadu_ps(p), v, _mm256_castsi256_ps(m)));
    else _mm256_maskstore_ps(p, m, v);
}

QAT_AVX2 void qat__im2col_avx2(const qat__conv_dims *d, const float *xn, float *col) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh, sw = d->sw, nch = (OW + 7) / 8;
    const __m256 zero = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi32(-1);
    float *row = col;
    /* Chunks are stored whole (8 lanes, zeros past OW) in increasing
     * address order, so a row's last store spills into the next row, which
     * writes those floats again; only the chunks within 8 floats of the
     * sample's end, whose spill would fall past its columns, are masked
     * stores. */
    /* Not a shape qat__conv_avx2_fits takes; or stride 1 with the output
     * as wide as the input, where the portable loop's one shifted memcpy
     * a column row beats these chunks (a 16-channel 28x28 sample's rows:
     * 10.6 against 17.9 us, 32 channels at 14x14: 10.2 against 14.9; AMD
     * EPYC family 23, 2026-11-28) */
    if (nch > QAT__AVX2_MAX_CHUNKS || (sh == 1 && sw == 1 && OW == W)) {
        qat__im2col(d, xn, col);
        return;
    }
    const float *end = col + C * KH * KW * OH * OW, *xend = xn + C * H * W;
    __m256i all[QAT__AVX2_MAX_CHUNKS], m0[QAT__AVX2_MAX_CHUNKS], m1[QAT__AVX2_MAX_CHUNKS];
    bool whole[QAT__AVX2_MAX_CHUNKS]; /* m0[j] all on (stride 1): a plain load */
    for (int64_t j = 0; j < nch; j++) all[j] = lanes(0, OW - 8 * j);
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                int64_t shift = kw - pw; /* output column ow reads input column sw·ow + shift */
                for (int64_t j = 0; j < nch; j++) {
                    int64_t base = sw * 8 * j + shift; /* the input column of the chunk's lane 0 */
                    m0[j] = _mm256_and_si256(lanes(-base, W - base), sw == 1 ? all[j] : ones);
                    m1[j] = lanes(-base - 8, W - base - 8);
                    whole[j] = sw == 1 && _mm256_movemask_ps(_mm256_castsi256_ps(m0[j])) == 0xFF;
                }
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * sh - ph + kh;
                    bool in = ih >= 0 && ih < H;
                    float *at = row + oh * OW;
                    for (int64_t j = 0; j < nch; j++, at += 8) {
                        __m256 v = zero;
                        if (in && sw == 1) {
                            v = load_lanes(xn + (c * H + ih) * W + shift + 8 * j, m0[j], whole[j], xn, xend);
                        } else if (in) { /* the even lanes of two vectors: output lane l is input lane 2l */
                            const float *src = xn + (c * H + ih) * W + shift + 16 * j;
                            __m256 v0 = load_lanes(src, m0[j], false, xn, xend), v1 = load_lanes(src + 8, m1[j], false, xn, xend);
                            __m256 e = _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)); /* 0 2 8 10 | 4 6 12 14 */
                            v = _mm256_and_ps(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)),
                                              _mm256_castsi256_ps(all[j]));
                        }
                        if (at + 8 <= end) _mm256_storeu_ps(at, v);
                        else _mm256_maskstore_ps(at, all[j], v);
                    }
                }
            }
}

/* Channels summed side by side: each chunk's sum is one serial chain of
 * KH·KW dependent adds, so several channels' chains interleave. */
#define QAT__COL2IM_LANES 4

/* Strided (sw 2, any sh): the portable loop's order, (c, kh, kw, oh),
 * each chunk of 8 outputs spread to the even lanes of two vectors and
 * added into its input row, whose odd lanes are stored back unchanged. */
QAT_AVX2 static void col2im_add_strided(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh;
    const __m256i lo_half = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i hi_half = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    if (overwrite) memset(gxn, 0, (size_t)(C * H * W) * sizeof(float)); /* adding into +0, as the portable path */
    const float *row = col;
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                int64_t shift = kw - pw;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * sh - ph + kh;
                    if (ih < 0 || ih >= H) continue;
                    float *g = gxn + (c * H + ih) * W;
                    for (int64_t b = 0; b < OW; b += 8) {
                        int64_t base = 2 * b + shift; /* the input column of the chunk's lane 0 */
                        if (base >= 0 && base + 16 <= W && b + 8 <= OW) {
                            /* the chunk's 16 input lanes all on the row: the odd ones are
                             * stored back as they were, the even ones with their add */
                            __m256 r = _mm256_loadu_ps(row + oh * OW + b);
                            __m256 a = _mm256_loadu_ps(g + base), e = _mm256_loadu_ps(g + base + 8);
                            a = _mm256_blend_ps(a, _mm256_add_ps(a, _mm256_permutevar8x32_ps(r, lo_half)), 0x55);
                            e = _mm256_blend_ps(e, _mm256_add_ps(e, _mm256_permutevar8x32_ps(r, hi_half)), 0x55);
                            _mm256_storeu_ps(g + base, a);
                            _mm256_storeu_ps(g + base + 8, e);
                            continue;
                        }
                        /* a chunk at the row's ends, element by element (AMD's masked
                         * stores cost more than the loop); each element still gets its
                         * additions in the same order */
                        const float *rr = row + oh * OW;
                        for (int64_t ow = b; ow < OW && ow < b + 8; ow++) {
                            int64_t iw = 2 * ow + shift;
                            if (iw >= 0 && iw < W) g[iw] += rr[ow];
                        }
                    }
                }
            }
}

/* Stride 1: each chunk of an input row summed in a register over (kh, kw)
 * in the portable loop's order, starting from its current value (zero
 * when overwriting), then stored once. */
QAT_AVX2 void qat__col2im_add_avx2(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    if (d->sw == 2) {
        col2im_add_strided(d, col, gxn, overwrite);
        return;
    }
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t OHW = OH * OW, CS = KH * KW * OHW; /* col's stride from one channel to the next */
    const float *gend = gxn + C * H * W, *cend = col + C * CS;
    for (int64_t c0 = 0; c0 < C; c0 += QAT__COL2IM_LANES) {
        int64_t nc = C - c0 < QAT__COL2IM_LANES ? C - c0 : QAT__COL2IM_LANES;
        for (int64_t ih = 0; ih < H; ih++)
            for (int64_t b = 0; b < W; b += 8) {
                const __m256i row_lanes = lanes(0, W - b);
                const bool whole_row = b + 8 <= W;
                __m256 acc[QAT__COL2IM_LANES];
                for (int j = 0; j < QAT__COL2IM_LANES; j++) {
                    acc[j] = _mm256_setzero_ps();
                    if (j >= nc || overwrite) continue;
                    const float *g = gxn + ((c0 + j) * H + ih) * W + b;
                    acc[j] = load_lanes(g, row_lanes, whole_row, gxn, gend);
                }
                for (int64_t kh = 0; kh < KH; kh++) {
                    int64_t oh = ih + ph - kh;
                    if (oh < 0 || oh >= OH) continue;
                    for (int64_t kw = 0; kw < KW; kw++) {
                        /* input column iw takes output column iw - shift */
                        int64_t shift = kw - pw;
                        const float *r = col + c0 * CS + (kh * KW + kw) * OHW + oh * OW - shift + b;
                        if (whole_row && shift - b <= 0 && shift + OW - b >= 8) { /* the tap reaches every lane */
                            for (int j = 0; j < QAT__COL2IM_LANES; j++)
                                if (j < nc) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(r + j * CS));
                            continue;
                        }
                        __m256i m = _mm256_and_si256(lanes(shift - b, shift + OW - b), row_lanes);
                        if (!any(m)) continue;
                        const __m256 keep = _mm256_castsi256_ps(m);
                        for (int j = 0; j < QAT__COL2IM_LANES; j++)
                            if (j < nc) {
                                __m256 sum = _mm256_add_ps(acc[j], load_lanes(r + j * CS, m, false, col, cend));
                                acc[j] = _mm256_blendv_ps(acc[j], sum, keep);
                            }
                    }
                }
                for (int j = 0; j < nc; j++)
                    store_lanes(gxn + ((c0 + j) * H + ih) * W + b, row_lanes, whole_row, gxn, gend, acc[j]);
            }
    }
}
#endif
