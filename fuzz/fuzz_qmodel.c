/* libFuzzer target: any bytes as a quantized model for qat_qmodel_load;
 * a file the loader accepts is then run by the integer engine on one
 * all-zero input (the loader's validation is what keeps the engine's
 * indexing in bounds, so the engine is part of what is tested). */
#include "fuzz_file.h"
#include "qat/export.h"
#include "qat/infer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qat_qmodel q; /* the tables live in ctx; the struct is small */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("qmodel");
    return 0;
}

static void run_int(qat_ctx *ctx) {
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, 1);
    if (!e) return; /* refused (e.g. wider than 8 bits): a message, not a crash */
    int64_t n_in = qat_qtensor_numel(&q.tensors[q.input]);
    int64_t n_out = qat_qtensor_numel(&q.tensors[q.output]);
    float *x = calloc((size_t)n_in, sizeof *x);
    float *logits = calloc((size_t)n_out, sizeof *logits);
    int32_t *logits_q = calloc((size_t)n_out, sizeof *logits_q);
    if (x && logits && logits_q) qat_engine_run(e, x, 1, logits, logits_q);
    free(x);
    free(logits);
    free(logits_q);
    qat_engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return 0;
    if (qat_qmodel_load(ctx, path, &q) == QAT_OK) run_int(ctx);
    qat_ctx_free(ctx);
    return 0;
}
