/* qat summary, analyze and train --log, through the program: the
 * summary's totals against hand-computed LeNet and MLP figures and across
 * the four sources, the analysis as JSON, a badly scaled point planted in
 * a checkpoint ranked first with its hint, the metrics log's rows (and a
 * resume appending to it), the input normalization in the summary of a
 * checkpoint and of its export. plot's pictures are test_plot's (gnuplot). */
#define _POSIX_C_SOURCE 200809L
#include <hdf5.h>
#include <hdf5_hl.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "qat/data.h"
#include "qat/export.h"
#include "qat/io.h"
#include "test_util.h"

static const char *data;
static char ckpt[300], log_csv[300]; /* the fixture: a short W8A8 LeNet run with --log */

/* Trains the fixture once: LeNet, 1 float + 1 QAT epoch of 1280 samples
 * (20 steps each), a log row every 5 steps. */
static bool fixture(void) {
    static int made = -1;
    if (made >= 0) return made;
    char args[1024], err[8192];
    snprintf(ckpt, sizeof ckpt, "%s/lenet.ckpt.h5", cli_dir);
    snprintf(log_csv, sizeof log_csv, "%s/lenet.csv", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model lenet --qat --float-epochs 1 --epochs 1 --limit-train 1280 "
             "--limit-test 300 --log '%s' --log-every 5 --out '%s'", data, log_csv, ckpt);
    made = cli_run(args, err, sizeof err, NULL, 0) == 0;
    if (!made) printf("\n  %s\n", err);
    return made;
}

/* ---- summary ------------------------------------------------------------------------- */

/* LeNet: 61 706 parameters, 416 520 MACs, 61 470 weights + 236 biases
 * (W8: 61 470 + 4·236 = 62 414 bytes); MLP: 235 146, 234 752, 234 752
 * weights + 394 biases (W8: 236 328). The derivation is in test_analyze. */
static void test_summary_totals(void) {
    char args[1024], err[8192], line[1 << 16];
    static char out[1 << 17];
    struct {
        const char *args;
        double params, macs, bytes;
    } cases[] = {
        {"--model lenet", 61706, 416520, 62414},
        {"--model lenet --wbits 4", 61706, 416520, 61470 / 2 + 4 * 236},
        {"--model mlp", 235146, 234752, 234752 + 4 * 394},
        {"--model mlp --float", 235146, 234752, 4 * 235146},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(args, sizeof args, "summary %s --json", cases[k].args);
        CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
        cli_last_line(out, line, sizeof line);
        const char *totals = strstr(line, "}], \"params\": "); /* after the rows */
        CU_ASSERT_PTR_NOT_NULL_FATAL(totals);
        CU_ASSERT_EQUAL(cli_json_number(totals, "params"), cases[k].params);
        CU_ASSERT_EQUAL(cli_json_number(totals, "macs"), cases[k].macs);
        CU_ASSERT_EQUAL(cli_json_number(totals, "weight_bytes"), cases[k].bytes);
        bool as_float = strstr(cases[k].args, "--float") != NULL; /* no integer plan: null */
        CU_ASSERT(as_float ? cli_json_number(totals, "peak_activation_bytes") == -2
                           : cli_json_number(totals, "peak_activation_bytes") > 0);
    }
    /* the table says the same */
    CU_ASSERT_EQUAL(cli_run("summary --model lenet", err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "total: 61 706 parameters, 416 520 MACs per sample"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "weights: 62 414 bytes at the trained bit widths (246 824 as float32)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "conv1     conv2d         6x28x28          156     117 600  W8 channel"));
    /* the model file of the same LeNet: the same rows */
    char a[1 << 16];
    CU_ASSERT_EQUAL(cli_run("summary --model lenet --json", err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, a, sizeof a);
    snprintf(args, sizeof args, "summary --model-file '%s/models/lenet.qnet' --json", getenv("QAT_SOURCE_DIR"));
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(strstr(a, "\"rows\""), strstr(line, "\"rows\""));
}

/* A QAT checkpoint and its export: the same parameters, MACs, weight
 * bytes and memory plan; the program's rows are its ops. */
static void test_summary_checkpoint_and_qmodel(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[1024], err[8192], ck[1 << 16], qm[1 << 16], model[300];
    static char out[1 << 17];
    snprintf(model, sizeof model, "%s/lenet.qat.h5", cli_dir);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", ckpt, model);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "summary --checkpoint '%s' --json", ckpt);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, ck, sizeof ck);
    snprintf(args, sizeof args, "summary --qmodel '%s' --json", model);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, qm, sizeof qm);
    CU_ASSERT_PTR_NOT_NULL(strstr(ck, "\"kind\": \"checkpoint\", \"quantized\": true"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qm, "\"kind\": \"qmodel\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(qm, "\"op\": \"conv2d+relu\""));
    CU_ASSERT_PTR_NULL(strstr(ck, "\"observed\": false")); /* trained: every range known */
    const char *keys[] = {"params", "macs", "weight_bytes", "peak_activation_bytes"};
    const char *tc = strstr(ck, "}], \"params\": "), *tq = strstr(qm, "}], \"params\": ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tq);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(cli_json_number(tc, keys[i]), cli_json_number(tq, keys[i]));
    CU_ASSERT_EQUAL(cli_json_number(tc, "params"), 61706);
    /* export reports the same plan */
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s' --json", ckpt, model);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_EQUAL(cli_json_number(out, "peak_activation_bytes"), cli_json_number(tc, "peak_activation_bytes"));
    /* the table's title says what it shows */
    snprintf(args, sizeof args, "summary --qmodel '%s'", model);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "the integer program, a row per op"));
}

/* A LeNet with MNIST's normalization written by the library (its
 * checkpoint and export): summary shows the normalization in the table
 * and the JSON of both, and "normalization": null for a model without. */
static void test_summary_normalization(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_lenet(m, false), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 1), QAT_OK);
    static qat_normalization n;
    memset(&n, 0, sizeof n);
    n.channels = 1, n.divisor = 255.0f, n.mean[0] = 0.1307f, n.std[0] = 0.3081f, n.raw_uint8 = true;
    CU_ASSERT_EQUAL_FATAL(qat_model_set_normalization(m, &n), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, (int64_t[]){4, 1, 28, 28}, false);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = (float)(i * 37 % 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(qat_model_forward(m, x)); /* every point observed */
    qat_ctx_step_reset(ctx);
    qat_model_train(m, false);
    char ck[300], qm[300], args[1024], err[8192], line[1 << 16];
    static char out[1 << 17];
    snprintf(ck, sizeof ck, "%s/norm.ckpt.h5", cli_dir);
    snprintf(qm, sizeof qm, "%s/norm.qat.h5", cli_dir);
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_save(m, NULL, NULL, NULL, ck), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_export(m, 0, NULL, NULL, qm, NULL), QAT_OK);
    qat_ctx_free(ctx);
    const char *src[2] = {"--checkpoint", "--qmodel"}, *path[2] = {ck, qm};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "summary %s '%s' --json", src[k], path[k]);
        CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
        cli_last_line(out, line, sizeof line);
        if (!strstr(line, "\"normalization\": {\"channels\": 1, \"divisor\": 255, \"mean\": [0.130700007], \"std\": "
                          "[0.308099985], \"raw_uint8\": true}"))
            printf("\n  %s\n", strstr(line, "\"normalization\"") ? strstr(line, "\"normalization\"") : line);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"normalization\": {\"channels\": 1, \"divisor\": 255, \"mean\": [0.130700007], "
                                            "\"std\": [0.308099985], \"raw_uint8\": true}"));
        snprintf(args, sizeof args, "summary %s '%s'", src[k], path[k]);
        CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "input normalization: ((x / 255) - mean[c]) / std[c] in float32, 1 channel, "
                                           "raw uint8 data (a byte table)\n  mean 0.130700007\n  std  0.308099985\n"));
    }
    CU_ASSERT_EQUAL_FATAL(cli_run("summary --model lenet --json", err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"normalization\": null}"));
    CU_ASSERT_EQUAL_FATAL(cli_run("summary --model lenet", err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "input normalization: none"));
}

static void test_summary_bad_input(void) {
    char err[8192], out[8192];
    CU_ASSERT_EQUAL(cli_run("summary --help", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: qat summary"));
    CU_ASSERT_EQUAL(cli_run("summary", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "give exactly one of --model, --model-file, --checkpoint and --qmodel"));
    CU_ASSERT_EQUAL(cli_run("summary --model lenet --model mlp --qmodel x.h5 --json", err, sizeof err, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"error\": \"give exactly one of"));
    CU_ASSERT_EQUAL(cli_run("summary --model resnet", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown value \"resnet\" for --model (one of mlp, lenet or lenet-bn)"));
    CU_ASSERT_EQUAL(cli_run("summary --model lenet --granularity row", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("summary --model lenet --wbits 1", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("summary --frobnicate", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("summary --qmodel /nonexistent.qat.h5 --json", err, sizeof err, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.qat.h5: cannot open"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ", \"status\": 1}"));
    CU_ASSERT_EQUAL(cli_run("summary --checkpoint /nonexistent.h5", err, sizeof err, NULL, 0), 1);
    CU_ASSERT_EQUAL(cli_run("summary --model-file /nonexistent.qnet", err, sizeof err, NULL, 0), 1);
    { /* a model file with a mistake in it is bad input, as for train */
        char bad[300], args[600];
        snprintf(bad, sizeof bad, "%s/twice.qnet", cli_dir);
        CU_ASSERT_FATAL(cli_write_file(bad, "input shape=8\nlinear fc input out=4 out=5\n"));
        snprintf(args, sizeof args, "summary --model-file '%s'", bad);
        CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "given twice"));
    }
}

/* ---- analyze ------------------------------------------------------------------------- */

/* The fixture's points in the JSON: six, ranked, each with every figure. */
static void test_analyze_json(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[1024], err[8192], line[1 << 15];
    static char out[1 << 16];
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --limit-test 200 --json", ckpt, data);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_EQUAL(cli_json_number(line, "samples"), 200);
    CU_ASSERT(cli_json_number(line, "accuracy_float") > 0.5);
    CU_ASSERT(cli_json_number(line, "logits_sqnr_db") > 15);
    int points = 0;
    for (const char *p = strstr(line, "{\"rank\": "); p; p = strstr(p + 1, "{\"rank\": ")) {
        points++;
        CU_ASSERT_EQUAL(cli_json_number(p, "rank"), points);
        CU_ASSERT(cli_json_number(p, "sqnr_db") > 10); /* W8A8 */
        CU_ASSERT(cli_json_number(p, "own_sqnr_db") > 20);
        CU_ASSERT(cli_json_number(p, "clipped_high") >= 0 && cli_json_number(p, "alone_share") >= 0);
        CU_ASSERT(cli_json_number(p, "alone_accuracy") > 0.5);
    }
    CU_ASSERT_EQUAL(points, 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"point\": \"relu1\", \"layer\": \"conv1\", \"abits\": 8, \"wbits\": 8"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"point\": \"input\", \"layer\": \"input\", \"abits\": 8, \"wbits\": 0"));
    /* the table, with its progress line on stderr */
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --limit-test 100", ckpt, data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "accuracy: float "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank  point"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "analyze 100%"));
}

/* relu3's quantizer in the checkpoint given a tiny fixed range (scale
 * 1e-4: [0, 0.0255]) is ranked first, clipping, with a hint naming it. */
static void test_analyze_ranks_a_planted_point_first(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[1024], err[8192], line[1 << 15], planted[300];
    static char out[1 << 16];
    snprintf(planted, sizeof planted, "%s/planted.ckpt.h5", cli_dir);
    snprintf(args, sizeof args, "cp '%s' '%s'", ckpt, planted);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    hid_t f = H5Fopen(planted, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    float scale = 1e-4f;
    long long zp = -128;
    CU_ASSERT(H5LTset_attribute_float(f, "observers/relu3", "scale", &scale, 1) >= 0);
    CU_ASSERT(H5LTset_attribute_long_long(f, "observers/relu3", "zero_point", &zp, 1) >= 0);
    H5Fclose(f);
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --limit-test 200 --json", planted, data);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, line, sizeof line);
    const char *first = strstr(line, "{\"rank\": 1, ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT(strncmp(first, "{\"rank\": 1, \"point\": \"relu3\", \"layer\": \"fc1\"", 44) == 0);
    CU_ASSERT(cli_json_number(first, "clipped_high") > 0.3);
    CU_ASSERT(cli_json_number(first, "alone_share") > 0.5);
    CU_ASSERT(cli_json_number(line, "accuracy_fake_quant") < cli_json_number(line, "accuracy_float") - 0.2);
    CU_ASSERT_PTR_NOT_NULL(strstr(first, "\"hint\": \"relu3 clips "));
    CU_ASSERT_PTR_NOT_NULL(strstr(strstr(line, "{\"rank\": 2, "), "\"hint\": null")); /* only relu3 stands out */
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --limit-test 100", planted, data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "   1  relu3  fc1 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hint: relu3 clips "));
    /* the unplanted checkpoint: no hint at W8A8 */
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --limit-test 100", ckpt, data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "hint:"));
    CU_ASSERT(strstr(out, "no point stands out") || strstr(out, "no drop to explain"));
}

/* A regression set (seeded: y a fixed linear map of x) has no class
 * labels: analyze ranks the points by output noise, prints n/a for the
 * accuracies (null in --json) and counts no drop. */
static void test_analyze_without_labels(void) {
    char dir[300], path[400], args[2048], err[8192], line[1 << 15], qnet[400];
    static char out[1 << 16];
    snprintf(dir, sizeof dir, "%s/reg", cli_dir);
    CU_ASSERT_FATAL(cli_regression_set(dir, 256));
    snprintf(qnet, sizeof qnet, "%s/reg.qnet", dir);
    snprintf(path, sizeof path, "%s/reg.ckpt.h5", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --qat --epochs 2 --out '%s'", dir, qnet, path);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --json", path, dir);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"accuracy_float\": null, \"accuracy_fake_quant\": null"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"alone_accuracy\": null"));
    CU_ASSERT_PTR_NULL(strstr(line, "\": -1")); /* no placeholder value */
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s'", path, dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no class labels (not a classification set)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "n/a"));
    CU_ASSERT_PTR_NULL(strstr(out, "-100.00 %"));
    CU_ASSERT_PTR_NULL(strstr(out, "no drop to explain"));
    /* the classifier's options on a regression are refused, not ignored */
    const char *cls[][2] = {{"train --label-smoothing 0.1 --epochs 1", "--label-smoothing is for classification"},
                            {"train --class-weights 1,2 --epochs 1", "--class-weights is for classification"},
                            {"train --topk 3 --epochs 1", "--topk is for classification"},
                            {"eval --per-class", "--per-class is for classification"},
                            {"eval --topk 3", "--topk is for classification"},
                            {"eval --predictions p.csv", "--predictions is for classification"}};
    char qm[400];
    snprintf(qm, sizeof qm, "%s/reg.qat.h5", cli_dir);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", path, qm);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    for (size_t i = 0; i < sizeof cls / sizeof *cls; i++) {
        bool train = !strncmp(cls[i][0], "train", 5);
        snprintf(args, sizeof args, "%s --data '%s' %s '%s'", cls[i][0], dir, train ? "--model-file" : "--model",
                 train ? qnet : qm);
        CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
        if (!strstr(err, cls[i][1])) printf("\n  %s: %s", cls[i][0], err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cls[i][1]));
    }
    /* another task than the file's training recorded: refused, not scored (a regressor's argmax as classes) */
    char cls_dir[400];
    snprintf(cls_dir, sizeof cls_dir, "%s/reg-labels", cli_dir);
    snprintf(args, sizeof args, "mkdir -p '%s' && cp '%s/train_x.npy' '%s/test_x.npy' '%s/'", cls_dir, dir, dir, cls_dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    qat_ctx *ctx = qat_ctx_new();
    static int32_t labels[256];
    for (int i = 0; i < 256; i++) labels[i] = i % 2;
    const char *ys[] = {"train_y.npy", "test_y.npy"};
    for (int i = 0; i < 2; i++) {
        char yp[440];
        snprintf(yp, sizeof yp, "%s/%s", cls_dir, ys[i]);
        CU_ASSERT_EQUAL(qat_npy_save(ctx, yp, QAT_DT_I32, 1, (int64_t[]){256}, labels), QAT_OK);
    }
    qat_ctx_free(ctx);
    snprintf(args, sizeof args, "eval --model '%s' --data '%s'", qm, cls_dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the regress task needs float targets in y; the test split has class labels"));
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --task classify", qm, dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "was trained for the regress task; --task asks for classify"));
    /* an autoencoder trained on data that carries a y: evaluated on it as an autoencoder, its task recorded */
    char ae[400], aeq[400], aeck[400];
    snprintf(ae, sizeof ae, "%s/ae.qnet", cli_dir);
    snprintf(aeck, sizeof aeck, "%s/ae.ckpt.h5", cli_dir);
    snprintf(aeq, sizeof aeq, "%s/ae.qat.h5", cli_dir);
    CU_ASSERT_FATAL(cli_write_file(ae, "input shape=8\nlinear fc1 input out=4\nrelu r1 fc1\nlinear fc2 r1 out=8\n"));
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --task autoencoder --qat --epochs 1 --out '%s'", dir,
             ae, aeck);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", aeck, aeq);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "eval --model '%s' --data '%s' --json", aeq, dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"task\": \"autoencoder\""));
    /* --split val --val F is the training run's own val: by the seed it recorded (7), not 1 */
    char s7[400], q7[400], mse[3][64] = {"", "", ""};
    snprintf(s7, sizeof s7, "%s/reg7.ckpt.h5", cli_dir);
    snprintf(q7, sizeof q7, "%s/reg7.qat.h5", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --qat --epochs 1 --seed 7 --val 0.25 --out '%s'", dir,
             qnet, s7);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "export --checkpoint '%s' --out '%s'", s7, q7);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    const char *seeds[3] = {"", "--val-seed 7", "--val-seed 1"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "eval --model '%s' --data '%s' --split val --val 0.25 %s --json", q7, dir, seeds[i]);
        CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
        cli_last_line(out, line, sizeof line);
        const char *m = strstr(line, "\"val_mse\": ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        memcpy(mse[i], m, 20);
    }
    CU_ASSERT_STRING_EQUAL(mse[0], mse[1]);
    CU_ASSERT_STRING_NOT_EQUAL(mse[0], mse[2]);
    /* data that does not fit the model is refused, not read into its input (here: samples wider than it) */
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s'", path, data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the data's samples are [1, 28, 28], the model's input is [8]"));
    /* and the other way round: the LeNet fixture on 8 features */
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s'", ckpt, dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the data's samples are [8], the model's input is [1, 28, 28]"));
}

static void test_analyze_bad_input(void) {
    char args[1024], err[8192], out[8192], flt[300];
    CU_ASSERT_EQUAL(cli_run("analyze --help", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: qat analyze"));
    CU_ASSERT_EQUAL(cli_run("analyze --json", err, sizeof err, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"error\": \"--checkpoint is required\", \"status\": 2}"));
    CU_ASSERT_EQUAL(cli_run("analyze --checkpoint x.h5 --limit-test 0", err, sizeof err, NULL, 0), 2);
    snprintf(args, sizeof args, "analyze --checkpoint /nonexistent.h5 --data '%s'", data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.h5: cannot open"));
    snprintf(flt, sizeof flt, "%s/float.ckpt.h5", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --limit-train 128 --limit-test 100 --out '%s'", data, flt);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "analyze --checkpoint '%s' --data '%s' --json", flt, data);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is a float checkpoint"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ", \"status\": 2}"));
}

/* ---- the metrics log ----------------------------------------------------------------- */

/* Fields of one CSV line. */
static int fields(const char *line) {
    int n = 1;
    for (const char *c = line; *c && *c != '\n'; c++) n += *c == ',';
    return n;
}

/* Whether field k (from 0) of a CSV line is empty. */
static bool field_empty(const char *line, int k) {
    for (; k > 0 && line; k--) line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
    return line && (*line == ',' || *line == '\n' || !*line);
}

/* The fixture's log: the header, a step row every 5 steps (40 steps),
 * an epoch row per epoch; the float epoch has no quantized figures, the
 * QAT epoch all three accuracies and every point's range; a classifier's
 * rows leave the mean squared errors empty. */
static void test_log_rows(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    FILE *f = fopen(log_csv, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, f));
    CU_ASSERT_STRING_EQUAL(line, "kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,acc_float,"
                                 "acc_fake_quant,acc_int,mse_float,mse_fake_quant,mse_int,input.min,input.max,"
                                 "input.scale,relu1.min,relu1.max,relu1.scale,relu2.min,relu2.max,relu2.scale,"
                                 "relu3.min,relu3.max,relu3.scale,relu4.min,relu4.max,relu4.scale,fc3.min,fc3.max,"
                                 "fc3.scale\n");
    int steps = 0, epochs = 0;
    long last = 0;
    while (fgets(line, sizeof line, f)) {
        CU_ASSERT_EQUAL(fields(line), 32);
        long step = strtol(strchr(line, ',') + 1, NULL, 10);
        for (int k = 11; k < 14; k++) CU_ASSERT(field_empty(line, k)); /* no MSE */
        if (!strncmp(line, "step,", 5)) {
            steps++;
            CU_ASSERT_EQUAL(step, last + 5);
            last = step;
            for (int k = 8; k < 11; k++) CU_ASSERT(field_empty(line, k));
            for (int k = 14; k < 32; k++) CU_ASSERT(field_empty(line, k) == (step <= 20)); /* ranges once QAT runs */
        } else {
            CU_ASSERT_FATAL(!strncmp(line, "epoch,", 6));
            epochs++;
            CU_ASSERT_EQUAL(step, 20 * epochs);
            if (epochs == 1) CU_ASSERT_PTR_NOT_NULL(strstr(line, "epoch,20,1,"));
            if (epochs == 1) CU_ASSERT_PTR_NOT_NULL(strstr(line, ",0,0,0.")); /* float: acc_float only */
            if (epochs == 2) CU_ASSERT_PTR_NOT_NULL(strstr(line, ",1,0,0."));
            for (int k = 8; k < 11; k++) CU_ASSERT(field_empty(line, k) == (epochs == 1 && k > 8));
            for (int k = 14; k < 32; k++) CU_ASSERT(field_empty(line, k) == (epochs == 1));
        }
    }
    fclose(f);
    CU_ASSERT_EQUAL(steps, 8);
    CU_ASSERT_EQUAL(epochs, 2);
}

/* A run stopped part way and resumed with the same --log continues it:
 * one header, steps in order to the end; a log of another model's run is
 * refused. */
static void test_log_resume_appends(void) {
    char args[2048], err[8192], k[300], l[300], other[300];
    snprintf(k, sizeof k, "%s/split.ckpt.h5", cli_dir);
    snprintf(l, sizeof l, "%s/split.csv", cli_dir);
    const char *common = "--model mlp --qat --limit-train 640 --limit-test 100 --epochs 2 --log-every 3";
    snprintf(args, sizeof args, "train --data '%s' %s --stop-after 7 --out '%s' --log '%s'", data, common, k, l);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    /* a run that went on past the checkpoint (and, say, died): resuming from the checkpoint measures those steps
     * again, and the log loses the rows it had past it */
    snprintf(args, sizeof args, "cp '%s' '%s.at7'", k, k);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --stop-after 16 --log '%s'", data, common, k, l);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    /* and was killed while it wrote a row: "step,1" of "step,17,...", a step the resume keeps by its number */
    snprintf(args, sizeof args, "printf 'step,1' >> '%s'", l);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s.at7' --out '%s' --log '%s'", data, common, k, k, l);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    FILE *f = fopen(l, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[4096];
    int headers = 0, rows = 0, width = 0;
    long last = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "kind,", 5)) {
            headers++, width = fields(line);
            continue;
        }
        CU_ASSERT_EQUAL(fields(line), width); /* no row cut short, none run into another */
        long step = strtol(strchr(line, ',') + 1, NULL, 10);
        CU_ASSERT(step >= last);
        last = step, rows++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(headers, 1);
    CU_ASSERT_EQUAL(last, 20);
    CU_ASSERT(rows >= 6 + 2); /* steps 3..18 and 2 epoch rows, the stop's epoch row too */
    /* the fixture's LeNet log is not this MLP run's */
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    snprintf(other, sizeof other, "%s/other.csv", cli_dir);
    snprintf(args, sizeof args, "cp '%s' '%s'", log_csv, other);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --stop-after 3 --out '%s' --log '%s'", data, common, k, l);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --log '%s'", data, common, k, other);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2); /* input the run cannot take */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the file's columns are not this run's (another model or QAT setting)"));
    /* this run's log as an older qat wrote it, without the mse_ columns */
    snprintf(args, sizeof args, "sed '1s/,mse_float,mse_fake_quant,mse_int,/,/' '%s' > '%s'", l, other);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "train --data '%s' %s --resume '%s' --log '%s'", data, common, k, other);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "(a log of an older qat, without the mse_ columns)"));
    snprintf(args, sizeof args, "train --data '%s' %s --log /nonexistent-dir/x.csv", data, common);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--log /nonexistent-dir/x.csv: cannot open: No such file or directory"));
}

/* ---- plot without gnuplot, and bad input (the pictures: test_plot) ------------------ */

/* With no gnuplot (QAT_GNUPLOT names none), plot says how to install it,
 * exits 1, and leaves the script beside the log for later. */
static void test_plot_without_gnuplot(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[1024], err[8192], out[8192], gp[300], script[1 << 16];
    snprintf(args, sizeof args, "plot '%s' --out '%s/pictures' --json", log_csv, cli_dir);
    CU_ASSERT_EQUAL(cli_run_env("QAT_GNUPLOT=/nonexistent/gnuplot", args, err, sizeof err, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gnuplot is not installed (QAT_GNUPLOT names no program): install it "
                                       "(Debian/Ubuntu: apt-get install gnuplot-nox)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"error\": \"gnuplot is not installed"));
    snprintf(gp, sizeof gp, "%s/pictures/plots.gp", cli_dir);
    cli_slurp(gp, script, sizeof script);
    CU_ASSERT_PTR_NOT_NULL(strstr(script, "set terminal pngcairo"));
    CU_ASSERT_PTR_NOT_NULL(strstr(script, "ranges.png"));
    /* a gnuplot that fails is reported too */
    CU_ASSERT_EQUAL(cli_run_env("QAT_GNUPLOT=/bin/false", args, err, sizeof err, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/bin/false failed on the script"));
}

static void test_plot_bad_input(void) {
    char args[1024], err[8192], out[8192], path[300];
    CU_ASSERT_EQUAL(cli_run("plot --help", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: qat plot"));
    CU_ASSERT_EQUAL(cli_run("plot", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("plot a.csv", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("plot a.csv b.csv --out d", err, sizeof err, NULL, 0), 2);
    CU_ASSERT_EQUAL(cli_run("plot /nonexistent.csv --out /tmp", err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent.csv: cannot open: No such file or directory"));
    const char *bad[][2] = {
        {"a,b,c\n1,2,3\n", "not a training log of qat train --log"},
        {"", "empty: not a training log"},
        {"kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,acc_float,acc_fake_quant,acc_int\n",
         "no rows yet"},
        {"kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,acc_float,acc_fake_quant,acc_int\n"
         "step,1,0.1,x,,,,,,,\n", ":2: field 4 (loss) is not a number"},
        {"kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,acc_float,acc_fake_quant,acc_int\n"
         "step,1,0.1\n", ":2: a row of 3 fields where the header has 11"},
    };
    snprintf(path, sizeof path, "%s/bad.csv", cli_dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(bad[i][0], f);
        fclose(f);
        snprintf(args, sizeof args, "plot '%s' --out '%s/bad'", path, cli_dir);
        CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
        if (!strstr(err, bad[i][1])) printf("\n  %s\n", err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i][1]));
    }
}

int main(int argc, char **argv) {
    cli_bin = getenv("QAT_BIN");
    data = getenv("QAT_MNIST_DATA");
    bool listing = argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"));
    if (!listing && (!cli_bin || !data || !getenv("QAT_SOURCE_DIR"))) {
        fprintf(stderr, "test_tools: set QAT_BIN, QAT_MNIST_DATA and QAT_SOURCE_DIR (ctest does)\n");
        return 2;
    }
    if (!qat_test_tmpdir(cli_dir, sizeof cli_dir, "tools")) return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const qat_test_case cases[] = {
        {"summary: the input normalization of a checkpoint and of its export", test_summary_normalization},
        {"summary: totals equal hand-computed LeNet and MLP figures", test_summary_totals},
        {"summary: a checkpoint and its export agree", test_summary_checkpoint_and_qmodel},
        {"summary: bad input", test_summary_bad_input},
        {"analyze: six ranked points with every figure, as JSON and as a table", test_analyze_json},
        {"analyze: a planted tiny range is ranked first, with a hint", test_analyze_ranks_a_planted_point_first},
        {"analyze: data without class labels (regression): no accuracy, no drop", test_analyze_without_labels},
        {"analyze: bad input", test_analyze_bad_input},
        {"train --log: a row every N steps and per epoch", test_log_rows},
        {"train --log: a resume appends; another run's log is refused", test_log_resume_appends},
        {"plot without gnuplot: how to install it, the script kept", test_plot_without_gnuplot},
        {"plot: bad input", test_plot_bad_input},
        {NULL, NULL},
    };
    int rc = qat_test_main("tools", cases, argc, argv);
    if (qat_test_rmdir(cli_dir) != 0) rc = rc ? rc : 2;
    return rc;
}
