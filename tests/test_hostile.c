/* Hostile files: every loader against files changed one object at a time.
 *
 * A valid training checkpoint, a valid quantized model, a valid IDX file
 * and valid data sets (HDF5, .npy, IDX) are mutated in every way the
 * catalogues below list (attributes and datasets replaced by other types,
 * ranks, element counts, huge, negative, NaN, infinite and denormal
 * values, removed, strings too long or without a terminator; IDX and .npy
 * headers rewritten byte by byte, truncated, padded).
 * Each mutant must be either refused with a message that names the file,
 * or accepted and then usable: a loaded model passes validation and runs.
 * The sanitizer build of the suite turns any out-of-bounds access into a
 * failure. Then, one test per bug a security review reproduced. */
#define _POSIX_C_SOURCE 200809L
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/io.h"
#include "internals.h"
#include "test_util.h"

static char dir[256];
static char ckpt_path[300], qmodel_path[300], qmodel_sub_path[300];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* ---- the valid files ------------------------------------------------------------- */

/* conv(1->2, 3x3, pad 1) bn relu maxpool2 flatten fc(18->3): small, yet
 * every kind of record (BN buffers, LSQ scales, two optimizers, observers). */
static qat_model *tiny_model(qat_ctx *ctx) {
    qat_model *m = qat_model_new(ctx);
    qat_model_add_conv2d(m, NULL, 1, 2, 3, 1, 1, false);
    qat_model_add_batchnorm(m, NULL, 2, 0.1f, 1e-5f);
    qat_model_add_relu(m);
    qat_model_add_maxpool2d(m, 2, 2);
    qat_model_add_flatten(m);
    qat_model_add_linear(m, NULL, 18, 3, true);
    return qat_model_build(m, 3) == QAT_OK ? m : NULL;
}

enum { B = 4, NS = 8 };

static void make_valid_files(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = tiny_model(ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    /* an input normalization: /architecture/normalization and /normalization get mutated too */
    static qat_normalization norm = {.channels = 1, .divisor = 2.0f, .mean = {0.1f}, .std = {0.4f}};
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &norm), QAT_OK);
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    qat_optim opt, qopt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx, &oc, m->n_params);
    qat_optim_init(&qopt, ctx, &oc, m->n_qparams);
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    for (int s = 0; s < 3; s++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){B, 1, 6, 6}, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_uniform(&rng) - 0.3f;
        int32_t y[B] = {0, 1, 2, 1};
        CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), y)), QAT_OK);
        qat_optim_step(&opt, m->params, m->grads, 0.01f);
        qat_optim_step(&qopt, m->qparams, m->qgrads, 0.01f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    int32_t order[NS] = {3, 1, 4, 0, 5, 2, 7, 6};
    qat_train_state ts = {.step = 3, .epoch = 1, .order = order, .n_order = NS, .config = "{\"tiny\": true}"};
    qat_rng_seed(&ts.shuffle_rng, 4);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, &opt, &qopt, &ts, ckpt_path), QAT_OK);
    qat_model_train(m, false);
    CU_ASSERT_EQUAL_FATAL(qat_export(m, 3, (int64_t[]){1, 6, 6}, "{\"tiny\": true}", qmodel_path, NULL), QAT_OK);
    qat_ctx_free(ctx);
    /* the same model with 4-bit sub-channel weights in ragged blocks of 4
     * (conv 9 = 4 + 4 + 1, fc 18 = 4·4 + 2): packed weights, block
     * conversions, accumulation bounds */
    ctx = qat_ctx_new();
    m = tiny_model(ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    c = qat_prepare_defaults();
    c.wbits = 4, c.wgran = QAT_GRAN_BLOCK, c.block = 4, c.ragged = true;
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, &c), QAT_OK);
    for (int s = 0; s < 3; s++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){B, 1, 6, 6}, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_uniform(&rng) - 0.3f;
        CU_ASSERT(qat_model_forward(m, x) != NULL);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    CU_ASSERT_EQUAL_FATAL(qat_export(m, 3, (int64_t[]){1, 6, 6}, "{\"tiny\": true}", qmodel_sub_path, NULL), QAT_OK);
    qat_ctx_free(ctx);
}

/* ---- using what a loader accepted ------------------------------------------------- */

/* A loaded quantized model must validate and run in every engine. */
static void use_qmodel(qat_ctx *ctx, const qat_qmodel *q) {
    CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, q), QAT_OK);
    int64_t n = qat_qtensor_numel(&q->tensors[q->input]), k = qat_qtensor_numel(&q->tensors[q->output]);
    float *x = calloc((size_t)(2 * n), sizeof *x), *y = calloc((size_t)(2 * k), sizeof *y);
    for (int mode = QAT_ENGINE_INT; x && y && mode <= QAT_ENGINE_FAKE; mode++) {
        qat_engine *e = qat_engine_new(ctx, q, (qat_engine_mode)mode, 2);
        if (e) CU_ASSERT_EQUAL(qat_engine_run(e, x, 2, y, NULL), QAT_OK);
        qat_engine_free(e);
        qat_ctx_clear_error(ctx); /* an engine may refuse a type it cannot run: a clear error */
    }
    free(x), free(y);
}

/* A rebuilt checkpoint model must run a training step and lower. */
static void use_model(qat_ctx *ctx, qat_model *m) {
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){B, 1, 6, 6}, false);
    int32_t y[B] = {0, 1, 2, 1};
    qat_model_train(m, true);
    qat_status st = qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), y));
    if (st != QAT_OK) CU_ASSERT(strlen(qat_ctx_error(ctx)) > 0);
    qat_ctx_step_reset(ctx);
    qat_ctx_clear_error(ctx);
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    if (q && qat_qmodel_lower(m, 3, (int64_t[]){1, 6, 6}, ctx, q) == QAT_OK) CU_ASSERT_EQUAL(qat_qmodel_validate(ctx, q), QAT_OK);
}

typedef struct {
    int refused, accepted;
} tally;

/* The verdict on one mutant: refused with a message naming the file, or
 * accepted. */
static void verdict(tally *t, qat_ctx *ctx, qat_status st, const char *path, const char *what) {
    if (st == QAT_OK) {
        t->accepted++;
        if (getenv("QAT_MUTATION_VERBOSE")) printf("\n  accepted: %s", what);
        return;
    }
    t->refused++;
    const char *msg = qat_ctx_error(ctx);
    if (!strstr(msg, path)) printf("\n  %s: the message does not name the file: \"%s\"\n", what, msg);
    CU_ASSERT(strstr(msg, path) != NULL);
}

/* Both ways a checkpoint is read: rebuilt from the file alone (export,
 * eval), and loaded into a caller's model with optimizers and loop state
 * (resume). The mutant is refused if either refuses it. */
static void load_checkpoint(tally *t, const char *path, const char *what) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = NULL;
    char config[64];
    qat_status st = qat_checkpoint_model(ctx, path, &m, config, sizeof config);
    if (st == QAT_OK) use_model(ctx, m);
    qat_ctx *ctx2 = qat_ctx_new();
    qat_model *m2 = tiny_model(ctx2);
    qat_prepare_config c = qat_prepare_defaults();
    c.lsq = true;
    qat_prepare(m2, &c);
    qat_optim opt, qopt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx2, &oc, m2->n_params);
    qat_optim_init(&qopt, ctx2, &oc, m2->n_qparams);
    int32_t order[NS];
    qat_train_state ts = {.order = order, .n_order = NS};
    qat_status st2 = qat_checkpoint_load(m2, &opt, &qopt, &ts, path);
    if (st2 == QAT_OK) {
        CU_ASSERT(ts.step >= 0 && ts.epoch >= 0 && ts.n_order >= 0 && ts.n_order <= NS);
        CU_ASSERT(opt.steps >= 0 && qopt.steps >= 0);
        use_model(ctx2, m2);
    }
    int64_t step, epoch;
    bool prepared;
    if (qat_checkpoint_info(ctx2, path, &step, &epoch, &prepared) == QAT_OK) CU_ASSERT(step >= 0 && epoch >= 0);
    if (st == QAT_OK && st2 != QAT_OK) verdict(t, ctx2, st2, path, what);
    else verdict(t, ctx, st, path, what);
    qat_ctx_free(ctx);
    qat_ctx_free(ctx2);
}

static void load_qmodel(tally *t, const char *path, const char *what) {
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    qat_status st = qat_qmodel_load(ctx, path, q);
    verdict(t, ctx, st, path, what);
    if (st == QAT_OK) use_qmodel(ctx, q);
    qat_ctx_free(ctx);
}

/* ---- the HDF5 mutation catalogues --------------------------------------------------- */

static void copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    char buf[1 << 14];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* Replaces attribute `name` of obj by one of `type` over `space` (rank -1:
 * null space, 0: scalar) holding `data` (may be NULL: left unwritten). */
static void put_attr(hid_t obj, const char *name, hid_t type, int rank, hsize_t n, const void *data) {
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
    hsize_t dims[2] = {n, n};
    hid_t sp = rank < 0 ? H5Screate(H5S_NULL) : rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && data) H5Awrite(a, type, data);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
}

static void put_str_attr(hid_t obj, const char *name, const char *text, size_t size, bool vlen, H5T_str_t pad) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, vlen ? H5T_VARIABLE : size);
    H5Tset_strpad(t, pad);
    put_attr(obj, name, t, 0, 1, vlen ? (const void *)&text : (const void *)text);
    H5Tclose(t);
}

enum { N_ATTR_MUTATIONS = 17 };
static const char *const attr_mutation_names[N_ATTR_MUTATIONS] = {
    "removed", "string \"x\"", "200-byte string", "64 bytes, no NUL", "variable-length string",
    "32 integers", "2^40", "-1", "2^32-95", "NaN", "+Inf", "denormal 1e-40", "3 floats", "null space",
    "2x2 integers", "3 strings", "uint64 2^63+5"};

static void mutate_attr(hid_t obj, const char *name, int k) {
    long long ll[32];
    float f;
    char text[256];
    switch (k) {
    case 0: H5Adelete(obj, name); break;
    case 1: put_str_attr(obj, name, "x", 2, false, H5T_STR_NULLTERM); break;
    case 2:
        memset(text, 'a', 200), text[200] = '\0';
        put_str_attr(obj, name, text, 201, false, H5T_STR_NULLTERM);
        break;
    case 3: memset(text, 'b', 64), put_str_attr(obj, name, text, 64, false, H5T_STR_NULLPAD); break;
    case 4: put_str_attr(obj, name, "qat-training-checkpoint", 0, true, H5T_STR_NULLTERM); break;
    case 5:
        for (int i = 0; i < 32; i++) ll[i] = 1;
        put_attr(obj, name, H5T_NATIVE_LLONG, 1, 32, ll);
        break;
    case 6: ll[0] = 1LL << 40, put_attr(obj, name, H5T_NATIVE_LLONG, 0, 1, ll); break;
    case 7: ll[0] = -1, put_attr(obj, name, H5T_NATIVE_LLONG, 0, 1, ll); break;
    case 8: ll[0] = (1LL << 32) - 95, put_attr(obj, name, H5T_NATIVE_LLONG, 0, 1, ll); break;
    case 9: f = NAN, put_attr(obj, name, H5T_NATIVE_FLOAT, 0, 1, &f); break;
    case 10: f = INFINITY, put_attr(obj, name, H5T_NATIVE_FLOAT, 0, 1, &f); break;
    case 11: f = 1e-40f, put_attr(obj, name, H5T_NATIVE_FLOAT, 0, 1, &f); break;
    case 12: {
        float v[3] = {0.5f, 0.25f, 2.0f};
        put_attr(obj, name, H5T_NATIVE_FLOAT, 1, 3, v);
        break;
    }
    case 13: put_attr(obj, name, H5T_NATIVE_LLONG, -1, 0, NULL); break;
    case 14:
        for (int i = 0; i < 4; i++) ll[i] = 3;
        put_attr(obj, name, H5T_NATIVE_LLONG, 2, 2, ll);
        break;
    case 15: {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 8);
        put_attr(obj, name, t, 1, 3, "abcdefg\0hijklmn\0opqrstu");
        H5Tclose(t);
        break;
    }
    case 16: {
        unsigned long long u = (1ULL << 63) + 5;
        put_attr(obj, name, H5T_NATIVE_ULLONG, 0, 1, &u);
        break;
    }
    }
}

enum { N_SET_MUTATIONS = 13 };
static const char *const set_mutation_names[N_SET_MUTATIONS] = {
    "removed", "all NaN", "all +Inf", "all denormal", "all huge", "all negative", "all zero",
    "one element more", "empty", "rank 5", "strings", "64-bit of the same shape", "a group instead"};

/* Rewrites every element of an existing dataset (its type converts). */
static void fill_set(hid_t set, double v) {
    hid_t sp = H5Dget_space(set);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5Sclose(sp);
    double *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    for (hssize_t i = 0; i < n; i++) buf[i] = v;
    H5E_BEGIN_TRY { H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); }
    H5E_END_TRY;
    free(buf);
}

static void new_set(hid_t file, const char *path, hid_t type, int rank, const hsize_t *dims, double v) {
    H5Ldelete(file, path, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t set = H5Dcreate2(file, path, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (set >= 0 && H5Tget_class(type) != H5T_STRING) fill_set(set, v);
    if (set >= 0) H5Dclose(set);
    H5Sclose(sp);
}

static void mutate_set(hid_t file, const char *path, int k) {
    hid_t set = H5Dopen2(file, path, H5P_DEFAULT);
    if (set < 0) return;
    hid_t sp = H5Dget_space(set), type = H5Dget_type(set);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[32] = {1};
    if (rank > 0) H5Sget_simple_extent_dims(sp, dims, NULL);
    bool is_float = H5Tget_class(type) == H5T_FLOAT;
    H5Sclose(sp);
    switch (k) {
    case 1: fill_set(set, NAN); break;
    case 2: fill_set(set, INFINITY); break;
    case 3: fill_set(set, 1e-40); break;
    case 4: fill_set(set, is_float ? 1e30 : 2147483647.0); break;
    case 5: fill_set(set, is_float ? -1e30 : -2147483648.0); break;
    case 6: fill_set(set, 0); break;
    default: break;
    }
    H5Dclose(set);
    hsize_t d1[1] = {(hsize_t)n + 1}, d0[1] = {0}, d5[5] = {1, 1, 1, 1, (hsize_t)n};
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    switch (k) {
    case 0: H5Ldelete(file, path, H5P_DEFAULT); break;
    case 7: new_set(file, path, type, 1, d1, 1); break;
    case 8: new_set(file, path, type, 1, d0, 0); break;
    case 9: new_set(file, path, type, 5, d5, 1); break;
    case 10: new_set(file, path, str, rank > 0 ? rank : 1, dims, 0); break;
    case 11: new_set(file, path, is_float ? H5T_NATIVE_DOUBLE : H5T_NATIVE_LLONG, rank > 0 ? rank : 1, dims,
                     is_float ? 1e300 : 1099511627776.0);
        break;
    case 12: {
        H5Ldelete(file, path, H5P_DEFAULT);
        hid_t g = H5Gcreate2(file, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g >= 0) H5Gclose(g);
        break;
    }
    default: break;
    }
    H5Tclose(str);
    H5Tclose(type);
}

/* Every object of a file: (path, is dataset) and each attribute's name. */
typedef struct {
    char path[128];
    char attr[64]; /* "" for the object itself */
    bool dataset;
} target;

typedef struct {
    target *t;
    int n, cap;
} targets;

static void add_target(targets *ts, const char *path, const char *attr, bool dataset) {
    if (ts->n == ts->cap) {
        ts->cap = ts->cap ? 2 * ts->cap : 64;
        ts->t = realloc(ts->t, (size_t)ts->cap * sizeof *ts->t);
    }
    target *t = &ts->t[ts->n++];
    snprintf(t->path, sizeof t->path, "%s", path);
    snprintf(t->attr, sizeof t->attr, "%s", attr ? attr : "");
    t->dataset = dataset;
}

typedef struct {
    targets *ts;
    const char *path;
} attr_ctx;

static herr_t on_attr(hid_t loc, const char *name, const H5A_info_t *info, void *user) {
    (void)loc, (void)info;
    attr_ctx *a = user;
    add_target(a->ts, a->path, name, false);
    return 0;
}

static herr_t on_object(hid_t file, const char *name, const H5O_info_t *info, void *user) {
    targets *ts = user;
    char path[128];
    snprintf(path, sizeof path, "%s%s", strcmp(name, ".") ? "/" : "/", strcmp(name, ".") ? name : "");
    if (info->type == H5O_TYPE_DATASET) add_target(ts, path, NULL, true);
    hid_t obj = H5Oopen(file, name, H5P_DEFAULT);
    attr_ctx a = {ts, path};
    hsize_t idx = 0;
    if (obj >= 0) H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, on_attr, &a), H5Oclose(obj);
    return 0;
}

static targets list_targets(const char *file) {
    targets ts = {0};
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5Ovisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, on_object, &ts);
    H5Fclose(f);
    return ts;
}

/* QAT_MUTATION_STRIDE=k tries every k-th mutant (valgrind runs are slow). */
static int stride(void) {
    const char *s = getenv("QAT_MUTATION_STRIDE");
    int k = s ? atoi(s) : 1;
    return k >= 1 ? k : 1;
}

static void run_hdf5_catalogue_n(const char *good, const char *kind, void (*load)(tally *, const char *, const char *),
                                 int min_targets, int min_refused) {
    targets ts = list_targets(good);
    CU_ASSERT_FATAL(ts.n >= min_targets);
    char mutant[320];
    path_of(mutant, sizeof mutant, "mutant.h5");
    tally t = {0};
    int k = 0, every = stride();
    for (int i = 0; i < ts.n; i++) {
        const target *g = &ts.t[i];
        int n = g->attr[0] ? N_ATTR_MUTATIONS : N_SET_MUTATIONS;
        for (int j = 0; j < n; j++, k++) {
            if (k % every) continue;
            copy_file(good, mutant);
            hid_t f = H5Fopen(mutant, H5F_ACC_RDWR, H5P_DEFAULT);
            H5E_BEGIN_TRY {
                if (g->attr[0]) {
                    hid_t obj = H5Oopen(f, g->path, H5P_DEFAULT);
                    if (obj >= 0) mutate_attr(obj, g->attr, j), H5Oclose(obj);
                } else {
                    mutate_set(f, g->path, j);
                }
            }
            H5E_END_TRY;
            H5Fclose(f);
            char what[256];
            snprintf(what, sizeof what, "%s %s%s%s: %s", kind, g->path, g->attr[0] ? " @" : "", g->attr,
                     g->attr[0] ? attr_mutation_names[j] : set_mutation_names[j]);
            load(&t, mutant, what);
        }
    }
    printf("\n  %s: %d objects and attributes, %d mutants: %d refused, %d accepted ", kind, ts.n,
           t.refused + t.accepted, t.refused, t.accepted);
    CU_ASSERT(t.refused >= min_refused / every);
    free(ts.t);
}

static void run_hdf5_catalogue(const char *good, const char *kind, void (*load)(tally *, const char *, const char *)) {
    run_hdf5_catalogue_n(good, kind, load, 21, 40);
}

static void test_checkpoint_mutants(void) { run_hdf5_catalogue(ckpt_path, "checkpoint", load_checkpoint); }
static void test_qmodel_mutants(void) { run_hdf5_catalogue(qmodel_path, "quantized model", load_qmodel); }
static void test_qmodel_subchannel_mutants(void) {
    run_hdf5_catalogue(qmodel_sub_path, "quantized model, sub-channel", load_qmodel);
}

/* Version-1 files still load: their reader meets the same catalogue, on
 * the LeNet file the fuzzer starts from. */
static void test_qmodel_v1_mutants(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    if (!src) QAT_TEST_SKIP("QAT_SOURCE_DIR is not set (ctest sets it): no version-1 file to mutate");
    char path[600];
    snprintf(path, sizeof path, "%s/fuzz/seeds/qmodel/lenet-w8a8-v1.h5", src);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, path, q), QAT_OK);
    CU_ASSERT_EQUAL(q->version, 1);
    qat_ctx_free(ctx);
    run_hdf5_catalogue(path, "quantized model v1", load_qmodel);
}

/* ---- IDX mutants ---------------------------------------------------------------------- */

static void write_bytes(const char *path, const uint8_t *b, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, b, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void load_idx(tally *t, const char *path, const char *what) {
    qat_ctx *ctx = qat_ctx_new();
    qat_idx idx;
    qat_status st = qat_idx_read(ctx, path, &idx);
    verdict(t, ctx, st, path, what);
    if (st == QAT_OK) {
        int64_t n = 1;
        for (int d = 0; d < idx.ndim; d++) n *= idx.dims[d];
        CU_ASSERT_EQUAL(n, idx.size);
        uint32_t sum = 0; /* every byte readable (ASan and valgrind watch the reads) */
        for (int64_t i = 0; i < idx.size; i++) sum += idx.data[i];
        CU_ASSERT(sum <= 255u * (uint32_t)idx.size);
        qat_idx_free(&idx);
    }
    qat_ctx_free(ctx);
}

static void test_idx_mutants(void) {
    /* a valid 3-d file: 2 x 3 x 4 bytes */
    uint8_t good[16 + 24];
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
    memcpy(good, head, 16);
    for (int i = 0; i < 24; i++) good[16 + i] = (uint8_t)(i * 7);
    char path[320];
    path_of(path, sizeof path, "mutant.idx");
    tally t = {0};
    static const uint8_t values[] = {0x00, 0x01, 0x7F, 0x80, 0xFF};
    for (int gz = 0; gz <= 1; gz++) {
        for (int pos = 0; pos < 16; pos++) /* every header byte, every interesting value */
            for (size_t v = 0; v < sizeof values; v++) {
                uint8_t b[sizeof good];
                memcpy(b, good, sizeof good);
                b[pos] = values[v];
                write_bytes(path, b, sizeof b, gz);
                load_idx(&t, path, "idx header byte");
            }
        for (size_t keep = 0; keep < sizeof good; keep++) { /* every truncation */
            write_bytes(path, good, keep, gz);
            load_idx(&t, path, "idx truncated");
        }
        uint8_t longer[sizeof good + 3];
        memcpy(longer, good, sizeof good);
        memset(longer + sizeof good, 0xAB, 3);
        write_bytes(path, longer, sizeof longer, gz);
        load_idx(&t, path, "idx padded");
    }
    /* gzip with garbage after the stream */
    write_bytes(path, good, sizeof good, true);
    FILE *f = fopen(path, "ab");
    fputs("garbage", f);
    fclose(f);
    load_idx(&t, path, "idx gzip trailing garbage");
    printf("\n  idx: %d mutants: %d refused, %d accepted ", t.refused + t.accepted, t.refused, t.accepted);
    CU_ASSERT(t.refused >= 40);
}

/* ---- data sets: HDF5, .npy and IDX --------------------------------------------------------- */

/* A data set that opened must read: every sample finite, every label in
 * [0, label_max], every flag 0/1, the statistics defined. */
static void use_dataset(qat_ctx *ctx, qat_dataset *d) {
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat_split_info *in = qat_dataset_info(d, (qat_split)s);
        if (!in) continue;
        CU_ASSERT(in->n >= 1 && in->x_numel >= 1 && in->x_numel <= QAT_DATA_MAX_SAMPLE);
        int64_t n = in->n < 64 ? in->n : 64;
        int32_t idx[64], lab[64];
        uint8_t an[64];
        for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(in->n - 1 - i);
        float *x = malloc((size_t)(n * in->x_numel) * sizeof *x);
        float *t = in->target == QAT_TARGET_VALUES ? malloc((size_t)(n * in->y_numel) * sizeof *t) : NULL;
        qat_status st = qat_dataset_read(d, (qat_split)s, idx, n, x, in->target == QAT_TARGET_CLASS ? lab : NULL, t,
                                         in->has_anomaly ? an : NULL);
        CU_ASSERT_EQUAL(st, QAT_OK);
        int bad = 0;
        for (int64_t i = 0; st == QAT_OK && i < n * in->x_numel; i++) bad += !isfinite(x[i]);
        for (int64_t i = 0; st == QAT_OK && t && i < n * in->y_numel; i++) bad += !isfinite(t[i]);
        for (int64_t i = 0; st == QAT_OK && in->target == QAT_TARGET_CLASS && i < n; i++)
            bad += lab[i] < 0 || lab[i] > in->label_max;
        for (int64_t i = 0; st == QAT_OK && in->has_anomaly && i < n; i++) bad += an[i] > 1;
        CU_ASSERT_EQUAL(bad, 0);
        double mean[64], sd[64];
        if (in->x_rank != 3 || in->x_shape[0] <= 64) {
            CU_ASSERT_EQUAL(qat_dataset_channel_stats(d, (qat_split)s, 0, 1.0, mean, sd), QAT_OK);
        }
        qat_ctx_clear_error(ctx);
        free(x), free(t);
    }
}

/* Opened in memory and streamed (a 1 KiB cap); named: what a refusal's
 * message must name (the file, or the directory of a .npy set). */
static void load_dataset_named(tally *t, const char *path, const char *named, const char *what) {
    qat_status first = QAT_OK;
    qat_ctx *keep = NULL;
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset_options o = qat_dataset_defaults();
        if (k) o.memory_cap = 1024, o.allow_nonfinite = true, o.val_fraction = 0.3;
        qat_dataset *d = NULL;
        qat_status st = qat_dataset_open(ctx, path, &o, &d);
        if (st == QAT_OK) use_dataset(ctx, d);
        qat_dataset_free(d);
        if (k == 0) first = st, keep = ctx;
        else qat_ctx_free(ctx);
    }
    verdict(t, keep, first, named, what);
    qat_ctx_free(keep);
}

static void load_dataset(tally *t, const char *path, const char *what) { load_dataset_named(t, path, path, what); }

/* Two valid sets: uint8 images with labels, a val split and anomaly flags;
 * float features with float targets. */
static void make_dataset_files(const char *u8path, const char *f32path) {
    hid_t f = H5Fcreate(u8path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    uint8_t x[24 * 16], y[24];
    float xf[24 * 6], yf[24 * 2];
    for (int i = 0; i < 24 * 16; i++) x[i] = (uint8_t)(i * 11);
    for (int i = 0; i < 24; i++) y[i] = (uint8_t)(i % 5);
    for (int i = 0; i < 24 * 6; i++) xf[i] = (float)i / 7.0f - 3.0f;
    for (int i = 0; i < 24 * 2; i++) yf[i] = (float)(i % 3);
    static const char *const names[7] = {"train/x", "train/y", "val/x", "val/y", "test/x", "test/y", "test/anomaly"};
    for (int k = 0; k < 7; k++) {
        bool isx = k % 2 == 0 && k < 6;
        hsize_t d[4] = {k < 2 ? 24 : 8, 1, 4, 4};
        hid_t sp = H5Screate_simple(isx ? 4 : 1, d, NULL);
        hid_t set = H5Dcreate2(f, names[k], H5T_STD_U8LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        static const uint8_t flags[8] = {0, 1, 1, 0, 0, 0, 1, 0};
        H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, isx ? x : k == 6 ? flags : y);
        H5Dclose(set), H5Sclose(sp);
    }
    H5Fclose(f);
    f = H5Fcreate(f32path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    for (int k = 0; k < 4; k++) {
        hsize_t d[2] = {k < 2 ? 24 : 8, k % 2 ? 2 : 6};
        hid_t sp = H5Screate_simple(2, d, NULL);
        hid_t set = H5Dcreate2(f, names[k < 2 ? k : k + 2], H5T_IEEE_F32LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, k % 2 ? yf : xf);
        H5Dclose(set), H5Sclose(sp);
    }
    H5Fclose(f);
    H5Pclose(lcpl);
}

static void test_dataset_hdf5_mutants(void) {
    char u8[320], f32[320];
    path_of(u8, sizeof u8, "data-u8.h5");
    path_of(f32, sizeof f32, "data-f32.h5");
    make_dataset_files(u8, f32);
    tally t = {0};
    load_dataset(&t, u8, "the valid uint8 set");
    load_dataset(&t, f32, "the valid float set");
    CU_ASSERT_EQUAL(t.accepted, 2);
    run_hdf5_catalogue_n(u8, "data set, uint8", load_dataset, 7, 40);
    run_hdf5_catalogue_n(f32, "data set, float32", load_dataset, 4, 20);
}

/* A valid .npy file of a data-set directory, changed byte by byte in its
 * header (every position, values that matter to the grammar), cut at
 * every length, and padded; the set is opened each time. */
static void npy_file_bytes(uint8_t *out, size_t *len, const char *descr, const char *shape, const void *payload,
                           size_t bytes) {
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    int pad = (64 - (10 + n + 1) % 64) % 64, hlen = n + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)hlen, out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', (size_t)pad);
    out[10 + n + pad] = '\n';
    memcpy(out + 10 + hlen, payload, bytes);
    *len = (size_t)(10 + hlen) + bytes;
}

static void test_dataset_npy_mutants(void) {
    char d[320], px[400], py[400], pt[400];
    path_of(d, sizeof d, "npyset");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(px, sizeof px, "%s/train_x.npy", d);
    snprintf(py, sizeof py, "%s/train_y.npy", d);
    snprintf(pt, sizeof pt, "%s/test_x.npy", d);
    float xs[6 * 4];
    uint8_t ys[6] = {0, 1, 2, 0, 1, 2}, good[256], other[256];
    for (int i = 0; i < 24; i++) xs[i] = (float)i - 10.0f;
    size_t n, no;
    npy_file_bytes(good, &n, "<f4", "(6, 2, 2)", xs, sizeof xs);
    write_bytes(px, good, n, false);
    npy_file_bytes(other, &no, "|u1", "(6,)", ys, sizeof ys);
    write_bytes(py, other, no, false);
    npy_file_bytes(other, &no, "<f4", "(3, 2, 2)", xs, 48);
    write_bytes(pt, other, no, false);
    snprintf(pt, sizeof pt, "%s/test_y.npy", d);
    npy_file_bytes(other, &no, "|u1", "(3,)", ys, 3);
    write_bytes(pt, other, no, false);
    tally t = {0};
    static const uint8_t values[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, ' ', '\n', '(', ')', ',', '\'', '0', '9', '<'};
    for (size_t pos = 0; pos < n - sizeof xs; pos++)
        for (size_t v = 0; v < sizeof values; v++) {
            uint8_t b[256];
            memcpy(b, good, n);
            if (b[pos] == values[v]) continue;
            b[pos] = values[v];
            write_bytes(px, b, n, false);
            load_dataset_named(&t, d, d, "npy header byte");
        }
    for (size_t keep = 0; keep < n; keep++) {
        write_bytes(px, good, keep, false);
        load_dataset_named(&t, d, d, "npy truncated");
    }
    uint8_t longer[260];
    memcpy(longer, good, n);
    memset(longer + n, 0xAB, 3);
    write_bytes(px, longer, n + 3, false);
    load_dataset_named(&t, d, d, "npy padded");
    write_bytes(px, good, n, false);
    load_dataset_named(&t, d, d, "npy valid");
    printf("\n  npy: %d mutants: %d refused, %d accepted ", t.refused + t.accepted, t.refused, t.accepted);
    CU_ASSERT(t.refused >= 400);
    CU_ASSERT(t.accepted >= 1);
}

/* The images file of an IDX set, header byte by byte (qat_idx_read's own
 * mutants are above): the set checks what the file then says. */
static void test_dataset_idx_mutants(void) {
    char d[320], pi[400], pl[400], ti[400], tl[400];
    path_of(d, sizeof d, "idxset");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(pi, sizeof pi, "%s/train-images-idx3-ubyte", d);
    snprintf(pl, sizeof pl, "%s/train-labels-idx1-ubyte", d);
    snprintf(ti, sizeof ti, "%s/t10k-images-idx3-ubyte", d);
    snprintf(tl, sizeof tl, "%s/t10k-labels-idx1-ubyte", d);
    uint8_t good[16 + 24];
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
    memcpy(good, head, 16);
    for (int i = 0; i < 24; i++) good[16 + i] = (uint8_t)(i * 7);
    const uint8_t labels[10] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 0};
    write_bytes(pi, good, sizeof good, false);
    write_bytes(ti, good, sizeof good, false);
    write_bytes(pl, labels, sizeof labels, false);
    write_bytes(tl, labels, sizeof labels, false);
    tally t = {0};
    static const uint8_t values[] = {0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0xFF};
    for (int pos = 0; pos < 16; pos++)
        for (size_t v = 0; v < sizeof values; v++) {
            uint8_t b[sizeof good];
            memcpy(b, good, sizeof good);
            b[pos] = values[v];
            write_bytes(pi, b, sizeof b, pos % 2 == 1);
            load_dataset_named(&t, d, d, "idx set: images header byte");
        }
    printf("\n  idx set: %d mutants: %d refused, %d accepted ", t.refused + t.accepted, t.refused, t.accepted);
    CU_ASSERT(t.refused >= 40);
}

/* ---- the review's cases, one by one ------------------------------------------------------ */

/* A copy of src with one mutation, loaded by `load`; the message must
 * contain `phrase`. */
static void expect_refused(const char *src, void (*mutate)(hid_t f), bool qmodel, const char *phrase) {
    char path[320];
    path_of(path, sizeof path, "case.h5");
    copy_file(src, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5E_BEGIN_TRY { mutate(f); }
    H5E_END_TRY;
    H5Fclose(f);
    qat_ctx *ctx = qat_ctx_new();
    qat_status st;
    if (qmodel) {
        qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
        st = qat_qmodel_load(ctx, path, q);
    } else {
        qat_model *m = NULL;
        st = qat_checkpoint_model(ctx, path, &m, NULL, 0);
        if (st == QAT_OK) { /* the resume path reads the loop state too */
            qat_ctx_free(ctx);
            ctx = qat_ctx_new();
            m = tiny_model(ctx);
            qat_prepare_config c = qat_prepare_defaults();
            c.lsq = true;
            qat_prepare(m, &c);
            qat_optim opt, qopt;
            qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
            qat_optim_init(&opt, ctx, &oc, m->n_params);
            qat_optim_init(&qopt, ctx, &oc, m->n_qparams);
            int32_t order[NS];
            qat_train_state ts = {.order = order, .n_order = NS};
            st = qat_checkpoint_load(m, &opt, &qopt, &ts, path);
        }
    }
    CU_ASSERT_NOT_EQUAL(st, QAT_OK);
    if (!strstr(qat_ctx_error(ctx), phrase)) printf("\n  message: %s (want \"%s\")\n", qat_ctx_error(ctx), phrase);
    CU_ASSERT(strstr(qat_ctx_error(ctx), phrase) != NULL);
    qat_ctx_free(ctx);
}

static void format_200(hid_t f) { mutate_attr(f, "format", 2); }
static void format_64_no_nul(hid_t f) { mutate_attr(f, "format", 3); }
static void format_ints(hid_t f) { mutate_attr(f, "format", 5); }
static void format_vlen(hid_t f) { put_str_attr(f, "format", "qat-quantized-model", 0, true, H5T_STR_NULLTERM); }

static void test_format_attribute(void) {
    const char *files[2] = {ckpt_path, qmodel_path};
    for (int i = 0; i < 2; i++) {
        expect_refused(files[i], format_200, i == 1, "format attribute is not a short string");
        expect_refused(files[i], format_64_no_nul, i == 1, "format attribute is not a short string");
        expect_refused(files[i], format_ints, i == 1, "format attribute is not a short string");
    }
    /* a variable-length string (h5py's default) is read as the text it holds */
    char path[320];
    path_of(path, sizeof path, "vlen.h5");
    copy_file(qmodel_path, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    format_vlen(f);
    H5Fclose(f);
    qat_ctx *ctx = qat_ctx_new();
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL(qat_qmodel_load(ctx, path, q), QAT_OK);
    qat_ctx_free(ctx);
}

static void scale_array(hid_t f) {
    hid_t g = H5Gopen2(f, "tensors/0", H5P_DEFAULT);
    mutate_attr(g, "scale", 12);
    H5Gclose(g);
}
static void storage_type_array(hid_t f) {
    hid_t g = H5Gopen2(f, "tensors/0", H5P_DEFAULT);
    mutate_attr(g, "storage_type", 15);
    H5Gclose(g);
}
static void config_array(hid_t f) { mutate_attr(f, "training_config", 15); }
static void op_name_array(hid_t f) {
    hid_t g = H5Gopen2(f, "ops/0", H5P_DEFAULT);
    mutate_attr(g, "name", 15);
    H5Gclose(g);
}
static void input_shape_rank32(hid_t f) {
    hid_t g = H5Gopen2(f, "tensors/0", H5P_DEFAULT);
    mutate_attr(g, "shape", 5);
    H5Gclose(g);
}
static void zero_point_wraps(hid_t f) {
    hid_t g = H5Gopen2(f, "tensors/0", H5P_DEFAULT);
    mutate_attr(g, "zero_point", 8);
    H5Gclose(g);
}
static void denormal_scale(hid_t f) {
    hid_t g = H5Gopen2(f, "tensors/0", H5P_DEFAULT);
    mutate_attr(g, "scale", 11);
    H5Gclose(g);
}

/* A quantized shape whose product would overflow int64 ([O, 2^24, 2^24, 2^24]). */
static void quantized_shape_huge(hid_t f) {
    hid_t d = H5Dopen2(f, "ops/0/weight", H5P_DEFAULT);
    long long v[4] = {0, 1LL << 24, 1LL << 24, 1LL << 24};
    H5LTget_attribute_long_long(f, "ops/0/weight", "quantized_shape", v); /* keeps O */
    v[1] = v[2] = v[3] = 1LL << 24;
    H5LTset_attribute_long_long(f, "ops/0/weight", "quantized_shape", v, 4);
    H5Dclose(d);
}

static void test_qmodel_review_cases(void) {
    expect_refused(qmodel_path, quantized_shape_huge, true, "quantized_shape does not hold the weight's elements");
    expect_refused(qmodel_path, scale_array, true, "want 1 element(s)");
    expect_refused(qmodel_path, storage_type_array, true, "want 1 element(s)");
    expect_refused(qmodel_path, config_array, true, "want 1 element(s)");
    expect_refused(qmodel_path, op_name_array, true, "want 1 element(s)");
    expect_refused(qmodel_path, input_shape_rank32, true, "shape: 32 elements");
    expect_refused(qmodel_path, zero_point_wraps, true, "outside [-2147483648, 2147483647]");
    expect_refused(qmodel_path, denormal_scale, true, "not a positive normal number");
}

static void optim_kind_long(hid_t f) {
    hid_t g = H5Gopen2(f, "optim", H5P_DEFAULT);
    mutate_attr(g, "kind", 2);
    H5Gclose(g);
}
static void rng_long(hid_t f) {
    hsize_t n[1] = {1000};
    new_set(f, "state/model_rng", H5T_NATIVE_ULLONG, 1, n, 7);
}
static void shuffle_rng_long(hid_t f) {
    hsize_t n[1] = {1000};
    new_set(f, "state/shuffle_rng", H5T_NATIVE_ULLONG, 1, n, 7);
}
static void updates_array(hid_t f) {
    hid_t d = H5Dopen2(f, "observers/input", H5P_DEFAULT);
    mutate_attr(d, "updates", 5);
    H5Dclose(d);
}
static void act_scale_array(hid_t f) {
    hid_t d = H5Dopen2(f, "observers/input", H5P_DEFAULT);
    mutate_attr(d, "scale", 12);
    H5Dclose(d);
}
static void order_rank2(hid_t f) {
    hsize_t n[2] = {NS, NS};
    new_set(f, "state/order", H5T_NATIVE_INT32, 2, n, 1);
}
static void negative_step(hid_t f) {
    hid_t g = H5Gopen2(f, "state", H5P_DEFAULT);
    mutate_attr(g, "step", 7);
    H5Gclose(g);
}
static void order_out_of_range(hid_t f) {
    int32_t bad[NS] = {0, 1, 2, 3, 4, 5, 6, 320};
    hid_t d = H5Dopen2(f, "state/order", H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, bad);
    H5Dclose(d);
}
static void order_repeats(hid_t f) {
    int32_t bad[NS] = {0, 1, 2, 3, 4, 5, 6, 6};
    hid_t d = H5Dopen2(f, "state/order", H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, bad);
    H5Dclose(d);
}
static void granularity_unknown(hid_t f) {
    hid_t g = H5Gopen2(f, "architecture", H5P_DEFAULT);
    long long v[12];
    H5LTget_attribute_long_long(g, ".", "qat_config", v);
    v[2] = 7;
    H5LTset_attribute_long_long(g, ".", "qat_config", v, 12);
    H5Gclose(g);
}
static void nan_param(hid_t f) {
    hid_t d = H5Dopen2(f, "params/fc1.weight", H5P_DEFAULT);
    fill_set(d, NAN);
    H5Dclose(d);
}

/* Writes v into element i of the BatchNorm buffer whose name ends in suffix. */
static void set_bn_buffer(hid_t f, const char *suffix, int i, float v) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = tiny_model(ctx);
    for (int b = 0; m && b < m->n_buffer_tensors; b++) {
        const char *name = m->buffer_list[b].name;
        if (strlen(name) < strlen(suffix) || strcmp(name + strlen(name) - strlen(suffix), suffix)) continue;
        char path[2 * QAT_NAME_LEN + 16];
        snprintf(path, sizeof path, "buffers/%s", name);
        float vals[2];
        hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
        H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
        vals[i] = v;
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
        H5Dclose(d);
    }
    qat_ctx_free(ctx);
}
static void negative_var(hid_t f) { set_bn_buffer(f, ".running_var", 1, -1.0f); }
static void nan_var_after_mean(hid_t f) {
    set_bn_buffer(f, ".running_mean", 0, 5.0f);
    set_bn_buffer(f, ".running_var", 1, NAN);
}

/* A warm start that fails part way through the buffers (the mean read,
 * then a NaN variance) leaves every parameter and buffer as it was. */
static void test_load_weights_all_or_nothing(void) {
    char path[320];
    path_of(path, sizeof path, "case.h5");
    copy_file(ckpt_path, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    nan_var_after_mean(f);
    H5Fclose(f);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = tiny_model(ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    size_t np = (size_t)m->n_params, nb = (size_t)m->n_buffers;
    float *before = malloc((np + nb) * sizeof *before);
    memcpy(before, m->params, np * sizeof *before);
    memcpy(before + np, m->buffers, nb * sizeof *before);
    CU_ASSERT_EQUAL(qat_checkpoint_load_weights(m, path), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "running_var[1] is nan"));
    CU_ASSERT_EQUAL(memcmp(before, m->params, np * sizeof *before), 0);
    CU_ASSERT_EQUAL(memcmp(before + np, m->buffers, nb * sizeof *before), 0);
    free(before);
    qat_ctx_free(ctx);
}

static void test_checkpoint_review_cases(void) {
    expect_refused(ckpt_path, negative_var, false, "running_var[1] is -1 (want a finite, non-negative number)");
    expect_refused(ckpt_path, optim_kind_long, false, "attribute kind is too long");
    expect_refused(ckpt_path, rng_long, false, "model_rng has another shape");
    expect_refused(ckpt_path, shuffle_rng_long, false, "shuffle_rng has another shape");
    expect_refused(ckpt_path, updates_array, false, "attribute updates: want 1 element(s)");
    expect_refused(ckpt_path, act_scale_array, false, "attribute scale: want 1 element(s)");
    expect_refused(ckpt_path, order_rank2, false, "dataset order has too many dimensions");
    expect_refused(ckpt_path, negative_step, false, "step: -1 is outside");
    expect_refused(ckpt_path, order_out_of_range, false, "not a permutation");
    expect_refused(ckpt_path, order_repeats, false, "not a permutation");
    expect_refused(ckpt_path, granularity_unknown, false, "granularity = 7 is outside");
    expect_refused(ckpt_path, nan_param, false, "fc1.weight[0] is nan");
}

/* Export must refuse what its own loader would refuse, and NaN weights. */
static void test_export_refuses_what_load_refuses(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, ckpt_path, &m, NULL, 0), QAT_OK);
    char out[320];
    path_of(out, sizeof out, "nan.qat.h5");
    m->params[0] = NAN;
    CU_ASSERT_EQUAL(qat_export(m, 3, (int64_t[]){1, 6, 6}, NULL, out, NULL), QAT_ERR_STATE);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "not a finite number") != NULL);
    qat_ctx_clear_error(ctx);
    FILE *f = fopen(out, "rb");
    CU_ASSERT_PTR_NULL(f); /* nothing written */
    if (f) fclose(f);
    /* a lowered model with a zero point outside its range is not saved */
    m->params[0] = 0.1f;
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 3, (int64_t[]){1, 6, 6}, ctx, q), QAT_OK);
    q->tensors[q->ops[0].output].q.zero_point = 300;
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, q, out), QAT_ERR_FORMAT);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "would not load back") != NULL);
    qat_ctx_clear_error(ctx);
    q->tensors[q->ops[0].output].q.zero_point = 0;
    q->tensors[q->input].q.scale = 1e-40f; /* denormal */
    CU_ASSERT_EQUAL(qat_qmodel_save(ctx, q, out), QAT_ERR_FORMAT);
    f = fopen(out, "rb");
    CU_ASSERT_PTR_NULL(f);
    if (f) fclose(f);
    qat_ctx_free(ctx);
}

static int setup(void) {
    if (!qat_test_tmpdir(dir, sizeof dir, "hostile")) return 1;
    path_of(ckpt_path, sizeof ckpt_path, "valid.ckpt.h5");
    path_of(qmodel_path, sizeof qmodel_path, "valid.qat.h5");
    path_of(qmodel_sub_path, sizeof qmodel_sub_path, "valid-sub.qat.h5");
    return 0;
}

int main(int argc, char **argv) {
    static const qat_test_case cases[] = {
        {"make the valid files", make_valid_files},
        {"checkpoint: every mutant refused clearly or usable", test_checkpoint_mutants},
        {"quantized model: every mutant refused clearly or usable", test_qmodel_mutants},
        {"quantized model, version 1: every mutant refused clearly or usable", test_qmodel_v1_mutants},
        {"quantized model, 4-bit sub-channel: every mutant refused clearly or usable", test_qmodel_subchannel_mutants},
        {"IDX: every mutant refused clearly or usable", test_idx_mutants},
        {"data set, HDF5: every mutant refused clearly or usable", test_dataset_hdf5_mutants},
        {"data set, .npy: every mutant refused clearly or usable", test_dataset_npy_mutants},
        {"data set, IDX: every mutant refused clearly or usable", test_dataset_idx_mutants},
        {"format attribute: long, unterminated, integer, variable-length", test_format_attribute},
        {"quantized model: the review's cases", test_qmodel_review_cases},
        {"training checkpoint: the review's cases", test_checkpoint_review_cases},
        {"training checkpoint: a failed warm start changes nothing", test_load_weights_all_or_nothing},
        {"export refuses what load refuses", test_export_refuses_what_load_refuses},
        {NULL, NULL}};
    if (setup()) return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = qat_test_main("hostile files", cases, argc, argv);
    if (!getenv("QAT_KEEP_TMP")) qat_test_rmdir(dir);
    return rc;
}
