/* End to end on real MNIST: a short training run on a slice of the data
 * must beat chance by far, and two runs with one seed are bit-identical. */
#include <stdlib.h>
#include <string.h>

#include "qat/data.h"
#include "qat/fakequant.h"
#include "qat/layers.h"
#include "qat/optim.h"
#include "test_util.h"

/* Trains `model` for one pass over the first n samples; returns accuracy
 * on the first 1000 test samples and the final parameters' checksum. */
static double train_slice(const char *model, int64_t n, uint64_t seed, double *checksum, bool qat) {
    const char *data = getenv("QAT_MNIST_DATA");
    if (!data) return -1;
    qat_ctx *ctx = qat_ctx_new();
    qat_mnist tr, te;
    if (qat_mnist_load(ctx, data, "train", &tr) || qat_mnist_load(ctx, data, "test", &te)) {
        printf("\n  %s\n", qat_ctx_error(ctx));
        qat_ctx_free(ctx);
        return -1;
    }
    qat_model *m = qat_model_new(ctx);
    bool conv = !strcmp(model, "lenet");
    conv ? qat_model_lenet(m, false) : qat_model_mlp(m);
    qat_model_build(m, seed);
    if (qat) {
        qat_prepare_config c = qat_prepare_defaults();
        c.wbits = c.abits = 4;
        if (qat_prepare(m, &c) != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    }
    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx, &oc, m->n_params);
    int32_t *perm = malloc((size_t)n * sizeof *perm), y[64];
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    qat_rng rng;
    qat_rng_seed(&rng, seed);
    qat_shuffle(perm, n, &rng);
    int64_t s4[4] = {64, 1, 28, 28}, s2[2] = {64, 784};
    for (int64_t s = 0; s + 64 <= n; s += 64) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, conv ? 4 : 2, conv ? s4 : s2, false);
        qat_mnist_batch(&tr, perm + s, 64, x->data, y);
        qat_tensor *loss = qat_cross_entropy(ctx, qat_model_forward(m, x), y);
        if (qat_backward(ctx, loss) != QAT_OK) break;
        qat_optim_step(&opt, m->params, m->grads, oc.lr);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    ASSERT_OK(ctx);
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    int correct = 0;
    int32_t idx[100];
    int64_t t4[4] = {100, 1, 28, 28}, t2[2] = {100, 784};
    for (int b = 0; b < 10; b++) {
        for (int i = 0; i < 100; i++) idx[i] = b * 100 + i;
        int32_t yy[100];
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, conv ? 4 : 2, conv ? t4 : t2, false);
        qat_mnist_batch(&te, idx, 100, x->data, yy);
        qat_tensor *logits = qat_model_forward(m, x);
        for (int i = 0; i < 100; i++) {
            int best = 0;
            for (int k = 1; k < 10; k++) best = logits->data[i * 10 + k] > logits->data[i * 10 + best] ? k : best;
            correct += best == yy[i];
        }
        qat_ctx_step_reset(ctx);
    }
    *checksum = 0;
    for (int64_t i = 0; i < m->n_params; i++) *checksum += m->params[i] * (double)(i % 97 + 1);
    free(perm);
    qat_mnist_free(&tr);
    qat_mnist_free(&te);
    qat_ctx_free(ctx);
    return correct / 1000.0;
}

static void test_mlp_learns(void) {
    double c1, c2;
    double acc = train_slice("mlp", 6400, 1, &c1, false);
    printf(" [mlp, 6400 samples: %.1f %%]", 100 * acc);
    CU_ASSERT(acc > 0.85); /* chance is 10 % */
    double acc2 = train_slice("mlp", 6400, 1, &c2, false);
    CU_ASSERT_EQUAL(acc, acc2);
    CU_ASSERT_EQUAL(c1, c2); /* bit-identical training */
}

static void test_lenet_learns(void) {
    double c;
    double acc = train_slice("lenet", 6400, 2, &c, false);
    printf(" [lenet, 6400 samples: %.1f %%]", 100 * acc);
    CU_ASSERT(acc > 0.85);
}

static void test_qat_learns(void) {
    double c1, c2;
    double acc = train_slice("lenet", 6400, 3, &c1, true);
    printf(" [lenet W4A4 QAT, 6400 samples: %.1f %%]", 100 * acc);
    CU_ASSERT(acc > 0.85);
    CU_ASSERT_EQUAL(train_slice("lenet", 6400, 3, &c2, true), acc); /* reproducible */
    CU_ASSERT_EQUAL(c1, c2);
}

int main(void) {
    const qat_test_case cases[] = {
        {"mlp learns a slice of MNIST, reproducibly", test_mlp_learns},
        {"lenet learns a slice of MNIST", test_lenet_learns},
        {"W4A4 QAT of lenet learns a slice of MNIST, reproducibly", test_qat_learns},
        {NULL, NULL},
    };
    return qat_test_main("e2e", cases);
}
