/* Shared by the suites that train a model a little before they export,
 * compile or compare it. */
#ifndef QAT_TEST_MODEL_UTIL_H
#define QAT_TEST_MODEL_UTIL_H

#include <string.h>

#include "qat/layers.h"
#include "qat/optim.h"
#include "test_util.h"

/* steps Adam steps on batches of 8 normal samples of shape [rank], the
 * model's input, labels 0..7 modulo its outputs (observers and BatchNorm
 * move, the weights leave their initial values), then eval mode. */
static inline void qat_test_warm_up(qat_model *m, int rank, const int64_t *shape, int steps, qat_rng *rng) {
    qat_ctx *ctx = qat_model_ctx(m);
    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m));
    int64_t s[4] = {8, 0, 0, 0};
    CU_ASSERT_FATAL(rank >= 1 && rank <= 3);
    memcpy(s + 1, shape, (size_t)rank * sizeof *shape);
    for (int i = 0; i < steps; i++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, rank + 1, s, false);
        for (int64_t j = 0; x && j < x->numel; j++) x->data[j] = qat_rng_normal(rng);
        int32_t y[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        qat_tensor *out = qat_model_forward(m, x);
        int64_t K = out ? out->shape[1] : 1;
        for (int k = 0; k < 8; k++) y[k] %= (int32_t)K;
        CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, out, y)), QAT_OK);
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 1e-3f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    ASSERT_OK(ctx);
    qat_model_train(m, false);
}

#endif
