/* Integer kernels of the int engine. Activations are storage integers
 * held in int16 (any 2..8-bit type fits, signed or unsigned); products
 * take (x - zp_x)·(w - zp_w) in int16 and accumulate in int32. */
#ifndef QAT_INFER_KERNELS_H
#define QAT_INFER_KERNELS_H

#include <stdint.h>

/* Rounds K up so every dot product runs whole SIMD blocks (zero padded). */
#define QAT_KPAD 16
static inline int qat__kpad(int64_t k) { return (int)((k + QAT_KPAD - 1) / QAT_KPAD * QAT_KPAD); }

/* colT[p][Kp] for one sample x [C, H, W]: row p = output position
 * (oy, ox), column c·k·k + ky·k + kx = x[c][oy·s + ky - pad][ox·s + kx - pad] - zp,
 * 0 in the padding (real 0 is zp) and past K. */
void qat__im2col_s16(const int16_t *x, int C, int H, int W, int k, int stride, int pad, int32_t zp,
                     int OH, int OW, int Kp, int16_t *colT);

/* For o < O, p < P: out[o·so + p·sp] = clamp(zp + requant(w[o]·col[p] + bias[o],
 * m0[o], shift[o]), lo, hi); w [O][Kp], col [P][Kp]. */
void qat__gemm_requant_s16(const int16_t *w, const int16_t *col, int O, int P, int Kp,
                           const int32_t *bias, const int32_t *m0, const int32_t *shift, int32_t zp,
                           int32_t lo, int32_t hi, int16_t *out, int64_t so, int64_t sp);

/* x [C, H, W] -> y [C, OH, OW], windows k x k, stride s, no padding. */
void qat__maxpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int16_t *y);
/* Window sums of (x - zp_in), requantized: clamp(zp_out + requant(sum), lo, hi). */
void qat__avgpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int32_t zp_in, int32_t m0,
                      int shift, int32_t zp_out, int32_t lo, int32_t hi, int16_t *y);

#endif
