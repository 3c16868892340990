/* qat/fakequant.h — uniform quantized types and the fake-quantize op.
 *
 * Follows docs/contract.md (§1-3). One type
 * describes per-tensor, per-axis and sub-channel (blockwise) quantization:
 * every granularity is a block size per dimension, and the element at index
 * i uses the scale and zero point of block i / block_sizes. Per-tensor =
 * every block whole; per-axis on d = block 1 on d, whole elsewhere.
 *
 *   q     = clamp(round_half_even(x * (1/scale)) + zero_point, qmin, qmax)
 *   x_hat = (q - zero_point) * scale
 *
 * computed in float32 exactly as PyTorch's fake_quantize_per_*_affine. */
#ifndef QAT_FAKEQUANT_H
#define QAT_FAKEQUANT_H

#include "qat/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* qat_qtype, qat_storage_range, qat_qtype_axis and qat_qtype_param_index
 * are in qat/core.h (the device side uses them too). */

/* Makes a type for a tensor of `shape`. block == NULL means per-tensor; a
 * block entry <= 0 means whole. Checks the sub-channel constraints
 * (1 <= block <= dim, dim % block == 0). Scales start at 1, zero points at
 * 0; the arrays live in ctx's persistent memory. */
QAT_API qat_status qat_qtype_init(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed, bool narrow,
                                  int rank, const int64_t *shape, const int64_t *block);
/* The same, and with ragged = true a block size need not divide its
 * dimension: the last block along it is shorter, and the parameters have
 * shape ceil(shape / block) (the sub-channel seed's suggested relaxation;
 * docs/quantization.md); a block larger than its dimension is then the
 * whole dimension. */
QAT_API qat_status qat_qtype_init_blocks(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed, bool narrow,
                                         int rank, const int64_t *shape, const int64_t *block, bool ragged);
/* Per-axis on `axis`: block 1 there, whole elsewhere. */
QAT_API qat_status qat_qtype_init_axis(qat_ctx *ctx, qat_qtype *q, int bits, bool is_signed,
                                       bool narrow, int rank, const int64_t *shape, int axis);

/* §3: scale and zero point from a range [min, max] (widened to hold 0),
 * PyTorch MinMaxObserver's formulas in float32, scale >= FLT_EPSILON. */
QAT_API void qat_qparams_from_range(float min, float max, int32_t qmin, int32_t qmax,
                                    bool symmetric, bool is_signed, float *scale, int32_t *zp);

/* Sets every block's parameters from the min and max of that block of x
 * (numel = the type's element count): the dynamic strategy for weights. */
QAT_API void qat_qtype_calibrate(qat_qtype *q, const float *x, bool symmetric);

/* Compact (two-level) block scales (docs/subchannel.md, "Compact block
 * scales"): rewrites q's scales, taken as each block's own range scale s_j,
 * as s_r · q_j, with one row scale s_r per parameter row r (the
 * nparams / pshape[0] = J blocks of one row of q's parameters) and an
 * integer sub-scale q_j in [1, 2^bits - 1] per block:
 *     s_r = the least float32 of at most 16 significant bits >= max_j s_j / (2^bits - 1)
 *     q_j = the least integer q >= 1 with q · s_r >= s_j    (exact)
 * so that s_r · q_j is exact in float32 (16 + 8 bits), no block's scale
 * is below its own (none clips more), and the row's largest block has
 * q_j = 2^bits - 1. Idempotent. bits 1..8; scales positive finite floats,
 * as calibration leaves them. row_scale [pshape[0]] and sub [nparams] may
 * be NULL. */
QAT_API void qat_qtype_compact_scales(qat_qtype *q, int bits, float *row_scale, int32_t *sub);

/* Quantizes x into q_out (storage integers as int32), and dequantizes. */
QAT_API void qat_quantize(const qat_qtype *q, const float *x, int32_t *q_out);
QAT_API void qat_dequantize(const qat_qtype *q, const int32_t *qv, float *x_out);

/* Parses an MLIR spelling (qat_qtype_to_mlir, qat/core.h) for a tensor of
 * `shape` (the spelling does not carry whole dimensions). Accepts "u8" and "ui8", a scale with no ":zp" (zp 0),
 * and any brace nesting whose flattened count matches the blocks. */
QAT_API qat_status qat_qtype_from_mlir(qat_ctx *ctx, const char *text, int rank,
                                       const int64_t *shape, qat_qtype *out);
/* The same, accepting (ragged = true) block sizes that do not divide their
 * dimension, with ceil(dim / block) parameters along it. */
QAT_API qat_status qat_qtype_from_mlir_blocks(qat_ctx *ctx, const char *text, int rank, const int64_t *shape,
                                              bool ragged, qat_qtype *out);

typedef enum {
    QAT_STE_CLIPPED = 0, /* gradient passes where qmin <= round(x/s) + zp <= qmax (default) */
    QAT_STE_PLAIN = 1    /* gradient passes everywhere */
} qat_ste;

/* The fake-quantize op: x_hat with the parameters of q (read at call time),
 * and a straight-through backward. x's shape must be q's shape, except that
 * a rank-0 type (per-tensor, for activations) applies to any shape. */
QAT_API qat_tensor *qat_fake_quant(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste);

/* LSQ (Esser et al. 2019): fake quantization whose scale and zero point are
 * tensors in the graph, learned with the rest. scale and zero_point hold
 * one value per block of q (q gives bits, range and granularity; its own
 * scale/zero_point arrays are not used). The zero point is rounded and
 * clamped to [qmin, qmax] in the forward, as PyTorch's
 * _fake_quantize_learnable_*_affine. Gradients, times grad_factor:
 *   dx    = dy where the integer is in range, else 0
 *   dscale = dy·(x_hat - x)/s in range; dy·(qmin - zp) or dy·(qmax - zp) outside
 *   dzp    = 0 in range; -dy·s outside
 * summed over each block. */
QAT_API qat_tensor *qat_fake_quant_lsq(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale,
                                       qat_tensor *zero_point, const qat_qtype *q, float grad_factor);
/* The contract's gradient scale 1/sqrt(numel · qmax). */
QAT_API float qat_lsq_grad_factor(int64_t numel, int32_t qmax);

/* ---- observers (contract §4) ------------------------------------------------------ */

typedef enum {
    QAT_OBS_MINMAX,      /* running min and max over every batch (PyTorch MinMaxObserver) */
    QAT_OBS_EMA,         /* first batch raw, then v += (1 - k)(batch - v) (MovingAverageMinMax) */
    QAT_OBS_WINDOW_MEAN, /* mean of the per-batch values over the last W batches (seed 1) */
    QAT_OBS_WINDOW_MAX,  /* extreme of the per-batch values over the last W batches (seed 2) */
    QAT_OBS_EMA_BIAS_CORRECTED /* Paddle: state = k·state + 1, acc = k·acc + v, v = acc/state */
} qat_observer_kind;

QAT_API const char *qat_observer_kind_str(qat_observer_kind kind);

#define QAT_OBS_MAX_WINDOW 256

/* Tracks a range per tensor. symmetric: each batch contributes its max-abs
 * M as the range [-M, M] (the seed's max-abs estimators); otherwise its min
 * and max, each tracked separately. */
typedef struct {
    qat_observer_kind kind;
    bool symmetric;
    int window;             /* W for the window kinds */
    float k;                /* EMA factor (default 0.9) */
    float min, max;         /* the current estimate */
    float win_min[QAT_OBS_MAX_WINDOW], win_max[QAT_OBS_MAX_WINDOW];
    float state, acc_min, acc_max; /* bias-corrected EMA */
    int64_t updates;
} qat_observer;

QAT_API qat_status qat_observer_init(qat_ctx *ctx, qat_observer *o, qat_observer_kind kind,
                                     bool symmetric, int window, float k);
/* Folds one batch into the estimate. NaNs in x are ignored. */
QAT_API void qat_observer_update(qat_observer *o, const float *x, int64_t n);
/* Per-channel variant: obs[c] observes channel c of x along `axis` (x is
 * [d0, ..., d(rank-1)], contiguous; obs holds shape[axis] observers). */
QAT_API qat_status qat_observer_update_channels(qat_ctx *ctx, qat_observer *obs, const qat_tensor *x,
                                                int axis);
/* Per-channel qparams: q must be per-axis with one block per observer. */
QAT_API void qat_observer_qparams_channels(const qat_observer *obs, qat_qtype *q);
/* Writes the per-tensor qparams of the estimate into q (nparams must be 1). */
QAT_API void qat_observer_qparams(const qat_observer *o, qat_qtype *q);

/* The QAT pass that places these quantizers in a model is in qat/layers.h. */

#ifdef __cplusplus
}
#endif
#endif
