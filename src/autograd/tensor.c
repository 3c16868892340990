/* Tensor creation, views' bookkeeping and small shape helpers. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static bool valid_shape(qat_ctx *ctx, int rank, const int64_t *shape, int64_t *numel) {
    if (rank < 0 || rank > QAT_MAX_RANK) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "rank %d outside 0..%d", rank, QAT_MAX_RANK);
        return false;
    }
    if (rank > 0 && !shape) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "NULL shape for rank %d", rank);
        return false;
    }
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] <= 0 || shape[d] > ((int64_t)1 << 40) || n > (((int64_t)1 << 40) / shape[d])) {
            qat_ctx_fail(ctx, QAT_ERR_ARG, "bad dimension %lld at axis %d",
                         (long long)shape[d], d);
            return false;
        }
        n *= shape[d];
    }
    *numel = n;
    return true;
}

static void set_contiguous(qat_tensor *t, int rank, const int64_t *shape, int64_t numel) {
    t->rank = rank;
    int64_t s = 1;
    for (int d = QAT_MAX_RANK - 1; d >= 0; d--) {
        t->shape[d] = d < rank ? shape[d] : 1;
        t->stride[d] = d < rank ? s : 0;
        if (d < rank) s *= shape[d];
    }
    t->numel = numel;
}

qat_tensor *qat_tensor_wrap(qat_ctx *ctx, qat_mem where, float *data, float *grad, int rank,
                            const int64_t *shape) {
    int64_t numel;
    if (!ctx) return NULL;
    if (!data) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_tensor_wrap: NULL data");
        return NULL;
    }
    if (!valid_shape(ctx, rank, shape, &numel)) return NULL;
    qat_tensor *t = qat_ctx_alloc(ctx, where, sizeof *t);
    if (!t) return NULL;
    set_contiguous(t, rank, shape, numel);
    t->data = data;
    t->grad = grad;
    t->requires_grad = grad != NULL;
    t->mem = where;
    return t;
}

qat_tensor *qat_tensor_new(qat_ctx *ctx, qat_mem where, int rank, const int64_t *shape,
                           bool requires_grad) {
    int64_t numel;
    if (!ctx || !valid_shape(ctx, rank, shape, &numel)) return NULL;
    float *data = qat_ctx_alloc(ctx, where, (size_t)numel * sizeof(float));
    if (!data) return NULL;
    float *grad = NULL;
    if (requires_grad && where == QAT_MEM_PERSIST) {
        grad = qat_ctx_alloc(ctx, where, (size_t)numel * sizeof(float));
        if (!grad) return NULL;
    }
    qat_tensor *t = qat_tensor_wrap(ctx, where, data, grad, rank, shape);
    if (t) t->requires_grad = requires_grad;
    return t;
}

qat_tensor *qat_tensor_from(qat_ctx *ctx, qat_mem where, const float *values, int rank,
                            const int64_t *shape, bool requires_grad) {
    if (ctx && !values) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_tensor_from: NULL values");
        return NULL;
    }
    qat_tensor *t = qat_tensor_new(ctx, where, rank, shape, requires_grad);
    if (t) memcpy(t->data, values, (size_t)t->numel * sizeof(float));
    return t;
}

qat_tensor *qat__new_out(qat_ctx *ctx, int rank, const int64_t *shape) {
    int64_t numel;
    if (!ctx || !valid_shape(ctx, rank, shape, &numel)) return NULL;
    float *data = qat__step_recycled(ctx, (size_t)numel * sizeof(float));
    return data ? qat_tensor_wrap(ctx, QAT_MEM_STEP, data, NULL, rank, shape) : NULL;
}

bool qat_tensor_is_contiguous(const qat_tensor *t) {
    if (!t) return false;
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s) return false;
        s *= t->shape[d];
    }
    return true;
}

bool qat_tensor_same_shape(const qat_tensor *a, const qat_tensor *b) {
    if (!a || !b || a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

void qat_tensor_zero_grad(qat_tensor *t) {
    if (t && t->grad) memset(t->grad, 0, (size_t)t->numel * sizeof(float));
}

char *qat_shape_str(const qat_tensor *t, char *buf, size_t len) {
    if (!buf || !len) return buf;
    if (!t) {
        snprintf(buf, len, "(null)");
        return buf;
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}
