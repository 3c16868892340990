/* The ONNX message builder (builder.h): protobuf-c structs filled in an
 * arena. protobuf-c does the wire format; this file only fills structs. */
#include "builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A chunk of the arena: 64 KiB, or one allocation that is larger. */
struct qat__ob_chunk {
    qat__ob_chunk *prev;
    size_t size, used;
    max_align_t payload[]; /* aligned for any message */
};
#define CHUNK_BYTES ((size_t)64 << 10)

void qat__ob_init(qat__onnx_builder *b, const char *graph_name) {
    memset(b, 0, sizeof *b);
    b->ok = true;
    qat__onnx__graph_proto__init(&b->graph);
    b->graph.name = qat__ob_str(b, "%s", graph_name);
}

void qat__ob_free(qat__onnx_builder *b) {
    free(b->graph.node);
    free(b->graph.initializer);
    free(b->graph.input);
    free(b->graph.output);
    b->graph.node = NULL, b->graph.initializer = NULL, b->graph.input = NULL, b->graph.output = NULL;
    for (qat__ob_chunk *c = b->mem, *prev; c; c = prev) prev = c->prev, free(c);
    b->mem = NULL;
}

void *qat__ob_alloc(qat__onnx_builder *b, size_t bytes) {
    if (!b->ok) return NULL;
    const size_t align = sizeof(max_align_t);
    if (bytes > SIZE_MAX / 2) return b->ok = false, NULL;
    bytes = bytes ? (bytes + align - 1) / align * align : align;
    qat__ob_chunk *c = b->mem;
    if (!c || c->size - c->used < bytes) {
        size_t size = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
        qat__ob_chunk *n = malloc(sizeof *n + size);
        if (!n) return b->ok = false, NULL;
        n->prev = c, n->size = size, n->used = 0;
        b->mem = c = n;
    }
    void *p = (unsigned char *)c->payload + c->used;
    memset(p, 0, bytes); /* as the context's arena gave it: zeroed */
    c->used += bytes;
    return p;
}

char *qat__ob_str(qat__onnx_builder *b, const char *fmt, ...) {
    if (!b->ok) return NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? qat__ob_alloc(b, (size_t)n + 1) : NULL;
    if (!s) return b->ok = false, NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Appends item to a malloc'd list of pointers (the graph's lists grow
 * with the model; nothing else does). */
#define PUSH(b, list, count, cap, item)                                          \
    do {                                                                         \
        if ((b)->ok && (count) == (cap)) {                                       \
            size_t c_ = (cap) ? 2 * (cap) : 64;                                  \
            void *p_ = realloc((list), c_ * sizeof *(list));                     \
            if (p_) (list) = p_, (cap) = c_;                                     \
            else (b)->ok = false;                                                \
        }                                                                        \
        if ((b)->ok) (list)[(count)++] = (item);                                 \
    } while (0)

Qat__Onnx__NodeProto *qat__ob_node(qat__onnx_builder *b, const char *op_type, const char *name, int n,
                              const char *const *inputs, const char *output) {
    Qat__Onnx__NodeProto *node = qat__ob_alloc(b, sizeof *node);
    char **in = qat__ob_alloc(b, (size_t)n * sizeof *in);
    char **out = qat__ob_alloc(b, sizeof *out);
    if (!node || !in || !out) return NULL;
    qat__onnx__node_proto__init(node);
    for (int i = 0; i < n; i++) in[i] = qat__ob_str(b, "%s", inputs[i]);
    out[0] = qat__ob_str(b, "%s", output);
    node->n_input = (size_t)n, node->input = in;
    node->n_output = 1, node->output = out;
    node->op_type = qat__ob_str(b, "%s", op_type);
    node->name = qat__ob_str(b, "%s", name);
    node->domain = qat__ob_str(b, "%s", "");
    PUSH(b, b->graph.node, b->graph.n_node, b->cap_node, node);
    return b->ok ? node : NULL;
}

/* A new attribute on node n (nodes have a handful: the list is copied). */
static Qat__Onnx__AttributeProto *attr(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name,
                                  Qat__Onnx__AttributeProto__AttributeType type) {
    if (!n) return NULL;
    Qat__Onnx__AttributeProto *a = qat__ob_alloc(b, sizeof *a);
    Qat__Onnx__AttributeProto **list = qat__ob_alloc(b, (n->n_attribute + 1) * sizeof *list);
    if (!a || !list) return NULL;
    qat__onnx__attribute_proto__init(a);
    a->name = qat__ob_str(b, "%s", name);
    a->has_type = 1, a->type = type;
    if (n->n_attribute) memcpy(list, n->attribute, n->n_attribute * sizeof *list);
    list[n->n_attribute++] = a;
    n->attribute = list;
    return a;
}

void qat__ob_attr_int(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, int64_t v) {
    Qat__Onnx__AttributeProto *a = attr(b, n, name, QAT__ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
}

void qat__ob_attr_float(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, float v) {
    Qat__Onnx__AttributeProto *a = attr(b, n, name, QAT__ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = v;
}

void qat__ob_attr_ints(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
    Qat__Onnx__AttributeProto *a = attr(b, n, name, QAT__ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = a ? qat__ob_alloc(b, (size_t)count * sizeof *copy) : NULL;
    if (!copy) return;
    memcpy(copy, v, (size_t)count * sizeof *copy);
    a->n_ints = (size_t)count, a->ints = copy;
}

/* An initializer's header; its bytes follow in raw_data (little-endian,
 * as ONNX defines raw_data whatever the host). */
static Qat__Onnx__TensorProto *tensor(qat__onnx_builder *b, const char *name, int type, int rank, const int64_t *dims,
                                 size_t bytes, uint8_t **raw) {
    Qat__Onnx__TensorProto *t = qat__ob_alloc(b, sizeof *t);
    int64_t *d = qat__ob_alloc(b, (size_t)rank * sizeof *d);
    *raw = qat__ob_alloc(b, bytes);
    if (!t || !d || !*raw) return NULL;
    qat__onnx__tensor_proto__init(t);
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *d); /* a scalar has no dims (and may pass NULL) */
    t->n_dims = (size_t)rank, t->dims = d;
    t->has_data_type = 1, t->data_type = type;
    t->name = qat__ob_str(b, "%s", name);
    t->has_raw_data = 1, t->raw_data.len = bytes, t->raw_data.data = *raw;
    PUSH(b, b->graph.initializer, b->graph.n_initializer, b->cap_init, t);
    return b->ok ? t : NULL;
}

static int64_t count_of(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= dims[d];
    return n;
}

void qat__ob_init_ints(qat__onnx_builder *b, const char *name, int type, int rank, const int64_t *dims,
                       const int32_t *v) {
    int64_t n = count_of(rank, dims);
    size_t width = type == QAT__ONNX_INT32 ? 4 : 1;
    uint8_t *raw;
    if (!tensor(b, name, type, rank, dims, (size_t)n * width, &raw)) return;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)v[i]; /* two's complement: the low byte of -3 is int8 -3 */
        for (size_t k = 0; k < width; k++) raw[(size_t)i * width + k] = (uint8_t)(u >> (8 * k));
    }
}

void qat__ob_init_floats(qat__onnx_builder *b, const char *name, int rank, const int64_t *dims, const float *v) {
    int64_t n = count_of(rank, dims);
    uint8_t *raw;
    if (!tensor(b, name, QAT__ONNX_FLOAT, rank, dims, (size_t)n * 4, &raw)) return;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) raw[i * 4 + k] = (uint8_t)(u >> (8 * k));
    }
}

static Qat__Onnx__ValueInfoProto *value_info(qat__onnx_builder *b, const char *name, int elem_type, int rank,
                                        const int64_t *dims) {
    Qat__Onnx__ValueInfoProto *vi = qat__ob_alloc(b, sizeof *vi);
    Qat__Onnx__TypeProto *tp = qat__ob_alloc(b, sizeof *tp);
    Qat__Onnx__TypeProto__Tensor *tt = qat__ob_alloc(b, sizeof *tt);
    Qat__Onnx__TensorShapeProto *sh = qat__ob_alloc(b, sizeof *sh);
    Qat__Onnx__TensorShapeProto__Dimension **dim = qat__ob_alloc(b, (size_t)(rank + 1) * sizeof *dim);
    if (!vi || !tp || !tt || !sh || !dim) return NULL;
    qat__onnx__value_info_proto__init(vi);
    qat__onnx__type_proto__init(tp);
    qat__onnx__type_proto__tensor__init(tt);
    qat__onnx__tensor_shape_proto__init(sh);
    for (int d = 0; d <= rank; d++) {
        Qat__Onnx__TensorShapeProto__Dimension *x = qat__ob_alloc(b, sizeof *x);
        if (!x) return NULL;
        qat__onnx__tensor_shape_proto__dimension__init(x);
        if (d == 0) x->value_case = QAT__ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, x->dim_param = qat__ob_str(b, "N");
        else x->value_case = QAT__ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, x->dim_value = dims[d - 1];
        dim[d] = x;
    }
    sh->n_dim = (size_t)rank + 1, sh->dim = dim;
    tt->has_elem_type = 1, tt->elem_type = elem_type, tt->shape = sh;
    tp->value_case = QAT__ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
    vi->name = qat__ob_str(b, "%s", name), vi->type = tp;
    return b->ok ? vi : NULL;
}

void qat__ob_input(qat__onnx_builder *b, const char *name, int elem_type, int rank, const int64_t *dims) {
    Qat__Onnx__ValueInfoProto *vi = value_info(b, name, elem_type, rank, dims);
    if (vi) PUSH(b, b->graph.input, b->graph.n_input, b->cap_in, vi);
}

void qat__ob_output(qat__onnx_builder *b, const char *name, int elem_type, int rank, const int64_t *dims) {
    Qat__Onnx__ValueInfoProto *vi = value_info(b, name, elem_type, rank, dims);
    if (vi) PUSH(b, b->graph.output, b->graph.n_output, b->cap_out, vi);
}
