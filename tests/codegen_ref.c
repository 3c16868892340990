/* The reference side of the microcontroller tests (tests/mcu/run.sh):
 * the first N test samples of a data set through qat's integer engine.
 *   codegen_ref MODEL.qat.h5 DATA N INPUTS.f32 EXPECTED.txt
 * DATA: anything `qat eval --data` reads (an IDX directory such as MNIST's,
 * an HDF5 file, a .npy directory). Writes the samples as the model takes
 * them (raw float32: the model's normalization is inside every target)
 * and the engine's output integers in host_main.c's format
 * ("i: v0 v1 ..."), so the generated code's outputs can be compared byte
 * for byte. */
#include <stdio.h>
#include <stdlib.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"

int main(int argc, char **argv) {
    if (argc != 6) return fprintf(stderr, "usage: %s MODEL.qat.h5 DATA N INPUTS.f32 EXPECTED.txt\n", argv[0]), 2;
    int n = atoi(argv[3]);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    qat_dataset *d = NULL;
    qat_dataset_options opt = qat_dataset_defaults();
    opt.splits = 1u << QAT_SPLIT_TEST;
    qat_engine *e = NULL;
    FILE *fi = NULL, *fe = NULL;
    float *x = NULL;
    int32_t *y = NULL, *idx = NULL;
    int rc = 1;
    if (!ctx || qat_qmodel_load(ctx, argv[1], &q) != QAT_OK || qat_dataset_open(ctx, argv[2], &opt, &d) != QAT_OK)
        goto done;
    const qat_split_info *info = qat_dataset_info(d, QAT_SPLIT_TEST);
    int64_t in = qat_qtensor_numel(&q.tensors[q.input]), out = qat_qtensor_numel(&q.tensors[q.output]);
    if (n < 1 || !info || n > info->n || in != info->x_numel) {
        fprintf(stderr, "%s: %d samples of %lld values do not fit the model or the data\n", argv[0], n, (long long)in);
        goto done;
    }
    x = malloc(sizeof *x * (size_t)(n * in)), y = malloc(sizeof *y * (size_t)(n * out));
    idx = malloc(sizeof *idx * (size_t)n);
    if (!x || !y || !idx) goto done;
    for (int i = 0; i < n; i++) idx[i] = i;
    if (qat_dataset_read(d, QAT_SPLIT_TEST, idx, n, x, NULL, NULL, NULL) != QAT_OK) goto done;
    if (!(e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, n)) || qat_engine_run(e, x, n, NULL, y) != QAT_OK) goto done;
    fi = fopen(argv[4], "wb"), fe = fopen(argv[5], "w");
    if (!fi || !fe || fwrite(x, sizeof *x * (size_t)in, (size_t)n, fi) != (size_t)n) goto done;
    for (int i = 0; i < n; i++) {
        fprintf(fe, "%d:", i);
        for (int64_t k = 0; k < out; k++) fprintf(fe, " %d", y[i * out + k]);
        fprintf(fe, "\n");
    }
    rc = 0;
done:
    if (rc && ctx && qat_ctx_error(ctx)[0]) fprintf(stderr, "%s: %s\n", argv[0], qat_ctx_error(ctx));
    if (fi && fclose(fi) != 0) rc = 1;
    if (fe && fclose(fe) != 0) rc = 1;
    free(x), free(y), free(idx);
    qat_engine_free(e);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
    return rc;
}
