/* Integer kernels of the int engine. Activations are storage integers
 * held in int16 (any 2..8-bit type fits, signed or unsigned); products
 * take (x - zp_x)·(w - zp_w) in int16 and accumulate in int32.
 *
 * The GEMM's operands are padded so its loops run whole blocks:
 *   w   [Op][Kp]  output rows, Op = O rounded up to 8, zero rows past O;
 *   col [Kp][Pp]  one row per reduction index k (im2col row, or input
 *                 feature), Pp = positions (or samples) rounded up to 16;
 *   Kp = K rounded up to 2. Weights past K are 0; col's padding rows
 *   and columns may hold anything (they meet zero weights, or give
 *   results that are not stored). */
#ifndef QAT_INFER_KERNELS_H
#define QAT_INFER_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

static inline int64_t qat__round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
#define QAT_KPAD 2  /* K: the kernels take k in pairs */
#define QAT_PPAD 16 /* P */
#define QAT_OPAD 4  /* O: the AVX2 block; w has rows up to a multiple of 8 (QAT_WROWS) */
#define QAT_WROWS 8

/* xp [C][H + 2·pad][W + 2·pad] = x - zp, 0 in the padding (real 0 is zp). */
void qat__pad_s16(const int16_t *x, int C, int H, int W, int pad, int32_t zp, int16_t *xp);

/* col rows [0, K) from a padded sample xp [C, Hp, Wp]:
 * col[(c·k·k + ky·k + kx)·Pp + oy·OW + ox] = xp[c][oy·s + ky][ox·s + kx].
 * With stride 1 the runs are copied in whole chunks of QAT_IM2COL_CHUNK
 * elements, so a chunk may overrun its run (the next run, written after
 * it, overwrites that) and the last one may write up to
 * QAT_IM2COL_CHUNK - 1 elements past the col matrix and read as far past
 * the end of xp: both buffers need that much slack. */
#define QAT_IM2COL_CHUNK 16
void qat__im2col_s16(const int16_t *xp, int C, int Hp, int Wp, int k, int stride, int OH, int OW, int Pp,
                     int16_t *col);

/* For o < O, p < P: out[o·so + p·sp] = clamp(zp + requant(w[o]·col[:, p] + bias[o],
 * m0[o], shift[o]), lo, hi). qat__gemm_requant_s16 picks the fastest
 * kernel this CPU runs; the _ref one is the portable C kernel (tests
 * check that both give the same integers). */
typedef struct {
    const int16_t *w, *col;
    int O, P, Kp, Pp;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int16_t *out;
    int64_t so, sp;
} qat__gemm_args;
void qat__gemm_requant_s16(const qat__gemm_args *a);
void qat__gemm_requant_s16_ref(const qat__gemm_args *a);
const char *qat__gemm_kernel_name(void);
/* Kernel i (0 portable, 1 AVX2, 2 AVX-512 VNNI), or NULL where this CPU
 * lacks it: for tests that check every kernel against the portable one. */
typedef void (*qat__gemm_fn)(const qat__gemm_args *a);
qat__gemm_fn qat__gemm_kernel(int i, const char **name); /* "AVX-512 VNNI", "AVX2" or "portable C" */

/* x [C, H, W] -> y [C, OH, OW], windows k x k, stride s, no padding. */
void qat__maxpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int16_t *y);
/* The 2x2, stride-2 case with SIMD where the CPU and the shape allow (even
 * W; tmp holds (H/2)·W). false: not done, use qat__maxpool_s16. */
bool qat__maxpool2_s16_simd(const int16_t *x, int C, int H, int W, int16_t *y, int16_t *tmp);
/* q[i] = clamp(round_half_even(x[i]·inv) + zp, qmin, qmax), exactly as
 * the fake quantization rounds (x·(1/scale) in float32), branch-free. */
void qat__quantize_s16(const float *x, int64_t n, float inv, int32_t zp, int32_t qmin, int32_t qmax, int16_t *q);

/* Window sums of (x - zp_in), requantized: clamp(zp_out + requant(sum), lo, hi). */
void qat__avgpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int32_t zp_in, int32_t m0,
                      int shift, int32_t zp_out, int32_t lo, int32_t hi, int16_t *y);

#endif
