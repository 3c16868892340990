/* qat fit: a weight width per layer chosen to fit a device's flash, RAM
 * and cycles (qat/fit.h), fine-tuned, exported and checked on the linked
 * firmware (fit_build.h) and, for cycles, on its run under qemu
 * (fit_cycles.h). The training and the export are `qat train`
 * and `qat export` themselves, run in this process with the arguments
 * fit makes for them. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fit_build.h"
#include "fit_cycles.h"
#include "gnuplot.h"
#include "progress.h"
#include "qat/export.h"
#include "qat/fit.h"
#include "qat/infer.h"
#include "qat/io.h"
#include "tools.h"
#include "train_options.h"

#define PROG "qat"
#define P "qat fit" /* usage errors */
#define MAX_ARGS 256
#define FRONT_CAP 64
#define CYCLE_SAMPLES 4 /* calibration samples a build is timed on: the cycles move a little with the data */

static const char *const fit_usage =
    "usage: qat fit --model M --flash BYTES [--ram BYTES] [--cycles N] [--data D] [--out DIR] [options]\n"
    "               [qat train's options]\n"
    "       qat fit --checkpoint CKPT --flash BYTES [the same options]\n"

    "\n"
    "Chooses the weight bits of each Linear and Conv layer so that the model's\n"
    "generated C fits a device, fine-tunes that choice, exports it and checks it on\n"
    "the linked firmware (docs/fit.md):\n"
    "  1. trains the model with fake quantization (qat train --qat and the train\n"
    "     options given here, by default W8A8), or starts from --checkpoint;\n"
    "  2. measures every layer alone at every --bits width: the loss on the\n"
    "     calibration samples (the val split, else the first --calib training\n"
    "     samples) and the generated C's constant bytes and arena;\n"
    "  3. chooses the widths of least summed loss increase whose constants fit\n"
    "     --flash, whose arena and stack fit --ram (with the small-RAM plan,\n"
    "     export --c-ram small, when only it fits) and, with --cycles, whose\n"
    "     Cortex-M4 cycles fit (each layer's op timed at each width under qemu),\n"
    "     exactly (an integer program, GLPK), and measures the Pareto front of\n"
    "     flash against calibration accuracy;\n"
    "  4. fine-tunes the choice from the trained weights (--ft-epochs, --ft-lr),\n"
    "     exports DIR/fit.qnet, DIR/fit.ckpt.h5, DIR/fit.qat.h5, DIR/c/NAME.{h,c};\n"
    "  5. compiles and links DIR/c/NAME.c for --core with the Arm toolchain and\n"
    "     checks the linked binary: .rodata <= --flash; writable sections plus\n"
    "     the deepest call chain's stack <= --ram; with --cycles, runs it on four\n"
    "     samples under qemu: cycles <= --cycles. Exit 0 only when it fits.\n"
    "It writes DIR/layers.csv (every layer at every width), DIR/front.csv and\n"
    "DIR/front.png (gnuplot, when installed).\n"
    "\n"
    "  --flash BYTES       the model's constants in flash: weights, biases,\n"
    "                      multipliers (a K suffix: KiB)\n"
    "  --ram BYTES         the arena plus the stack (default: no limit)\n"
    "  --cycles N          estimated Cortex-M4 cycles per inference (an M suffix:\n"
    "                      millions), measured under qemu-system-arm with the\n"
    "                      cycle plugin (docs/cycle-model.md); --core cortex-m4\n"
    "  --cycle-margin P    the choice is made for --cycles less P % (default 1):\n"
    "                      cycles move a little with data and weights; the run\n"
    "                      is checked against --cycles itself\n"
    "  --qemu PROGRAM      qemu-system-arm (default)\n"
    "  --cycle-plugin SO   the cycle plugin (default: QAT_M4CYCLES_PLUGIN, else the\n"
    "                      one the build made; bash bench/m4cycles/build.sh SO)\n"
    "  --bits LIST         candidate weight widths, ascending in 2..8 (default 2,4,8)\n"
    "  --out DIR           the outputs (default fit-out; made if missing)\n"
    "  --name NAME         the generated C's prefix (default model)\n"
    "  --checkpoint CKPT   a QAT training checkpoint to start from instead of step 1\n"
    "                      (the model is the checkpoint's; --model is not needed)\n"
    "  --calib N           calibration samples without a val split (default 2000)\n"
    "  --ft-epochs N       fine-tuning epochs (default 2)\n"
    "  --ft-lr X           its peak learning rate (default a tenth of the training's:\n"
    "                      --lr, else the checkpoint's, else train's default)\n"
    "  --front N           points of the front measured (default 12)\n"
    "  --core CORE         cortex-m4 (default), cortex-m0plus, cortex-m3, cortex-m7,\n"
    "                      cortex-m33\n"
    "  --cc PROGRAM        the cross compiler (default arm-none-eabi-gcc)\n"
    "  --rounding R        the program's requantization rounding: double (default)\n"
    "                      or single (qat export --rounding)\n"
    "  --no-link           no toolchain: stop after the export (the budgets are then\n"
    "                      only predicted, and the command says so)\n"
    "  --json              a JSON summary as the last line of stdout\n"
    "  --help              this text\n"
    "Every other option is qat train's (qat train --help): the data, the\n"
    "epochs, batch, learning rate, seed, limits, --abits, --granularity, ...\n"
    "Not taken: --out of train (fit's --out is a folder), --resume, --init,\n"
    "--best-out, --save-every, --stop-after, --log, --lsq.\n";

typedef struct {
    int64_t flash, ram, cycles;
    int bits[QAT_FIT_MAX_CHOICES], n_bits;
    const char *out, *name, *checkpoint, *core, *cc, *rounding, *qemu, *plugin;
    long calib, ft_epochs, front;
    double ft_lr; /* 0: a tenth of the training's peak (ft_lr_of) */
    double cycle_margin;    /* percent */
    bool cycle_margin_set, model_given;
    bool no_link, json;
    /* qat train's options, with --qat */
    char *rest[MAX_ARGS];
    int n_rest;
    train_opts train;
} fit_opts;

/* ---- options ---------------------------------------------------------------------------------- */

static bool parse_bytes(const char *v, int64_t *out) {
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || n < 1) return false;
    if (!strcmp(end, "K") || !strcmp(end, "KiB")) n *= 1024;
    else if (*end) return false;
    *out = n;
    return n <= (1LL << 40);
}

/* Cycles: an integer, or one with an M suffix (millions, decimals allowed). */
static bool parse_cycles(const char *v, int64_t *out) {
    char *end;
    errno = 0;
    double n = strtod(v, &end);
    if (errno || end == v || !(n >= 1)) return false;
    if (!strcmp(end, "M")) n *= 1e6;
    else if (*end || n != (double)(int64_t)n) return false;
    if (n > 1e15) return false;
    *out = (int64_t)n;
    return true;
}

static int parse_bits(const char *v, fit_opts *o) {
    o->n_bits = 0;
    size_t len = strlen(v);
    if (len && v[len - 1] == ',') return -1; /* "4,": a width left out */
    for (const char *s = v; *s;) {
        long b;
        char num[8];
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof num || o->n_bits == QAT_FIT_MAX_CHOICES) return -1;
        memcpy(num, s, n), num[n] = '\0';
        if (!cli_parse_long(num, 2, 8, &b) || (o->n_bits && b <= o->bits[o->n_bits - 1])) return -1;
        o->bits[o->n_bits++] = (int)b;
        s += n + (s[n] == ',');
    }
    return o->n_bits ? 0 : -1;
}

static const char *const refused[] = {"--resume", "--init", "--best-out", "--save-every", "--stop-after", "--log",
                                      "--lsq", "--rank-checkpoints", NULL};

static int fit_parse(int argc, char **argv, fit_opts *o) {
    *o = (fit_opts){.out = "fit-out", .name = "model", .core = "cortex-m4", .cc = "arm-none-eabi-gcc", .rounding = "double", .qemu = "qemu-system-arm", .plugin = fit_cycle_plugin_default(), .calib = 2000, .cycle_margin = 1.0,
                    .ft_epochs = 2, .front = 12, .n_bits = 3, .bits = {2, 4, 8}};
    o->rest[o->n_rest++] = "train";
    bool qat = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VAL() (v = cli_value(P, argc, argv, &i))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(fit_usage, stdout), -1;
        else if (!strcmp(a, "--flash")) {
            if (!VAL()) return EXIT_USAGE;
            if (!parse_bytes(v, &o->flash)) return cli_usage_fail(P, false, fit_usage, "--flash \"%s\": bytes (e.g. 30000 or 64K)", v);
        } else if (!strcmp(a, "--ram")) {
            if (!VAL()) return EXIT_USAGE;
            if (!parse_bytes(v, &o->ram)) return cli_usage_fail(P, false, fit_usage, "--ram \"%s\": bytes (e.g. 4096 or 20K)", v);
        } else if (!strcmp(a, "--cycles")) {
            if (!VAL()) return EXIT_USAGE;
            if (!parse_cycles(v, &o->cycles))
                return cli_usage_fail(P, false, fit_usage, "--cycles \"%s\": a count of cycles (e.g. 1200000 or 1.2M)", v);
        } else if (!strcmp(a, "--cycle-margin")) {
            o->cycle_margin_set = true;
            char *end;
            if (!VAL()) return EXIT_USAGE;
            o->cycle_margin = strtod(v, &end);
            if (end == v || *end || !(o->cycle_margin >= 0 && o->cycle_margin <= 50))
                return cli_usage_fail(P, false, fit_usage, "--cycle-margin \"%s\": a percentage in 0..50", v);
        } else if (!strcmp(a, "--qemu")) {
            if (!VAL()) return EXIT_USAGE;
            o->qemu = v;
        } else if (!strcmp(a, "--cycle-plugin")) {
            if (!VAL()) return EXIT_USAGE;
            o->plugin = v;
        } else if (!strcmp(a, "--bits")) {
            if (!VAL()) return EXIT_USAGE;
            if (parse_bits(v, o)) return cli_usage_fail(P, false, fit_usage, "--bits \"%s\": up to %d widths in 2..8, "
                                                        "ascending, separated by commas", v, QAT_FIT_MAX_CHOICES);
        } else if (!strcmp(a, "--out")) {
            if (!VAL()) return EXIT_USAGE;
            o->out = v;
        } else if (!strcmp(a, "--name")) {
            if (!VAL()) return EXIT_USAGE;
            o->name = v;
        } else if (!strcmp(a, "--checkpoint")) {
            if (!VAL()) return EXIT_USAGE;
            o->checkpoint = v;
        } else if (!strcmp(a, "--core")) {
            if (!VAL()) return EXIT_USAGE;
            o->core = v;
            if (cli_choice(v, fit_cores) < 0) {
                char list[128];
                return cli_usage_fail(P, false, fit_usage, "--core \"%s\": one of %s", v,
                                      cli_choice_list(fit_cores, list, sizeof list));
            }
        } else if (!strcmp(a, "--cc")) {
            if (!VAL()) return EXIT_USAGE;
            o->cc = v;
        } else if (!strcmp(a, "--calib")) {
            if (!VAL() || !cli_int(P, a, v, 1, 1L << 30, &o->calib)) return EXIT_USAGE;
        } else if (!strcmp(a, "--ft-epochs")) {
            if (!VAL() || !cli_int(P, a, v, 1, 1000, &o->ft_epochs)) return EXIT_USAGE;
        } else if (!strcmp(a, "--ft-lr")) {
            if (!VAL() || !cli_float(P, a, v, 1e-7, 10, &o->ft_lr)) return EXIT_USAGE;
        } else if (!strcmp(a, "--front")) {
            if (!VAL() || !cli_int(P, a, v, 2, FRONT_CAP, &o->front)) return EXIT_USAGE;
        } else if (!strcmp(a, "--rounding")) {
            qat_rounding r;
            if (!VAL()) return EXIT_USAGE;
            if (!qat_rounding_parse(v, &r))
                return cli_usage_fail(P, false, fit_usage, "--rounding \"%s\": double or single", v);
            o->rounding = v;
        } else if (!strcmp(a, "--no-link")) o->no_link = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else if (cli_choice(a, refused) >= 0) {
            return cli_usage_fail(P, false, fit_usage, "%s is not an option of qat fit (it runs the training "
                                  "itself: see the list at the end of qat fit --help)", a);
        } else {
            if (o->n_rest >= MAX_ARGS - 16) return cli_usage_fail(P, false, fit_usage, "too many options");
            if (!strcmp(a, "--qat")) qat = true;
            if (!strcmp(a, "--model") || !strcmp(a, "--model-file")) o->model_given = true;
            o->rest[o->n_rest++] = argv[i];
        }
#undef VAL
    }
    if (!qat) o->rest[o->n_rest++] = "--qat";
    o->rest[0] = "fit"; /* the train options, checked before anything runs, and its trainings: errors name qat fit */
    int rc = train_parse(o->n_rest, o->rest, &o->train);
    if (rc < 0) return -1;
    if (rc) return rc;
    if (!o->flash) return cli_usage_fail(P, o->json, fit_usage, "--flash BYTES is required (the constants' budget)");
    if (o->cycles && strcmp(o->core, "cortex-m4"))
        return cli_usage_fail(P, o->json, fit_usage, "--cycles: the cycle model is the Cortex-M4's; not with --core %s",
                              o->core);
    if (o->cycles && o->no_link)
        return cli_usage_fail(P, o->json, fit_usage, "--cycles measures the build under qemu: not with --no-link");
    if (o->cycle_margin_set && !o->cycles)
        return cli_usage_fail(P, o->json, fit_usage, "--cycle-margin is for --cycles N");
    if (o->checkpoint && o->model_given) /* legal (a script's common options), and not silently */
        fprintf(stderr, "%s: note: the model is --checkpoint's own (%s); --model is not used\n", P, o->checkpoint);
    if (qat_codegen_name_reserved(o->name)) /* said now, not after the training */
        return cli_usage_fail(P, o->json, fit_usage, "--name \"%s\": %s.h would hide the standard header <%s.h> from "
                              "a build that includes the folder: choose another name", o->name, o->name, o->name);
    if (!qat_codegen_name_ok(o->name))
        return cli_usage_fail(P, o->json, fit_usage, "--name \"%s\" is not a C identifier of 1 to %d characters", o->name,
                              QAT_CODEGEN_MAX_NAME);
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK"))
        return cli_fail(P, o->json, EXIT_USAGE, "qat fit runs in one process (not under mpirun)");
    if (o->train.out) return cli_usage_fail(P, o->json, fit_usage, "--out is fit's folder; give it once");
    if (!o->ft_lr && o->train.lr / 10 < 1e-7)
        return cli_usage_fail(P, o->json, fit_usage, "--lr %g: fine-tuning at a tenth of it is below 1e-7 (give "
                              "--ft-lr)", o->train.lr);
    return 0;
}

/* ---- the run ----------------------------------------------------------------------------------- */

typedef struct {
    fit_opts *o;
    qat_ctx *ctx;
    qat_dataset *data;
    qat_model *m;              /* the trained model, rebuilt from its checkpoint */
    qat_task task;
    qat_fit_data calib;
    qat_fit_table t;
    int *choice;
    qat_fit_result chosen;
    char base[4200], qnet[4200], ckpt[4200], qfile[4200], cdir[4200];
    progress bar;
    int64_t calib_n;
    int64_t cycles_target;     /* what the choice is made for: --cycles less the margin (0: no budget) */
    double ft_lr;              /* fine-tuning's peak learning rate */
    bool made_out;             /* --out was made by this run: removed again if it fails with it empty */
} fit_run;

static int fail(const fit_run *r) {
    return cli_fail(PROG, r->o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s", qat_ctx_error(r->ctx));
}

static void path_in(char *buf, size_t len, const char *dir, const char *file) { snprintf(buf, len, "%s/%s", dir, file); }

/* DIR: made when missing (its parent must exist), a writable folder. */
static int check_out_dir(const fit_opts *o, bool *made) {
    struct stat st;
    if (stat(o->out, &st) != 0 && (errno != ENOENT || !(*made = mkdir(o->out, 0755) == 0)))
        return cli_fail(PROG, o->json, 1, "--out %s: cannot make it: %s", o->out, strerror(errno));
    if (stat(o->out, &st) != 0 || !S_ISDIR(st.st_mode)) return cli_fail(PROG, o->json, 1, "--out %s: not a folder", o->out);
    if (access(o->out, W_OK) != 0) return cli_fail(PROG, o->json, 1, "--out %s: cannot write in it: %s", o->out, strerror(errno));
    return 0;
}

static void catch_fit_signals(void);

/* What a run writes in --out. An earlier run's are removed first (all
 * but trained.ckpt.h5, which step 1 writes again and --checkpoint may
 * name), so that the folder holds one run's products, never a mix: only
 * where FIT_MARK says an earlier qat fit made them, and only when none of
 * them is or holds one of this run's inputs (checked before anything is
 * removed). */
#define FIT_MARK ".qat-fit"
#define FIT_MARK_TEXT "qat fit's folder: a run removes what an earlier one wrote here (docs/fit.md)\n"
static const char *const products[] = {"layers.csv", "front.csv", "front.png", "fit.qnet", "fit.ckpt.h5", "fit.qat.h5",
                                       "c", "cycles", "stack", "stack-small", "trained.ckpt.h5", NULL};

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Is path the entry, or inside it (entry a folder)? */
static bool is_or_inside(const char *path, const char *entry) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!path || !realpath(path, a) || !realpath(entry, b)) return false;
    size_t n = strlen(b);
    return !strcmp(a, b) || (!strncmp(a, b, n) && a[n] == '/');
}

static int clear_products(fit_run *r) {
    const fit_opts *o = r->o;
    char path[4200], mark[4200];
    path_in(mark, sizeof mark, o->out, FIT_MARK);
    bool marked = access(mark, F_OK) == 0;
    const char *inputs[][2] = {{"--checkpoint", o->checkpoint},
                               {"--model", train_opts_model_is_file(&o->train) ? o->train.model : NULL},
                               {"--data", o->train.data.path}};
    for (int i = 0; products[i]; i++) {
        struct stat st;
        path_in(path, sizeof path, o->out, products[i]);
        if (lstat(path, &st) != 0) continue;
        bool step1 = !strcmp(products[i], "trained.ckpt.h5"); /* kept, and --checkpoint may name it */
        for (int k = 0; k < 3 && !(step1 && o->checkpoint); k++)
            if (is_or_inside(inputs[k][1], path))
                return cli_fail(PROG, o->json, EXIT_USAGE, "%s %s is %s, which this run writes anew: copy it elsewhere "
                                "first", inputs[k][0], inputs[k][1], path);
        if (!marked && !(step1 && o->checkpoint))
            return cli_fail(PROG, o->json, EXIT_USAGE, "--out %s holds %s, which qat fit writes, and no earlier qat fit "
                            "run made it (%s is not there): choose another folder", o->out, products[i], FIT_MARK);
    }
    for (int i = 0; marked && products[i]; i++) {
        struct stat st;
        path_in(path, sizeof path, o->out, products[i]);
        if (!strcmp(products[i], "trained.ckpt.h5") || lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode) ? nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 : unlink(path) != 0)
            return cli_fail(PROG, o->json, 1, "%s: cannot remove an earlier run's output: %s", path, strerror(errno));
    }
    if (!marked) {
        FILE *f = fopen(mark, "w");
        bool ok = f && fputs(FIT_MARK_TEXT, f) >= 0;
        if (f && fclose(f) != 0) ok = false;
        if (!ok) return cli_fail(PROG, o->json, 1, "%s: cannot write it", mark);
    }
    return 0;
}

/* Runs `qat train` with the fit's train options and the given extra ones
 * (which replace --model, --epochs and --lr when given). */
static int train_with(fit_run *r, const char *const *extra, int n_extra, bool replace) {
    char *args[MAX_ARGS];
    int n = 0;
    const fit_opts *o = r->o;
    for (int i = 0; i < o->n_rest; i++) {
        const char *a = o->rest[i];
        bool replaced = !strcmp(a, "--model") || !strcmp(a, "--model-file") || !strcmp(a, "--epochs") ||
                        !strcmp(a, "--float-epochs") || !strcmp(a, "--lr");
        if (replaced && replace && i + 1 < o->n_rest) {
            i++;
            continue;
        }
        args[n++] = o->rest[i];
    }
    for (int i = 0; i < n_extra; i++) args[n++] = (char *)extra[i];
    args[n] = NULL;
    fflush(stdout);
    int rc = cmd_train(n, args);
    catch_fit_signals(); /* train's handlers end with it */
    if (rc && o->json) /* train said why on stderr; the JSON line is fit's, last on stdout */
        return cli_fail(PROG, true, rc, rc == 130 || rc == 143 ? "interrupted while training (its checkpoint is kept)"
                                                               : "the training failed (above)");
    return rc;
}

/* Ctrl-C outside the training (measuring, building, timing): fit does not
 * resume, so it ends at once and says so: the error line last on stdout
 * with --json, and the --out folder it made removed if still empty. The
 * training's own handler saves and says how to resume. */
static volatile sig_atomic_t fit_json;
static char fit_made_dir[4200], fit_made_mark[4300]; /* set before the handler can run; read only there */
static volatile sig_atomic_t fit_made;

/* A folder this run made and left holding its mark alone goes (async-signal-safe). */
static void remove_made_dir(void) {
    if (!fit_made || unlink(fit_made_mark) != 0) return;
    if (rmdir(fit_made_dir) == 0) return;
    int fd = open(fit_made_mark, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* products stay: so does the mark */
    if (fd >= 0) {
        ssize_t w = write(fd, FIT_MARK_TEXT, sizeof FIT_MARK_TEXT - 1);
        (void)w;
        close(fd);
    }
}

static void on_fit_signal(int sig) {
    static const char msg[] = "\nqat fit: interrupted: what it wrote stays in --out; the same command starts over\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    remove_made_dir();
    if (fit_json) {
        char line[] = "{\"error\": \"interrupted\", \"status\": 000}\n";
        char *d = line + sizeof line - 6;
        int status = 128 + sig;
        d[0] = (char)('0' + status / 100), d[1] = (char)('0' + status / 10 % 10), d[2] = (char)('0' + status % 10);
        w = write(1, line, sizeof line - 1);
    }
    (void)w;
    _exit(128 + sig);
}

static void catch_fit_signals(void) {
    struct sigaction sa = {.sa_handler = on_fit_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void on_measure(void *user, int done, int total) {
    fit_run *r = user;
    (void)total;
    progress_update(&r->bar, (int64_t)done * r->calib_n, NULL);
}

/* The data set, opened before any work (its errors are the command's first words). */
static int open_data(fit_run *r) {
    const fit_opts *o = r->o;
    return data_arg_open(&o->train.data, PROG, o->train.seed, 0, r->ctx, &r->data) != QAT_OK ? fail(r) : 0;
}

/* What the C generator refuses whatever the training gives, said before
 * the training: a convolution with sub-channel weights (several scales
 * along a row; only linear ops have the block conversions in C). The
 * model as --model and the options make it, prepared, at its first
 * weights: the same weight types as trained. */
static int precheck_model(fit_run *r) {
    const fit_opts *o = r->o;
    qat_ctx *pctx = qat_ctx_new();
    if (!pctx) return cli_fail(PROG, o->json, 1, "out of memory");
    qat_model *m = NULL;
    char name[64];
    uint32_t crc;
    int rc = 0;
    if (train_make_model(&o->train, pctx, &m, name, sizeof name, &crc) != QAT_OK ||
        qat_prepare(m, &o->train.qcfg) != QAT_OK)
        rc = cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(pctx)), "%s", qat_ctx_error(pctx));
    for (int i = 0; !rc && i < qat_model_n_layers(m); i++) {
        qat_qtype q;
        if (qat_model_layer_kind(m, i) != QAT_LAYER_CONV2D || qat_model_weight_qtype(m, i, pctx, &q) != QAT_OK)
            continue;
        if (qat_qtype_axis(&q) == -2)
            rc = cli_fail(PROG, o->json, EXIT_USAGE, "layer %s (conv2d) has sub-channel weights: the generated C "
                          "requantizes a convolution once per output channel (docs/subchannel.md); give it per-channel "
                          "weights (granularity=channel on its line of the model file)", qat_model_layer_name(m, i));
    }
    qat_ctx_clear_error(pctx);
    qat_ctx_free(pctx);
    return rc;
}

/* With --checkpoint, the fine-tune takes this run's quantization options
 * while the measurement took the checkpoint's: they must agree, or the
 * exported model would not be the one measured (activations at other
 * bits, say). The weights' bits are fit's own choice. */
static int same_quantization(fit_run *r) {
    const qat_prepare_config *c = qat_model_qat_config(r->m, NULL), *o = &r->o->train.qcfg;
    if (!c || c->lsq) return 0; /* an LSQ checkpoint: qat_fit_measure says it takes none */
    const char *opt = c->abits != o->abits                   ? "--abits"
                      : c->io_bits != o->io_bits             ? "--io-bits"
                      : c->wgran != o->wgran || (c->wgran == QAT_GRAN_BLOCK && c->block != o->block) ||
                              (c->wgran == QAT_GRAN_AXES && memcmp(c->blocks, o->blocks, sizeof c->blocks))
                          ? "--granularity"
                      : c->block_scale_bits != o->block_scale_bits ? "--block-scales"
                      : c->ragged != o->ragged                     ? "--ragged-blocks"
                      : c->aobs != o->aobs                         ? "--observer"
                      : c->window != o->window                     ? "--window"
                      : c->pool_keeps_scale != o->pool_keeps_scale ? "--target"
                                                                   : NULL;
    if (!opt) return 0;
    char bits[64] = "";
    if (c->abits != o->abits) snprintf(bits, sizeof bits, " (%d, this run %d)", c->abits, o->abits);
    else if (c->io_bits != o->io_bits) snprintf(bits, sizeof bits, " (%d, this run %d)", c->io_bits, o->io_bits);
    return cli_fail(PROG, r->o->json, EXIT_USAGE, "%s was trained with another %s than this run's%s: fit measures the "
                    "checkpoint's quantization and fine-tunes with this run's options; give the ones it was trained with",
                    r->base, opt, bits);
}

/* The trained model from its checkpoint (a file that cannot be read or is damaged: status 1, as every command's),
 * and the calibration split. */
static int load(fit_run *r) {
    const fit_opts *o = r->o;
    if (qat_checkpoint_model(r->ctx, r->base, &r->m, NULL, 0) != QAT_OK)
        return cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(r->ctx));
    if (!qat_model_prepared(r->m))
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s is a float checkpoint: fit needs a QAT-trained one (qat train "
                        "--qat), or give --model and fit trains it", r->base);
    int rc = o->checkpoint ? same_quantization(r) : 0;
    if (rc) return rc;
    const qat_split_info *ti = qat_dataset_info(r->data, QAT_SPLIT_TRAIN);
    qat_task_kind k = !o->train.task ? (ti->target == QAT_TARGET_CLASS ? QAT_TASK_CLASSIFY
                                        : ti->target == QAT_TARGET_VALUES ? QAT_TASK_REGRESS : QAT_TASK_AUTOENCODER)
                      : !strcmp(o->train.task, "classify") ? QAT_TASK_CLASSIFY
                      : !strcmp(o->train.task, "regress") ? QAT_TASK_REGRESS : QAT_TASK_AUTOENCODER;
    r->task = (qat_task){.kind = k};
    const qat_split_info *vi = qat_dataset_info(r->data, QAT_SPLIT_VAL);
    r->calib = vi ? (qat_fit_data){r->data, QAT_SPLIT_VAL, 0, &r->task}
                  : (qat_fit_data){r->data, QAT_SPLIT_TRAIN, o->calib, &r->task};
    r->calib_n = vi ? vi->n : o->calib < ti->n ? o->calib : ti->n;
    /* data that do not fit the model, or in other units than its normalization: refused before any measurement */
    for (int s = 0; s < QAT_SPLIT_COUNT; s++)
        if (qat_dataset_info(r->data, (qat_split)s) && tools_data_fits(r->m, r->data, (qat_split)s, &k) != QAT_OK)
            return cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s: %s", o->train.data.path,
                            qat_ctx_error(r->ctx));
    if (data_arg_check_units(&o->train.data, r->data, r->calib.split, r->calib_n, qat_model_normalization(r->m),
                             r->ctx) != QAT_OK)
        return cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s: %s", o->train.data.path,
                        qat_ctx_error(r->ctx));
    fprintf(stderr, "%s: calibration: %lld samples of the %s split\n", PROG, (long long)r->calib_n,
            vi ? "val" : "train");
    return 0;
}

/* The generated C of q (the plan the choice counts, the fit's rounding),
 * built around CYCLE_SAMPLES calibration samples and timed under qemu in dir:
 * total and op[q.n_ops] (fit_cycles.h). */
static int time_program(fit_run *r, qat_qmodel *q, const char *dir, int64_t *total, int64_t *op) {
    char why[600], msg[512] = "";
    qat_rounding_parse(r->o->rounding, &q->rounding);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return cli_fail(PROG, r->o->json, 1, "%s: cannot make it: %s", dir, strerror(errno));
    const qat_split_info *si = qat_dataset_info(r->data, r->calib.split);
    int samples = r->calib_n < CYCLE_SAMPLES ? (int)r->calib_n : CYCLE_SAMPLES;
    int32_t first[CYCLE_SAMPLES] = {0, 1, 2, 3};
    float *x = malloc((size_t)samples * (size_t)si->x_numel * sizeof *x);
    if (!x) return cli_fail(PROG, r->o->json, 1, "out of memory");
    if (qat_dataset_read(r->data, r->calib.split, first, samples, x, NULL, NULL, NULL) != QAT_OK) return free(x), fail(r);
    qat_codegen_source src;
    if (qat_codegen_generate_ex(q, r->o->name, &(qat_codegen_options){.small_ram = r->t.small_ram}, &src, msg,
                                sizeof msg) != QAT_OK)
        return free(x), cli_fail(PROG, r->o->json, 1, "the C generator: %s", msg);
    fit_cycle_tools tools = {r->o->cc, r->o->qemu, r->o->plugin};
    int rc = fit_cycles_measure(&tools, dir, r->o->name, &src, x, samples, si->x_numel, total, op, q->n_ops, why,
                                sizeof why);
    qat_codegen_source_free(&src);
    free(x);
    return rc ? cli_fail(PROG, r->o->json, 1, "%s", why) : 0;
}

/* Each fitted layer's op cycles at each width: the program with every
 * fitted layer at width k, timed once per k (DIR/cycles/wB); the ops of
 * the other layers are the same in every build, and their cycles (the
 * largest of the builds') go to t.cycles. */
static int measure_cycles(fit_run *r) {
    qat_fit_table *t = &r->t;
    int n = t->n_layers, rc = 0;
    int *uniform = malloc((size_t)n * sizeof *uniform);
    if (!uniform) return cli_fail(PROG, r->o->json, 1, "out of memory");
    char dir[4200];
    path_in(dir, sizeof dir, r->o->out, "cycles");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) rc = cli_fail(PROG, r->o->json, 1, "%s: cannot make it: %s", dir, strerror(errno));
    t->cycles = 0;
    for (int k = 0; k < r->o->n_bits && !rc; k++) {
        for (int i = 0; i < n; i++) uniform[i] = k;
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/w%d", dir, r->o->bits[k]);
        fprintf(stderr, "%s: fit 3/5: timing every fitted layer at %d bits on a Cortex-M4 under qemu (%s)\n", PROG,
                r->o->bits[k], sub);
        qat_ctx *pctx = qat_ctx_new();
        qat_qmodel q;
        int64_t total = 0, *op = NULL;
        if (!pctx || qat_fit_apply(r->m, t, uniform) != QAT_OK) rc = fail(r);
        else if (qat_qmodel_lower(r->m, 0, NULL, pctx, &q) != QAT_OK) rc = cli_fail(PROG, r->o->json, 1, "%s", qat_ctx_error(pctx));
        else if (!(op = calloc((size_t)q.n_ops, sizeof *op))) rc = cli_fail(PROG, r->o->json, 1, "out of memory");
        else rc = time_program(r, &q, sub, &total, op);
        int64_t rest = total;
        for (int i = 0; i < n && !rc; i++) { /* a layer the output does not depend on has no ops: no cycles */
            int64_t c = 0;
            for (int j = 0; j < q.n_ops; j++)
                if (!strcmp(q.ops[j].name, t->layers[i].name)) c += op[j];
            t->layers[i].cycles[k] = c, rest -= c;
        }
        if (!rc && rest > t->cycles) t->cycles = rest;
        free(op);
        qat_ctx_free(pctx);
    }
    free(uniform);
    if (!rc && qat_fit_apply(r->m, t, NULL) != QAT_OK) rc = fail(r);
    t->has_cycles = !rc;
    return rc;
}

static const char *metric_name(const fit_run *r) { return r->task.kind == QAT_TASK_CLASSIFY ? "accuracy" : "mse"; }
static double shown(const fit_run *r, double v) { return r->task.kind == QAT_TASK_CLASSIFY ? 100 * v : v; }

/* The per-layer table: on stderr, and every measurement in DIR/layers.csv. */
static int print_table(fit_run *r) {
    const qat_fit_table *t = &r->t;
    char path[4200];
    path_in(path, sizeof path, r->o->out, "layers.csv");
    FILE *f = fopen(path, "w");
    if (!f) return cli_fail(PROG, r->o->json, 1, "%s: %s", path, strerror(errno));
    fprintf(f, "layer,weights,bits,constants_bytes,arena_bytes,arena_bytes_small,cycles,calib_loss,loss_increase,calib_%s,"
            "chosen\n", metric_name(r));
    fprintf(stderr, "\n%-12s %9s %5s %12s %12s %14s %10s   (each layer alone; calibration %s as trained %.2f%s)\n", "layer",
            "weights", "bits", "Δconstants", "cycles", "Δloss", metric_name(r), metric_name(r), shown(r, t->metric),
            r->task.kind == QAT_TASK_CLASSIFY ? " %" : "");
    for (int i = 0; i < t->n_layers; i++) {
        const qat_fit_layer *l = &t->layers[i];
        for (int k = 0; k < l->n; k++) {
            bool pick = r->choice[i] == k;
            char cyc[24] = "";
            if (t->has_cycles) snprintf(cyc, sizeof cyc, "%lld", (long long)l->cycles[k]);
            fprintf(f, "%s,%lld,%d,%lld,%lld,%lld,%s,%.6f,%.6f,%.6f,%d\n", l->name, (long long)l->weights, l->bits[k],
                    (long long)l->flash[k], (long long)l->arena[k], (long long)l->arena_small[k], cyc, l->loss[k],
                    l->loss[k] - t->loss, l->metric[k], pick);
            fprintf(stderr, "%-12s %9lld %5d %+12lld %12s %+14.5f %10.2f %s\n", k ? "" : l->name, (long long)l->weights,
                    l->bits[k], (long long)(l->flash[k] - t->flash), t->has_cycles ? cyc : "-", l->loss[k] - t->loss,
                    shown(r, l->metric[k]), pick ? "<- chosen" : "");
        }
    }
    if (t->has_cycles)
        fprintf(stderr, "%-12s %9s %5s %12s %12lld   (the other ops' cycles)\n", "(rest)", "", "", "", (long long)t->cycles);
    return fclose(f) ? cli_fail(PROG, r->o->json, 1, "%s: cannot write it", path) : 0;
}

/* The front, each point measured (fake-quantized, calibration split),
 * with the uniform widths beside it: stderr, DIR/front.csv, the plot. */
static int front(fit_run *r, int64_t arena) {
    const qat_fit_table *t = &r->t;
    int n = t->n_layers, cap = (int)r->o->front;
    int *choices = qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, (size_t)(cap + QAT_FIT_MAX_CHOICES) * (size_t)n * sizeof(int));
    qat_fit_result *p = qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, (size_t)(cap + QAT_FIT_MAX_CHOICES) * sizeof *p);
    double *metric = qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, (size_t)(cap + QAT_FIT_MAX_CHOICES) * sizeof *metric);
    if (!choices || !p || !metric) return fail(r);
    int np = qat_fit_front(t, arena, r->cycles_target, r->ctx, cap, choices, p);
    if (np < 0) return fail(r);
    int nu = 0; /* the uniform configurations: every layer at candidate k */
    for (int k = 0; k < r->o->n_bits; k++, nu++) {
        int *c = choices + (size_t)(np + nu) * (size_t)n;
        for (int i = 0; i < n; i++) c[i] = k;
        p[np + nu] = qat_fit_predict(t, c);
    }
    progress_start(&r->bar, "front points", (int64_t)(np + nu) * r->calib_n);
    for (int k = 0; k < np + nu; k++) {
        qat_metrics mt;
        if (qat_fit_apply(r->m, t, choices + (size_t)k * (size_t)n) != QAT_OK ||
            qat_model_evaluate(r->m, r->calib.data, r->calib.split, r->calib.limit, &r->task, NULL, &mt) != QAT_OK)
            return fail(r);
        metric[k] = qat_metrics_get(&mt, metric_name(r), NULL);
        qat_metrics_free(&mt);
        progress_update(&r->bar, (int64_t)(k + 1) * r->calib_n, NULL);
    }
    progress_end(&r->bar, NULL);
    if (qat_fit_apply(r->m, t, NULL) != QAT_OK) return fail(r);
    char path[4200];
    path_in(path, sizeof path, r->o->out, "front.csv");
    FILE *f = fopen(path, "w");
    if (!f) return cli_fail(PROG, r->o->json, 1, "%s: %s", path, strerror(errno));
    fprintf(f, "kind,constants_bytes,arena_bytes,predicted_cycles,predicted_loss_increase,calib_%s,bits\n", metric_name(r));
    fprintf(stderr, "\nthe front (before fine-tuning; calibration split), and the uniform widths:\n%-8s %12s %12s %14s %10s  %s\n",
            "", "constants", "cycles", "Δloss (sum)", metric_name(r), "bits per layer");
    for (int k = 0; k < np + nu; k++) {
        const int *c = choices + (size_t)k * (size_t)n;
        char bits[512] = "";
        size_t at = 0;
        for (int i = 0; i < n && at < sizeof bits - 4; i++)
            at += (size_t)snprintf(bits + at, sizeof bits - at, "%s%d", i ? " " : "", t->layers[i].bits[c[i]]);
        bool is_chosen = !memcmp(c, r->choice, (size_t)n * sizeof *c);
        const char *kind = k < np ? (is_chosen ? "chosen" : "front") : "uniform";
        char cyc[24] = "";
        if (t->has_cycles) snprintf(cyc, sizeof cyc, "%lld", (long long)p[k].cycles);
        fprintf(f, "%s,%lld,%lld,%s,%.6f,%.6f,%s\n", kind, (long long)p[k].flash, (long long)p[k].arena, cyc,
                p[k].sensitivity, metric[k], bits);
        fprintf(stderr, "%-8s %12lld %12s %+14.5f %10.2f  %s%s%s\n", kind, (long long)p[k].flash, t->has_cycles ? cyc : "-",
                p[k].sensitivity, shown(r, metric[k]), bits, p[k].flash <= r->o->flash ? "" : "  (over --flash)",
                !r->o->cycles || p[k].cycles <= r->cycles_target ? "" : "  (over --cycles less the margin)");
    }
    if (fclose(f)) return cli_fail(PROG, r->o->json, 1, "%s: cannot write it", path);
    /* the picture: calibration metric against constants, the budget as a line */
    char gp[4200], *script = NULL;
    size_t len = 0;
    FILE *s = open_memstream(&script, &len);
    if (!s) return cli_fail(PROG, r->o->json, 1, "out of memory");
    path_in(path, sizeof path, r->o->out, "front.png");
    fprintf(s, "set terminal pngcairo size 900,600\nset output '%s'\nset datafile separator ','\n"
            "set xlabel 'constants in flash (bytes)'\nset ylabel 'calibration %s%s'\nset key bottom right\nset grid\n"
            "set arrow from %lld, graph 0 to %lld, graph 1 nohead dt 2 lc rgb 'red'\n"
            "set label 'budget' at %lld, graph 0.95 offset 1,0 tc rgb 'red'\n",
            path, metric_name(r), r->task.kind == QAT_TASK_CLASSIFY ? " (%)" : "", (long long)r->o->flash,
            (long long)r->o->flash, (long long)r->o->flash);
    fprintf(s, "plot '-' using 1:2 with linespoints pt 7 title 'front', '-' using 1:2 with points pt 5 ps 1.5 title "
            "'uniform', '-' using 1:2 with points pt 9 ps 2.5 lc rgb 'red' title 'chosen'\n");
    for (int pass = 0; pass < 3; pass++) {
        for (int k = 0; k < np + nu; k++) {
            bool is_chosen = k < np && !memcmp(choices + (size_t)k * (size_t)n, r->choice, (size_t)n * sizeof(int));
            if ((pass == 0 && k < np) || (pass == 1 && k >= np) || (pass == 2 && is_chosen))
                fprintf(s, "%lld,%.6f\n", (long long)p[k].flash, shown(r, metric[k]));
        }
        fprintf(s, "e\n");
    }
    fclose(s);
    const char *g = find_gnuplot(gp, sizeof gp);
    if (!g) fprintf(stderr, "%s: no gnuplot: %s not drawn (Debian: apt-get install gnuplot-nox)\n", PROG, path);
    else if (run_gnuplot(g, script, len) != 0) fprintf(stderr, "%s: gnuplot failed: %s not drawn\n", PROG, path);
    else fprintf(stderr, "%s: wrote %s\n", PROG, path);
    free(script);
    return 0;
}

/* DIR/fit.qnet: the model's text with the chosen widths as its layers' own. */
static int write_qnet(fit_run *r) {
    int64_t need = qat_model_to_text(r->m, NULL, 0);
    char *text = need > 0 ? malloc((size_t)need + 1) : NULL;
    if (!text || qat_model_to_text(r->m, text, (size_t)need + 1) != need) return free(text), fail(r);
    qat_model *fresh = qat_model_new(r->ctx);
    qat_status st = fresh ? qat_model_from_text(fresh, text, r->qnet) : qat_ctx_status(r->ctx);
    free(text);
    for (int i = 0; st == QAT_OK && i < r->t.n_layers; i++) {
        const qat_fit_layer *l = &r->t.layers[i];
        qat_layer_precision p;
        qat_model_layer_precision(fresh, l->name, &p);
        p.wbits = l->bits[r->choice[i]];
        st = qat_model_set_layer_precision(fresh, l->name, &p);
    }
    if (st != QAT_OK) return fail(r);
    need = qat_model_to_text(fresh, NULL, 0);
    text = need > 0 ? malloc((size_t)need + 1) : NULL;
    if (!text || qat_model_to_text(fresh, text, (size_t)need + 1) != need) return free(text), fail(r);
    FILE *f = fopen(r->qnet, "w");
    bool ok = f && fprintf(f, "# qat fit: the weight bits of every fitted layer chosen for %lld bytes of constants\n%s",
                           (long long)r->o->flash, text) > 0;
    ok = f && !fclose(f) && ok;
    free(text);
    return ok ? 0 : cli_fail(PROG, r->o->json, 1, "%s: cannot write it", r->qnet);
}

/* A quantized program's integer metric on the test split. */
static int int_metric(fit_run *r, const qat_qmodel *q, double *out) {
    qat_engine *e = qat_engine_new(r->ctx, q, QAT_ENGINE_INT, 256);
    if (!e) return fail(r);
    qat_engine_eval how = {.limit = r->o->train.limit_test, .batch = 256};
    qat_metrics mt;
    qat_status st = qat_engine_evaluate(r->ctx, e, q, r->data, QAT_SPLIT_TEST, &r->task, &how, &mt);
    qat_engine_free(e);
    if (st != QAT_OK) return fail(r);
    *out = qat_metrics_get(&mt, metric_name(r), NULL);
    qat_metrics_free(&mt);
    return 0;
}

/* Fine-tuning's peak learning rate: --ft-lr, else a tenth of the
 * training's: this run's --lr when given or when step 1 trained, else the
 * one --checkpoint records (train's default when it records none). */
static int ft_lr_of(fit_run *r) {
    const fit_opts *o = r->o;
    double lr = o->train.lr;
    if (o->ft_lr > 0) {
        r->ft_lr = o->ft_lr;
        return 0;
    }
    if (o->checkpoint && !o->train.lr_set) {
        char config[8192];
        double rec;
        if (qat_checkpoint_config(r->ctx, o->checkpoint, config, sizeof config) == QAT_OK &&
            train_config_number(config, "lr", &rec))
            lr = rec;
        else
            fprintf(stderr, "%s: %s records no learning rate: fine-tuning at a tenth of %g (--lr or --ft-lr to set it)\n",
                    PROG, o->checkpoint, lr);
        qat_ctx_clear_error(r->ctx);
    }
    r->ft_lr = lr / 10;
    if (!(r->ft_lr >= 1e-7 && r->ft_lr <= 10))
        return cli_fail(PROG, o->json, EXIT_USAGE, "fine-tuning at a tenth of %g is out of 1e-7..10: give --ft-lr", lr);
    return 0;
}

/* qat_codegen_c with the generator's options; info (may be NULL) what the code needs. */
static qat_status write_c(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                          const qat_codegen_options *copt, qat_codegen_info *info) {
    qat_save_set *set = qat_save_set_new(ctx);
    if (!set) return qat_ctx_status(ctx);
    qat_status st = qat_codegen_stage_ex(ctx, q, dir, name, copt, set, info);
    if (st == QAT_OK) st = qat_save_set_commit(set);
    qat_save_set_free(set);
    return st;
}

/* The stack (and the C library's other writable bytes) of the model's C
 * as it stands, built for --core in dir with the default plan or the
 * small-RAM one. */
static int build_stack(fit_run *r, bool small, const char *dir, int64_t *stack) {
    const fit_opts *o = r->o;
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    char why[600];
    fit_build b;
    qat_codegen_options copt = {.small_ram = small};
    qat_codegen_info info;
    int rc = 0;
    if (!pctx) rc = cli_fail(PROG, o->json, 1, "out of memory");
    else if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        rc = cli_fail(PROG, o->json, 1, "%s: cannot make it: %s", dir, strerror(errno));
    else if (qat_qmodel_lower(r->m, 0, NULL, pctx, &q) != QAT_OK || write_c(pctx, &q, dir, o->name, &copt, &info) != QAT_OK)
        rc = cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(pctx));
    else if (fit_build_c(dir, o->name, o->core, o->cc, &b, why, sizeof why) != 0)
        rc = cli_fail(PROG, o->json, 1, "%s", why);
    else *stack = b.stack + (b.ram - info.arena_bytes); /* other writable bytes count too */
    qat_ctx_free(pctx);
    return rc;
}

/* What --ram must hold besides the arena, for any choice: the largest
 * stack of the model's C as trained and with every fitted layer at each
 * candidate width (a packed width's kernels take other frames than the
 * byte ones; a choice calls a subset of the kernels of those builds).
 * The builds go to DIR/stack[-small]/trained and .../wB. */
static int plan_stack(fit_run *r, bool small, int64_t *stack) {
    const fit_opts *o = r->o;
    char dir[4200], sub[4300];
    path_in(dir, sizeof dir, o->out, small ? "stack-small" : "stack");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return cli_fail(PROG, o->json, 1, "%s: cannot make it: %s", dir, strerror(errno));
    snprintf(sub, sizeof sub, "%s/trained", dir);
    int rc = build_stack(r, small, sub, stack);
    int *uniform = malloc((size_t)r->t.n_layers * sizeof *uniform);
    if (!rc && !uniform) rc = cli_fail(PROG, o->json, 1, "out of memory");
    for (int k = 0; k < o->n_bits && !rc; k++) {
        int64_t s = 0;
        for (int i = 0; i < r->t.n_layers; i++) uniform[i] = k;
        snprintf(sub, sizeof sub, "%s/w%d", dir, o->bits[k]);
        if (qat_fit_apply(r->m, &r->t, uniform) != QAT_OK) rc = fail(r);
        else if (!(rc = build_stack(r, small, sub, &s)) && s > *stack) *stack = s;
    }
    free(uniform);
    if (qat_fit_apply(r->m, &r->t, NULL) != QAT_OK && !rc) rc = fail(r);
    return rc;
}

static int fit(fit_run *r) {
    fit_opts *o = r->o;
    int rc;
    char why[600];
    /* what can be refused is refused before the folder is made or anything trains */
    if (!o->no_link && !fit_toolchain_found(o->cc, why, sizeof why))
        return cli_fail(PROG, o->json, 1, "%s; or give --no-link to stop after the export", why);
    r->cycles_target = o->cycles ? (int64_t)((double)o->cycles * (1.0 - o->cycle_margin / 100.0)) : 0;
    if (o->cycles && !fit_cycle_tools_found(&(fit_cycle_tools){o->cc, o->qemu, o->plugin}, why, sizeof why))
        return cli_fail(PROG, o->json, 1, "--cycles: %s", why);
    if ((rc = open_data(r))) return rc;
    if (!o->checkpoint && (rc = precheck_model(r))) return rc;
    if (o->checkpoint) {
        snprintf(r->base, sizeof r->base, "%s", o->checkpoint);
        if ((rc = load(r))) return rc;
    }
    if ((rc = check_out_dir(o, &r->made_out))) return rc;
    snprintf(fit_made_dir, sizeof fit_made_dir, "%s", o->out);
    snprintf(fit_made_mark, sizeof fit_made_mark, "%s/%s", o->out, FIT_MARK);
    fit_made = r->made_out;
    if ((rc = clear_products(r))) return rc;
    path_in(r->qnet, sizeof r->qnet, o->out, "fit.qnet");
    path_in(r->ckpt, sizeof r->ckpt, o->out, "fit.ckpt.h5");
    path_in(r->qfile, sizeof r->qfile, o->out, "fit.qat.h5");
    path_in(r->cdir, sizeof r->cdir, o->out, "c");
    /* 1. the model trained with fake quantization */
    if (!o->checkpoint) {
        path_in(r->base, sizeof r->base, o->out, "trained.ckpt.h5");
        fprintf(stderr, "%s: fit 1/5: training %s\n", PROG, r->base);
        const char *extra[] = {"--out", r->base};
        if ((rc = train_with(r, extra, 2, false)) || (rc = load(r))) return rc;
    }
    if ((rc = ft_lr_of(r))) return rc;
    /* 2. each layer alone at each width */
    fprintf(stderr, "%s: fit 2/5: measuring each layer at %d widths\n", PROG, o->n_bits);
    int count = 0; /* an upper bound of the fitted layers (those the model file sets are skipped) */
    for (int i = 1; i < qat_model_n_layers(r->m); i++) {
        qat_layer_kind k = qat_model_layer_kind(r->m, i);
        count += k == QAT_LAYER_LINEAR || k == QAT_LAYER_CONV2D;
    }
    progress_start(&r->bar, "measure", (int64_t)(count ? count : 1) * o->n_bits * r->calib_n);
    if (qat_fit_measure(r->m, &r->calib, o->bits, o->n_bits, r->ctx, on_measure, r, &r->t) != QAT_OK) return fail(r);
    progress_end(&r->bar, NULL);
    /* 3. the choice: the stack the trained model's build needs is kept out of the arena's share of --ram */
    int64_t arena = 0, stack = 0;
    if (o->ram && o->no_link)
        fprintf(stderr, "%s: note: --no-link: the stack is not measured (it needs the build); the arena alone is held "
                "to --ram, and the stack comes on top of it\n", PROG);
    if (o->ram) {
        if (!o->no_link && (rc = plan_stack(r, false, &stack))) return rc;
        arena = o->ram - stack;
        if (arena < 1) return cli_fail(PROG, o->json, 1, "--ram %lld: the stack alone needs %lld bytes", (long long)o->ram,
                                       (long long)stack);
    }
    r->choice = qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, (size_t)r->t.n_layers * sizeof(int));
    if (!r->choice) return fail(r);
    /* flash alone first (its message names the least possible); then the
     * arena with the default plan, and failing that the small-RAM one */
    qat_status st = qat_fit_solve(&r->t, o->flash, 0, r->cycles_target, r->ctx, r->choice, &r->chosen);
    if (st == QAT_OK && arena) {
        st = qat_fit_solve(&r->t, o->flash, arena, r->cycles_target, r->ctx, r->choice, &r->chosen);
        if (st != QAT_OK) {
            qat_ctx_clear_error(r->ctx);
            r->t.small_ram = true; /* whose kernels take another stack: the trained model's, built with that plan */
            if (!o->no_link && (rc = plan_stack(r, true, &stack))) return rc;
            arena = o->ram - stack;
            if (arena < 1) return cli_fail(PROG, o->json, 1, "--ram %lld: the stack alone needs %lld bytes (small-RAM "
                                           "plan)", (long long)o->ram, (long long)stack);
            st = qat_fit_solve(&r->t, o->flash, arena, r->cycles_target, r->ctx, r->choice, &r->chosen);
            if (st == QAT_OK)
                fprintf(stderr, "%s: the default plan's arena does not fit --ram; the small-RAM plan does (qat export "
                        "--c-ram small: some cycles more, docs/codegen.md \"RAM\")\n", PROG);
        }
    }
    if (st == QAT_OK && o->cycles) { /* the cycles of the plan just chosen, then the choice under all three */
        if ((rc = measure_cycles(r))) return rc;
        st = qat_fit_solve(&r->t, o->flash, arena, r->cycles_target, r->ctx, r->choice, &r->chosen);
    }
    if (st != QAT_OK) {
        if (o->ram && stack) /* say where the arena's allowance came from; a budget not met is status 1 */
            return cli_fail(PROG, o->json, 1, "%s (--ram %lld less %lld bytes of stack and C library data)",
                            qat_ctx_error(r->ctx), (long long)o->ram, (long long)stack);
        if (o->cycles && strstr(qat_ctx_error(r->ctx), "cycles"))
            return cli_fail(PROG, o->json, 1, "%s (--cycles %lld less the %g %% margin)", qat_ctx_error(r->ctx),
                            (long long)o->cycles, o->cycle_margin);
        return cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(r->ctx));
    }
    if ((rc = print_table(r)) || (rc = front(r, arena))) return rc;
    fprintf(stderr, "\n%s: fit 3/5: chose %lld bytes of constants (predicted; --flash %lld), arena %lld (%s plan)%s",
            PROG, (long long)r->chosen.flash, (long long)o->flash, (long long)r->chosen.arena,
            r->t.small_ram ? "small-RAM" : "default", o->ram ? "" : " (no --ram)");
    if (o->cycles)
        fprintf(stderr, ", %lld cycles (--cycles %lld less %g %%: %lld)", (long long)r->chosen.cycles,
                (long long)o->cycles, o->cycle_margin, (long long)r->cycles_target);
    fputc('\n', stderr);
    /* the choice minimises the summed loss; on a model far from trained, a
     * width can lower the calibration loss and still cost accuracy: said */
    for (int i = 0; r->task.kind == QAT_TASK_CLASSIFY && i < r->t.n_layers; i++) {
        const qat_fit_layer *L = &r->t.layers[i];
        int k = r->choice[i];
        double drop = 100 * (r->t.metric - L->metric[k]);
        if (k != L->trained && drop > 2 && L->loss[k] <= r->t.loss)
            fprintf(stderr, "%s: note: %s at %d bits lowers the calibration loss but costs %.1f points of accuracy "
                    "alone; the loss may mislead on a model this far from trained (more training, or --bits without "
                    "%d)\n", PROG, L->name, L->bits[k], drop, L->bits[k]);
    }
    double base_int = 0;
    { /* the model as trained, in integers, for the report */
        qat_ctx *pctx = qat_ctx_new();
        qat_qmodel q;
        if (qat_qmodel_lower(r->m, 0, NULL, pctx, &q) != QAT_OK) rc = cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(pctx));
        else rc = int_metric(r, &q, &base_int);
        qat_ctx_free(pctx);
        if (rc) return rc;
    }
    /* 4. fine-tune the choice from the trained weights; export it */
    if ((rc = write_qnet(r))) return rc;
    char ft[16], lr[32];
    snprintf(ft, sizeof ft, "%ld", o->ft_epochs);
    /* from trained weights, a tenth of the peak by default: at the training
     * run's own peak the fine-tune's result moves by more than the choice
     * changes it (docs/fit.md, "Fine-tuning's learning rate") */
    snprintf(lr, sizeof lr, "%.9g", r->ft_lr);
    fprintf(stderr, "%s: fit 4/5: fine-tuning %s for %s epoch(s) at a peak learning rate of %s from %s\n", PROG, r->qnet,
            ft, lr, r->base);
    const char *extra[] = {"--model-file", r->qnet, "--init", r->base, "--epochs", ft, "--float-epochs", "0",
                           "--out", r->ckpt, "--lr", lr};
    if ((rc = train_with(r, extra, 12, true))) return rc;
    const char *exp[] = {"export", "--checkpoint", r->ckpt, "--out", r->qfile, "--c", r->cdir, "--name", o->name,
                         "--c-ram", r->t.small_ram ? "small" : "fast", "--rounding", o->rounding, NULL};
    if ((rc = cmd_export(13, (char **)exp))) return rc;
    qat_qmodel q;
    double fit_int = 0;
    if (qat_qmodel_load(r->ctx, r->qfile, &q) != QAT_OK) return fail(r);
    if ((rc = int_metric(r, &q, &fit_int))) return rc;
    const char *unit = r->task.kind == QAT_TASK_CLASSIFY ? " %" : "";
    fprintf(stderr, "%s: integer %s on the test split: fitted %.2f%s, as trained %.2f%s\n", PROG, metric_name(r),
            shown(r, fit_int), unit, shown(r, base_int), unit);
    /* 5. the linked binary */
    fit_build b = {0};
    int64_t cycles = 0;
    bool fits = true, checked = !o->no_link;
    if (checked) {
        fprintf(stderr, "%s: fit 5/5: building %s/%s.c for %s with %s\n", PROG, r->cdir, o->name, o->core, o->cc);
        if (fit_build_c(r->cdir, o->name, o->core, o->cc, &b, why, sizeof why) != 0)
            return cli_fail(PROG, o->json, 1, "%s", why);
        bool flash_ok = b.constants <= o->flash, ram_ok = !o->ram || b.ram + b.stack <= o->ram;
        fits = flash_ok && ram_ok;
        fprintf(stderr, "%s: the linked binary (%s/%s.elf): constants %lld B (--flash %lld: %s), code %lld B, RAM %lld B "
                "= %lld writable + %lld stack%s", PROG, r->cdir, o->name, (long long)b.constants,
                (long long)o->flash, flash_ok ? "fits" : "OVER", (long long)b.code, (long long)(b.ram + b.stack),
                (long long)b.ram, (long long)b.stack, b.stack_bounded ? "" : " (not bounded: dynamic frames or recursion)");
        if (o->ram) fprintf(stderr, " (--ram %lld: %s)\n", (long long)o->ram, ram_ok ? "fits" : "OVER");
        else fprintf(stderr, " (no --ram budget)\n");
        if (!b.stack_bounded) fits = false;
        if (o->cycles) {
            char dir[4300];
            int64_t *op = calloc((size_t)q.n_ops, sizeof *op);
            snprintf(dir, sizeof dir, "%s/m4", r->cdir);
            if (!op) return cli_fail(PROG, o->json, 1, "out of memory");
            rc = time_program(r, &q, dir, &cycles, op);
            free(op);
            if (rc) return rc;
            bool cycles_ok = cycles <= o->cycles;
            fits = fits && cycles_ok;
            fprintf(stderr, "%s: its run on a Cortex-M4 under qemu (%s): %lld estimated cycles per inference (--cycles "
                    "%lld: %s)\n", PROG, dir, (long long)cycles, (long long)o->cycles, cycles_ok ? "fits" : "OVER");
            if (!cycles_ok) /* docs/fit.md, "The margin" */
                fprintf(stderr, "%s: predicted %lld (%+.1f %% off): the layers were timed with the trained weights, and "
                        "fine-tuning moved their requantization constants; a --cycle-margin above %g %% leaves room for "
                        "that\n", PROG, (long long)r->chosen.cycles,
                        100.0 * ((double)cycles - (double)r->chosen.cycles) / (double)r->chosen.cycles, o->cycle_margin);
        }
    } else {
        fprintf(stderr, "%s: not linked (--no-link): predicted constants %lld B, arena %lld B (the stack not counted); "
                "the budgets are not checked on a binary\n", PROG, (long long)r->chosen.flash, (long long)r->chosen.arena);
    }
    if (o->json) {
        printf("{\"fits\": %s, \"checked_on_binary\": %s, \"c_ram\": \"%s\", \"core\": \"%s\", \"flash_budget\": %lld, "
               "\"ram_budget\": %lld, \"cycles_budget\": %lld, \"predicted_cycles\": %lld, \"cycles\": %lld, "
               "\"predicted_constants\": %lld, \"predicted_arena\": %lld, \"constants\": %lld, \"code\": %lld, "
               "\"ram\": %lld, \"stack\": %lld, \"stack_measured\": %s, \"trained_int_%s\": %.6f, \"fitted_int_%s\": %.6f, \"bits\": {",
               fits ? "true" : "false", checked ? "true" : "false", r->t.small_ram ? "small" : "fast", o->core,
               (long long)o->flash, (long long)o->ram, (long long)o->cycles, (long long)r->chosen.cycles, (long long)cycles,
               (long long)r->chosen.flash, (long long)r->chosen.arena, (long long)b.constants, (long long)b.code,
               (long long)(b.ram + b.stack), (long long)b.stack, checked ? "true" : "false", metric_name(r), base_int, metric_name(r), fit_int);
        for (int i = 0; i < r->t.n_layers; i++)
            printf("%s\"%s\": %d", i ? ", " : "", r->t.layers[i].name, r->t.layers[i].bits[r->choice[i]]);
        printf("}}\n");
    }
    if (!fits) return fprintf(stderr, "%s: the build does NOT fit the budgets\n", PROG), 1;
    fprintf(stderr, "%s: %s: %s/%s.{h,c} and %s\n", PROG, checked ? "fits" : "done (not checked)", r->cdir, o->name,
            r->qfile);
    return 0;
}

int cmd_fit(int argc, char **argv) {
    static fit_opts o; /* holds train's options: large */
    int rc = fit_parse(argc, argv, &o);
    if (rc < 0) return 0;
    if (rc) return rc;
    fit_run r = {.o = &o, .ctx = qat_ctx_new()};
    if (!r.ctx) return cli_fail(PROG, o.json, 1, "out of memory");
    fit_json = o.json;
    catch_fit_signals();
    rc = fit(&r);
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
    if (rc) remove_made_dir(); /* made for a run that failed before it wrote anything: gone again */
    qat_dataset_free(r.data);
    qat_ctx_free(r.ctx);
    return rc;
}
