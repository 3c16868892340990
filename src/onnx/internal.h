/* Shared by the ONNX export's files: qdq.c maps the integer program onto a
 * graph, save.c wraps it in a model and writes it. */
#ifndef QAT_ONNX_INTERNAL_H
#define QAT_ONNX_INTERNAL_H

#include "builder.h"
#include "qat/onnx.h"

/* Fails (message on err, naming the layer) for what ONNX cannot express
 * at the export's opset; q has passed qat_qmodel_check. */
qat_status qat__onnx_supported(const qat_qmodel *q, qat_ctx *err);

/* The QDQ graph of a supported program: one graph input "input" (float),
 * one output "logits" (float), and the nodes and initializers between. */
qat_status qat__onnx_graph(qat__onnx_builder *b, const qat_qmodel *q, qat_ctx *err);

#endif
