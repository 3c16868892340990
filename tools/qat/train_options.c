/* qat train's options (train_options.h): the option loop, the checks
 * that need several options, the record a checkpoint keeps and the
 * check a resume makes against it. */
#include "train_options.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "cli.h"
#include "dist.h"

#define P "qat train"
#define PROG "qat"

/* In parts: ISO C bounds one string literal at 4095 characters. */
static const char *const usage_parts[] = {
    "usage: qat train [options]\n"
    "\n"
    "Trains a model on a data set (MNIST by default) for a task, and reports the\n"
    "test metrics after every epoch.\n"
    "\n"
    "The model and the data\n"
    "  --model NAME|FILE.qnet      a built-in model (mlp, lenet, lenet-bn; default lenet) or a\n"
    "                              model file (docs/model-format.md; models/*.qnet)\n"
    "  --model-file FILE           the same as --model FILE\n"
    CLI_LIMITS_USAGE
    DATA_ARG_USAGE
    "  --limit-train N             use the first N training samples (default all)\n"
    "  --limit-test N              use the first N test samples (default all)\n",
    "  --normalize auto|none|M,S   the model's input normalization: auto (default) the training\n"
    "                              set's per-channel mean and std; M,S given (per channel:\n"
    "                              M1:M2:M3,S1:S2:S3); none. uint8 data is divided by 255 first\n"
    "The task\n"
    "  --task T                    classify (y: class labels), regress (y: float targets) or\n"
    "                              autoencoder (no y: the target is the input); default: from y\n"
    "  --label-smoothing X         classify: PyTorch's label smoothing in [0, 1) (default 0)\n"
    "  --class-weights W,W,...     classify: a weight per class (PyTorch's weight=)\n"
    "  --topk K                    classify: also report top-K accuracy (default 5; 0: off)\n"
    ,"Optimization\n"
    "  --epochs N                  passes over the training set (default 5, at most 1000)\n"
    "  --batch B                   batch size (default 64)\n"
    "  --lr X                      peak learning rate (default 0.001 adam/adamw, 0.05 sgd)\n"
    "  --optimizer sgd|adam|adamw  (default adam)\n"
    "  --momentum X                SGD momentum (default 0.9)\n"
    "  --nesterov                  SGD with Nesterov momentum\n"
    "  --weight-decay X            (default 0; adamw: 0.01)\n"
    "  --schedule cosine|step|constant  learning-rate schedule (default cosine)\n"
    "  --warmup N                  linear warm-up steps (default 0)\n"
    "  --clip X                    clip gradients to global norm X (default off)\n"
    "  --seed S                    seed for initialisation, shuffling, dropout, augmentation (default 1)\n"
    "  --threads T                 threads in this process (default 1); results do not depend on T\n"
    "Augmentation (training batches, seeded: a resume stays bit-identical)\n"
    "  --aug-crop P                images: pad P zeros each side, crop back at random\n"
    "  --aug-flip                  images: mirror left-right with probability 1/2\n"
    "  --aug-shift S               sequences: shift along time ([C, T, F]: T) by up to S steps\n"
    "  --aug-noise X               add X times N(0, 1) noise, in the data's units\n"
    ,"Quantization-aware training\n"
    "  --qat                       fake quantization (the options below need it)\n"
    "  --wbits B                   weight bits, 2..16 (default 8)\n"
    "  --abits B                   activation bits, 2..16 (default 8)\n"
    "  --granularity G             weight scales (default channel): tensor; channel; block:N (blocks of\n"
    "                              N along each output channel's inputs, a last block may be shorter);\n"
    "                              or '{axis:block, ...}', e.g. '{0:1, 1:16}' (docs/subchannel.md)\n"
    "  --ragged-blocks             with {axis:block, ...}: allow a shorter last block\n"
    "  --block-scales S            sub-channel block scales (default float): float, a float32 scale per\n"
    "                              block; u4..u8, compact: a float32 scale per output channel times a\n"
    "                              4- to 8-bit unsigned sub-scale per block (docs/subchannel.md)\n"
    "  --observer ema|window-mean|window-max|minmax|ema-bc  activation ranges (default ema)\n"
    "  --window W                  window of the window observers (default 16)\n"
    "  --io-bits B                 bits of the input and the output (default 8)\n"
    "  --lsq                       learn the weight scales (LSQ) instead of min-max\n"
    "  --freeze-bn N               folded BatchNorms use running statistics N steps after prepare\n"
    "  --float-epochs N            train N float epochs before the QAT epochs (default 0)\n"
    "  --qat-warmup N              steps after prepare with observers on, fake quant off (default 0)\n"
    "  --freeze-observers N        freeze activation ranges N steps after prepare (default never)\n"
    "  --target default|tflite     the integer rules of the deployment target (default: qat's own);\n"
    "                              tflite: TFLite's int8 ones: average pools keep their input's\n"
    "                              quantization (no quantizer of their own; the integer op divides\n"
    "                              the window sum, rounding half away from zero)\n"
    ,"Checkpoints and the best epoch\n"
    "  --out CKPT                  the final training checkpoint (HDF5); Ctrl-C saves it too\n"
    "  --save-every N              also write it every N steps (needs --out)\n"
    "  --best-out CKPT             the checkpoint of the epoch best on the val split (needs one)\n"
    "  --metric M                  what is best: accuracy, loss, top<K>; mse, auc (default:\n"
    "                              accuracy to classify, loss otherwise)\n"
    "  --early-stop N              stop after N epochs without a better val metric\n"
    "  --resume CKPT               continue from a checkpoint of this program; it may change only\n"
    "                              " RESUME_MAY_CHANGE "\n"
    "                              (another option that differs: exit 2). The same --epochs ends\n"
    "                              bit-identical to a run that never stopped\n"
    "  --stop-after N              stop after N steps in all, writing --out (split a long run)\n"
    "  --init CKPT                 start from this checkpoint's weights, BatchNorm statistics and\n"
    "                              normalization (a fine-tune: QAT of a float run, or at another\n"
    "                              precision); quantizers, optimizer and schedule start afresh\n"
    "Output\n"
    "  --log FILE.csv              a metrics log (loss, lr, ranges, scales; per epoch the float,\n"
    "                              fake and integer metrics); qat plot draws it\n"
    "  --log-every N               steps between log rows (default 10)\n"
    "  --rank-checkpoints          under mpirun, ranks r > 0 also write CKPT.rank<r> (tests)\n"
    "  --json                      print a JSON summary as the last line of stdout ({\"error\": ...,\n"
    "                              \"status\": ...} when the run fails)\n"
    "  --help                      this text\n"
    "\n"
    "Data-parallel: mpirun -np N qat train ... runs N processes; --batch is the\n"
    "global batch, rank 0 alone prints and saves; --mpi-timeout S (default 300 s; 0:\n"
    "never) ends the job when a rank is silent that long (docs/parallel.md).\n",
    NULL};

void train_usage(FILE *f) {
    for (int i = 0; usage_parts[i]; i++) fputs(usage_parts[i], f);
}

const char *const train_builtin_models[] = {"mlp", "lenet", "lenet-bn", NULL};

bool train_model_is_file(const char *model) {
    size_t len = strlen(model);
    return strchr(model, '/') || (len > 5 && !strcmp(model + len - 5, ".qnet"));
}

bool train_opts_model_is_file(const train_opts *o) { return o->model_file || train_model_is_file(o->model); }

static const char *const optimizers[] = {"sgd", "adam", "adamw", NULL};
static const char *const schedules[] = {"cosine", "step", "constant", NULL};
static const char *const tasks[] = {"classify", "regress", "autoencoder", NULL};
static const char *const granularities[] = {"tensor", "channel", "block:N", "{axis:block, ...}", NULL};
static const char *const observers[] = {"ema", "window-mean", "window-max", "minmax", "ema-bc", NULL};
/* --target: each a set of the configuration's target rules (one so far) */
static const char *const targets[] = {"default", "tflite", NULL};
static const qat_observer_kind observer_kinds[] = {QAT_OBS_EMA, QAT_OBS_WINDOW_MEAN, QAT_OBS_WINDOW_MAX,
                                                   QAT_OBS_MINMAX, QAT_OBS_EMA_BIAS_CORRECTED};

/* One line and the --help hint (the whole usage drowns the message). */
static int usage_error(const train_opts *o, const char *fmt, ...) CLI_PRINTF(2, 3);
static int usage_error(const train_opts *o, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cli_fail(o->prog, o->json, EXIT_USAGE, "%s (%s --help lists the options)", msg, o->prog);
}

/* The option loop; -1 after --help, EXIT_USAGE (reported) on an option
 * or value that cannot be read. */
static int parse_args(int argc, char **argv, train_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true, quant = false;
        int lim;
#define VAL() (v = cli_value(o->prog, argc, argv, &i))
        int d = data_arg_parse(&o->data, o->prog, argc, argv, &i);
        if (d) ok = d > 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return -1;
        } else if (!strcmp(a, "--model") || !strcmp(a, "--model-file")) {
            if (!VAL()) ok = false;
            else if (o->model)
                return usage_error(o, "%s %s: the model is already \"%s\" (give one --model or --model-file)", a, v,
                                   o->model);
            else o->model = v, o->model_file = !strcmp(a, "--model-file");
        } else if (!strcmp(a, "--optimizer")) ok = VAL() && (o->optimizer = v);
        else if (!strcmp(a, "--schedule")) ok = VAL() && (o->schedule = v);
        else if (!strcmp(a, "--task")) ok = VAL() && (o->task = v);
        else if (!strcmp(a, "--epochs")) ok = VAL() && cli_int(o->prog, a, v, 1, 1000, &o->epochs);
        else if (!strcmp(a, "--batch")) ok = VAL() && cli_int(o->prog, a, v, 1, 1 << 20, &o->batch);
        else if (!strcmp(a, "--seed")) ok = VAL() && cli_int(o->prog, a, v, 0, 2147483647L, &o->seed);
        else if (!strcmp(a, "--threads")) ok = VAL() && cli_int(o->prog, a, v, 1, 256, &o->threads);
        else if (!strcmp(a, "--limit-train")) ok = VAL() && cli_int(o->prog, a, v, 1, 2147483647L, &o->limit_train);
        else if (!strcmp(a, "--limit-test")) ok = VAL() && cli_int(o->prog, a, v, 1, 2147483647L, &o->limit_test);
        else if (!strcmp(a, "--warmup")) ok = VAL() && cli_int(o->prog, a, v, 0, 100000000L, &o->warmup);
        else if (!strcmp(a, "--topk")) ok = VAL() && cli_int(o->prog, a, v, 0, 1000, &o->topk) && (o->topk_set = true);
        else if (!strcmp(a, "--lr")) ok = VAL() && cli_float(o->prog, a, v, 1e-7, 10, &o->lr) && (o->lr_set = true);
        else if (!strcmp(a, "--momentum")) ok = VAL() && cli_float(o->prog, a, v, 0, 1, &o->momentum);
        else if (!strcmp(a, "--weight-decay"))
            ok = VAL() && cli_float(o->prog, a, v, 0, 1, &o->weight_decay) && (o->wd_set = true);
        else if (!strcmp(a, "--clip")) ok = VAL() && cli_float(o->prog, a, v, 1e-6, 1e6, &o->clip);
        else if (!strcmp(a, "--label-smoothing")) ok = VAL() && cli_float(o->prog, a, v, 0, 0.999, &o->label_smoothing);
        else if (!strcmp(a, "--class-weights")) ok = VAL() && (o->class_weights = v);
        else if (!strcmp(a, "--normalize")) ok = VAL() && (o->normalize = v);
        else if (!strcmp(a, "--nesterov")) o->nesterov = true;
        else if (!strcmp(a, "--qat")) o->qat = true;
        else if (!strcmp(a, "--lsq")) o->lsq = quant = true;
        else if (!strcmp(a, "--ragged-blocks")) o->ragged_blocks = quant = true;
        else if (!strcmp(a, "--out")) ok = VAL() && (o->out = v);
        else if (!strcmp(a, "--best-out")) ok = VAL() && (o->best_out = v);
        else if (!strcmp(a, "--metric")) ok = VAL() && (o->metric = v);
        else if (!strcmp(a, "--early-stop")) ok = VAL() && cli_int(o->prog, a, v, 1, 100000, &o->patience);
        else if (!strcmp(a, "--resume")) ok = VAL() && (o->resume = v);
        else if (!strcmp(a, "--init")) ok = VAL() && (o->init = v);
        else if (!strcmp(a, "--stop-after")) ok = VAL() && cli_int(o->prog, a, v, 1, 100000000L, &o->stop_after);
        else if (!strcmp(a, "--save-every")) ok = VAL() && cli_int(o->prog, a, v, 1, 100000000L, &o->save_every);
        else if (!strcmp(a, "--aug-crop")) ok = VAL() && cli_int(o->prog, a, v, 0, QAT_AUGMENT_MAX_PAD, &o->aug_crop);
        else if (!strcmp(a, "--aug-shift")) ok = VAL() && cli_int(o->prog, a, v, 0, 100000, &o->aug_shift);
        else if (!strcmp(a, "--aug-noise")) ok = VAL() && cli_float(o->prog, a, v, 0, 1e6, &o->aug_noise);
        else if (!strcmp(a, "--aug-flip")) o->aug_flip = true;
        else if (!strcmp(a, "--freeze-bn")) ok = VAL() && cli_int(o->prog, a, v, 0, 100000000L, &o->freeze_bn), quant = true;
        else if (!strcmp(a, "--wbits")) ok = VAL() && cli_int(o->prog, a, v, 2, 16, &o->wbits), quant = true;
        else if (!strcmp(a, "--abits")) ok = VAL() && cli_int(o->prog, a, v, 2, 16, &o->abits), quant = true;
        else if (!strcmp(a, "--io-bits")) ok = VAL() && cli_int(o->prog, a, v, 2, 16, &o->io_bits), quant = true;
        else if (!strcmp(a, "--window"))
            ok = VAL() && cli_int(o->prog, a, v, 1, QAT_OBS_MAX_WINDOW, &o->window), quant = true;
        else if (!strcmp(a, "--float-epochs"))
            ok = VAL() && cli_int(o->prog, a, v, 0, 1000, &o->float_epochs), quant = true;
        else if (!strcmp(a, "--qat-warmup"))
            ok = VAL() && cli_int(o->prog, a, v, 0, 100000000L, &o->qat_warmup), quant = true;
        else if (!strcmp(a, "--freeze-observers"))
            ok = VAL() && cli_int(o->prog, a, v, 0, 100000000L, &o->freeze_observers), quant = true;
        else if (!strcmp(a, "--granularity")) ok = VAL() && (o->granularity = v), quant = true;
        else if (!strcmp(a, "--block-scales")) ok = VAL() && (o->block_scales = v), quant = true;
        else if (!strcmp(a, "--observer")) ok = VAL() && (o->observer = v), quant = true;
        else if (!strcmp(a, "--target")) ok = VAL() && (o->target = v), quant = ok && strcmp(v, "default");
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--log")) ok = VAL() && (o->log = v);
        else if (!strcmp(a, "--log-every")) ok = VAL() && cli_int(o->prog, a, v, 1, 100000000L, &o->log_every);
        else if (!strcmp(a, "--rank-checkpoints")) o->rank_checkpoints = true;
        else if (!strcmp(a, "--mpi-timeout")) ok = VAL() && cli_float(o->prog, a, v, 0, 1e6, &o->mpi_timeout);
        else if ((lim = cli_limit_option(o->prog, argc, argv, &i, &o->limits)) != 0) ok = lim > 0;
        else return usage_error(o, "unknown option \"%s\"", a);
#undef VAL
        if (quant && !o->quant_option) o->quant_option = true;
        if (!ok) return EXIT_USAGE; /* the message said it, with the --help hint */
    }
    return 0;
}

/* An enumerated option's value is one of allowed; otherwise reported
 * (naming the allowed values), and EXIT_USAGE. */
static int check_choice(const train_opts *o, const char *opt, const char *value, const char *const *allowed) {
    char list[160];
    if (cli_choice(value, allowed) >= 0) return 0;
    return usage_error(o, "unknown value \"%s\" for %s (one of %s)", value, opt,
                       cli_choice_list(allowed, list, sizeof list));
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
        return usage_error(o, "--granularity block:N wants a whole number N from 1 to 100000, got \"%s\"", g + 6);
    else if (strchr(g, '{')) {
        const char *why = parse_axes(g, q->blocks);
        if (why)
            return usage_error(o, "--granularity \"%s\" is not the seed's {axis:block, ...}: %s", g, why);
        q->wgran = QAT_GRAN_AXES, q->ragged = o->ragged_blocks;
    } else return check_choice(o, "--granularity", g, granularities);
    if (o->ragged_blocks && q->wgran != QAT_GRAN_AXES)
        return usage_error(o, "--ragged-blocks goes with --granularity {axis:block, ...} (block:N is always ragged)");
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

/* A list of numbers separated by sep (at most cap), each finite; the
 * count, or -1. */
static int number_list(const char *s, char sep, float *v, int cap) {
    int n = 0;
    for (;;) {
        char *end;
        double x = strtod(s, &end);
        if (end == s || !isfinite(x) || n == cap) return -1;
        v[n++] = (float)x;
        if (*end == '\0') return n;
        if (*end != sep) return -1;
        s = end + 1;
    }
}

/* --normalize auto|none|MEAN,STD (per channel M1:M2,S1:S2). */
static int parse_normalize(train_opts *o) {
    const char *s = o->normalize;
    if (!s || !strcmp(s, "auto")) return o->norm_mode = QAT_NORM_FROM_DATA, 0;
    if (!strcmp(s, "none")) return o->norm_mode = QAT_NORM_NONE, 0;
    const char *comma = strchr(s, ',');
    char means[2048];
    if (!comma || (size_t)(comma - s) >= sizeof means)
        return usage_error(o, "--normalize \"%s\": want auto, none or MEAN,STD (per channel M1:M2:M3,S1:S2:S3)", s);
    memcpy(means, s, (size_t)(comma - s));
    means[comma - s] = '\0';
    qat_normalization *n = &o->norm;
    memset(n, 0, sizeof *n);
    int nm = number_list(means, ':', n->mean, QAT_NORM_MAX_CHANNELS);
    int ns = number_list(comma + 1, ':', n->std, QAT_NORM_MAX_CHANNELS);
    if (nm < 1 || nm != ns)
        return usage_error(o, "--normalize \"%s\": want as many means as standard deviations, numbers separated "
                           "by ':' (M1:M2:M3,S1:S2:S3)", s);
    for (int c = 0; c < ns; c++)
        if (!(n->std[c] > 0))
            return usage_error(o, "--normalize \"%s\": standard deviation %g is not positive", s, (double)n->std[c]);
    n->channels = nm, n->divisor = 1; /* the divisor follows the data (255 for uint8): train.c sets it */
    o->norm_mode = QAT_NORM_GIVEN;
    return 0;
}

/* Options, checked, with the defaults that depend on others filled in;
 * 0, -1 after --help, or EXIT_USAGE (reported). */
int train_parse(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.optimizer = "adam", .schedule = "cosine", .data = {.path = "data/mnist"}, .epochs = 5,
                      .batch = 64, .seed = 1, .threads = 1, .momentum = 0.9, .wbits = 8, .abits = 8, .io_bits = 8,
                      .window = 16, .granularity = "channel", .observer = "ema", .target = "default",
                      .freeze_observers = -1, .freeze_bn = -1, .log_every = 10, .topk = 5, .mpi_timeout = DIST_TIMEOUT_S};
    o->prog = argc > 0 && !strcmp(argv[0], "fit") ? "qat fit" : P; /* qat fit passes on what is not its own */
    int rc = parse_args(argc, argv, o);
    if (rc) return rc;
    if (!o->model) o->model = "lenet";
    if (!train_opts_model_is_file(o) && cli_choice(o->model, train_builtin_models) < 0) {
        char list[64];
        if (access(o->model, F_OK) == 0) /* a file of that name is here: the path is what was meant */
            return usage_error(o, "unknown value \"%s\" for --model (one of %s); for the model file %s give "
                               "./%s or --model-file %s", o->model, cli_choice_list(train_builtin_models, list, sizeof list),
                               o->model, o->model, o->model);
        return usage_error(o, "unknown value \"%s\" for --model (one of %s); a model file is a path, e.g. "
                           "models/%s.qnet", o->model, cli_choice_list(train_builtin_models, list, sizeof list), o->model);
    }
    qat_prepare_config *q = &o->qcfg;
    *q = qat_prepare_defaults();
    q->wbits = (int)o->wbits, q->abits = (int)o->abits, q->window = (int)o->window;
    q->io_bits = (int)o->io_bits;
    q->lsq = o->lsq;
    if ((rc = check_choice(o, "--optimizer", o->optimizer, optimizers)) ||
        (rc = check_choice(o, "--schedule", o->schedule, schedules)) ||
        (rc = o->task ? check_choice(o, "--task", o->task, tasks) : 0) || (rc = parse_granularity(o, q)) ||
        (rc = check_choice(o, "--observer", o->observer, observers)) ||
        (rc = check_choice(o, "--target", o->target, targets)) || (rc = parse_normalize(o)))
        return rc;
    if (o->block_scales && strcmp(o->block_scales, "float")) {
        long b;
        if (o->block_scales[0] != 'u' || !cli_parse_long(o->block_scales + 1, 4, 8, &b))
            return usage_error(o, "--block-scales \"%s\": float, or u4 to u8 (compact sub-scales of that many bits)",
                               o->block_scales);
        if (q->wgran != QAT_GRAN_BLOCK && q->wgran != QAT_GRAN_AXES)
            return usage_error(o, "--block-scales %s needs sub-channel weights: --granularity block:N or "
                               "'{axis:block, ...}'", o->block_scales);
        if (o->wbits > 8) return usage_error(o, "--block-scales %s needs --wbits 8 or less", o->block_scales);
        if (o->lsq) return usage_error(o, "--block-scales %s derives the block scales; --lsq learns them: choose one",
                                       o->block_scales);
        q->block_scale_bits = (int)b;
    }
    q->aobs = observer_kinds[cli_choice(o->observer, observers)];
    q->pool_keeps_scale = !strcmp(o->target, "tflite");
    if (o->quant_option && !o->qat)
        return usage_error(o, "quantization options (--wbits, --abits, --granularity, --observer, ...) need --qat: "
                           "without it the run trains float");
    if (o->save_every && !o->out) return usage_error(o, "--save-every needs --out");
    if (o->init && o->resume) return usage_error(o, "--init starts a new run from weights, --resume continues one: choose one");
    if (o->class_weights) {
        o->n_weights = number_list(o->class_weights, ',', o->weights, (int)(sizeof o->weights / sizeof *o->weights));
        if (o->n_weights < 1) return usage_error(o, "--class-weights \"%s\": want numbers separated by commas", o->class_weights);
        for (int k = 0; k < o->n_weights; k++)
            if (!(o->weights[k] >= 0)) return usage_error(o, "--class-weights: weight %d is negative", k);
    }
    if (!o->lr_set) o->lr = strcmp(o->optimizer, "sgd") ? 0.001 : 0.05;
    if (!o->wd_set && !strcmp(o->optimizer, "adamw")) o->weight_decay = 0.01;
    return 0;
}

/* ---- the configuration a checkpoint records -------------------------------------
 *
 * train_config_text writes every option that shapes the training (all but
 * the ones a resume may change, and --epochs for the record) as one JSON
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
void train_config_text(const train_opts *o, const char *model, uint32_t model_crc, qat_task_kind task, char *buf,
                       size_t len) {
    text_buf t = {buf, len, 0};
    str(&t, "model", model);
    if (model_crc) {
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
    if (o->qcfg.block_scale_bits) str(&t, "block_scales", o->block_scales); /* only when compact: older keys unchanged */
    str(&t, "observer", o->observer);
    whole(&t, "window", o->window);
    whole(&t, "io_bits", o->io_bits);
    boolean(&t, "lsq", o->lsq);
    whole(&t, "float_epochs", o->float_epochs);
    whole(&t, "qat_warmup", o->qat_warmup);
    whole_or_null(&t, "freeze_observers", o->freeze_observers, o->freeze_observers >= 0);
    whole_or_null(&t, "freeze_bn", o->freeze_bn, o->freeze_bn >= 0);
    str(&t, "target", o->target);
    /* the data's reading and the task */
    str(&t, "task", qat_task_kind_str(task));
    if (o->data.val > 0) num(&t, "val", o->data.val);
    else null(&t, "val");
    whole(&t, "val_seed", o->data.val_seed_set ? o->data.val_seed : o->seed);
    boolean(&t, "channels_last", o->data.channels_last);
    boolean(&t, "allow_nonfinite", o->data.allow_nonfinite);
    str(&t, "normalize", o->normalize ? o->normalize : "auto");
    if (o->init) str(&t, "init", o->init); /* only when given: older records unchanged */
    num(&t, "label_smoothing", o->label_smoothing);
    if (o->class_weights) str(&t, "class_weights", o->class_weights);
    else null(&t, "class_weights");
    whole(&t, "aug_crop", o->aug_crop);
    boolean(&t, "aug_flip", o->aug_flip);
    whole(&t, "aug_shift", o->aug_shift);
    num(&t, "aug_noise", o->aug_noise);
    if (o->metric) str(&t, "metric", o->metric);
    else null(&t, "metric");
    whole_or_null(&t, "early_stop", o->patience, o->patience > 0);
    append(&t, "}");
}

/* The keys config_text writes that a resume may change. */
static const char *const resume_free_keys[] = {"epochs", NULL};
/* Keys added after checkpoints were first written, with the value that
 * stands for their absence: an older checkpoint's text lacks them, and
 * ran with that value. */
static const char *const later_keys[][2] = {{"target", "\"default\""}};

typedef struct {
    char key[32], value[256];
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

bool train_config_number(const char *config, const char *key, double *out) {
    config_pair pairs[MAX_PAIRS];
    int n = config && config[0] ? config_split(config, pairs) : -1;
    for (int i = 0; i < n; i++) {
        char *end;
        if (strcmp(pairs[i].key, key)) continue;
        double v = strtod(pairs[i].value, &end);
        if (end == pairs[i].value || *end || !isfinite(v)) return false;
        *out = v;
        return true;
    }
    return false;
}

bool train_config_string(const char *config, const char *key, char *out, size_t len) {
    config_pair pairs[MAX_PAIRS];
    int n = config && config[0] ? config_split(config, pairs) : -1;
    for (int i = 0; i < n; i++) {
        const char *v = pairs[i].value;
        size_t vlen = strlen(v);
        if (strcmp(pairs[i].key, key)) continue;
        if (vlen < 2 || v[0] != '"' || v[vlen - 1] != '"' || vlen - 2 >= len) return false;
        memcpy(out, v + 1, vlen - 2);
        out[vlen - 2] = '\0';
        return true;
    }
    return false;
}

/* Key k with value v into pairs a (na of them) when a lacks it, at the
 * place it has in b (nb pairs, this run's), so both list their keys in
 * one order. */
static void add_missing(config_pair *a, int *na, const config_pair *b, int nb, const char *k, const char *v) {
    int at = 0;
    for (int i = 0; i < *na; i++)
        if (!strcmp(a[i].key, k)) return;
    while (at < nb && strcmp(b[at].key, k)) at++;
    if (at == nb || at > *na || *na == MAX_PAIRS) return; /* this run does not write it either: the forms differ */
    memmove(a + at + 1, a + at, (size_t)(*na - at) * sizeof *a);
    snprintf(a[at].key, sizeof a[at].key, "%s", k);
    snprintf(a[at].value, sizeof a[at].value, "%s", v);
    (*na)++;
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
int train_check_resume(const train_opts *o, qat_ctx *ctx, const char *mine) {
    char theirs[8192], was[128], now[128];
    if (qat_checkpoint_config(ctx, o->resume, theirs, sizeof theirs) != QAT_OK)
        return cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(ctx));
    if (!theirs[0])
        return cli_fail(PROG, o->json, 1, "--resume %s: the checkpoint records no training options (it was not written "
                        "by qat train), so this run's options cannot be checked against it: resume refused",
                        o->resume);
    config_pair a[MAX_PAIRS], b[MAX_PAIRS];
    int na = config_split(theirs, a), nb = config_split(mine, b);
    for (size_t k = 0; na > 0 && k < sizeof later_keys / sizeof *later_keys; k++) /* an older text: the default */
        add_missing(a, &na, b, nb, later_keys[k][0], later_keys[k][1]);
    int same_keys = na == nb;
    for (int i = 0; same_keys && i < na; i++) same_keys = !strcmp(a[i].key, b[i].key);
    if (!same_keys)
        return cli_fail(PROG, o->json, 1, "--resume %s: the checkpoint's training options are not in the form this "
                        "qat writes (another program, another version, or qat-mnist made it), so this run's options "
                        "cannot be checked against them: resume refused", o->resume);
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].value, b[i].value) && cli_choice(a[i].key, resume_free_keys) < 0) {
            describe(&a[i], false, was, sizeof was), describe(&b[i], true, now, sizeof now);
            return cli_fail(PROG, o->json, EXIT_USAGE, "--resume %s: the checkpoint was made %s, this run %s (a "
                            "resume may change only " RESUME_MAY_CHANGE ")", o->resume, was, now);
        }
    return 0;
}

qat_status train_make_model(const train_opts *o, qat_ctx *ctx, qat_model **out, char *model_name, size_t name_len,
                            uint32_t *crc) {
    const char *name = o->model;
    qat_model *m = *out = qat_model_new(ctx);
    *crc = 0;
    if (!m) return qat_ctx_status(ctx);
    qat_status st = qat_model_set_limits(m, &o->limits);
    if (st != QAT_OK) return st;
    if (!train_opts_model_is_file(o)) { /* a built-in one: train_parse checked the name */
        int k = cli_choice(name, train_builtin_models);
        snprintf(model_name, name_len, "%s", name);
        st = k == 0 ? qat_model_mlp(m) : qat_model_lenet(m, k == 2);
    } else {
        const char *base = strrchr(name, '/');
        snprintf(model_name, name_len, "%.48s", base ? base + 1 : name);
        for (char *c = model_name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32) *c = '_'; /* it goes into JSON text */
        char *text = NULL; /* a regular file (a FIFO or a directory is refused at once), at most 1 MiB, no NUL */
        size_t n = 0;
        st = qat_model_file_text(ctx, name, &text, &n);
        if (st == QAT_OK) {
            *crc = (uint32_t)crc32(0L, (const Bytef *)text, (uInt)n);
            st = qat_model_from_text(m, text, name);
        }
        free(text);
    }
    return st == QAT_OK ? qat_model_build(m, (uint64_t)o->seed) : st;
}
