/* The ONNX model around the QDQ graph (opset, IR version, producer,
 * metadata_props) and its bytes through protobuf-c. Writing them to a file
 * (atomically, with a model's other outputs) is the export's
 * (qat_onnx_save, qat_onnx_stage in qat/export.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool qat_onnx_available(void) { return true; }

qat_status qat__onnx_fail(qat__onnx_err *e, qat_status st, const char *fmt, ...) {
    if (e->failed) return st; /* the first failure says why */
    e->failed = true;
    if (e->msg && e->len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->len, fmt, ap);
        va_end(ap);
    }
    return st;
}

typedef struct {
    qat__onnx_builder *b;
    Qat__Onnx__StringStringEntryProto **props;
    size_t n, cap;
} metadata;

static void put(metadata *md, const char *key, const char *value) {
    Qat__Onnx__StringStringEntryProto *e = qat__ob_alloc(md->b, sizeof *e);
    if (!e || md->n == md->cap) {
        md->b->ok = false;
        return;
    }
    qat__onnx__string_string_entry_proto__init(e);
    e->key = qat__ob_str(md->b, "%s", key);
    e->value = qat__ob_str(md->b, "%s", value);
    md->props[md->n++] = e;
}

/* A quantized type's MLIR spelling, in the arena. */
static const char *mlir(qat__onnx_builder *b, const qat_qtype *t) {
    int need = qat_qtype_to_mlir(t, NULL, 0);
    char *s = need >= 0 ? qat__ob_alloc(b, (size_t)need + 1) : NULL;
    if (s) qat_qtype_to_mlir(t, s, (size_t)need + 1);
    return s ? s : "";
}

/* The input normalization in one line: "channels=3 divisor=255
 * mean=0.49140000,... std=... raw_uint8=1" (%.9g: each float32 exactly). */
static const char *normalization_text(qat__onnx_builder *b, const qat_normalization *n) {
    size_t cap = 64 + 2 * 18 * (size_t)n->channels, k = 0;
    char *s = qat__ob_alloc(b, cap);
    if (!s) return "";
    k += (size_t)snprintf(s + k, cap - k, "channels=%d divisor=%.9g mean=", n->channels, (double)n->divisor);
    for (int c = 0; c < n->channels && k < cap; c++) k += (size_t)snprintf(s + k, cap - k, "%s%.9g", c ? "," : "", (double)n->mean[c]);
    if (k < cap) k += (size_t)snprintf(s + k, cap - k, " std=");
    for (int c = 0; c < n->channels && k < cap; c++) k += (size_t)snprintf(s + k, cap - k, "%s%.9g", c ? "," : "", (double)n->std[c]);
    if (k < cap) snprintf(s + k, cap - k, " raw_uint8=%d", n->raw_uint8 ? 1 : 0);
    return s;
}

/* What a reader needs to know where the file came from and to check its
 * types against qat's: the keys are in docs/onnx.md. */
static void fill_metadata(qat__onnx_builder *b, const qat_qmodel *q, Qat__Onnx__ModelProto *m) {
    metadata md = {.b = b, .cap = 9 + (size_t)q->n_ops + (size_t)q->n_tensors};
    md.props = qat__ob_alloc(b, md.cap * sizeof *md.props);
    if (!md.props) return;
    char num[32];
    put(&md, "qat.format", QAT_QMODEL_FORMAT);
    snprintf(num, sizeof num, "%d", qat_qmodel_file_version(q));
    put(&md, "qat.format_version", num);
    snprintf(num, sizeof num, "%d", QAT_ONNX_LAYOUT_VERSION);
    put(&md, "qat.onnx_layout_version", num);
    put(&md, "qat.producer", q->producer);
    put(&md, "qat.training_config", q->config ? q->config : "");
    if (q->norm) put(&md, "qat.normalization", normalization_text(b, q->norm));
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (op->kind == QAT_QOP_LINEAR || op->kind == QAT_QOP_CONV2D)
            put(&md, qat__ob_str(b, "qat.weight_type.%s", op->name), mlir(b, &op->wq));
    }
    for (int t = 0; t < q->n_tensors; t++) {
        const qat_aparams *a = &q->tensors[t].q;
        float s = a->scale;
        int32_t z = a->zero_point;
        qat_qtype at = {.bits = a->bits, .is_signed = a->is_signed, .qmin = a->qmin, .qmax = a->qmax,
                        .rank = 0, .nparams = 1, .scale = &s, .zero_point = &z};
        put(&md, qat__ob_str(b, "qat.activation_type.%s", q->tensors[t].name), mlir(b, &at));
    }
    m->n_metadata_props = md.n, m->metadata_props = md.props;
}

/* The model's bytes, malloc'd (the caller frees them). */
static qat_status pack(qat__onnx_err *err, const qat_qmodel *q, uint8_t **bytes, size_t *size) {
    *bytes = NULL, *size = 0;
    char msg[400];
    qat_status st = qat_qmodel_check(q, msg, sizeof msg);
    if (st != QAT_OK) return qat__onnx_fail(err, st, "onnx: %s", msg);
    if ((st = qat__onnx_supported(q, err)) != QAT_OK) return st;
    qat__onnx_builder b; /* every message of the model in its arena, freed at once below */
    qat__ob_init(&b, "qat");
    st = b.ok ? qat__onnx_graph(&b, q, err) : qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory");
    Qat__Onnx__ModelProto m;
    qat__onnx__model_proto__init(&m);
    Qat__Onnx__OperatorSetIdProto opset;
    qat__onnx__operator_set_id_proto__init(&opset);
    Qat__Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    if (st == QAT_OK) {
        opset.domain = "";
        opset.has_version = 1, opset.version = QAT_ONNX_OPSET;
        m.has_ir_version = 1, m.ir_version = QAT_ONNX_IR_VERSION;
        m.n_opset_import = 1, m.opset_import = opsets;
        m.producer_name = "qat";
        m.producer_version = QAT_VERSION_STRING;
        m.has_model_version = 1, m.model_version = QAT_ONNX_LAYOUT_VERSION;
        m.doc_string = "A qat integer program in QDQ form: each tensor is a QuantizeLinear/DequantizeLinear "
                       "pair, each op the float op between pairs (qat docs/onnx.md).";
        b.graph.doc_string = m.doc_string;
        m.graph = &b.graph;
        fill_metadata(&b, q, &m);
        if (!b.ok) st = qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory");
    }
    if (st == QAT_OK) {
        *size = qat__onnx__model_proto__get_packed_size(&m);
        *bytes = malloc(*size ? *size : 1);
        if (!*bytes) st = qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory (%zu bytes)", *size);
        else if (qat__onnx__model_proto__pack(&m, *bytes) != *size)
            st = qat__onnx_fail(err, QAT_ERR_STATE, "onnx: protobuf-c packed a size other than it measured");
    }
    if (st != QAT_OK) free(*bytes), *bytes = NULL, *size = 0;
    qat__ob_free(&b);
    return st;
}

qat_status qat_onnx_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len) {
    qat__onnx_err err = {.msg = msg, .len = len};
    if (msg && len) msg[0] = '\0';
    if (bytes) *bytes = NULL;
    if (size) *size = 0;
    if (!q || !bytes || !size) return qat__onnx_fail(&err, QAT_ERR_ARG, "onnx: NULL program or output");
    return pack(&err, q, bytes, size);
}
