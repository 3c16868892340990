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

/* y [N, out] = x [N, in] · w [out, in]ᵀ + b [out] */
static void linear_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int N = (int)x->shape[0], IN = (int)x->shape[1], OUT = (int)w->shape[0];
    const float *dy = n->out->grad;
    if (qat__wants_grad(x)) { /* dx [N,in] (+)= dy [N,out] · w [out,in] */
        bool store;
        float *gx = qat__grad_dst(ctx, x, &store);
        if (!gx) return;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IN, OUT, 1.0f, dy, OUT,
                    w->data, IN, store ? 0.0f : 1.0f, gx, IN);
    }
    if (qat__wants_grad(w)) { /* dw [out,in] += dyᵀ · x */
        float *gw = qat__grad(ctx, w);
        if (!gw) return;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, N, 1.0f, dy, OUT, x->data,
                    IN, 1.0f, gw, IN);
    }
    if (qat__wants_grad(b)) {
        float *gb = qat__grad(ctx, b);
        if (!gb) return;
        for (int r = 0; r < N; r++)
            for (int o = 0; o < OUT; o++) gb[o] += dy[(int64_t)r * OUT + o];
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
    if (b)
        for (int64_t r = 0; r < N; r++)
            for (int64_t o = 0; o < OUT; o++) y->data[r * OUT + o] = b->data[o];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OUT, (int)IN, 1.0f, x->data,
                (int)IN, w->data, (int)IN, b ? 1.0f : 0.0f, y->data, (int)OUT);
    qat_node *n = qat__record(ctx, "qat_linear", linear_bw, y, x, w, b);
    if (n) n->out_free = true; /* its backward reads the inputs */
    return y;
}
