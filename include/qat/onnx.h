/* qat/onnx.h — the integer program (qat/runtime.h) as an ONNX model in QDQ
 * form, for runtimes qat does not control (onnxruntime, TensorRT, OpenVINO).
 *
 * Every tensor the integer program stores becomes a QuantizeLinear ->
 * DequantizeLinear pair with its scale and zero point; between the pairs
 * run the float ops whose rounding the integer program performs (Conv,
 * Gemm, Add, Concat, the pools, Relu/Clip for the fused clamps, Sigmoid,
 * Tanh, HardSwish, Flatten). Weights are int8 initializers behind a
 * DequantizeLinear (per channel along axis 0 where qat quantized per
 * channel), biases int32 at scale s_in·s_w with zero point 0. A QDQ-aware
 * runtime fuses each DQ -> op -> Q group into an integer kernel; any ONNX
 * runtime can run the graph in float and get the same integers up to the
 * rounding of the requantization (docs/onnx.md says where they differ).
 *
 * The model's input is the float tensor qat's engines take ([N, C, H, W]
 * or [N, F], N dynamic), its output the float logits (the DequantizeLinear
 * of the output integers). metadata_props carry the format version, the
 * producer, the training configuration and every weight's MLIR type.
 *
 *     qat_onnx_export(model, 0, NULL, config, "model.onnx");   // lower + save
 *     qat_onnx_save(ctx, &q, "model.onnx");                    // a program in hand
 *
 * Built only when the library has ONNX support (CMake QAT_ONNX, on when
 * protobuf-c is found); otherwise every call fails with
 * QAT_ERR_UNSUPPORTED and qat_onnx_available() is false. */
#ifndef QAT_ONNX_H
#define QAT_ONNX_H

#include "qat/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_ONNX_OPSET 14         /* the default domain's opset the files import */
#define QAT_ONNX_IR_VERSION 7     /* the ONNX IR version that goes with opset 14 */
#define QAT_ONNX_LAYOUT_VERSION 2 /* the naming and QDQ layout of docs/onnx.md (2: a model with a
                                     normalization takes its raw input; 1 had none) */

/* Whether this build of the library can write ONNX. */
QAT_API bool qat_onnx_available(void);

/* Serializes a checked program (qat_qmodel_check) to ONNX bytes, which live
 * in ctx's persistent memory. Refused, with a message naming the layer:
 * sub-channel (block) weights and weights or activations wider than 8 bits
 * (they need opset 21), weights quantized along an axis other than the
 * output channel. */
QAT_API qat_status qat_onnx_serialize(qat_ctx *ctx, const qat_qmodel *q, const uint8_t **bytes, size_t *size);

/* Serializes q and writes it atomically (docs/saving.md): the path holds
 * the old file or the complete new one, never a part; on any error it is
 * left as it was. */
QAT_API qat_status qat_onnx_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);
/* The same, staged in set (qat/io.h), renamed by qat_save_set_commit. A
 * program ONNX cannot express is refused before anything is written. */
QAT_API qat_status qat_onnx_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set);

/* Lower (qat_qmodel_lower, in a context of its own) + qat_onnx_save, with
 * a training-configuration text (may be NULL). Errors go on the model's
 * context: an unprepared (float) model, an op with no ONNX form. */
QAT_API qat_status qat_onnx_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                                   const char *path);

#ifdef __cplusplus
}
#endif
#endif
