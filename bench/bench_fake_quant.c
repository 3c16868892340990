/* Fake-quantize over 4 M floats, per-tensor and per-channel (256
 * channels), one thread. Reports G elements/s for the forward op alone
 * (output and STE mask) and for forward + backward, where backward is
 * seeded through a sum: that pass also allocates and fills dy and
 * accumulates dx, so it is bound by memory traffic (~40 bytes/element). */
#include "bench_util.h"

#include <string.h>

#include "qat/fakequant.h"

static double run(qat_ctx *ctx, qat_tensor *x, qat_qtype *q, int iters, double *fwd_rate) {
    double best = 1e30, best_fwd = 1e30;
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
    }
    *fwd_rate = (double)x->numel / best_fwd / 1e9;
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
    double fa, fb, a = run(ctx, x, &pt, 10, &fa), b = run(ctx, x, &pc, 10, &fb);
    printf("fake quant over 4 M floats, 1 thread, OPENBLAS_CORETYPE=%s\n", bench_coretype());
    printf("  per-tensor   forward %.2f G elements/s, forward+backward %.2f G elements/s\n", fa, a);
    printf("  per-channel  forward %.2f G elements/s, forward+backward %.2f G elements/s\n", fb, b);
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    qat_ctx_free(ctx);
    return a > 0 && b > 0 ? 0 : 1;
}
