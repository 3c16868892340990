/* Depthwise 3x3 convolution (stride 1, padding 1, groups == channels,
 * bias), forward + backward, one thread, batch 64, the shapes of a
 * MobileNet-like network on 28x28 MNIST: [64, 64, 14, 14] and
 * [64, 128, 7, 7]. The input is an activation (its gradient is computed,
 * as for any layer but the first), the weight and bias are parameters,
 * and dy is given. Reports samples/s (best of the runs), forward alone
 * and forward + backward. bench/bench_depthwise.sh runs PyTorch 1.13's
 * conv2d(..., groups=C) on the same shapes beside it.
 *   bench_depthwise [ITERS] */
#include "bench_util.h"

#include <string.h>

#include "internals.h"

typedef struct {
    int64_t N, C, H, W;
} shape4;

/* Best seconds of a forward alone and of a forward + backward. */
static int time_shape(qat_ctx *ctx, shape4 s, int iters, double *t_fwd, double *t_both) {
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    int64_t sx[4] = {s.N, s.C, s.H, s.W}, sw[4] = {s.C, 1, 3, 3}, sb[1] = {s.C};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, sx, false);
    qat_tensor *w = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, sw, true);
    qat_tensor *b = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, sb, true);
    float *dy = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)x->numel * sizeof(float));
    if (!x || !w || !b || !dy) return -1;
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng), dy[i] = qat_rng_normal(&rng);
    for (int64_t i = 0; i < w->numel; i++) w->data[i] = 0.3f * qat_rng_normal(&rng);
    qat_conv2d_params p = {1, 1, 1, 1, (int)s.C};
    *t_fwd = *t_both = 1e30;
    for (int it = 0; it < iters; it++) {
        /* the input as another op's output: a step tensor wanting a gradient */
        qat_tensor *a = qat_tensor_wrap(ctx, QAT_MEM_STEP, x->data, NULL, 4, sx);
        if (!a) return -1;
        a->requires_grad = true;
        double t0 = bench_now();
        qat_tensor *y = qat_conv2d_ex(ctx, a, w, b, &p);
        double t1 = bench_now();
        if (!y || !y->node) return -1;
        y->grad = dy;
        y->node->backward(ctx, y->node);
        double t2 = bench_now();
        if (qat_ctx_status(ctx) != QAT_OK || !a->grad) return -1;
        *t_fwd = t1 - t0 < *t_fwd ? t1 - t0 : *t_fwd;
        *t_both = t2 - t0 < *t_both ? t2 - t0 : *t_both;
        qat_ctx_step_reset(ctx);
    }
    return 0;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 30;
    if (iters < 1) {
        printf("usage: %s [ITERS]\n", argv[0]);
        return 2;
    }
    qat_ctx *ctx = qat_ctx_new();
    const shape4 shapes[2] = {{64, 64, 14, 14}, {64, 128, 7, 7}};
    printf("depthwise 3x3 conv, stride 1, padding 1, bias; 1 thread, best of %d; OPENBLAS_CORETYPE=%s "
           "(OpenBLAS core %s, not used by this op)\n", iters, bench_coretype(), qat_blas_core());
    for (int k = 0; k < 2; k++) {
        double tf, tb;
        if (!ctx || time_shape(ctx, shapes[k], iters, &tf, &tb)) {
            fprintf(stderr, "bench_depthwise: %s\n", ctx ? qat_ctx_error(ctx) : "no memory");
            qat_ctx_free(ctx);
            return 1;
        }
        shape4 s = shapes[k];
        printf("  qat [%lld, %lld, %lld, %lld]: forward %.0f samples/s, forward+backward %.0f samples/s\n",
               (long long)s.N, (long long)s.C, (long long)s.H, (long long)s.W, (double)s.N / tf, (double)s.N / tb);
    }
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    qat_ctx_free(ctx);
    return 0;
}
