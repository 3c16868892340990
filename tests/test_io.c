/* Training checkpoints: resuming continues bit-identically; damaged,
 * truncated, wrong-version and mismatched files are refused with a clear
 * error; saving is atomic; the input normalization is stored, rebuilt and
 * checked like hostile input. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qat/data.h"
#include "qat/io.h"
#include "internals.h"
#include "test_util.h"

enum { N = 48, IN = 20, B = 8 };
static char dir[256];
static float data_x[N * IN];
static int32_t data_y[N];

typedef struct {
    qat_ctx *ctx;
    qat_model *m;
    qat_optim opt, qopt;
    qat_train_state ts;
    int32_t order[N];
} run;

static void run_init(run *r, int hidden) {
    memset(r, 0, sizeof *r);
    r->ctx = qat_ctx_new();
    r->m = qat_model_new(r->ctx);
    qat_model_add_linear(r->m, NULL, IN, hidden, true);
    qat_model_add_relu(r->m);
    qat_model_add_dropout(r->m, 0.2f);
    qat_model_add_linear(r->m, NULL, hidden, 4, true);
    qat_model_build(r->m, 11);
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true, c.wbits = 4;
    qat_prepare(r->m, &c);
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&r->opt, r->ctx, &oc, r->m->n_params);
    qat_optim_init(&r->qopt, r->ctx, &oc, r->m->n_qparams);
    for (int i = 0; i < N; i++) r->order[i] = i;
    qat_rng_seed(&r->ts.shuffle_rng, 5);
    r->ts.order = r->order;
    r->ts.n_order = N;
}

/* One training step; a new epoch reshuffles the order. */
static void step(run *r) {
    int64_t s = (r->ts.step * B) % N;
    if (s == 0) qat_shuffle(r->order, N, &r->ts.shuffle_rng);
    int64_t shape[2] = {B, IN};
    qat_tensor *x = qat_tensor_new(r->ctx, QAT_MEM_STEP, 2, shape, false);
    int32_t y[B];
    for (int i = 0; i < B; i++) {
        memcpy(x->data + i * IN, data_x + r->order[s + i] * IN, IN * sizeof(float));
        y[i] = data_y[r->order[s + i]];
    }
    CU_ASSERT_EQUAL(qat_backward(r->ctx, qat_cross_entropy(r->ctx, qat_model_forward(r->m, x), y)), QAT_OK);
    qat_optim_step(&r->opt, r->m->params, r->m->grads, 0.01f);
    qat_optim_step(&r->qopt, r->m->qparams, r->m->qgrads, 0.01f);
    qat_model_zero_grad(r->m);
    qat_ctx_step_reset(r->ctx);
    r->ts.step++;
}

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void test_resume_is_bit_identical(void) {
    char path[512];
    path_of(path, sizeof path, "resume.h5");
    run a, b;
    run_init(&a, 16);
    for (int i = 0; i < 8; i++) step(&a); /* crosses an epoch boundary (6 steps per epoch) */
    a.ts.config = "{\"test\": true}";
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, path), QAT_OK);
    for (int i = 0; i < 9; i++) step(&a);

    run_init(&b, 16);
    qat_status st = qat_checkpoint_load(b.m, &b.opt, &b.qopt, &b.ts, path);
    if (st) printf("\n  %s\n", qat_ctx_error(b.ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL(b.ts.step, 8);
    CU_ASSERT_EQUAL(b.ts.n_order, N);
    for (int i = 0; i < 9; i++) step(&b);
    CU_ASSERT_EQUAL(memcmp(a.m->params, b.m->params, (size_t)a.m->n_params * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(a.m->qparams, b.m->qparams, (size_t)a.m->n_qparams * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(a.opt.v, b.opt.v, (size_t)a.opt.n * sizeof(float)), 0);
    CU_ASSERT_EQUAL(a.m->layers[2].aq->obs.updates, b.m->layers[2].aq->obs.updates); /* relu1 */
    CU_ASSERT(a.m->layers[2].aq->obs.max == b.m->layers[2].aq->obs.max);
    qat_ctx_free(a.ctx);
    qat_ctx_free(b.ctx);
}

static qat_status load_into_fresh(const char *path, int hidden, char *err, size_t len) {
    run r;
    run_init(&r, hidden);
    qat_status st = qat_checkpoint_load(r.m, &r.opt, &r.qopt, &r.ts, path);
    snprintf(err, len, "%s", qat_ctx_error(r.ctx));
    qat_ctx_free(r.ctx);
    return st;
}

static void test_bad_files_are_refused(void) {
    char good[512], bad[512], err[512];
    path_of(good, sizeof good, "good.h5");
    run a;
    run_init(&a, 16);
    step(&a);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, good), QAT_OK);
    qat_ctx_free(a.ctx);
    CU_ASSERT_EQUAL(load_into_fresh(good, 16, err, sizeof err), QAT_OK);
    /* another architecture */
    CU_ASSERT_EQUAL(load_into_fresh(good, 12, err, sizeof err), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fc1.weight"));
    /* truncated to half */
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)size);
    CU_ASSERT_EQUAL((long)fread(buf, 1, (size_t)size, f), size);
    fclose(f);
    path_of(bad, sizeof bad, "truncated.h5");
    f = fopen(bad, "wb");
    fwrite(buf, 1, (size_t)size / 2, f);
    fclose(f);
    CU_ASSERT_NOT_EQUAL(load_into_fresh(bad, 16, err, sizeof err), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "truncated.h5"));
    /* not HDF5 at all */
    path_of(bad, sizeof bad, "garbage.h5");
    f = fopen(bad, "wb");
    fputs("this is not a checkpoint", f);
    fclose(f);
    CU_ASSERT_EQUAL(load_into_fresh(bad, 16, err, sizeof err), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an HDF5 file"));
    free(buf);
    /* another version */
    path_of(bad, sizeof bad, "version.h5");
    run c;
    run_init(&c, 16);
    qat_checkpoint_save(c.m, &c.opt, &c.qopt, &c.ts, bad);
    qat_ctx_free(c.ctx);
    hid_t h = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    long long v = 99;
    H5LTset_attribute_long_long(h, ".", "version", &v, 1);
    H5Fclose(h);
    CU_ASSERT_EQUAL(load_into_fresh(bad, 16, err, sizeof err), QAT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "version 99"));
    path_of(bad, sizeof bad, "missing.h5");
    CU_ASSERT_EQUAL(load_into_fresh(bad, 16, err, sizeof err), QAT_ERR_IO);
}

/* Every entry but . and ..: temporary files are hidden (.<name>.qat-tmp.*). */
static int count_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_saving_is_atomic(void) {
    char path[512];
    path_of(path, sizeof path, "atomic.h5");
    run a;
    run_init(&a, 16);
    int before = count_files();
    CU_ASSERT_EQUAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, path), QAT_OK);
    CU_ASSERT_EQUAL(count_files(), before + 1); /* no temporary file left */
    step(&a);
    CU_ASSERT_EQUAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, path), QAT_OK); /* replaces */
    CU_ASSERT_EQUAL(count_files(), before + 1);
    CU_ASSERT_EQUAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, "/nonexistent-dir/x.h5"), QAT_ERR_IO);
    qat_ctx_free(a.ctx);
}

/* ---- the input normalization ------------------------------------------------------------ */

static qat_normalization test_norm(int channels) {
    qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = channels, n.divisor = 255.0f, n.raw_uint8 = true;
    for (int c = 0; c < channels; c++) n.mean[c] = 0.1307f + 0.01f * (float)c, n.std[c] = 0.3081f - 0.02f * (float)c;
    return n;
}

static bool same_norm(const qat_normalization *a, const qat_normalization *b) {
    if (!a || !b) return a == b;
    return a->channels == b->channels && a->divisor == b->divisor && a->raw_uint8 == b->raw_uint8 &&
           !memcmp(a->mean, b->mean, (size_t)a->channels * sizeof(float)) &&
           !memcmp(a->std, b->std, (size_t)a->channels * sizeof(float));
}

/* A warm start (qat_checkpoint_load_weights) takes a W4 LSQ checkpoint's
 * parameters and normalization into a float model of the same layers and
 * into one prepared at 8 bits; a model of other shapes is refused and
 * keeps its parameters. */
static void test_warm_start_weights(void) {
    char path[512];
    path_of(path, sizeof path, "warm.h5");
    qat_normalization n = test_norm(1);
    run a;
    run_init(&a, 16);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(a.m, &n), QAT_OK);
    for (int i = 0; i < 3; i++) step(&a);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, path), QAT_OK);
    for (int prep = 0; prep < 2; prep++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_model *m = qat_model_new(ctx);
        qat_model_add_linear(m, NULL, IN, 16, true);
        qat_model_add_relu(m);
        qat_model_add_dropout(m, 0.2f);
        qat_model_add_linear(m, NULL, 16, 4, true);
        CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 99), QAT_OK);
        if (prep) CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
        CU_ASSERT(memcmp(m->params, a.m->params, (size_t)a.m->n_params * sizeof(float)) != 0);
        CU_ASSERT_EQUAL_FATAL(qat_checkpoint_load_weights(m, path), QAT_OK);
        CU_ASSERT_EQUAL(memcmp(m->params, a.m->params, (size_t)a.m->n_params * sizeof(float)), 0);
        CU_ASSERT(same_norm(qat_model_normalization(m), &n));
        qat_ctx_free(ctx);
    }
    run other;
    run_init(&other, 12);
    float first = other.m->params[0];
    CU_ASSERT_EQUAL(qat_checkpoint_load_weights(other.m, path), QAT_ERR_SHAPE);
    CU_ASSERT(other.m->params[0] == first);
    qat_ctx_free(other.ctx);
    qat_ctx_free(a.ctx);
}

/* A checkpoint stores the model's normalization; qat_checkpoint_load
 * puts it on the model it loads into (resume continues bit-identically
 * on raw inputs), qat_checkpoint_model rebuilds it; a checkpoint without
 * one (none set, or written before normalization was stored: version 3)
 * loads as none. */
static void test_normalization_round_trip(void) {
    char path[512], plain[512];
    path_of(path, sizeof path, "norm.h5");
    path_of(plain, sizeof plain, "plain.h5");
    qat_normalization n = test_norm(1);
    run a, b;
    run_init(&a, 16);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(a.m, &n), QAT_OK);
    for (int i = 0; i < 4; i++) step(&a);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, path), QAT_OK);
    size_t saved_n = qat_model_state_bytes(a.m, NULL, 0);
    uint8_t *saved = malloc(saved_n);
    CU_ASSERT_FATAL(saved != NULL);
    qat_model_state_bytes(a.m, saved, saved_n);
    for (int i = 0; i < 5; i++) step(&a);
    run_init(&b, 16); /* no normalization of its own: the checkpoint's */
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_load(b.m, &b.opt, &b.qopt, &b.ts, path), QAT_OK);
    CU_ASSERT(same_norm(qat_model_normalization(b.m), &n));
    for (int i = 0; i < 5; i++) step(&b);
    CU_ASSERT_EQUAL(memcmp(a.m->params, b.m->params, (size_t)a.m->n_params * sizeof(float)), 0);
    qat_model *r = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(b.ctx, path, &r, NULL, 0), QAT_OK);
    CU_ASSERT(same_norm(qat_model_normalization(r), &n));
    /* the rebuilt model's state is the saved one's, bit for bit, before any forward */
    CU_ASSERT_EQUAL(qat_model_state_bytes(r, NULL, 0), saved_n);
    uint8_t *back = malloc(saved_n);
    CU_ASSERT_FATAL(back != NULL);
    qat_model_state_bytes(r, back, saved_n);
    CU_ASSERT_EQUAL(memcmp(back, saved, saved_n), 0);
    free(back), free(saved);
    /* a checkpoint without one replaces the model's by none */
    qat_ctx_free(b.ctx);
    run_init(&b, 16);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(b.m, &b.opt, &b.qopt, &b.ts, plain), QAT_OK);
    CU_ASSERT_EQUAL(qat_checkpoint_load(a.m, &a.opt, &a.qopt, &a.ts, plain), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_model_normalization(a.m));
    /* version 3 (before the normalization was stored) loads and rebuilds as none */
    hid_t h = H5Fopen(plain, H5F_ACC_RDWR, H5P_DEFAULT);
    long long v = 3;
    H5LTset_attribute_long_long(h, ".", "version", &v, 1);
    H5Fclose(h);
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(a.m, &n), QAT_OK);
    CU_ASSERT_EQUAL(qat_checkpoint_load(a.m, &a.opt, &a.qopt, &a.ts, plain), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_model_normalization(a.m));
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(a.ctx, plain, &r, NULL, 0), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_model_normalization(r));
    qat_ctx_free(a.ctx);
    qat_ctx_free(b.ctx);
}

/* Rewrites one float dataset of /architecture/normalization (n values). */
static void put_norm_floats(const char *path, const char *name, const float *v, hsize_t n) {
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(h, "architecture/normalization", H5P_DEFAULT);
    H5Ldelete(g, name, H5P_DEFAULT);
    H5LTmake_dataset_float(g, name, 1, &n, v);
    H5Gclose(g);
    H5Fclose(h);
}

static void put_norm_attr(const char *path, const char *name, bool is_float, double v) {
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (is_float) {
        float f = (float)v;
        H5LTset_attribute_float(h, "architecture/normalization", name, &f, 1);
    } else {
        long long i = (long long)v;
        H5LTset_attribute_long_long(h, "architecture/normalization", name, &i, 1);
    }
    H5Fclose(h);
}

/* A hostile /architecture/normalization is refused, naming the file and
 * the field; the model's own normalization stays as it was. */
static void test_normalization_hostile(void) {
    char good[512], bad[512], err[512];
    path_of(good, sizeof good, "norm-good.h5");
    path_of(bad, sizeof bad, "norm-bad.h5");
    qat_normalization n = test_norm(1);
    run a;
    run_init(&a, 16);
    qat_model_set_input_shape(a.m, 1, (int64_t[]){IN});
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(a.m, &n), QAT_OK);
    step(&a);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(a.m, &a.opt, &a.qopt, &a.ts, good), QAT_OK);
    const float nan1 = NAN, zero = 0.0f, three[3] = {0.1f, 0.2f, 0.3f};
    struct {
        const char *what, *field;
        bool is_float;
        double v;
        const float *data;
        hsize_t len;
        const char *needle;
    } cases[] = {
        {"channels 0", "channels", false, 0, NULL, 0, "channels = 0 is outside [1, 1024]"},
        {"channels 5000", "channels", false, 5000, NULL, 0, "channels = 5000 is outside [1, 1024]"},
        {"channels 2, arrays of 1", "channels", false, 2, NULL, 0, "architecture/normalization/mean has 1 value(s), channels says 2"},
        {"divisor 0", "divisor", true, 0, NULL, 0, "divisor 0 is not a positive normal float"},
        {"divisor NaN", "divisor", true, NAN, NULL, 0, "divisor nan is not a positive normal float"},
        {"divisor -1", "divisor", true, -1, NULL, 0, "divisor -1 is not a positive normal float"},
        {"raw_uint8 2", "raw_uint8", false, 2, NULL, 0, "raw_uint8 = 2 is outside [0, 1]"},
        {"mean NaN", "mean", false, 0, &nan1, 1, "mean[0] = nan is not finite"},
        {"std 0", "std", false, 0, &zero, 1, "std[0] = 0 is not a positive normal float"},
        {"std of 3", "std", false, 0, three, 3, "architecture/normalization/std has 3 value(s), channels says 1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char cmd[1100];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", good, bad);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        if (cases[k].data) put_norm_floats(bad, cases[k].field, cases[k].data, cases[k].len);
        else put_norm_attr(bad, cases[k].field, cases[k].is_float, cases[k].v);
        qat_normalization mine = test_norm(1);
        mine.mean[0] = 0.5f;
        run r;
        run_init(&r, 16);
        qat_model_set_input_shape(r.m, 1, (int64_t[]){IN});
        qat_model_set_normalization(r.m, &mine);
        qat_status st = qat_checkpoint_load(r.m, &r.opt, &r.qopt, &r.ts, bad);
        snprintf(err, sizeof err, "%s", qat_ctx_error(r.ctx));
        CU_ASSERT_EQUAL(st, QAT_ERR_FORMAT);
        CU_ASSERT(same_norm(qat_model_normalization(r.m), &mine));
        if (!strstr(err, cases[k].needle) || !strstr(err, "norm-bad.h5"))
            printf("\n  %s: %s (want \"%s\")\n", cases[k].what, err, cases[k].needle);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[k].needle));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "norm-bad.h5"));
        qat_ctx_free(r.ctx);
    }
    /* three channels for a vector input: rebuilding the model refuses it */
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", good, bad);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    put_norm_attr(bad, "channels", false, 3);
    put_norm_floats(bad, "mean", three, 3);
    put_norm_floats(bad, "std", three, 3);
    qat_model *m = NULL;
    CU_ASSERT_EQUAL(qat_checkpoint_model(a.ctx, bad, &m, NULL, 0), QAT_ERR_FORMAT);
    if (!strstr(qat_ctx_error(a.ctx), "channels 3 for an input of rank 1")) printf("\n  %s\n", qat_ctx_error(a.ctx));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(a.ctx), "architecture/normalization: channels 3 for an input of rank 1"));
    qat_ctx_free(a.ctx);
}

static void copy(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    int ch;
    while (a && b && (ch = fgetc(a)) != EOF) fputc(ch, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* A model with two average pools, prepared with pool_keeps_scale = keep,
 * trained a few steps (its observers move), in eval mode. */
static qat_model *keep_model(qat_ctx *ctx, bool keep) {
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, "input shape=2,6,6\nconv2d c input out=4 kernel=3 pad=1\n"
                                              "relu r c\navgpool2d ap r kernel=2\nglobal_avgpool gap ap\n"
                                              "linear fc gap out=3\n", "keep"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 4), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.pool_keeps_scale = keep;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    for (int i = 0; i < 3; i++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){4, 2, 6, 6}, false);
        for (int64_t j = 0; j < x->numel; j++) x->data[j] = qat_rng_normal(&rng);
        CU_ASSERT_FATAL(qat_model_forward(m, x) != NULL);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    return m;
}

/* a and b have activation quantizers at the same layers, with the same
 * observers and parameters. */
static bool same_act_quantizers(const qat_model *a, const qat_model *b) {
    bool same = a->n_layers == b->n_layers;
    for (int i = 0; same && i < a->n_layers; i++) {
        const qat__act_quant *x = a->layers[i].aq, *y = b->layers[i].aq;
        same = !x == !y && (!x || (x->obs.updates == y->obs.updates && x->obs.min == y->obs.min &&
                                   x->obs.max == y->obs.max && x->q.scale[0] == y->q.scale[0] &&
                                   x->q.zero_point[0] == y->q.zero_point[0]));
    }
    return same;
}

/* Every qat_config list of the checkpoint at path (the global one and
 * each layer's) rewritten with its first n entries, the last set to v
 * when n is 13. */
static void rewrite_qat_configs(const char *path, int n, long long v) {
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    char obj[64] = "architecture";
    for (int i = -1; i < 64; i++) {
        if (i >= 0) snprintf(obj, sizeof obj, "architecture/%d", i);
        if (H5Lexists(h, obj, H5P_DEFAULT) <= 0 || H5Aexists_by_name(h, obj, "qat_config", H5P_DEFAULT) <= 0) continue;
        long long c[13] = {0};
        CU_ASSERT(H5LTget_attribute_long_long(h, obj, "qat_config", c) >= 0);
        if (n == 13) c[12] = v;
        CU_ASSERT(H5LTset_attribute_long_long(h, obj, "qat_config", c, (size_t)n) >= 0);
    }
    H5Fclose(h);
}

/* The number of entries of obj's qat_config attribute (-1: none). */
static int qat_config_length(const char *path, const char *obj) {
    hid_t h = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t dims[1] = {0};
    H5T_class_t cls;
    size_t size;
    int n = H5LTget_attribute_info(h, obj, "qat_config", dims, &cls, &size) >= 0 ? (int)dims[0] : -1;
    H5Fclose(h);
    return n;
}

/* pool_keeps_scale is recorded in the checkpoint's configuration lists
 * (the global one and each layer's override) and rebuilt; a list of 12
 * entries (written before it existed) reads as off; a wrong length or
 * value is refused, naming it. */
static void test_pool_keeps_scale_round_trip(void) {
    char path[512], old[512], bad[512];
    path_of(path, sizeof path, "keep.h5");
    path_of(old, sizeof old, "keep-old.h5");
    path_of(bad, sizeof bad, "keep-bad.h5");
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = keep_model(ctx, true);
    qat_prepare_config own = qat_prepare_defaults(); /* gap alone requantizes again */
    CU_ASSERT_EQUAL_FATAL(qat_prepare_layer(m, "gap", &own), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, NULL, NULL, NULL, path), QAT_OK);
    int ap = qat_model_find_layer(m, "ap"), gap = qat_model_find_layer(m, "gap");
    qat_model *r = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, path, &r, NULL, 0), QAT_OK);
    CU_ASSERT(qat_model_qat_config(r, NULL)->pool_keeps_scale);
    CU_ASSERT(qat_model_qat_config(r, "ap")->pool_keeps_scale && !qat_model_qat_config(r, "gap")->pool_keeps_scale);
    CU_ASSERT(r->layers[ap].aq == NULL && r->layers[gap].aq != NULL);
    CU_ASSERT(same_act_quantizers(m, r));
    /* off, the list keeps its old 12 entries (a build before the field reads
     * the file); on, 13. Then a file written before the field: read as off
     * (the pools have quantizers) */
    char gap_obj[64];
    snprintf(gap_obj, sizeof gap_obj, "architecture/%d", qat_model_find_layer(m, "gap"));
    CU_ASSERT_EQUAL(qat_config_length(path, "architecture"), 13);
    CU_ASSERT_EQUAL(qat_config_length(path, gap_obj), 12); /* gap's own: off */
    qat_model *f = keep_model(ctx, false);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(f, NULL, NULL, NULL, old), QAT_OK);
    CU_ASSERT_EQUAL(qat_config_length(old, "architecture"), 12);
    rewrite_qat_configs(old, 12, 0);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, old, &r, NULL, 0), QAT_OK);
    CU_ASSERT(!qat_model_qat_config(r, NULL)->pool_keeps_scale && !qat_model_qat_config(r, "ap")->pool_keeps_scale);
    CU_ASSERT(r->layers[ap].aq != NULL && r->layers[gap].aq != NULL);
    CU_ASSERT(same_act_quantizers(f, r));
    /* 11 entries, or a value outside 0..1: refused, naming the list */
    copy(path, bad);
    rewrite_qat_configs(bad, 11, 0);
    CU_ASSERT_EQUAL(qat_checkpoint_model(ctx, bad, &r, NULL, 0), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "qat_config: 11 entries") != NULL);
    qat_ctx_clear_error(ctx);
    copy(path, bad);
    rewrite_qat_configs(bad, 13, 2);
    CU_ASSERT_EQUAL(qat_checkpoint_model(ctx, bad, &r, NULL, 0), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "pool_keeps_scale = 2 is outside [0, 1]") != NULL);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "io")) return 2;
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < N * IN; i++) data_x[i] = qat_rng_normal(&rng);
    for (int i = 0; i < N; i++) data_y[i] = (int32_t)qat_rng_below(&rng, 4);
    const qat_test_case cases[] = {
        {"resume continues bit-identically (QAT, LSQ, dropout, shuffling)", test_resume_is_bit_identical},
        {"damaged, truncated, wrong-version, other-model files are refused", test_bad_files_are_refused},
        {"saving is atomic and leaves no temporary file", test_saving_is_atomic},
        {"the normalization: stored, loaded, rebuilt; none for older files", test_normalization_round_trip},
        {"a warm start takes the weights and normalization, whatever the precision", test_warm_start_weights},
        {"a hostile normalization is refused, naming the field", test_normalization_hostile},
        {"pool_keeps_scale: recorded, rebuilt with per-layer overrides; older lists read as off", test_pool_keeps_scale_round_trip},
        {NULL, NULL},
    };
    int rc = qat_test_main("io", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
