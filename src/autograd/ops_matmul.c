/* Matrix products, all through cblas_sgemm: matmul with optional
 * transposes, and linear (x·wᵀ + b). Backward adds into an existing
 * gradient (beta = 1) and stores a first one (beta = 0). */
#include <cblas.h>

#include "internal.h"

int qat_set_threads(int n) {
    if (n >= 1) openblas_set_num_threads(n);
    return openblas_get_num_threads();
}

const char *qat_blas_core(void) {
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

static bool rank2_contig(qat_ctx *ctx, const char *op, const char *what, const qat_tensor *t) {
    if (t->rank != 2 || !qat_tensor_is_contiguous(t)) {
        char s[64];
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "%s: %s must be a contiguous matrix, has shape %s", op,
                     what, qat_shape_str(t, s, sizeof s));
        return false;
    }
    return true;
}

/* C = op(A)·op(B), op(A) [M, K], op(B) [K, N]. Then
 *   d op(A) = dC·op(B)ᵀ     d op(B) = op(A)ᵀ·dC
 * and a transposed operand receives the transpose of that. */
static void matmul_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *a = n->in[0], *b = n->in[1];
    bool ta = n->i[0], tb = n->i[1];
    int M = (int)n->out->shape[0], N = (int)n->out->shape[1];
    int K = (int)(ta ? a->shape[0] : a->shape[1]);
    const float *dc = n->out->grad;
    if (qat__wants_grad(a)) {
        bool store;
        float *ga = qat__grad_dst(ctx, a, &store);
        if (!ga) return;
        if (!ta) /* dA [M,K] = dC · op(B)ᵀ */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasNoTrans : CblasTrans, M, K, N,
                        1.0f, dc, N, b->data, (int)b->shape[1], store ? 0.0f : 1.0f, ga, K);
        else /* dA [K,M] = op(B) · dCᵀ */
            cblas_sgemm(CblasRowMajor, tb ? CblasTrans : CblasNoTrans, CblasTrans, K, M, N,
                        1.0f, b->data, (int)b->shape[1], dc, N, store ? 0.0f : 1.0f, ga, M);
    }
    if (qat__wants_grad(b)) {
        bool store;
        float *gb = qat__grad_dst(ctx, b, &store);
        if (!gb) return;
        if (!tb) /* dB [K,N] = op(A)ᵀ · dC */
            cblas_sgemm(CblasRowMajor, ta ? CblasNoTrans : CblasTrans, CblasNoTrans, K, N, M,
                        1.0f, a->data, (int)a->shape[1], dc, N, store ? 0.0f : 1.0f, gb, N);
        else /* dB [N,K] = dCᵀ · op(A) */
            cblas_sgemm(CblasRowMajor, CblasTrans, ta ? CblasTrans : CblasNoTrans, N, K, M,
                        1.0f, dc, N, a->data, (int)a->shape[1], store ? 0.0f : 1.0f, gb, K);
    }
}

qat_tensor *qat_matmul(qat_ctx *ctx, qat_tensor *a, qat_tensor *b, bool trans_a, bool trans_b) {
    qat_tensor *ins[2] = {a, b};
    if (!qat__inputs_ok(ctx, "qat_matmul", 2, ins)) return NULL;
    if (!rank2_contig(ctx, "qat_matmul", "a", a) || !rank2_contig(ctx, "qat_matmul", "b", b))
        return NULL;
    int64_t M = trans_a ? a->shape[1] : a->shape[0], K = trans_a ? a->shape[0] : a->shape[1];
    int64_t Kb = trans_b ? b->shape[1] : b->shape[0], N = trans_b ? b->shape[0] : b->shape[1];
    if (K != Kb) {
        char s1[64], s2[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_matmul: inner dimensions differ: %s%s x %s%s",
                            qat_shape_str(a, s1, sizeof s1), trans_a ? "ᵀ" : "",
                            qat_shape_str(b, s2, sizeof s2), trans_b ? "ᵀ" : ""),
               NULL;
    }
    int64_t shape[2] = {M, N};
    qat_tensor *y = qat__new_out(ctx, 2, shape);
    if (!y) return NULL;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a->data,
                (int)a->shape[1], b->data, (int)b->shape[1], 0.0f, y->data, (int)N);
    qat_node *n = qat__record(ctx, "qat_matmul", matmul_bw, y, a, b, NULL);
    if (n) {
        n->i[0] = trans_a;
        n->i[1] = trans_b;
    }
    return y;
}

/* y [N, out] = x [N, in] · w [out, in]ᵀ + b [out]
 *
 * On the pool, each product is cut into blocks sized by the product
 * alone, never by the thread count: one block per 2^20 multiply-adds, at
 * most 4, each a multiple of 16 rows or columns. y is cut by columns
 * (output features), dx by columns (input features), dw by rows (output
 * features), each block one sgemm over the whole inner dimension; db by
 * features. Blocks of the weight's side, not of the batch's: a block of
 * batch rows would pack the whole weight again in every call (the MLP's
 * first layer ran 1.7x slower that way), and each block packs the batch's
 * side again, hence at most 4. Every element is computed by one sgemm
 * call whose shape depends only on the sizes: the same bits on any number
 * of threads. */
static int64_t block_of(int64_t count, int64_t per_item) {
    if (count <= 0) return 1;
    int64_t blocks = (count * per_item + ((int64_t)1 << 20) - 1) >> 20;
    blocks = blocks < 1 ? 1 : blocks > 4 ? 4 : blocks;
    int64_t b = ((count + blocks - 1) / blocks + 15) / 16 * 16;
    return b > count ? count : b;
}

typedef struct {
    int N, IN, OUT;
    const float *x, *w, *b, *dy;
    float *y, *gx, *gw, *gb;
    bool store;
    int64_t rows; /* rows or columns per task */
} linear_job;

static void linear_fw_task(void *u, int64_t t, int worker) { /* y[:, o0:o1] = x · w[o0:o1]ᵀ (+ b) */
    const linear_job *j = u;
    (void)worker;
    int64_t o0 = t * j->rows, o1 = o0 + j->rows < j->OUT ? o0 + j->rows : j->OUT;
    if (j->b)
        for (int64_t r = 0; r < j->N; r++)
            for (int64_t o = o0; o < o1; o++) j->y[r * j->OUT + o] = j->b[o];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->N, (int)(o1 - o0), j->IN, 1.0f, j->x, j->IN,
                j->w + o0 * j->IN, j->IN, j->b ? 1.0f : 0.0f, j->y + o0, j->OUT);
}

static void linear_dx_task(void *u, int64_t t, int worker) { /* dx[:, i0:i1] (+)= dy · w[:, i0:i1] */
    const linear_job *j = u;
    (void)worker;
    int64_t i0 = t * j->rows, i1 = i0 + j->rows < j->IN ? i0 + j->rows : j->IN;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->N, (int)(i1 - i0), j->OUT, 1.0f, j->dy, j->OUT,
                j->w + i0, j->IN, j->store ? 0.0f : 1.0f, j->gx + i0, j->IN);
}

static void linear_dw_task(void *u, int64_t t, int worker) { /* dw += dyᵀ · x, rows of out */
    const linear_job *j = u;
    (void)worker;
    int64_t o0 = t * j->rows, o1 = o0 + j->rows < j->OUT ? o0 + j->rows : j->OUT;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(o1 - o0), j->IN, j->N, 1.0f, j->dy + o0, j->OUT, j->x,
                j->IN, 1.0f, j->gw + o0 * j->IN, j->IN);
}

static void linear_db_range(void *u, int64_t o0, int64_t o1) { /* each feature summed over rows in order */
    const linear_job *j = u;
    for (int r = 0; r < j->N; r++)
        for (int64_t o = o0; o < o1; o++) j->gb[o] += j->dy[(int64_t)r * j->OUT + o];
}

static void linear_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int N = (int)x->shape[0], IN = (int)x->shape[1], OUT = (int)w->shape[0];
    linear_job j = {.N = N, .IN = IN, .OUT = OUT, .x = x->data, .w = w->data, .dy = n->out->grad};
    if (qat__wants_grad(x)) {
        if (!(j.gx = qat__grad_dst(ctx, x, &j.store))) return;
        j.rows = block_of(IN, (int64_t)N * OUT);
        qat__par(ctx, (IN + j.rows - 1) / j.rows, linear_dx_task, &j);
    }
    if (qat__wants_grad(w)) {
        if (!(j.gw = qat__grad(ctx, w))) return;
        j.rows = block_of(OUT, (int64_t)IN * N);
        qat__par(ctx, (OUT + j.rows - 1) / j.rows, linear_dw_task, &j);
    }
    if (qat__wants_grad(b)) {
        if (!(j.gb = qat__grad(ctx, b))) return;
        qat__par_range(ctx, OUT, N >= QAT__GRAIN ? 1 : QAT__GRAIN / (N > 0 ? N : 1), linear_db_range, &j);
    }
}

qat_tensor *qat_linear(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    qat_tensor *ins[2] = {x, w};
    if (!qat__inputs_ok(ctx, "qat_linear", 2, ins)) return NULL;
    if (!rank2_contig(ctx, "qat_linear", "x", x) || !rank2_contig(ctx, "qat_linear", "w", w))
        return NULL;
    int64_t N = x->shape[0], IN = x->shape[1], OUT = w->shape[0];
    if (w->shape[1] != IN) {
        char s1[64], s2[64];
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_linear: x %s does not fit weight %s (want [N, %lld])",
                     qat_shape_str(x, s1, sizeof s1), qat_shape_str(w, s2, sizeof s2),
                     (long long)w->shape[1]);
        return NULL;
    }
    if (b && (b->numel != OUT || !qat_tensor_is_contiguous(b))) {
        qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_linear: bias has %lld elements, want %lld",
                     (long long)b->numel, (long long)OUT);
        return NULL;
    }
    int64_t shape[2] = {N, OUT};
    qat_tensor *y = qat__new_out(ctx, 2, shape);
    if (!y) return NULL;
    linear_job j = {.N = (int)N, .IN = (int)IN, .OUT = (int)OUT, .x = x->data, .w = w->data, .b = b ? b->data : NULL,
                    .y = y->data, .rows = block_of(OUT, N * IN)};
    if (N > 0) qat__par(ctx, (OUT + j.rows - 1) / j.rows, linear_fw_task, &j);
    qat_node *n = qat__record(ctx, "qat_linear", linear_bw, y, x, w, b);
    if (n) n->out_free = true; /* its backward reads the inputs */
    return y;
}
