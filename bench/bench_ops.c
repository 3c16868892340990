/* Where the integer runtime's time goes: each op of a quantized model run
 * alone over a batch (after the ops before it), best of REPS, in thread
 * CPU time (this VM's other tenants inflate wall time, far less CPU time),
 * with its multiply-adds and the rate it reached. Not a test.
 *   bench_ops MODEL.qat.h5 [BATCH] [REPS] [LEVEL]
 * LEVEL: 0 portable, 1 AVX2, 2 AVX-VNNI (its EVEX form on an AVX-512 VNNI
 * machine without AVX-VNNI), 3 AVX-512 VNNI (int16), 4 AVX-512 VNNI int8
 * (default: the best this CPU has). */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <string.h>

#include "qat/export.h"
#include "internals.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Multiply-adds of one sample through op (0 for ops without a GEMM). */
static double macs(const qat_qmodel *q, const qat_qop *op) {
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return 0;
    double w = 1;
    for (int d = 0; d < op->wq.rank; d++) w *= (double)op->wq.shape[d];
    if (op->kind == QAT_QOP_LINEAR) return w;
    const qat_qtensor *y = &q->tensors[op->output];
    return w * (double)(y->shape[1] * y->shape[2]);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: bench_ops MODEL.qat.h5 [BATCH] [REPS] [LEVEL]\n"), 2;
    int batch = argc > 2 ? atoi(argv[2]) : 64, reps = argc > 3 ? atoi(argv[3]) : 20;
    qat__level level = argc > 4 ? (qat__level)atoi(argv[4]) : qat__cpu_level();
    if (batch < 1 || reps < 1 || level < 0 || level > qat__cpu_level()) return fprintf(stderr, "bench_ops: bad arguments\n"), 2;
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    if (qat_qmodel_load(ctx, argv[1], &q) != QAT_OK) return fprintf(stderr, "bench_ops: %s\n", qat_ctx_error(ctx)), 1;
    int64_t *off = calloc((size_t)(q.n_tensors + q.n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    if (qat_plan_program(&q, batch, off, &plan, msg, sizeof msg) != QAT_OK) return fprintf(stderr, "bench_ops: %s\n", msg), 1;
    uint8_t *consts = aligned_alloc(64, (size_t)qat__round_up(plan.const_bytes + 64, 64));
    int8_t *arena = aligned_alloc(64, (size_t)qat__round_up(plan.arena_bytes + 64, 64));
    uint8_t *scratch = aligned_alloc(64, (size_t)qat__round_up(plan.scratch_bytes + 64, 64));
    memset(arena, 0, (size_t)plan.arena_bytes), memset(scratch, 0, (size_t)plan.scratch_bytes);
    qat__runtime_prepare_level(&q, &plan, consts, level);
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    const qat_qtensor *in = &q.tensors[q.input];
    for (int64_t i = 0; i < batch * qat_qtensor_numel(in); i++)
        arena[plan.offset[q.input] + i] = (int8_t)(in->q.qmin + (int32_t)qat_rng_below(&rng, (uint32_t)(in->q.qmax - in->q.qmin + 1)));
    printf("bench_ops: %s, batch %d, level %s, best of %d, thread CPU time\n", argv[1], batch, qat__level_name(level), reps);
    printf("  %-4s %-14s %-16s %-6s %10s %7s %9s\n", "op", "kind", "name", "path", "us/sample", "share", "GMAC/s");
    double *t = calloc((size_t)q.n_ops, sizeof *t), total = 0, total_macs = 0;
    for (int i = 0; i < q.n_ops; i++) {
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_now();
            qat__runtime_run_ops(&q, &plan, consts, arena, scratch, batch, level, i, i + 1);
            double dt = cpu_now() - t0;
            best = dt < best ? dt : best;
        }
        t[i] = best / batch, total += t[i], total_macs += macs(&q, &q.ops[i]);
    }
    for (int i = 0; i < q.n_ops; i++) {
        const qat_qop *op = &q.ops[i];
        double mc = macs(&q, op);
        const char *path = qat__runtime_op_path(op, consts + plan.const_offset[i]);
        char kind[32];
        snprintf(kind, sizeof kind, "%s%s", qat_qop_kind_str(op->kind),
                 op->kind == QAT_QOP_CONV2D && op->groups > 1 ? "/g" : "");
        printf("  %-4d %-14s %-16.16s %-6s %10.3f %6.1f%% ", i, kind, op->name, path, 1e6 * t[i], 100 * t[i] / total);
        if (mc > 0) printf("%9.1f", mc / t[i] / 1e9);
        if (!strcmp(path, "int8")) { /* how the int8 path runs it */
            static const char *const kinds[] = {"linear", "dense4", "generic", "depthwise"};
            qat__op_geom g;
            qat__i8_geom i8;
            qat__op_geometry(&q, op, batch, &g);
            qat__i8_geometry(&q, op, &g, batch, &i8);
            printf("   %s%s K4 %d tile %dx%d, %d samples a pass", kinds[i8.kind],
                   i8.kind == QAT_I8_DENSE4 ? (i8.implicit ? " implicit" : " columns") : "", i8.K4, i8.R, 16 * i8.TT, i8.m);
        }
        printf("\n");
    }
    printf("  total %.2f us/sample = %.0f samples/s; %.2f M multiply-adds/sample, %.1f GMAC/s\n", 1e6 * total,
           1 / total, total_macs / 1e6, total_macs / total / 1e9);
    double whole = 1e30; /* the program at once: each op's input as the ops before left it in the caches */
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        qat__runtime_run_level(&q, &plan, consts, arena, scratch, batch, level);
        double dt = cpu_now() - t0;
        whole = dt < whole ? dt : whole;
    }
    printf("  whole program: %.2f us/sample = %.0f samples/s, %.1f GMAC/s\n", 1e6 * whole / batch, batch / whole,
           total_macs * batch / whole / 1e9);
    free(t), free(off), free(consts), free(arena), free(scratch);
    qat_ctx_free(ctx);
    return 0;
}
