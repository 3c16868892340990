/* The qat-mnist program end to end: exit codes and messages for bad input,
 * a run stopped with --stop-after and resumed from its checkpoint ends
 * bit-identical to a run that never stopped, and train -> export -> eval
 * with every engine. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qat/io.h"
#include "test_util.h"

static const char *bin, *data;
static char dir[256];

static void slurp(const char *path, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

/* Runs the program with args; returns its exit status; stderr goes to
 * err, stdout to out (either may be NULL). */
static int run2(const char *args, char *err, size_t elen, char *out, size_t olen) {
    char cmd[2048], errf[300], outf[300];
    snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
    snprintf(outf, sizeof outf, "%s/stdout.txt", dir);
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 '%s' %s >'%s' 2>'%s'", bin, args, outf, errf);
    int st = system(cmd);
    if (err) slurp(errf, err, elen);
    if (out) slurp(outf, out, olen);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(const char *args, char *err, size_t len) { return run2(args, err, len, NULL, 0); }

static void test_bad_input(void) {
    char err[4096], args[1024];
    CU_ASSERT_EQUAL(run("--help", NULL, 0), 0);
    CU_ASSERT_EQUAL(run("train --help", NULL, 0), 0);
    CU_ASSERT_EQUAL(run("", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("frobnicate", err, sizeof err), 2);
    char out[512];
    CU_ASSERT_EQUAL(run2("info", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "OpenBLAS core: "));
    CU_ASSERT_EQUAL(run("info --help", NULL, 0), 0);
    /* one line: nothing, or a core type OpenBLAS 0.3.21 has */
    CU_ASSERT_EQUAL(run2("info --better-coretype", NULL, 0, out, sizeof out), 0);
    CU_ASSERT(strcmp(out, "\n") == 0 || strcmp(out, "SkylakeX\n") == 0 || strcmp(out, "Haswell\n") == 0);
    CU_ASSERT_EQUAL(run("info --frobnicate", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("train --epochs zero", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--epochs wants a whole number"));
    CU_ASSERT_EQUAL(run("train --model resnet", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("train --save-every 5", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("train --data /nonexistent", err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fetch-mnist"));
    snprintf(args, sizeof args, "train --data '%s' --resume /nonexistent.h5 --limit-train 64", data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.h5: cannot open"));
}

static qat_status load(qat_ctx *ctx, const char *path, qat_model **out) {
    qat_model *m = qat_model_new(ctx);
    qat_model_lenet(m, false);
    qat_model_build(m, 3);
    qat_prepare(m, NULL);
    *out = m;
    return qat_checkpoint_load(m, NULL, NULL, NULL, path);
}

static void test_stop_and_resume_is_bit_identical(void) {
    char args[2048], a[300], b[300], err[4096];
    snprintf(a, sizeof a, "%s/straight.h5", dir);
    snprintf(b, sizeof b, "%s/split.h5", dir);
    const char *common = "--model lenet --limit-train 960 --limit-test 200 --qat --float-epochs 1 --epochs 1 --seed 3";
    snprintf(args, sizeof args, "train --data '%s' %s --out '%s'", data, common, a);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --stop-after 22 --out '%s'", data, common, b);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --out '%s'", data, common, b, b);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "resumed from"));
    qat_ctx *ctx = qat_ctx_new();
    qat_model *ma, *mb;
    CU_ASSERT_EQUAL_FATAL(load(ctx, a, &ma), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(load(ctx, b, &mb), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(ma->params, mb->params, (size_t)ma->n_params * sizeof(float)), 0);
    CU_ASSERT_EQUAL(ma->layers[ma->n_layers - 1].aq->obs.updates, mb->layers[mb->n_layers - 1].aq->obs.updates);
    qat_ctx_free(ctx);
    /* a finished run cannot be resumed past its end */
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s'", data, common, a);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing left to train"));
}

static void test_export_and_eval(void) {
    char args[2048], ckpt[300], model[300], err[4096], out[4096];
    snprintf(ckpt, sizeof ckpt, "%s/mlp.ckpt.h5", dir);
    snprintf(model, sizeof model, "%s/mlp.qat.h5", dir);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 1280 --limit-test 200 --qat --out '%s'",
             data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    CU_ASSERT_EQUAL(run("export --help", NULL, 0), 0);
    CU_ASSERT_EQUAL(run("eval --help", NULL, 0), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --json", ckpt, model);
    CU_ASSERT_EQUAL_FATAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"wbits\": 8"));
    const char *engines[] = {"int", "hybrid", "fake"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "eval --model '%s' --data '%s' --engine %s --compare fake --limit-test 500 --json",
                 model, data, engines[i]);
        CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
        char want[64];
        snprintf(want, sizeof want, "\"engine\": \"%s\"", engines[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"test_accuracy\": 0."));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"infer_samples_per_s\": "));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"agreement\": "));
        if (i == 2) CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"agreement\": 1.000000")); /* fake vs fake */
    }
    /* bad input */
    CU_ASSERT_EQUAL(run("export --checkpoint x.h5", err, sizeof err), 2); /* no --out */
    CU_ASSERT_EQUAL(run("eval", err, sizeof err), 2);
    snprintf(args, sizeof args, "eval --model '%s' --engine gpu", model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    snprintf(args, sizeof args, "eval --model '%s' --batch 0", model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    snprintf(args, sizeof args, "eval --model '%s' --data '%s'", ckpt, data); /* a training checkpoint */
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a qat quantized model"));
    snprintf(args, sizeof args, "export --checkpoint /nonexistent.h5 --out '%s'", model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.h5: cannot open"));
    snprintf(args, sizeof args, "export --checkpoint '%s' --out /nonexistent-dir/m.qat.h5", ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent-dir/m.qat.h5"));
    /* a float checkpoint has no integer form */
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 128 --limit-test 100 --out '%s'", data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", ckpt, model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "float checkpoint"));
    /* the model file that was there is untouched by the failed export */
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
}

/* export --out naming the checkpoint itself (same path, another spelling,
 * a hard or symbolic link) is refused before anything is written. */
static void test_export_refuses_its_checkpoint(void) {
    char args[2048], ckpt[300], other[300], hard[300], sym[300], err[4096];
    snprintf(ckpt, sizeof ckpt, "%s/self.ckpt.h5", dir);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 128 --limit-test 100 --qat --out '%s'",
             data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    FILE *f = fopen(ckpt, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char before[1 << 23], after[1 << 23]; /* the MLP's checkpoint: 2.9 MB */
    size_t n = fread(before, 1, sizeof before, f);
    fclose(f);
    CU_ASSERT_FATAL(n > 0 && n < sizeof before);
    snprintf(other, sizeof other, "%s/./self.ckpt.h5", dir);
    snprintf(hard, sizeof hard, "%s/hard-link.h5", dir);
    snprintf(sym, sizeof sym, "%s/sym-link.h5", dir);
    CU_ASSERT_EQUAL_FATAL(link(ckpt, hard), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(ckpt, sym), 0);
    const char *outs[] = {ckpt, other, hard, sym};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", ckpt, outs[i]);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "is the checkpoint itself"));
    }
    f = fopen(ckpt, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT(fread(after, 1, sizeof after, f) == n && memcmp(before, after, n) == 0); /* untouched */
    fclose(f);
    remove(hard);
    remove(sym);
}

int main(void) {
    bin = getenv("QAT_MNIST_BIN");
    data = getenv("QAT_MNIST_DATA");
    if (!bin || !data) {
        fprintf(stderr, "test_cli: set QAT_MNIST_BIN and QAT_MNIST_DATA (ctest does)\n");
        return 2;
    }
    if (!qat_test_tmpdir(dir, sizeof dir, "cli")) return 2;
    const qat_test_case cases[] = {
        {"bad input: usage errors exit 2, data errors exit 1, with messages", test_bad_input},
        {"--stop-after then --resume ends bit-identical to a straight run", test_stop_and_resume_is_bit_identical},
        {"train --qat -> export -> eval with every engine; bad input", test_export_and_eval},
        {"export refuses to write over its own checkpoint", test_export_refuses_its_checkpoint},
        {NULL, NULL},
    };
    int rc = qat_test_main("cli", cases);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
