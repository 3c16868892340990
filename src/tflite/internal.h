/* The TFLite graph qat writes, as plain C: what src/tflite/graph.c makes
 * from an integer program (NHWC shapes, weights in TFLite's layouts, each
 * op's options) and what src/tflite/write.cc turns into flatbuffer bytes.
 * Nothing here decides numerics: graph.c has decided every integer; the
 * writer only serializes and verifies. Prefix qat__tfl. */
#ifndef QAT_TFLITE_INTERNAL_H
#define QAT_TFLITE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "qat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Numbers of the published schema (src/tflite/schema.fbs). */
enum { QAT__TFL_INT32 = 2, QAT__TFL_INT8 = 9 };
enum {
    QAT__TFL_ADD = 0, QAT__TFL_AVERAGE_POOL_2D = 1, QAT__TFL_CONCATENATION = 2, QAT__TFL_CONV_2D = 3,
    QAT__TFL_DEPTHWISE_CONV_2D = 4, QAT__TFL_FULLY_CONNECTED = 9, QAT__TFL_MAX_POOL_2D = 17, QAT__TFL_MUL = 18,
    QAT__TFL_RELU = 19, QAT__TFL_RELU6 = 21, QAT__TFL_RESHAPE = 22, QAT__TFL_PAD = 34, QAT__TFL_TRANSPOSE = 39
};
enum { QAT__TFL_SAME = 0, QAT__TFL_VALID = 1 };
enum { QAT__TFL_ACT_NONE = 0, QAT__TFL_ACT_RELU = 1, QAT__TFL_ACT_RELU6 = 3 };

typedef struct {
    char name[96];
    int type;                 /* QAT__TFL_INT8 or QAT__TFL_INT32 */
    int rank;
    int32_t shape[4];
    const void *data;         /* a constant's bytes (little-endian), NULL for an activation */
    size_t bytes;
    int n_q;                  /* quantization: 0 none, 1 per tensor, else per channel along qdim */
    const float *scale;
    const int64_t *zero_point;
    int qdim;
} qat__tfl_tensor;

typedef struct {
    int code;                 /* QAT__TFL_ADD, ... */
    int n_in, in[16];         /* tensor ids (QAT_QOP_MAX_INPUTS at most) */
    int out;
    int padding, stride_w, stride_h, filter_w, filter_h, depth_multiplier, act, axis;
    int version;              /* the op's version in TFLite's schema (its int8 kernels') */
} qat__tfl_op;

typedef struct {
    qat__tfl_tensor *tensors;
    int n_tensors;
    qat__tfl_op *ops;
    int n_ops;
    int input, output;        /* tensor ids */
    const char *description;  /* the producer: qat's version */
} qat__tfl_graph;

/* The graph as a TFLite flatbuffer, checked by the flatbuffers verifier:
 * malloc'd bytes in *bytes (the caller frees them). QAT_ERR_NOMEM, or
 * QAT_ERR_STATE with a message when the verifier refuses the bytes. */
qat_status qat__tfl_serialize(const qat__tfl_graph *g, uint8_t **bytes, size_t *size, char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif
