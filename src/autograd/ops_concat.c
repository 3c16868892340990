/* Concatenation of n contiguous tensors along one axis (PyTorch's
 * torch.cat). Every input is a sequence of `outer` blocks (the product of
 * the dimensions before the axis), input i's blocks holding len[i] floats
 * (its size along the axis times the product of the dimensions after it);
 * the output interleaves them: block o of input 0, block o of input 1, ...
 * Backward copies the same slices of dy back. */
#include <string.h>

#include "internal.h"

typedef struct {
    int n;
    int64_t outer, total; /* blocks per input; floats per output block */
    int64_t *len;         /* [n] floats per block of each input */
    qat_tensor **xs;      /* [n] the inputs (the node's in[] holds only three) */
} concat_saved;

/* Each input's gradient: its slices of dy, stored when the gradient is a
 * new step buffer (every element is written), added otherwise. */
static void concat_bw(qat_ctx *ctx, qat_node *node) {
    const concat_saved *s = node->saved;
    const float *gy = node->out->grad;
    int64_t at = 0; /* the input's first column within an output block */
    for (int i = 0; i < s->n; at += s->len[i], i++) {
        qat_tensor *x = s->xs[i];
        if (!qat__wants_grad(x)) continue;
        bool store = false;
        float *gx = qat__grad_dst(ctx, x, &store);
        if (!gx) return;
        int64_t L = s->len[i];
        for (int64_t o = 0; o < s->outer; o++) {
            const float *restrict src = gy + o * s->total + at;
            float *restrict dst = gx + o * L;
            if (store) memcpy(dst, src, (size_t)L * sizeof(float));
            else
                for (int64_t j = 0; j < L; j++) dst[j] += src[j];
        }
    }
}

/* Checks the inputs and fills the output shape; NULL-input and rank
 * errors name the input. */
static bool concat_check(qat_ctx *ctx, int n, qat_tensor *const *xs, int *axis, int64_t *shape) {
    const char *op = "qat_concat";
    if (n < 1 || !xs) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: %d inputs (want at least 1)", op, n), false;
    if (!qat__inputs_ok(ctx, op, n, xs)) return false;
    int rank = xs[0]->rank;
    if (*axis < 0) *axis += rank; /* -1: the last axis, as in PyTorch */
    if (rank < 1 || *axis < 0 || *axis >= rank)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: axis %d outside a rank-%d tensor", op, *axis, rank), false;
    memcpy(shape, xs[0]->shape, (size_t)rank * sizeof(int64_t));
    shape[*axis] = 0;
    for (int i = 0; i < n; i++) {
        const qat_tensor *x = xs[i];
        char s0[64], si[64];
        bool same = x->rank == rank;
        for (int d = 0; same && d < rank; d++) same = d == *axis || x->shape[d] == xs[0]->shape[d];
        if (!same || !qat_tensor_is_contiguous(x))
            return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: input %d %s does not match input 0 %s outside axis %d "
                                "(or is not contiguous)", op, i, qat_shape_str(x, si, sizeof si),
                                qat_shape_str(xs[0], s0, sizeof s0), *axis), false;
        shape[*axis] += x->shape[*axis];
    }
    return true;
}

qat_tensor *qat_concat(qat_ctx *ctx, int n, qat_tensor *const *xs, int axis) {
    int64_t shape[QAT_MAX_RANK];
    if (!ctx || !concat_check(ctx, n, xs, &axis, shape)) return NULL;
    int rank = xs[0]->rank;
    qat_tensor *y = qat__new_out(ctx, rank, shape);
    concat_saved *s = qat__step_alloc(ctx, sizeof *s);
    int64_t *len = qat__step_scratch(ctx, (size_t)n * sizeof(int64_t));
    qat_tensor **keep = qat__step_scratch(ctx, (size_t)n * sizeof(qat_tensor *));
    if (!y || !s || !len || !keep) return NULL;
    int64_t outer = 1, inner = 1, total = 0;
    for (int d = 0; d < axis; d++) outer *= shape[d];
    for (int d = axis + 1; d < rank; d++) inner *= shape[d];
    for (int i = 0; i < n; i++) total += len[i] = xs[i]->shape[axis] * inner;
    for (int64_t o = 0; o < outer; o++) {
        float *dst = y->data + o * total;
        for (int i = 0; i < n; dst += len[i], i++) memcpy(dst, xs[i]->data + o * len[i], (size_t)len[i] * sizeof(float));
    }
    memcpy(keep, xs, (size_t)n * sizeof(qat_tensor *));
    *s = (concat_saved){.n = n, .outer = outer, .total = total, .len = len, .xs = keep};
    qat_node *node = qat__record_n(ctx, "qat_concat", concat_bw, y, n, xs);
    if (node) node->saved = s, node->out_free = true;
    return y;
}
