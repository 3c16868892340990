/* libFuzzer target: any bytes as a model file (docs/model-format.md) for
 * qat_model_from_file, held to small limits (qat_model_limits: 2^20
 * parameters, 4 MiB of layer outputs a sample, 256 layers) so that every
 * input runs in milliseconds; the limits' code is the same at any value.
 * A file it accepts is built, run forward on a batch of two (training
 * mode, then evaluation), prepared for QAT (qat_prepare's defaults), run
 * again so that its observers see data, lowered to the integer program
 * and, when lowering accepts it, checked (qat_qmodel_check: a program qat
 * lowers is one qat loads) and run by the integer engine. Refusals must
 * carry a message. */
#include "fuzz_file.h"

#include "qat/export.h"
#include "qat/infer.h"
#include "qat/layers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("qnet");
    return 0;
}

/* A failure must say why: the library's contract. */
static void must_explain(qat_ctx *ctx, qat_status st) {
    if (st != QAT_OK && !qat_ctx_error(ctx)[0]) abort();
}

/* One forward pass on a batch of two samples of the declared input shape
 * (values from a fixed pattern); the step's memory is given back. */
static bool forward(qat_model *m, qat_ctx *ctx, int rank, const int64_t *shape) {
    int64_t s[4] = {2, shape[0], shape[1], shape[2]};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, rank + 1, s, false);
    if (!x) return false;
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = (float)((i * 7919) % 255) / 64.0f - 2.0f;
    qat_tensor *y = qat_model_forward(m, x);
    must_explain(ctx, y ? QAT_OK : qat_ctx_status(ctx));
    qat_ctx_step_reset(ctx);
    return y != NULL;
}

static void run_int(qat_ctx *ctx, const qat_qmodel *q) {
    qat_engine *e = qat_engine_new(ctx, q, QAT_ENGINE_INT, 1);
    if (!e) return; /* refused (types the runtime does not run): a message, not a crash */
    int64_t n_in = qat_qtensor_numel(&q->tensors[q->input]), n_out = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = calloc((size_t)n_in, sizeof *x), *logits = calloc((size_t)n_out, sizeof *logits);
    int32_t *lq = calloc((size_t)n_out, sizeof *lq);
    if (x && logits && lq) qat_engine_run(e, x, 1, logits, lq);
    free(x), free(logits), free(lq);
    qat_engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return 0;
    qat_model *m = qat_model_new(ctx);
    qat_model_limits lim = {.max_params = 1 << 20, .max_activation_bytes = 1 << 22, .max_layers = 256};
    qat_status st = m ? qat_model_set_limits(m, &lim) : QAT_ERR_NOMEM;
    if (st == QAT_OK) st = qat_model_from_file(m, path);
    if (st == QAT_OK) st = qat_model_build(m, 1);
    must_explain(ctx, st);
    int64_t shape[3] = {1, 1, 1};
    int rank = st == QAT_OK ? qat_model_input_shape(m, shape) : 0;
    if (st == QAT_OK && rank && forward(m, ctx, rank, shape)) {
        qat_model_train(m, false);
        forward(m, ctx, rank, shape);
        st = qat_prepare(m, NULL);
        must_explain(ctx, st);
        qat_model_train(m, true);
        if (st == QAT_OK && forward(m, ctx, rank, shape)) {
            qat_model_train(m, false);
            qat_ctx *pctx = qat_ctx_new();
            qat_qmodel q;
            qat_status ls = pctx ? qat_qmodel_lower(m, 0, NULL, pctx, &q) : QAT_ERR_NOMEM;
            /* lowering's refusals go on the model's context (they name a layer), an arena's on ctx */
            if (ls != QAT_OK && !qat_ctx_error(ctx)[0]) must_explain(pctx, ls);
            if (ls == QAT_OK) {
                char msg[400];
                if (qat_qmodel_check(&q, msg, sizeof msg) != QAT_OK) abort(); /* lowering made a program qat refuses */
                run_int(pctx, &q);
            }
            qat_ctx_free(pctx);
        }
    }
    qat_ctx_free(ctx);
    return 0;
}
