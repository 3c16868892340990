/* The integer engine under each requantization rounding (qat_rounding),
 * side by side: the same program, its rounding switched in memory, one
 * engine each, rounds interleaved (double, single, double, ...) so that a
 * drift of the machine hits both. Not a test.
 *   bench_rounding MODEL.qat.h5 [BATCH] [SAMPLES] [ROUNDS]
 * Prints each rounding's min and median time per pass over SAMPLES
 * pseudo-random inputs (speed does not depend on the values), as
 * samples/s, at the ISA level QAT_MAX_ISA allows. */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <string.h>

#include "qat/export.h"
#include "qat/infer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "usage: bench_rounding MODEL.qat.h5 [BATCH] [SAMPLES] [ROUNDS]\n");
        return argc < 2 ? 2 : 0;
    }
    int batch = argc > 2 ? atoi(argv[2]) : 64, rounds = argc > 4 ? atoi(argv[4]) : 7;
    long samples = argc > 3 ? atol(argv[3]) : 10000;
    if (batch < 1 || samples < batch || rounds < 1 || rounds > 100)
        return fprintf(stderr, "bench_rounding: bad batch, sample count or rounds\n"), 2;
    qat_set_threads(1);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = ctx ? qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q) : NULL;
    if (!q || qat_qmodel_load(ctx, argv[1], q) != QAT_OK)
        return fprintf(stderr, "bench_rounding: %s\n", ctx ? qat_ctx_error(ctx) : "out of memory"), 1;
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]);
    float *x = malloc((size_t)(samples * in) * sizeof *x);
    if (!x) return fprintf(stderr, "bench_rounding: out of memory\n"), 1;
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    for (long i = 0; i < samples * in; i++) x[i] = 2.0f * qat_rng_normal(&rng);
    int64_t out = qat_qtensor_numel(&q->tensors[q->output]);
    int32_t *y = malloc((size_t)(batch * out) * sizeof *y);
    if (!y) return fprintf(stderr, "bench_rounding: out of memory\n"), 1;
    qat_engine *e[QAT_ROUNDING_COUNT];
    qat_qmodel p[QAT_ROUNDING_COUNT]; /* the same arrays; an engine reads its program's rounding as it runs */
    for (int r = 0; r < QAT_ROUNDING_COUNT; r++) {
        p[r] = *q, p[r].rounding = (qat_rounding)r;
        if (!(e[r] = qat_engine_new(ctx, &p[r], QAT_ENGINE_INT, batch)))
            return fprintf(stderr, "bench_rounding: %s\n", qat_ctx_error(ctx)), 1;
    }
    printf("bench_rounding: %s, batch %d, %ld samples, %d rounds, 1 thread, level %s, int kernel %s\n", argv[1], batch,
           samples, rounds, qat_isa_str(qat_isa_active()), qat_runtime_kernel());
    double t[QAT_ROUNDING_COUNT][100];
    for (int k = 0; k < rounds; k++)
        for (int r = 0; r < QAT_ROUNDING_COUNT; r++) {
            double c0 = bench_cpu_now(); /* thread CPU time: other processes inflate wall time far more */
            for (long s = 0; s + batch <= samples; s += batch) qat_engine_run(e[r], x + s * in, batch, NULL, y);
            t[r][k] = bench_cpu_now() - c0;
        }
    double n = (double)(samples / batch * batch);
    for (int r = 0; r < QAT_ROUNDING_COUNT; r++) {
        qsort(t[r], (size_t)rounds, sizeof **t, cmp_double);
        printf("  %-6s  min %9.0f samples/s  median %9.0f samples/s\n", qat_rounding_str((qat_rounding)r),
               n / t[r][0], n / t[r][rounds / 2]);
        qat_engine_free(e[r]);
    }
    printf("  peak RSS %.1f MiB\n", bench_peak_rss_mib());
    free(x), free(y);
    qat_ctx_free(ctx);
    return 0;
}
