/* Sub-channel (blockwise) weights in the integer runtime, following the
 * quantized-reduction seed: each block's int8×int8 products are summed in
 * int32 (a partial sum at scale s_in·s_w[block]), each partial sum is
 * converted to the row's accumulation scale bias_scale[o] by a fixed-point
 * multiplier (block_multiplier/block_shift: input_conversion), the
 * converted sums and the bias are added in int32, and the total is
 * requantized to the output (multiplier/shift: output_conversion).
 * docs/subchannel.md derives the accumulation scale and proves the bounds
 * that qat__sc_bounds checks.
 *
 * The reduction index k (a linear op's input feature, a conv's im2col row
 * c·kh·kw + ky·kw + kx) is visited block by block: the prepared constants
 * hold the weights in that order, each block's run padded to an even
 * length (the SIMD kernels take k in pairs), with the im2col row of every
 * position. A block may be a box over several dimensions (blocks on a
 * conv weight's own axes): its positions need not be contiguous in k.
 * Shared with: src/export
 */
#ifndef QAT_RUNTIME_SUBCHANNEL_H
#define QAT_RUNTIME_SUBCHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "qat/runtime.h"

#define QAT_SC_ROWS 8 /* the most output rows a kernel block takes */
/* Rows of the prepared weights: a kernel block that starts inside a conv
 * group, or takes the last rows, may run up to QAT_SC_ROWS - 1 rows past
 * the op's last (zero weights there). */
static inline int64_t qat__sc_rows(int64_t O) { return qat__round_up(O + QAT_SC_ROWS, QAT_SC_ROWS); }

/* The layout of a sub-channel op's prepared constants, from its type:
 * O rows, K reduction indices, J blocks per row, Ks padded positions. */
typedef struct {
    int64_t O, K, J, Ks, rows_per_param; /* rows_per_param: the type's block along the output dimension */
} qat__sc_shape;
void qat__sc_shape_of(const qat_qop *op, qat__sc_shape *s);

/* Bytes of the prepared constants: w16 [qat__sc_rows(O)][Ks] int16,
 * row [Ks] int32 (the im2col row of each position), seg [J + 1] int32 (the
 * first position of each block), 64-byte aligned parts. */
int64_t qat__sc_const_bytes(const qat_qop *op);
void qat__sc_prepare(const qat_qop *op, void *consts);

/* The bounds of docs/subchannel.md for inputs with |x - zp| <= X: every
 * block's partial sum P (its |w - zp| summed, times X) fits int32, its
 * conversion's left shift does not saturate, and each row's bias plus its
 * converted sums' largest magnitudes fits int32; with compact block
 * scales (op->subscale), |bias| + X·Σ_j q_j·W_j fits int32. work: J int64. false with
 * the row, block and bound in why where one fails.
 * qat__sc_row_sums puts row o's Σ|w - zp| per block into work[J];
 * qat__sc_row_bounds checks row o from them. */
bool qat__sc_bounds(const qat_qop *op, int64_t X, int64_t *work, char *why, size_t len);
void qat__sc_row_sums(const qat_qop *op, int64_t o, int64_t *work);
bool qat__sc_row_bounds(const qat_qop *op, int64_t o, int64_t X, const int64_t *work, char *why, size_t len);
/* X for inputs of quantization a: max(zp - qmin, qmax - zp), in 64 bits
 * (the loader may ask before the program check has seen a). */
static inline int64_t qat__sc_input_bound(const qat_aparams *a) {
    int64_t lo = (int64_t)a->zero_point - a->qmin, hi = (int64_t)a->qmax - a->zero_point;
    return lo > hi ? lo : hi;
}

/* One GEMM over the prepared constants: for o < O, p < P,
 * out[o·so + p·sp] = clamp(zp + MBQM(bias[o] + Σ_j MBQM(Σ_{k in block j}
 * w[o][k]·col[k][p], bm[o,j], bs[o,j]), m[o], s[o]), lo, hi).
 * col [K rows][Pp] int16 (x - zp_x). */
typedef struct {
    const qat_qop *op;
    const void *consts;
    const int16_t *col;
    int O, P, Pp;          /* O: rows of this call (a conv group's), from row o0 of the op */
    int o0;
    int32_t zp, lo, hi;
    int8_t *out;
    int64_t so, sp;
    bool single; /* the program's single rounding, for both conversions */
} qat__sc_args;
void qat__sc_gemm(const qat__sc_args *a);      /* the fastest kernel this CPU runs */
void qat__sc_gemm_ref(const qat__sc_args *a);  /* portable C: the reference */
/* A sub-channel linear op over n samples (x [n][K] int8, y [n][O]) and a
 * conv2d op over n samples (padded, im2col per group, as the per-channel
 * path), with the plan's scratch (kernels.h's layouts). */
void qat__sc_run_linear(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const void *consts,
                        const int8_t *x, int8_t *y, void *scratch, int64_t n);
void qat__sc_run_conv(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const void *consts,
                      const int8_t *x, int8_t *y, void *scratch, int64_t n);

/* Kernel i (0 portable, 1 AVX2, 2 AVX-512 VNNI) or NULL where this CPU
 * lacks it (tests check each against the portable one). */
typedef void (*qat__sc_fn)(const qat__sc_args *a);
qat__sc_fn qat__sc_kernel(int i, const char **name);

#endif
