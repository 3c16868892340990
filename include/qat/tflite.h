/* qat/tflite.h — the integer program (qat/runtime.h) as a TensorFlow Lite
 * flatbuffer (schema version 3), for TFLite, TFLite Micro and the device
 * toolchains that take .tflite files.
 *
 * The file holds full-integer int8 ops: the input tensor "input" is int8
 * ([1, H, W, C] or [1, F], the program input's scale and zero point: the
 * caller quantizes, as qat's engines do after the normalization), the
 * output "output" int8 at the program output's quantization; weights int8,
 * symmetric, per output channel or per tensor; biases int32 at s_in·s_w. TFLite's
 * reference kernels compute, from these, exactly the integers of qat's
 * engine: docs/tflite.md gives the rules, op by op, and what is refused.
 * A signature "serving_default" names the input and output.
 *
 * This module reads the program and nothing else. The bytes reach a file,
 * atomically and with a model's other outputs, through the export
 * (qat/export.h: qat_tflite_save, qat_tflite_stage, qat_export_all).
 *
 *     uint8_t *bytes; size_t size; char msg[400];
 *     if (qat_tflite_serialize(&q, &bytes, &size, msg, sizeof msg) == QAT_OK) { ...; free(bytes); }
 *
 * Built only when the library has TFLite support (CMake QAT_TFLITE, on
 * when flatc and the flatbuffers headers are found); otherwise
 * qat_tflite_serialize fails with QAT_ERR_UNSUPPORTED and
 * qat_tflite_available() is false. */
#ifndef QAT_TFLITE_H
#define QAT_TFLITE_H

#include "qat/core.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build of the library can write .tflite files. */
QAT_API bool qat_tflite_available(void);

/* Serializes a program to .tflite bytes, malloc'd (*bytes: the caller
 * frees them), checked by the flatbuffers verifier. The program must pass
 * qat_qmodel_check. Refused (QAT_ERR_UNSUPPORTED), with a one-line message
 * naming the layer in msg (len bytes; msg may be NULL): activations other
 * than int8 over [-128, 127]; weights that are sub-channel, asymmetric,
 * wider than 8 bits or quantized along another axis than the output
 * channel; grouped (not depthwise) convolutions; average pools that
 * requantize (train with pool_keeps_scale: qat train --target tflite);
 * concatenations whose inputs have their own quantization or that clamp;
 * output clamps that are none of TFLite's fused activations; tables
 * (sigmoid, tanh, hard-swish); pool paddings neither SAME nor VALID;
 * multipliers other than those TFLite derives from the scales; an add
 * whose left shift is not 20. */
QAT_API qat_status qat_tflite_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif
