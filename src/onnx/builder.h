/* A small builder over protobuf-c's generated ONNX messages: nodes with
 * their attributes, initializers, graph inputs and outputs. It knows
 * nothing of qat's program (qdq.c maps that onto it).
 *
 * Every message, array and string lives in the builder's arena (a chain of
 * malloc'd chunks handed out by bumping an offset); the graph's growing
 * lists (nodes, initializers) are malloc'd apart, and qat__ob_free
 * releases both. A failed allocation marks
 * the builder (ok = false) and every later call does nothing, so callers
 * check once at the end. */
#ifndef QAT_ONNX_BUILDER_H
#define QAT_ONNX_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat_onnx.pb-c.h"
#include "qat/core.h"

/* ONNX TensorProto.DataType values the export uses. */
enum {
    QAT__ONNX_FLOAT = QAT__ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
    QAT__ONNX_UINT8 = QAT__ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
    QAT__ONNX_INT8 = QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
    QAT__ONNX_INT32 = QAT__ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
};

typedef struct qat__ob_chunk qat__ob_chunk;
typedef struct {
    qat__ob_chunk *mem; /* the arena of every message: the chunk being filled, the older ones behind it */
    bool ok;        /* false after a failed allocation */
    Qat__Onnx__GraphProto graph;
    size_t cap_node, cap_init, cap_in, cap_out;
} qat__onnx_builder;

void qat__ob_init(qat__onnx_builder *b, const char *graph_name);
void qat__ob_free(qat__onnx_builder *b);

/* printf into the arena; NULL (and ok = false) on failure. */
char *qat__ob_str(qat__onnx_builder *b, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void *qat__ob_alloc(qat__onnx_builder *b, size_t bytes);

/* A node of the default domain with n inputs ("" for an omitted optional
 * one) and one output; NULL after a failure. */
Qat__Onnx__NodeProto *qat__ob_node(qat__onnx_builder *b, const char *op_type, const char *name, int n,
                              const char *const *inputs, const char *output);
void qat__ob_attr_int(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, int64_t v);
void qat__ob_attr_float(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, float v);
void qat__ob_attr_ints(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, int count, const int64_t *v);

/* Initializers of rank 0..4 (rank 0: a scalar), from int32 values
 * (stored as int8, uint8 or int32 by type) or floats, little-endian. */
void qat__ob_init_ints(qat__onnx_builder *b, const char *name, int type, int rank, const int64_t *dims,
                       const int32_t *v);
void qat__ob_init_floats(qat__onnx_builder *b, const char *name, int rank, const int64_t *dims, const float *v);

/* Graph inputs and outputs: a tensor of elem_type whose first dimension is
 * the symbolic batch "N" and whose others are dims[0..rank-1]. */
void qat__ob_input(qat__onnx_builder *b, const char *name, int elem_type, int rank, const int64_t *dims);
void qat__ob_output(qat__onnx_builder *b, const char *name, int elem_type, int rank, const int64_t *dims);

#endif
