/* Shape inference over the model graph: each layer's per-sample output
 * shape from its inputs', with an error naming the first layer that does
 * not fit. Model files use it to fill in input channels; build checks a
 * declared input shape with it; lowering and the summary read it. */
#include <stdio.h>
#include <string.h>

#include "op.h"

qat_status qat__misfit(const qat_model *m, const qat__layer *l, const char *what, int rank, const int64_t *s) {
    char got[64] = "[";
    for (int d = 0; d < rank; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)s[d]);
    snprintf(got + strlen(got), sizeof got - strlen(got), "]");
    return qat_ctx_fail(m->ctx, QAT_ERR_SHAPE, "model: %s %s: %s (its input is %s per sample)",
                        qat_layer_kind_str(l->kind), l->name, what, got);
}

/* The kind's rule; without one, an element-wise kind: input 0's shape. */
qat_status qat__layer_shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                            int64_t *s) {
    const qat__op_kind *op = qat__op(l->kind);
    if (op->shape) return op->shape(m, l, ranks, shapes, rank, s);
    *rank = ranks[l->in[0]], memcpy(s, shapes[l->in[0]], 3 * sizeof *s);
    return QAT_OK;
}

qat_status qat_model_shapes(const qat_model *m, int in_rank, const int64_t *in_shape, int *ranks, int64_t (*shapes)[3]) {
    if (!m || !ranks || !shapes || !in_shape || (in_rank != 1 && in_rank != 3)) {
        if (m) qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: shapes need an input shape [C, H, W] or [F]");
        return QAT_ERR_ARG;
    }
    ranks[0] = in_rank;
    memset(shapes[0], 0, sizeof shapes[0]);
    memcpy(shapes[0], in_shape, (size_t)in_rank * sizeof *in_shape);
    for (int i = 1; i < m->n_layers; i++) {
        memset(shapes[i], 0, sizeof shapes[i]);
        qat_status st = qat__layer_shape(m, &m->layers[i], ranks, shapes, &ranks[i], shapes[i]);
        if (st != QAT_OK) return st;
    }
    return QAT_OK;
}
