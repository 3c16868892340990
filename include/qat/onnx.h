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
 * producer, the training configuration (the program's config) and every
 * weight's MLIR type.
 *
 * This module reads the program (qat/runtime.h) and nothing else: no
 * model, no context, no file. The bytes reach a file, atomically and with
 * a model's other outputs, through the export (qat/export.h:
 * qat_onnx_save, qat_onnx_stage, qat_export_all).
 *
 *     uint8_t *bytes; size_t size; char msg[400];
 *     if (qat_onnx_serialize(&q, &bytes, &size, msg, sizeof msg) == QAT_OK) { ...; free(bytes); }
 *
 * Built only when the library has ONNX support (CMake QAT_ONNX, on when
 * protobuf-c is found); otherwise qat_onnx_serialize fails with
 * QAT_ERR_UNSUPPORTED and qat_onnx_available() is false. */
#ifndef QAT_ONNX_H
#define QAT_ONNX_H

#include "qat/core.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_ONNX_OPSET 14         /* the default domain's opset the files import */
#define QAT_ONNX_IR_VERSION 7     /* the ONNX IR version that goes with opset 14 */
#define QAT_ONNX_LAYOUT_VERSION 2 /* the naming and QDQ layout of docs/onnx.md (2: a model with a
                                     normalization takes its raw input; 1 had none) */

/* Whether this build of the library can write ONNX. */
QAT_API bool qat_onnx_available(void);

/* Serializes a program to ONNX bytes, malloc'd (*bytes: the caller frees
 * them). The program must pass qat_qmodel_check. Refused, with a one-line
 * message naming the layer in msg (len bytes; msg may be NULL):
 * sub-channel (block) weights and weights or activations wider than 8
 * bits (they need opset 21), weights quantized along an axis other than
 * the output channel, names that would repeat in the graph. */
QAT_API qat_status qat_onnx_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif
