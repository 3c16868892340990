/* Layers and the model container: naming, parameter counts, seeded
 * initialisation, BatchNorm train vs eval, gradient checks through whole
 * models, and misuse. */
#include <string.h>

#include "qat/layers.h"
#include "layers/internal.h"
#include "test_util.h"

static void test_lenet_names_and_counts(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_lenet(m, false), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_OK);
    CU_ASSERT_EQUAL(m->n_params, 61706); /* = torch LeNet-5 of the same shape */
    CU_ASSERT_STRING_EQUAL(m->param_list[0].name, "conv1.weight");
    CU_ASSERT_STRING_EQUAL(m->param_list[m->n_param_tensors - 1].name, "fc3.bias");
    CU_ASSERT_PTR_NOT_NULL(qat_model_find_param(m, "conv2.bias"));
    CU_ASSERT_PTR_NOT_NULL(qat_model_find_param(m, "fc2.weight"));
    CU_ASSERT_PTR_NULL(qat_model_find_param(m, "fc4.weight"));
    qat_tensor *w = qat_model_find_param(m, "conv2.weight");
    CU_ASSERT_EQUAL(w->rank, 4);
    CU_ASSERT_EQUAL(w->shape[0], 16);
    CU_ASSERT_EQUAL(w->shape[1], 6);
    /* parameters and gradients are views into one flat block each */
    CU_ASSERT_PTR_EQUAL(m->param_list[0].tensor->data, m->params);
    CU_ASSERT_PTR_EQUAL(m->param_list[0].tensor->grad, m->grads);

    qat_model *b = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_lenet(b, true), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_build(b, 1), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(qat_model_find_param(b, "bn1.weight"));
    CU_ASSERT_PTR_NOT_NULL(qat_model_find_param(b, "bn2.running_var"));
    CU_ASSERT_PTR_NULL(qat_model_find_param(b, "conv1.bias")); /* BN makes it redundant */
    CU_ASSERT_EQUAL(b->n_buffers, 2 * (6 + 16));

    qat_model *mlp = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_mlp(mlp), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_build(mlp, 1), QAT_OK);
    CU_ASSERT_EQUAL(mlp->n_params, 235146);
    qat_ctx_free(ctx);
}

static void test_seeded_init(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *a = qat_model_new(ctx), *b = qat_model_new(ctx), *c = qat_model_new(ctx);
    qat_model_lenet(a, false), qat_model_lenet(b, false), qat_model_lenet(c, false);
    qat_model_build(a, 7), qat_model_build(b, 7), qat_model_build(c, 8);
    ASSERT_OK(ctx);
    CU_ASSERT_EQUAL(memcmp(a->params, b->params, (size_t)a->n_params * sizeof(float)), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(a->params, c->params, (size_t)a->n_params * sizeof(float)), 0);
    /* Kaiming-uniform(a=sqrt 5): |w| <= 1/sqrt(fan_in), and it fills the range */
    qat_tensor *w = qat_model_find_param(a, "fc1.weight");
    float bound = 1.0f / sqrtf(400.0f), mx = 0;
    for (int64_t i = 0; i < w->numel; i++) mx = fmaxf(mx, fabsf(w->data[i]));
    CU_ASSERT(mx <= bound && mx > 0.99f * bound);
    qat_tensor *cb = qat_model_find_param(a, "conv1.bias");
    for (int64_t i = 0; i < cb->numel; i++) CU_ASSERT(fabsf(cb->data[i]) <= 1.0f / 5.0f);
    qat_ctx_free(ctx);
}

static void test_batchnorm_train_vs_eval(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_add_batchnorm(m, NULL, 2, 0.1f, 1e-5f);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    float xv[8] = {1, 10, 2, 20, 3, 30, 4, 40}; /* [4, 2]: channel 0 = 1..4, channel 1 = 10..40 */
    int64_t s[2] = {4, 2};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_STEP, xv, 2, s, false);
    qat_tensor *y = qat_model_forward(m, x);
    double mean = 0;
    for (int i = 0; i < 4; i++) mean += y->data[2 * i + 1];
    ASSERT_CLOSE(mean, 0, 1e-5); /* normalised with batch statistics */
    qat__layer *bn = &m->layers[qat_model_find_layer(m, "bn1")];
    ASSERT_CLOSE(bn->running_mean[0], 0.25f, 1e-6);  /* 0.9*0 + 0.1*2.5 */
    ASSERT_CLOSE(bn->running_var[1], 0.9f + 0.1f * (500.0f / 3.0f), 1e-4); /* unbiased 166.7 */
    qat_ctx_step_reset(ctx);
    qat_model_train(m, false);
    x = qat_tensor_from(ctx, QAT_MEM_STEP, xv, 2, s, false);
    y = qat_model_forward(m, x);
    ASSERT_CLOSE(y->data[0], (1 - 0.25f) / sqrtf(bn->running_var[0] + 1e-5f), 1e-5);
    ASSERT_CLOSE(bn->running_mean[0], 0.25f, 1e-6); /* eval does not update */
    qat_ctx_free(ctx);
}

typedef struct {
    qat_model *m;
    qat_tensor *x;
} model_user;

static qat_tensor *model_loss(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    (void)in;
    model_user *u = user;
    qat_tensor *y = qat_model_forward(u->m, u->x);
    return qat_sum(ctx, qat_mul(ctx, y, y));
}

static void gradcheck_model(qat_model *m, qat_tensor *x) {
    qat_ctx *ctx = m->ctx;
    model_user u = {m, x};
    qat_tensor *ins[16];
    for (int i = 0; i < m->n_param_tensors; i++) ins[i] = m->param_list[i].tensor;
    qat_gradcheck_result r;
    qat_status st = qat_gradcheck(ctx, model_loss, &u, ins, m->n_param_tensors, 1e-2f, 2e-3f, 2e-2f, &r);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    CU_ASSERT_EQUAL(r.n_checked, m->n_params);
}

static void test_gradcheck_through_models(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    /* conv -> batchnorm2d -> avgpool -> flatten -> linear -> bn1d -> linear. No kinked
     * activation here: BN puts many values within eps of a kink. The kinked ops
     * (relu, relu6 = clamp, maxpool) have their own checks in test_autograd. */
    qat_model *m = qat_model_new(ctx);
    qat_model_add_conv2d(m, NULL, 2, 3, 3, 1, 1, true);
    qat_model_add_batchnorm(m, NULL, 3, 0.1f, 1e-5f);
    qat_model_add_avgpool2d(m, 2, 2);
    qat_model_add_flatten(m);
    qat_model_add_linear(m, NULL, 12, 5, true);
    qat_model_add_batchnorm(m, NULL, 5, 0.1f, 1e-5f);
    qat_model_add_linear(m, NULL, 5, 3, false);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 5), QAT_OK);
    int64_t sx[4] = {3, 2, 4, 4};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 1, false);
    gradcheck_model(m, x);
    /* LeNet-shaped, batch 1, with maxpool and relu; eval mode */
    qat_model *l = qat_model_new(ctx);
    qat_model_add_conv2d(l, NULL, 1, 2, 3, 1, 0, true);
    qat_model_add_relu(l);
    qat_model_add_maxpool2d(l, 2, 2);
    qat_model_add_flatten(l);
    qat_model_add_linear(l, NULL, 8, 3, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(l, 9), QAT_OK);
    int64_t sl[4] = {1, 1, 6, 6};
    qat_tensor *xl = t_rand(ctx, &rng, 4, sl, -1, 1, false);
    gradcheck_model(l, xl);
    qat_ctx_free(ctx);
}

static void test_dropout_layer_modes(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_add_dropout(m, 0.5f);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    int64_t s[1] = {1000};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 1, s, false);
    for (int i = 0; i < 1000; i++) x->data[i] = 1;
    qat_tensor *y = qat_model_forward(m, x);
    int zeros = 0;
    for (int i = 0; i < 1000; i++) zeros += y->data[i] == 0;
    CU_ASSERT(zeros > 400 && zeros < 600);
    qat_model_train(m, false);
    CU_ASSERT_PTR_EQUAL(qat_model_forward(m, x), x); /* identity in eval */
    qat_ctx_free(ctx);
}

static void test_model_misuse(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    int64_t s[2] = {2, 5};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 2, s, false);
    CU_ASSERT_PTR_NULL(qat_model_forward(m, x));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_STATE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_add_linear(m, "fc", 0, 3, true), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_add_linear(m, "bad.name", 4, 3, true), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_add_linear(m, "fc", 4, 3, true), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_add_linear(m, "fc", 3, 3, true), QAT_ERR_ARG); /* duplicate */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(m->n_layers, 2); /* the input and fc */
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_add_relu(m), QAT_ERR_STATE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_model_forward(m, x)); /* 5 features into a 4-input layer */
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "layer fc: qat_linear"));
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"names, shapes and parameter counts", test_lenet_names_and_counts},
        {"same seed, same parameters; PyTorch bounds", test_seeded_init},
        {"batchnorm: batch statistics in training, running in eval", test_batchnorm_train_vs_eval},
        {"gradient check through whole models", test_gradcheck_through_models},
        {"dropout layer: on in training, identity in eval", test_dropout_layer_modes},
        {"misuse is reported", test_model_misuse},
        {NULL, NULL},
    };
    return qat_test_main("layers", cases, argc, argv);
}
