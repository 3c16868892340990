/* Shape inference over the model graph: each layer's per-sample output
 * shape from its inputs', with an error naming the first layer that does
 * not fit. Model files use it to fill in input channels; build checks a
 * declared input shape with it; lowering and the summary read it. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static qat_status misfit(const qat_model *m, const qat__layer *l, const char *what, int rank, const int64_t *s) {
    char got[64] = "[";
    for (int d = 0; d < rank; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)s[d]);
    snprintf(got + strlen(got), sizeof got - strlen(got), "]");
    return qat_ctx_fail(m->ctx, QAT_ERR_SHAPE, "model: %s %s: %s (its input is %s per sample)",
                        qat_layer_kind_str(l->kind), l->name, what, got);
}

static int64_t window(int64_t in, int k, int s, int p) { return in + 2 * p < k ? 0 : (in + 2 * p - k) / s + 1; }

qat_status qat__layer_shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                           int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    switch (l->kind) {
    case QAT_LAYER_LINEAR:
        if (r != 1 || x[0] != l->cin) return misfit(m, l, "wants a vector of its in features (Flatten missing?)", r, x);
        *rank = 1, s[0] = l->cout;
        return QAT_OK;
    case QAT_LAYER_CONV2D:
    case QAT_LAYER_MAXPOOL2D:
    case QAT_LAYER_AVGPOOL2D: {
        if (r != 3) return misfit(m, l, "wants [C, H, W]", r, x);
        if (l->kind == QAT_LAYER_CONV2D && x[0] != l->cin) return misfit(m, l, "wants its in channels", r, x);
        *rank = 3, s[0] = l->kind == QAT_LAYER_CONV2D ? l->cout : x[0];
        s[1] = window(x[1], l->kh, l->sh, l->ph), s[2] = window(x[2], l->kw, l->sw, l->pw);
        if (!s[1] || !s[2]) return misfit(m, l, "its window is larger than its padded input", r, x);
        return QAT_OK;
    }
    case QAT_LAYER_BATCHNORM:
        if (x[0] != l->cout) return misfit(m, l, "wants its channels on the first axis", r, x);
        *rank = r, memcpy(s, x, 3 * sizeof *s);
        return QAT_OK;
    case QAT_LAYER_GLOBAL_AVGPOOL:
        if (r != 3) return misfit(m, l, "wants [C, H, W]", r, x);
        *rank = 1, s[0] = x[0];
        return QAT_OK;
    case QAT_LAYER_FLATTEN: *rank = 1, s[0] = qat__shape_numel(r, x); return QAT_OK; /* saturating */
    case QAT_LAYER_ADD: {
        int r2 = ranks[l->in[1]];
        if (r2 != r || memcmp(shapes[l->in[1]], x, (size_t)r * sizeof *x))
            return misfit(m, l, "wants two inputs of one shape (the second differs)", r, x);
        *rank = r, memcpy(s, x, 3 * sizeof *s);
        return QAT_OK;
    }
    case QAT_LAYER_CONCAT:
        *rank = r, memcpy(s, x, 3 * sizeof *s);
        for (int j = 1; j < l->n_in; j++) {
            const int64_t *y = shapes[l->in[j]];
            if (ranks[l->in[j]] != r || (r == 3 && (y[1] != x[1] || y[2] != x[2])))
                return misfit(m, l, "wants inputs that differ only in their channels", r, x);
            s[0] = s[0] > ((int64_t)1 << 62) - y[0] ? (int64_t)1 << 62 : s[0] + y[0]; /* saturating */
        }
        return QAT_OK;
    case QAT_LAYER_CUSTOM: {
        /* ask the op, with [1, shape] stand-ins for its inputs */
        qat_tensor xs[QAT_CUSTOM_MAX_INPUTS];
        const qat_tensor *ps[QAT_CUSTOM_MAX_INPUTS];
        for (int j = 0; j < l->n_in; j++) {
            memset(&xs[j], 0, sizeof xs[j]);
            xs[j].rank = ranks[l->in[j]] + 1, xs[j].shape[0] = 1, xs[j].numel = 1;
            for (int d = 0; d < ranks[l->in[j]]; d++) xs[j].shape[d + 1] = shapes[l->in[j]][d], xs[j].numel *= xs[j].shape[d + 1];
            ps[j] = &xs[j];
        }
        int orank = 0;
        int64_t os[QAT_MAX_RANK] = {0};
        qat_status st = l->custom->shape(m->ctx, l->custom_user, l->n_in, ps, &orank, os);
        if (st != QAT_OK) return st;
        if ((orank != 2 && orank != 4) || os[0] != 1) return misfit(m, l, "its op gives no [N, F] or [N, C, H, W] output", r, x);
        *rank = orank - 1;
        for (int d = 1; d < orank; d++) s[d - 1] = os[d];
        return QAT_OK;
    }
    default: *rank = r, memcpy(s, x, 3 * sizeof *s); return QAT_OK; /* element-wise kinds */
    }
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
