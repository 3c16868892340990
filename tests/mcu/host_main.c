/* Runs a generated model on the host: N float images (IMAGES.f32, the
 * model's input layout, native float32) through NAME_quantize_input and
 * NAME_run; prints the output integers, one image a line ("i: v0 v1 ..."),
 * to OUT, writes the quantized inputs as C (INPUTS.inc, or "-" for none)
 * for the device harness (device_main.c), and the outputs through
 * NAME_dequantize_output as exact hex floats (DEQUANT, "i: %a %a ..."). Compiled by the tests with the
 * generated files:
 *   cc -DQAT_MODEL=lenet -DQAT_MODEL_UP=LENET -DQAT_MODEL_HEADER='"lenet.h"' host_main.c lenet.c lenet_io.c
 *   ./a.out IMAGES.f32 N OUT [INPUTS.inc|- [DEQUANT]]
 * With -DQAT_INPUT_U8 (a model whose normalization takes raw bytes), IMAGES
 * holds N samples of raw bytes, each quantized by NAME_quantize_input_u8
 * (the table); the harness checks that NAME_quantize_input on the floats
 * (float)b gives the same integers (exit 3 if not), and INPUTS.inc holds
 * the raw bytes, for the device harness to quantize on the device. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include QAT_MODEL_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define IN_SIZE CAT(QAT_MODEL_UP, _INPUT_SIZE)
#define OUT_SIZE CAT(QAT_MODEL_UP, _OUTPUT_SIZE)

/* Each inference is bracketed by these, where the instruction-count qemu
 * plugin (bench/m4cycles/insn_count.c) counts, under qemu-aarch64: never
 * inlined, with different bodies so that the linker cannot fold them. */
__attribute__((noinline)) void qat_mark_begin(void);
__attribute__((noinline)) void qat_mark_end(void);
void qat_mark_begin(void) { __asm__ volatile("nop"); }
void qat_mark_end(void) { __asm__ volatile("nop\n\tnop"); }

int main(int argc, char **argv) {
    if (argc < 4) return fprintf(stderr, "usage: %s IMAGES.f32 N OUT [INPUTS.inc|- [DEQUANT]]\n", argv[0]), 2;
    int n = atoi(argv[2]);
    bool want_inc = argc > 4 && strcmp(argv[4], "-");
    FILE *f = fopen(argv[1], "rb"), *o = fopen(argv[3], "w"), *inc = want_inc ? fopen(argv[4], "w") : NULL;
    FILE *dq = argc > 5 ? fopen(argv[5], "w") : NULL;
    if (!f || !o || (want_inc && !inc) || (argc > 5 && !dq)) return fprintf(stderr, "%s: cannot open the files\n", argv[0]), 1;
    static float x[IN_SIZE], r[OUT_SIZE];
    static int8_t q[IN_SIZE], y[OUT_SIZE];
#ifdef QAT_INPUT_U8
    static uint8_t xb[IN_SIZE];
    static int8_t qf[IN_SIZE];
    if (inc) fprintf(inc, "#define QAT_N_INPUTS %d\nstatic const uint8_t qat_inputs[%d][%d] = {\n", n, n, IN_SIZE);
#else
    if (inc) fprintf(inc, "#define QAT_N_INPUTS %d\nstatic const int8_t qat_inputs[%d][%d] = {\n", n, n, IN_SIZE);
#endif
    for (int i = 0; i < n; i++) {
#ifdef QAT_INPUT_U8
        if (fread(xb, sizeof xb, 1, f) != 1) return fprintf(stderr, "%s: short read at sample %d\n", argv[0], i), 1;
        CAT(QAT_MODEL, _quantize_input_u8)(xb, q);
        for (int k = 0; k < IN_SIZE; k++) x[k] = (float)xb[k];
        CAT(QAT_MODEL, _quantize_input)(x, qf);
        if (memcmp(q, qf, sizeof q))
            return fprintf(stderr, "%s: sample %d: the byte table and the float path differ\n", argv[0], i), 3;
#else
        if (fread(x, sizeof x, 1, f) != 1) return fprintf(stderr, "%s: short read at image %d\n", argv[0], i), 1;
        CAT(QAT_MODEL, _quantize_input)(x, q);
#endif
        qat_mark_begin();
        int rc = CAT(QAT_MODEL, _run)(q, y);
        qat_mark_end();
        if (rc != 0) return fprintf(stderr, "%s: run failed\n", argv[0]), 1;
        fprintf(o, "%d:", i);
        for (int k = 0; k < OUT_SIZE; k++) fprintf(o, " %d", y[k]);
        fprintf(o, "\n");
        if (dq) {
            CAT(QAT_MODEL, _dequantize_output)(y, r);
            fprintf(dq, "%d:", i);
            for (int k = 0; k < OUT_SIZE; k++) fprintf(dq, " %a", (double)r[k]);
            fprintf(dq, "\n");
        }
        if (inc) {
            fprintf(inc, "{");
#ifdef QAT_INPUT_U8
            for (int k = 0; k < IN_SIZE; k++) fprintf(inc, "%d,%s", xb[k], k % 32 == 31 ? "\n" : "");
#else
            for (int k = 0; k < IN_SIZE; k++) fprintf(inc, "%d,%s", q[k], k % 32 == 31 ? "\n" : "");
#endif
            fprintf(inc, "},\n");
        }
    }
    if (inc) fprintf(inc, "};\n");
    fclose(f);
    if (inc && fclose(inc) != 0) return 1;
    if (dq && fclose(dq) != 0) return 1;
    return fclose(o) != 0;
}
