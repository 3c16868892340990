/* Fake-quantize over 4 M floats, per-tensor and per-channel (256
 * channels), one thread. Reports G elements/s for
 *   - the forward op alone (output and STE mask);
 *   - the op's forward + backward with dy given, two ways:
 *       activation: x is a step tensor (another op's output), so its
 *         gradient is dy masked in place (x, y, mask and dy move);
 *       weight: x is a persistent leaf whose gradient accumulates
 *         (dx is read and written too);
 *   - forward + backward seeded through a sum, as a training step runs it
 *     on a weight: that also runs the sum and allocates and fills dy.
 *   bench/torch_fake_quant.py measures PyTorch's ops the same way. */
#include "bench_util.h"

#include <string.h>

#include "internals.h"
#include "qat/fakequant.h"

typedef struct {
    double fwd, act, weight, sum; /* G elements/s, best of the runs */
} rates;

static double best_of(double best, double t) { return t < best ? t : best; }

/* Seconds for the op's forward and its backward node, dy given (ones). */
static double op_pass(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, const float *ones, float *dy) {
    memcpy(dy, ones, (size_t)x->numel * sizeof(float));
    double t0 = bench_now();
    qat_tensor *y = qat_fake_quant(ctx, x, q, QAT_STE_CLIPPED);
    if (!y) return -1;
    y->grad = dy;
    y->node->backward(ctx, y->node);
    return bench_now() - t0;
}

static int run(qat_ctx *ctx, qat_tensor *x, qat_qtype *q, int iters, const float *ones, float *dy,
               rates *r) {
    double t_fwd = 1e30, t_act = 1e30, t_weight = 1e30, t_sum = 1e30;
    for (int it = 0; it < iters; it++) {
        /* through a sum, as training does */
        qat_tensor_zero_grad(x);
        double t0 = bench_now();
        qat_tensor *y = qat_fake_quant(ctx, x, q, QAT_STE_CLIPPED);
        double t1 = bench_now();
        if (qat_backward(ctx, qat_sum(ctx, y)) != QAT_OK) return -1;
        t_sum = best_of(t_sum, bench_now() - t0);
        t_fwd = best_of(t_fwd, t1 - t0);
        qat_ctx_step_reset(ctx);
        /* weight: the backward node adds into x's gradient */
        double t = op_pass(ctx, x, q, ones, dy);
        if (t < 0) return -1;
        t_weight = best_of(t_weight, t);
        qat_ctx_step_reset(ctx);
        /* activation: the same data as a step tensor: dy becomes dx in place */
        qat_tensor *a = qat_tensor_wrap(ctx, QAT_MEM_STEP, x->data, NULL, x->rank, x->shape);
        if (!a) return -1;
        a->requires_grad = true;
        t = op_pass(ctx, a, q, ones, dy);
        if (t < 0 || a->grad != dy) return -1; /* failed, or the in-place path did not run */
        t_act = best_of(t_act, t);
        qat_ctx_step_reset(ctx);
    }
    double n = (double)x->numel / 1e9;
    *r = (rates){n / t_fwd, n / t_act, n / t_weight, n / t_sum};
    return 0;
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
    float *ones = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)x->numel * sizeof(float));
    for (int64_t i = 0; ones && i < x->numel; i++) ones[i] = 1.0f;
    rates a, b;
    if (!dy || !ones || run(ctx, x, &pt, 10, ones, dy, &a) || run(ctx, x, &pc, 10, ones, dy, &b)) {
        fprintf(stderr, "bench_fake_quant: %s\n", qat_ctx_error(ctx));
        qat_ctx_free(ctx);
        return 1;
    }
    printf("fake quant over 4 M floats, 1 thread, OPENBLAS_CORETYPE=%s (OpenBLAS core %s) (G elements/s)\n", bench_coretype(), qat_blas_core());
    printf("               forward   fwd+bwd activation   fwd+bwd weight   fwd+bwd weight through a sum\n");
    printf("  per-tensor   %7.2f   %18.2f   %14.2f   %28.2f\n", a.fwd, a.act, a.weight, a.sum);
    printf("  per-channel  %7.2f   %18.2f   %14.2f   %28.2f\n", b.fwd, b.act, b.weight, b.sum);
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    qat_ctx_free(ctx);
    return 0;
}
