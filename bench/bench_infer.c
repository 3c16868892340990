/* Inference speed of a quantized checkpoint: every engine (int, hybrid,
 * fake) over the same inputs, batch B, one thread. Not a test.
 *   bench_infer MODEL.qat.h5 [BATCH] [SAMPLES] [MNIST_DIR] [ENGINES]
 * ENGINES: a comma list of int, hybrid, fake (default all three).
 * With MNIST_DIR the inputs are the real test images; otherwise a fixed
 * pseudo-random input (speed does not depend on the values). */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <string.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "usage: bench_infer MODEL.qat.h5 [BATCH] [SAMPLES] [MNIST_DIR] [ENGINES]\n");
        return argc < 2 ? 2 : 0;
    }
    int batch = argc > 2 ? atoi(argv[2]) : 64;
    long samples = argc > 3 ? atol(argv[3]) : 10000;
    if (batch < 1 || samples < batch) return fprintf(stderr, "bench_infer: bad batch or sample count\n"), 2;
    qat_set_threads(1);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = ctx ? qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q) : NULL;
    if (!q || qat_qmodel_load(ctx, argv[1], q) != QAT_OK)
        return fprintf(stderr, "bench_infer: %s\n", ctx ? qat_ctx_error(ctx) : "out of memory"), 1;
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = malloc((size_t)(samples * in) * sizeof *x), *logits = malloc((size_t)(batch * out) * sizeof *logits);
    if (!x || !logits) return fprintf(stderr, "bench_infer: out of memory\n"), 1;
    qat_mnist test = {0};
    if (argc > 4 && qat_mnist_load(ctx, argv[4], "test", &test) == QAT_OK && in == test.rows * test.cols) {
        int32_t *idx = malloc((size_t)samples * sizeof *idx), *y = malloc((size_t)samples * sizeof *y);
        for (long i = 0; i < samples; i++) idx[i] = (int32_t)(i % test.n);
        qat_mnist_batch(&test, idx, samples, x, y);
        free(idx), free(y);
    } else {
        qat_rng rng;
        qat_rng_seed(&rng, 1);
        for (long i = 0; i < samples * in; i++) x[i] = 2.0f * qat_rng_normal(&rng);
    }
    printf("bench_infer: %s, batch %d, %ld samples, 1 thread, level %s, int kernel %s, OPENBLAS_CORETYPE=%s (OpenBLAS core %s)\n",
           argv[1], batch, samples, qat_isa_str(qat_isa_active()), qat_runtime_kernel(), bench_coretype(), qat_blas_core());
    const char *engines = argc > 5 ? argv[5] : "int,hybrid,fake";
    for (int mode = QAT_ENGINE_INT; mode <= QAT_ENGINE_FAKE; mode++) {
        if (!strstr(engines, qat_engine_mode_str((qat_engine_mode)mode))) continue;
        qat_engine *e = qat_engine_new(ctx, q, (qat_engine_mode)mode, batch);
        if (!e) return fprintf(stderr, "bench_infer: %s\n", qat_ctx_error(ctx)), 1;
        double best = 1e30, best_cpu = 1e30;
        for (int rep = 0; rep < 3; rep++) { /* the best of three passes */
            double t0 = bench_now(), c0 = bench_cpu_now();
            for (long s = 0; s + batch <= samples; s += batch) qat_engine_run(e, x + s * in, batch, logits, NULL);
            double t = bench_now() - t0, c = bench_cpu_now() - c0;
            best = t < best ? t : best, best_cpu = c < best_cpu ? c : best_cpu;
        }
        /* and in this thread's CPU time: other processes on the machine inflate wall time far more */
        printf("  %-6s %10.0f samples/s  (%.0f samples/s of thread CPU time)\n", qat_engine_mode_str((qat_engine_mode)mode),
               (double)(samples / batch * batch) / best, (double)(samples / batch * batch) / best_cpu);
        qat_engine_free(e);
    }
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    qat_mnist_free(&test);
    free(x), free(logits);
    qat_ctx_free(ctx);
    return 0;
}
