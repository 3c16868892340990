/* The integer runtime on whatever architecture this is built for: runs
 * the hand-written programs of tests/programs.h (every op kind) on seeded
 * random inputs through qat_runtime alone and prints every output integer,
 * one sample a line. tests/aarch64/run.sh builds it for the host and for
 * aarch64 (run under qemu-aarch64) and compares the two prints: the
 * runtime's integers do not depend on the architecture. Exit 1 with a
 * message on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/runtime.h"

#define PROG_CHECK(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "runtime_main: %s does not hold\n", #cond);                                      \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#include "programs.h"

static void *zalloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64 + 64;
    void *p = aligned_alloc(64, n);
    PROG_CHECK(p != NULL);
    return memset(p, 0, n);
}

static void run(const qat_qmodel *q, const char *name, int n, uint64_t seed) {
    int64_t *off = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *off);
    qat_plan plan;
    char msg[320];
    qat_status st = qat_plan_program(q, n, off, &plan, msg, sizeof msg);
    if (st) fprintf(stderr, "runtime_main: %s: %s\n", name, msg);
    PROG_CHECK(st == QAT_OK);
    void *consts = zalloc((size_t)plan.const_bytes), *arena = zalloc((size_t)plan.arena_bytes);
    void *scratch = zalloc((size_t)plan.scratch_bytes);
    int64_t in = qat_qtensor_numel(&q->tensors[q->input]), out = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = malloc(sizeof *x * (size_t)(n * in));
    prog r = {.rng = seed};
    for (int64_t i = 0; i < n * in; i++) x[i] = q->norm ? (float)rnd_in(&r, 0, 255) : rnd_f(&r, -3.0f, 3.0f);
    qat_runtime_prepare(q, &plan, consts);
    qat_input_quantize(q, x, n, (int8_t *)arena + plan.offset[q->input]);
    PROG_CHECK(qat_runtime_run(q, &plan, consts, arena, scratch, n) == QAT_OK);
    const int8_t *y = (const int8_t *)arena + plan.offset[q->output];
    for (int s = 0; s < n; s++) {
        printf("%s %d:", name, s);
        for (int64_t i = 0; i < out; i++) printf(" %d", y[s * out + i]);
        printf("\n");
    }
    free(x), free(consts), free(arena), free(scratch), free(off);
}

int main(void) {
    prog p;
    program_a(&p);
    run(&p.q, "program_a", 9, 11);
    prog_free(&p);
    program_b(&p);
    run(&p.q, "program_b", 9, 12);
    prog_free(&p);
    program_c(&p);
    run(&p.q, "program_c", 9, 13);
    prog_free(&p);
    program_d(&p);
    run(&p.q, "program_d", 9, 14);
    prog_free(&p);
    program_e(&p);
    run(&p.q, "program_e", 9, 15);
    prog_free(&p);
    program_f(&p);
    run(&p.q, "program_f", 5, 16);
    prog_free(&p);
    fprintf(stderr, "%s\n", qat_runtime_kernel()); /* the kernels that ran, for the log */
    return 0;
}
