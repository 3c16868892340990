/* im2col and col2im for one sample at stride 1, any width, picked at
 * run time by ops_conv.c. A row is taken 16 floats (one AVX-512
 * register) at a time: LeNet's second layer is one chunk a row, the
 * 28-wide layers of LeNet's first and ResNet-8's first stack two.
 *
 * im2col: each chunk of an output row is one masked load (the lanes that
 * fall in the padding or off the input row read nothing and give 0) and
 * one store. col2im: each chunk of an input row is summed in a register
 * over (kh, kw) in the portable loop's order, starting from its current
 * value, with masked adds (lanes a tap does not reach are left alone, not
 * added 0), then stored once. That is the portable per-element sequence
 * of additions, so the bits are the same; and no load waits on a
 * half-overlapping store (the portable loop's neighbouring taps write the
 * same row one float apart, which cost it most of its time). */
#include "internal.h"

#if QAT__CONV_AVX512
#include <immintrin.h>
#include <string.h>

#define QAT_AVX512 __attribute__((target("avx512f")))
#define QAT__IM2COL_MAX_CHUNKS 8 /* rows of up to 128 outputs */

_Static_assert(16 * QAT__IM2COL_MAX_CHUNKS == 128, "the rows' masks cover qat__conv_rows_shape's widths");

bool qat__conv_avx512_fits(const qat__conv_dims *d) { return qat__conv_rows_shape(d) && qat__have_avx512f(); }

/* Lanes [lo, hi) of 16, clipped to [0, 16). */
static inline __mmask16 lanes(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* Output lane l of a stride-2 chunk is input lane 2l of the two loaded
 * vectors (index bit 4 picks the second). */
#define EVEN_LANES _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)

QAT_AVX512 void qat__im2col_avx512(const qat__conv_dims *d, const float *xn, float *col) {
    /* the sizes in locals: the masked stores may alias anything, so the
     * compiler would reload every field after each one */
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh, sw = d->sw, nch = (OW + 15) / 16;
    const __m512 zero = _mm512_setzero_ps();
    const __m512i even = EVEN_LANES;
    float *row = col;
    /* Chunks are stored whole (16 lanes, zeros past OW) in increasing
     * address order, so a row's last store spills into the next row, which
     * writes those floats again: masked stores, slow on some CPUs (AMD's),
     * only for the last chunk of the sample, whose spill would fall past
     * this sample's columns. */
    const float *end = col + C * KH * KW * OH * OW;
    /* The masks of a kernel column, made once per column */
    __mmask16 all[QAT__IM2COL_MAX_CHUNKS], m0[QAT__IM2COL_MAX_CHUNKS], m1[QAT__IM2COL_MAX_CHUNKS];
    for (int64_t j = 0; j < nch; j++) all[j] = lanes(0, OW - 16 * j);
    if (sw == 1 && nch <= 2) {
        /* rows of one or two chunks (LeNet's layers, ResNet-8's 28-wide
         * ones): the masks in registers. A mask loaded from memory (or
         * made from a general register) right before its load cost three
         * times the copy itself. */
        for (int64_t c = 0; c < C; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                    int64_t shift = kw - pw;
                    const __mmask16 va = lanes(-shift, W - shift) & all[0];
                    const __mmask16 vb = nch == 2 ? lanes(-shift - 16, W - shift - 16) & all[1] : 0;
                    const float *src = xn + c * H * W + shift;
                    for (int64_t oh = 0; oh < OH; oh++) {
                        int64_t ih = oh * sh - ph + kh;
                        bool in = ih >= 0 && ih < H;
                        float *at = row + oh * OW;
                        __m512 v = in ? _mm512_maskz_loadu_ps(va, src + ih * W) : zero;
                        if (at + 16 <= end) _mm512_storeu_ps(at, v);
                        else _mm512_mask_storeu_ps(at, all[0], v);
                        if (nch == 1) continue;
                        v = in ? _mm512_maskz_loadu_ps(vb, src + ih * W + 16) : zero;
                        if (at + 32 <= end) _mm512_storeu_ps(at + 16, v);
                        else _mm512_mask_storeu_ps(at + 16, all[1], v);
                    }
                }
        return;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                int64_t shift = kw - pw; /* output column ow reads input column sw·ow + shift */
                for (int64_t j = 0; j < nch; j++) {
                    int64_t base = sw * 16 * j + shift; /* the input column of the chunk's lane 0 */
                    m0[j] = lanes(-base, W - base) & (sw == 1 ? all[j] : 0xFFFF);
                    m1[j] = lanes(-base - 16, W - base - 16);
                }
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * sh - ph + kh;
                    bool in = ih >= 0 && ih < H;
                    const float *src = xn + (c * H + ih) * W + shift; /* only read when in */
                    float *at = row + oh * OW;
                    for (int64_t j = 0; j < nch; j++, at += 16) {
                        __m512 v = zero;
                        if (in && sw == 1) {
                            v = _mm512_maskz_loadu_ps(m0[j], src + 16 * j);
                        } else if (in) { /* every other input lane, from two vectors */
                            __m512 v0 = _mm512_maskz_loadu_ps(m0[j], src + 32 * j);
                            __m512 v1 = _mm512_maskz_loadu_ps(m1[j], src + 32 * j + 16);
                            v = _mm512_maskz_permutex2var_ps(all[j], v0, even, v1);
                        }
                        if (at + 16 <= end) _mm512_storeu_ps(at, v);
                        else _mm512_mask_storeu_ps(at, all[j], v);
                    }
                }
            }
}

/* Channels summed side by side: each chunk's sum is one serial chain of
 * KH*KW dependent adds, so several channels' chains interleave. */
#define QAT__COL2IM_LANES 4

/* Strided (sw 2, any sh): the portable loop's order, (c, kh, kw, oh),
 * each chunk of 16 outputs spread to the even lanes of two vectors and
 * added into its input row with masked loads, adds and stores: every
 * element gets its additions in the portable order, so the same bits. */
QAT_AVX512 static void col2im_add_strided(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t sh = d->sh;
    const __m512i lo_half = _mm512_setr_epi32(0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0);
    const __m512i hi_half = _mm512_setr_epi32(8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0);
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
                    for (int64_t b = 0; b < OW; b += 16) {
                        int64_t base = 2 * b + shift, n2 = 2 * (OW - b); /* input lanes [0, n2) from base */
                        __m512 r = _mm512_maskz_loadu_ps(lanes(0, OW - b), row + oh * OW + b);
                        __mmask16 m0 = (__mmask16)(0x5555 & lanes(-base, W - base) & lanes(0, n2));
                        __mmask16 m1 = (__mmask16)(0x5555 & lanes(-base - 16, W - base - 16) & lanes(-16, n2 - 16));
                        if (m0) {
                            __m512 a = _mm512_maskz_loadu_ps(m0, g + base);
                            a = _mm512_add_ps(a, _mm512_permutexvar_ps(lo_half, r));
                            _mm512_mask_storeu_ps(g + base, m0, a);
                        }
                        if (m1) {
                            __m512 a = _mm512_maskz_loadu_ps(m1, g + base + 16);
                            a = _mm512_add_ps(a, _mm512_permutexvar_ps(hi_half, r));
                            _mm512_mask_storeu_ps(g + base + 16, m1, a);
                        }
                    }
                }
            }
}

QAT_AVX512 void qat__col2im_add_avx512(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    if (d->sw == 2) {
        col2im_add_strided(d, col, gxn, overwrite);
        return;
    }
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t OHW = OH * OW, CS = KH * KW * OHW; /* col's stride from one channel to the next */
    for (int64_t c0 = 0; c0 < C; c0 += QAT__COL2IM_LANES) {
        int64_t nc = C - c0 < QAT__COL2IM_LANES ? C - c0 : QAT__COL2IM_LANES;
        for (int64_t ih = 0; ih < H; ih++)
            for (int64_t b = 0; b < W; b += 16) {
                const __mmask16 row_lanes = lanes(0, W - b);
                __m512 acc[QAT__COL2IM_LANES];
                for (int j = 0; j < QAT__COL2IM_LANES; j++)
                    acc[j] = j < nc && !overwrite ? _mm512_maskz_loadu_ps(row_lanes, gxn + ((c0 + j) * H + ih) * W + b)
                                                  : _mm512_setzero_ps();
                for (int64_t kh = 0; kh < KH; kh++) {
                    int64_t oh = ih + ph - kh;
                    if (oh < 0 || oh >= OH) continue;
                    for (int64_t kw = 0; kw < KW; kw++) {
                        /* input column iw takes output column iw - shift */
                        int64_t shift = kw - pw;
                        __mmask16 m = lanes(shift - b, shift + OW - b) & row_lanes;
                        const float *r = col + c0 * CS + (kh * KW + kw) * OHW + oh * OW - shift + b;
                        for (int j = 0; j < QAT__COL2IM_LANES; j++)
                            if (j < nc)
                                acc[j] = _mm512_mask_add_ps(acc[j], m, acc[j], _mm512_maskz_loadu_ps(m, r + j * CS));
                    }
                }
                for (int j = 0; j < QAT__COL2IM_LANES; j++)
                    if (j < nc) _mm512_mask_storeu_ps(gxn + ((c0 + j) * H + ih) * W + b, row_lanes, acc[j]);
            }
    }
}
#endif
