/* Runs a generated model on the host: N float images (IMAGES.f32, the
 * model's input layout, native float32) through NAME_quantize_input and
 * NAME_run; prints the output integers, one image a line ("i: v0 v1 ..."),
 * to OUT, and writes the quantized inputs as C (INPUTS.inc) for the
 * device harness (device_main.c). Compiled by the tests with the
 * generated files:
 *   cc -DQAT_MODEL=lenet -DQAT_MODEL_UP=LENET -DQAT_MODEL_HEADER='"lenet.h"' host_main.c lenet.c lenet_io.c
 *   ./a.out IMAGES.f32 N OUT [INPUTS.inc] */
#include <stdio.h>
#include <stdlib.h>

#include QAT_MODEL_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define IN_SIZE CAT(QAT_MODEL_UP, _INPUT_SIZE)
#define OUT_SIZE CAT(QAT_MODEL_UP, _OUTPUT_SIZE)

int main(int argc, char **argv) {
    if (argc < 4) return fprintf(stderr, "usage: %s IMAGES.f32 N OUT [INPUTS.inc]\n", argv[0]), 2;
    int n = atoi(argv[2]);
    FILE *f = fopen(argv[1], "rb"), *o = fopen(argv[3], "w"), *inc = argc > 4 ? fopen(argv[4], "w") : NULL;
    if (!f || !o || (argc > 4 && !inc)) return fprintf(stderr, "%s: cannot open the files\n", argv[0]), 1;
    static float x[IN_SIZE];
    static int8_t q[IN_SIZE], y[OUT_SIZE];
    if (inc) fprintf(inc, "#define QAT_N_INPUTS %d\nstatic const int8_t qat_inputs[%d][%d] = {\n", n, n, IN_SIZE);
    for (int i = 0; i < n; i++) {
        if (fread(x, sizeof x, 1, f) != 1) return fprintf(stderr, "%s: short read at image %d\n", argv[0], i), 1;
        CAT(QAT_MODEL, _quantize_input)(x, q);
        if (CAT(QAT_MODEL, _run)(q, y) != 0) return fprintf(stderr, "%s: run failed\n", argv[0]), 1;
        fprintf(o, "%d:", i);
        for (int k = 0; k < OUT_SIZE; k++) fprintf(o, " %d", y[k]);
        fprintf(o, "\n");
        if (inc) {
            fprintf(inc, "{");
            for (int k = 0; k < IN_SIZE; k++) fprintf(inc, "%d,%s", q[k], k % 32 == 31 ? "\n" : "");
            fprintf(inc, "},\n");
        }
    }
    if (inc) fprintf(inc, "};\n");
    fclose(f);
    if (inc && fclose(inc) != 0) return 1;
    return fclose(o) != 0;
}
