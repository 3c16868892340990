/* qat-mnist train: float training of the MLP or LeNet-5 on MNIST, or
 * quantization-aware training with --qat. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "metrics_log.h"
#include "dist.h"
#include "progress.h"
#include "qat/data.h"
#include "qat/fakequant.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "qat/optim.h"

#define PROG "qat-mnist"

/* Under mpirun, rank 0 alone prints: the other ranks' stdout and stderr go
 * to /dev/null, and stderr comes back for an error (every failure goes
 * through cli_fail and cli_usage_fail, which unmute first). The process's
 * own stderr is the state this keeps, so it lives here. */
static int muted_stderr = -1, muted_rank;
static void unmute(void) {
    if (muted_stderr < 0) return;
    fflush(stderr);
    dup2(muted_stderr, 2);
    close(muted_stderr);
    muted_stderr = -1;
    fprintf(stderr, "rank %d: ", muted_rank); /* the error that follows is this rank's */
}
static void mute(int rank) {
    muted_rank = rank;
    int null = open("/dev/null", O_WRONLY);
    if (null < 0) return;
    fflush(stdout), fflush(stderr);
    muted_stderr = dup(2);
    dup2(null, 1), dup2(null, 2);
    close(null);
}
#define cli_fail(...) (unmute(), cli_fail(__VA_ARGS__))
#define cli_usage_fail(...) (unmute(), cli_usage_fail(__VA_ARGS__))

/* A rank killed, or ended by the MPI runtime after another rank died:
 * rank 0 says which checkpoint is the last complete one (atomic saves:
 * a save cut short leaves the previous file whole). The message is
 * formatted after every save, written by the handler with write(2). */
static char last_ckpt_msg[600];
static volatile sig_atomic_t last_ckpt_len;
static void on_term(int sig) {
    static const char head[] = "\nqat-mnist: rank 0: stopped by a signal (the MPI runtime ends the job when a rank dies)";
    ssize_t w = write(2, head, sizeof head - 1);
    if (last_ckpt_len > 0) w = write(2, last_ckpt_msg, (size_t)last_ckpt_len);
    else w = write(2, "; no checkpoint written yet\n", sizeof "; no checkpoint written yet\n" - 1);
    (void)w;
    _exit(128 + sig);
}
/* What a resume may change; every other option must be the checkpoint's. */
#define RESUME_MAY_CHANGE "--epochs, --out, --save-every, --stop-after, --threads, --json, --data, --limit-test, --log, --log-every"

static const char *const train_usage =
    "usage: qat-mnist train [options]\n"
    "\n"
    "Trains a model on MNIST and reports test accuracy after every epoch.\n"
    "\n"
    "  --model mlp|lenet|lenet-bn  a built-in model (default lenet)\n"
    "  --model-file F              a model file instead (docs/model-format.md; models/*.qnet)\n"
    CLI_LIMITS_USAGE
    "  --epochs N                  passes over the training set (default 5)\n"
    "  --batch B                   batch size (default 64)\n"
    "  --lr X                      peak learning rate (default 0.001 adam/adamw, 0.05 sgd)\n"
    "  --optimizer sgd|adam|adamw  (default adam)\n"
    "  --momentum X                SGD momentum (default 0.9)\n"
    "  --nesterov                  SGD with Nesterov momentum\n"
    "  --weight-decay X            (default 0; adamw: 0.01)\n"
    "  --schedule cosine|step|constant  learning-rate schedule (default cosine)\n"
    "  --warmup N                  linear warm-up steps (default 0)\n"
    "  --clip X                    clip gradients to global norm X (default off)\n"
    "  --seed S                    seed for initialisation, shuffling, dropout (default 1)\n"
    "  --data DIR                  MNIST directory (default data/mnist)\n"
    "  --threads T                 threads in this process (default 1); results do not depend on T\n"
    "  --limit-train N             use the first N training samples (default all)\n"
    "  --limit-test N              use the first N test samples (default all)\n"
    "  --qat                       quantization-aware training (fake quantization)\n"
    "  --wbits B                   weight bits, 2..16 (default 8)\n"
    "  --abits B                   activation bits, 2..16 (default 8)\n"
    "  --granularity G             weight scales (default channel): tensor; channel; block:N (blocks of\n"
    "                              N along each output channel's inputs, a last block may be shorter);\n"
    "                              or '{axis:block, ...}', e.g. '{0:1, 1:16}' (docs/subchannel.md)\n"
    "  --ragged-blocks             with {axis:block, ...}: allow a shorter last block\n"
    "  --observer ema|window-mean|window-max|minmax|ema-bc  activation ranges (default ema)\n"
    "  --window W                  window of the window observers (default 16)\n"
    "  --io-bits B                 bits of the input and the logits (default 8)\n"
    "  --lsq                       learn the weight scales (LSQ) instead of min-max\n"
    "  --freeze-bn N               folded BatchNorms use running statistics N steps after prepare\n"
    "  --float-epochs N            train N float epochs before the QAT epochs (default 0)\n"
    "  --qat-warmup N              steps after prepare with observers on, fake quant off (default 0)\n"
    "  --freeze-observers N        freeze activation ranges N steps after prepare (default never)\n"
    "  --out CKPT                  write the final training checkpoint (HDF5) to CKPT\n"
    "  --save-every N              also write it every N steps (needs --out)\n"
    "  --resume CKPT               continue from a checkpoint of this program; it may change only\n"
    "                              " RESUME_MAY_CHANGE "\n"
    "                              (another option that differs: exit 2). The same --epochs ends\n"
    "                              bit-identical to a run that never stopped\n"
    "  --stop-after N              stop after N steps in all, writing --out (split a long run)\n"
    "  --log FILE.csv              a metrics log (loss, lr, ranges, scales; per epoch the float,\n"
    "                              fake and integer accuracies); qat-mnist plot draws it\n"
    "  --log-every N               steps between log rows (default 10)\n"
    "  --rank-checkpoints          under mpirun, ranks r > 0 also write CKPT.rank<r> (tests)\n"
    "  --json                      print a JSON summary as the last line of stdout ({\"error\": ...,\n"
    "                              \"status\": ...} when the run fails)\n"
    "  --help                      this text\n"
    "\n"
    "Data-parallel: mpirun -np N qat-mnist train ... runs N processes; --batch is the\n"
    "global batch, rank 0 alone prints and saves; --mpi-timeout S (default 300 s; 0:\n"
    "never) ends the job when a rank is silent that long (docs/parallel.md).\n";

typedef struct {
    const char *model, *model_file, *optimizer, *schedule, *data;
    long epochs, batch, seed, threads, limit_train, limit_test, warmup;
    double lr, momentum, weight_decay, clip;
    bool nesterov, json, lr_set, wd_set, rank_checkpoints;
    bool qat, lsq, ragged_blocks;
    long wbits, abits, io_bits, window, float_epochs, qat_warmup, freeze_observers, freeze_bn;
    const char *granularity, *observer, *out, *resume;
    long save_every, stop_after;
    const char *log;
    long log_every;
    qat_prepare_config qcfg;
    char gran[64]; /* --granularity in its canonical spelling (block:8, {0:1, 1:2}, ragged {1:3}) */
    qat_model_limits limits; /* --max-params, --max-activation-bytes, --max-layers (0: the default) */
    double mpi_timeout;      /* --mpi-timeout: seconds a collective may wait (0: forever) */
} train_opts;

static const char *const models[] = {"mlp", "lenet", "lenet-bn", NULL};
static const char *const optimizers[] = {"sgd", "adam", "adamw", NULL};
static const char *const schedules[] = {"cosine", "step", "constant", NULL};
static const char *const granularities[] = {"tensor", "channel", "block:N", "{axis:block, ...}", NULL};
static const char *const observers[] = {"ema", "window-mean", "window-max", "minmax", "ema-bc", NULL};
static const qat_observer_kind observer_kinds[] = {QAT_OBS_EMA, QAT_OBS_WINDOW_MEAN, QAT_OBS_WINDOW_MAX,
                                                   QAT_OBS_MINMAX, QAT_OBS_EMA_BIAS_CORRECTED};

/* The option loop; -1 after --help, EXIT_USAGE (reported) on an option
 * or value that cannot be read. */
static int parse_args(int argc, char **argv, train_opts *o) {
    const char *P = "qat-mnist train";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
        int lim;
#define VAL() (v = cli_value(P, argc, argv, &i))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(train_usage, stdout);
            return -1;
        } else if (!strcmp(a, "--model")) ok = VAL() && (o->model = v);
        else if (!strcmp(a, "--model-file")) ok = VAL() && (o->model_file = v);
        else if (!strcmp(a, "--optimizer")) ok = VAL() && (o->optimizer = v);
        else if (!strcmp(a, "--schedule")) ok = VAL() && (o->schedule = v);
        else if (!strcmp(a, "--data")) ok = VAL() && (o->data = v);
        else if (!strcmp(a, "--epochs")) ok = VAL() && cli_int(P, a, v, 1, 1000, &o->epochs);
        else if (!strcmp(a, "--batch")) ok = VAL() && cli_int(P, a, v, 1, 60000, &o->batch);
        else if (!strcmp(a, "--seed")) ok = VAL() && cli_int(P, a, v, 0, 2147483647L, &o->seed);
        else if (!strcmp(a, "--threads")) ok = VAL() && cli_int(P, a, v, 1, 256, &o->threads);
        else if (!strcmp(a, "--limit-train")) ok = VAL() && cli_int(P, a, v, 1, 60000, &o->limit_train);
        else if (!strcmp(a, "--limit-test")) ok = VAL() && cli_int(P, a, v, 1, 10000, &o->limit_test);
        else if (!strcmp(a, "--warmup")) ok = VAL() && cli_int(P, a, v, 0, 100000000L, &o->warmup);
        else if (!strcmp(a, "--lr")) ok = VAL() && cli_float(P, a, v, 0, 10, &o->lr) && (o->lr_set = true);
        else if (!strcmp(a, "--momentum")) ok = VAL() && cli_float(P, a, v, 0, 1, &o->momentum);
        else if (!strcmp(a, "--weight-decay"))
            ok = VAL() && cli_float(P, a, v, 0, 1, &o->weight_decay) && (o->wd_set = true);
        else if (!strcmp(a, "--clip")) ok = VAL() && cli_float(P, a, v, 1e-6, 1e6, &o->clip);
        else if (!strcmp(a, "--nesterov")) o->nesterov = true;
        else if (!strcmp(a, "--qat")) o->qat = true;
        else if (!strcmp(a, "--lsq")) o->lsq = true;
        else if (!strcmp(a, "--ragged-blocks")) o->ragged_blocks = true;
        else if (!strcmp(a, "--out")) ok = VAL() && (o->out = v);
        else if (!strcmp(a, "--resume")) ok = VAL() && (o->resume = v);
        else if (!strcmp(a, "--stop-after")) ok = VAL() && cli_int(P, a, v, 1, 100000000L, &o->stop_after);
        else if (!strcmp(a, "--save-every")) ok = VAL() && cli_int(P, a, v, 1, 100000000L, &o->save_every);
        else if (!strcmp(a, "--freeze-bn")) ok = VAL() && cli_int(P, a, v, 0, 100000000L, &o->freeze_bn);
        else if (!strcmp(a, "--wbits")) ok = VAL() && cli_int(P, a, v, 2, 16, &o->wbits);
        else if (!strcmp(a, "--abits")) ok = VAL() && cli_int(P, a, v, 2, 16, &o->abits);
        else if (!strcmp(a, "--io-bits")) ok = VAL() && cli_int(P, a, v, 2, 16, &o->io_bits);
        else if (!strcmp(a, "--window")) ok = VAL() && cli_int(P, a, v, 1, QAT_OBS_MAX_WINDOW, &o->window);
        else if (!strcmp(a, "--float-epochs")) ok = VAL() && cli_int(P, a, v, 0, 1000, &o->float_epochs);
        else if (!strcmp(a, "--qat-warmup")) ok = VAL() && cli_int(P, a, v, 0, 100000000L, &o->qat_warmup);
        else if (!strcmp(a, "--freeze-observers"))
            ok = VAL() && cli_int(P, a, v, 0, 100000000L, &o->freeze_observers);
        else if (!strcmp(a, "--granularity")) ok = VAL() && (o->granularity = v);
        else if (!strcmp(a, "--observer")) ok = VAL() && (o->observer = v);
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--log")) ok = VAL() && (o->log = v);
        else if (!strcmp(a, "--log-every")) ok = VAL() && cli_int(P, a, v, 1, 100000000L, &o->log_every);
        else if (!strcmp(a, "--rank-checkpoints")) o->rank_checkpoints = true;
        else if (!strcmp(a, "--mpi-timeout")) ok = VAL() && cli_float(P, a, v, 0, 1e6, &o->mpi_timeout);
        else if ((lim = cli_limit_option(P, argc, argv, &i, &o->limits)) != 0) ok = lim > 0;
        else {
            fprintf(stderr, "%s: unknown option \"%s\"\n", P, a);
            ok = false;
        }
#undef VAL
        if (!ok) {
            fputs(train_usage, stderr);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* An enumerated option's value is one of allowed; otherwise reported
 * (naming the allowed values), and EXIT_USAGE. */
static int check_choice(const train_opts *o, const char *opt, const char *value, const char *const *allowed) {
    char list[160];
    if (cli_choice(value, allowed) >= 0) return 0;
    return cli_usage_fail("qat-mnist train", o->json, train_usage, "unknown value \"%s\" for %s (one of %s)", value,
                          opt, cli_choice_list(allowed, list, sizeof list));
}

/* The sub-channel seed's {axis:block, ...}: dimensions 0..3, each at most
 * once, blocks >= 1; spaces anywhere between the tokens. Returns NULL, or
 * what is wrong. */
static const char *parse_axes(const char *g, int64_t *blocks) {
    const char *p = g;
#define SKIP() while (*p == ' ') p++
    SKIP();
    if (*p++ != '{') return "it does not start with {";
    for (;;) {
        char *end;
        SKIP();
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d >= QAT_MAX_RANK) return "an axis must be 0..3";
        p = end;
        SKIP();
        if (*p++ != ':') return "each entry is axis:block";
        SKIP();
        long b = strtol(p, &end, 10);
        if (end == p || b < 1 || b > QAT_MAX_BLOCK) return "a block size must be a whole number from 1";
        if (blocks[d]) return "an axis is given twice";
        blocks[d] = b, p = end;
        SKIP();
        if (*p == ',') p++;
        else if (*p++ == '}') break;
        else return "entries are separated by commas and closed by }";
    }
    SKIP();
#undef SKIP
    return *p ? "there is text after }" : NULL;
}

/* --granularity (and --ragged-blocks) into q, and its canonical spelling
 * into o->gran: tensor, channel, block:N or {axis:block, ...}. */
static int parse_granularity(train_opts *o, qat_prepare_config *q) {
    const char *g = o->granularity;
    long block;
    if (!strcmp(g, "tensor")) q->wgran = QAT_GRAN_TENSOR;
    else if (!strcmp(g, "channel")) q->wgran = QAT_GRAN_CHANNEL;
    else if (!strncmp(g, "block:", 6) && cli_parse_long(g + 6, 1, 100000, &block))
        q->wgran = QAT_GRAN_BLOCK, q->block = (int)block, q->ragged = true; /* the shorthand's rule */
    else if (!strncmp(g, "block:", 6))
        return cli_usage_fail("qat-mnist train", o->json, train_usage,
                              "--granularity block:N wants a whole number N from 1 to 100000, got \"%s\"", g + 6);
    else if (strchr(g, '{')) {
        const char *why = parse_axes(g, q->blocks);
        if (why)
            return cli_usage_fail("qat-mnist train", o->json, train_usage,
                                  "--granularity \"%s\" is not the seed's {axis:block, ...}: %s", g, why);
        q->wgran = QAT_GRAN_AXES, q->ragged = o->ragged_blocks;
    } else return check_choice(o, "--granularity", g, granularities);
    if (o->ragged_blocks && q->wgran != QAT_GRAN_AXES)
        return cli_usage_fail("qat-mnist train", o->json, train_usage,
                              "--ragged-blocks goes with --granularity {axis:block, ...} (block:N is always ragged)");
    if (q->wgran == QAT_GRAN_BLOCK) snprintf(o->gran, sizeof o->gran, "block:%d", q->block); /* block:08 is block:8 */
    else if (q->wgran == QAT_GRAN_AXES) {
        size_t at = (size_t)snprintf(o->gran, sizeof o->gran, "%s{", q->ragged ? "ragged " : "");
        for (int d = 0; d < QAT_MAX_RANK && at < sizeof o->gran; d++)
            if (q->blocks[d])
                at += (size_t)snprintf(o->gran + at, sizeof o->gran - at, "%s%d:%lld", o->gran[at - 1] == '{' ? "" : ", ",
                                       d, (long long)q->blocks[d]);
        if (at < sizeof o->gran) snprintf(o->gran + at, sizeof o->gran - at, "}");
    } else snprintf(o->gran, sizeof o->gran, "%s", g);
    return 0;
}

/* Options, checked, with the defaults that depend on others filled in;
 * 0, -1 after --help, or EXIT_USAGE (reported). */
static int parse(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.model = "lenet", .optimizer = "adam", .schedule = "cosine",
                      .data = "data/mnist", .epochs = 5, .batch = 64, .seed = 1, .threads = 1,
                      .momentum = 0.9, .wbits = 8, .abits = 8, .io_bits = 8, .window = 16,
                      .granularity = "channel", .observer = "ema", .freeze_observers = -1,
                      .freeze_bn = -1, .log_every = 10, .mpi_timeout = DIST_TIMEOUT_S};
    int rc = parse_args(argc, argv, o);
    if (rc) return rc;
    qat_prepare_config *q = &o->qcfg;
    *q = qat_prepare_defaults();
    q->wbits = (int)o->wbits, q->abits = (int)o->abits, q->window = (int)o->window;
    q->io_bits = (int)o->io_bits;
    q->lsq = o->lsq;
    if ((rc = o->model_file ? 0 : check_choice(o, "--model", o->model, models)) ||
        (rc = check_choice(o, "--optimizer", o->optimizer, optimizers)) ||
        (rc = check_choice(o, "--schedule", o->schedule, schedules)) || (rc = parse_granularity(o, q)) ||
        (rc = check_choice(o, "--observer", o->observer, observers)))
        return rc;
    q->aobs = observer_kinds[cli_choice(o->observer, observers)];
    if (o->save_every && !o->out)
        return cli_usage_fail("qat-mnist train", o->json, train_usage, "--save-every needs --out");
    if (!o->lr_set) o->lr = strcmp(o->optimizer, "sgd") ? 0.001 : 0.05;
    if (!o->wd_set && !strcmp(o->optimizer, "adamw")) o->weight_decay = 0.01;
    return 0;
}

/* ---- the configuration a checkpoint records -------------------------------------
 *
 * config_text writes every option that shapes the training (all but the
 * ones a resume may change, and --epochs for the record) as one JSON
 * object, in a fixed key order. Each key is its option's name without the
 * dashes ("weight_decay" is --weight-decay); an option not given that has
 * no default value (--clip, --limit-train, --freeze-*) is null. The text
 * goes into every checkpoint; a resume compares it with the text of its
 * own options, key by key, which needs no JSON parser: both texts come
 * from this one function. */

typedef struct {
    char *buf;
    size_t len, used;
} text_buf;

static void append(text_buf *t, const char *fmt, ...) CLI_PRINTF(2, 3);
static void append(text_buf *t, const char *fmt, ...) {
    if (t->used >= t->len) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    t->used += w > 0 ? (size_t)w : 0;
}

/* A key and the separator before it. */
static void key(text_buf *t, const char *k) { append(t, "%s\"%s\": ", t->used ? ", " : "{", k); }

/* x in the fewest significant digits that read back as x: 0.001, not
 * 0.0010000000000000000208, yet two different values never print alike. */
static void num(text_buf *t, const char *k, double x) {
    char s[32];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, x);
        if (strtod(s, NULL) == x) break;
    }
    key(t, k);
    append(t, "%s", s);
}

static void str(text_buf *t, const char *k, const char *v) { key(t, k), append(t, "\"%s\"", v); }
static void boolean(text_buf *t, const char *k, bool v) { key(t, k), append(t, "%s", v ? "true" : "false"); }
static void null(text_buf *t, const char *k) { key(t, k), append(t, "null"); }
static void whole(text_buf *t, const char *k, long v) { key(t, k), append(t, "%ld", v); }
static void whole_or_null(text_buf *t, const char *k, long v, bool given) {
    if (given) whole(t, k, v);
    else null(t, k);
}

static void config_text(const train_opts *o, const char *model, uint32_t model_crc, char *buf, size_t len) {
    text_buf t = {buf, len, 0};
    str(&t, "model", model);
    if (o->model_file) {
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)model_crc);
        str(&t, "model_file_crc32", crc);
    } else {
        null(&t, "model_file_crc32");
    }
    str(&t, "optimizer", o->optimizer);
    num(&t, "lr", o->lr);
    num(&t, "momentum", o->momentum);
    boolean(&t, "nesterov", o->nesterov);
    num(&t, "weight_decay", o->weight_decay);
    str(&t, "schedule", o->schedule);
    whole(&t, "warmup", o->warmup);
    if (o->clip > 0) num(&t, "clip", o->clip);
    else null(&t, "clip");
    whole(&t, "seed", o->seed);
    whole(&t, "batch", o->batch);
    whole_or_null(&t, "limit_train", o->limit_train, o->limit_train > 0);
    whole(&t, "epochs", o->epochs);
    boolean(&t, "qat", o->qat);
    whole(&t, "wbits", o->wbits);
    whole(&t, "abits", o->abits);
    str(&t, "granularity", o->gran);
    str(&t, "observer", o->observer);
    whole(&t, "window", o->window);
    whole(&t, "io_bits", o->io_bits);
    boolean(&t, "lsq", o->lsq);
    whole(&t, "float_epochs", o->float_epochs);
    whole(&t, "qat_warmup", o->qat_warmup);
    whole_or_null(&t, "freeze_observers", o->freeze_observers, o->freeze_observers >= 0);
    whole_or_null(&t, "freeze_bn", o->freeze_bn, o->freeze_bn >= 0);
    append(&t, "}");
}

/* The keys config_text writes that a resume may change. */
static const char *const resume_free_keys[] = {"epochs", NULL};

typedef struct {
    char key[32], value[64];
} config_pair;
enum { MAX_PAIRS = 64 };

/* Copies [from, to) into dst (size len); false if it is empty or too long. */
static bool copy_span(char *dst, size_t len, const char *from, const char *to) {
    if (to <= from || (size_t)(to - from) >= len) return false;
    memcpy(dst, from, (size_t)(to - from));
    dst[to - from] = '\0';
    return true;
}

/* Splits a text in config_text's form ({"key": value, ...}, string values
 * without escapes) into pairs; the number of pairs, or -1 when the text
 * has another form. */
static int config_split(const char *s, config_pair *pairs) {
    int n = 0;
    if (*s++ != '{') return -1;
    for (;;) {
        if (n == MAX_PAIRS || *s != '"') return -1;
        const char *k = ++s;
        while (*s && *s != '"') s++;
        if (!*s || !copy_span(pairs[n].key, sizeof pairs[n].key, k, s) || strncmp(s, "\": ", 3)) return -1;
        const char *v = s += 3;
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++) {}
            if (*s++ != '"') return -1;
        } else {
            while (*s && *s != ',' && *s != '}') s++;
        }
        if (!copy_span(pairs[n].value, sizeof pairs[n].value, v, s)) return -1;
        n++;
        if (*s == '}') return s[1] ? -1 : n;
        if (strncmp(s, ", ", 2)) return -1;
        s += 2;
    }
}

/* An option as the checkpoint had it (asked false: "with --wbits 8",
 * "with --qat", "without --clip") or as this run asks for it (asked true:
 * "asks for --wbits 4", "does not ask for --clip"). */
static const char *describe(const config_pair *p, bool asked, char *buf, size_t len) {
    char opt[40] = "--";
    for (size_t i = 0; p->key[i] && i + 3 < sizeof opt; i++) opt[i + 2] = p->key[i] == '_' ? '-' : p->key[i];
    const char *v = p->value;
    int vlen = (int)strlen(v);
    if (v[0] == '"') v++, vlen -= 2; /* a string: without its quotes */
    if (!strcmp(p->value, "false") || !strcmp(p->value, "null"))
        snprintf(buf, len, "%s %s", asked ? "does not ask for" : "without", opt);
    else if (!strcmp(p->value, "true")) snprintf(buf, len, "%s %s", asked ? "asks for" : "with", opt);
    else snprintf(buf, len, "%s %s %.*s", asked ? "asks for" : "with", opt, vlen, v);
    return buf;
}

/* A resume keeps every option but the free ones: 0, or the exit status
 * after saying which option differs (2), or that the checkpoint's options
 * cannot be checked (1: no record, or not in this program's form). */
static int check_resume_options(const train_opts *o, qat_ctx *ctx, const char *mine) {
    char theirs[4096], was[128], now[128];
    if (qat_checkpoint_config(ctx, o->resume, theirs, sizeof theirs) != QAT_OK)
        return cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(ctx));
    if (!theirs[0])
        return cli_fail(PROG, o->json, 1, "--resume %s: the checkpoint records no training options (it was not written "
                        "by qat-mnist train), so this run's options cannot be checked against it: resume refused",
                        o->resume);
    config_pair a[MAX_PAIRS], b[MAX_PAIRS];
    int na = config_split(theirs, a), nb = config_split(mine, b), same_keys = na == nb;
    for (int i = 0; same_keys && i < na; i++) same_keys = !strcmp(a[i].key, b[i].key);
    if (!same_keys)
        return cli_fail(PROG, o->json, 1, "--resume %s: the checkpoint's training options are not in the form this "
                        "qat-mnist writes (another program or another version made it), so this run's options "
                        "cannot be checked against them: resume refused", o->resume);
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].value, b[i].value) && cli_choice(a[i].key, resume_free_keys) < 0) {
            describe(&a[i], false, was, sizeof was), describe(&b[i], true, now, sizeof now);
            return cli_fail(PROG, o->json, EXIT_USAGE, "--resume %s: the checkpoint was made %s, this run %s (a "
                            "resume may change only " RESUME_MAY_CHANGE ")", o->resume, was, now);
        }
    return 0;
}

/* ---- training ---------------------------------------------------------------------- */

typedef struct {
    const train_opts *o;
    qat_ctx *ctx;
    qat_mnist train, test;
    qat_model *m;
    qat_optim opt, qopt; /* qopt: LSQ scales, same optimizer settings, no decay */
    qat_optim_config oc;
    qat_lr_schedule sched;
    int32_t *perm, *labels;
    int64_t n, steps_per_epoch, step, samples_done;
    int64_t qat_step0; /* the step at which qat_prepare runs; -1 without --qat */
    int64_t qat_start; /* the step at which it ran; -1 before */
    long all_epochs;
    qat_train_state ts;
    char config[1024];
    char model_name[64];   /* the built-in model, or the model file's name */
    uint32_t model_crc;    /* of the model file's text (0: a built-in model) */
    double train_time, acc, loss_avg;
    double pool_time; /* of train_time, in the pool's loops */
    bool stopped;
    metrics_log log;       /* --log (rank 0 writes it; every rank measures) */
    dist *d;        /* the data-parallel job (one process without mpirun) */
    qat_pool *pool; /* --threads */
    float *stage;   /* [n_stage]: gradients, LSQ gradients and the loss, all-reduced in one call */
    int64_t n_stage;
} trainer;

static int fail(const trainer *t) { return cli_fail(PROG, t->o->json, 1, "%s", qat_ctx_error(t->ctx)); }

/* qat_prepare, and the LSQ scales' optimizer when there are any. */
static qat_status prepare(trainer *t) {
    qat_status st = qat_prepare(t->m, &t->o->qcfg);
    int64_t nq = qat_model_n_qparams(t->m);
    if (st == QAT_OK && nq > 0) st = qat_optim_init(&t->qopt, t->ctx, &t->oc, nq);
    qat_optim_set_pool(&t->qopt, qat_ctx_pool(t->ctx));
    if (st == QAT_OK && t->stage && nq > 0) { /* LSQ's scales join the all-reduce */
        t->n_stage = qat_model_n_params(t->m) + nq + 1;
        float *s = realloc(t->stage, (size_t)t->n_stage * sizeof *s);
        if (!s) return qat_ctx_fail(t->ctx, QAT_ERR_NOMEM, "out of memory");
        t->stage = s;
    }
    return st;
}

/* A step tensor of the model's input shape: [n, 1, 28, 28] or [n, 784]. */
static qat_tensor *input_tensor(qat_model *m, const qat_mnist *d, int64_t n) {
    int64_t s[3], s4[4] = {n, 1, d->rows, d->cols}, s2[2] = {n, (int64_t)d->rows * d->cols};
    bool conv = qat_model_input_shape(m, s) == 3;
    return qat_tensor_new(qat_model_ctx(m), QAT_MEM_STEP, conv ? 4 : 2, conv ? s4 : s2, false);
}

/* Test-set accuracy in eval mode with grad off; predictions (optional) gets
 * the predicted class of every sample. Returns -1 on error. */
static double mnist_accuracy(qat_model *m, const qat_mnist *d, int64_t limit, int32_t *predictions, dist *D) {
    int64_t n = limit > 0 && limit < d->n ? limit : d->n, correct = 0, B = 100; /* small: the step arena keeps its high-water mark */
    /* each rank its share of the test set (the models are identical), counts summed */
    int64_t lo = n * D->rank / D->size, hi = n * (D->rank + 1) / D->size;
    qat_ctx *ctx = qat_model_ctx(m);
    bool was_training = qat_model_training(m), grad = qat_ctx_grad_enabled(ctx);
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    int32_t idx[100], y[100];
    for (int64_t s = lo; s < hi; s += B) {
        int64_t b = hi - s < B ? hi - s : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(s + i);
        qat_tensor *x = input_tensor(m, d, b);
        if (!x) return -1;
        qat_mnist_batch(d, idx, b, x->data, y);
        qat_tensor *logits = qat_model_forward(m, x);
        if (!logits) return -1;
        for (int64_t i = 0; i < b; i++) {
            const float *l = logits->data + i * logits->shape[1];
            int best = 0;
            for (int k = 1; k < logits->shape[1]; k++) best = l[k] > l[best] ? k : best;
            correct += best == y[i];
            if (predictions) predictions[s + i] = best;
        }
        qat_ctx_step_reset(ctx);
    }
    qat_model_train(m, was_training);
    qat_ctx_set_grad_enabled(ctx, grad);
    if (dist_sum_i64(D, &correct, 1)) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s", D->msg), -1;
    return (double)correct / (double)n;
}

/* The metrics log's evaluations: every rank runs them (each its share of
 * the test set, counts summed), rank 0 alone writes the log. */
static double log_accuracy(qat_model *m, const qat_mnist *test, int64_t limit, int32_t *predictions, void *job) {
    return mnist_accuracy(m, test, limit, predictions, job);
}

/* The model: a built-in one, or a model file (read here once, so that its
 * text's CRC goes into the configuration a resume compares). */
static qat_status make_model(trainer *t, qat_model *m) {
    const train_opts *o = t->o;
    if (qat_model_set_limits(m, &o->limits) != QAT_OK) return qat_ctx_status(t->ctx);
    if (!o->model_file) {
        snprintf(t->model_name, sizeof t->model_name, "%s", o->model);
        return !strcmp(o->model, "mlp") ? qat_model_mlp(m) : qat_model_lenet(m, !strcmp(o->model, "lenet-bn"));
    }
    const char *base = strrchr(o->model_file, '/');
    snprintf(t->model_name, sizeof t->model_name, "%.48s", base ? base + 1 : o->model_file);
    for (char *c = t->model_name; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 32) *c = '_'; /* it goes into JSON text */
    char *text = NULL; /* a regular file (a FIFO or a directory is refused at once), at most 1 MiB, no NUL */
    size_t n = 0;
    qat_status st = qat_model_file_text(t->ctx, o->model_file, &text, &n);
    if (st == QAT_OK) {
        t->model_crc = (uint32_t)crc32(0L, (const Bytef *)text, (uInt)n);
        st = qat_model_from_text(m, text, o->model_file);
    }
    free(text);
    return st;
}

/* MNIST gives [1, 28, 28] images (or their 784 pixels): the model must take that. */
static qat_status check_mnist_input(trainer *t, qat_model *m) {
    int64_t s[3];
    int rank = qat_model_input_shape(m, s);
    bool ok = (rank == 3 && s[0] == 1 && s[1] == 28 && s[2] == 28) || (rank == 1 && s[0] == 784);
    return ok ? QAT_OK : qat_ctx_fail(t->ctx, QAT_ERR_SHAPE, "%s: MNIST needs a model whose input is shape=1,28,28 "
                                      "or shape=784", t->model_name);
}

/* Data, model, optimizer, schedule, sample order and the configuration
 * text: 0, or the exit status (reported). */
static int setup(trainer *t) {
    const train_opts *o = t->o;
    if (qat_mnist_load(t->ctx, o->data, "train", &t->train) || qat_mnist_load(t->ctx, o->data, "test", &t->test))
        return cli_fail(PROG, o->json, 1, "%s (the MNIST files: scripts/fetch-mnist.sh fetches them into data/mnist, "
                        "with QAT_MNIST_DIR=DIR it copies them from a local directory; --data DIR reads them elsewhere)",
                        qat_ctx_error(t->ctx));
    int64_t n = t->n = o->limit_train > 0 && o->limit_train < t->train.n ? o->limit_train : t->train.n;
    qat_model *m = t->m = qat_model_new(t->ctx);
    qat_status st = !m ? qat_ctx_status(t->ctx) : make_model(t, m);
    if (st == QAT_OK) st = check_mnist_input(t, m);
    if (st == QAT_OK) st = qat_model_build(m, (uint64_t)o->seed);
    t->oc = qat_optim_defaults(!strcmp(o->optimizer, "sgd") ? QAT_OPTIM_SGD
                               : !strcmp(o->optimizer, "adam") ? QAT_OPTIM_ADAM
                                                               : QAT_OPTIM_ADAMW);
    t->oc.lr = (float)o->lr, t->oc.weight_decay = (float)o->weight_decay, t->oc.nesterov = o->nesterov;
    if (t->oc.kind == QAT_OPTIM_SGD) t->oc.momentum = (float)o->momentum;
    if (st == QAT_OK) st = qat_optim_init(&t->opt, t->ctx, &t->oc, qat_model_n_params(m));
    if (st != QAT_OK) return fail(t);
    qat_optim_set_pool(&t->opt, qat_ctx_pool(t->ctx));
    t->perm = malloc((size_t)n * sizeof *t->perm);
    t->labels = malloc((size_t)o->batch * sizeof *t->labels);
    if (!t->perm || !t->labels) return cli_fail(PROG, o->json, 1, "out of memory");
    t->all_epochs = o->epochs + (o->qat ? o->float_epochs : 0);
    t->steps_per_epoch = (n + o->batch - 1) / o->batch;
    int N = t->d->size;
    if (o->batch < N || (n % o->batch && n % o->batch < N))
        return cli_fail(PROG, o->json, EXIT_USAGE, "%d ranks need at least %d samples in every batch: --batch %ld, "
                        "and the last batch of an epoch has %lld (choose --batch or --limit-train so that it has "
                        "none or at least %d)", N, N, o->batch, (long long)(n % o->batch ? n % o->batch : o->batch), N);
    if (N > 1) { /* the all-reduce's staging block */
        t->n_stage = qat_model_n_params(m) + 1;
        if (!(t->stage = malloc((size_t)t->n_stage * sizeof *t->stage))) return cli_fail(PROG, o->json, 1, "out of memory");
    }
    t->sched = (qat_lr_schedule){.kind = !strcmp(o->schedule, "cosine") ? QAT_LR_COSINE
                                         : !strcmp(o->schedule, "step") ? QAT_LR_STEP : QAT_LR_CONSTANT,
                                 .base_lr = (float)o->lr, .total_steps = t->steps_per_epoch * t->all_epochs,
                                 .step_size = t->steps_per_epoch * 2, .gamma = 0.5f,
                                 .warmup_steps = o->warmup, .warmup_start = 0.0f};
    for (int64_t i = 0; i < n; i++) t->perm[i] = (int32_t)i;
    qat_rng shuffle_rng;
    qat_rng_seed(&shuffle_rng, (uint64_t)o->seed * 0x9E3779B97F4A7C15ull + 7);
    config_text(o, t->model_name, t->model_crc, t->config, sizeof t->config);
    t->ts = (qat_train_state){.shuffle_rng = shuffle_rng, .order = t->perm, .n_order = n, .config = t->config};
    t->qat_step0 = o->qat ? o->float_epochs * t->steps_per_epoch : -1;
    t->qat_start = -1;
    return 0;
}

/* Once the run is known to go ahead (a resume's options checked): the
 * metrics log, and the line that says what trains. */
static int start(trainer *t) {
    const train_opts *o = t->o;
    int N = t->d->size;
    char err[512];
    if (o->log && t->d->rank == 0 && metrics_log_open(&t->log, o->log, o->resume != NULL, t->m, o->qat ? &o->qcfg : NULL,
                                                      o->log_every, t->steps_per_epoch, err, sizeof err))
        return cli_fail(PROG, o->json, 1, "%s", err);
    if (o->log && t->d->rank > 0) metrics_log_follow(&t->log); /* measures with rank 0, writes nothing */
    fprintf(stderr, "qat-mnist: %s, %lld parameters, %lld training samples, %ld epoch%s, batch %ld, "
            "%s lr %g, %ld thread(s)", t->model_name, (long long)qat_model_n_params(t->m), (long long)t->n, o->epochs,
            o->epochs == 1 ? "" : "s", o->batch, o->optimizer, o->lr, o->threads);
    if (N > 1) fprintf(stderr, " per rank, %d ranks (global batch %ld)", N, o->batch);
    fputc('\n', stderr);
    return 0;
}

/* What a resume checks before anything is said or written: the options
 * against the checkpoint's, its kind (float or QAT) and how far it got.
 * *prepared: it is a QAT checkpoint. */
static int resume_check(trainer *t, bool *prepared) {
    const train_opts *o = t->o;
    int rc = check_resume_options(o, t->ctx, t->config);
    if (rc) return rc;
    int64_t rstep, repoch, total = t->steps_per_epoch * t->all_epochs;
    if (qat_checkpoint_info(t->ctx, o->resume, &rstep, &repoch, prepared) != QAT_OK) return fail(t);
    if (*prepared && !o->qat)
        return cli_fail(PROG, o->json, 1, "%s is a QAT checkpoint: resume with the --qat options that made it",
                        o->resume);
    if (rstep >= total)
        return cli_fail(PROG, o->json, 1, "%s is at step %lld of %lld: nothing left to train (raise --epochs)",
                        o->resume, (long long)rstep, (long long)total);
    return 0;
}

/* Continues from o->resume (resume_check passed; rprepared: a QAT
 * checkpoint): the first epoch to run and the sample it starts at, or the
 * exit status (reported). */
static int resume(trainer *t, bool rprepared, long *first_epoch, int64_t *start_s) {
    const train_opts *o = t->o;
    if (rprepared && prepare(t) != QAT_OK) return fail(t);
    if (qat_checkpoint_load(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, o->resume) != QAT_OK) return fail(t);
    if (t->ts.n_order != t->n)
        return cli_fail(PROG, o->json, 1, "%s was made with %lld training samples, this run has %lld", o->resume,
                        (long long)t->ts.n_order, (long long)t->n);
    if (rprepared) t->qat_start = t->qat_step0;
    t->step = t->ts.step;
    *first_epoch = (long)(t->step / t->steps_per_epoch) + 1;
    *start_s = (t->step % t->steps_per_epoch) * o->batch;
    fprintf(stderr, "qat-mnist: resumed from %s at step %lld (epoch %ld)\n", o->resume, (long long)t->step,
            *first_epoch);
    return 0;
}

/* The batch's pixels, copied from the data set in chunks of samples over
 * the pool: each sample is a random read of 784 bytes, so the copy waits
 * on memory, and two threads wait half as long. Each pixel is the same
 * table lookup, so the bits do not depend on the split. */
typedef struct {
    const qat_mnist *d;
    const int32_t *idx;
    int64_t n;
    float *x;
    int32_t *y;
} batch_job;

enum { BATCH_CHUNK = 16 };

static void batch_task(void *u, int64_t task, int worker) {
    const batch_job *j = u;
    (void)worker;
    int64_t i0 = task * BATCH_CHUNK, k = j->n - i0 < BATCH_CHUNK ? j->n - i0 : BATCH_CHUNK;
    int64_t px = (int64_t)j->d->rows * j->d->cols;
    qat_mnist_batch(j->d, j->idx + i0, k, j->x + i0 * px, j->y + i0);
}

/* One training step on the batch at perm[s], b samples: its loss, or NAN
 * after an error (reported through the context). */
static double train_step(trainer *t, int64_t s, int64_t b) {
    const train_opts *o = t->o;
    qat_model *m = t->m;
    if (t->qat_start >= 0) {
        qat_model_set_fake_quant(m, t->step - t->qat_start >= o->qat_warmup);
        qat_model_freeze_observers(m, o->freeze_observers >= 0 && t->step - t->qat_start >= o->freeze_observers);
        qat_model_freeze_bn(m, o->freeze_bn >= 0 && t->step - t->qat_start >= o->freeze_bn);
    }
    /* this rank's share of the global batch perm[s, s + b) */
    int N = t->d->size, r = t->d->rank;
    int64_t lo = b * r / N, hi = b * (r + 1) / N;
    if (N > 1 && qat_model_set_batch_slice(m, lo, b) != QAT_OK) return NAN; /* dropout: the global batch's masks */
    qat_tensor *x = input_tensor(m, &t->train, hi - lo);
    if (x) {
        batch_job bj = {&t->train, t->perm + s + lo, hi - lo, x->data, t->labels};
        qat_pool_run(t->pool, (bj.n + BATCH_CHUNK - 1) / BATCH_CHUNK, batch_task, &bj);
    }
    qat_tensor *loss = qat_cross_entropy(t->ctx, qat_model_forward(m, x), t->labels);
    /* the global loss is the mean over b: each rank differentiates its
     * share, (local mean)·(local count / b), and the gradients add up */
    if (N > 1) loss = qat_scale(t->ctx, loss, (float)((double)(hi - lo) / (double)b));
    if (qat_backward(t->ctx, loss) != QAT_OK) return NAN;
    double l = loss->data[0];
    if (N > 1) { /* one MPI_Allreduce: the gradient block, LSQ's, and the loss */
        int64_t np = qat_model_n_params(m), nq = t->qopt.n ? qat_model_n_qparams(m) : 0;
        memcpy(t->stage, qat_model_grads(m), (size_t)np * sizeof(float));
        if (nq) memcpy(t->stage + np, qat_model_qgrads(m), (size_t)nq * sizeof(float));
        t->stage[np + nq] = (float)l;
        if (dist_sum_floats(t->d, t->stage, np + nq + 1))
            return qat_ctx_fail(t->ctx, QAT_ERR_IO, "%s", t->d->msg), NAN;
        memcpy(qat_model_grads(m), t->stage, (size_t)np * sizeof(float));
        if (nq) memcpy(qat_model_qgrads(m), t->stage + np, (size_t)nq * sizeof(float));
        l = t->stage[np + nq];
    }
    if (!isfinite(l)) return l;
    if (o->clip > 0) qat_clip_grad_norm(qat_model_grads(m), qat_model_n_params(m), (float)o->clip);
    float lr = qat_lr_at(&t->sched, t->step);
    qat_optim_step(&t->opt, qat_model_params(m), qat_model_grads(m), lr);
    if (t->qopt.n) qat_optim_step(&t->qopt, qat_model_qparams(m), qat_model_qgrads(m), lr);
    qat_model_zero_grad(m);
    qat_ctx_step_reset(t->ctx);
    return l;
}

/* Writes the training checkpoint --out: 0, or the exit status (reported). */
static int save(trainer *t) {
    if (t->d->rank != 0) return 0; /* rank 0 alone writes: every rank holds the same state */
    if (qat_checkpoint_save(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, t->o->out) != QAT_OK) return fail(t);
    if (t->d->size > 1) {
        int len = snprintf(last_ckpt_msg, sizeof last_ckpt_msg, "; the last complete checkpoint is %.400s (step %lld)\n",
                           t->o->out, (long long)t->ts.step);
        last_ckpt_len = len > 0 && len < (int)sizeof last_ckpt_msg ? len : 0;
    }
    return 0;
}

/* --rank-checkpoints: rank r > 0 writes its own state beside --out. */
static int save_rank(trainer *t) {
    char path[1100];
    snprintf(path, sizeof path, "%s.rank%d", t->o->out, t->d->rank);
    if (qat_checkpoint_save(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, path) != QAT_OK) return fail(t);
    return 0;
}

/* Do all ranks hold the same model state, bit for bit? 1, 0, or -1. */
static int ranks_identical(trainer *t) {
    size_t n = qat_model_state_bytes(t->m, NULL, 0);
    void *buf = malloc(n ? n : 1);
    if (!buf) return -1;
    qat_model_state_bytes(t->m, buf, n);
    int same = dist_identical(t->d, buf, n);
    free(buf);
    return same;
}

/* Epoch `epoch` (1-based) from sample start_s, or up to --stop-after, then
 * the test accuracy of the model as it stands: 0, or the exit status
 * (reported). */
static int run_epoch(trainer *t, long epoch, int64_t start_s) {
    const train_opts *o = t->o;
    int64_t n = t->n;
    if (o->qat && !qat_model_prepared(t->m) && t->step == t->qat_step0) {
        if (prepare(t) != QAT_OK) return fail(t);
        t->qat_start = t->step;
        fprintf(stderr, "qat-mnist: fake quantization on: W%ldA%ld, %s weights, %s observer\n", o->wbits, o->abits,
                o->gran, o->observer);
    }
    if (start_s == 0) qat_shuffle(t->perm, n, &t->ts.shuffle_rng);
    qat_model_train(t->m, true);
    char label[64], extra[64] = "";
    snprintf(label, sizeof label, "epoch %ld/%ld", epoch, t->all_epochs);
    progress bar;
    progress_start(&bar, label, n);
    double t0 = cli_now(), loss_sum = 0, p0;
    qat_pool_stats(qat_ctx_pool(t->ctx), &p0, NULL);
    int64_t k = 0;
    for (int64_t s = start_s; s < n; s += o->batch) {
        int64_t b = n - s < o->batch ? n - s : o->batch;
        double loss = train_step(t, s, b);
        if (isnan(loss) && qat_ctx_status(t->ctx) != QAT_OK) return fail(t);
        if (!isfinite(loss))
            return cli_fail(PROG, o->json, 1, "the loss diverged (%g) at step %lld; try a lower --lr", loss,
                            (long long)t->step);
        t->step++, k++;
        loss_sum += loss;
        metrics_log_step(&t->log, t->m, t->step, loss, qat_lr_at(&t->sched, t->step - 1), b);
        if (o->save_every && t->step % o->save_every == 0) {
            t->ts.step = t->step, t->ts.epoch = epoch - 1;
            int rc = save(t);
            if (rc) return rc;
        }
        t->samples_done += b;
        snprintf(extra, sizeof extra, "loss %.4f", loss_sum / (double)k);
        progress_update(&bar, s + b, extra);
        if (o->stop_after && t->step == o->stop_after) {
            t->ts.epoch = epoch - 1 + (s + b >= n); /* the epoch counts once finished */
            t->stopped = true;
            break;
        }
    }
    t->train_time += cli_now() - t0;
    double p1;
    qat_pool_stats(qat_ctx_pool(t->ctx), &p1, NULL);
    t->pool_time += p1 - p0;
    t->loss_avg = loss_sum / (double)k;
    progress_end(&bar, extra);
    if (t->stopped) fprintf(stderr, "qat-mnist: stopped after step %lld (--stop-after)\n", (long long)t->step);
    /* at a stop too: every figure the run prints is the model's as it stands */
    if ((t->acc = mnist_accuracy(t->m, &t->test, o->limit_test, NULL, t->d)) < 0) return fail(t);
    metrics_log_epoch(&t->log, t->m, t->step, epoch, t->loss_avg, t->acc, &t->test, o->limit_test, log_accuracy, t->d);
    fprintf(stderr, "epoch %ld%s: train loss %.4f, test accuracy %.2f %%\n", epoch,
            t->stopped ? " (stopped part way)" : "", t->loss_avg, 100 * t->acc);
    return 0;
}

/* The JSON summary: the last line of stdout. fake_quant < 0: the model
 * is not quantized yet (a --qat run stopped in its float epochs). */
static void print_json(const trainer *t, double rate, double fake_quant, double float_weights) {
    const train_opts *o = t->o;
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("{\"model\": \"%s\", \"epochs\": %ld, \"batch\": %ld, \"optimizer\": \"%s\", \"lr\": %g, "
           "\"seed\": %ld, \"threads\": %ld, \"train_samples\": %lld, \"train_samples_per_s\": %.1f, "
           "\"train_loss\": %.6f, \"test_accuracy\": %.6f, \"peak_rss_mib\": %.1f, "
           "\"openblas_coretype\": \"%s\", \"blas_core\": \"%s\", \"ranks\": %d, \"ranks_identical\": true, "
           "\"in_parallel_loops\": %.3f",
           t->model_name, t->all_epochs, o->batch, o->optimizer, o->lr, o->seed, o->threads, (long long)t->n, rate,
           t->loss_avg, t->acc, cli_peak_rss_mib(), core ? core : "", qat_blas_core(), t->d->size,
           t->train_time > 0 ? t->pool_time / t->train_time : 0.0);
    if (o->qat) {
        printf(", \"qat\": true, \"wbits\": %ld, \"abits\": %ld, \"granularity\": \"%s\", "
               "\"observer\": \"%s\", \"float_epochs\": %ld, \"test_accuracy_fake_quant\": ",
               o->wbits, o->abits, o->gran, o->observer, o->float_epochs);
        printf(fake_quant < 0 ? "null" : "%.6f", fake_quant);
        printf(", \"test_accuracy_float_weights\": %.6f", float_weights);
    }
    printf("}\n");
}

/* The final checkpoint, the closing figures and the JSON summary. */
static int finish(trainer *t) {
    const train_opts *o = t->o;
    qat_model *m = t->m;
    qat_ctx_step_trim(t->ctx); /* training is over: the save and the last evaluations start from little */
    if (o->out) {
        t->ts.step = t->step;
        if (!t->stopped) t->ts.epoch = t->all_epochs;
        int rc = save(t);
        if (!rc && o->rank_checkpoints && t->d->rank > 0) rc = save_rank(t);
        if (rc) return rc;
        fprintf(stderr, "qat-mnist: wrote %s\n", o->out);
    }
    int same = ranks_identical(t);
    if (same < 0) return cli_fail(PROG, o->json, 1, "comparing the ranks' states: %s", t->d->msg);
    if (!same) return cli_fail(PROG, o->json, 1, "the %d ranks ended with different model states (a bug: please "
                               "report it)", t->d->size);
    if (t->d->size > 1) fprintf(stderr, "qat-mnist: all %d ranks hold the same parameters, observers and BatchNorm "
                                "statistics, bit for bit\n", t->d->size);
    double rate = (double)t->samples_done / t->train_time, acc_float = t->acc;
    if (qat_model_prepared(m)) { /* the same weights with fake quantization off */
        bool on = qat_model_fake_quant_on(m);
        qat_model_set_fake_quant(m, false);
        acc_float = mnist_accuracy(m, &t->test, o->limit_test, NULL, t->d);
        qat_model_set_fake_quant(m, on);
        if (acc_float < 0) return fail(t);
        fprintf(stderr, "qat-mnist: fake-quant accuracy %.2f %%, same weights in float %.2f %%\n", 100 * t->acc,
                100 * acc_float);
    }
    fprintf(stderr, "qat-mnist: test accuracy %.2f %%, %.0f training samples/s, peak RSS %.1f MiB\n", 100 * t->acc,
            rate, cli_peak_rss_mib());
    if (o->json) print_json(t, rate, qat_model_prepared(m) ? t->acc : -1, acc_float);
    return 0;
}

static int train(trainer *t) {
    int rc = setup(t);
    long first_epoch = 1;
    int64_t start_s = 0;
    bool prepared = false;
    /* a resume that contradicts the checkpoint is refused before anything is said or written */
    if (!rc && t->o->resume) rc = resume_check(t, &prepared);
    if (!rc) rc = start(t);
    if (!rc && t->o->resume) rc = resume(t, prepared, &first_epoch, &start_s);
    for (long epoch = first_epoch; !rc && !t->stopped && epoch <= t->all_epochs; epoch++, start_s = 0)
        rc = run_epoch(t, epoch, start_s);
    return rc ? rc : finish(t);
}

static int train_job(train_opts *o, dist *d) {
    if (d->rank == 0 && d->size > 1) signal(SIGTERM, on_term), signal(SIGINT, on_term);
    qat_set_threads(1); /* the pool splits the work, OpenBLAS's threads would multiply it */
    cli_blas_note();
    qat_status pst;
    qat_pool *pool = qat_pool_new((int)o->threads, &pst);
    if (!pool) return cli_fail(PROG, o->json, 1, "cannot start %ld threads: %s", o->threads, qat_status_str(pst));
    trainer t = {.o = o, .ctx = qat_ctx_new(), .d = d, .pool = pool};
    if (!t.ctx) return qat_pool_free(pool), cli_fail(PROG, o->json, 1, "out of memory");
    qat_ctx_set_pool(t.ctx, pool);
    qat_reducer red = dist_reducer(d);
    if (d->size > 1) qat_ctx_set_reducer(t.ctx, &red);
    int rc = train(&t);
    if (metrics_log_close(&t.log) && !rc) rc = cli_fail(PROG, o->json, 1, "--log %s: cannot write it", o->log);
    free(t.perm);
    free(t.labels);
    qat_mnist_free(&t.train);
    qat_mnist_free(&t.test);
    qat_ctx_free(t.ctx);
    qat_pool_free(pool);
    free(t.stage);
    return rc;
}

int cmd_train(int argc, char **argv) {
    dist d;
    if (dist_init(&d, &argc, &argv)) { /* before the options: only rank 0 prints their errors */
        fprintf(stderr, "%s: %s\n", PROG, d.msg);
        return dist_abort(&d, 1);
    }
    if (d.rank > 0) mute(d.rank);
    train_opts o;
    int rc = parse(argc, argv, &o);
    if (!rc) { /* the collectives' watchdog: its timeout, and what its message says (dist.h) */
        d.timeout_s = o.mpi_timeout, d.out_path = o.out, d.ckpt_note = d.rank == 0 ? last_ckpt_msg : NULL;
        if (muted_stderr >= 0) d.err_fd = dup(muted_stderr);
        rc = train_job(&o, &d);
    }
    else if (rc < 0) rc = 0;
    fflush(stdout);
    if (rc) return dist_abort(&d, rc); /* one rank's error ends the job: none may wait in a collective */
    dist_finalize(&d);
    return 0;
}
