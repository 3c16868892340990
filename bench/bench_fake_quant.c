/* Fake-quantize over 4 M floats, per-tensor and per-channel (256
 * channels), one thread. Reports G elements/s for
 *   - the forward op alone (output and STE mask);
 *   - the op's forward + backward with dy given (the op's own work:
 *     x, y, mask, dy and dx move, ~22 bytes/element);
 *   - forward + backward seeded through a sum, as a training step runs it:
 *     that also runs the sum and allocates and fills dy. */
#include "bench_util.h"

#include <string.h>

#include "autograd/internal.h"
#include "qat/fakequant.h"

static double run(qat_ctx *ctx, qat_tensor *x, qat_qtype *q, int iters, double *fwd_rate, double *op_rate,
                  float *dy) {
    double best = 1e30, best_fwd = 1e30, best_op = 1e30;
    for (int it = 0; it < iters; it++) {
        qat_tensor_zero_grad(x);
        double t0 = bench_now();
        qat_tensor *y = qat_fake_quant(ctx, x, q, QAT_STE_CLIPPED);
        double t1 = bench_now();
        if (qat_backward(ctx, qat_sum(ctx, y)) != QAT_OK) return -1;
        double t = bench_now() - t0;
        best = t < best ? t : best;
        best_fwd = t1 - t0 < best_fwd ? t1 - t0 : best_fwd;
        qat_ctx_step_reset(ctx);
        /* the op alone: forward, then its backward node with a given dy */
        double t2 = bench_now();
        y = qat_fake_quant(ctx, x, q, QAT_STE_CLIPPED);
        y->grad = dy;
        y->node->backward(ctx, y->node);
        double t3 = bench_now() - t2;
        best_op = t3 < best_op ? t3 : best_op;
        qat_ctx_step_reset(ctx);
    }
    *fwd_rate = (double)x->numel / best_fwd / 1e9;
    *op_rate = (double)x->numel / best_op / 1e9;
    return (double)x->numel / best / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("usage: %s\n", argv[0]);
        return strcmp(argv[1], "--help") ? 2 : 0;
    }
    qat_ctx *ctx = qat_ctx_new();
    int64_t shape[2] = {256, 16384}; /* 4 M */
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, shape, true);
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 4 * qat_rng_normal(&rng);
    qat_qtype pt, pc;
    qat_qtype_init(ctx, &pt, 8, true, false, 2, shape, NULL);
    qat_qtype_init_axis(ctx, &pc, 8, true, true, 2, shape, 0);
    qat_qtype_calibrate(&pt, x->data, false);
    qat_qtype_calibrate(&pc, x->data, true);
    float *dy = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)x->numel * sizeof(float));
    for (int64_t i = 0; dy && i < x->numel; i++) dy[i] = 1.0f;
    double fa, fb, oa, ob, a = run(ctx, x, &pt, 10, &fa, &oa, dy), b = run(ctx, x, &pc, 10, &fb, &ob, dy);
    printf("fake quant over 4 M floats, 1 thread, OPENBLAS_CORETYPE=%s (G elements/s)\n", bench_coretype());
    printf("               forward   op forward+backward   forward+backward through a sum\n");
    printf("  per-tensor   %7.2f   %19.2f   %30.2f\n", fa, oa, a);
    printf("  per-channel  %7.2f   %19.2f   %30.2f\n", fb, ob, b);
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    qat_ctx_free(ctx);
    return a > 0 && b > 0 ? 0 : 1;
}
