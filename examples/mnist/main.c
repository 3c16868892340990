/* The library's whole flow on MNIST, in one short program:
 *
 *     data set -> model -> quantization-aware training -> integer program
 *              -> the integer engine on the raw test images
 *
 * Everything the `qat` tool adds (options, checkpoints, resume, MPI,
 * progress bars) is left out: this is what a program of your own needs.
 *
 *     build/examples/mnist/mnist-example [MNIST_DIR] [EPOCHS]
 *
 * MNIST_DIR holds the four IDX files (default data/mnist; the quick
 * start fetches them). */
#include <stdio.h>
#include <stdlib.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/layers.h"
#include "qat/train.h"

/* Says what went wrong (the context keeps the message) and gives up. */
static int fail(qat_ctx *ctx) {
    fprintf(stderr, "mnist-example: %s\n", qat_ctx_error(ctx));
    return 1;
}

/* One line after every epoch: the callbacks are how a program follows a run. */
static void on_epoch(void *user, const qat_epoch_report *r, qat_model *m) {
    (void)user, (void)m;
    printf("epoch %d: train loss %.4f, test accuracy %.2f %% (fake-quantized once QAT runs)\n", r->epoch,
           r->train_loss, 100 * r->test->accuracy);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "data/mnist";
    int epochs = argc > 2 ? atoi(argv[2]) : 1;
    if (epochs < 1) epochs = 1;
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return 1;
    int rc = 1;
    qat_dataset *data = NULL;
    qat_trainer *trainer = NULL;
    qat_engine *engine = NULL;
    qat_ctx *pctx = NULL;

    /* 1. The data: train and test splits of uint8 images [1, 28, 28] and class labels. */
    if (qat_dataset_open(ctx, dir, NULL, &data) != QAT_OK) goto done;

    /* 2. The model: LeNet-5, built with seed 1 (PyTorch's initialization). */
    qat_model *m = qat_model_new(ctx);
    if (!m || qat_model_lenet(m, false) != QAT_OK || qat_model_build(m, 1) != QAT_OK) goto done;

    /* 3. Quantization-aware training: W8A8 fake quantization from the first
     *    step, Adam with a cosine schedule. The normalization is MNIST's
     *    customary one and becomes part of the model: every target takes
     *    raw pixels. */
    qat_train_config c = qat_train_defaults();
    c.data = data;
    c.epochs = epochs;
    c.qat = true;
    c.norm_mode = QAT_NORM_GIVEN;
    c.norm = (qat_normalization){.channels = 1, .divisor = 255.0f, .mean = {0.1307f}, .std = {0.3081f},
                                 .raw_uint8 = true};
    c.on_epoch = on_epoch;
    if (qat_trainer_new(m, &c, &trainer) != QAT_OK || qat_trainer_run(trainer) != QAT_OK) goto done;
    const qat_train_result *r = qat_trainer_result(trainer);
    printf("trained: %.0f samples/s; fake-quantized %.2f %%, the same weights in float %.2f %%\n", r->samples_per_s,
           100 * r->test.accuracy, 100 * r->test_float.accuracy);

    /* 4. The integer program: lowered once, in a context of its own. */
    pctx = qat_ctx_new();
    qat_qmodel q;
    if (!pctx || qat_qmodel_lower(m, 0, NULL, pctx, &q) != QAT_OK) {
        if (pctx) fprintf(stderr, "mnist-example: %s\n", qat_ctx_error(pctx));
        goto done;
    }
    if (qat_qmodel_save(pctx, &q, "mnist-example.qat.h5") != QAT_OK) {
        fprintf(stderr, "mnist-example: %s\n", qat_ctx_error(pctx));
        goto done;
    }

    /* 5. The integer engine on the raw test images: integers only inside. */
    enum { BATCH = 100 };
    qat_task task = {.kind = QAT_TASK_CLASSIFY};
    qat_engine_eval how = {.batch = BATCH};
    qat_metrics ints;
    if (!(engine = qat_engine_new(ctx, &q, QAT_ENGINE_INT, BATCH)) ||
        qat_engine_evaluate(ctx, engine, &q, data, QAT_SPLIT_TEST, &task, &how, &ints) != QAT_OK)
        goto done;
    int64_t agree = 0;
    for (int64_t i = 0; i < ints.n; i++) agree += ints.predictions[i] == r->test.predictions[i];
    printf("integer engine: %.2f %% on %lld test images (%.0f samples/s); it agrees with the fake-quantized model "
           "on %.2f %%\nwrote mnist-example.qat.h5\n", 100 * ints.accuracy, (long long)ints.n,
           (double)ints.n / how.seconds, 100.0 * (double)agree / (double)ints.n);
    qat_metrics_free(&ints);
    rc = 0;
done:
    if (rc) fail(ctx);
    qat_engine_free(engine);
    qat_trainer_free(trainer);
    qat_dataset_free(data);
    qat_ctx_free(pctx);
    qat_ctx_free(ctx);
    return rc;
}
