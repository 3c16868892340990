/* Elementwise ops: add, sub, mul with broadcasting; scale; relu; clamp. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- broadcasting ---------------------------------------------------------------- */

/* Shapes right-aligned into 4 dims; a broadcast dim gets stride 0. */
typedef struct {
    int64_t shape[4];
    int64_t sa[4], sb[4];
} bcast;

static bool broadcast(qat_ctx *ctx, const char *op, const qat_tensor *a, const qat_tensor *b,
                      bcast *bc, int *rank) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int k = 0; k < 4; k++) {
        int da = a->rank - 4 + k, db = b->rank - 4 + k; /* right-aligned axes */
        int64_t na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
        if (na != nb && na != 1 && nb != 1) {
            char s1[64], s2[64];
            qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                         qat_shape_str(a, s1, sizeof s1), qat_shape_str(b, s2, sizeof s2));
            return false;
        }
        bc->shape[k] = na > nb ? na : nb;
        bc->sa[k] = (da >= 0 && na != 1) ? a->stride[da] : 0;
        bc->sb[k] = (db >= 0 && nb != 1) ? b->stride[db] : 0;
    }
    *rank = r;
    return true;
}

enum { OP_ADD, OP_SUB, OP_MUL };

/* Is operand stride set s the output's own layout (no broadcasting, no
 * transposition)? */
static bool dense(const bcast *bc, const int64_t *s) {
    int64_t step = 1;
    for (int k = 3; k >= 0; step *= bc->shape[k], k--)
        if (bc->shape[k] > 1 && s[k] != step) return false;
    return true;
}

/* Rows [r0, r1) of the output, a row being its last dimension. */
static void binary_forward(int op, const bcast *bc, const float *a, const float *b, float *y, int64_t r0, int64_t r1) {
    int64_t i = r0 * bc->shape[3];
    if (dense(bc, bc->sa) && dense(bc, bc->sb)) { /* a residual add: one run, not a row at a time */
        const float *restrict ra = a + i, *restrict rb = b + i;
        float *restrict ry = y + i;
        int64_t n = (r1 - r0) * bc->shape[3];
        switch (op) {
        case OP_ADD: for (int64_t j = 0; j < n; j++) ry[j] = ra[j] + rb[j]; break;
        case OP_SUB: for (int64_t j = 0; j < n; j++) ry[j] = ra[j] - rb[j]; break;
        default:     for (int64_t j = 0; j < n; j++) ry[j] = ra[j] * rb[j]; break;
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t i2 = r % bc->shape[2], i1 = r / bc->shape[2] % bc->shape[1], i0 = r / bc->shape[2] / bc->shape[1];
        const float *pa = a + i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
        const float *pb = b + i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
        int64_t n = bc->shape[3], ta = bc->sa[3], tb = bc->sb[3];
        float *py = y + i;
        if (ta == 1 && tb == 1) { /* whole rows (a residual add): loops the compiler vectorises */
            const float *restrict ra = pa, *restrict rb = pb;
            float *restrict ry = py;
            switch (op) {
            case OP_ADD: for (int64_t j = 0; j < n; j++) ry[j] = ra[j] + rb[j]; break;
            case OP_SUB: for (int64_t j = 0; j < n; j++) ry[j] = ra[j] - rb[j]; break;
            default:     for (int64_t j = 0; j < n; j++) ry[j] = ra[j] * rb[j]; break;
            }
            i += n;
            continue;
        }
        switch (op) {
        case OP_ADD: for (int64_t j = 0; j < n; j++) py[j] = pa[j * ta] + pb[j * tb]; break;
        case OP_SUB: for (int64_t j = 0; j < n; j++) py[j] = pa[j * ta] - pb[j * tb]; break;
        default:     for (int64_t j = 0; j < n; j++) py[j] = pa[j * ta] * pb[j * tb]; break;
        }
        i += n;
    }
}

/* Accumulates dy into ga (and gb) through the same index map; a broadcast
 * operand's elements receive the sum over the axes they were repeated on. */
static void binary_backward(int op, const bcast *bc, const float *a, const float *b,
                            const float *gy, float *ga, float *gb, int64_t r0, int64_t r1) {
    int64_t i = r0 * bc->shape[3];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i2 = r % bc->shape[2], i1 = r / bc->shape[2] % bc->shape[1], i0 = r / bc->shape[2] / bc->shape[1];
        int64_t oa = i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
        int64_t ob = i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
        int64_t n = bc->shape[3], ta = bc->sa[3], tb = bc->sb[3];
        for (int64_t j = 0; j < n; j++) {
            float g = gy[i + j];
            float da = op == OP_MUL ? g * b[ob + j * tb] : g;
            float db = op == OP_MUL ? g * a[oa + j * ta] : (op == OP_SUB ? -g : g);
            if (ga) ga[oa + j * ta] += da;
            if (gb) gb[ob + j * tb] += db;
        }
        i += n;
    }
}

typedef struct {
    int op;
    const bcast *bc;
    const float *a, *b, *gy;
    float *y, *ga, *gb;
} binary_job;

static void binary_forward_range(void *u, int64_t r0, int64_t r1) {
    const binary_job *j = u;
    binary_forward(j->op, j->bc, j->a, j->b, j->y, r0, r1);
}

static void binary_backward_range(void *u, int64_t r0, int64_t r1) {
    const binary_job *j = u;
    binary_backward(j->op, j->bc, j->a, j->b, j->gy, j->ga, j->gb, r0, r1);
}

static int64_t rows_of(const bcast *bc) { return bc->shape[0] * bc->shape[1] * bc->shape[2]; }
static int64_t row_grain(const bcast *bc) { return bc->shape[3] >= QAT__GRAIN ? 1 : QAT__GRAIN / bc->shape[3]; }

/* Does operand stride set s cover the output without repeating an
 * element (no broadcasting)? Then its gradient's rows are disjoint. */
static bool full(const bcast *bc, const int64_t *s) {
    for (int k = 0; k < 4; k++)
        if (bc->shape[k] > 1 && s[k] == 0) return false;
    return true;
}

static bool recompute_bcast(qat_node *n, bcast *bc) {
    int r;
    return broadcast(NULL, "", n->in[0], n->in[1], bc, &r);
}

/* The residual add's backward without broadcasting: both gradients are
 * dy. The first operand takes dy's buffer itself when it can (no pass),
 * the second stores or adds a copy. */
typedef struct {
    const float *g;
    float *dst;
    bool store;
} pass_job;

static void pass_range(void *u, int64_t i0, int64_t i1) {
    const pass_job *j = u;
    const float *restrict g = j->g;
    float *restrict d = j->dst;
    if (j->store) memcpy(d + i0, g + i0, (size_t)(i1 - i0) * sizeof(float));
    else
        for (int64_t i = i0; i < i1; i++) d[i] += g[i];
}

static bool contiguous_same(const qat_tensor *t, const qat_tensor *out) {
    if (t->rank != out->rank || !qat_tensor_is_contiguous(t)) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] != out->shape[d]) return false;
    return true;
}

static bool add_bw_plain(qat_ctx *ctx, qat_node *n) {
    qat_tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    if (n->i[0] != OP_ADD || a == b || !contiguous_same(a, y) || !contiguous_same(b, y)) return false;
    const float *g = y->grad;
    if (qat__wants_grad(a)) {
        float *ra = qat__grad_reuse(a, y); /* y's gradient buffer is a's now */
        if (ra) g = ra;
        else {
            float *ga = qat__grad(ctx, a);
            if (!ga) return true;
            pass_job j = {g, ga, false};
            qat__par_range(ctx, y->numel, QAT__GRAIN, pass_range, &j);
        }
    }
    if (qat__wants_grad(b)) {
        pass_job j = {g, NULL, false};
        if (!(j.dst = qat__grad_dst(ctx, b, &j.store))) return true;
        qat__par_range(ctx, y->numel, QAT__GRAIN, pass_range, &j);
    }
    return true;
}

static void binary_bw(qat_ctx *ctx, qat_node *n) {
    if (add_bw_plain(ctx, n)) return;
    bcast bc;
    recompute_bcast(n, &bc);
    qat_tensor *a = n->in[0], *b = n->in[1];
    float *ga = qat__wants_grad(a) ? qat__grad(ctx, a) : NULL;
    float *gb = qat__wants_grad(b) ? qat__grad(ctx, b) : NULL;
    if ((qat__wants_grad(a) && !ga) || (qat__wants_grad(b) && !gb)) return;
    binary_job j = {(int)n->i[0], &bc, a->data, b->data, n->out->grad, NULL, ga, gb};
    /* a broadcast operand's gradient sums over rows: one thread, in order */
    if ((ga && !full(&bc, bc.sa)) || (gb && !full(&bc, bc.sb))) binary_backward_range(&j, 0, rows_of(&bc));
    else qat__par_range(ctx, rows_of(&bc), row_grain(&bc), binary_backward_range, &j);
}

static qat_tensor *binary(qat_ctx *ctx, int op, const char *name, qat_tensor *a, qat_tensor *b) {
    qat_tensor *ins[2] = {a, b};
    if (!qat__inputs_ok(ctx, name, 2, ins)) return NULL;
    bcast bc;
    int rank;
    if (!broadcast(ctx, name, a, b, &bc, &rank)) return NULL;
    qat_tensor *y = qat__new_out(ctx, rank, bc.shape + (4 - rank));
    if (!y) return NULL;
    binary_job j = {op, &bc, a->data, b->data, NULL, y->data, NULL, NULL};
    if (bc.shape[3] > 0) qat__par_range(ctx, rows_of(&bc), row_grain(&bc), binary_forward_range, &j);
    qat_node *n = qat__record(ctx, name, binary_bw, y, a, b, NULL);
    if (n) n->i[0] = op, n->out_free = true; /* its backward reads the inputs */
    return y;
}

qat_tensor *qat_add(qat_ctx *ctx, qat_tensor *a, qat_tensor *b) { return binary(ctx, OP_ADD, "qat_add", a, b); }
qat_tensor *qat_sub(qat_ctx *ctx, qat_tensor *a, qat_tensor *b) { return binary(ctx, OP_SUB, "qat_sub", a, b); }
qat_tensor *qat_mul(qat_ctx *ctx, qat_tensor *a, qat_tensor *b) { return binary(ctx, OP_MUL, "qat_mul", a, b); }

/* ---- unary ----------------------------------------------------------------------- */

static bool unary_in(qat_ctx *ctx, const char *name, qat_tensor *x) {
    if (!qat__inputs_ok(ctx, name, 1, &x)) return false;
    if (!qat_tensor_is_contiguous(x)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: input must be contiguous", name);
        return false;
    }
    return true;
}

/* The unary ops' loops over a range of elements, for the pool. */
typedef struct {
    const float *x, *gy;
    float *y, *g;
    float lo, hi, c;
} unary_job;

static void scale_bw_range(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    for (int64_t i = i0; i < i1; i++) j->g[i] += j->c * j->gy[i];
}

static void scale_range(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    for (int64_t i = i0; i < i1; i++) j->y[i] = j->c * j->x[i];
}

static void scale_bw(qat_ctx *ctx, qat_node *n) {
    float *gx = qat__grad(ctx, n->in[0]);
    if (!gx) return;
    unary_job j = {.gy = n->out->grad, .g = gx, .c = n->f[0]};
    qat__par_range(ctx, n->out->numel, QAT__GRAIN, scale_bw_range, &j);
}

qat_tensor *qat_scale(qat_ctx *ctx, qat_tensor *x, float c) {
    if (!unary_in(ctx, "qat_scale", x)) return NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    unary_job j = {.x = x->data, .y = y->data, .c = c};
    qat__par_range(ctx, x->numel, QAT__GRAIN, scale_range, &j);
    qat_node *n = qat__record(ctx, "qat_scale", scale_bw, y, x, NULL, NULL);
    if (n) n->f[0] = c;
    return y;
}

/* Gradient passes where lo < x < hi, as PyTorch's hardtanh/relu backward:
 * at exactly 0 a ReLU passes no gradient. */
static void clamp_bw_inplace(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    const float *restrict x = j->x;
    float *g = j->g, lo = j->lo, hi = j->hi;
    for (int64_t i = i0; i < i1; i++) g[i] = ((x[i] > lo) & (x[i] < hi)) ? g[i] : 0.0f;
}

static void clamp_bw_add(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    const float *restrict x = j->x, *restrict gy = j->gy;
    float *restrict gx = j->g, lo = j->lo, hi = j->hi;
    for (int64_t i = i0; i < i1; i++) {
        float v = x[i];
        gx[i] += ((v > lo) & (v < hi)) ? gy[i] : 0.0f;
    }
}

static void clamp_bw(qat_ctx *ctx, qat_node *n) {
    unary_job j = {.x = n->in[0]->data, .lo = n->f[0], .hi = n->f[1], .gy = n->out->grad};
    if ((j.g = qat__grad_reuse(n->in[0], n->out))) { /* in place */
        qat__par_range(ctx, n->in[0]->numel, QAT__GRAIN, clamp_bw_inplace, &j);
        return;
    }
    if (!(j.g = qat__grad(ctx, n->in[0]))) return;
    qat__par_range(ctx, n->out->numel, QAT__GRAIN, clamp_bw_add, &j);
}

static void clamp_range(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    float lo = j->lo, hi = j->hi;
    for (int64_t i = i0; i < i1; i++) {
        float v = j->x[i];
        j->y[i] = v < lo ? lo : (v > hi ? hi : v);
    }
}

qat_tensor *qat_clamp(qat_ctx *ctx, qat_tensor *x, float lo, float hi) {
    if (!unary_in(ctx, "qat_clamp", x)) return NULL;
    if (!(lo <= hi)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_clamp: lo %g > hi %g", (double)lo, (double)hi);
        return NULL;
    }
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    unary_job j = {.x = x->data, .y = y->data, .lo = lo, .hi = hi};
    qat__par_range(ctx, x->numel, QAT__GRAIN, clamp_range, &j);
    qat_node *n = qat__record(ctx, "qat_clamp", clamp_bw, y, x, NULL, NULL);
    if (n) n->out_free = true; /* its backward reads the input */
    if (n) {
        n->f[0] = lo;
        n->f[1] = hi;
    }
    return y;
}

/* clamp written over x (a ReLU when hi is +inf), for a caller that knows
 * nothing else reads x: x's step tensor, and if the step is recorded, x's
 * producer must not read its output in backward (out_free). Otherwise a
 * new tensor, as qat_clamp. Its backward reads the output instead of the
 * input, which gives the same mask: lo < y < hi exactly where lo < x < hi
 * (y = x there; y is lo or hi, or NaN for a NaN, elsewhere), and y > 0
 * exactly where x > 0 for a ReLU (whose forward maps NaN to 0). */
static void clamp_out_bw(qat_ctx *ctx, qat_node *n) {
    float lo = n->f[0], hi = n->f[1];
    const float *restrict y = n->out->data;
    float *g = qat__grad_reuse(n->in[0], n->out);
    if (g) {
        for (int64_t i = 0; i < n->out->numel; i++) g[i] = ((y[i] > lo) & (y[i] < hi)) ? g[i] : 0.0f;
        return;
    }
    float *restrict gx = qat__grad(ctx, n->in[0]);
    const float *restrict gy = n->out->grad;
    if (!gx) return;
    for (int64_t i = 0; i < n->out->numel; i++) {
        float v = y[i], d = gy[i];
        gx[i] += ((v > lo) & (v < hi)) ? d : 0.0f;
    }
}

qat_tensor *qat__clamp_over(qat_ctx *ctx, qat_tensor *x, float lo, float hi) {
    if (!unary_in(ctx, "qat_clamp", x)) return NULL;
    bool record = qat_ctx_grad_enabled(ctx) && x->requires_grad;
    if (!(lo <= hi) || x->mem != QAT_MEM_STEP || (record && !(x->node && x->node->out_free)))
        return hi == INFINITY && lo == 0.0f ? qat_relu(ctx, x) : qat_clamp(ctx, x, lo, hi);
    qat_tensor *y = qat_tensor_wrap(ctx, QAT_MEM_STEP, x->data, NULL, x->rank, x->shape);
    if (!y) return NULL;
    float *v = y->data;
    if (hi == INFINITY && lo == 0.0f)
        for (int64_t i = 0; i < y->numel; i++) v[i] = v[i] > 0.0f ? v[i] : 0.0f; /* relu's forward */
    else
        for (int64_t i = 0; i < y->numel; i++) v[i] = v[i] < lo ? lo : (v[i] > hi ? hi : v[i]);
    qat_node *n = qat__record(ctx, "qat_clamp", clamp_out_bw, y, x, NULL, NULL);
    if (n) n->f[0] = lo, n->f[1] = hi; /* out_free stays false: backward reads y */
    return y;
}

/* y = 1/x, dy/dx = -y^2 */
static void reciprocal_bw(qat_ctx *ctx, qat_node *n) {
    float *restrict gx = qat__grad(ctx, n->in[0]);
    const float *restrict gy = n->out->grad, *restrict y = n->out->data;
    if (!gx) return;
    for (int64_t i = 0; i < n->out->numel; i++) gx[i] -= gy[i] * y[i] * y[i];
}

qat_tensor *qat_reciprocal(qat_ctx *ctx, qat_tensor *x) {
    if (!unary_in(ctx, "qat_reciprocal", x)) return NULL;
    for (int64_t i = 0; i < x->numel; i++)
        if (x->data[i] == 0.0f)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_reciprocal: element %lld is zero", (long long)i), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    for (int64_t i = 0; i < x->numel; i++) y->data[i] = 1.0f / x->data[i];
    qat__record(ctx, "qat_reciprocal", reciprocal_bw, y, x, NULL, NULL);
    return y;
}

/* From the input (x > 0 where relu(x) > 0), so that the output is free
 * for an op that writes over it (out_free). */
static void relu_bw_inplace(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    const float *restrict y = j->x;
    float *g = j->g;
    for (int64_t i = i0; i < i1; i++) g[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

static void relu_bw_add(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    const float *restrict y = j->x, *restrict gy = j->gy;
    float *restrict gx = j->g;
    /* load unconditionally, then select: lets the compiler vectorise */
    for (int64_t i = i0; i < i1; i++) {
        float g = gy[i];
        gx[i] += y[i] > 0.0f ? g : 0.0f;
    }
}

static void relu_bw(qat_ctx *ctx, qat_node *n) {
    unary_job j = {.x = n->in[0]->data, .gy = n->out->grad};
    if ((j.g = qat__grad_reuse(n->in[0], n->out))) { /* in place */
        qat__par_range(ctx, n->out->numel, QAT__GRAIN, relu_bw_inplace, &j);
        return;
    }
    if (!(j.g = qat__grad(ctx, n->in[0]))) return;
    qat__par_range(ctx, n->out->numel, QAT__GRAIN, relu_bw_add, &j);
}

static void relu_range(void *u, int64_t i0, int64_t i1) {
    const unary_job *j = u;
    for (int64_t i = i0; i < i1; i++) j->y[i] = j->x[i] > 0.0f ? j->x[i] : 0.0f;
}

qat_tensor *qat_relu(qat_ctx *ctx, qat_tensor *x) {
    if (!unary_in(ctx, "qat_relu", x)) return NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    unary_job j = {.x = x->data, .y = y->data};
    qat__par_range(ctx, x->numel, QAT__GRAIN, relu_range, &j);
    qat_node *n = qat__record(ctx, "qat_relu", relu_bw, y, x, NULL, NULL);
    if (n) n->out_free = true;
    return y;
}
