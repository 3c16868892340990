/* The graph models: building, the fusion matcher on branches, the QAT
 * pass's per-layer configurations, model files, lowering of every new op
 * kind against hand-computed integers and through export -> load ->
 * engine, the runtime's memory plan, and the numpy reader on every
 * reference model. */
#define _POSIX_C_SOURCE 200809L
#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internals.h"
#include "qat/analyze.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/io.h"
#include "qat/optim.h"
#include "runtime/plan_rules.h"
#include "model_util.h"
#include "test_util.h"

static char dir[256];

static void path_of(char *buf, size_t len, const char *name) {
    if (snprintf(buf, len, "%s/%s", dir, name) >= (int)len) buf[0] = '\0'; /* too long: no file, a failure */
}

/* ---- building and the matcher ----------------------------------------------------- */

static void test_build_errors_name_the_layer(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_layer_relu(m, NULL, 5), -1); /* no layer 5 */
    CU_ASSERT(strstr(qat_ctx_error(ctx), "input 5 is not a layer") != NULL);
    qat_ctx_clear_error(ctx);
    qat_conv2d_spec bad = qat_conv2d_square(3, 4, 3, 1, 1, true);
    bad.groups = 2; /* does not divide 3 */
    CU_ASSERT_EQUAL(qat_layer_conv2d(m, "c", 0, &bad), -1);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "groups must divide") != NULL);
    qat_ctx_clear_error(ctx);
    /* a declared input shape: build checks every layer fits */
    qat_model_set_input_shape(m, 3, (int64_t[]){3, 8, 8});
    qat_conv2d_spec c = qat_conv2d_square(3, 4, 3, 1, 1, true);
    int a = qat_layer_conv2d(m, "a", 0, &c);
    c.in = 4, c.stride_h = c.stride_w = 2;
    int b = qat_layer_conv2d(m, "b", a, &c);
    qat_layer_add(m, "sum", a, b); /* [4, 8, 8] + [4, 4, 4] */
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_ERR_SHAPE);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "add sum") != NULL);
    qat_ctx_free(ctx);
}

/* A conv whose output feeds two consumers is not fused with the BatchNorm
 * that is one of them; a BatchNorm that owns its conv is. */
static void test_matcher_on_branches(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_set_input_shape(m, 3, (int64_t[]){2, 6, 6});
    qat_conv2d_spec s = qat_conv2d_square(2, 4, 3, 1, 1, false);
    int c1 = qat_layer_conv2d(m, "c1", 0, &s);
    int bn1 = qat_layer_batchnorm(m, "bn1", c1, 4, 0.1f, 1e-5f);
    int r1 = qat_layer_relu(m, "r1", bn1); /* c1 -> bn1 -> r1: one group */
    s.in = 4;
    int c2 = qat_layer_conv2d(m, "c2", r1, &s);
    int bn2 = qat_layer_batchnorm(m, "bn2", c2, 4, 0.1f, 1e-5f);
    int a = qat_layer_add(m, "a", bn2, c2); /* c2 feeds bn2 and the add */
    qat_layer_relu(m, "r2", a);
    int gap = qat_layer_global_avgpool(m, NULL, qat_model_find_layer(m, "r2"));
    qat_layer_linear(m, "fc", gap, 4, 3, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat__group g;
    qat__match_group(m, c1, true, &g);
    CU_ASSERT(g.bn == bn1 && g.act == r1 && g.end == r1);
    qat__match_group(m, c2, true, &g);
    CU_ASSERT(g.bn == -1 && g.act == -1 && g.end == c2); /* not its BatchNorm's alone */
    qat__match_group(m, a, true, &g);
    CU_ASSERT(g.act == qat_model_find_layer(m, "r2"));
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    CU_ASSERT_EQUAL(m->layers[c1].fold_bn, bn1);
    CU_ASSERT_EQUAL(m->layers[c2].fold_bn, -1);
    CU_ASSERT(!m->layers[bn2].folded && m->layers[bn2].aq == NULL);
    CU_ASSERT(m->layers[c2].aq != NULL && m->layers[r1].aq != NULL && m->layers[c1].aq == NULL);
    CU_ASSERT(m->layers[qat_model_find_layer(m, "r2")].aq != NULL && m->layers[a].aq == NULL);
    /* lowering refuses the unfolded BatchNorm, naming it */
    qat_rng rng;
    qat_rng_seed(&rng, 2);
    qat_model_train(m, true);
    qat_test_warm_up(m, 3, (int64_t[]){2, 6, 6}, 2, &rng);
    qat_qmodel q;
    CU_ASSERT_EQUAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "layer bn2") != NULL);
    qat_ctx_free(ctx);
}

/* Per-layer configurations are whole (fold_bn, ste honoured) and
 * qat_prepare_layer is all or nothing, LSQ included. */
static void test_prepare_layer_whole_and_transactional(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    int conv2 = qat_model_find_layer(m, "conv2"), bn2 = qat_model_find_layer(m, "bn2");
    int64_t nq = qat_model_n_qparams(m);
    float before = m->layers[conv2].wscale->data[0];
    CU_ASSERT(m->layers[conv2].fold_bn == bn2);
    /* a block size that does not divide: refused, nothing changed */
    qat_prepare_config bad = c;
    bad.wgran = QAT_GRAN_BLOCK, bad.block = 7;
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "conv2", &bad), QAT_ERR_SHAPE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_n_qparams(m), nq);
    CU_ASSERT(m->layers[conv2].wscale->data[0] == before && m->layers[conv2].fold_bn == bn2);
    CU_ASSERT_EQUAL(m->layers[conv2].qcfg->wgran, QAT_GRAN_CHANNEL);
    /* fold_bn off and the plain STE for conv2 alone: honoured */
    qat_prepare_config own = c;
    own.fold_bn = false, own.ste = QAT_STE_PLAIN, own.lsq = false;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "conv2", &own), QAT_OK);
    CU_ASSERT_EQUAL(m->layers[conv2].fold_bn, -1);
    CU_ASSERT(!m->layers[bn2].folded);
    CU_ASSERT(m->layers[conv2].aq != NULL && m->layers[conv2].aq->ste == QAT_STE_PLAIN);
    CU_ASSERT_PTR_NULL(m->layers[conv2].wscale);                 /* LSQ off for it */
    CU_ASSERT_EQUAL(qat_model_n_qparams(m), nq - 16);           /* its 16 scales left the block */
    CU_ASSERT(m->layers[qat_model_find_layer(m, "conv1")].wscale != NULL);
    CU_ASSERT_EQUAL(m->layers[qat_model_find_layer(m, "fc1")].wscale->data - m->qparams, 6); /* in layer order */
    qat_ctx_free(ctx);
}

/* LSQ's initial scales are 2·mean|w|/sqrt(qmax) of the weight as it is
 * quantized: a layer with a BatchNorm folded in quantizes w times
 * gamma/sqrt(running_var + eps) per output channel, so its scales start
 * from that product (with a trained BatchNorm, from the raw weight they
 * were off by that factor: a W2 DS-CNN fine-tune fell to 25 %). */
static void test_lsq_init_sees_the_folded_weight(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, true);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    int conv2 = qat_model_find_layer(m, "conv2"), bn2 = qat_model_find_layer(m, "bn2"), fc1 = qat_model_find_layer(m, "fc1");
    qat__layer *bn = &m->layers[bn2];
    for (int64_t o = 0; o < bn->cout; o++) /* a trained-looking BatchNorm: sf from 0.1 to about 9, one negative */
        bn->running_var[o] = 0.01f * (float)((o + 1) * (o + 1)), bn->gamma->data[o] = o == 3 ? -0.9f : 0.1f + 0.05f * (float)o;
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true, c.wbits = 4;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    CU_ASSERT_FATAL(m->layers[conv2].fold_bn == bn2 && m->layers[conv2].wscale && m->layers[fc1].fold_bn < 0);
    for (int layer = 0; layer < 2; layer++) {
        const qat__layer *l = &m->layers[layer ? fc1 : conv2];
        int64_t O = l->weight->shape[0], per = l->weight->numel / O;
        for (int64_t o = 0; o < O; o++) {
            double sf = layer ? 1.0 : fabs((double)bn->gamma->data[o]) / sqrt((double)bn->running_var[o] + bn->eps), sum = 0;
            for (int64_t j = 0; j < per; j++) sum += fabs((double)l->weight->data[o * per + j]);
            double want = 2.0 * sf * sum / (double)per / sqrt((double)l->wq->qmax);
            CU_ASSERT_DOUBLE_EQUAL(l->wscale->data[o], want, 1e-5 * want);
        }
    }
    qat_ctx_free(ctx);
}

/* Re-configuring only a layer's weights keeps its group's activation
 * quantizer and the range it observed (a sensitivity measurement changes
 * the weights alone); another activation configuration starts afresh. */
static void test_prepare_layer_keeps_activation_range(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 4);
    qat_model_train(m, true);
    qat_test_warm_up(m, 1, (int64_t[]){784}, 3, &rng);
    int fc1 = qat_model_find_layer(m, "fc1"), relu1 = qat_model_find_layer(m, "relu1");
    const qat__act_quant *aq = m->layers[relu1].aq;
    CU_ASSERT_FATAL(aq != NULL && aq->obs.updates == 3);
    qat_act_quant_info before, after;
    CU_ASSERT_FATAL(qat_model_act_quant(m, relu1, &before));
    qat_prepare_config four = c;
    four.wbits = 4;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "fc1", &four), QAT_OK);
    CU_ASSERT(m->layers[relu1].aq == aq && m->layers[fc1].wq->bits == 4);
    CU_ASSERT_FATAL(qat_model_act_quant(m, relu1, &after));
    CU_ASSERT(after.updates == 3 && after.min == before.min && after.max == before.max && after.scale == before.scale);
    qat_prepare_config six = four;
    six.abits = 6;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "fc1", &six), QAT_OK);
    CU_ASSERT(m->layers[relu1].aq != aq && m->layers[relu1].aq->obs.updates == 0 && m->layers[relu1].aq->q.bits == 6);
    qat_ctx_free(ctx);
}

/* Exporting every epoch does not grow the model's memory. */
static void test_export_does_not_grow_memory(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    qat_model_build(m, 1);
    qat_prepare(m, NULL);
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    qat_model_train(m, true);
    qat_test_warm_up(m, 1, (int64_t[]){784}, 1, &rng);
    char path[300];
    path_of(path, sizeof path, "grow.qat.h5");
    CU_ASSERT_EQUAL_FATAL(qat_export(m, 0, NULL, NULL, path, NULL), QAT_OK);
    size_t after_one = qat_ctx_persist_bytes(ctx);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(qat_export(m, 0, NULL, NULL, path, NULL), QAT_OK);
    CU_ASSERT_EQUAL(qat_ctx_persist_bytes(ctx), after_one);
    qat_ctx_free(ctx);
}

/* ---- custom ops ----------------------------------------------------------------------- */

/* y = a·b + c, element-wise, over three inputs of one shape. */
static qat_status fma_shape(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank, int64_t *shape) {
    (void)ctx, (void)user, (void)n;
    *rank = x[0]->rank;
    memcpy(shape, x[0]->shape, sizeof x[0]->shape);
    return QAT_OK;
}
static qat_status fma_forward(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)ctx, (void)user, (void)n;
    for (int64_t i = 0; i < y->numel; i++) y->data[i] = x[0]->data[i] * x[1]->data[i] + x[2]->data[i];
    return QAT_OK;
}
static qat_status fma_backward(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, const qat_tensor *y,
                               float *const *gx) {
    (void)ctx, (void)user, (void)n;
    for (int64_t i = 0; i < y->numel; i++) {
        if (gx[0]) gx[0][i] += y->grad[i] * x[1]->data[i];
        if (gx[1]) gx[1][i] += y->grad[i] * x[0]->data[i];
        if (gx[2]) gx[2][i] += y->grad[i];
    }
    return QAT_OK;
}
static const qat_custom_op fma_op = {"fma", fma_shape, fma_forward, fma_backward};

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

static void test_custom_layer_trains_and_is_refused_by_lowering(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_set_input_shape(m, 1, (int64_t[]){4});
    int a = qat_layer_linear(m, "a", 0, 4, 3, true), b = qat_layer_linear(m, "b", 0, 4, 3, true);
    int c = qat_layer_linear(m, "c", 0, 4, 3, true);
    int in[3] = {a, b, c};
    qat_layer_custom(m, "mix", &fma_op, NULL, 3, in);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 4), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 8);
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, (int64_t[]){3, 4}, false);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
    model_user u = {m, x};
    qat_tensor *ins[6];
    for (int i = 0; i < m->n_param_tensors; i++) ins[i] = m->param_list[i].tensor;
    qat_gradcheck_result r;
    qat_status st = qat_gradcheck(ctx, model_loss, &u, ins, m->n_param_tensors, 1e-2f, 2e-3f, 2e-2f, &r);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    CU_ASSERT_EQUAL(qat_prepare(m, NULL), QAT_OK);
    qat_test_warm_up(m, 1, (int64_t[]){4}, 2, &rng);
    qat_qmodel q;
    CU_ASSERT_EQUAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "layer mix: custom op \"fma\" has no integer form") != NULL);
    qat_ctx_clear_error(ctx);
    /* its checkpoint cannot be rebuilt from the file alone */
    char path[300];
    path_of(path, sizeof path, "custom.ckpt.h5");
    CU_ASSERT_EQUAL(qat_checkpoint_save(m, NULL, NULL, NULL, path), QAT_OK);
    qat_model *back = NULL;
    CU_ASSERT_EQUAL(qat_checkpoint_model(ctx, path, &back, NULL, 0), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "custom op") != NULL);
    qat_ctx_free(ctx);
}

/* ---- model files -------------------------------------------------------------------- */

static void expect_file_error(const char *text, const char *phrase) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_NOT_EQUAL(qat_model_from_text(m, text, "t.qnet"), QAT_OK);
    if (!strstr(qat_ctx_error(ctx), phrase)) printf("\n  got \"%s\", want \"%s\"\n", qat_ctx_error(ctx), phrase);
    CU_ASSERT(strstr(qat_ctx_error(ctx), phrase) != NULL);
    qat_ctx_free(ctx);
}

static void test_model_file_errors_name_line_and_field(void) {
    expect_file_error("conv2d c input out=4 kernel=3\n", "t.qnet:1: the first line must be \"input shape=...\"");
    /* a misspelt key is named, not taken for a missing one; a missing or unreadable required key says which */
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernl=3\n", "t.qnet:2: conv2d c: unknown key \"kernl\"");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4\n", "t.qnet:2: conv2d c: kernel=K or kernel=KHxKW (1..64) is required");
    expect_file_error("input shape=1,8,8\nconv2d c input out=1O kernel=3\n", "t.qnet:2: conv2d c: out=N (channels, 1..1048576), not \"1O\"");
    expect_file_error("input shape=4\nlinear l input out=0\n", "t.qnet:2: linear l: out=N (features, 1..16777216), not \"0\"");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernel=3 strid=2\n", "t.qnet:2: conv2d c: unknown key \"strid\"");
    expect_file_error("input shape=1,8,8\nrelu r nothing\n", "t.qnet:2: input \"nothing\" is not a layer defined above");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernel=3\nlinear f c out=10\n",
                      "t.qnet:3: linear f: its input c is not a vector");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernel=3 in=2\n", "t.qnet:2: conv2d c: in=2, but its input has 1 channels");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernel=9\n", "t.qnet:2: model: conv2d c: its window is larger");
    expect_file_error("input shape=1,8,8\nadd a input\n", "t.qnet:2: add a: takes 2 inputs, has 1");
    expect_file_error("input shape=1,8,8\nmystery m input\n", "t.qnet:2: unknown layer kind \"mystery\"");
    expect_file_error("input shape=1,8,8\nrelu r input\nrelu r input\n", "t.qnet:3: relu r: a layer of that name is defined above");
    expect_file_error("input shape=0,8,8\n", "t.qnet:1: input: shape is 1 or 3 whole numbers");
    expect_file_error("input shape=1,8,8\nconv2d c input out=4 kernel=3 groups=3\n", "t.qnet:2: model: conv2d c: groups must divide");
    expect_file_error("input shape=1,8,8\n", "t.qnet: no layers");
    /* names follow the one rule (qat_name_valid); a model file is text */
    expect_file_error("input shape=1,8,8\nrelu a.b input\n", "t.qnet:2: relu: bad layer name: \"a.b\" holds '.' at byte 1");
    expect_file_error("input shape=1,8,8\nrelu a\x1b[2Jb input\n", "t.qnet:2: control character 0x1b at column 7");
    expect_file_error("input shape=1,8,8\nrelu a\x9b" "2Jb input\n", "t.qnet:2: byte 0x9b at column 7 is not UTF-8");
    expect_file_error("input shape=1,8,8\nrelu a\xc2\x9b" "2Jb input\n", "t.qnet:2: control character U+009B at column 7");
    expect_file_error("# caf\xc3\xa9\ninput shape=1,8,8\nrelu caf\xc3\xa9 input\nrelu r\xe9 input\n",
                      "t.qnet:4: byte 0xe9 at column 7 is not UTF-8"); /* UTF-8 passes, Latin-1 does not */
    expect_file_error("input shape=1,8,8\nrelu r0123456789012345678901234567890 input\n",
                      "t.qnet:2: relu: bad layer name: \"r012345678901234567890123456789...\" is too long");
    char path[300];
    path_of(path, sizeof path, "missing.qnet");
    qat_ctx *ctx = qat_ctx_new();
    CU_ASSERT_EQUAL(qat_model_from_file(qat_model_new(ctx), path), QAT_ERR_IO);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "No such file") != NULL);
    qat_ctx_free(ctx);
}

/* ---- what a small file may demand ------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An 85-byte model file declaring 443 M parameters, and 20 000 `add`
 * layers in 460 KB: each field in its range, their totals far beyond the
 * limits. Each is refused in well under a second, before the model is
 * built, with a message that names the line, the size, the limit and how
 * to raise it; raising the limit that fired lets the next one fire. */
static void test_model_file_totals_are_bounded(void) {
    static const char big[] = "input shape=1,28,28\nconv2d c input out=1002262 kernel=21\nflatten f c\nlinear l f out=9";
    CU_ASSERT_EQUAL(strlen(big), 85);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    double t0 = now_s();
    CU_ASSERT_EQUAL(qat_model_from_text(m, big, "big.qnet"), QAT_ERR_UNSUPPORTED);
    const char *e = qat_ctx_error(ctx);
    if (!strstr(e, "442999804")) printf("\n  %s\n", e);
    CU_ASSERT(strstr(e, "big.qnet:2: model: conv2d c brings the model to 442999804 parameters") != NULL);
    CU_ASSERT(strstr(e, "max_params = 67108864") != NULL && strstr(e, "qat_model_set_limits") != NULL);
    /* raised: the parameters pass, and the layer outputs (2 GiB a sample) are refused */
    qat_ctx_clear_error(ctx);
    m = qat_model_new(ctx);
    qat_model_limits lim = {.max_params = (int64_t)1 << 40};
    CU_ASSERT_EQUAL(qat_model_set_limits(m, &lim), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_get_limits(m).max_layers, QAT_MODEL_MAX_LAYERS); /* 0: the default */
    CU_ASSERT_EQUAL(qat_model_from_text(m, big, "big.qnet"), QAT_ERR_UNSUPPORTED);
    e = qat_ctx_error(ctx);
    CU_ASSERT(strstr(e, "big.qnet:2: model: its layers' outputs take 256582208 bytes a sample") != NULL);
    CU_ASSERT(strstr(e, "max_activation_bytes = 67108864") != NULL);
    qat_ctx_clear_error(ctx);
    /* 20 000 adds of [16, 28, 28]: 50 KB each, the outputs reach the limit at line 1339 */
    enum { N_ADD = 20000 };
    char *text = malloc(64 + (size_t)N_ADD * 40);
    CU_ASSERT_FATAL(text != NULL);
    for (int small = 0; small < 2; small++) {
        size_t k = (size_t)sprintf(text, "input shape=%s\nconv2d c input out=%d kernel=3 pad=1\n", small ? "1,4,4" : "1,28,28",
                                   small ? 1 : 16);
        k += (size_t)sprintf(text + k, "add a0 c,c\n");
        for (int i = 1; i < N_ADD; i++) k += (size_t)sprintf(text + k, "add a%d a%d,a%d\n", i, i - 1, i - 1);
        m = qat_model_new(ctx);
        t0 = now_s();
        CU_ASSERT_EQUAL(qat_model_from_text(m, text, "adds.qnet"), QAT_ERR_UNSUPPORTED);
        double dt = now_s() - t0;
        e = qat_ctx_error(ctx);
        if (small) /* tiny outputs: the layer count fires */
            CU_ASSERT(strstr(e, "adds.qnet:4097: model: layer a4094 would make 4097 layers (the input included), more than the limit max_layers = 4096") != NULL);
        if (!small) CU_ASSERT(strstr(e, "adds.qnet:1339: model: its layers' outputs take 67138624 bytes a sample") != NULL);
        if (!strstr(e, small ? "max_layers" : "max_activation")) printf("\n  %s\n", e);
        CU_ASSERT(dt < 30.0); /* 10 ms here; valgrind is 50 times slower; the unbounded parse took seconds, the build minutes */
        qat_ctx_clear_error(ctx);
    }
    free(text);
    /* a model built in code is held to the same limits: when its layers are
     * added (parameters, layers) and by build (outputs, before allocating) */
    m = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_set_limits(m, &(qat_model_limits){.max_params = 1000, .max_activation_bytes = 1000}), QAT_OK);
    CU_ASSERT_EQUAL(qat_layer_linear(m, "fc", 0, 100, 10, true), -1); /* 1010 parameters */
    CU_ASSERT(strstr(qat_ctx_error(ctx), "linear fc brings the model to 1010 parameters") != NULL);
    CU_ASSERT_EQUAL(qat_model_n_layers(m), 1); /* taken back */
    qat_ctx_clear_error(ctx);
    CU_ASSERT(qat_layer_linear(m, "fc", 0, 90, 10, true) == 1);
    CU_ASSERT_EQUAL(qat_model_set_limits(m, NULL), QAT_ERR_STATE); /* only before layers are added */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_model_set_input_shape(m, 1, (int64_t[]){90}), QAT_OK);
    CU_ASSERT(qat_layer_relu(m, "r", 1) == 2);
    CU_ASSERT(qat_layer_relu(m, "r2", 2) == 3); /* 90 + 10 + 10 + 10 floats = 480 bytes */
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_OK);
    m = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_set_limits(m, &(qat_model_limits){.max_activation_bytes = 399}), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_set_input_shape(m, 1, (int64_t[]){90}), QAT_OK);
    CU_ASSERT(qat_layer_linear(m, "fc", 0, 90, 10, true) == 1); /* 90 + 10 floats: 400 bytes */
    CU_ASSERT_EQUAL(qat_model_build(m, 1), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "take 400 bytes a sample (float32), more than the limit "
                                         "max_activation_bytes = 399") != NULL);
    qat_ctx_free(ctx);
}

/* A FIFO or a directory given as a model file (or as a checkpoint or a
 * quantized model) is refused at once: a FIFO with no writer would block
 * an open or a read forever, a directory read as empty said "no layers".
 * The test process sets an alarm: a blocked open ends it, a failure. */
static void test_fifo_and_directory_are_refused(void) {
    char fifo[300];
    path_of(fifo, sizeof fifo, "model.fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    alarm(20);
    const char *paths[2] = {fifo, dir};
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        double t0 = now_s();
        CU_ASSERT_EQUAL(qat_model_from_file(qat_model_new(ctx), paths[k]), QAT_ERR_FORMAT);
        CU_ASSERT(strstr(qat_ctx_error(ctx), k ? "not a regular file (a directory)" : "not a regular file (a FIFO)") != NULL);
        qat_ctx_clear_error(ctx);
        qat_qmodel q;
        CU_ASSERT_EQUAL(qat_qmodel_load(ctx, paths[k], &q), QAT_ERR_FORMAT);
        CU_ASSERT(strstr(qat_ctx_error(ctx), "not a regular file") != NULL);
        qat_ctx_clear_error(ctx);
        qat_model *m = NULL;
        CU_ASSERT_EQUAL(qat_checkpoint_model(ctx, paths[k], &m, NULL, 0), QAT_ERR_FORMAT);
        CU_ASSERT(strstr(qat_ctx_error(ctx), "not a regular file") != NULL);
        CU_ASSERT(now_s() - t0 < 10.0); /* at once (a blocked open never returns: the alarm ends the test) */
        qat_ctx_free(ctx);
    }
    alarm(0);
    unlink(fifo);
}

/* ---- the new ops through lowering, by hand ------------------------------------------ */

static qat_aparams ap(float s, int32_t zp) {
    return (qat_aparams){.scale = s, .zero_point = zp, .bits = 8, .is_signed = true, .qmin = -128, .qmax = 127};
}

static qat_qtensor vec(const char *name, int64_t n, qat_aparams q) {
    qat_qtensor t = {.rank = 1, .shape = {n}, .q = q};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* A program of one op over vectors: inputs are tensors 0..n_in-1?  No: a
 * program has one input, so two-input ops read the input and a relu of it. */
static int32_t m0_of(double M, int *shift) {
    int32_t m;
    qat_quantize_multiplier(M, &m, shift);
    return m;
}

/* TFLite's ADD by hand: a = input (s 0.5, zp -1), b = relu(a) (same
 * quantization), out s 0.25 zp 3, relu fused. */
static void test_add_hand_computed(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtensor ts[3] = {vec("input", 3, ap(0.5f, -1)), vec("r", 3, ap(0.5f, -1)), vec("sum", 3, ap(0.25f, 3))};
    qat_qop ops[2] = {{.kind = QAT_QOP_RELU, .name = "r", .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1, .act_min = -1,
                       .act_max = 127},
                      {.kind = QAT_QOP_ADD, .name = "sum", .n_inputs = 2, .inputs = {0, 1}, .output = 2, .groups = 1, .act = QAT_ACT_RELU,
                       .act_min = 3, .act_max = 127, .left_shift = 20, .n_mult = 3}};
    int32_t mult[3], shift[3];
    int sh;
    mult[0] = m0_of(0.5 / 1.0, &sh), shift[0] = sh; /* s_a / (2·max) = 0.5 / 1 */
    mult[1] = m0_of(0.5 / 1.0, &sh), shift[1] = sh;
    mult[2] = m0_of(1.0 / (1048576.0 * 0.25), &sh), shift[2] = sh; /* 2·max / (2^20 · s_out) */
    ops[1].multiplier = mult, ops[1].shift = shift;
    qat_qmodel q = {.n_tensors = 3, .n_ops = 2, .tensors = ts, .ops = ops, .input = 0, .output = 2, .config = ""};
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &q), QAT_OK);
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, 1);
    CU_ASSERT_FATAL(e != NULL);
    /* x = (1.5, -2, 0.25): q = (2, -5, -1 + rint(0.5) = -1) -> x - zp = (3, -4, 0).
     * relu: max(q, -1) = (2, -1, -1) -> b - zp = (3, 0, 0).
     * a·2^20·0.5 = 3·2^19; b likewise; sum = 3·2^20 (first), -4·2^19 (second), 0.
     * out = 3 + sum·(1/(2^20·0.25))·... : 3·2^20 / 2^20 / 0.25... M_out = 1/(2^20·0.25) = 2^-18:
     * 3·2^20·2^-18 = 12 -> 15; -2^21·2^-18 = -8 -> -5 -> relu clamp at 3; 0 -> 3. */
    float x[3] = {1.5f, -2.0f, 0.25f};
    int32_t qi[3];
    CU_ASSERT_EQUAL(qat_engine_run(e, x, 1, NULL, qi), QAT_OK);
    CU_ASSERT_EQUAL(qi[0], 15);
    CU_ASSERT_EQUAL(qi[1], 3);
    CU_ASSERT_EQUAL(qi[2], 3);
    qat_engine_free(e);
    /* parameters under which the int32 steps overflow are refused on load: input multipliers of
     * (2^31 - 1, shift 30) (each scaled input saturates: their sum leaves int32), and a left shift of
     * 24 with |q - zp| up to 128 (255·2^24 > 2^31) */
    int32_t big[3] = {INT32_MAX, INT32_MAX, 1 << 30}, bigsh[3] = {30, 30, 0};
    ops[1].multiplier = big, ops[1].shift = bigsh;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &q), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "past int32"));
    qat_ctx_clear_error(ctx);
    ops[1].multiplier = mult, ops[1].shift = shift, ops[1].left_shift = 24;
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &q), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "do not fit int32"));
    qat_ctx_clear_error(ctx);
    ops[1].left_shift = 23; /* 128·2^23 = 2^30: inside */
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, &q), QAT_OK);
    qat_ctx_free(ctx);
}

/* Concat by hand: the input (s 0.5, zp 0) and relu(input) requantized to
 * s 1, zp 10. */
static void test_concat_hand_computed(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qtensor ts[3] = {vec("input", 2, ap(0.5f, 0)), vec("r", 2, ap(0.5f, 0)), vec("cat", 4, ap(1.0f, 10))};
    int32_t mult[2], shift[2];
    int sh;
    mult[0] = m0_of(0.5, &sh), shift[0] = sh, mult[1] = mult[0], shift[1] = sh;
    qat_qop ops[2] = {{.kind = QAT_QOP_RELU, .name = "r", .n_inputs = 1, .inputs = {0}, .output = 1, .groups = 1, .act_min = 0,
                       .act_max = 127},
                      {.kind = QAT_QOP_CONCAT, .name = "cat", .n_inputs = 2, .inputs = {0, 1}, .output = 2, .groups = 1,
                       .act_min = -128, .act_max = 127, .n_mult = 2, .multiplier = mult, .shift = shift}};
    qat_qmodel q = {.n_tensors = 3, .n_ops = 2, .tensors = ts, .ops = ops, .input = 0, .output = 2, .config = ""};
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_validate(ctx, &q), QAT_OK);
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, 1);
    CU_ASSERT_FATAL(e != NULL);
    /* x = (3.5, -1.5): q = (7, -3) [rint(7), rint(-3)]; relu: (7, 0).
     * requantized by M = 0.5 (m 2^30, shift 0): SRDHM(7, 2^30) =
     * (7·2^30 + 2^30) / 2^31 = 4 -> 14; SRDHM(-3, 2^30) = (-3·2^30 + 1 -
     * 2^30) / 2^31 truncated = -1 (gemmlowp's tie goes up) -> 9; 0 -> 10 */
    float x[2] = {3.5f, -1.5f};
    int32_t qi[4];
    CU_ASSERT_EQUAL(qat_engine_run(e, x, 1, NULL, qi), QAT_OK);
    CU_ASSERT(qi[0] == 14 && qi[1] == 9 && qi[2] == 14 && qi[3] == 10);
    qat_engine_free(e);
    qat_ctx_free(ctx);
}

/* ---- every op kind: the trained graph, its export, the engines --------------------- */

/* A graph with every op kind, trained a little, exported, loaded: the int
 * engine agrees with the fake-quantized model (within a step), with the
 * loaded program (bit for bit), and with the numpy reader (bit for bit). */
static const char *const every_op_text = QAT_TEST_EVERY_OP;

/* The numpy reader (tools/run_qat_h5.py, written from the
 * format document alone) on n samples x of the file at path: its output
 * integers must equal want[0..count). Skipped (with a line) without
 * python3-h5py/numpy or QAT_SOURCE_DIR. */
static void check_numpy(const char *path, const char *tag, const float *x, int n, const int32_t *want, int count) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src || system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) {
        printf("\n  %s: the numpy reader not run (no QAT_SOURCE_DIR or python3-h5py/numpy)", tag);
        return;
    }
    char in[300], out[300], name[64], cmd[2048];
    snprintf(name, sizeof name, "%s.f32", tag);
    path_of(in, sizeof in, name);
    snprintf(name, sizeof name, "%s.i32", tag);
    path_of(out, sizeof out, name);
    FILE *f = fopen(in, "wb");
    CU_ASSERT_FATAL(f != NULL);
    int64_t per = 0;
    {
        qat_ctx *ctx = qat_ctx_new();
        qat_qmodel q;
        CU_ASSERT_FATAL(qat_qmodel_load(ctx, path, &q) == QAT_OK);
        per = qat_qtensor_numel(&q.tensors[q.input]);
        qat_ctx_free(ctx);
    }
    CU_ASSERT_EQUAL(fwrite(x, sizeof(float), (size_t)(per * n), f), (size_t)(per * n));
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/run_qat_h5.py' '%s' '%s' %d '%s' >/dev/null", src,
             path, in, n, out);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    int32_t *py = calloc((size_t)count, sizeof *py);
    f = fopen(out, "rb");
    CU_ASSERT_FATAL(f != NULL && py != NULL);
    CU_ASSERT_EQUAL(fread(py, sizeof *py, (size_t)count, f), (size_t)count);
    fclose(f);
    int diff = 0;
    for (int i = 0; i < count; i++) diff += py[i] != want[i];
    CU_ASSERT_EQUAL(diff, 0);
    if (diff) printf("\n  %s: numpy and the engine differ on %d of %d output integers", tag, diff, count);
    free(py);
}

static void test_every_op_round_trip(void) {
    const char *text = every_op_text;
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_status st = qat_model_from_text(m, text, "every-op");
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    qat_test_warm_up(m, 3, (int64_t[]){2, 10, 9}, 6, &rng);
    char path[300];
    path_of(path, sizeof path, "every.qat.h5");
    int64_t peak = 0;
    st = qat_export(m, 0, NULL, NULL, path, &peak);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT(peak > 0);
    qat_qmodel q, l;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, &l), QAT_OK);
    int kinds[QAT_QOP_KIND_COUNT] = {0};
    for (int i = 0; i < l.n_ops; i++) kinds[l.ops[i].kind]++;
    for (int k = 0; k < QAT_QOP_KIND_COUNT; k++) {
        if (!kinds[k] && k != QAT_QOP_FLATTEN) printf("\n  no %s op\n", qat_qop_kind_str((qat_qop_kind)k));
        CU_ASSERT(kinds[k] > 0 || k == QAT_QOP_FLATTEN);
    }
    enum { N = 16, IN = 2 * 10 * 9 };
    float x[N * IN], ref[N * 5];
    int32_t qi[N * 5], ql[N * 5], qf[N * 5];
    for (int i = 0; i < N * IN; i++) x[i] = qat_rng_normal(&rng);
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, (int64_t[]){N, 2, 10, 9}, false);
    qat_ctx_set_grad_enabled(ctx, false);
    qat_tensor *y = qat_model_forward(m, t);
    CU_ASSERT_FATAL(y != NULL);
    memcpy(ref, y->data, sizeof ref);
    qat_ctx_step_reset(ctx);
    qat_engine *ie = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N), *le = qat_engine_new(ctx, &l, QAT_ENGINE_INT, N);
    qat_engine *fe = qat_engine_new(ctx, &l, QAT_ENGINE_FAKE, N);
    CU_ASSERT_FATAL(ie && le && fe);
    CU_ASSERT_EQUAL(qat_engine_run(ie, x, N, NULL, qi), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run(le, x, N, NULL, ql), QAT_OK);
    CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, NULL, qf), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(qi, ql, sizeof qi), 0); /* the file is the program */
    const qat_aparams *o = &l.tensors[l.output].q;
    int far = 0, same = 0;
    for (int i = 0; i < N * 5; i++) {
        int32_t want = (int32_t)lrintf(ref[i] / o->scale) + o->zero_point;
        far += abs(qf[i] - want) > 1;  /* the file's fake engine is the QAT model */
        far += abs(qi[i] - qf[i]) > 3; /* a few one-step differences can add up through 9 requantizations */
        same += qi[i] == qf[i];
    }
    CU_ASSERT_EQUAL(far, 0);
    CU_ASSERT(same >= N * 5 * 6 / 10);
    printf(" [int = fake on %d of %d logits]", same, N * 5);
    /* the numpy reader, from the format document alone */
    check_numpy(path, "every", x, N, qi, N * 5);
    qat_engine_free(ie), qat_engine_free(le), qat_engine_free(fe);
    qat_ctx_free(ctx);
}

/* Every reference model, briefly trained, exported and loaded: the
 * numpy reader's output integers equal the integer engine's, bit for bit,
 * and the file's fake engine is within a step or two of them. */
static void test_reference_models_numpy(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it)");
    const char *names[] = {"resnet8", "ds-cnn", "mobilenet-v1", "lenet", "mlp"};
    for (int k = 0; k < 5; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = qat_model_new(ctx);
        char path[600], out[300], file[64];
        snprintf(path, sizeof path, "%s/models/%s.qnet", src, names[k]);
        CU_ASSERT_EQUAL_FATAL(qat_model_from_file(m, path), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        int64_t in[3];
        int rank = qat_model_input_shape(m, in);
        qat_rng rng;
        qat_rng_seed(&rng, 3);
        qat_test_warm_up(m, rank, in, 3, &rng);
        snprintf(file, sizeof file, "%s.qat.h5", names[k]);
        path_of(out, sizeof out, file);
        CU_ASSERT_EQUAL_FATAL(qat_export(m, 0, NULL, NULL, out, NULL), QAT_OK);
        qat_qmodel q;
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, out, &q), QAT_OK);
        enum { N = 8 };
        int64_t per = qat_qtensor_numel(&q.tensors[q.input]), K = qat_qtensor_numel(&q.tensors[q.output]);
        float *x = malloc((size_t)(N * per) * sizeof *x);
        int32_t *qi = malloc((size_t)(N * K) * sizeof *qi), *qf = malloc((size_t)(N * K) * sizeof *qf);
        CU_ASSERT_FATAL(x && qi && qf);
        for (int64_t i = 0; i < N * per; i++) x[i] = qat_rng_normal(&rng);
        qat_engine *ie = qat_engine_new(ctx, &q, QAT_ENGINE_INT, N), *fe = qat_engine_new(ctx, &q, QAT_ENGINE_FAKE, N);
        CU_ASSERT_FATAL(ie && fe);
        CU_ASSERT_EQUAL(qat_engine_run(ie, x, N, NULL, qi), QAT_OK);
        CU_ASSERT_EQUAL(qat_engine_run(fe, x, N, NULL, qf), QAT_OK);
        int far = 0;
        for (int64_t i = 0; i < N * K; i++) far += abs(qi[i] - qf[i]) > 3;
        CU_ASSERT_EQUAL(far, 0);
        check_numpy(out, names[k], x, N, qi, (int)(N * K));
        printf(" [%s]", names[k]);
        qat_engine_free(ie), qat_engine_free(fe);
        free(x), free(qi), free(qf);
        qat_ctx_free(ctx);
    }
}

/* ---- the memory plan ------------------------------------------------------------------ */

/* No two tensors alive at the same time share a byte; flatten and the
 * in-place ops share their input's bytes; the plan is smaller than one
 * buffer per tensor. For one sample with the program's lifetimes; for a
 * batch (which may run in chunks, plan.c) with the input alive to the end
 * and the output from the start. */
static void check_plan_batch(const qat_qmodel *qp, int batch, unsigned flags, const char *what) {
    const qat_qmodel q = *qp;
    int64_t *off = calloc((size_t)(q.n_tensors + q.n_ops), sizeof *off);
    qat_plan p;
    CU_ASSERT_EQUAL_FATAL(qat_plan_program_flags(&q, batch, flags, off, &p, NULL, 0), QAT_OK);
    bool outside = flags & QAT_PLAN_INPUT_OUTSIDE; /* the input takes no arena bytes */
    bool small = flags & QAT_PLAN_SMALL;           /* plan_rules.h's convolutions over their input, and fused pairs */
    /* lifetimes: made by op i (input: -1), last read by op j (output: the end) */
    int n = q.n_tensors, *first = malloc(sizeof(int) * n), *last = malloc(sizeof(int) * n), *grp = malloc(sizeof(int) * n);
    for (int t = 0; t < n; t++) first[t] = t == q.input ? -1 : 0, last[t] = -1, grp[t] = t;
    for (int i = 0; i < q.n_ops; i++) {
        first[q.ops[i].output] = i;
        for (int j = 0; j < q.ops[i].n_inputs; j++) last[q.ops[i].inputs[j]] = i;
    }
    last[q.output] = q.n_ops;
    if (batch > 1) last[q.input] = q.n_ops, first[q.output] = -1;
    bool *none = calloc((size_t)n, sizeof *none); /* a fused convolution's output: never in memory */
    for (int i = 0; small && i < q.n_ops; i++) {
        int j = qat__fused_pool(&q, i);
        if (j >= 0) none[q.ops[i].output] = true, first[q.ops[j].output] = i; /* the convolution writes the pool's output */
    }
    /* shared buffers: an op that writes over its input (flatten, the
     * in-place element-wise ops, max pools of disjoint windows) -- and only
     * where nothing reads the input after that op */
    int clash = 0;
    for (int i = 0; i < q.n_ops; i++) {
        const qat_qop *op = &q.ops[i];
        bool disjoint_pool = op->kind == QAT_QOP_MAXPOOL2D && op->kh <= op->stride_h && op->kw <= op->stride_w &&
                             !op->pad_h && !op->pad_w; /* its output never overtakes its reads */
        bool fused = small && (qat__fused_pool(&q, i) >= 0 || (i > 0 && qat__fused_pool(&q, i - 1) == i));
        bool can = !fused && (op->kind == QAT_QOP_FLATTEN || op->kind == QAT_QOP_RELU || op->kind == QAT_QOP_LUT ||
                              op->kind == QAT_QOP_ADD || disjoint_pool || (small && qat__conv_over_input(&q, op)));
        for (int j = 0; can && j < op->n_inputs; j++) {
            int a = op->inputs[j];
            if (off[a] != off[op->output]) continue;
            int r = a;
            while (grp[r] != r) r = grp[r];
            grp[op->output] = r;
            clash += op->kind != QAT_QOP_FLATTEN && last[a] > i; /* overwritten, then read */
        }
    }
    /* a tensor sharing the input's or the output's buffer lives as long */
    for (int t = 0; t < n && batch > 1; t++) {
        int r = t, ri = q.input, ro = q.output;
        while (grp[r] != r) r = grp[r];
        while (grp[ri] != ri) ri = grp[ri];
        while (grp[ro] != ro) ro = grp[ro];
        if (r == ri) last[t] = q.n_ops;
        if (r == ro) first[t] = -1;
    }
    int64_t sum = 0;
    for (int a = 0; a < n; a++) {
        int64_t na = (a == q.input && outside) || none[a] ? 0 : qat_qtensor_numel(&q.tensors[a]) * batch;
        sum += na;
        CU_ASSERT(off[a] >= 0 && off[a] + na <= p.arena_bytes);
        int ra = a;
        while (grp[ra] != ra) ra = grp[ra];
        for (int b = a + 1; b < n; b++) {
            int64_t nb = (b == q.input && outside) || none[b] ? 0 : qat_qtensor_numel(&q.tensors[b]) * batch;
            int rb = b;
            while (grp[rb] != rb) rb = grp[rb];
            bool live = first[a] <= last[b] && first[b] <= last[a];
            bool overlap = off[a] < off[b] + nb && off[b] < off[a] + na;
            clash += live && overlap && ra != rb;
        }
    }
    CU_ASSERT_EQUAL(clash, 0);
    if (batch == 1 && !outside) {
        CU_ASSERT(p.arena_bytes < sum);
        printf(" [%s: %lld bytes/sample planned, %lld if every tensor had its own]", what,
               (long long)p.peak_activation_bytes, (long long)sum);
    }
    if (outside) printf(" [%s, input outside%s: %lld]", what, small ? ", small" : "", (long long)p.peak_activation_bytes);
    free(first), free(last), free(grp), free(off), free(none);
}

/* Plans one model's program and checks the plan (see test_plan_is_sound). */
static void check_plan(qat_model *m, const char *what) {
    qat_ctx *ctx = qat_model_ctx(m);
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    int64_t s[3];
    int rank = qat_model_input_shape(m, s);
    qat_test_warm_up(m, rank, s, 1, &rng);
    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q), QAT_OK);
    check_plan_batch(&q, 1, 0, what);
    check_plan_batch(&q, 1, QAT_PLAN_INPUT_OUTSIDE, what);
    check_plan_batch(&q, 1, QAT_PLAN_INPUT_OUTSIDE | QAT_PLAN_SMALL, what);
    check_plan_batch(&q, 3, 0, what);
}

/* No two tensors alive at the same time share a byte, unless one op reads
 * one and writes the other over it (flatten, or an in-place op whose input
 * dies there); the plan is smaller than one buffer per tensor. On every
 * reference model, and on a graph where an in-place op's input is read
 * again later. */
static void test_plan_is_sound(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it)");
    const char *names[] = {"resnet8", "ds-cnn", "mobilenet-v1", "lenet", "mlp", NULL};
    for (int k = 0; k <= 5; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = qat_model_new(ctx);
        char path[600];
        if (names[k]) snprintf(path, sizeof path, "%s/models/%s.qnet", src, names[k]);
        CU_ASSERT_EQUAL_FATAL(names[k] ? qat_model_from_file(m, path) : qat_model_from_text(m, every_op_text, "every"), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        check_plan(m, names[k] ? names[k] : "every op");
        qat_ctx_free(ctx);
    }
}

/* With grad off, the forward pass gives each layer's dead value back to
 * the step (aliases included: a folded BatchNorm, flatten and dropout
 * return their input's memory): the logits are the grad-on logits bit for
 * bit, in float and with fake quantization, and a batch of 64 needs less
 * than half the step memory it needs with grad on
 * (the step arena's high-water mark, measured grad off first). Every
 * reference model, and the every-op graph (branches, concat, in-place
 * activations). A batch of 32 under valgrind: the same paths at half the
 * arithmetic (64 took it eight minutes there; at 16 the arena's first
 * chunk is most of the grad-on peak, and the ratio says nothing). */
static void test_eval_recycles_dead_values(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it)");
    const char *names[] = {"resnet8", "ds-cnn", "mobilenet-v1", "lenet", "mlp", NULL};
    for (int k = 0; k <= 5; k++)
        for (int fq = 0; fq < 2; fq++) {
            qat_ctx *ctx = qat_ctx_new();
            qat_model *m = qat_model_new(ctx);
            char path[600];
            if (names[k]) snprintf(path, sizeof path, "%s/models/%s.qnet", src, names[k]);
            CU_ASSERT_EQUAL_FATAL(names[k] ? qat_model_from_file(m, path)
                                           : qat_model_from_text(m, every_op_text, "every"), QAT_OK);
            CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
            CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
            int64_t in[3];
            int rank = qat_model_input_shape(m, in);
            qat_rng rng;
            qat_rng_seed(&rng, 5);
            qat_test_warm_up(m, rank, in, 2, &rng); /* batch 8; leaves the model in eval mode */
            qat_model_set_fake_quant(m, fq);
            int64_t s[4] = {qat_test_under_valgrind() ? 32 : 64, in[0], in[1], in[2]};
            float *logits[2] = {NULL, NULL};
            size_t peak[2];
            for (int grad = 0; grad < 2; grad++) {
                qat_ctx_set_grad_enabled(ctx, grad);
                qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, rank + 1, s, false);
                qat_rng_seed(&rng, 11);
                for (int64_t j = 0; x && j < x->numel; j++) x->data[j] = qat_rng_normal(&rng);
                qat_tensor *y = qat_model_forward(m, x);
                CU_ASSERT_FATAL(y != NULL);
                logits[grad] = malloc((size_t)y->numel * sizeof(float));
                memcpy(logits[grad], y->data, (size_t)y->numel * sizeof(float));
                if (grad) CU_ASSERT_EQUAL(qat_test_bit_diffs(logits[0], logits[1], y->numel, true), 0);
                peak[grad] = qat_ctx_step_peak_bytes(ctx);
                qat_ctx_step_reset(ctx);
            }
            /* (the MLP's values are smaller than the arena's first chunk) */
            if (!names[k] || strcmp(names[k], "mlp") != 0) CU_ASSERT(2 * peak[0] < peak[1]);
            free(logits[0]);
            free(logits[1]);
            qat_ctx_free(ctx);
        }
}

/* ---- average pools that keep their input's quantization (pool_keeps_scale) ------------- */

/* avgpool ap keeps relu1's grid (the end of c1's group); gap keeps c2's,
 * found back through dropout and max pooling. */
#define KEEP_TEXT \
    "input shape=2,8,8\n" \
    "conv2d c1 input out=4 kernel=3 pad=1\n" \
    "relu r1 c1\n" \
    "avgpool2d ap r1 kernel=2\n" \
    "conv2d c2 ap out=6 kernel=3 pad=1\n" \
    "maxpool2d mp c2 kernel=2\n" \
    "dropout d mp p=0.1\n" \
    "global_avgpool gap d\n" \
    "linear fc gap out=3\n"

static qat_model *keep_model(qat_ctx *ctx, const char *text, bool keep) {
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "keep"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.pool_keeps_scale = keep;
    qat_status st = qat_prepare(m, &c);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    return m;
}

/* y is x fake-quantized by a, bit for bit. */
static bool on_grid(qat_ctx *ctx, const qat_tensor *x, const qat_tensor *y, const qat__act_quant *a) {
    qat_tensor *f = qat_fake_quant(ctx, (qat_tensor *)x, &a->q, a->ste);
    return f && f->numel == y->numel && !memcmp(f->data, y->data, (size_t)f->numel * sizeof(float));
}

/* The QAT pass and forward: the pools are not quantization points (the
 * points before and after qat_prepare agree, qat_model_act_quant has
 * none for them); in training their outputs are their inputs' grids
 * applied to their float values — the quantizer found at forward time,
 * after qat_prepare_layer replaced it too — and only the owners observe;
 * before any observation the float value passes. */
static void test_keep_scale_forward(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, KEEP_TEXT, "keep"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.pool_keeps_scale = true;
    int before[16], after[16], want[] = {0, 2, 4, 8}; /* input, r1, c2, fc */
    int nb = qat_prepare_points(m, &c, before, 16);
    CU_ASSERT_EQUAL(nb, 4);
    CU_ASSERT_EQUAL(qat_prepare_points(m, NULL, NULL, 0), 6); /* the defaults: ap and gap requantize */
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    CU_ASSERT_EQUAL(qat_prepare_points(m, NULL, after, 16), 4);
    CU_ASSERT(!memcmp(before, want, sizeof want) && !memcmp(after, want, sizeof want));
    int ap = qat_model_find_layer(m, "ap"), gap = qat_model_find_layer(m, "gap"), r1 = 2, c2 = 4;
    qat_act_quant_info info;
    CU_ASSERT(!qat_model_act_quant(m, ap, &info) && !qat_model_act_quant(m, gap, &info));
    CU_ASSERT(m->layers[ap].aq == NULL && m->layers[gap].aq == NULL);
    CU_ASSERT(qat__grid_quant(m, ap) == m->layers[r1].aq && qat__grid_quant(m, gap) == m->layers[c2].aq);
    qat_tensor *out[16], *pre[16];
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, (int64_t[]){8, 2, 8, 8}, false);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
    /* eval before any observation: the float values */
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    CU_ASSERT_FATAL(qat_model_forward_all(m, x, out, pre) != NULL);
    CU_ASSERT(out[ap] == pre[ap] && out[gap] == pre[gap]);
    qat_ctx_step_reset(ctx);
    /* training: the owners observe once each, the pools never */
    for (int step = 0; step < 3; step++) {
        qat_model_train(m, true);
        qat_ctx_set_grad_enabled(ctx, true);
        int64_t u_r1 = m->layers[r1].aq->obs.updates, u_c2 = m->layers[c2].aq->obs.updates;
        CU_ASSERT_FATAL(qat_model_forward_all(m, x, out, pre) != NULL);
        CU_ASSERT(m->layers[r1].aq->obs.updates == u_r1 + 1 && m->layers[c2].aq->obs.updates == u_c2 + 1);
        CU_ASSERT(out[ap] != pre[ap] && on_grid(ctx, pre[ap], out[ap], m->layers[r1].aq));
        CU_ASSERT(on_grid(ctx, pre[gap], out[gap], m->layers[c2].aq));
        /* the pooled float is not on the grid itself: the quantization did something */
        CU_ASSERT(memcmp(pre[ap]->data, out[ap]->data, (size_t)out[ap]->numel * sizeof(float)) != 0);
        qat_ctx_step_reset(ctx);
    }
    /* c1's group re-prepared at 3 bits: a new quantizer at r1, which ap now follows */
    qat_prepare_config three = c;
    three.abits = 3;
    const qat__act_quant *old = m->layers[r1].aq;
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "c1", &three), QAT_OK);
    CU_ASSERT(m->layers[r1].aq != old && qat__grid_quant(m, ap) == m->layers[r1].aq);
    qat_model_train(m, true);
    CU_ASSERT_FATAL(qat_model_forward_all(m, x, out, pre) != NULL);
    CU_ASSERT(on_grid(ctx, pre[ap], out[ap], m->layers[r1].aq));
    float seen[16];
    int distinct = 0;
    for (int64_t i = 0; i < out[ap]->numel && distinct <= 8; i++) {
        int k = 0;
        while (k < distinct && seen[k] != out[ap]->data[i]) k++;
        if (k == distinct) seen[distinct++] = out[ap]->data[i];
    }
    CU_ASSERT(distinct <= 8); /* 3 bits */
    qat_ctx_step_reset(ctx);
    /* the pool itself re-prepared without the rule gets a quantizer of its own, and back */
    qat_prepare_config own = three;
    own.pool_keeps_scale = false;
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "ap", &own), QAT_OK);
    CU_ASSERT(m->layers[ap].aq != NULL && !qat__pool_keeps_scale(&m->layers[ap]) && qat__grid_quant(m, ap) == m->layers[ap].aq);
    CU_ASSERT_EQUAL(qat_prepare_points(m, NULL, NULL, 0), 5);
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "ap", &c), QAT_OK);
    CU_ASSERT(m->layers[ap].aq == NULL && qat__pool_keeps_scale(&m->layers[ap]));
    qat_ctx_free(ctx);
}

/* An average pool with padding cannot keep its input's quantization: its
 * float forward divides by the whole window. qat_prepare refuses before
 * changing anything, naming the layer; so does qat_prepare_layer. */
static void test_keep_scale_refuses_padding(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, QAT_TEST_EVERY_OP, "every"), QAT_OK); /* ap: pad=0x1 */
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 3), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.pool_keeps_scale = true;
    CU_ASSERT_EQUAL(qat_prepare(m, &c), QAT_ERR_UNSUPPORTED);
    const char *e = qat_ctx_error(ctx);
    CU_ASSERT(strstr(e, "layer ap: an average pool with padding 0x1") != NULL && !strchr(e, '\n'));
    CU_ASSERT(!qat_model_prepared(m));
    for (int i = 0; i < qat_model_n_layers(m); i++) CU_ASSERT(m->layers[i].aq == NULL && m->layers[i].qcfg == NULL);
    qat_ctx_clear_error(ctx);
    c.pool_keeps_scale = false;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    c.pool_keeps_scale = true;
    int ap = qat_model_find_layer(m, "ap");
    const qat__act_quant *own = m->layers[ap].aq;
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "ap", &c), QAT_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "layer ap") != NULL);
    CU_ASSERT(m->layers[ap].aq == own && !m->layers[ap].qcfg->pool_keeps_scale); /* unchanged */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_prepare_layer(m, "sq", &c), QAT_OK); /* unpadded: may */
    CU_ASSERT(qat__pool_keeps_scale(&m->layers[qat_model_find_layer(m, "sq")]));
    qat_ctx_free(ctx);
}

/* Lowered: the pools are keeps_scale ops with their input tensor's
 * quantization and no multiplier; the summary and the analysis work on
 * the model (the pools are no points of their own). */
/* A branch that feeds nothing (before the output) is trained with the
 * rest but left out of the integer program: the program equals the
 * model's without the branch, op for op and in its outputs. */
static void test_dead_branch_not_lowered(void) {
    static const char *const texts[2] = {
        "input shape=1,6,6\nconv2d c1 input out=4 kernel=3 pad=1\nrelu r1 c1\nconv2d dead r1 out=3 kernel=3\n"
        "sigmoid deadsig dead\nflatten f r1\nlinear fc f out=3\n",
        "input shape=1,6,6\nconv2d c1 input out=4 kernel=3 pad=1\nrelu r1 c1\nflatten f r1\nlinear fc f out=3\n"};
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel q[2];
    for (int k = 0; k < 2; k++) {
        qat_model *m = qat_model_new(ctx);
        CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, texts[k], "dead"), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 5), QAT_OK);
        CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        qat_rng rng;
        qat_rng_seed(&rng, 4);
        qat_test_warm_up(m, 3, (int64_t[]){1, 6, 6}, 4, &rng);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, &q[k]), QAT_OK);
    }
    CU_ASSERT_EQUAL(q[0].n_ops, q[1].n_ops);
    CU_ASSERT_EQUAL(q[0].n_tensors, q[1].n_tensors);
    CU_ASSERT_EQUAL(qat_qmodel_check(&q[0], NULL, 0), QAT_OK); /* every op's inputs made before it */
    for (int i = 0; i < q[0].n_ops && i < q[1].n_ops; i++) {
        CU_ASSERT_EQUAL(q[0].ops[i].kind, q[1].ops[i].kind);
        CU_ASSERT_STRING_EQUAL(q[0].ops[i].name, q[1].ops[i].name);
    }
    qat_ctx_free(ctx);
}

static void test_keep_scale_lowering_summary_analysis(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = keep_model(ctx, KEEP_TEXT, true);
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    qat_test_warm_up(m, 3, (int64_t[]){2, 8, 8}, 6, &rng);
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, q), QAT_OK);
    int kept = 0;
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (op->kind != QAT_QOP_AVGPOOL2D && op->kind != QAT_QOP_GLOBAL_AVGPOOL) continue;
        const qat_aparams *a = &q->tensors[op->inputs[0]].q, *b = &q->tensors[op->output].q;
        kept += op->keeps_scale;
        CU_ASSERT(op->keeps_scale && op->n_mult == 0 && !op->multiplier);
        CU_ASSERT(a->scale == b->scale && a->zero_point == b->zero_point && a->qmin == b->qmin && a->qmax == b->qmax);
        CU_ASSERT(op->act_min == a->qmin && op->act_max == a->qmax);
    }
    CU_ASSERT_EQUAL(kept, 2);
    qat_summary sum;
    CU_ASSERT_EQUAL_FATAL(qat_model_summary(m, 0, NULL, ctx, &sum), QAT_OK);
    CU_ASSERT(sum.peak_activation_bytes > 0); /* lowered and planned */
    CU_ASSERT(sum.rows[qat_model_find_layer(m, "ap")].abits == 0 && sum.rows[qat_model_find_layer(m, "r1")].abits == 8);
    qat_analysis *an = qat_analysis_new(m, 8, 0, NULL);
    CU_ASSERT_FATAL(an != NULL);
    float xs[8 * 128];
    int32_t labels[8];
    for (int i = 0; i < 8 * 128; i++) xs[i] = qat_rng_normal(&rng);
    for (int i = 0; i < 8; i++) labels[i] = i % 3;
    CU_ASSERT_EQUAL(qat_analysis_add(an, xs, 8, labels), QAT_OK);
    qat_analysis_report rep;
    CU_ASSERT_EQUAL(qat_analysis_result(an, &rep), QAT_OK);
    CU_ASSERT_EQUAL(rep.n_points, 4);
    qat_ctx_free(ctx);
}

/* The pool straight on the model's quantized input, the logits its
 * integers (flattened): the int engine computes the rule on the very
 * integers the fake-quantized forward pooled, so the two differ only
 * where the window's sum is a tie (Σ x ≡ n/2 mod n, n even), by one step:
 * the fake quantizer rounds it half to even, the op half away from zero. */
static void test_keep_scale_fake_and_int_differ_at_ties(void) {
    static const char *const texts[] = {"input shape=3,6,8\navgpool2d ap input kernel=2\nflatten f ap\n",
                                        "input shape=16,2,3\nglobal_avgpool gap input\n"};
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = keep_model(ctx, texts[k], true);
        qat_rng rng;
        qat_rng_seed(&rng, 11);
        enum { N = 64 };
        static float x[N * 144];
        qat_model_train(m, true);
        for (int step = 0; step < 4; step++) { /* the input's observer */
            for (int i = 0; i < N * 144; i++) x[i] = 2.0f * qat_rng_normal(&rng);
            int64_t shape[4] = {N, k ? 16 : 3, k ? 2 : 6, k ? 3 : 8};
            CU_ASSERT_FATAL(qat_model_forward(m, qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, shape, false)) != NULL);
            qat_ctx_step_reset(ctx);
        }
        qat_model_train(m, false);
        qat_ctx_set_grad_enabled(ctx, false);
        qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, ctx, q), QAT_OK);
        CU_ASSERT(q->ops[0].keeps_scale);
        int64_t in = qat_qtensor_numel(&q->tensors[q->input]), K = qat_qtensor_numel(&q->tensors[q->output]);
        int64_t shape[4] = {N, q->tensors[q->input].shape[0], q->tensors[q->input].shape[1], q->tensors[q->input].shape[2]};
        qat_tensor *y = qat_model_forward(m, qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, shape, false));
        CU_ASSERT_FATAL(y != NULL && y->numel == N * K);
        int8_t *xq = malloc((size_t)(N * in));
        int32_t *qi = malloc(sizeof *qi * (size_t)(N * K));
        qat_input_quantize(q, x, N, xq);
        qat_engine *e = qat_engine_new(ctx, q, QAT_ENGINE_INT, N);
        CU_ASSERT_FATAL(e != NULL);
        CU_ASSERT_EQUAL(qat_engine_run(e, x, N, NULL, qi), QAT_OK);
        const qat_aparams *o = &q->tensors[q->output].q;
        int ties = 0, differ = 0, bad = 0;
        int64_t H = shape[2], W = shape[3];
        for (int64_t i = 0; i < N * K; i++) {
            int64_t s = i / K, j = i % K, sum = 0, n;
            if (k == 0) { /* 2x2 windows: j = (c, oy, ox) of [C, H/2, W/2] */
                int64_t c = j / (H / 2 * W / 2), oy = j / (W / 2) % (H / 2), ox = j % (W / 2);
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++) sum += xq[s * in + (c * H + 2 * oy + dy) * W + 2 * ox + dx];
                n = 4;
            } else {
                for (int64_t t = 0; t < H * W; t++) sum += xq[s * in + j * H * W + t];
                n = H * W;
            }
            int32_t fake = (int32_t)lrintf(y->data[i] * (1.0f / o->scale)) + o->zero_point;
            bool tie = n % 2 == 0 && (sum % n + n) % n == n / 2;
            ties += tie, differ += fake != qi[i];
            bad += abs(fake - qi[i]) > 1 || (fake != qi[i] && !tie);
        }
        printf(" [%s: %d ties in %lld outputs, %d rounded apart]", k ? "global" : "2x2", ties, (long long)(N * K), differ);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(differ > 0 && differ < ties); /* half-even and half-away agree on about half the ties */
        qat_engine_free(e);
        free(xq), free(qi);
        qat_ctx_free(ctx);
    }
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "graph")) return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const qat_test_case cases[] = {
        {"building: errors name the layer; a declared input shape is checked", test_build_errors_name_the_layer},
        {"the fusion matcher on branches", test_matcher_on_branches},
        {"prepare_layer: whole configurations, all or nothing (LSQ too)", test_prepare_layer_whole_and_transactional},
        {"prepare_layer: new weight bits keep the activation's observed range", test_prepare_layer_keeps_activation_range},
        {"LSQ's initial scales: of the weight as quantized, a folded BatchNorm's factor included", test_lsq_init_sees_the_folded_weight},
        {"exporting every epoch does not grow memory", test_export_does_not_grow_memory},
        {"a custom op trains, gradchecks, and lowering refuses it by name", test_custom_layer_trains_and_is_refused_by_lowering},
        {"model files: errors name the line and the field", test_model_file_errors_name_line_and_field},
        {"model files: totals (parameters, outputs, layers) bounded before allocating", test_model_file_totals_are_bounded},
        {"a FIFO or a directory as a model file is refused at once", test_fifo_and_directory_are_refused},
        {"quantized add against hand-computed integers", test_add_hand_computed},
        {"quantized concat against hand-computed integers", test_concat_hand_computed},
        {"every op kind: train, export, load, int = file = numpy, ~ fake", test_every_op_round_trip},
        {"every reference model: numpy reader = integer engine, bit for bit", test_reference_models_numpy},
        {"the memory plan: no live tensors share bytes", test_plan_is_sound},
        {"grad off: dead values recycled, the same logits, a fraction of the memory", test_eval_recycles_dead_values},
        {"pool_keeps_scale: no points of their own; the input's grid, found at forward time, never observed",
         test_keep_scale_forward},
        {"pool_keeps_scale: a padded average pool is refused, naming it", test_keep_scale_refuses_padding},
        {"lowering: a branch that feeds nothing is left out of the program", test_dead_branch_not_lowered},
        {"pool_keeps_scale: lowered to keeps_scale ops; the summary and the analysis", test_keep_scale_lowering_summary_analysis},
        {"pool_keeps_scale: the fake-quantized pool and the integer op differ only at ties, by one step",
         test_keep_scale_fake_and_int_differ_at_ties},
        {NULL, NULL},
    };
    int rc = qat_test_main("graph", cases, argc, argv);
    qat_test_rmdir(dir);
    return rc;
}
