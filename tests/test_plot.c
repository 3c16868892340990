/* qat plot draws valid PNG pictures with gnuplot: each a PNG file
 * (its signature) of a sensible size, the ones a log's rows call for.
 * Every test here needs gnuplot: the suite reports itself skipped (77)
 * on a machine without it (scripts/setup-deps.sh installs gnuplot-nox). */
#define _POSIX_C_SOURCE 200809L
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
 * (a run still in its first epoch), or whose epoch rows have no accuracy
 * (a regression or autoencoder run), has no accuracy.png. */
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
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no epoch rows yet: no accuracy.png"));
    /* epoch rows without accuracies: gnuplot would find no point to draw */
    snprintf(cmd, sizeof cmd, "awk -F, -v OFS=, '$1 == \"epoch\" { $9 = \"\"; $10 = \"\"; $11 = \"\" } 1' '%s' > '%s.noacc' "
             "&& rm -rf '%s'", log, log, pics);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "plot '%s.noacc' --out '%s'", log, pics);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 0);
    CU_ASSERT(png_size(pics, "loss.png") > 0);
    CU_ASSERT_EQUAL(png_size(pics, "accuracy.png"), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no accuracy in the log (not a classification run): no accuracy.png"));
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
        {NULL, NULL},
    };
    int rc = qat_test_main("plot", cases, argc, argv);
    if (qat_test_rmdir(cli_dir) != 0) rc = rc ? rc : 2;
    return rc;
}
