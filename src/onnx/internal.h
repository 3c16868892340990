/* Shared by the ONNX export's files: qdq.c maps the integer program onto a
 * graph, save.c wraps it in a model and serializes it. They read the
 * program (qat/runtime.h) and nothing of the training side. */
#ifndef QAT_ONNX_INTERNAL_H
#define QAT_ONNX_INTERNAL_H

#include "builder.h"
#include "qat/onnx.h"

/* Where a failure's one-line message goes (the caller's buffer; msg may be
 * NULL): the first failure's message is kept. */
typedef struct {
    char *msg;
    size_t len;
    bool failed;
} qat__onnx_err;

/* Records the message (printf-style) and returns st. */
qat_status qat__onnx_fail(qat__onnx_err *e, qat_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Fails (message on err, naming the layer) for what ONNX cannot express
 * at the export's opset; q has passed qat_qmodel_check. */
qat_status qat__onnx_supported(const qat_qmodel *q, qat__onnx_err *err);

/* The QDQ graph of a supported program: one graph input "input" (float),
 * one output "logits" (float), and the nodes and initializers between. */
qat_status qat__onnx_graph(qat__onnx_builder *b, const qat_qmodel *q, qat__onnx_err *err);

#endif
