/* Integer inference with sub-channel weights, side by side with
 * per-channel weights on the same architecture, and what the block
 * conversions cost. Not a test.
 *   bench_subchannel PER_CHANNEL.qat.h5 SUB_CHANNEL.qat.h5 [BATCH] [SAMPLES] [MNIST_DIR] [ROUNDS]
 *
 * 1. The int engine on both files, alternating (per-channel, sub-channel,
 *    per-channel, ...) for ROUNDS rounds of the best of two passes, each
 *    side keeping its best: this machine's speed drifts between runs.
 * 2. Per linear/conv op of the sub-channel file, the kernel alone on one
 *    call's worth of input (a batch for a linear op, one sample's
 *    positions for a conv), three ways in turn for seven rounds of 0.03 s,
 *    each keeping its best:
 *      blocks    the op as it is: one conversion per block of each row;
 *      one block the same kernel with each row one block (a single
 *                conversion per row): the block machinery without the
 *                conversions' cost;
 *      gemm      the per-channel GEMM kernel on the same shapes.
 *    blocks - one block is the conversions' cost; one block - gemm is the
 *    rest (the indirect im2col rows, fewer rows per block). */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <string.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "internals.h"

static double engine_pass(qat_engine *e, const float *x, long samples, int batch, int64_t in, float *logits) {
    double t0 = bench_now();
    for (long s = 0; s + batch <= samples; s += batch) qat_engine_run(e, x + s * in, batch, logits, NULL);
    return (double)(samples / batch * batch) / (bench_now() - t0);
}

/* Calls per second of fn over about 0.03 s. */
static double rate(void (*fn)(const void *), const void *arg) {
    int calls = 0;
    double t0 = bench_now(), t;
    do {
        fn(arg);
        calls++;
    } while ((t = bench_now() - t0) < 0.03);
    return calls / t;
}

static void call_sc(const void *a) { qat__sc_gemm(a); }
static void call_gemm(const void *a) { qat__gemm_requant(a); }

static void *aligned(int64_t bytes) { return aligned_alloc(64, (size_t)qat__round_up(bytes > 0 ? bytes : 1, 64)); }

/* Kernel timings of op (sub-channel) over P positions. */
static void kernel_costs(const qat_qmodel *q, int i, int P, qat_ctx *ctx) {
    const qat_qop *op = &q->ops[i];
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    int Pp = (int)qat__round_up(P, QAT_PPAD), Kp = (int)qat__round_up(s.K, QAT_KPAD);
    int16_t *col = aligned((Kp * Pp + QAT_IM2COL_CHUNK) * (int64_t)sizeof(int16_t));
    for (int64_t k = 0; k < (int64_t)Kp * Pp; k++) col[k] = (int16_t)((k * 7919) % 255 - 127);
    int8_t *out = aligned(s.O * (int64_t)P);
    const qat_aparams *oq = &q->tensors[op->output].q;
    /* as it is */
    void *c = aligned(qat__sc_const_bytes(op));
    qat__sc_prepare(op, c);
    qat__sc_args a = {.op = op, .consts = c, .col = col, .O = (int)s.O, .P = P, .Pp = Pp, .zp = oq->zero_point,
                      .lo = op->act_min, .hi = op->act_max, .out = out, .so = P, .sp = 1};

    /* each row one block: the same weights, one conversion per row */
    qat_qop one = *op;
    int64_t shape[2] = {s.O, s.K}, block[2] = {1, s.K};
    qat_qtype_init_blocks(ctx, &one.wq, op->wq.bits, op->wq.is_signed, false, 2, shape, block, false);
    int32_t *bm = malloc((size_t)s.O * sizeof *bm), *bs = malloc((size_t)s.O * sizeof *bs);
    for (int64_t o = 0; o < s.O; o++) bm[o] = op->block_multiplier[o / s.rows_per_param * s.J], bs[o] = op->block_shift[o / s.rows_per_param * s.J];
    one.block_multiplier = bm, one.block_shift = bs;
    void *c1 = aligned(qat__sc_const_bytes(&one));
    qat__sc_prepare(&one, c1);
    qat__sc_args a1 = a;
    a1.op = &one, a1.consts = c1;

    /* the per-channel GEMM */
    int64_t rows = qat__round_up(s.O, QAT_WROWS);
    int16_t *w16 = aligned(rows * Kp * (int64_t)sizeof(int16_t));
    memset(w16, 0, (size_t)(rows * Kp) * sizeof *w16);
    for (int64_t o = 0; o < s.O; o++)
        for (int64_t k = 0; k < s.K; k++) w16[o * Kp + k] = (int16_t)op->weight[o * s.K + k];
    qat__gemm_args g = {.w = w16, .col = col, .O = (int)s.O, .P = P, .Kp = Kp, .Pp = Pp, .bias = op->bias,
                        .m0 = op->multiplier, .shift = op->shift, .zp = oq->zero_point, .lo = op->act_min,
                        .hi = op->act_max, .out = out, .so = P, .sp = 1};
    /* the three in turn, seven rounds, each keeping its best: the machine's speed drifts */
    double blocks = 0, single = 0, gemm = 0;
    for (int round = 0; round < 7; round++) {
        double v = rate(call_sc, &a);
        blocks = v > blocks ? v : blocks;
        v = rate(call_sc, &a1);
        single = v > single ? v : single;
        v = rate(call_gemm, &g);
        gemm = v > gemm ? v : gemm;
    }
    double ub = 1e6 / blocks, u1 = 1e6 / single, ug = 1e6 / gemm;
    printf("  op %d (%s %s) [%lld x %lld] in %lld blocks a row, %d positions: blocks %.2f us, one block %.2f us, "
           "gemm %.2f us; conversions %.2f us (%.0f%%), %lld per call\n",
           i, qat_qop_kind_str(op->kind), op->name, (long long)s.O, (long long)s.K, (long long)s.J, P, ub, u1, ug,
           ub - u1, 100.0 * (ub - u1) / ub, (long long)(s.O * s.J * P));
    free(col), free(out), free(c), free(c1), free(bm), free(bs), free(w16);
}

int main(int argc, char **argv) {
    if (argc < 3 || !strcmp(argv[1], "--help")) {
        fprintf(argc < 3 ? stderr : stdout,
                "usage: bench_subchannel PER_CHANNEL.qat.h5 SUB_CHANNEL.qat.h5 [BATCH] [SAMPLES] [MNIST_DIR] [ROUNDS]\n");
        return argc < 3 ? 2 : 0;
    }
    int batch = argc > 3 ? atoi(argv[3]) : 64, rounds = argc > 6 ? atoi(argv[6]) : 3;
    long samples = argc > 4 ? atol(argv[4]) : 10000;
    if (batch < 1 || samples < batch || rounds < 1) return fprintf(stderr, "bench_subchannel: bad arguments\n"), 2;
    qat_set_threads(1);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q[2];
    for (int m = 0; m < 2; m++) {
        q[m] = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q[m]);
        if (!q[m] || qat_qmodel_load(ctx, argv[1 + m], q[m]) != QAT_OK)
            return fprintf(stderr, "bench_subchannel: %s\n", qat_ctx_error(ctx)), 1;
    }
    int64_t in = qat_qtensor_numel(&q[0]->tensors[q[0]->input]), out = qat_qtensor_numel(&q[0]->tensors[q[0]->output]);
    if (in != qat_qtensor_numel(&q[1]->tensors[q[1]->input]))
        return fprintf(stderr, "bench_subchannel: the two models take different inputs\n"), 2;
    float *x = malloc((size_t)(samples * in) * sizeof *x), *logits = malloc((size_t)(batch * out) * sizeof *logits);
    qat_mnist test = {0};
    if (argc > 5 && qat_mnist_load(ctx, argv[5], "test", &test) == QAT_OK && in == test.rows * test.cols) {
        int32_t *idx = malloc((size_t)samples * sizeof *idx), *y = malloc((size_t)samples * sizeof *y);
        for (long i = 0; i < samples; i++) idx[i] = (int32_t)(i % test.n);
        qat_mnist_batch(&test, idx, samples, x, y);
        free(idx), free(y);
    } else {
        qat_rng rng;
        qat_rng_seed(&rng, 1);
        for (long i = 0; i < samples * in; i++) x[i] = 2.0f * qat_rng_normal(&rng);
    }
    const char *sk = "portable C";
    qat__sc_kernel(qat__sc_kernel(2, NULL) ? 2 : qat__sc_kernel(1, NULL) ? 1 : 0, &sk);
    printf("bench_subchannel: batch %d, %ld samples, 1 thread, per-channel kernel %s, sub-channel kernel %s, "
           "OPENBLAS_CORETYPE=%s (OpenBLAS core %s)\n", batch, samples, qat_runtime_kernel(), sk, bench_coretype(),
           qat_blas_core());
    qat_engine *e[2];
    for (int m = 0; m < 2; m++)
        if (!(e[m] = qat_engine_new(ctx, q[m], QAT_ENGINE_INT, batch)))
            return fprintf(stderr, "bench_subchannel: %s\n", qat_ctx_error(ctx)), 1;
    double best[2] = {0, 0};
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < 2; m++)
            for (int pass = 0; pass < 2; pass++) {
                double v = engine_pass(e[m], x, samples, batch, in, logits);
                best[m] = v > best[m] ? v : best[m];
            }
    printf("  per-channel  %s: %.0f samples/s\n  sub-channel  %s: %.0f samples/s (%.2fx the per-channel time)\n",
           argv[1], best[0], argv[2], best[1], best[0] / best[1]);
    printf("kernels alone (the sub-channel file's ops; best of many calls):\n");
    for (int i = 0; i < q[1]->n_ops; i++) {
        const qat_qop *op = &q[1]->ops[i];
        if (!qat_qop_subchannel(op)) continue;
        int P = batch;
        if (op->kind == QAT_QOP_CONV2D) P = (int)(q[1]->tensors[op->output].shape[1] * q[1]->tensors[op->output].shape[2]);
        kernel_costs(q[1], i, P, ctx);
    }
    qat_engine_free(e[0]), qat_engine_free(e[1]);
    free(x), free(logits);
    qat_mnist_free(&test);
    qat_ctx_free(ctx);
    return 0;
}
