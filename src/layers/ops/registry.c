/* The registry of the op-kind table: one line per qat_layer_kind, naming
 * the entry its own file defines. The build fails when a kind has no
 * line (the count below), when two lines claim one kind (a repeated
 * designator is an error under -Werror=override-init, part of -Wextra),
 * or when a line names an entry no file defines (the link). */
#include <assert.h>
#include <string.h>

#include "../op.h"

/* kind, entry: in any order (each line says its kind) */
#define QAT__OPS(X)                                \
    X(QAT_LAYER_INPUT, qat__op_input)              \
    X(QAT_LAYER_LINEAR, qat__op_linear)            \
    X(QAT_LAYER_CONV2D, qat__op_conv2d)            \
    X(QAT_LAYER_BATCHNORM, qat__op_batchnorm)      \
    X(QAT_LAYER_RELU, qat__op_relu)                \
    X(QAT_LAYER_RELU6, qat__op_relu6)              \
    X(QAT_LAYER_MAXPOOL2D, qat__op_maxpool2d)      \
    X(QAT_LAYER_AVGPOOL2D, qat__op_avgpool2d)      \
    X(QAT_LAYER_GLOBAL_AVGPOOL, qat__op_global_avgpool) \
    X(QAT_LAYER_FLATTEN, qat__op_flatten)          \
    X(QAT_LAYER_DROPOUT, qat__op_dropout)          \
    X(QAT_LAYER_ADD, qat__op_add)                  \
    X(QAT_LAYER_CONCAT, qat__op_concat)            \
    X(QAT_LAYER_SIGMOID, qat__op_sigmoid)          \
    X(QAT_LAYER_TANH, qat__op_tanh)                \
    X(QAT_LAYER_HARDSWISH, qat__op_hardswish)      \
    X(QAT_LAYER_LEAKY_RELU, qat__op_leaky_relu)    \
    X(QAT_LAYER_MUL, qat__op_mul)                  \
    X(QAT_LAYER_HARDSIGMOID, qat__op_hardsigmoid)  \
    X(QAT_LAYER_CUSTOM, qat__op_custom)

#define QAT__DECLARE(kind, entry) extern const qat__op_kind entry;
QAT__OPS(QAT__DECLARE)

#define QAT__ENTRY(kind, entry) [kind] = &entry,
static const qat__op_kind *const table[] = {QAT__OPS(QAT__ENTRY)};

#define QAT__ONE(kind, entry) +1
static_assert(0 QAT__OPS(QAT__ONE) == QAT_LAYER_KIND_COUNT,
              "a qat_layer_kind has no entry in the op table: add its line to src/layers/ops/registry.c");
static_assert(sizeof table / sizeof *table == QAT_LAYER_KIND_COUNT, "the op table has an entry outside qat_layer_kind");

const qat__op_kind *qat__op(qat_layer_kind kind) { return (unsigned)kind < QAT_LAYER_KIND_COUNT ? table[kind] : NULL; }

const char *qat_layer_kind_str(qat_layer_kind kind) {
    return (unsigned)kind < QAT_LAYER_KIND_COUNT ? table[kind]->name : "unknown";
}

qat_layer_kind qat_layer_kind_from_str(const char *name) {
    for (int k = 0; name && k < QAT_LAYER_KIND_COUNT; k++)
        if (!strcmp(name, table[k]->name)) return (qat_layer_kind)k;
    return QAT_LAYER_KIND_COUNT;
}
