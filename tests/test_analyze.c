/* Looking inside a quantized model: the quantization points' accessors
 * and switches (qat/layers.h), the summary's totals against hand-computed
 * parameters and multiply-accumulates, and the analysis: W2A2 far noisier
 * than W8A8, and a badly scaled point planted in a trained LeNet ranked
 * first. */
#include <stdlib.h>

#include "internals.h"
#include "qat/analyze.h"
#include "qat/data.h"
#include "qat/export.h"
#include "qat/optim.h"
#include "model_util.h"
#include "test_util.h"

static char dir[256];

/* A few training steps at the model's declared input shape, then eval mode. */
static void warm_up(qat_model *m, int steps, qat_rng *rng) {
    int64_t in[3];
    int rank = qat_model_input_shape(m, in);
    qat_test_warm_up(m, rank, in, steps, rng);
}

/* A built model: "lenet", "lenet-bn", "mlp", "tiny" (an MLP 784-32-16-10:
 * trains in a blink, even under valgrind) or a reference model file. */
static qat_model *make(qat_ctx *ctx, const char *name) {
    qat_model *m = qat_model_new(ctx);
    qat_status st;
    if (!strcmp(name, "lenet") || !strcmp(name, "lenet-bn")) st = qat_model_lenet(m, !strcmp(name, "lenet-bn"));
    else if (!strcmp(name, "mlp")) st = qat_model_mlp(m);
    else if (!strcmp(name, "tiny")) {
        st = qat_model_set_input_shape(m, 1, (int64_t[]){784});
        if (st == QAT_OK) st = qat_model_add_linear(m, NULL, 784, 32, true);
        if (st == QAT_OK) st = qat_model_add_relu(m);
        if (st == QAT_OK) st = qat_model_add_linear(m, NULL, 32, 16, true);
        if (st == QAT_OK) st = qat_model_add_relu(m);
        if (st == QAT_OK) st = qat_model_add_linear(m, NULL, 16, 10, true);
    }
    else {
        char path[600];
        snprintf(path, sizeof path, "%s/models/%s.qnet", getenv("QAT_SOURCE_DIR"), name);
        st = qat_model_from_file(m, path);
    }
    CU_ASSERT_EQUAL(st, QAT_OK);
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_OK);
    ASSERT_OK(ctx);
    return m;
}

/* ---- the quantization points' API ------------------------------------------------ */

/* qat_prepare_points names, before qat_prepare, exactly the layers it
 * then quantizes; qat_model_act_quant reports them and nothing else. */
static void test_points_before_and_after_prepare(void) {
    const char *names[] = {"lenet", "lenet-bn", "mlp", "resnet8", "ds-cnn", "mobilenet-v1"};
    int expect_lenet[] = {0, 2, 5, 9, 11, 12}; /* input, relu1, relu2, relu3, relu4, fc3 */
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if (k >= 3 && !getenv("QAT_SOURCE_DIR")) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it)");
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = make(ctx, names[k]);
        int before[256], after[256];
        int nb = qat_prepare_points(m, NULL, before, 256);
        CU_ASSERT_EQUAL(qat_prepare_points(m, NULL, NULL, 0), nb); /* counting alone */
        qat_act_quant_info info;
        CU_ASSERT_FALSE(qat_model_act_quant(m, 0, &info)); /* nothing before prepare */
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        int na = qat_prepare_points(m, NULL, after, 256);
        CU_ASSERT_EQUAL(na, nb);
        CU_ASSERT(nb <= 256 && memcmp(before, after, (size_t)nb * sizeof *before) == 0);
        int with = 0;
        for (int i = 0; i < qat_model_n_layers(m); i++) with += qat_model_act_quant(m, i, &info);
        CU_ASSERT_EQUAL(with, na);
        if (!strcmp(names[k], "lenet")) {
            CU_ASSERT_EQUAL(na, 6);
            CU_ASSERT(memcmp(after, expect_lenet, sizeof expect_lenet) == 0);
        }
        if (!strcmp(names[k], "lenet-bn")) CU_ASSERT_EQUAL(na, 6); /* bn1, bn2 folded: the ReLUs still end the groups */
        qat_ctx_free(ctx);
    }
}

/* qat_model_act_quant gives what the forward applies; qat_model_weight_qtype
 * gives the very scales export writes (BatchNorm folded, and LSQ). */
static void test_point_accessors_match_export(void) {
    for (int lsq = 0; lsq <= 1; lsq++) {
        qat_ctx *ctx = qat_ctx_new(), *pctx = qat_ctx_new();
        qat_model *m = make(ctx, "lenet-bn");
        qat_prepare_config c = qat_prepare_defaults();
        c.lsq = lsq;
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
        qat_rng rng;
        qat_rng_seed(&rng, 3);
        warm_up(m, 4, &rng);
        qat_act_quant_info a;
        int relu1 = qat_model_find_layer(m, "relu1"), conv1 = qat_model_find_layer(m, "conv1");
        CU_ASSERT_FALSE(qat_model_act_quant(m, conv1, &a)); /* its group ends at relu1 */
        CU_ASSERT_TRUE_FATAL(qat_model_act_quant(m, relu1, &a));
        CU_ASSERT_EQUAL(a.bits, 8);
        CU_ASSERT(a.updates == 4 && a.min <= 0 && a.max > 0 && a.scale > 0 && a.qmin == -128 && a.qmax == 127);
        CU_ASSERT_EQUAL(a.scale, m->layers[relu1].aq->q.scale[0]);
        qat_qtype wq;
        CU_ASSERT_NOT_EQUAL(qat_model_weight_qtype(m, relu1, ctx, &wq), QAT_OK); /* a ReLU has no weights */
        qat_ctx_clear_error(ctx);
        qat_qmodel q;
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 3, (int64_t[]){1, 28, 28}, pctx, &q), QAT_OK);
        int checked = 0;
        for (int o = 0; o < q.n_ops; o++) {
            const qat_qop *op = &q.ops[o];
            if (op->kind != QAT_QOP_CONV2D && op->kind != QAT_QOP_LINEAR) continue;
            CU_ASSERT_EQUAL_FATAL(qat_model_weight_qtype(m, qat_model_find_layer(m, op->name), ctx, &wq), QAT_OK);
            CU_ASSERT_EQUAL(wq.nparams, op->wq.nparams);
            CU_ASSERT(wq.qmin == op->wq.qmin && wq.qmax == op->wq.qmax && wq.bits == op->wq.bits);
            CU_ASSERT_EQUAL(qat_test_bit_diffs(wq.scale, op->wq.scale, wq.nparams, true), 0);
            CU_ASSERT(memcmp(wq.zero_point, op->wq.zero_point, (size_t)wq.nparams * sizeof(int32_t)) == 0);
            checked++;
        }
        CU_ASSERT_EQUAL(checked, 5);
        qat_ctx_free(pctx);
        qat_ctx_free(ctx);
    }
}

/* Every switch off is the float forward, every switch on the quantized
 * one, bit for bit; forward_all keeps each point's value before and
 * after its quantizer, and one point on quantizes that point alone. */
static void test_switches_and_forward_all(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = make(ctx, "lenet-bn");
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    warm_up(m, 4, &rng);
    qat_ctx_set_grad_enabled(ctx, false);
    int64_t s[4] = {4, 1, 28, 28};
    qat_tensor *x = t_rand(ctx, &rng, 4, s, -1, 2, false);
    int L = qat_model_n_layers(m), relu2 = qat_model_find_layer(m, "relu2"), conv2 = qat_model_find_layer(m, "conv2");
    float ref_float[40], ref_quant[40];
    qat_model_set_fake_quant(m, false);
    memcpy(ref_float, qat_model_forward(m, x)->data, sizeof ref_float);
    qat_ctx_step_reset(ctx);
    qat_model_set_fake_quant(m, true);
    memcpy(ref_quant, qat_model_forward(m, x)->data, sizeof ref_quant);
    qat_ctx_step_reset(ctx);
    CU_ASSERT(qat_test_bit_diffs(ref_float, ref_quant, 40, true) > 0);

    qat_model_set_all_layers_fake_quant(m, false);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(qat_model_forward(m, x)->data, ref_float, 40, true), 0);
    qat_ctx_step_reset(ctx);
    qat_model_set_all_layers_fake_quant(m, true);
    qat_tensor **out = calloc((size_t)L, sizeof *out), **pre = calloc((size_t)L, sizeof *pre);
    qat_tensor *y = qat_model_forward_all(m, x, out, pre);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(y->data, ref_quant, 40, true), 0);
    CU_ASSERT_PTR_EQUAL(out[L - 1], y);
    CU_ASSERT_PTR_EQUAL(pre[0], x);
    CU_ASSERT_PTR_EQUAL(pre[conv2], out[conv2]); /* no quantizer there: the same value */
    /* at relu2: out is the fake quantization of pre */
    qat_tensor *fq = qat_fake_quant(ctx, pre[relu2], &m->layers[relu2].aq->q, QAT_STE_CLIPPED);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(fq->data, out[relu2]->data, fq->numel, true), 0);
    CU_ASSERT(qat_test_bit_diffs(pre[relu2]->data, out[relu2]->data, fq->numel, true) > 0);
    qat_ctx_step_reset(ctx);

    /* conv2's weights and relu2's activation alone: differs from both references */
    qat_model_set_all_layers_fake_quant(m, false);
    CU_ASSERT_EQUAL(qat_model_set_layer_fake_quant(m, conv2, true, false), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_set_layer_fake_quant(m, relu2, false, true), QAT_OK);
    y = qat_model_forward_all(m, x, out, NULL);
    CU_ASSERT(qat_test_bit_diffs(y->data, ref_float, 40, true) > 0);
    CU_ASSERT(qat_test_bit_diffs(y->data, ref_quant, 40, true) > 0);
    qat_ctx_step_reset(ctx);
    /* a layer with no quantizer is refused, by id */
    CU_ASSERT_EQUAL(qat_model_set_layer_fake_quant(m, qat_model_find_layer(m, "pool1"), true, true), QAT_ERR_ARG);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "has no quantizer") != NULL);
    qat_ctx_clear_error(ctx);
    qat_model_set_all_layers_fake_quant(m, true);
    free(out), free(pre);
    qat_ctx_free(ctx);
}

/* ---- the summary -------------------------------------------------------------- */

/* LeNet-5 by hand (output shapes per sample):
 *   conv1 1->6 5x5 pad 2: [6,28,28]; 6·25 + 6 = 156 params; 6·25·28·28 = 117 600 MACs
 *   conv2 6->16 5x5:      [16,10,10]; 16·150 + 16 = 2 416; 16·150·10·10 = 240 000
 *   fc1 400->120: 48 120; 48 000. fc2 120->84: 10 164; 10 080. fc3 84->10: 850; 840
 *   total 61 706 parameters, 416 520 MACs; 61 470 weights and 236 biases.
 * MLP 784-256-128-10: 200 960 + 32 896 + 1 290 = 235 146 parameters;
 *   200 704 + 32 768 + 1 280 = 234 752 MACs; 234 752 weights and 394 biases. */
static void test_summary_totals_by_hand(void) {
    struct {
        const char *model;
        int wbits;
        int64_t params, macs, weight_bytes;
    } cases[] = {
        {"lenet", 8, 61706, 416520, 61470 + 4 * 236},
        /* 4 bits: each layer's weights packed two to a byte (150, 2400, 48000, 10080, 840: all even) */
        {"lenet", 4, 61706, 416520, 61470 / 2 + 4 * 236},
        {"mlp", 8, 235146, 234752, 234752 + 4 * 394},
        {"mlp", 2, 235146, 234752, 234752 / 4 + 4 * 394},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = make(ctx, cases[k].model);
        qat_summary s;
        /* a float model: every parameter 4 bytes, no memory plan */
        CU_ASSERT_EQUAL_FATAL(qat_model_summary(m, 0, NULL, ctx, &s), QAT_OK);
        CU_ASSERT_EQUAL(s.params, cases[k].params);
        CU_ASSERT_EQUAL(s.macs, cases[k].macs);
        CU_ASSERT_EQUAL(s.weight_bytes, 4 * cases[k].params);
        CU_ASSERT_EQUAL(s.peak_activation_bytes, -1);
        CU_ASSERT_EQUAL(s.params, qat_model_n_params(m));
        qat_prepare_config c = qat_prepare_defaults();
        c.wbits = cases[k].wbits;
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
        qat_rng rng;
        qat_rng_seed(&rng, 7);
        warm_up(m, 2, &rng);
        CU_ASSERT_EQUAL_FATAL(qat_model_summary(m, 0, NULL, ctx, &s), QAT_OK);
        CU_ASSERT_EQUAL(s.params, cases[k].params);
        CU_ASSERT_EQUAL(s.macs, cases[k].macs);
        CU_ASSERT_EQUAL(s.weight_bytes, cases[k].weight_bytes);
        CU_ASSERT_EQUAL(s.float_weight_bytes, 4 * cases[k].params);
        if (s.macs != cases[k].macs || s.weight_bytes != cases[k].weight_bytes)
            printf("\n  %s W%d: %lld MACs, %lld weight bytes\n", cases[k].model, cases[k].wbits, (long long)s.macs,
                   (long long)s.weight_bytes);
        int64_t sum = 0;
        for (int r = 0; r < s.n_rows; r++) sum += s.rows[r].macs;
        CU_ASSERT_EQUAL(sum, s.macs);
        /* the conv1 row of LeNet, column by column */
        if (!strcmp(cases[k].model, "lenet")) {
            const qat_summary_row *r = &s.rows[1];
            CU_ASSERT_STRING_EQUAL(r->name, "conv1");
            CU_ASSERT(r->rank == 3 && r->shape[0] == 6 && r->shape[1] == 28 && r->shape[2] == 28);
            CU_ASSERT(r->params == 156 && r->macs == 117600 && r->wbits == cases[k].wbits && r->waxis == 0);
            CU_ASSERT(r->wscale_min > 0 && r->wscale_min <= r->wscale_max && r->abits == 0);
            CU_ASSERT(s.rows[2].abits == 8 && s.rows[2].aobserved && s.rows[2].amin <= 0 && s.rows[2].amax > 0);
        }
        /* the same totals from the exported program; its peak is export's */
        int64_t peak = -2;
        char path[300];
        snprintf(path, sizeof path, "%s/m.qat.h5", dir);
        CU_ASSERT_EQUAL_FATAL(qat_export(m, 0, NULL, NULL, path, &peak), QAT_OK);
        CU_ASSERT(peak > 0 && s.peak_activation_bytes == peak);
        qat_qmodel q;
        qat_summary qs;
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, &q), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_summary(&q, ctx, &qs), QAT_OK);
        CU_ASSERT(qs.params == s.params && qs.macs == s.macs && qs.weight_bytes == s.weight_bytes);
        CU_ASSERT_EQUAL(qs.peak_activation_bytes, peak);
        CU_ASSERT_EQUAL(qs.n_rows, strcmp(cases[k].model, "lenet") ? 4 : 9); /* the input, then the ops */
        remove(path);
        qat_ctx_free(ctx);
    }
}

/* ---- the analysis --------------------------------------------------------------- */

/* The MNIST test set, split: the first 8000 images to train on, the last
 * 2000 to analyze (only the test file is read: the training file's 47 MB
 * take long to inflate under valgrind). */
typedef struct {
    qat_ctx *ctx;
    qat_mnist test;
} mnist_data;

enum { TRAIN_N = 8000 };

static bool load_mnist(mnist_data *d) {
    const char *dir = getenv("QAT_MNIST_DATA");
    d->ctx = qat_ctx_new();
    if (!dir || qat_mnist_load(d->ctx, dir, "test", &d->test) != QAT_OK) {
        if (dir) printf("\n  %s\n", qat_ctx_error(d->ctx));
        qat_ctx_free(d->ctx);
        return false;
    }
    return true;
}

static void free_mnist(mnist_data *d) {
    qat_mnist_free(&d->test);
    qat_ctx_free(d->ctx);
}

/* `steps` Adam steps (lr 3e-3) of batch 64 on the first TRAIN_N images from sample `from`;
 * with train_mode false only forwards in training mode (observers see
 * data, nothing learns): a calibration. */
static void run_steps(qat_model *m, const mnist_data *d, int steps, int from, bool learn) {
    qat_ctx *ctx = qat_model_ctx(m);
    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    if (learn) qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m));
    qat_model_train(m, true);
    int32_t idx[64], y[64];
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 64; i++) idx[i] = (from + s * 64 + i) % TRAIN_N;
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 2, (int64_t[]){64, 784}, false);
        qat_mnist_batch(&d->test, idx, 64, x->data, y);
        qat_tensor *logits = qat_model_forward(m, x);
        if (learn) {
            CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, logits, y)), QAT_OK);
            qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 3e-3f);
            qat_model_zero_grad(m);
        }
        qat_ctx_step_reset(ctx);
    }
    ASSERT_OK(ctx);
    qat_model_train(m, false);
}

/* The analysis of m over the first n test images, batches of 100. */
static void analyze(qat_model *m, const mnist_data *d, int n, qat_analysis_report *r) {
    qat_analysis *a = qat_analysis_new(m, 100, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    float *x = malloc(100 * 784 * sizeof *x);
    int32_t idx[100], y[100];
    for (int s = 0; s < n; s += 100) {
        for (int i = 0; i < 100; i++) idx[i] = TRAIN_N + s + i;
        qat_mnist_batch(&d->test, idx, 100, x, y);
        CU_ASSERT_EQUAL(qat_analysis_add(a, x, 100, y), QAT_OK);
    }
    free(x);
    CU_ASSERT_EQUAL(qat_analysis_result(a, r), QAT_OK);
    ASSERT_OK(qat_model_ctx(m));
}

/* A tiny MLP trained in float for 120 steps (once: later calls copy the
 * parameters), then prepared at wbits/abits and calibrated on 10 batches:
 * the same weights for every width. Tiny, not LeNet: these tests run
 * under valgrind in CI, where LeNet's convolutions take minutes
 * (test_tools analyzes LeNets, through the program). */
static float *trained_params;
static qat_model *trained_tiny(qat_ctx *ctx, const mnist_data *d, int wbits, int abits) {
    qat_model *m = make(ctx, "tiny");
    int64_t n = qat_model_n_params(m);
    if (!trained_params) {
        run_steps(m, d, 120, 0, true);
        if ((trained_params = malloc((size_t)n * sizeof(float))))
            memcpy(trained_params, qat_model_params(m), (size_t)n * sizeof(float));
    } else {
        memcpy(qat_model_params(m), trained_params, (size_t)n * sizeof(float));
    }
    qat_prepare_config c = qat_prepare_defaults();
    c.wbits = wbits, c.abits = abits;
    CU_ASSERT_EQUAL(qat_prepare(m, &c), QAT_OK);
    run_steps(m, d, 10, 0, false);
    return m;
}

static void print_report(const char *title, const qat_analysis_report *r) {
    printf("\n  %s: float %.2f %%, quantized %.2f %%, logits SQNR %.1f dB\n", title, 100 * r->accuracy_float,
           100 * r->accuracy_quant, r->logits_sqnr_db);
    for (int p = 0; p < r->n_points; p++) {
        const qat_point_report *q = &r->points[p];
        printf("    %-8s A%d W%d  SQNR %6.1f dB  own %6.1f dB  clipped %.4f/%.4f  alone %.3f (w %.3f, a %.3f) %.2f %%\n",
               q->name, q->bits, q->wbits, q->sqnr_db, q->own_sqnr_db, q->clipped_low, q->clipped_high, q->alone_share,
               q->alone_weights_share, q->alone_activation_share, 100 * q->alone_accuracy);
    }
}

/* The same float weights at W8A8 and at W2A2: every 2-bit point's own
 * noise far above its 8-bit self (about 6 dB a bit), the accumulated SQNR
 * too; the model's state is as it was after the analysis. */
static void test_w8a8_against_w2a2(void) {
    mnist_data d;
    if (!load_mnist(&d)) QAT_TEST_SKIP("QAT_MNIST_DATA is not set or has no MNIST (ctest sets it)");
    qat_analysis_report r8, r2;
    qat_ctx *c8 = qat_ctx_new(), *c2 = qat_ctx_new();
    qat_model *m8 = trained_tiny(c8, &d, 8, 8), *m2 = trained_tiny(c2, &d, 2, 2);
    float before = m8->layers[2].aq->q.scale[0];
    analyze(m8, &d, 200, &r8);
    analyze(m2, &d, 200, &r2);
    print_report("W8A8", &r8);
    print_report("W2A2", &r2);
    CU_ASSERT(r8.samples == 200 && r8.n_points == 4 && r2.n_points == 4);
    CU_ASSERT(r8.accuracy_float > 0.85 && r8.accuracy_float == r2.accuracy_float); /* the same float weights */
    CU_ASSERT(r8.accuracy_quant > 0.85 && r8.logits_sqnr_db > 25);
    CU_ASSERT(r2.logits_sqnr_db < r8.logits_sqnr_db - 20);
    for (int p = 0; p < r8.n_points; p++) {
        const qat_point_report *a = &r8.points[p], *b = NULL;
        for (int k = 0; k < r2.n_points; k++)
            if (r2.points[k].layer == a->layer) b = &r2.points[k];
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT(a->own_sqnr_db > 25 && a->sqnr_db > 20); /* 8 bits: tens of dB */
        CU_ASSERT(a->alone_share >= 0 && a->alone_share < 1.5);
        if (b->bits == 2) CU_ASSERT(b->own_sqnr_db < a->own_sqnr_db - 20);
        if (b->layer > 0) CU_ASSERT(b->sqnr_db < a->sqnr_db - 10);
    }
    /* mode, phase, switches and observers as they were */
    CU_ASSERT_FALSE(qat_model_training(m8));
    CU_ASSERT_TRUE(qat_model_fake_quant_on(m8));
    CU_ASSERT_EQUAL(m8->layers[2].aq->q.scale[0], before);
    for (int i = 0; i < m8->n_layers; i++) CU_ASSERT(!m8->layers[i].wq_off && (!m8->layers[i].aq || !m8->layers[i].aq->off));
    CU_ASSERT_TRUE(qat_ctx_grad_enabled(c8));
    qat_ctx_free(c8), qat_ctx_free(c2);
    free_mnist(&d);
}

/* A trained W8A8 tiny MLP with one badly scaled point planted — relu1 (fc1's
 * output) given a tiny fixed range, observers frozen — is ranked first,
 * clipping its positive values at qmax, and owns most of the logit noise. */
static void test_planted_point_ranks_first(void) {
    mnist_data d;
    if (!load_mnist(&d)) QAT_TEST_SKIP("QAT_MNIST_DATA is not set or has no MNIST (ctest sets it)");
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = trained_tiny(ctx, &d, 8, 8);
    qat_analysis_report r;
    analyze(m, &d, 200, &r);
    int relu1 = qat_model_find_layer(m, "relu1");
    CU_ASSERT(r.points[0].layer != relu1 || r.points[0].alone_share < 0.5);
    qat__act_quant *a = m->layers[relu1].aq;
    a->q.scale[0] = 1e-4f; /* [0, 0.0255]: ReLU outputs of order 1 all clip */
    a->q.zero_point[0] = a->q.qmin;
    qat_model_freeze_observers(m, true);
    analyze(m, &d, 200, &r);
    print_report("W8A8, relu1 planted", &r);
    CU_ASSERT_EQUAL(r.points[0].layer, relu1);
    CU_ASSERT_STRING_EQUAL(r.points[0].name, "relu1");
    CU_ASSERT_STRING_EQUAL(r.points[0].anchor_name, "fc1");
    CU_ASSERT(r.points[0].clipped_high > 0.3 && r.points[0].own_sqnr_db < 5); /* ReLU's zeros do not clip */
    CU_ASSERT(r.points[0].alone_share > 0.5 && r.points[0].alone_activation_share > 0.5);
    CU_ASSERT(r.points[0].alone_weights_share < 0.1);
    CU_ASSERT(r.points[0].alone_accuracy < r.accuracy_float - 0.1);
    for (int p = 1; p < r.n_points; p++) CU_ASSERT(r.points[p].alone_share <= r.points[0].alone_share);
    qat_ctx_free(ctx);
    free_mnist(&d);
}

/* What the analysis refuses: a float model, a point never observed, a
 * batch larger than it was made for; points after the model's output are
 * left out. */
static void test_analysis_refuses(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = make(ctx, "mlp");
    CU_ASSERT_PTR_NULL(qat_analysis_new(m, 10, 0, NULL));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "not prepared") != NULL);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_analysis_new(m, 10, 0, NULL));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "was never observed") != NULL);
    qat_ctx_clear_error(ctx);
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    warm_up(m, 1, &rng);
    qat_analysis *a = qat_analysis_new(m, 10, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    float x[11 * 784] = {0};
    CU_ASSERT_EQUAL(qat_analysis_add(a, x, 11, NULL), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_analysis_add(a, x, 10, NULL), QAT_OK);
    qat_analysis_report r;
    CU_ASSERT_EQUAL(qat_analysis_result(a, &r), QAT_OK);
    CU_ASSERT(r.samples == 10 && r.accuracy_float == -1 && r.points[0].alone_accuracy == -1 && r.n_points == 4);
    /* a model whose output is fc2: fc3's point never runs, and is not one */
    qat_model *m2 = qat_model_new(ctx);
    qat_model_set_input_shape(m2, 1, (int64_t[]){784});
    int fc1 = qat_layer_linear(m2, NULL, 0, 784, 16, true), relu = qat_layer_relu(m2, NULL, fc1);
    int fc2 = qat_layer_linear(m2, NULL, relu, 16, 12, true);
    qat_layer_linear(m2, NULL, qat_layer_relu(m2, NULL, fc2), 12, 10, true);
    CU_ASSERT_EQUAL(qat_model_set_output(m2, fc2), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m2, 1), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m2, NULL), QAT_OK);
    warm_up(m2, 1, &rng);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a = qat_analysis_new(m2, 10, 0, NULL));
    CU_ASSERT_EQUAL(qat_analysis_add(a, x, 10, NULL), QAT_OK);
    CU_ASSERT_EQUAL(qat_analysis_result(a, &r), QAT_OK);
    CU_ASSERT_EQUAL(r.n_points, 3); /* input, relu1, fc2 */
    ASSERT_OK(ctx);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"points: named before prepare as prepare places them", test_points_before_and_after_prepare},
        {"point accessors: what the forward applies, what export writes", test_point_accessors_match_export},
        {"switches and forward_all: all off = float, all on = quantized, one point alone", test_switches_and_forward_all},
        {"summary: totals equal hand-computed parameters, MACs and bytes (LeNet, MLP)", test_summary_totals_by_hand},
        {"analysis: W2A2 far noisier than W8A8 on the same weights", test_w8a8_against_w2a2},
        {"analysis: a planted badly scaled point is ranked first", test_planted_point_ranks_first},
        {"analysis: refuses float models, unobserved points, oversized batches", test_analysis_refuses},
        {NULL, NULL},
    };
    if (!qat_test_tmpdir(dir, sizeof dir, "analyze")) return 2;
    int rc = qat_test_main("analyze", cases, argc, argv);
    qat_test_rmdir(dir);
    free(trained_params);
    return rc;
}
