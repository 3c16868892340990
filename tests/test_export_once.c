/* One export lowers the model once, whatever targets it writes: this
 * suite is linked with -Wl,--wrap=qat_qmodel_lower (tests/CMakeLists.txt),
 * so every lowering the library makes goes through the counter below.
 * qat_export_all (the call `qat export` makes) with the quantized file,
 * ONNX and the C source lowers once; so do the one-target calls
 * (qat_export, qat_onnx_export, qat_codegen_model), and a multi-target
 * export that a target refuses (which writes nothing). The targets get the
 * same program: the files equal what each target makes from the quantized
 * file read back. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "qat/export.h"
#include "qat/optim.h"
#include "test_util.h"

static int lowerings;

qat_status __real_qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx,
                                   qat_qmodel *out);
qat_status __wrap_qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx,
                                   qat_qmodel *out);
qat_status __wrap_qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx,
                                   qat_qmodel *out) {
    lowerings++;
    return __real_qat_qmodel_lower(m, in_rank, in_shape, ctx, out);
}

static char dir[256];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static int files_in_dir(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || strstr(e->d_name, "qat-tmp") != NULL;
    if (d) closedir(d);
    return n;
}

/* A model from text, prepared (cfg NULL: the defaults) and trained a few
 * steps on random data, in eval mode. */
static qat_model *trained(qat_ctx *ctx, const char *text, const qat_prepare_config *cfg) {
    qat_model *m = qat_model_new(ctx);
    qat_status st = qat_model_from_text(m, text, "once");
    if (st == QAT_OK) st = qat_model_build(m, 3);
    if (st == QAT_OK) st = qat_prepare(m, cfg);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    int64_t s[4] = {8, 0, 0, 0};
    int rank = qat_model_input_shape(m, s + 1);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    qat_optim opt;
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m));
    for (int i = 0; i < 4; i++) {
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, rank + 1, s, false);
        for (int64_t j = 0; x && j < x->numel; j++) x->data[j] = qat_rng_normal(&rng);
        int32_t y[8] = {0, 1, 2, 0, 1, 2, 0, 1};
        CU_ASSERT_EQUAL(qat_backward(ctx, qat_cross_entropy(ctx, qat_model_forward(m, x), y)), QAT_OK);
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 1e-3f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, false);
    return m;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    *n = buf && fread(buf, 1, (size_t)size, f) == (size_t)size ? (size_t)size : 0;
    fclose(f);
    return buf;
}

static bool same_file(const char *path, const void *bytes, size_t size) {
    size_t n = 0;
    char *got = slurp(path, &n);
    bool same = got && n == size && memcmp(got, bytes, size) == 0;
    free(got);
    return same;
}

static const char *const net_text = "input shape=2,8,8\n"
                                    "conv2d  c1 input out=4 kernel=3 pad=1\n"
                                    "relu    r1 c1\n"
                                    "conv2d  c2 r1 out=4 kernel=3 pad=1\n"
                                    "add     s  c2,r1\n"
                                    "relu    r2 s\n"
                                    "maxpool2d p r2 kernel=2\n"
                                    "flatten f  p\n"
                                    "linear  fc f out=3\n";

/* Every target at once: one lowering; then each file equals what its
 * target makes from the quantized file read back (one program for all). */
static void test_every_target_one_lowering(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = trained(ctx, net_text, NULL);
    char qpath[300], opath[300];
    path_of(qpath, sizeof qpath, "m.qat.h5");
    path_of(opath, sizeof opath, "m.onnx");
    qat_export_targets t = {.qmodel = qpath, .onnx = qat_onnx_available() ? opath : NULL, .c_dir = dir,
                            .c_name = "m", .config = "{\"once\": 1}"};
    qat_export_report r;
    lowerings = 0;
    qat_status st = qat_export_all(m, 0, NULL, &t, &r);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL(lowerings, 1);
    CU_ASSERT(r.peak_bytes > 0 && r.c.arena_bytes > 0 && r.n_ops > 0);

    qat_qmodel q;
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, qpath, &q), QAT_OK);
    CU_ASSERT_STRING_EQUAL(q.config, "{\"once\": 1}");
    CU_ASSERT_EQUAL(q.n_ops, r.n_ops);
    qat_codegen_source src;
    char msg[400], path[300];
    CU_ASSERT_EQUAL_FATAL(qat_codegen_generate(&q, "m", &src, msg, sizeof msg), QAT_OK);
    for (int k = 0; k < QAT_CODEGEN_FILES; k++) {
        snprintf(path, sizeof path, "%s/m%s", dir, qat_codegen_suffix(k));
        CU_ASSERT(same_file(path, src.text[k], src.size[k]));
    }
    CU_ASSERT_EQUAL(src.info.arena_bytes, r.c.arena_bytes);
    CU_ASSERT_EQUAL(src.info.weight_bytes, r.c.weight_bytes);
    qat_codegen_source_free(&src);
    if (qat_onnx_available()) {
        uint8_t *bytes;
        size_t size;
        CU_ASSERT_EQUAL_FATAL(qat_onnx_serialize(&q, &bytes, &size, msg, sizeof msg), QAT_OK);
        CU_ASSERT(same_file(opath, bytes, size));
        free(bytes);
    }
    CU_ASSERT_EQUAL(lowerings, 1); /* reading and generating lowered nothing */
    qat_ctx_free(ctx);
}

/* The one-target calls lower once each. */
static void test_one_target_calls_lower_once(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = trained(ctx, net_text, NULL);
    char path[300];
    path_of(path, sizeof path, "one.qat.h5");
    lowerings = 0;
    int64_t peak = 0;
    CU_ASSERT_EQUAL(qat_export(m, 0, NULL, NULL, path, &peak), QAT_OK);
    CU_ASSERT_EQUAL(lowerings, 1);
    CU_ASSERT(peak > 0);
    lowerings = 0;
    qat_codegen_info info;
    CU_ASSERT_EQUAL(qat_codegen_model(m, 0, NULL, dir, "one", &info), QAT_OK);
    CU_ASSERT_EQUAL(lowerings, 1);
    CU_ASSERT(info.arena_bytes > 0);
    if (qat_onnx_available()) {
        path_of(path, sizeof path, "one.onnx");
        lowerings = 0;
        CU_ASSERT_EQUAL(qat_onnx_export(m, 0, NULL, NULL, path), QAT_OK);
        CU_ASSERT_EQUAL(lowerings, 1);
    }
    qat_ctx_free(ctx);
}

/* A target that refuses the program (sub-channel weights: no ONNX or C
 * form; the quantized file takes them): one lowering, no file written,
 * the refusal on the model's context. */
static void test_refused_export_lowers_once_writes_nothing(void) {
    if (!qat_onnx_available()) QAT_TEST_SKIP("this build has no ONNX support");
    qat_ctx *ctx = qat_ctx_new();
    qat_prepare_config cfg = qat_prepare_defaults();
    cfg.wgran = QAT_GRAN_BLOCK, cfg.block = 4;
    qat_model *m = trained(ctx, "input shape=16\nlinear fc input out=3\n", &cfg);
    char qpath[300], opath[300];
    path_of(qpath, sizeof qpath, "refused.qat.h5");
    path_of(opath, sizeof opath, "refused.onnx");
    int before = files_in_dir();
    qat_export_targets t = {.qmodel = qpath, .onnx = opath, .c_dir = dir, .c_name = "refused"};
    lowerings = 0;
    CU_ASSERT_EQUAL(qat_export_all(m, 0, NULL, &t, NULL), QAT_ERR_UNSUPPORTED);
    CU_ASSERT_EQUAL(lowerings, 1);
    CU_ASSERT(strstr(qat_ctx_error(ctx), "layer fc: sub-channel") != NULL);
    CU_ASSERT_EQUAL(files_in_dir(), before);
    qat_ctx_clear_error(ctx);
    /* the quantized file alone is written, from one lowering */
    t.onnx = NULL, t.c_dir = NULL;
    lowerings = 0;
    CU_ASSERT_EQUAL(qat_export_all(m, 0, NULL, &t, NULL), QAT_OK);
    CU_ASSERT_EQUAL(lowerings, 1);
    CU_ASSERT_EQUAL(files_in_dir(), before + 1);
    /* no target: refused before lowering */
    lowerings = 0;
    CU_ASSERT_EQUAL(qat_export_all(m, 0, NULL, &(qat_export_targets){0}, NULL), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(lowerings, 0);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "export_once")) return 2;
    static const qat_test_case cases[] = {
        {"every target at once: one lowering, and each file is its target's of the program read back",
         test_every_target_one_lowering},
        {"qat_export, qat_codegen_model, qat_onnx_export: one lowering each", test_one_target_calls_lower_once},
        {"a refused multi-target export: one lowering, nothing written", test_refused_export_lowers_once_writes_nothing},
        {NULL, NULL},
    };
    int rc = qat_test_main("export_once", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
