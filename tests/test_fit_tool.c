/* qat fit through the program: a short LeNet run fitted under a flash
 * budget of half its W8 weights and a RAM budget, checked on the linked
 * Cortex-M4 binary; under flash and cycles, checked on its run under
 * qemu; the files it writes; the budgets that nothing fits; bad options
 * refused before anything runs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "qat/data.h"
#include "test_util.h"

static const char *data;
static char ckpt[300];

/* A W8A8 LeNet, 1 QAT epoch of 1280 samples. */
static bool fixture(void) {
    static int made = -1;
    if (made >= 0) return made;
    char args[1024], err[8192];
    snprintf(ckpt, sizeof ckpt, "%s/lenet.ckpt.h5", cli_dir);
    /* lr 0.002, not train's default: a fit from it fine-tunes at a tenth of the rate the checkpoint records */
    snprintf(args, sizeof args, "train --data '%s' --model lenet --qat --epochs 1 --lr 0.002 --limit-train 1280 "
             "--limit-test 300 --out '%s'", data, ckpt);
    made = cli_run(args, err, sizeof err, NULL, 0) == 0;
    if (!made) printf("\n  %s\n", err);
    return made;
}

static bool toolchain(void) { return system("command -v arm-none-eabi-gcc >/dev/null 2>&1") == 0; }

/* The cycle plugin, built once into the test's folder (bench/m4cycles/build.sh);
 * NULL, with the reason, when qemu, the toolchain or the plugin header is missing. */
static const char *cycle_plugin(const char **why) {
    static char so[400];
    static int made = -1;
    *why = "no qemu-system-arm or arm-none-eabi-gcc (scripts/setup-mcu.sh installs them)";
    if (made < 0) {
        const char *src = getenv("QAT_SOURCE_DIR");
        char cmd[1200];
        snprintf(so, sizeof so, "%s/libm4cycles.so", cli_dir);
        snprintf(cmd, sizeof cmd, "bash '%s/bench/m4cycles/build.sh' '%s' >/dev/null 2>&1", src ? src : ".", so);
        made = toolchain() && system("command -v qemu-system-arm >/dev/null 2>&1") == 0 ? system(cmd) == 0 : 0;
        if (!made && toolchain()) *why = "the cycle plugin did not build (no qemu plugin header: scripts/fetch-qemu-plugin-header.sh)";
    }
    return made ? so : NULL;
}

/* Runs ARGS and checks that it is refused with status rc and a message
 * holding SAYS. */
static void refused(const char *args, int rc, const char *says) {
    char err[8192];
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), rc);
    if (!strstr(err, says)) printf("\n  %s: %s", args, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, says));
}

/* Lines of a file. */
static int lines(const char *path) {
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF) n += c == '\n';
    if (f) fclose(f);
    return f ? n : -1;
}

/* LeNet's 61 470 weights at 8 bits: a budget of half of them (30 735
 * bytes) for every constant, and 80 % of the W8A8 arena (4 704 bytes) for
 * arena and stack, which only the small-RAM plan meets. The choice fits
 * both on the linked binary, with a fine-tune; the table has 5 layers x 3
 * widths; the model file written carries the widths chosen; the linked
 * .rodata is at most the predicted constants (the unused input table is
 * dropped by the link). */
static void test_fit_lenet_half_flash(void) {
    if (!toolchain()) QAT_TEST_SKIP("no arm-none-eabi-gcc (scripts/setup-mcu.sh installs it): the linked check cannot run");
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[2048], err[1 << 15], line[4096], path[400];
    static char out[1 << 16];
    /* an earlier run's products in the folder (its mark says so): removed first, never mixed with this run's */
    snprintf(args, sizeof args, "mkdir -p '%s/fit/c/m4' '%s/fit/cycles/w4' && touch '%s/fit/c/m4/old.cycles' "
             "'%s/fit/cycles/w4/old' '%s/fit/front.png' '%s/fit/mine.txt' '%s/fit/.qat-fit'", cli_dir, cli_dir, cli_dir,
             cli_dir, cli_dir, cli_dir, cli_dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "fit --checkpoint '%s' --model lenet --data '%s' --flash 30735 --ram 3763 --calib 500 "
             "--ft-epochs 1 --limit-train 1280 --limit-test 300 --out '%s/fit' --name lenet --json", ckpt, data, cli_dir);
    int rc = cli_run(args, err, sizeof err, out, sizeof out);
    if (rc) printf("\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"fits\": true, \"checked_on_binary\": true, \"c_ram\": \"small\""));
    double constants = cli_json_number(line, "constants"), predicted = cli_json_number(line, "predicted_constants");
    CU_ASSERT(constants > 10000 && constants <= 30735 && constants <= predicted);
    CU_ASSERT(cli_json_number(line, "ram") <= 3763 && cli_json_number(line, "stack") > 0);
    CU_ASSERT(cli_json_number(line, "fitted_int_accuracy") > 0.5);
    CU_ASSERT(cli_json_number(line, "fc1") < 8); /* the 48 000 weights cannot all stay at 8 bits */
    snprintf(path, sizeof path, "%s/fit/layers.csv", cli_dir);
    CU_ASSERT_EQUAL(lines(path), 1 + 5 * 3);
    snprintf(path, sizeof path, "%s/fit/front.csv", cli_dir);
    CU_ASSERT(lines(path) >= 1 + 1 + 3); /* the header, one front point at least, the three uniform widths */
    snprintf(path, sizeof path, "%s/fit/fit.qnet", cli_dir);
    static char qnet[8192];
    cli_slurp(path, qnet, sizeof qnet);
    char want[64];
    snprintf(want, sizeof want, "linear fc1 flatten1 out=120 wbits=%d\n", (int)cli_json_number(line, "fc1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qnet, want));
    snprintf(want, sizeof want, "conv2d conv1 input out=6 kernel=5 pad=2 wbits=%d\n", (int)cli_json_number(line, "conv1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qnet, want));
    snprintf(path, sizeof path, "%s/fit/c/lenet.elf", cli_dir);
    CU_ASSERT_EQUAL(access(path, R_OK), 0);
    const char *gone[] = {"c/m4", "cycles"}, *kept[] = {"mine.txt", "front.png", "stack/trained/lenet.elf",
                                                        "stack/w2/lenet.elf", "stack/w8/lenet.elf"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
        snprintf(path, sizeof path, "%s/fit/%s", cli_dir, gone[i]);
        CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    }
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) { /* the user's file, and this run's */
        snprintf(path, sizeof path, "%s/fit/%s", cli_dir, kept[i]);
        CU_ASSERT_EQUAL(access(path, F_OK), 0);
    }
    /* the stack held back from --ram is measured on the builds at every width (docs/fit.md, "Stack") */
    snprintf(path, sizeof path, "%s/fit/stack/w4/lenet.elf", cli_dir);
    CU_ASSERT_EQUAL(access(path, F_OK), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fit 5/5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "adam lr 0.0002,")); /* the fine-tune at a tenth of the checkpoint's 0.002 */
}

/* Uniform W4's predicted cycles in a fit's front.csv ("uniform,...,4 4 4 4 4"), or -1. */
static double uniform4_cycles(const char *path) {
    static char csv[8192];
    cli_slurp(path, csv, sizeof csv);
    for (const char *l = csv; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double bytes, arena, cycles;
        char bits[32];
        if (strncmp(l, "uniform,", 8) == 0 && sscanf(l + 8, "%lf,%lf,%lf,%*[^,],%*[^,],%31[^\n]", &bytes, &arena, &cycles, bits) == 4 &&
            strcmp(bits, "4 4 4 4 4") == 0)
            return cycles;
    }
    return -1;
}

/* LeNet under 36 000 bytes of constants and a cycle budget just under what
 * uniform W4 costs (its prediction in a first, unconstrained fit's front),
 * with a 0.5 % margin: uniform W4 fits the flash but not the cycles, and a
 * choice that keeps some layers at 8 bits (packed weights cost cycles to
 * unpack, and take no DSP column kernel: conv2 at 8 bits takes about 17 %
 * fewer than at 4) does, so the
 * cycle budget decides the choice. The fitted firmware's run under qemu
 * fits, the prediction is within 1 % of the run, and layers.csv carries the
 * cycles. Then a budget below anything possible is refused. */
static void test_fit_lenet_cycles(void) {
    const char *why, *so = cycle_plugin(&why);
    if (!so) QAT_TEST_SKIP(why);
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[2048], err[1 << 15], line[4096], path[400];
    static char out[1 << 16];
    const char *common = "--model lenet --flash 36000 --calib 500 --ft-epochs 1 --limit-train 1280 --limit-test 300 "
                         "--name lenet";
    snprintf(args, sizeof args, "fit --checkpoint '%s' --data '%s' %s --cycles 10M --out '%s/cyc-free' --cycle-plugin '%s' "
             "--lr 0.003", ckpt, data, common, cli_dir, so);
    int rc = cli_run(args, err, sizeof err, NULL, 0);
    if (rc) printf("\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "adam lr 0.0003,")); /* this run's --lr over the checkpoint's */
    snprintf(path, sizeof path, "%s/cyc-free/front.csv", cli_dir);
    const double w4 = uniform4_cycles(path), budget = floor(w4 * 0.998);
    if (!(w4 > 1e5)) printf("\n  no \"uniform,...,4 4 4 4 4\" row with its cycles in %s\n", path);
    CU_ASSERT_FATAL(w4 > 1e5);
    snprintf(args, sizeof args, "fit --checkpoint '%s' --data '%s' %s --cycles %.0f --cycle-margin 0.5 --out '%s/cyc' "
             "--cycle-plugin '%s' --ft-lr 0.0005 --json", ckpt, data, common, budget, cli_dir, so);
    rc = cli_run(args, err, sizeof err, out, sizeof out);
    if (rc) printf("\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    cli_last_line(out, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "\"fits\": true, \"checked_on_binary\": true"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "adam lr 0.0005,")); /* --ft-lr given */
    double cycles = cli_json_number(line, "cycles"), predicted = cli_json_number(line, "predicted_cycles");
    CU_ASSERT(cycles > 1e5 && cycles <= budget);
    CU_ASSERT(predicted <= budget * 0.995); /* the choice is made for the budget less the 0.5 % margin */
    CU_ASSERT(fabs(cycles - predicted) <= 0.01 * cycles);
    CU_ASSERT(cli_json_number(line, "constants") <= 36000);
    bool uniform4 = true;
    const char *layer[] = {"conv1", "conv2", "fc1", "fc2", "fc3"};
    for (int i = 0; i < 5; i++) uniform4 = uniform4 && cli_json_number(line, layer[i]) == 4;
    CU_ASSERT(!uniform4);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "over --cycles less the margin")); /* uniform W4 in the front's table */
    snprintf(path, sizeof path, "%s/cyc/layers.csv", cli_dir);
    static char csv[8192];
    cli_slurp(path, csv, sizeof csv);
    CU_ASSERT_PTR_NOT_NULL(strstr(csv, ",cycles,"));
    CU_ASSERT_PTR_NULL(strstr(csv, ",,")); /* every width of every layer timed */
    snprintf(path, sizeof path, "%s/cyc/c/m4/lenet.cycles", cli_dir);
    CU_ASSERT_EQUAL(access(path, R_OK), 0);
    /* below the least cycles any choice allows (LeNet's convolutions alone take more): refused with the least possible */
    snprintf(args, sizeof args, "fit --checkpoint '%s' --model lenet --data '%s' --flash 64K --cycles 500000 --calib 200 "
             "--out '%s/cyc-none' --cycle-plugin '%s'", ckpt, data, cli_dir, so);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing fits 495000 cycles: the fewest the candidates allow is"));
}

/* A budget below the least any choice allows is refused (exit 1) with
 * the least possible; so is a RAM budget below the arena. */
static void test_fit_nothing_fits(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[2048], err[8192];
    snprintf(args, sizeof args, "fit --checkpoint '%s' --model lenet --data '%s' --flash 2000 --calib 200 --no-link "
             "--out '%s/none'", ckpt, data, cli_dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing fits 2000 bytes of flash: the fewest the candidates allow is"));
    if (!toolchain()) return;
    snprintf(args, sizeof args, "fit --checkpoint '%s' --model lenet --data '%s' --flash 40000 --ram 1000 --calib 200 "
             "--out '%s/none'", ckpt, data, cli_dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "arena is at least"));
}

/* Data and models refused before any work, exit 2, nothing written:
 * samples of another shape than the checkpoint's model takes, a
 * convolution the C generator cannot run (before the training), a
 * checkpoint among the files the run writes anew. */
static void test_fit_refused_early(void) {
    if (!fixture()) CU_FAIL_FATAL("the fixture's training run failed");
    char args[2048], err[8192], dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/odd", cli_dir);
    snprintf(args, sizeof args, "mkdir -p '%s'", dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    qat_ctx *ctx = qat_ctx_new();
    static uint8_t x[20 * 100];
    static int32_t y[20];
    for (int i = 0; i < 20; i++) y[i] = i % 10;
    const char *parts[] = {"train", "test"};
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s_x.npy", dir, parts[s]);
        CU_ASSERT_EQUAL(qat_npy_save(ctx, path, QAT_DT_U8, 4, (int64_t[]){20, 1, 10, 10}, x), QAT_OK);
        snprintf(path, sizeof path, "%s/%s_y.npy", dir, parts[s]);
        CU_ASSERT_EQUAL(qat_npy_save(ctx, path, QAT_DT_I32, 1, (int64_t[]){20}, y), QAT_OK);
    }
    qat_ctx_free(ctx);
    snprintf(args, sizeof args, "fit --checkpoint '%s' --data '%s' --flash 40000 --no-link --out '%s/early'", ckpt, dir,
             cli_dir);
    refused(args, 2, "the data's samples are [1, 10, 10], the model's input is [1, 28, 28]");
    snprintf(path, sizeof path, "%s/early", cli_dir);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    snprintf(args, sizeof args, "fit --checkpoint '%s' --data '%s' --abits 4 --flash 40000 --no-link --out '%s/early'",
             ckpt, data, cli_dir); /* measured at the checkpoint's A8, fine-tuned at A4: not the model measured */
    refused(args, 2, "was trained with another --abits than this run's (8, this run 4)");
    snprintf(args, sizeof args, "fit --model lenet --granularity block:8 --data '%s' --limit-train 1280 --flash 40000 "
             "--no-link --out '%s/early'", data, cli_dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "layer conv1 (conv2d) has sub-channel weights"));
    CU_ASSERT_PTR_NULL(strstr(err, "fit 1/5")); /* before the training */
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    snprintf(args, sizeof args, "mkdir -p '%s/early' && cp '%s' '%s/early/fit.ckpt.h5'", cli_dir, ckpt, cli_dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "fit --checkpoint '%s/early/fit.ckpt.h5' --data '%s' --flash 40000 --no-link "
             "--out '%s/early'", cli_dir, data, cli_dir);
    refused(args, 2, "which this run writes anew");
    snprintf(path, sizeof path, "%s/early/fit.ckpt.h5", cli_dir);
    CU_ASSERT_EQUAL(access(path, R_OK), 0);
    /* a folder whose c/ no qat fit made (no mark): refused, nothing removed */
    snprintf(args, sizeof args, "mkdir -p '%s/mine/c' && touch '%s/mine/c/firmware.c'", cli_dir, cli_dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "fit --checkpoint '%s' --data '%s' --flash 40000 --no-link --out '%s/mine'", ckpt, data,
             cli_dir);
    refused(args, 2, "holds c, which qat fit writes, and no earlier qat fit run made it");
    snprintf(path, sizeof path, "%s/mine/c/firmware.c", cli_dir);
    CU_ASSERT_EQUAL(access(path, F_OK), 0);
    /* an earlier run's folder, this run's --model in it: refused before anything is removed */
    snprintf(args, sizeof args, "mkdir -p '%s/again' && touch '%s/again/.qat-fit' '%s/again/layers.csv' && "
             "printf 'input shape=784\\nlinear fc input out=10\\n' > '%s/again/fit.qnet'", cli_dir, cli_dir, cli_dir,
             cli_dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "fit --model '%s/again/fit.qnet' --data '%s' --flash 40000 --no-link --out '%s/again'",
             cli_dir, data, cli_dir);
    CU_ASSERT_EQUAL(cli_run(args, err, sizeof err, NULL, 0), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--model"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "which this run writes anew"));
    const char *kept[] = {"layers.csv", "fit.qnet"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/again/%s", cli_dir, kept[i]);
        CU_ASSERT_EQUAL(access(path, F_OK), 0);
    }
}

/* Options refused before any work: one line, exit 2 (a missing compiler: 1). */
static void test_fit_bad_options(void) {
    static const struct {
        const char *args, *says;
        int rc;
    } cases[] = {
        {"fit --model lenet", "--flash BYTES is required", 2},
        {"fit --model lenet --flash 1000 --bits 4,3", "--bits \"4,3\"", 2},
        {"fit --model lenet --flash 1000 --bits 9", "--bits \"9\"", 2},
        {"fit --model lenet --flash 1000 --bits 4,", "--bits \"4,\"", 2},
        {"fit --model lenet --flash 10x", "--flash \"10x\"", 2},
        {"fit --model lenet --flash 1000 --resume x.h5", "--resume is not an option of qat fit", 2},
        {"fit --model lenet --flash 1000 --core cortex-a53", "--core \"cortex-a53\"", 2},
        {"fit --model lenet --flash 1000 --epochs 0", "--epochs", 2},
        {"fit --model lenet --flash 1000 --name 9lives", "--name \"9lives\" is not a C identifier", 2},
        {"fit --model lenet --flash 1000 --name string", "string.h would hide the standard header <string.h>", 2},
        {"fit --model lenet --flash 1000 --cc /nonexistent/arm-none-eabi-gcc", "no compiler", 1},
        {"fit --model lenet --flash 1000 --cycles 1.5x", "--cycles \"1.5x\"", 2},
        {"fit --model lenet --flash 1000 --cycles 0", "--cycles \"0\"", 2},
        {"fit --model lenet --flash 1000 --cycles 1M --core cortex-m3", "the cycle model is the Cortex-M4's", 2},
        {"fit --model lenet --flash 1000 --cycles 1M --no-link", "not with --no-link", 2},
        {"fit --model lenet --flash 1000 --cycles 1M --cycle-margin 60", "--cycle-margin \"60\"", 2},
        {"fit --model lenet --flash 1000 --ft-lr 0", "--ft-lr wants a number", 2},
        {"fit --model lenet --flash 1000 --lr 5e-7", "--lr 5e-07: fine-tuning at a tenth of it is below 1e-7", 2},
    };
    char args[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "%s --out '%s/bad'", cases[i].args, cli_dir);
        refused(args, cases[i].rc, cases[i].says);
    }
    CU_ASSERT_EQUAL(cli_run("fit --help", NULL, 0, NULL, 0), 0);
}

int main(int argc, char **argv) {
    cli_bin = getenv("QAT_BIN");
    data = getenv("QAT_MNIST_DATA");
    bool listing = argc == 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"));
    if (!listing && (!cli_bin || !data)) {
        fprintf(stderr, "test_fit_tool: set QAT_BIN and QAT_MNIST_DATA (ctest does)\n");
        return 2;
    }
    if (!qat_test_tmpdir(cli_dir, sizeof cli_dir, "fit")) return 2;
    const qat_test_case cases[] = {
        {"fit: LeNet under half its W8 weights' flash, checked on the linked Cortex-M4 binary", test_fit_lenet_half_flash},
        {"fit: LeNet under flash and Cortex-M4 cycles, checked on the firmware's run under qemu", test_fit_lenet_cycles},
        {"fit: a budget nothing fits is refused with the least possible", test_fit_nothing_fits},
        {"fit: data that do not fit, a convolution the C cannot run, a checkpoint it would overwrite: refused early",
         test_fit_refused_early},
        {"fit: bad options are refused before any work", test_fit_bad_options},
        {NULL, NULL},
    };
    int rc = qat_test_main("fit_tool", cases, argc, argv);
    if (qat_test_rmdir(cli_dir) != 0) rc = rc ? rc : 2;
    return rc;
}
