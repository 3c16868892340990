/* im2col and col2im for one sample at stride 1 when the rows fit one
 * AVX-512 register (input and output width <= 16: LeNet's second layer),
 * picked at run time by ops_conv.c.
 *
 * im2col: each output row is one masked load (the lanes that fall in the
 * padding or off the input row read nothing and give 0) and one masked
 * store. col2im: each input row is summed in a register over (kh, kw) in
 * the portable loop's order, starting from its current value, with masked
 * adds (lanes a tap does not reach are left alone, not added 0), then
 * stored once. That is the portable per-element sequence of additions, so
 * the bits are the same; and no load waits on a half-overlapping store
 * (the portable loop's neighbouring taps write the same row one float
 * apart, which cost it most of its time). */
#include "internal.h"

#if QAT__CONV_AVX512
#include <immintrin.h>

#define QAT_AVX512 __attribute__((target("avx512f")))

bool qat__conv_avx512_fits(const qat__conv_dims *d) {
    return d->sh == 1 && d->sw == 1 && d->W <= 16 && d->OW <= 16 && qat__have_avx512f();
}

/* Lanes [lo, hi) of 16, clipped to [0, 16). */
static inline __mmask16 lanes(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

QAT_AVX512 void qat__im2col_avx512(const qat__conv_dims *d, const float *xn, float *col) {
    /* the sizes in locals: the masked stores may alias anything, so the
     * compiler would reload every field after each one */
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const __mmask16 all = lanes(0, OW);
    const __m512 zero = _mm512_setzero_ps();
    float *row = col;
    /* Rows are stored whole (16 lanes, zeros past OW) in increasing
     * address order, so each store's tail is overwritten by the next row:
     * masked stores, slow on some CPUs (AMD's), only for the last row,
     * whose tail would fall past this sample's columns. */
    const float *last = col + C * KH * KW * OH * OW - OW;
    for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, row += OH * OW) {
                int64_t shift = kw - pw; /* output column ow reads input column ow + shift */
                __mmask16 valid = lanes(-shift, W - shift) & all;
                const float *src = xn + c * H * W + shift;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh - ph + kh;
                    __m512 v = ih >= 0 && ih < H ? _mm512_maskz_loadu_ps(valid, src + ih * W) : zero;
                    if (row + oh * OW != last) _mm512_storeu_ps(row + oh * OW, v);
                    else _mm512_mask_storeu_ps(row + oh * OW, all, v);
                }
            }
}

/* Channels summed side by side: each row's sum is one serial chain of
 * KH*KW dependent adds, so several channels' chains interleave. */
#define QAT__COL2IM_LANES 4

QAT_AVX512 void qat__col2im_add_avx512(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite) {
    const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, OH = d->OH, OW = d->OW, ph = d->ph, pw = d->pw;
    const int64_t OHW = OH * OW, CS = KH * KW * OHW; /* col's stride from one channel to the next */
    const __mmask16 row_lanes = lanes(0, W);
    for (int64_t c0 = 0; c0 < C; c0 += QAT__COL2IM_LANES) {
        int64_t nc = C - c0 < QAT__COL2IM_LANES ? C - c0 : QAT__COL2IM_LANES;
        for (int64_t ih = 0; ih < H; ih++) {
            __m512 acc[QAT__COL2IM_LANES];
            for (int j = 0; j < QAT__COL2IM_LANES; j++)
                acc[j] = j < nc && !overwrite ? _mm512_maskz_loadu_ps(row_lanes, gxn + ((c0 + j) * H + ih) * W)
                                              : _mm512_setzero_ps();
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t oh = ih + ph - kh;
                if (oh < 0 || oh >= OH) continue;
                for (int64_t kw = 0; kw < KW; kw++) {
                    /* input column iw takes output column iw - shift */
                    int64_t shift = kw - pw;
                    __mmask16 m = lanes(shift, shift + OW) & row_lanes;
                    const float *r = col + c0 * CS + (kh * KW + kw) * OHW + oh * OW - shift;
                    for (int j = 0; j < QAT__COL2IM_LANES; j++)
                        if (j < nc) acc[j] = _mm512_mask_add_ps(acc[j], m, acc[j], _mm512_maskz_loadu_ps(m, r + j * CS));
                }
            }
            for (int j = 0; j < QAT__COL2IM_LANES; j++)
                if (j < nc) _mm512_mask_storeu_ps(gxn + ((c0 + j) * H + ih) * W, row_lanes, acc[j]);
        }
    }
}
#endif
