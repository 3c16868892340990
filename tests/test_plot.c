/* qat plot draws valid PNG pictures with gnuplot: each a PNG file
 * (its signature) of a sensible size, the ones a log's rows call for.
 * Every test here needs gnuplot: the suite reports itself skipped (77)
 * on a machine without it (scripts/setup-deps.sh installs gnuplot-nox). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "test_util.h"

static const char *data;

static bool have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* The PNG at dir/file: its size if it starts with the PNG signature, else -1. */
static long png_size(const char *dir, const char *file) {
    char path[600];
    unsigned char sig[8];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    bool ok = fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
    long size = ok && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    return size;
}

/* A QAT run with a float epoch: the three pictures, each a PNG of some
 * kilobytes (small enough for docs/), listed in the JSON. */
static void test_plot_draws_three_pngs(void) {
    if (!have_gnuplot()) QAT_TEST_SKIP("gnuplot is not installed (apt-get install gnuplot-nox)");
    char args[2048], err[8192], out[8192], log[300], pics[300];
    snprintf(log, sizeof log, "%s/run.csv", cli_dir);
    snprintf(pics, sizeof pics, "%s/pictures", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --qat --float-epochs 1 --epochs 2 --limit-train 640 "
             "--limit-test 200 --log '%s' --log-every 2 --freeze-observers 12", data, log);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "plot '%s' --out '%s' --json", log, pics);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    const char *files[] = {"loss.png", "accuracy.png", "ranges.png"};
    for (int i = 0; i < 3; i++) {
        long size = png_size(pics, files[i]);
        if (size < 5000 || size > 200000) printf("\n  %s: %ld bytes\n", files[i], size);
        CU_ASSERT(size >= 5000 && size <= 200000);
        char want[96];
        snprintf(want, sizeof want, "{\"file\": \"%s\", \"bytes\": %ld}", files[i], size);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    }
    /* the script marks the phases: prepared and fake quantization at once, then frozen ranges */
    char gp[600], script[1 << 17];
    snprintf(gp, sizeof gp, "%s/plots.gp", pics);
    cli_slurp(gp, script, sizeof script);
    CU_ASSERT_PTR_NOT_NULL(strstr(script, "'QAT prepared, fake quant on'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(script, "'ranges frozen'"));
    /* redrawn from the script alone */
    snprintf(args, sizeof args, "rm -f '%s/loss.png' && gnuplot '%s'", pics, gp);
    CU_ASSERT_EQUAL(system(args), 0);
    CU_ASSERT(png_size(pics, "loss.png") >= 5000);
}

/* A float run has no points: no ranges.png; a log with no epoch row yet
 * (a run still in its first epoch), or whose epoch rows have no test
 * figure, has no accuracy.png; a log an older qat wrote (no mse_
 * columns) is drawn all the same. */
static void test_plot_draws_what_the_log_has(void) {
    if (!have_gnuplot()) QAT_TEST_SKIP("gnuplot is not installed (apt-get install gnuplot-nox)");
    char args[2048], err[8192], log[300], pics[300], cmd[1024];
    snprintf(log, sizeof log, "%s/float.csv", cli_dir);
    snprintf(pics, sizeof pics, "%s/float", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model mlp --epochs 1 --limit-train 320 --limit-test 100 "
             "--log '%s' --log-every 1", data, log);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    snprintf(args, sizeof args, "plot '%s' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0 && png_size(pics, "accuracy.png") > 0);
    CU_ASSERT_EQUAL(png_size(pics, "ranges.png"), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a float run: no quantization points, no ranges.png"));
    /* only its step rows */
    snprintf(cmd, sizeof cmd, "grep -v '^epoch,' '%s' > '%s.steps' && rm -rf '%s'", log, log, pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "plot '%s.steps' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0);
    CU_ASSERT_EQUAL(png_size(pics, "accuracy.png"), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no epoch rows yet: no accuracy.png or error.png"));
    /* only its epoch rows (--log-every past the run's steps) */
    snprintf(cmd, sizeof cmd, "grep -v '^step,' '%s' > '%s.epochs' && rm -rf '%s'", log, log, pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "plot '%s.epochs' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0 && png_size(pics, "accuracy.png") > 0);
    /* the log without its mse_ columns (12-14), as an older qat wrote it */
    snprintf(cmd, sizeof cmd, "cut -d, -f1-11,15- '%s' > '%s.old' && rm -rf '%s'", log, log, pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "plot '%s.old' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0 && png_size(pics, "accuracy.png") > 0);
    CU_ASSERT_EQUAL(png_size(pics, "error.png"), -1);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    /* epoch rows without accuracies: gnuplot would find no point to draw */
    snprintf(cmd, sizeof cmd, "awk -F, -v OFS=, '$1 == \"epoch\" { $9 = \"\"; $10 = \"\"; $11 = \"\" } 1' '%s' > '%s.noacc' "
             "&& rm -rf '%s'", log, log, pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "plot '%s.noacc' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0);
    CU_ASSERT_EQUAL(png_size(pics, "accuracy.png"), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no test figures in the log's epoch rows: no accuracy.png or error.png"));
}

/* Field k (from 0) of a CSV line as a number; NAN if empty or missing. */
static double csv_field(const char *line, int k) {
    for (; k > 0 && line; k--) line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
    return line && *line != ',' && *line != '\n' && *line ? strtod(line, NULL) : NAN;
}

/* A log's epoch rows: no accuracy, the float MSE every epoch, the
 * fake-quantized and integer ones after the float epoch, the integers
 * within 5 % of the fake-quantized model, the float MSE falling. */
static void check_error_rows(const char *log, int want_epochs) {
    char line[4096];
    FILE *f = fopen(log, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int epochs = 0;
    double first = NAN, last = NAN;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "epoch,", 6)) continue;
        epochs++;
        for (int k = 8; k < 11; k++) CU_ASSERT(isnan(csv_field(line, k))); /* no accuracy */
        double flt = csv_field(line, 11), fake = csv_field(line, 12), in = csv_field(line, 13);
        CU_ASSERT(flt > 0 && flt < 10);
        if (epochs == 1) CU_ASSERT(isnan(fake) && isnan(in)); /* the float epoch */
        if (epochs > 1 && !(fake > 0 && fabs(in - fake) < 0.05 * fake)) printf("\n  %s: %s", log, line);
        if (epochs > 1) CU_ASSERT(fake > 0 && fabs(in - fake) < 0.05 * fake); /* the integers track the fake model */
        if (epochs == 1) first = flt;
        last = flt;
    }
    fclose(f);
    CU_ASSERT_EQUAL(epochs, want_epochs);
    CU_ASSERT(last < first); /* it learns */
}

/* A regression run (a seeded set: y a fixed linear map of x) logs the
 * test mean squared error of the float weights, the fake-quantized model
 * and the integer program each epoch, no accuracy; plot draws error.png
 * from them and no accuracy.png. */
static void test_plot_regression_error(void) {
    if (!have_gnuplot()) QAT_TEST_SKIP("gnuplot is not installed (apt-get install gnuplot-nox)");
    char dir[300], path[400], args[2048], err[8192], out[8192], log[300], pics[300];
    snprintf(dir, sizeof dir, "%s/reg", cli_dir);
    CU_ASSERT_FATAL(cli_regression_set(dir, 512));
    snprintf(path, sizeof path, "%s/reg.qnet", dir);
    snprintf(log, sizeof log, "%s/reg.csv", cli_dir);
    snprintf(pics, sizeof pics, "%s/reg-pictures", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --qat --float-epochs 1 --epochs 2 --lr 0.01 --log '%s'",
             dir, path, log);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    check_error_rows(log, 3);
    snprintf(args, sizeof args, "plot '%s' --out '%s' --json", log, pics);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, out, sizeof out), 0);
    CU_ASSERT(png_size(pics, "error.png") >= 5000);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"file\": \"error.png\""));
    CU_ASSERT_EQUAL(png_size(pics, "accuracy.png"), -1);
    char gp[600], script[1 << 17];
    snprintf(gp, sizeof gp, "%s/plots.gp", pics);
    cli_slurp(gp, script, sizeof script);
    CU_ASSERT_PTR_NOT_NULL(strstr(script, "'test mean squared error after each epoch'"));
}

/* An autoencoder's target is its input as the model normalizes it: on
 * features far from mean 0 and std 1 (5 + 3·N(0, 1)) the integer
 * program's logged MSE is the fake-quantized model's, not one measured
 * against the raw input. */
static void test_log_autoencoder_error(void) {
    char dir[300], path[400], args[2048], err[8192], log[300];
    snprintf(dir, sizeof dir, "%s/ae", cli_dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    enum { N = 512, F = 8 };
    static float x[N][F];
    qat_rng rng;
    qat_rng_seed(&rng, 6);
    for (int i = 0; i < N; i++)
        for (int f = 0; f < F; f++) x[i][f] = 5.0f + 3.0f * qat_rng_normal(&rng);
    qat_ctx *ctx = qat_ctx_new();
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s_x.npy", dir, s ? "test" : "train");
        CU_ASSERT_EQUAL_FATAL(qat_npy_save(ctx, path, QAT_DT_F32, 2, (int64_t[]){N, F}, x), QAT_OK);
    }
    qat_ctx_free(ctx);
    snprintf(path, sizeof path, "%s/ae.qnet", cli_dir);
    CU_ASSERT_FATAL(cli_write_file(path, "input shape=8\nlinear fc1 input out=16\nrelu r1 fc1\nlinear fc2 r1 out=8\n"));
    snprintf(log, sizeof log, "%s/ae.csv", cli_dir);
    snprintf(args, sizeof args, "train --data '%s' --model-file '%s' --task autoencoder --qat --float-epochs 1 --epochs 2 "
             "--lr 0.01 --log '%s'", dir, path, log);
    CU_ASSERT_EQUAL_FATAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    check_error_rows(log, 3);
}

int main(int argc, char **argv) {
    cli_bin = getenv("QAT_BIN");
    data = getenv("QAT_MNIST_DATA");
    bool listing = argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"));
    if (!listing && (!cli_bin || !data)) {
        fprintf(stderr, "test_plot: set QAT_BIN and QAT_MNIST_DATA (ctest does)\n");
        return 2;
    }
    if (!qat_test_tmpdir(cli_dir, sizeof cli_dir, "plot")) return 2;
    const qat_test_case cases[] = {
        {"plot: loss, accuracy and ranges as PNG files", test_plot_draws_three_pngs},
        {"plot: only the pictures the log has data for", test_plot_draws_what_the_log_has},
        {"plot: a regression's test error per epoch", test_plot_regression_error},
        {"train --log: an autoencoder's integer error against its normalized input", test_log_autoencoder_error},
        {NULL, NULL},
    };
    int rc = qat_test_main("plot", cases, argc, argv);
    if (qat_test_rmdir(cli_dir) != 0) rc = rc ? rc : 2;
    return rc;
}
