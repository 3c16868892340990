/* The qat program end to end: exit codes and messages for bad input,
 * a run stopped with --stop-after and resumed from its checkpoint ends
 * bit-identical to a run that never stopped, and train -> export -> eval
 * with every engine. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <hdf5_hl.h>

#include "qat/data.h"
#include "qat/io.h"
#include "qat/onnx.h"
#include "qat/tflite.h"
#include "internals.h"
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

/* The last line of text (without its newline), into line. */
static void last_line(const char *text, char *line, size_t len) {
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] == '\n') n--;
    size_t start = n;
    while (start > 0 && text[start - 1] != '\n') start--;
    snprintf(line, len, "%.*s", (int)(n - start), text + start);
}

/* The number after "key": in a one-line JSON object; -1 if absent, -2 if null. */
static double json_number(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    p += strlen(pat);
    return strncmp(p, "null", 4) ? strtod(p, NULL) : -2;
}

/* With --json, a failure's last line of stdout is {"error": ..., "status": want}. */
static void expect_json_error(const char *out, int want, const char *words) {
    char line[2048], status[32];
    last_line(out, line, sizeof line);
    snprintf(status, sizeof status, ", \"status\": %d}", want);
    CU_ASSERT(strncmp(line, "{\"error\": \"", 11) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, words));
    size_t n = strlen(line), m = strlen(status);
    CU_ASSERT(n > m && strcmp(line + n - m, status) == 0);
    if (strncmp(line, "{\"error\": \"", 11) || !strstr(line, words)) printf("\n  last line: %s\n", line);
}

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
    /* QAT_MAX_ISA: a level caps what runs, anything else is refused before any work */
    setenv("QAT_MAX_ISA", "portable", 1);
    CU_ASSERT_EQUAL(run2("info", NULL, 0, out, sizeof out), 0);
    CU_ASSERT(strstr(out, "active level: portable\n") && strstr(out, "integer engine: portable C\n"));
    setenv("QAT_MAX_ISA", "sse", 1);
    CU_ASSERT_EQUAL(run("info", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "QAT_MAX_ISA=\"sse\" names no instruction-set level"));
    CU_ASSERT_EQUAL(run("train --epochs 1", err, sizeof err), 2);
    unsetenv("QAT_MAX_ISA");
    CU_ASSERT_EQUAL(run("train --epochs zero", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--epochs wants a whole number"));
    CU_ASSERT_EQUAL(run("train --model resnet", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("train --save-every 5", err, sizeof err), 2);
    /* options that used to be taken silently (issue 21): each refused in one line with the reason */
    CU_ASSERT_EQUAL(run("train --model mlp --model-file models/lenet.qnet", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the model is already \"mlp\""));
    CU_ASSERT_EQUAL(run("train --lr 0", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--lr wants a number from 1e-07 to 10"));
    CU_ASSERT_EQUAL(run("train --lr 1e-50", err, sizeof err), 2);
    CU_ASSERT_EQUAL(run("train --wbits 4", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "need --qat"));
    CU_ASSERT_EQUAL(run("train --granularity block:16 --abits 4", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "need --qat"));
    /* one line and a hint, not the whole usage */
    CU_ASSERT_EQUAL(run("train --frobnicate", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown option \"--frobnicate\" (qat train --help lists the options)"));
    CU_ASSERT_PTR_NULL(strstr(err, "usage:"));
    CU_ASSERT_EQUAL(run("export --frobnicate", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "qat export: unknown option \"--frobnicate\" (qat export --help lists the options)"));
    CU_ASSERT_PTR_NULL(strstr(err, "usage:"));
    /* fit passes train's options on: an unknown one is fit's error, before its own checks */
    CU_ASSERT_EQUAL(run("fit --frobnicate", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "qat fit: unknown option \"--frobnicate\" (qat fit --help lists the options)"));
    /* ... and a data set it cannot read is refused before its folder is made or anything trains */
    snprintf(args, sizeof args, "fit --model lenet --data /nonexistent --flash 36000 --no-link --out '%s/fit-none'", dir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent: cannot read the data set"));
    CU_ASSERT_PTR_NULL(strstr(err, "training"));
    snprintf(args, sizeof args, "%s/fit-none", dir);
    CU_ASSERT_NOT_EQUAL(access(args, F_OK), 0);
    CU_ASSERT_EQUAL(run("train --data /nonexistent", err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "docs/data-format.md"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent: cannot read the data set: No such file or directory"));
    snprintf(args, sizeof args, "train --data '%s' --resume /nonexistent.h5 --limit-train 64", data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.h5: cannot open"));
    CU_ASSERT_PTR_NULL(strstr(err, "qat: data")); /* said before the data set is opened: one line */
    snprintf(args, sizeof args, "eval --model m.qat.h5 --data '%s' --predictions /nonexistent-dir/p.txt", data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1); /* an output path: checked before the model is read */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--predictions /nonexistent-dir/p.txt: cannot open"));
    /* a folder that is a file, or one where no file can be made, is refused before the data are read */
    char plain[400];
    snprintf(plain, sizeof plain, "%s/plain.txt", dir);
    FILE *pf = fopen(plain, "w");
    CU_ASSERT_FATAL(pf && fputs("not a folder\n", pf) >= 0 && fclose(pf) == 0);
    snprintf(args, sizeof args, "train --data '%s' --limit-train 64 --out '%s/x.h5'", data, plain);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "plain.txt is not a folder"));
    CU_ASSERT_PTR_NULL(strstr(err, "qat: data"));
    snprintf(args, sizeof args, "eval --model m.qat.h5 --data '%s' --outputs '%s/o.npy'", data, plain);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "plain.txt is not a folder"));
    snprintf(args, sizeof args, "train --data '%s' --limit-train 64 --best-out /proc/x.h5", data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--best-out /proc/x.h5: cannot create a file in the folder /proc"));
    /* a normalization for channels the model does not have: a usage error, before the data are read */
    snprintf(args, sizeof args, "train --data '%s' --model lenet --normalize 0.5:0.5,0.2:0.2", data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--normalize 0.5:0.5,0.2:0.2: channels 2, the input [1, 28, 28] has 1 (want 1)"));
    CU_ASSERT_PTR_NULL(strstr(err, "qat: data"));
}

/* Every enumerated option's error names the values it allows. */
static void test_enumerated_options_name_their_values(void) {
    static const char *const cases[][2] = {
        {"train --model resnet", "unknown value \"resnet\" for --model (one of mlp, lenet or lenet-bn)"},
        {"train --optimizer rmsprop", "for --optimizer (one of sgd, adam or adamw)"},
        {"train --schedule linear", "for --schedule (one of cosine, step or constant)"},
        {"train --granularity row", "for --granularity (one of tensor, channel, block:N or {axis:block, ...})"},
        {"train --granularity '{1:2,1:3}'", "--granularity \"{1:2,1:3}\" is not the seed's {axis:block, ...}: an axis is given twice"},
        {"train --granularity '{4:1}'", "is not the seed's {axis:block, ...}: an axis must be 0..3"},
        {"train --granularity '{0:1'", "entries are separated by commas and closed by }"},
        {"train --granularity block:4 --ragged-blocks", "--ragged-blocks goes with --granularity {axis:block, ...}"},
        {"train --granularity block:0", "--granularity block:N wants a whole number N from 1 to 100000, got \"0\""},
        {"train --block-scales u3", "--block-scales \"u3\": float, or u4 to u8"},
        {"train --block-scales u4", "--block-scales u4 needs sub-channel weights: --granularity block:N"},
        {"train --granularity block:16 --block-scales u8 --wbits 12", "--block-scales u8 needs --wbits 8 or less"},
        {"train --granularity block:16 --block-scales u4 --lsq", "--lsq learns them: choose one"},
        {"train --observer kl", "for --observer (one of ema, window-mean, window-max, minmax or ema-bc)"},
        {"eval --model m.qat.h5 --engine gpu", "unknown value \"gpu\" for --engine (one of int, hybrid or fake)"},
        {"eval --model m.qat.h5 --compare tpu", "unknown value \"tpu\" for --compare (one of int, hybrid or fake)"},
    };
    char err[8192];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CU_ASSERT_EQUAL(run(cases[i][0], err, sizeof err), 2);
        if (!strstr(err, cases[i][1])) printf("\n  %s: %.200s\n", cases[i][0], err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i][1]));
    }
}

/* With --json, every failure after the options are read ends stdout with
 * {"error": ..., "status": ...}: usage errors (2) and run-time ones (1). */
static void test_json_failures(void) {
    char args[1024], err[8192], out[8192];
    CU_ASSERT_EQUAL(run2("train --model resnet --json", err, sizeof err, out, sizeof out), 2);
    expect_json_error(out, 2, "unknown value \\\"resnet\\\" for --model");
    CU_ASSERT_EQUAL(run2("train --json --save-every 5", err, sizeof err, out, sizeof out), 2);
    expect_json_error(out, 2, "--save-every needs --out");
    CU_ASSERT_EQUAL(run2("train --data /nonexistent --json", err, sizeof err, out, sizeof out), 1);
    expect_json_error(out, 1, "/nonexistent: cannot read the data set");
    snprintf(args, sizeof args, "train --data '%s' --limit-train 64 --resume /nonexistent.h5 --json", data);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 1);
    expect_json_error(out, 1, "/nonexistent.h5: cannot open");
    CU_ASSERT_EQUAL(run2("eval --json", err, sizeof err, out, sizeof out), 2);
    expect_json_error(out, 2, "--model is required");
    CU_ASSERT_EQUAL(run2("eval --model m.qat.h5 --engine gpu --json", err, sizeof err, out, sizeof out), 2);
    expect_json_error(out, 2, "for --engine");
    snprintf(args, sizeof args, "eval --model /nonexistent.qat.h5 --data '%s' --json", data);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 1);
    expect_json_error(out, 1, "/nonexistent.qat.h5");
}

/* --stop-after part way through an epoch reports the model as it stands:
 * real accuracies, the float-weights one too with --qat, and no
 * fake-quantized one before fake quantization starts. */
static void test_stop_after_reports_real_figures(void) {
    char args[1024], err[8192], out[8192], line[4096];
    const char *common = "--model mlp --limit-train 640 --limit-test 200 --stop-after 6 --json";
    snprintf(args, sizeof args, "train --data '%s' %s --qat", data, common);
    CU_ASSERT_EQUAL_FATAL(run2(args, err, sizeof err, out, sizeof out), 0);
    last_line(out, line, sizeof line);
    CU_ASSERT(json_number(line, "test_accuracy") > 0.3);
    CU_ASSERT(json_number(line, "test_accuracy_fake_quant") > 0.3);
    CU_ASSERT(json_number(line, "test_accuracy_float_weights") > 0.3);
    CU_ASSERT(json_number(line, "train_loss") > 0);
    CU_ASSERT_PTR_NULL(strstr(err, "test accuracy 0.00 %"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "epoch 1 (stopped part way): train loss "));
    /* stopped in the float epochs: not quantized yet */
    snprintf(args, sizeof args, "train --data '%s' %s --qat --float-epochs 1", data, common);
    CU_ASSERT_EQUAL_FATAL(run2(args, err, sizeof err, out, sizeof out), 0);
    last_line(out, line, sizeof line);
    CU_ASSERT(json_number(line, "test_accuracy") > 0.3);
    CU_ASSERT_EQUAL(json_number(line, "test_accuracy_fake_quant"), -2); /* null */
    CU_ASSERT(json_number(line, "test_accuracy_float_weights") > 0.3);
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
    char straight_loss[64] = "", split_loss[64] = ""; /* the last epoch's line: its mean loss over all its steps */
    const char *at = strstr(err, "epoch 2: train loss ");
    if (at) snprintf(straight_loss, sizeof straight_loss, "%.27s", at);
    snprintf(args, sizeof args, "train --data '%s' %s --stop-after 22 --out '%s'", data, common, b);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --out '%s'", data, common, b, b);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "resumed from"));
    if ((at = strstr(err, "epoch 2: train loss "))) snprintf(split_loss, sizeof split_loss, "%.27s", at);
    CU_ASSERT(straight_loss[0] != 0);
    CU_ASSERT_STRING_EQUAL(split_loss, straight_loss);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *ma, *mb;
    CU_ASSERT_EQUAL_FATAL(load(ctx, a, &ma), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(load(ctx, b, &mb), QAT_OK);
    CU_ASSERT_EQUAL(memcmp(ma->params, mb->params, (size_t)ma->n_params * sizeof(float)), 0);
    CU_ASSERT_EQUAL(ma->layers[ma->n_layers - 1].aq->obs.updates, mb->layers[mb->n_layers - 1].aq->obs.updates);
    qat_ctx_free(ctx);
    /* a finished run cannot be resumed past its end: the options ask for nothing, exit 2 */
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s'", data, common, a);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing left to train"));
}

/* A small float checkpoint written by the library with config as its
 * configuration text (NULL: none). */
static void library_checkpoint(const char *path, const char *config) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    qat_model_mlp(m);
    qat_model_build(m, 1);
    qat_train_state ts = {.config = config};
    CU_ASSERT_EQUAL(qat_checkpoint_save(m, NULL, NULL, config ? &ts : NULL, path), QAT_OK);
    qat_ctx_free(ctx);
}

/* A resume may change only --epochs, --out, --save-every, --stop-after,
 * --threads, --json, --data and --limit-test: anything else is refused
 * (exit 2), naming the option and both values; a checkpoint whose options
 * cannot be read is refused too (exit 1). */
static void test_resume_refuses_other_options(void) {
    char args[2048], ckpt[300], other[300], err[8192], out[8192];
    snprintf(ckpt, sizeof ckpt, "%s/float.ckpt.h5", dir);
    snprintf(other, sizeof other, "%s/other.ckpt.h5", dir);
    const char *common = "--model mlp --limit-train 640 --limit-test 100 --epochs 2";
    snprintf(args, sizeof args, "train --data '%s' %s --stop-after 3 --out '%s'", data, common, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    static const char *const refused[][2] = {
        {"--qat", "made without --qat, this run asks for --qat"},
        {"--batch 32", "made with --batch 64, this run asks for --batch 32"},
        {"--lr 0.002", "made with --lr 0.001, this run asks for --lr 0.002"},
        {"--optimizer sgd", "made with --optimizer adam, this run asks for --optimizer sgd"},
        {"--seed 2", "made with --seed 1, this run asks for --seed 2"},
        {"--clip 1", "made without --clip, this run asks for --clip 1"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' %s", data, common, ckpt, refused[i][0]);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        if (!strstr(err, refused[i][1])) printf("\n  %s: %.300s\n", refused[i][0], err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, refused[i][1]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "a resume may change only --epochs, --out"));
    }
    /* quantization options without --qat are refused before the checkpoint is read */
    static const char *const quant[] = {"--wbits 4", "--granularity tensor", "--freeze-bn 5", "--observer minmax"};
    for (size_t i = 0; i < sizeof quant / sizeof *quant; i++) {
        snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' %s", data, common, ckpt, quant[i]);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "need --qat"));
    }
    /* the record is one JSON object (export copies it into the quantized file) holding every
     * option a resume keeps */
    char cfg[4096], path[300], cmd[700];
    qat_ctx *ctx = qat_ctx_new();
    CU_ASSERT_EQUAL(qat_checkpoint_config(ctx, ckpt, cfg, sizeof cfg), QAT_OK);
    qat_ctx_free(ctx);
    static const char *const keys[] = {"model", "optimizer", "lr", "momentum", "nesterov", "weight_decay", "schedule",
                                       "warmup", "clip", "seed", "batch", "limit_train", "qat", "wbits", "abits",
                                       "granularity", "observer", "window", "io_bits", "lsq", "float_epochs",
                                       "qat_warmup", "freeze_observers", "freeze_bn"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char k[40];
        snprintf(k, sizeof k, "\"%s\": ", keys[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(cfg, k));
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(cfg, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' '%s'", path);
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* --limit-train is the checkpoint's: a different one is refused before the sample count differs */
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 320 --epochs 2 --resume '%s' --json", data,
             ckpt);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 2);
    expect_json_error(out, 2, "made with --limit-train 640, this run asks for --limit-train 320");
    /* another data set of fewer samples than the checkpoint's order: exit 2, saying so */
    char small[300];
    snprintf(small, sizeof small, "%s/small-set", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(small, 0755), 0);
    qat_ctx *sctx = qat_ctx_new();
    static uint8_t px[200 * 784];
    static int32_t py[200];
    for (int i = 0; i < 200; i++) py[i] = i % 10;
    const char *parts[] = {"train", "test"};
    for (int i = 0; i < 2; i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s_x.npy", small, parts[i]);
        CU_ASSERT_EQUAL(qat_npy_save(sctx, p, QAT_DT_U8, 4, (int64_t[]){200, 1, 28, 28}, px), QAT_OK);
        snprintf(p, sizeof p, "%s/%s_y.npy", small, parts[i]);
        CU_ASSERT_EQUAL(qat_npy_save(sctx, p, QAT_DT_I32, 1, (int64_t[]){200}, py), QAT_OK);
    }
    qat_ctx_free(sctx);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --no-units-check", small, common, ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "was made with 640 training samples, this run has 200 (another data set?)"));
    /* what a resume may change */
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --epochs 3 --limit-test 50 --stop-after 12 "
             "--save-every 4 --out '%s' --json", data, common, ckpt, other);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "resumed from"));
    /* the options of a checkpoint this program did not write cannot be checked */
    library_checkpoint(other, "{\"model\": \"mlp\", \"optimizer\": \"adam\", \"lr\": 0.001, \"batch\": 64}");
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s'", data, common, other);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not in the form this qat writes"));
    library_checkpoint(other, NULL);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "records no training options"));
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
    /* a val fraction is carved from train: only with --split val */
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --val 0.1", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--val 0.1 carves a val split from train: it goes with --split val"));
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --split val", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2); /* bad input, as train-your-data.md says */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no val split (a training run's --val F"));
    /* top-K of at least the classes says nothing: refused when asked for (the default 5 goes quietly) */
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100 --topk 10", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--topk 10: the model has 10 classes"));
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100 --topk 9", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "top-9 accuracy"));
    /* a missing data set: the MNIST hint only where the path names MNIST */
    snprintf(args, sizeof args, "eval --model '%s' --data /nonexistent/own.h5", model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/own.h5: cannot read the data set"));
    CU_ASSERT_PTR_NULL(strstr(err, "fetch-mnist"));
    snprintf(args, sizeof args, "eval --model '%s' --data /nonexistent/mnist", model);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fetch-mnist"));
    /* a batch larger than the training set trains, and says so */
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 300 --limit-test 100 --epochs 1 --batch 512",
             data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the batch (512) is larger than the training set"));
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
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "float checkpoint"));
    /* the model file that was there is untouched by the failed export */
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100", model, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
}

/* scripts/fetch-mnist.sh on a machine with neither curl nor wget says so
 * (and what to do) instead of failing on every mirror. PATH holds only
 * the tools the script needs before it downloads. */
static void test_fetch_without_downloader(void) {
    const char *src = getenv("QAT_SOURCE_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char bindir[300], cmd[2048], err[4096];
    snprintf(bindir, sizeof bindir, "%s/bin", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && for t in dirname mkdir md5sum cut rm mv cp; do "
             "ln -sf \"$(command -v $t)\" '%s/'$t; done", bindir, bindir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "env -u QAT_MNIST_DIR PATH='%s' /bin/bash '%s/scripts/fetch-mnist.sh' '%s/mnist' "
             "2>'%s/stderr.txt'", bindir, src, dir, dir);
    int st = system(cmd);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(cmd, sizeof cmd, "%s/stderr.txt", dir);
    slurp(cmd, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fetch-mnist: neither curl nor wget is installed"));
    CU_ASSERT_PTR_NULL(strstr(err, "downloading"));
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

/* ---- export to several targets: all or nothing ----------------------------------- */

/* Writes "old <name>" at each target, so that a test can tell an untouched
 * file from a replaced one. */
static void old_files(const char *const *paths, int n) {
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f, "old %s\n", paths[i]);
        fclose(f);
    }
}

/* How many of the targets still hold their old file. */
static int count_old(const char *const *paths, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        char buf[700], want[700];
        slurp(paths[i], buf, sizeof buf);
        snprintf(want, sizeof want, "old %s\n", paths[i]);
        k += !strcmp(buf, want);
    }
    return k;
}

static int count_temporaries(const char *d) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c qat-tmp > '%s/count.txt'", d, dir);
    if (system(cmd) < 0) return -1;
    char n[32];
    snprintf(cmd, sizeof cmd, "%s/count.txt", dir);
    slurp(cmd, n, sizeof n);
    return atoi(n);
}

/* export --out F --onnx G --c DIR: every output is staged first, all are
 * renamed only when all are written, so a failure at any point leaves
 * every previous file as it was (docs/saving.md). Each failure order:
 * before anything is read (--c names no directory), ONNX refusing the
 * model (the first output staged), --out failing (the second: its target
 * is a directory), --c failing (the last: DIR/model.c is a directory).
 * Then the same export succeeds and replaces all five files. */
static void test_export_all_or_nothing(void) {
    char args[4096], ckpt[300], block[300], cdir[300], err[4096], out[4096];
    char fout[300], fonnx[300], fh[340], fc[340], fio[340], sub[300];
    snprintf(ckpt, sizeof ckpt, "%s/multi.ckpt.h5", dir);
    snprintf(block, sizeof block, "%s/multi-block.ckpt.h5", dir);
    snprintf(cdir, sizeof cdir, "%s/multi-c", dir);
    snprintf(fout, sizeof fout, "%s/multi.qat.h5", dir);
    snprintf(fonnx, sizeof fonnx, "%s/multi.onnx", dir);
    snprintf(fh, sizeof fh, "%s/model.h", cdir);
    snprintf(fc, sizeof fc, "%s/model.c", cdir);
    snprintf(fio, sizeof fio, "%s/model_io.c", cdir);
    snprintf(sub, sizeof sub, "%s/a-directory", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(cdir, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    const char *targets[5] = {fout, fonnx, fh, fc, fio};
    bool onnx = qat_onnx_available();
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 256 --limit-test 100 --qat --out '%s'", data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 256 --limit-test 100 --qat "
             "--granularity block:16 --out '%s'", data, block);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    /* a convolution with sub-channel weights: the C generator refuses it (a linear op's it generates) */
    char bconv[300], bconvq[300];
    snprintf(bconvq, sizeof bconvq, "%s/block-conv.qnet", dir);
    snprintf(bconv, sizeof bconv, "%s/block-conv.ckpt.h5", dir);
    FILE *bq = fopen(bconvq, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(bq);
    fputs("input shape=1,28,28\nconv2d c1 input out=4 kernel=4 stride=4 granularity=block:8\nflatten f c1\n"
          "linear fc f out=10\n", bq);
    fclose(bq);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --limit-train 256 --limit-test 100 --qat --out '%s'",
             data, bconvq, bconv);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    old_files(targets, 5);
    const char *onnx_opt = onnx ? "--onnx" : "--out"; /* without ONNX, --onnx would fail for another reason */
    /* 1. --c names a folder whose parent does not exist: refused before the checkpoint is read */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' %s '%s' --c '%s/none/c'", ckpt, fout,
             onnx ? "--onnx" : "", onnx ? fonnx : "", dir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/none/c: No such file or directory"));
    CU_ASSERT_EQUAL(count_old(targets, 5), 5);
    /* 1b. a folder that does not exist is made; a failed export leaves none behind */
    char made[340], madeh[380];
    snprintf(made, sizeof made, "%s/made-c", dir);
    snprintf(madeh, sizeof madeh, "%s/model.h", made);
    snprintf(args, sizeof args, "export --checkpoint '%s' --c '%s'", bconv, made);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1); /* a sub-channel convolution: the generator refuses it */
    CU_ASSERT_NOT_EQUAL(access(made, F_OK), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --c '%s'", ckpt, made);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_EQUAL(access(madeh, R_OK), 0);
    /* 2. ONNX refuses sub-channel weights (the qat model takes them) */
    if (onnx) {
        snprintf(args, sizeof args, "export --checkpoint '%s' --onnx '%s' --out '%s' --c '%s'", block, fonnx, fout, cdir);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "sub-channel"));
        CU_ASSERT_EQUAL(count_old(targets, 5), 5);
    }
    /* 2b. the C generator refuses a sub-channel convolution with the quantized model staged before it */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --c '%s'", bconv, fout, cdir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sub-channel"));
    CU_ASSERT_EQUAL(count_old(targets, 5), 5);
    /* 2c. lowering refuses the model (a ReLU6 alone), before anything is staged: the message names the layer
     * (it is on the model's context; --c alone printed an empty message before) */
    char r6[300], r6ckpt[300];
    snprintf(r6, sizeof r6, "%s/relu6.qnet", dir);
    snprintf(r6ckpt, sizeof r6ckpt, "%s/relu6.ckpt.h5", dir);
    FILE *q = fopen(r6, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    fputs("input shape=784\nlinear fc0 input out=32\nrelu r fc0\nrelu6 r6 r\nlinear fc r6 out=10\n", q);
    fclose(q);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --limit-train 128 --limit-test 100 --qat --out '%s'",
             data, r6, r6ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --c '%s'", r6ckpt, cdir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "lower: layer r6: a ReLU6 not fused"));
    CU_ASSERT_EQUAL(count_old(targets, 5), 5);
    /* 3. --out fails after ONNX was staged: its target is a directory */
    snprintf(args, sizeof args, "export --checkpoint '%s' %s '%s' --out '%s' --c '%s'", ckpt, onnx_opt, fonnx, sub, cdir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a-directory: cannot replace: Is a directory"));
    CU_ASSERT_EQUAL(count_old(targets, 5), 5);
    /* 4. --c fails last, after ONNX and the quantized model were staged: model.c is a directory */
    CU_ASSERT_EQUAL_FATAL(unlink(fc), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(fc, 0755), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' %s '%s' --out '%s' --c '%s'", ckpt, onnx ? "--onnx" : "",
             onnx ? fonnx : "", fout, cdir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "model.c: cannot replace: Is a directory"));
    const char *others[4] = {fout, fonnx, fh, fio};
    CU_ASSERT_EQUAL(count_old(others, 4), 4);
    CU_ASSERT_EQUAL(rmdir(fc), 0);
    const char *fcs[1] = {fc};
    old_files(fcs, 1);
    CU_ASSERT_EQUAL(count_temporaries(dir), 0);
    CU_ASSERT_EQUAL(count_temporaries(cdir), 0);
    /* 5. nothing fails: all five replaced, and they load and compile */
    snprintf(args, sizeof args, "export --checkpoint '%s' %s '%s' --out '%s' --c '%s' --json", ckpt, onnx ? "--onnx" : "",
             onnx ? fonnx : "", fout, cdir);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_EQUAL(count_old(targets, 5), onnx ? 0 : 1);
    /* the JSON gives every file's size, null for a target not asked for */
    CU_ASSERT(json_number(out, "bytes") > 0 && json_number(out, "peak_activation_bytes") > 0);
    CU_ASSERT(onnx ? json_number(out, "onnx_bytes") > 0 : json_number(out, "onnx_bytes") == -2);
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100", fout, data);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "cd '%s' && cc -std=c99 -fsyntax-only model.c model_io.c", cdir);
    CU_ASSERT_EQUAL(system(args), 0);
    CU_ASSERT_EQUAL(count_temporaries(dir), 0);
    rmdir(sub);
}

/* export --tflite: written with the other targets, from a checkpoint or
 * a quantized file (the same bytes: one program); refused before any work
 * when it names the checkpoint or another output; a model TFLite cannot
 * express (sub-channel weights) leaves every file as it was. */
static void test_export_tflite(void) {
    if (!qat_tflite_available()) {
        QAT_TEST_SKIP("this build has no TFLite export (flatc and libflatbuffers-dev not found)");
        return;
    }
    char args[4096], err[4096], out[4096], ckpt[300], block[300], fout[300], ft[300], ft2[300];
    snprintf(ckpt, sizeof ckpt, "%s/tfl.ckpt.h5", dir);
    snprintf(block, sizeof block, "%s/tfl-block.ckpt.h5", dir);
    snprintf(fout, sizeof fout, "%s/tfl.qat.h5", dir);
    snprintf(ft, sizeof ft, "%s/tfl.tflite", dir);
    snprintf(ft2, sizeof ft2, "%s/tfl-from-file.tflite", dir);
    snprintf(args, sizeof args, "train --data '%s' --model lenet --limit-train 256 --limit-test 100 --qat --target tflite "
             "--out '%s'", data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 256 --limit-test 100 --qat "
             "--granularity block:16 --out '%s'", data, block);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    /* usage: its own checkpoint, two outputs on one file */
    snprintf(args, sizeof args, "export --checkpoint '%s' --tflite '%s'", ckpt, ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--tflite"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is the checkpoint itself"));
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --tflite '%s'", ckpt, fout, fout);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--out and --tflite name the same file"));
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s/new.qat.h5' --onnx '%s/./new.qat.h5'", ckpt, dir, dir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2); /* two spellings of one file not there yet */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--out and --onnx name the same file"));
    { /* the C files over the checkpoint (a copy named model.c in the folder), or over another output */
        char cin[400], cp[1200];
        snprintf(cin, sizeof cin, "%s/cin", dir);
        snprintf(cp, sizeof cp, "mkdir -p '%s' && cp '%s' '%s/model.c'", cin, ckpt, cin);
        CU_ASSERT_EQUAL_FATAL(system(cp), 0);
        snprintf(args, sizeof args, "export --checkpoint '%s/model.c' --c '%s'", cin, cin);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "/model.c, the checkpoint itself"));
        snprintf(args, sizeof args, "export --checkpoint '%s' --onnx '%s/model.h' --c '%s'", ckpt, cin, cin);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "/model.h, which --onnx writes too"));
        snprintf(cp, sizeof cp, "cmp -s '%s' '%s/model.c'", ckpt, cin);
        CU_ASSERT_EQUAL(system(cp), 0); /* the copy is whole */
    }
    /* refused by the exporter: nothing written, nothing replaced */
    const char *targets[2] = {fout, ft};
    old_files(targets, 2);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --tflite '%s'", block, fout, ft);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "tflite: layer"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sub-channel"));
    CU_ASSERT_EQUAL(count_old(targets, 2), 2);
    CU_ASSERT_EQUAL(count_temporaries(dir), 0);
    /* written, with its size in the JSON; from the quantized file, the same bytes */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --tflite '%s' --json", ckpt, fout, ft);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_EQUAL(count_old(targets, 2), 0);
    CU_ASSERT(json_number(out, "tflite_bytes") > 1000);
    snprintf(args, sizeof args, "export --quantized '%s' --tflite '%s' --json", fout, ft2);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT(json_number(out, "tflite_bytes") > 1000);
    snprintf(args, sizeof args, "cmp -s '%s' '%s'", ft, ft2);
    CU_ASSERT_EQUAL(system(args), 0);
    char head[9] = {0};
    FILE *f = fopen(ft, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fread(head, 1, 8, f), 8);
    fclose(f);
    CU_ASSERT(memcmp(head + 4, "TFL3", 4) == 0);
    /* the quantized file itself, under another name: refused before anything is read */
    snprintf(args, sizeof args, "export --quantized '%s' --tflite '%s/./tfl.qat.h5'", fout, dir);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is the quantized model itself"));
    /* --quantized takes --tflite and/or --c, nothing else */
    snprintf(args, sizeof args, "export --quantized '%s'", fout);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--c DIR and/or --tflite FILE"));
    /* --rounding: a bad value is a usage error; single is written as version 5, eval says so,
     * and TFLite refuses it with nothing written */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --rounding nearest", ckpt, fout);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--rounding \"nearest\": double or single"));
    char fsingle[300], ft3[300];
    snprintf(fsingle, sizeof fsingle, "%s/tfl-single.qat.h5", dir);
    snprintf(ft3, sizeof ft3, "%s/tfl-single.tflite", dir);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --rounding single", ckpt, fsingle);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 50 --json", fsingle, data);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"requant_rounding\": \"single\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "single rounding"));
    snprintf(args, sizeof args, "export --quantized '%s' --tflite '%s'", fsingle, ft3);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "rounds its requantization once"));
    /* what the options say alone is refused before the checkpoint is read */
    const char *early[][2] = {{"--tflite x.tflite --rounding single", "--rounding single and --tflite"},
                              {"--c cx --name 9bad", "--name \"9bad\" is not a C identifier"},
                              {"--c cx --name stdint", "stdint.h would hide the standard header <stdint.h>"},
                              {"--out x.qat.h5 --name foo", "--name is for --c DIR"}};
    for (size_t i = 0; i < sizeof early / sizeof *early; i++) {
        snprintf(args, sizeof args, "export --checkpoint /nonexistent.ckpt.h5 %s", early[i][0]);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, early[i][1]));
    }
    struct stat sb;
    CU_ASSERT_NOT_EQUAL(stat(ft3, &sb), 0);
    /* the file's program rounded the other way for TFLite: written */
    snprintf(args, sizeof args, "export --quantized '%s' --rounding double --tflite '%s'", fsingle, ft3);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_EQUAL(stat(ft3, &sb), 0);
}

/* ---- model files that demand too much ------------------------------------------- */

/* summary and train on hostile model files, under a 20 s timeout (what
 * happened before: minutes of work, then out of memory; a FIFO blocked
 * forever): an 85-byte file declaring
 * 443 M parameters, 20 000 adds reaching 1.2 GiB of outputs a sample, a
 * FIFO, a directory. Each is refused at once (exit status 1) with the
 * size and the limit; the options raise the limits. */
static void test_model_file_bombs(void) {
    char big[300], adds[300], fifo[300], args[2048], err[4096];
    snprintf(big, sizeof big, "%s/big.qnet", dir);
    snprintf(adds, sizeof adds, "%s/adds.qnet", dir);
    snprintf(fifo, sizeof fifo, "%s/model.fifo", dir);
    FILE *f = fopen(big, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("input shape=1,28,28\nconv2d c input out=1002262 kernel=21\nflatten f c\nlinear l f out=9", f);
    fclose(f);
    f = fopen(adds, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("input shape=1,28,28\nconv2d c input out=16 kernel=3 pad=1\nadd a0 c,c\n", f);
    for (int i = 1; i < 20000; i++) fprintf(f, "add a%d a%d,a%d\n", i, i - 1, i - 1);
    fputs("flatten f a19999\nlinear fc f out=10\n", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    const char *guard = "timeout 20"; /* not ulimit -v: AddressSanitizer's shadow memory needs the address space */
    struct {
        const char *cmd, *file, *extra, *want;
    } cases[] = {
        {"summary", big, "", "big.qnet:2: model: conv2d c brings the model to 442999804 parameters (and buffers), more "
                             "than the limit max_params = 67108864"},
        {"summary", big, "--max-params 1000000000", "big.qnet:2: model: its layers' outputs take 256582208 bytes a "
                                                    "sample (float32), more than the limit max_activation_bytes = 67108864"},
        {"summary", adds, "", "adds.qnet:1339: model: its layers' outputs take 67138624 bytes a sample"},
        {"summary", adds, "--max-activation-bytes 100000000", "adds.qnet:1994: model: its layers' outputs take 100003904 bytes"},
        {"train", adds, "--max-activation-bytes 2000000000", "max_layers = 4096 (raise it"},
        {"summary", fifo, "", "model.fifo: not a regular file (a FIFO)"},
        {"train", fifo, "", "model.fifo: not a regular file (a FIFO)"},
        {"summary", dir, "", ": not a regular file (a directory)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char cmd[4096], errf[300];
        snprintf(errf, sizeof errf, "%s/bomb.err", dir);
        bool train = !strcmp(cases[k].cmd, "train");
        snprintf(args, sizeof args, "%s%s%s", train ? "--epochs 1 --limit-train 64 --data '" : "", train ? data : "",
                 train ? "'" : "");
        snprintf(cmd, sizeof cmd, "%s '%s' %s --model-file '%s' %s %s >/dev/null 2>'%s'", guard, bin, cases[k].cmd,
                 cases[k].file, cases[k].extra, args, errf);
        int st = system(cmd);
        slurp(errf, err, sizeof err);
        /* train and summary refuse a model file past the limits, or not a regular file, as bad input: 2 */
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, cases[k].want) != NULL;
        if (!ok) printf("\n  %s %s %s: exit %d, stderr: %.300s", cases[k].cmd, cases[k].file, cases[k].extra,
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1, err);
        CU_ASSERT(ok);
    }
    unlink(fifo);
}

/* --target: "tflite" trains with TFLite's int8 rules (average pools keep
 * their input's quantization), recorded in the checkpoint's options and
 * configuration, exported as pools that divide; ONNX refuses them by name;
 * an unknown target is refused in one line (exit 2), as is tflite without
 * --qat; a resume keeps it; a checkpoint written before the option
 * existed resumes as --target default. */
static void test_target_tflite(void) {
    char args[2048], qnet[300], ckpt[300], model[300], onnx[300], err[8192], out[8192];
    snprintf(qnet, sizeof qnet, "%s/pools.qnet", dir);
    snprintf(ckpt, sizeof ckpt, "%s/pools.ckpt.h5", dir);
    snprintf(model, sizeof model, "%s/pools.qat.h5", dir);
    snprintf(onnx, sizeof onnx, "%s/pools.onnx", dir);
    CU_ASSERT_EQUAL(run("train --target foo --qat", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown value \"foo\" for --target (one of default or tflite)"));
    CU_ASSERT(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    CU_ASSERT_EQUAL(run("train --target tflite", err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "need --qat"));
    CU_ASSERT_EQUAL(run("train --help", NULL, 0), 0);
    CU_ASSERT_EQUAL(run2("train --help", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--target default|tflite"));
    FILE *f = fopen(qnet, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("input shape=1,28,28\nconv2d c1 input out=4 kernel=3 pad=1\nrelu r1 c1\navgpool2d p1 r1 kernel=2\n"
          "conv2d c2 p1 out=8 kernel=3 pad=1\nrelu r2 c2\nglobal_avgpool gap r2\nlinear fc gap out=10\n", f);
    fclose(f);
    const char *common = "--limit-train 640 --limit-test 100 --qat --epochs 2";
    snprintf(args, sizeof args, "train --data '%s' --model '%s' %s --target tflite --stop-after 4 --out '%s'", data,
             qnet, common, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    char cfg[4096];
    qat_ctx *ctx = qat_ctx_new();
    CU_ASSERT_EQUAL(qat_checkpoint_config(ctx, ckpt, cfg, sizeof cfg), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(cfg, "\"target\": \"tflite\""));
    qat_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, ckpt, &m, NULL, 0), QAT_OK);
    CU_ASSERT(qat_model_qat_config(m, NULL)->pool_keeps_scale);
    /* a resume keeps the target: another is refused, naming both */
    snprintf(args, sizeof args, "train --data '%s' --model '%s' %s --target default --resume '%s'", data, qnet, common,
             ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "made with --target tflite, this run asks for --target default"));
    snprintf(args, sizeof args, "train --data '%s' --model '%s' %s --target tflite --resume '%s' --stop-after 8 --out '%s'",
             data, qnet, common, ckpt, ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "resumed from"));
    /* exported: the two pools divide; ONNX cannot say that, and says why */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", ckpt, model);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    CU_ASSERT_EQUAL_FATAL(qat_qmodel_load(ctx, model, q), QAT_OK);
    int kept = 0;
    for (int i = 0; i < q->n_ops; i++) kept += q->ops[i].keeps_scale;
    CU_ASSERT_EQUAL(kept, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(q->config, "\"target\": \"tflite\""));
    if (qat_onnx_available()) {
        snprintf(args, sizeof args, "export --checkpoint '%s' --onnx '%s'", ckpt, onnx);
        CU_ASSERT_EQUAL(run(args, err, sizeof err), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "layer p1: an average pool that keeps its input's quantization"));
        CU_ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
        CU_ASSERT(access(onnx, F_OK) != 0);
    }
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --limit-test 100 --compare fake --json", model, data);
    CU_ASSERT_EQUAL(run2(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"agreement\": "));
    /* a checkpoint written before --target existed (no "target" in its options) resumes as the default */
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 640 --limit-test 100 --epochs 2 "
             "--stop-after 3 --out '%s'", data, ckpt);
    CU_ASSERT_EQUAL_FATAL(run(args, err, sizeof err), 0);
    CU_ASSERT_EQUAL(qat_checkpoint_config(ctx, ckpt, cfg, sizeof cfg), QAT_OK);
    char *at = strstr(cfg, ", \"target\": \"default\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    memmove(at, at + strlen(", \"target\": \"default\""), strlen(at + strlen(", \"target\": \"default\"")) + 1);
    hid_t h = H5Fopen(ckpt, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT(H5LTset_attribute_string(h, "/", "config", cfg) >= 0);
    H5Fclose(h);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 640 --limit-test 100 --epochs 2 "
             "--resume '%s' --stop-after 6", data, ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "resumed from"));
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 640 --limit-test 100 --epochs 2 --qat "
             "--target tflite --resume '%s'", data, ckpt);
    CU_ASSERT_EQUAL(run(args, err, sizeof err), 2);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    bin = getenv("QAT_BIN");
    data = getenv("QAT_MNIST_DATA");
    bool listing = argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"));
    if (!listing && (!bin || !data)) {
        fprintf(stderr, "test_cli: set QAT_BIN and QAT_MNIST_DATA (ctest does)\n");
        return 2;
    }
    if (!qat_test_tmpdir(dir, sizeof dir, "cli")) return 2;
    const qat_test_case cases[] = {
        {"bad input: usage errors exit 2, data errors exit 1, with messages", test_bad_input},
        {"--stop-after then --resume ends bit-identical to a straight run", test_stop_and_resume_is_bit_identical},
        {"train --qat -> export -> eval with every engine; bad input", test_export_and_eval},
        {"enumerated options: errors name the allowed values", test_enumerated_options_name_their_values},
        {"--json: a failure ends stdout with {\"error\": ..., \"status\": ...}", test_json_failures},
        {"--stop-after part way: the accuracies printed are the model's", test_stop_after_reports_real_figures},
        {"--resume refuses options other than the free ones, and checkpoints it cannot check",
         test_resume_refuses_other_options},
        {"fetch-mnist.sh without curl or wget says so", test_fetch_without_downloader},
        {"export refuses to write over its own checkpoint", test_export_refuses_its_checkpoint},
        {"export to several targets: all or nothing, in every failure order", test_export_all_or_nothing},
        {"export --tflite: from a checkpoint or a quantized file, the same bytes; refusals leave every file",
         test_export_tflite},
        {"model files that demand too much, a FIFO, a directory: refused at once", test_model_file_bombs},
        {"--target tflite: recorded, kept by a resume, exported as dividing pools; ONNX refuses; bad values refused",
         test_target_tflite},
        {NULL, NULL},
    };
    int rc = qat_test_main("cli", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
