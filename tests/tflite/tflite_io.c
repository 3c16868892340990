/* tflite_io: the integers a .tflite file is compared on. For the first
 * LIMIT samples of a split of a data set, writes the input integers the
 * program quantizes them to (qat_input_quantize: the normalization, then
 * the input quantization), laid out as TFLite's input tensor — int8
 * [N, H, W, C] or [N, F] — and the output integers of qat's integer engine
 * run on the same raw samples, int8 [N, K].
 *
 *   tflite_io MODEL.qat.h5 DATA SPLIT LIMIT INPUTS.npy OUTPUTS.npy
 *
 * DATA: anything `qat eval --data` reads (IDX, HDF5, .npy directory);
 * SPLIT: train or test. Exit 0, or 2 with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"

static int fail(qat_ctx *ctx, const char *what) {
    fprintf(stderr, "tflite_io: %s%s%s\n", what, ctx ? ": " : "", ctx ? qat_ctx_error(ctx) : "");
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: tflite_io MODEL.qat.h5 DATA SPLIT LIMIT INPUTS.npy OUTPUTS.npy\n");
        return 2;
    }
    qat_split split = !strcmp(argv[3], "train") ? QAT_SPLIT_TRAIN : QAT_SPLIT_TEST;
    long limit = atol(argv[4]);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q;
    qat_dataset *d = NULL;
    qat_dataset_options opt = qat_dataset_defaults();
    opt.splits = 1u << split;
    if (!ctx || qat_qmodel_load(ctx, argv[1], &q) != QAT_OK || qat_dataset_open(ctx, argv[2], &opt, &d) != QAT_OK)
        return fail(ctx, "reading");
    const qat_split_info *info = qat_dataset_info(d, split);
    const qat_qtensor *in = &q.tensors[q.input];
    int64_t n = info->n < limit ? info->n : limit, per = qat_qtensor_numel(in);
    int64_t K = qat_qtensor_numel(&q.tensors[q.output]), B = 256;
    float *x = malloc((size_t)(B * per) * sizeof *x), *logits = malloc((size_t)(B * K) * sizeof *logits);
    int8_t *xq = malloc((size_t)(B * per)), *xin = malloc((size_t)(n * per)), *yq = malloc((size_t)(n * K));
    int32_t *idx = malloc((size_t)B * sizeof *idx), *lq = malloc((size_t)(B * K) * sizeof *lq);
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, (int)B);
    if (!x || !logits || !xq || !xin || !yq || !idx || !lq || !e) return fail(ctx, "setting up");
    int64_t C = in->rank == 3 ? in->shape[0] : 1, HW = per / C;
    for (int64_t s = 0; s < n; s += B) {
        int64_t b = n - s < B ? n - s : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(s + i);
        if (qat_dataset_read(d, split, idx, b, x, NULL, NULL, NULL) != QAT_OK ||
            qat_engine_run(e, x, b, logits, lq) != QAT_OK)
            return fail(ctx, "running");
        qat_input_quantize(&q, x, b, xq);
        for (int64_t i = 0; i < b; i++) {
            for (int64_t c = 0; c < C; c++) /* [C, H, W] -> [H, W, C] */
                for (int64_t p = 0; p < HW; p++) xin[(s + i) * per + p * C + c] = xq[i * per + c * HW + p];
            for (int64_t k = 0; k < K; k++) yq[(s + i) * K + k] = (int8_t)lq[i * K + k];
        }
    }
    int64_t xs[4] = {n, in->rank == 3 ? in->shape[1] : per, in->rank == 3 ? in->shape[2] : 0, C}, ys[2] = {n, K};
    if (in->rank != 3) xs[2] = 0;
    int xr = in->rank == 3 ? 4 : 2;
    if (qat_npy_save(ctx, argv[5], QAT_DT_I8, xr, xs, xin) != QAT_OK || qat_npy_save(ctx, argv[6], QAT_DT_I8, 2, ys, yq) != QAT_OK)
        return fail(ctx, "writing");
    fprintf(stderr, "tflite_io: %lld samples of %s\n", (long long)n, argv[2]);
    free(x), free(logits), free(xq), free(xin), free(yq), free(idx), free(lq);
    qat_engine_free(e);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
    return 0;
}
