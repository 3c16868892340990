/* A small residual network built through the public API, trained on MNIST
 * with quantization-aware training, exported to integers and evaluated by
 * the integer engine: training small QAT models from C, in one file.
 *   residual MNIST_DIR [OUT.qat.h5] [TRAIN_SAMPLES]                         */
#include <stdio.h>
#include <stdlib.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/optim.h"

enum { B = 64 };

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: residual MNIST_DIR [OUT.qat.h5] [TRAIN_SAMPLES]\n"), 2;
    const char *out = argc > 2 ? argv[2] : "residual.qat.h5";
    qat_ctx *ctx = qat_ctx_new();
    qat_mnist train = {0}, test = {0};
    if (qat_mnist_load(ctx, argv[1], "train", &train) || qat_mnist_load(ctx, argv[1], "test", &test)) goto fail;
    int64_t n = argc > 3 ? atol(argv[3]) : train.n;
    n = n > 0 && n < train.n ? n : train.n;

    /* stem (stride 2) -> relu -> [conv -> relu -> conv] + the stem -> relu -> max pool -> fc */
    qat_model *m = qat_model_new(ctx);
    qat_model_set_input_shape(m, 3, (int64_t[]){1, 28, 28});
    qat_conv2d_spec stem = qat_conv2d_square(1, 16, 3, 2, 1, true), body = qat_conv2d_square(16, 16, 3, 1, 1, true);
    int x = qat_layer_relu(m, NULL, qat_layer_conv2d(m, "stem", qat_model_input(m), &stem));
    int y = qat_layer_conv2d(m, "conv_b", qat_layer_relu(m, NULL, qat_layer_conv2d(m, "conv_a", x, &body)), &body);
    int r = qat_layer_relu(m, NULL, qat_layer_add(m, "residual", y, x));
    qat_pool2d_spec pool = {.kh = 2, .kw = 2}; /* stride: the window */
    qat_layer_linear(m, "fc", qat_layer_flatten(m, NULL, qat_layer_maxpool2d(m, NULL, r, &pool)), 16 * 7 * 7, 10, true);
    if (qat_model_build(m, 1) || qat_prepare(m, NULL)) goto fail; /* W8A8, per-channel weights */

    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    if (qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m))) goto fail;
    int32_t idx[B], labels[B];
    for (int64_t s = 0; s + B <= n; s += B) { /* one pass, in order */
        qat_tensor *xb = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){B, 1, 28, 28}, false);
        for (int i = 0; i < B; i++) idx[i] = (int32_t)(s + i);
        if (xb) qat_mnist_batch(&train, idx, B, xb->data, labels);
        if (qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, xb), labels))) goto fail;
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), oc.lr);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }

    int64_t peak = 0; /* export: the integer program, in a file */
    if (qat_export(m, 0, NULL, "{\"example\": \"residual\"}", out, &peak)) goto fail;
    qat_qmodel q;
    if (qat_qmodel_load(ctx, out, &q)) goto fail;
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, B);
    float *xt = malloc(sizeof(float) * B * 784), logits[B * 10];
    int64_t correct = 0, total = test.n / B * B;
    for (int64_t s = 0; e && xt && s < total; s += B) {
        for (int i = 0; i < B; i++) idx[i] = (int32_t)(s + i);
        qat_mnist_batch(&test, idx, B, xt, labels);
        if (qat_engine_run(e, xt, B, logits, NULL)) break;
        for (int i = 0; i < B; i++) {
            int best = 0;
            for (int k = 1; k < 10; k++) best = logits[i * 10 + k] > logits[i * 10 + best] ? k : best;
            correct += best == labels[i];
        }
    }
    printf("residual: %lld training samples, %s (%lld activation bytes per sample), integer engine: %.2f %% on %lld "
           "test images\n", (long long)n, out, (long long)peak, 100.0 * (double)correct / (double)total, (long long)total);
    qat_engine_free(e);
    free(xt);
    if (qat_ctx_status(ctx) == QAT_OK) goto done;
fail:
    fprintf(stderr, "residual: %s\n", qat_ctx_error(ctx));
done:
    qat_mnist_free(&train), qat_mnist_free(&test);
    int rc = qat_ctx_status(ctx) == QAT_OK ? 0 : 1;
    qat_ctx_free(ctx);
    return rc;
}
