/* End to end on real MNIST: a short training run on a slice of the data
 * must beat chance by far, and two runs with one seed are bit-identical;
 * the QAT run's integer export agrees with its fake-quantized model. */
#include <stdlib.h>
#include <string.h>

#include "qat/data.h"
#include "qat/fakequant.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/layers.h"
#include "qat/optim.h"
#include "internals.h"
#include "test_util.h"

/* LeNet-5 with average pooling (2x2: a quarter of the window sums are
 * ties) and a global average pool beside the flattened features: both
 * kinds of average pool. Trained at lr 3e-3 (one pass over 6400 samples
 * at 1e-3 leaves it at 86 %, margins too thin for a stable agreement). */
#define POOLS_TEXT \
    "input shape=1,28,28\n" \
    "conv2d c1 input out=6 kernel=5 pad=2\n" \
    "relu r1 c1\n" \
    "avgpool2d p1 r1 kernel=2\n" \
    "conv2d c2 p1 out=16 kernel=5\n" \
    "relu r2 c2\n" \
    "avgpool2d p2 r2 kernel=2\n" \
    "global_avgpool gap r2\n" \
    "flatten f p2\n" \
    "concat cat f,gap\n" \
    "linear fc1 cat out=120\n" \
    "relu r3 fc1\n" \
    "linear fc2 r3 out=84\n" \
    "relu r4 fc2\n" \
    "linear fc3 r4 out=10\n"

/* Trains `model` ("mlp", "lenet", or "pools": POOLS_TEXT, whose pools keep
 * their input's quantization under QAT) for one pass over the first n samples; returns accuracy
 * on the first 1000 test samples and the final parameters' checksum.
 * qat_bits > 0: QAT with weights and activations of that width. With
 * `exported` set: the model lowered to integers and run by the int
 * engine, exported[0] = its accuracy, exported[1] = the fraction of
 * predictions equal to the fake-quantized model's. */
static double train_slice(const char *model, int64_t n, uint64_t seed, double *checksum, int qat_bits,
                          double *exported) {
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
    bool pools = !strcmp(model, "pools"), conv = !strcmp(model, "lenet") || pools;
    if (pools) qat_model_from_text(m, POOLS_TEXT, "pools");
    else conv ? qat_model_lenet(m, false) : qat_model_mlp(m);
    qat_model_build(m, seed);
    if (qat_bits) {
        qat_prepare_config c = qat_prepare_defaults();
        c.wbits = c.abits = qat_bits;
        c.pool_keeps_scale = pools; /* TFLite's rule for its average pools */
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
        qat_optim_step(&opt, m->params, m->grads, pools ? 3e-3f : oc.lr);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    ASSERT_OK(ctx);
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    int correct = 0, int_correct = 0, agree = 0;
    int32_t idx[100];
    int64_t t4[4] = {100, 1, 28, 28}, t2[2] = {100, 784};
    qat_qmodel *q = exported ? qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q) : NULL;
    qat_engine *e = NULL;
    float int_logits[100 * 10];
    if (q && qat_qmodel_lower(m, conv ? 3 : 1, conv ? (int64_t[]){1, 28, 28} : (int64_t[]){784}, ctx, q) == QAT_OK)
        e = qat_engine_new(ctx, q, QAT_ENGINE_INT, 100);
    if (exported) CU_ASSERT_PTR_NOT_NULL(e);
    for (int i = 0; pools && e && i < q->n_ops; i++) /* both pools divide, on their input's quantization */
        CU_ASSERT(q->ops[i].keeps_scale == (q->ops[i].kind == QAT_QOP_AVGPOOL2D || q->ops[i].kind == QAT_QOP_GLOBAL_AVGPOOL));
    for (int b = 0; b < 10; b++) {
        for (int i = 0; i < 100; i++) idx[i] = b * 100 + i;
        int32_t yy[100];
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, conv ? 4 : 2, conv ? t4 : t2, false);
        qat_mnist_batch(&te, idx, 100, x->data, yy);
        qat_tensor *logits = qat_model_forward(m, x);
        if (e) qat_engine_run(e, x->data, 100, int_logits, NULL);
        for (int i = 0; i < 100; i++) {
            int best = 0, ibest = 0;
            for (int k = 1; k < 10; k++) best = logits->data[i * 10 + k] > logits->data[i * 10 + best] ? k : best;
            correct += best == yy[i];
            for (int k = 1; k < 10; k++) ibest = int_logits[i * 10 + k] > int_logits[i * 10 + ibest] ? k : ibest;
            int_correct += ibest == yy[i];
            agree += ibest == best;
        }
        qat_ctx_step_reset(ctx);
    }
    if (e) exported[0] = int_correct / 1000.0, exported[1] = agree / 1000.0;
    qat_engine_free(e);
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
    double acc = train_slice("mlp", 6400, 1, &c1, 0, NULL);
    printf(" [mlp, 6400 samples: %.1f %%]", 100 * acc);
    CU_ASSERT(acc > 0.85); /* chance is 10 % */
    double acc2 = train_slice("mlp", 6400, 1, &c2, 0, NULL);
    CU_ASSERT_EQUAL(acc, acc2);
    CU_ASSERT_EQUAL(c1, c2); /* bit-identical training */
}

static void test_lenet_learns(void) {
    double c;
    double acc = train_slice("lenet", 6400, 2, &c, 0, NULL);
    printf(" [lenet, 6400 samples: %.1f %%]", 100 * acc);
    CU_ASSERT(acc > 0.85);
}

static void test_qat_learns(void) {
    double c1, c2;
    double ex[2] = {-1, -1};
    double acc = train_slice("lenet", 6400, 3, &c1, 4, ex);
    printf(" [lenet W4A4 QAT, 6400 samples: %.1f %%; int engine %.1f %%, agreement %.1f %%]", 100 * acc,
           100 * ex[0], 100 * ex[1]);
    CU_ASSERT(acc > 0.85);
    /* After one short pass at 4 bits the logit margins are thin, and the
     * contract's fixed-point rounding (one step now and then at a layer
     * boundary, test_export checks that) flips a few close calls: the 99.5 %
     * target is for trained models (README figures); here, no collapse. */
    CU_ASSERT(ex[1] >= 0.97);
    CU_ASSERT(fabs(ex[0] - acc) <= 0.01);
    CU_ASSERT_EQUAL(train_slice("lenet", 6400, 3, &c2, 4, NULL), acc); /* reproducible */
    CU_ASSERT_EQUAL(c1, c2);
}

/* TFLite's rule for average pools (pool_keeps_scale): the fake-quantized
 * pools round a tie half to even, the integer ones half away from zero,
 * and the integer model still agrees with the QAT model on 99.5 % of the
 * predictions. */
static void test_keep_scale_int_export_agrees(void) {
    double c, ex[2] = {-1, -1};
    double acc = train_slice("pools", 6400, 5, &c, 8, ex);
    printf(" [pools W8A8 QAT, pools keep their input's quantization: %.1f %%; int engine %.1f %%, agreement %.1f %%]",
           100 * acc, 100 * ex[0], 100 * ex[1]);
    CU_ASSERT(acc > 0.85); /* chance is 10 % */
    CU_ASSERT(ex[1] >= 0.995);
    CU_ASSERT(fabs(ex[0] - acc) <= 0.005);
}

static void test_w8a8_int_export_agrees(void) {
    double c, ex[2] = {-1, -1};
    double acc = train_slice("lenet", 6400, 4, &c, 8, ex);
    printf(" [lenet W8A8 QAT: %.1f %%; int engine %.1f %%, agreement %.1f %%]", 100 * acc, 100 * ex[0], 100 * ex[1]);
    CU_ASSERT(acc > 0.85);
    CU_ASSERT(ex[1] >= 0.995); /* the contract's 99.5 % */
    CU_ASSERT(fabs(ex[0] - acc) <= 0.005);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"mlp learns a slice of MNIST, reproducibly", test_mlp_learns},
        {"lenet learns a slice of MNIST", test_lenet_learns},
        {"W4A4 QAT of lenet learns a slice of MNIST, reproducibly; its int export agrees", test_qat_learns},
        {"W8A8 QAT of lenet: the int engine agrees on >= 99.5 % of predictions", test_w8a8_int_export_agrees},
        {"W8A8 QAT with pools that keep their input's quantization: the int engine agrees on >= 99.5 %",
         test_keep_scale_int_export_agrees},
        {NULL, NULL},
    };
    return qat_test_main("e2e", cases, argc, argv);
}
