/* Layers and the model container: naming, parameter counts, seeded
 * initialisation, BatchNorm train vs eval, gradient checks through whole
 * models, the input normalization (the forward's first op, its checks and
 * its gradient), and misuse. */
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "qat/analyze.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "internals.h"
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

/* ---- the input normalization ---------------------------------------------------------- */

static qat_normalization norm_of(int channels, float divisor, const float *mean, const float *std, bool raw) {
    qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = channels, n.divisor = divisor, n.raw_uint8 = raw;
    for (int c = 0; c < channels; c++) n.mean[c] = mean[c], n.std[c] = std[c];
    return n;
}

/* The documented formula, one element at a time, as the test computes it. */
static float normalized(const qat_normalization *n, int c, float x) {
    volatile float a = x / n->divisor; /* each operation rounded to float32 */
    volatile float b = a - n->mean[c];
    return b / n->std[c];
}

/* conv(3→4) relu flatten linear on [3, 5, 6] images. */
static qat_model *small_conv(qat_ctx *ctx) {
    qat_model *m = qat_model_new(ctx);
    qat_model_set_input_shape(m, 3, (int64_t[]){3, 5, 6});
    qat_model_add_conv2d(m, NULL, 3, 4, 3, 1, 1, true);
    qat_model_add_relu(m);
    qat_model_add_flatten(m);
    qat_model_add_linear(m, NULL, 4 * 5 * 6, 5, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 7), QAT_OK);
    return m;
}

/* The forward normalizes first: each element is the documented formula's
 * float32 value (qat_normalize and pre[0], the input quantizer's input),
 * and the logits are the bits of the same model without a normalization
 * fed the normalized images — float, and prepared for QAT (after one
 * observing step) in eval mode. Setting NULL gives today's forward back. */
static void test_normalization_forward(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = small_conv(ctx);
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.247f, 0.2435f, 0.2616f};
    qat_normalization n = norm_of(3, 255.0f, mean, std, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    const qat_normalization *got = qat_model_normalization(m);
    CU_ASSERT_FATAL(got != NULL && got != &n);
    CU_ASSERT(got->channels == 3 && got->divisor == 255.0f && got->raw_uint8 && got->std[2] == std[2]);
    int64_t s[4] = {4, 3, 5, 6};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, s, false);
    qat_tensor *xn = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, s, false);
    qat_rng rng;
    qat_rng_seed(&rng, 11);
    for (int64_t i = 0; i < x->numel; i++) {
        x->data[i] = (float)(int)(qat_rng_uniform(&rng) * 256.0f); /* raw pixels */
        xn->data[i] = normalized(&n, (int)(i / 30 % 3), x->data[i]);
    }
    qat_tensor *y = qat_normalize(ctx, x, &n);
    CU_ASSERT_FATAL(y != NULL && y != x);
    CU_ASSERT_EQUAL(memcmp(y->data, xn->data, (size_t)x->numel * sizeof(float)), 0);
    float out_norm[4 * 5], out_pre[4 * 5];
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1) { /* QAT: one observing step on the raw images, then eval */
            qat_prepare_config cfg = qat_prepare_defaults();
            CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &cfg), QAT_OK);
            qat_model_train(m, true);
            CU_ASSERT_PTR_NOT_NULL(qat_model_forward(m, x));
            qat_ctx_step_reset(ctx);
            qat_act_quant_info in;
            CU_ASSERT(qat_model_act_quant(m, 0, &in) && in.updates == 1);
            CU_ASSERT(in.min < -1.5f && in.max > 1.5f); /* the normalized range, not 0..255 */
        }
        qat_model_train(m, false);
        qat_tensor *pre[8] = {NULL};
        qat_tensor *yo = qat_model_forward_all(m, x, NULL, pre);
        CU_ASSERT_FATAL(yo != NULL && pre[0] != NULL);
        CU_ASSERT_EQUAL(memcmp(pre[0]->data, xn->data, (size_t)x->numel * sizeof(float)), 0);
        memcpy(out_norm, qat_model_forward(m, x)->data, sizeof out_norm);
        CU_ASSERT_EQUAL(memcmp(out_norm, yo->data, sizeof out_norm), 0);
        CU_ASSERT_EQUAL(qat_model_set_normalization(m, NULL), QAT_OK);
        CU_ASSERT_PTR_NULL(qat_model_normalization(m));
        memcpy(out_pre, qat_model_forward(m, xn)->data, sizeof out_pre);
        CU_ASSERT_EQUAL(memcmp(out_norm, out_pre, sizeof out_pre), 0);
        CU_ASSERT_EQUAL(qat_model_set_normalization(m, &n), QAT_OK);
        qat_ctx_step_reset(ctx);
    }
    /* one channel on a vector input: every feature the same mean and std */
    qat_model *v = qat_model_new(ctx);
    qat_model_set_input_shape(v, 1, (int64_t[]){6});
    qat_model_add_linear(v, NULL, 6, 3, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(v, 3), QAT_OK);
    qat_model_train(v, false);
    qat_normalization one = norm_of(1, 1.0f, (float[]){-3.5f}, (float[]){7.25f}, false);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(v, &one), QAT_OK);
    int64_t sv[2] = {2, 6};
    qat_tensor *xv = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, sv, false), *xvn = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, sv, false);
    for (int i = 0; i < 12; i++) xv->data[i] = qat_rng_normal(&rng) * 10.0f, xvn->data[i] = normalized(&one, 0, xv->data[i]);
    float a[6], b[6];
    memcpy(a, qat_model_forward(v, xv)->data, sizeof a);
    qat_model_set_normalization(v, NULL);
    memcpy(b, qat_model_forward(v, xvn)->data, sizeof b);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    qat_ctx_free(ctx);
}

/* What qat_model_set_normalization refuses, naming the field and value. */
static void test_normalization_refusals(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = small_conv(ctx);
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    qat_normalization n = norm_of(3, 255.0f, mean, std, true);
    const char *needle[] = {"divisor 0 is not", "divisor -255 is not", "divisor inf is not", "divisor nan is not",
                            "divisor 9.99995e-41 is not", "std[1] = 0 is not", "std[2] = -0.25 is not", "mean[0] = nan is not",
                            "mean[2] = inf is not", "channels 2, the input [3, 5, 6] has 3", "channels 1025 is outside 1..1024",
                            "channels -1 is outside"};
    for (int k = 0; k < 12; k++) {
        qat_normalization b = n;
        switch (k) {
        case 0: b.divisor = 0; break;
        case 1: b.divisor = -255; break;
        case 2: b.divisor = INFINITY; break;
        case 3: b.divisor = NAN; break;
        case 4: b.divisor = 1e-40f; break; /* subnormal */
        case 5: b.std[1] = 0; break;
        case 6: b.std[2] = -0.25f; break;
        case 7: b.mean[0] = NAN; break;
        case 8: b.mean[2] = INFINITY; break;
        case 9: b.channels = 2; break;
        case 10: b.channels = 1025; break;
        default: b.channels = -1; break;
        }
        CU_ASSERT_EQUAL(qat_model_set_normalization(m, &b), QAT_ERR_ARG);
        if (!strstr(qat_ctx_error(ctx), needle[k])) printf("\n  case %d: %s\n", k, qat_ctx_error(ctx));
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), needle[k]));
        CU_ASSERT_PTR_NULL(qat_model_normalization(m)); /* nothing set */
        qat_ctx_clear_error(ctx);
    }
    /* the state bytes (ranks compare them) see the normalization */
    qat_normalization other = n;
    other.std[2] = 0.3f;
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    size_t bytes = qat_model_state_bytes(m, NULL, 0);
    unsigned char *s1 = malloc(bytes), *s2 = malloc(bytes);
    CU_ASSERT_FATAL(s1 && s2);
    qat_model_state_bytes(m, s1, bytes);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &other), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_state_bytes(m, s2, bytes), bytes);
    CU_ASSERT_NOT_EQUAL(memcmp(s1, s2, bytes), 0);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    qat_model_state_bytes(m, s2, bytes);
    CU_ASSERT_EQUAL(memcmp(s1, s2, bytes), 0);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, NULL), QAT_OK);
    CU_ASSERT(qat_model_state_bytes(m, NULL, 0) < bytes);
    free(s1), free(s2);
    /* one channel fits any input; channels 0 and NULL remove it */
    qat_normalization one = norm_of(1, 255.0f, mean, std, true);
    CU_ASSERT_EQUAL(qat_model_set_normalization(m, &one), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(qat_model_normalization(m));
    one.channels = 0;
    CU_ASSERT_EQUAL(qat_model_set_normalization(m, &one), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_model_normalization(m));
    /* the declared shape and the normalization must agree, whichever comes first */
    CU_ASSERT_EQUAL(qat_model_set_normalization(m, &n), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_set_input_shape(m, 3, (int64_t[]){2, 5, 6}), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "does not fit the model's normalization: channels 3"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_set_input_shape(m, 1, (int64_t[]){90}), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    /* a batch of another channel count: the forward names the input */
    int64_t s[4] = {1, 2, 5, 6};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, s, false);
    CU_ASSERT_PTR_NULL(qat_model_forward(m, x));
    if (!strstr(qat_ctx_error(ctx), "model input: qat_normalize: the normalization has 3 channels"))
        printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "model input: qat_normalize: the normalization has 3 channels"));
    qat_ctx_free(ctx);
}

typedef struct {
    const qat_normalization *n;
} norm_user;

static qat_tensor *norm_loss(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    const norm_user *u = user;
    qat_tensor *y = qat_normalize(ctx, in[0], u->n);
    return qat_sum(ctx, qat_mul(ctx, y, y));
}

/* The op's backward, gradient-checked: per channel (a [N, C, H, W]
 * batch) and with one channel (a [N, F] batch). */
static void test_normalization_gradcheck(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    const float mean[3] = {0.2f, -0.7f, 1.5f}, std[3] = {0.5f, 2.0f, 0.75f};
    qat_normalization n3 = norm_of(3, 4.0f, mean, std, false), n1 = norm_of(1, 2.0f, mean, std, false);
    qat_tensor *x4 = t_rand(ctx, &rng, 4, (int64_t[]){2, 3, 2, 3}, -4, 4, true);
    qat_tensor *x2 = t_rand(ctx, &rng, 2, (int64_t[]){3, 5}, -4, 4, true);
    norm_user u3 = {&n3}, u1 = {&n1};
    qat_gradcheck_result r;
    CU_ASSERT_EQUAL(qat_gradcheck(ctx, norm_loss, &u3, &x4, 1, 1e-2f, 1e-3f, 1e-2f, &r), QAT_OK);
    CU_ASSERT_EQUAL(r.n_checked, x4->numel);
    CU_ASSERT_EQUAL(qat_gradcheck(ctx, norm_loss, &u1, &x2, 1, 1e-2f, 1e-3f, 1e-2f, &r), QAT_OK);
    CU_ASSERT_EQUAL(r.n_checked, x2->numel);
    /* and through a model whose input wants a gradient: dL/dx = dL/dx' / std[c] / divisor */
    qat_model *m = small_conv(ctx);
    const float m3[3] = {0.5f, 0.4f, 0.3f}, s3[3] = {0.2f, 0.4f, 0.8f};
    qat_normalization nm = norm_of(3, 255.0f, m3, s3, true);
    qat_tensor *x = t_rand(ctx, &rng, 4, (int64_t[]){1, 3, 5, 6}, 0, 255, true);
    qat_tensor *xn = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, (int64_t[]){1, 3, 5, 6}, true);
    for (int64_t i = 0; i < x->numel; i++) xn->data[i] = normalized(&nm, (int)(i / 30), x->data[i]);
    qat_model_train(m, false);
    qat_tensor *y = qat_model_forward(m, xn); /* no normalization: the gradient at x' */
    CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, y))), QAT_OK);
    qat_ctx_step_reset(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &nm), QAT_OK);
    y = qat_model_forward(m, x);
    CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, y))), QAT_OK);
    int same = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        int c = (int)(i / 30);
        same += x->grad[i] == (xn->grad[i] / s3[c]) / 255.0f;
    }
    CU_ASSERT_EQUAL(same, x->numel);
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

/* ---- leaky_relu: a kind with an attribute ------------------------------------------ */

typedef struct {
    qat_model *m;
    qat_tensor *x;
} leaky_user;

static qat_tensor *leaky_loss(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    leaky_user *u = user;
    qat_tensor *y = qat_model_forward(u->m, in[0]);
    return qat_sum(ctx, qat_mul(ctx, y, y));
}

/* Model files (the default slope, the key, its range), the builder's
 * refusal, the forward as PyTorch computes it, the gradient (finite
 * differences, wrt the input and through a linear layer), the checkpoint's
 * record and the summary row. */
static void test_leaky_relu(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    const char *text = "input shape=6\nleaky_relu a input\nlinear fc a out=5\nleaky_relu b fc negative_slope=0.25\n"
                       "linear out b out=3\n";
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "leaky"), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_layer_kind(m, 1), QAT_LAYER_LEAKY_RELU);
    CU_ASSERT_STRING_EQUAL(qat_layer_kind_str(QAT_LAYER_LEAKY_RELU), "leaky_relu");
    CU_ASSERT_EQUAL(m->layers[1].attr[0], 0.01f); /* PyTorch's default */
    CU_ASSERT_EQUAL(m->layers[3].attr[0], 0.25f);
    char back[512];
    CU_ASSERT(qat_model_to_text(m, back, sizeof back) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(back, "leaky_relu b fc negative_slope=0.25\n"));
    /* out of range: in a file (the line and the key named) and from the builder */
    qat_model *bad = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_from_text(bad, "input shape=6\nleaky_relu a input negative_slope=2\n", "bad"),
                    QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "bad:2:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "negative_slope in [0, 1]"));
    qat_ctx_clear_error(ctx);
    qat_model *b2 = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_layer_leaky_relu(b2, NULL, 0, -0.5f), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "negative_slope must be in [0, 1]"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_layer_leaky_relu(b2, NULL, 0, 0.5f), 1);
    CU_ASSERT_STRING_EQUAL(b2->layers[1].name, "leaky_relu1");

    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 4), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 11);
    int64_t sx[2] = {4, 6};
    qat_tensor *x = t_rand(ctx, &rng, 2, sx, -1, 1, true);
    t_away_from_zero(x, 0.05f); /* the kink at 0 out of the step's reach */
    /* the first layer's output, bit for bit: x > 0 ? x : x * 0.01f */
    qat_model *one = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(one, "input shape=6\nleaky_relu a input\n", "one"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(one, 1), QAT_OK);
    qat_tensor *y = qat_model_forward(one, x);
    CU_ASSERT_FATAL(y && y->numel == x->numel);
    for (int64_t i = 0; i < x->numel; i++) {
        float want = x->data[i] > 0.0f ? x->data[i] : x->data[i] * 0.01f;
        CU_ASSERT_EQUAL(memcmp(&y->data[i], &want, sizeof want), 0);
    }
    /* the gradient wrt the input: the layer alone, and through a linear
     * layer and a second slope (a smaller step: the linear layer's outputs
     * are not kept away from the kink) */
    qat_gradcheck_result r;
    qat_status st = QAT_OK;
    for (int k = 0; k < 2 && st == QAT_OK; k++) {
        leaky_user u = {k ? m : one, x};
        st = qat_gradcheck(ctx, leaky_loss, &u, &x, 1, k ? 1e-3f : 1e-2f, 2e-3f, 2e-2f, &r);
        if (st) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL(st, QAT_OK);
        CU_ASSERT_EQUAL(r.n_checked, x->numel);
    }

    /* a checkpoint records the slope; the rebuilt model has it */
    char dir[256], path[300];
    CU_ASSERT_FATAL(qat_test_tmpdir(dir, sizeof dir, "layers-leaky"));
    snprintf(path, sizeof path, "%s/leaky.ckpt", dir);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, NULL, NULL, NULL, path), QAT_OK);
    qat_model *re = NULL;
    st = qat_checkpoint_model(ctx, path, &re, NULL, 0);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT(re->n_layers == 5 && re->layers[3].kind == QAT_LAYER_LEAKY_RELU && re->layers[3].attr[0] == 0.25f);
    CU_ASSERT_EQUAL(re->layers[1].attr[0], 0.01f);
    remove(path), rmdir(dir);
    /* the summary's row */
    qat_summary sum;
    CU_ASSERT_EQUAL_FATAL(qat_model_summary(m, 1, (int64_t[]){6}, ctx, &sum), QAT_OK);
    CU_ASSERT(sum.n_rows >= 5);
    CU_ASSERT_STRING_EQUAL(sum.rows[3].op, "leaky_relu");
    CU_ASSERT(sum.rows[3].rank == 1 && sum.rows[3].shape[0] == 5 && sum.rows[3].params == 0);
    qat_ctx_free(ctx);
}

/* hardsigmoid: a kind without attributes. Values and gradients against
 * PyTorch 2.15's F.hardsigmoid on chosen inputs (both kinks, just inside
 * them, past them: the bits below were printed by torch), the model file,
 * a finite-difference check through a linear layer, the summary row. */
static void test_hardsigmoid(void) {
    static const float xs[16] = {-4.0f, -3.0f, -2.999999761581421f, -1.7000000476837158f, -0.10000000149011612f, 0.0f,
                                 0.30000001192092896f, 1.0f, 1.5f, 2.200000047683716f, 2.999999761581421f, 3.0f, 7.5f,
                                 0.12345600128173828f, -0.9876539707183838f, 2.7182810306549072f};
    static const uint32_t ys[16] = {0x00000000, 0x00000000, 0x332aaaab, 0x3e5ddddd, 0x3ef77778, 0x3f000000,
                                    0x3f0ccccd, 0x3f2aaaab, 0x3f400000, 0x3f5ddddd, 0x3f800000, 0x3f800000,
                                    0x3f800000, 0x3f054478, 0x3eabb85f, 0x3f73fae0};
    static const uint32_t gs[16] = {0, 0, 0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab,
                                    0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab, 0, 0, 0x3e2aaaab, 0x3e2aaaab, 0x3e2aaaab};
    qat_ctx *ctx = qat_ctx_new();
    qat_model *one = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(one, "input shape=16\nhardsigmoid h input\n", "one"), QAT_OK);
    CU_ASSERT_STRING_EQUAL(qat_layer_kind_str(QAT_LAYER_HARDSIGMOID), "hardsigmoid");
    CU_ASSERT_EQUAL_FATAL(qat_model_build(one, 1), QAT_OK);
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, (int64_t[]){1, 16}, true);
    memcpy(x->data, xs, sizeof xs);
    qat_tensor *y = qat_model_forward(one, x);
    CU_ASSERT_FATAL(y && y->numel == 16);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
    for (int i = 0; i < 16; i++) {
        uint32_t yb, gb;
        memcpy(&yb, &y->data[i], 4), memcpy(&gb, &x->grad[i], 4);
        if (yb != ys[i] || gb != gs[i]) printf("\n  x %.9g: y %08x (torch %08x), dx %08x (torch %08x)\n", xs[i], yb, ys[i], gb, gs[i]);
        CU_ASSERT(yb == ys[i] && gb == gs[i]);
    }
    qat_ctx_step_reset(ctx);
    /* through a linear layer, inputs kept off the kinks at -3 and 3 */
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, "input shape=6\nlinear fc input out=5\nhardsigmoid g fc\n"
                                                 "linear out g out=3\n", "hs"), QAT_OK);
    char back[256];
    CU_ASSERT(qat_model_to_text(m, back, sizeof back) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(back, "hardsigmoid g fc\n"));
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 4), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 12);
    qat_tensor *x2 = t_rand(ctx, &rng, 2, (int64_t[]){4, 6}, -1, 1, true);
    leaky_user u = {m, x2};
    qat_gradcheck_result r;
    qat_status st = qat_gradcheck(ctx, leaky_loss, &u, &x2, 1, 1e-3f, 2e-3f, 2e-2f, &r);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    CU_ASSERT_EQUAL(r.n_checked, x2->numel);
    qat_summary sum;
    CU_ASSERT_EQUAL_FATAL(qat_model_summary(m, 1, (int64_t[]){6}, ctx, &sum), QAT_OK);
    CU_ASSERT(sum.n_rows >= 3);
    CU_ASSERT_STRING_EQUAL(sum.rows[2].op, "hardsigmoid");
    qat_ctx_free(ctx);
}

/* mul: one shape, or a gate per channel ([C, 1, 1] over [C, H, W], as
 * squeeze-and-excitation applies it); other shapes refused by name; the
 * gradient through both inputs (the input reaches the product directly
 * and through the gate), finite-difference checked. */
static void test_mul(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    const char *text = "input shape=2,3,3\navgpool2d sq input kernel=3\nsigmoid g sq\nmul se input,g\n"
                       "mul sq2 se,se\n";
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "se"), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_layer_kind(m, 4), QAT_LAYER_MUL);
    CU_ASSERT_STRING_EQUAL(qat_layer_kind_str(QAT_LAYER_MUL), "mul");
    qat_model *bad = qat_model_new(ctx);
    CU_ASSERT_NOT_EQUAL(qat_model_from_text(bad, "input shape=2,3,3\nglobal_avgpool p input\nmul m input,p\n", "bad"),
                        QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "[C, 1, 1] over [C, H, W]"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 2), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    int64_t sx[4] = {2, 2, 3, 3};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 1, true);
    /* the forward: x · sigmoid(mean of its channel), squared */
    qat_tensor *y = qat_model_forward(m, x);
    CU_ASSERT_FATAL(y && y->numel == x->numel);
    for (int64_t i = 0; i < x->numel; i++) {
        const float *c = &x->data[i / 9 * 9];
        float mean = 0;
        for (int k = 0; k < 9; k++) mean += c[k];
        float v = x->data[i] * (1.0f / (1.0f + expf(-mean / 9.0f)));
        ASSERT_CLOSE(y->data[i], v * v, 1e-5f);
    }
    leaky_user u = {m, x};
    qat_gradcheck_result r;
    qat_status st = qat_gradcheck(ctx, leaky_loss, &u, &x, 1, 1e-2f, 2e-3f, 2e-2f, &r);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    CU_ASSERT_EQUAL(r.n_checked, x->numel);
    qat_ctx_free(ctx);
}

/* A layer's own precision from a model file (wbits=, abits=,
 * granularity=): qat_prepare quantizes that layer so, the others with the
 * global configuration; the text writes back the same; a checkpoint keeps
 * it (before and after prepare); the lowered program carries each layer's
 * bits; the keys where they cannot apply are refused, naming the layer. */
static void test_layer_precision(void) {
    static const char *const text =
        "input shape=1,12,12\n"
        "conv2d c1 input out=4 kernel=3 wbits=4 abits=6\n"
        "relu r1 c1\n"
        "conv2d c2 r1 out=4 kernel=3 granularity=tensor\n"
        "relu r2 c2\n"
        "flatten f r2\n"
        "linear fc1 f out=16 wbits=3 granularity=block:16\n"
        "relu r3 fc1\n"
        "linear fc2 r3 out=5\n";
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "mixed"), QAT_OK);
    qat_layer_precision p;
    CU_ASSERT(qat_model_layer_precision(m, "c1", &p) && p.wbits == 4 && p.abits == 6 && !p.has_granularity);
    CU_ASSERT(qat_model_layer_precision(m, "fc1", &p) && p.wbits == 3 && p.has_granularity &&
              p.granularity == QAT_GRAN_BLOCK && p.block == 16);
    CU_ASSERT(qat_model_layer_precision(m, "fc2", &p) && !p.wbits && !p.abits && !p.has_granularity);
    /* the text writes back the keys, and reads back the same */
    char t1[2048], t2[2048];
    CU_ASSERT_FATAL(qat_model_to_text(m, t1, sizeof t1) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(t1, "conv2d c1 input out=4 kernel=3 wbits=4 abits=6\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t1, " granularity=tensor\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t1, " wbits=3 granularity=block:16\n"));
    qat_model *b = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(b, t1, "written"), QAT_OK);
    CU_ASSERT_FATAL(qat_model_to_text(b, t2, sizeof t2) > 0);
    CU_ASSERT_STRING_EQUAL(t1, t2);
    /* a float checkpoint keeps each layer's own precision */
    char dir[256], path[300];
    CU_ASSERT_FATAL(qat_test_tmpdir(dir, sizeof dir, "layers-precision"));
    snprintf(path, sizeof path, "%s/mixed.ckpt", dir);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(b, 1), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(b, NULL, NULL, NULL, path), QAT_OK);
    qat_model *re = NULL;
    qat_status st = qat_checkpoint_model(ctx, path, &re, NULL, 0);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_FATAL(qat_model_to_text(re, t2, sizeof t2) > 0);
    CU_ASSERT_STRING_EQUAL(t1, t2);
    /* prepared: each layer with its own, the global configuration elsewhere */
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat_prepare_config g = qat_prepare_defaults();
    g.abits = 7;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &g), QAT_OK);
    const qat_prepare_config *c1 = qat_model_qat_config(m, "c1"), *c2 = qat_model_qat_config(m, "c2"),
                             *f1 = qat_model_qat_config(m, "fc1"), *f2 = qat_model_qat_config(m, "fc2");
    CU_ASSERT_FATAL(c1 && c2 && f1 && f2);
    CU_ASSERT(c1->wbits == 4 && c1->abits == 6 && c1->wgran == QAT_GRAN_CHANNEL);
    CU_ASSERT(c2->wbits == 8 && c2->abits == 7 && c2->wgran == QAT_GRAN_TENSOR);
    CU_ASSERT(f1->wbits == 3 && f1->wgran == QAT_GRAN_BLOCK && f1->block == 16);
    CU_ASSERT(f2->wbits == 8 && f2->wgran == QAT_GRAN_CHANNEL);
    qat_act_quant_info a;
    CU_ASSERT(qat_model_act_quant(m, qat_model_find_layer(m, "r1"), &a) && a.bits == 6); /* after c1's group */
    CU_ASSERT(qat_model_act_quant(m, qat_model_find_layer(m, "r2"), &a) && a.bits == 7);
    CU_ASSERT_EQUAL(qat_model_set_layer_precision(m, "c2", &p), QAT_ERR_STATE); /* prepared: qat_prepare_layer */
    qat_ctx_clear_error(ctx);
    /* a QAT checkpoint: the same configuration at every layer */
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, NULL, NULL, NULL, path), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, path, &re, NULL, 0), QAT_OK);
    static const char *const names[] = {"c1", "c2", "fc1", "fc2"};
    for (int k = 0; k < 4; k++) {
        const qat_prepare_config *x = qat_model_qat_config(m, names[k]), *y = qat_model_qat_config(re, names[k]);
        CU_ASSERT(x && y && x->wbits == y->wbits && x->abits == y->abits && x->wgran == y->wgran && x->block == y->block);
    }
    remove(path), rmdir(dir);
    /* refusals, each naming the layer */
    /* abits on a pool that keeps its input's quantization: refused at prepare, naming it */
    qat_model *k = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(k, "input shape=1,4,4\nconv2d c input out=2 kernel=1\n"
                                                 "global_avgpool gap c abits=4\nlinear fc gap out=2\n", "keep"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(k, 1), QAT_OK);
    qat_prepare_config kc = qat_prepare_defaults();
    kc.pool_keeps_scale = true;
    CU_ASSERT_EQUAL(qat_prepare(k, &kc), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "layer gap: abits=4"));
    CU_ASSERT(!qat_model_prepared(k));
    qat_ctx_clear_error(ctx);
    static const char *const bad[][2] = {
        {"relu r fc wbits=4", "a relu has no weights"},
        {"relu r fc abits=4", "a relu keeps the quantization of its input"},
        {"linear r fc out=3 wbits=1", "wbits=N, N in 2..16"},
        {"linear r fc out=3 abits=17", "abits=N, N in 2..16"},
        {"linear r fc out=3 granularity=rows", "granularity=tensor, channel or block:N"},
        {"linear r fc out=3 granularity=block:0", "granularity=tensor, channel or block:N"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char src[256];
        snprintf(src, sizeof src, "input shape=8\nlinear fc input out=4\n%s\n", bad[k][0]);
        qat_model *x = qat_model_new(ctx);
        CU_ASSERT_NOT_EQUAL(qat_model_from_text(x, src, "bad"), QAT_OK);
        const char *e = qat_ctx_error(ctx);
        if (!strstr(e, bad[k][1]) || !strstr(e, "bad:3")) printf("\n  \"%s\": %s\n", bad[k][0], e);
        CU_ASSERT_PTR_NOT_NULL(strstr(e, bad[k][1]));
        CU_ASSERT_PTR_NOT_NULL(strstr(e, "bad:3"));
        qat_ctx_clear_error(ctx);
    }
    qat_ctx_free(ctx);
}

/* qat_model_to_text: the every-op graph written, read back and written
 * again gives the same text, the same kinds, names and inputs; a model
 * without an input shape, or with a custom op, is refused. */
static void test_model_to_text_round_trip(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *a = qat_model_new(ctx), *b = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(a, QAT_TEST_EVERY_OP, "every"), QAT_OK);
    int64_t n = qat_model_to_text(a, NULL, 0);
    CU_ASSERT_FATAL(n > 0);
    char *t1 = malloc((size_t)n + 1), *t2 = malloc((size_t)n + 1);
    CU_ASSERT_FATAL(t1 && t2);
    CU_ASSERT_EQUAL(qat_model_to_text(a, t1, (size_t)n + 1), n);
    CU_ASSERT_EQUAL((int64_t)strlen(t1), n);
    qat_status st = qat_model_from_text(b, t1, "written");
    if (st) printf("\n  %s\n%s\n", qat_ctx_error(ctx), t1);
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL(qat_model_to_text(b, t2, (size_t)n + 1), n);
    CU_ASSERT_STRING_EQUAL(t1, t2);
    CU_ASSERT_EQUAL_FATAL(a->n_layers, b->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        CU_ASSERT_EQUAL(a->layers[i].kind, b->layers[i].kind);
        CU_ASSERT_STRING_EQUAL(a->layers[i].name, b->layers[i].name);
        CU_ASSERT_EQUAL(a->layers[i].n_in, b->layers[i].n_in);
        for (int j = 0; j < a->layers[i].n_in; j++) CU_ASSERT_EQUAL(a->layers[i].in[j], b->layers[i].in[j]);
        const qat__layer *x = &a->layers[i], *y = &b->layers[i];
        CU_ASSERT(x->cin == y->cin && x->cout == y->cout && x->kh == y->kh && x->kw == y->kw && x->sh == y->sh &&
                  x->sw == y->sw && x->ph == y->ph && x->pw == y->pw && x->groups == y->groups &&
                  x->has_bias == y->has_bias && x->p == y->p && x->momentum == y->momentum && x->eps == y->eps &&
                  !memcmp(x->attr, y->attr, sizeof x->attr));
    }
    /* a short buffer: cut and NUL-terminated, the whole length returned */
    char small[8];
    CU_ASSERT_EQUAL(qat_model_to_text(a, small, sizeof small), n);
    CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
    free(t1), free(t2);
    qat_model *c = qat_model_new(ctx); /* no input shape */
    qat_model_add_relu(c);
    CU_ASSERT_EQUAL(qat_model_to_text(c, NULL, 0), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "input shape"));
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"names, shapes and parameter counts", test_lenet_names_and_counts},
        {"same seed, same parameters; PyTorch bounds", test_seeded_init},
        {"batchnorm: batch statistics in training, running in eval", test_batchnorm_train_vs_eval},
        {"gradient check through whole models", test_gradcheck_through_models},
        {"dropout layer: on in training, identity in eval", test_dropout_layer_modes},
        {"normalization: the forward normalizes first, the documented float32 formula", test_normalization_forward},
        {"normalization: refusals name the field and the value", test_normalization_refusals},
        {"normalization: the backward, gradient-checked", test_normalization_gradcheck},
        {"misuse is reported", test_model_misuse},
        {"leaky_relu: model files, forward, gradient, checkpoint, summary", test_leaky_relu},
        {"hardsigmoid: values and gradients against PyTorch, model files, gradient check, summary", test_hardsigmoid},
        {"mul: one shape or a gate per channel; its gradient", test_mul},
        {"model files written: the every-op graph reads back the same", test_model_to_text_round_trip},
        {"a layer's own precision from a model file: prepared so, written back, refused where it cannot apply",
         test_layer_precision},
        {NULL, NULL},
    };
    return qat_test_main("layers", cases, argc, argv);
}
