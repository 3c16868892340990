/* Ready-made models: the MLP and LeNet-5 of the MNIST example. */
#include "qat/layers.h"

#define TRY(expr)                        \
    do {                                 \
        qat_status s_ = (expr);          \
        if (s_ != QAT_OK) return s_;     \
    } while (0)

qat_status qat_model_mlp(qat_model *m) {
    TRY(qat_model_set_input_shape(m, 1, (int64_t[]){784}));
    TRY(qat_model_add_linear(m, NULL, 784, 256, true));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_linear(m, NULL, 256, 128, true));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_linear(m, NULL, 128, 10, true));
    return QAT_OK;
}

qat_status qat_model_lenet(qat_model *m, bool bn) {
    TRY(qat_model_set_input_shape(m, 3, (int64_t[]){1, 28, 28}));
    TRY(qat_model_add_conv2d(m, NULL, 1, 6, 5, 1, 2, !bn));
    if (bn) TRY(qat_model_add_batchnorm(m, NULL, 6, 0.1f, 1e-5f));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_maxpool2d(m, 2, 2));
    TRY(qat_model_add_conv2d(m, NULL, 6, 16, 5, 1, 0, !bn));
    if (bn) TRY(qat_model_add_batchnorm(m, NULL, 16, 0.1f, 1e-5f));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_maxpool2d(m, 2, 2));
    TRY(qat_model_add_flatten(m));
    TRY(qat_model_add_linear(m, NULL, 400, 120, true));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_linear(m, NULL, 120, 84, true));
    TRY(qat_model_add_relu(m));
    TRY(qat_model_add_linear(m, NULL, 84, 10, true));
    return QAT_OK;
}
