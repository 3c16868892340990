/* qat/export.h — the quantized model: lowering a QAT model to integers,
 * and the quantized checkpoint (HDF5) that carries it.
 *
 * Lowering turns a prepared (fake-quantized) model into the program an
 * integer-only device runs (contract §5): a list of fused ops, each with
 * its integer weights and their type, an int32 bias at scale
 * s_in·s_w[c], the fixed-point multiplier and shift of
 * M[c] = s_in·s_w[c]/s_out per output channel, and the activation's
 * quantization. BatchNorms are folded, ReLU/ReLU6 become the clamp of the
 * requantized output, dropout disappears. The file layout is in
 * docs/quantized-model-format.md; the engine that runs it is qat/infer.h.
 *
 *     qat_qmodel q;
 *     qat_qmodel_lower(model, 3, (int64_t[]){1, 28, 28}, &q);   // prepared, trained
 *     qat_qmodel_save(ctx, &q, "model.qat.h5");                  // atomic
 *     qat_qmodel_load(ctx, "model.qat.h5", &q2);                 // validated
 */
#ifndef QAT_EXPORT_H
#define QAT_EXPORT_H

#include "qat/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_QMODEL_FORMAT "qat-quantized-model"
#define QAT_QMODEL_VERSION 1
#define QAT_QMODEL_MAX_OPS QAT_MAX_LAYERS
#define QAT_QMODEL_CONFIG_LEN 2048
#define QAT_QMODEL_MAX_DIM (1 << 24) /* largest dimension, and element count, of a per-sample shape */
#define QAT_QOP_MAX_WINDOW 64        /* largest kernel, stride and padding */

typedef enum {
    QAT_QOP_LINEAR,    /* y = requant(W·(x - zp_in) + b) */
    QAT_QOP_CONV2D,    /* the same, as a convolution */
    QAT_QOP_MAXPOOL2D, /* on the integers (the max commutes with the affine map) */
    QAT_QOP_AVGPOOL2D, /* int32 window sum, requantized by s_in / (s_out·k·k) */
    QAT_QOP_FLATTEN,
    QAT_QOP_RELU,      /* max(q, zp): ReLU on the integers */
    QAT_QOP_KIND_COUNT
} qat_qop_kind;

typedef enum { QAT_ACT_NONE, QAT_ACT_RELU, QAT_ACT_RELU6 } qat_act_kind;

QAT_API const char *qat_qop_kind_str(qat_qop_kind k); /* "linear", "conv2d", ... */
QAT_API const char *qat_act_kind_str(qat_act_kind k); /* "none", "relu", "relu6" */

/* Per-tensor quantization of an activation: real = scale·(q - zero_point). */
typedef struct {
    float scale;
    int32_t zero_point;
    int bits;
    bool is_signed;
    int32_t qmin, qmax;
} qat_aparams;

typedef struct {
    qat_qop_kind kind;
    char name[QAT_NAME_LEN]; /* the layer it comes from ("conv1", "pool2") */
    int kernel, stride, pad; /* conv and pools */
    qat_act_kind act;        /* linear/conv: the fused activation */
    int in_rank, out_rank;   /* per-sample shapes: [C, H, W] or [F] */
    int64_t in_shape[3], out_shape[3];
    /* linear/conv: */
    qat_qtype wq;            /* weight type: [out, in] or [out, in, k, k] */
    int32_t *weight;         /* the integers, in wq.qmin..wq.qmax */
    int32_t *bias;           /* [out] at bias_scale */
    float *bias_scale;       /* [out]: s_in·s_w[c] (sub-channel: the channel's first block) */
    /* linear/conv with per-tensor or per-axis weights: [out]; avgpool: [1].
     * NULL for sub-channel weights (no single multiplier per channel). */
    int32_t *multiplier, *shift;
    qat_aparams output;      /* linear, conv, avgpool: the requantized output */
    int32_t act_min, act_max; /* clamp of the output integers (qmin..qmax, or ReLU/ReLU6's) */
} qat_qop;

typedef struct {
    qat_aparams input;        /* the model input's quantization */
    int in_rank;              /* per-sample input shape */
    int64_t in_shape[3];
    int n_ops;
    qat_qop ops[QAT_QMODEL_MAX_OPS];
    int64_t n_outputs;        /* logits per sample */
    char producer[64];
    char config[QAT_QMODEL_CONFIG_LEN]; /* training configuration (free text, JSON from qat-mnist) */
} qat_qmodel;

/* Lowers a prepared, trained model (its activation observers must have
 * seen data) for inputs of per-sample shape in_shape (rank 1 or 3). The
 * arrays live in m's context. Errors name the layer: an unfolded
 * BatchNorm, a standalone ReLU6, a shape that does not chain. */
QAT_API qat_status qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_qmodel *out);

/* Writes the quantized checkpoint atomically (temporary file, flush,
 * rename). */
QAT_API qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);

/* Reads and validates a quantized checkpoint: format, version, every
 * shape, every integer in its storage range, multipliers in [2^30, 2^31),
 * shapes that chain from op to op. Arrays live in ctx. */
QAT_API qat_status qat_qmodel_load(qat_ctx *ctx, const char *path, qat_qmodel *out);

/* Checks every quantity of a lowered or loaded model: storage ranges
 * inside their bit width, scales positive normal floats, zero points and
 * integers inside their ranges, multipliers in [2^30, 2^31) (or 0) with
 * shifts in [-31, 30], shapes that follow from op to op, a vector of
 * logits at the end. qat_qmodel_load and qat_qmodel_save both run it.
 * QAT_ERR_FORMAT with a message naming the op and the quantity. */
QAT_API qat_status qat_qmodel_validate(qat_ctx *ctx, const qat_qmodel *q);

/* Lower + save, with a training-configuration text (may be NULL). */
QAT_API qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                              const char *path);

#ifdef __cplusplus
}
#endif
#endif
