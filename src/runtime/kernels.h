/* The runtime's integer kernels. Activations are storage integers in one
 * byte (signed 2..8-bit types); products take (x - zp_x)·(w - zp_w) in
 * int16 and accumulate in int32.
 *
 * The GEMM's operands are padded so its loops run whole blocks:
 *   w   [Op][Kp]  output rows, Op = O rounded up to 8, zero rows past O;
 *   col [Kp][Pp]  one row per reduction index k (im2col row, or input
 *                 feature), Pp = positions (or samples) rounded up to 16;
 *   Kp = K rounded up to 2. Weights past K are 0; col's padding rows
 *   and columns may hold anything (they meet zero weights, or give
 *   results that are not stored). */
#ifndef QAT_RUNTIME_KERNELS_H
#define QAT_RUNTIME_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "qat/runtime.h"

static inline int64_t qat__round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
#define QAT_KPAD 2  /* K: the kernels take k in pairs */
#define QAT_PPAD 16 /* P */
#define QAT_OPAD 4  /* O: the AVX2 block; w has rows up to a multiple of 8 (QAT_WROWS) */
#define QAT_WROWS 8

/* xp [C][H + 2·ph][W + 2·pw] = x - zp, 0 in the padding (real 0 is zp). */
void qat__pad_s8(const int8_t *x, int C, int H, int W, int ph, int pw, int32_t zp, int16_t *xp);

/* col rows [0, K) from a padded sample xp [C, Hp, Wp], K = C·kh·kw:
 * col[(c·kh·kw + ky·kw + kx)·Pp + oy·OW + ox] = xp[c][oy·sh + ky][ox·sw + kx].
 * With stride 1 the runs are copied in whole chunks of QAT_IM2COL_CHUNK
 * elements, so a chunk may overrun its run (the next run, written after
 * it, overwrites that) and the last one may write up to
 * QAT_IM2COL_CHUNK - 1 elements past the col matrix and read as far past
 * the end of xp: both buffers need that much slack. */
#define QAT_IM2COL_CHUNK 16
void qat__im2col_s16(const int16_t *xp, int C, int Hp, int Wp, int kh, int kw, int sh, int sw, int OH, int OW,
                     int Pp, int16_t *col);

/* For o < O, p < P: out[o·so + p·sp] = clamp(zp + requant(w[o]·col[:, p] + bias[o],
 * m0[o], shift[o]), lo, hi). qat__gemm_requant picks the fastest kernel
 * this CPU runs; the _ref one is the portable C kernel (tests check that
 * every kernel gives the same integers). */
typedef struct {
    const int16_t *w, *col;
    int O, P, Kp, Pp;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *out;
    int64_t so, sp;
} qat__gemm_args;
void qat__gemm_requant(const qat__gemm_args *a);
void qat__gemm_requant_ref(const qat__gemm_args *a);
const char *qat__gemm_kernel_name(void);
/* Kernel i (0 portable, 1 AVX2, 2 AVX-512 VNNI), or NULL where this CPU
 * lacks it: for tests that check every kernel against the portable one. */
typedef void (*qat__gemm_fn)(const qat__gemm_args *a);
qat__gemm_fn qat__gemm_kernel(int i, const char **name);

/* Depthwise convolution of one sample from its padded planes xp
 * [C][Hp][Wp] (x - zp): output channel o reads input channel o / mult;
 * w16 [O][kh·kw] (w - zp_w); y [O][OH][OW]. */
typedef struct {
    const int16_t *xp, *w16;
    int C, Hp, Wp, O, kh, kw, sh, sw, OH, OW;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *y;
} qat__depthwise_args;
void qat__depthwise(const qat__depthwise_args *a);

/* Max pooling of x [C, H, W] with kh x kw windows, strides, and padding
 * that never wins (PyTorch's -inf). */
void qat__maxpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw, int8_t *y);
/* The 2x2, stride-2, unpadded case with SIMD where the CPU and the shape
 * allow (even W; tmp holds (H/2)·W bytes). false: not done. */
bool qat__maxpool2_s8_simd(const int8_t *x, int C, int H, int W, int8_t *y, int8_t *tmp);

/* Window sums of (x - zp_in), padding counting 0, requantized:
 * clamp(zp_out + requant(sum), lo, hi). */
typedef struct {
    int32_t zp_in, m0;
    int shift;
    int32_t zp_out, lo, hi;
} qat__requant_args;
void qat__avgpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                     const qat__requant_args *r, int8_t *y);
/* y[c] = requant(Σ_{i < HW} (x[c·HW + i] - zp_in)). */
void qat__global_avgpool_s8(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y);
/* y = clamp(zp_out + requant(x - zp_in)) over n elements (concat's inputs). */
void qat__requant_s8(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y);

/* TFLite's ADD over n elements: each input (x - zp) << left_shift scaled
 * by its multiplier, summed, requantized by the output multiplier. */
typedef struct {
    int32_t zp_a, zp_b, m_a, m_b, m_out;
    int sh_a, sh_b, sh_out, left_shift;
    int32_t zp_out, lo, hi;
} qat__add_args;
void qat__add_s8(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y);

/* y[i] = table[x[i] - qmin] (table of 256 bytes indexed from qmin). */
void qat__lut_s8(const int8_t *x, int64_t n, const int8_t *table, int32_t qmin, int8_t *y);
/* y[i] = clamp(x[i], lo, hi). */
void qat__clamp_s8(const int8_t *x, int64_t n, int32_t lo, int32_t hi, int8_t *y);

/* The sizes of a linear or conv2d op, for the planner and the executor:
 * conv input [C, H, W] padded to [C, Hp, Wp], output [O, OH, OW] in
 * `groups` groups of Og outputs; K = C/groups·kh·kw products per output
 * (linear: its input features), Kp = K rounded up to 2, Pp = positions
 * (linear: samples) rounded up to 16; depthwise: one input channel per
 * group, run by the direct kernel. */
typedef struct {
    int C, H, W, Hp, Wp, O, OH, OW, groups, Og, kk, K, Kp, Pp;
    bool depthwise;
} qat__op_geom;
void qat__op_geometry(const qat_qmodel *q, const qat_qop *op, int max_batch, qat__op_geom *g);
#endif
