/* qat summary: a row per node of a model — shape, parameters,
 * multiply-accumulates, weight and activation quantization — and the
 * totals, from a built-in model, a model file, a training checkpoint or a
 * quantized model file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train_options.h"
#include "qat/analyze.h"
#include "qat/export.h"
#include "qat/io.h"
#include "tools.h"

static const char *const summary_usage =
    "usage: qat summary (--model NAME | --model-file F | --checkpoint CKPT | --qmodel M) [options]\n"
    "\n"
    "Prints a row per node — output shape, parameters, multiply-accumulates per\n"
    "sample, weight quantization (bits, granularity, range of the scales) and the\n"
    "activation quantization at its output (bits, scale, zero point, the real range)\n"
    "— then the totals: parameters, MACs, weight bytes at the trained bit widths\n"
    "(weights packed, int32 biases) and the integer runtime's peak activation bytes\n"
    "per sample (its lifetime-based memory plan).\n"
    "\n"
    "  --model mlp|lenet|lenet-bn|FILE.qnet  a built-in model or a model file, untrained\n"
    "  --model-file F              a model file (docs/model-format.md), untrained\n"
    CLI_LIMITS_USAGE
    "  --checkpoint CKPT           a training checkpoint (qat train --out)\n"
    "  --qmodel M                  a quantized model (qat export): a row per integer op\n"
    "  --wbits B, --abits B        a model that is not QAT-trained (the first two, a float\n"
    "  --granularity G             checkpoint) is shown as qat_prepare would quantize it\n"
    "                              (default W8A8, per-channel weights): its scales are then\n"
    "                              the current weights', its activation ranges unknown\n"
    "  --float                     show such a model as it is, without quantization\n"
    "  --json                      the summary as one JSON object (last line of stdout)\n"
    "  --help                      this text\n";

#define P "qat summary"

typedef struct {
    const char *model, *model_file, *checkpoint, *qmodel, *granularity;
    long wbits, abits;
    bool json, as_float;
    qat_model_limits limits; /* --max-params, --max-activation-bytes, --max-layers (0: the default) */
} opts;

static const char *const models[] = {"mlp", "lenet", "lenet-bn", NULL};

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.wbits = 8, .abits = 8, .granularity = "channel"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
        int lim;
#define VAL() (v = cli_value(P, argc, argv, &i))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(summary_usage, stdout), -1;
        else if (!strcmp(a, "--model")) /* a built-in name, or a model file's path (as train takes it) */
            ok = VAL() && (train_model_is_file(v) ? (o->model_file = v) : (o->model = v));
        else if (!strcmp(a, "--model-file")) ok = VAL() && (o->model_file = v);
        else if (!strcmp(a, "--checkpoint")) ok = VAL() && (o->checkpoint = v);
        else if (!strcmp(a, "--qmodel")) ok = VAL() && (o->qmodel = v);
        else if (!strcmp(a, "--wbits")) ok = VAL() && cli_int(P, a, v, 2, 16, &o->wbits);
        else if (!strcmp(a, "--abits")) ok = VAL() && cli_int(P, a, v, 2, 16, &o->abits);
        else if (!strcmp(a, "--granularity")) ok = VAL() && (o->granularity = v);
        else if (!strcmp(a, "--float")) o->as_float = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else if ((lim = cli_limit_option(P, argc, argv, &i, &o->limits)) != 0) ok = lim > 0;
        else fprintf(stderr, "%s: unknown option \"%s\" (%s --help lists the options)\n", P, a, P), ok = false;
#undef VAL
        if (!ok) return EXIT_USAGE; /* the message said it, with the --help hint */
    }
    int sources = !!o->model + !!o->model_file + !!o->checkpoint + !!o->qmodel;
    char list[64];
    if (sources != 1)
        return cli_usage_fail(P, o->json, summary_usage,
                              "give exactly one of --model, --model-file, --checkpoint and --qmodel");
    if (o->model && cli_choice(o->model, models) < 0)
        return cli_usage_fail(P, o->json, summary_usage, "unknown value \"%s\" for --model (one of %s)", o->model,
                              cli_choice_list(models, list, sizeof list));
    return 0;
}

/* The QAT configuration the options ask for a model not trained with QAT. */
static int qat_config(const opts *o, qat_prepare_config *c) {
    long block;
    *c = qat_prepare_defaults();
    c->wbits = (int)o->wbits, c->abits = (int)o->abits;
    if (!strcmp(o->granularity, "tensor")) c->wgran = QAT_GRAN_TENSOR;
    else if (!strcmp(o->granularity, "channel")) c->wgran = QAT_GRAN_CHANNEL;
    else if (!strncmp(o->granularity, "block:", 6) && cli_parse_long(o->granularity + 6, 1, 100000, &block))
        c->wgran = QAT_GRAN_BLOCK, c->block = (int)block;
    else
        return cli_usage_fail(P, o->json, summary_usage,
                              "unknown value \"%s\" for --granularity (one of tensor, channel or block:N)",
                              o->granularity);
    return 0;
}

int tools_input_shape(const qat_model *m, int64_t *shape) {
    int rank = qat_model_input_shape(m, shape);
    if (rank) return rank;
    bool conv = qat_model_n_layers(m) > 1 && qat_model_layer_kind(m, 1) == QAT_LAYER_CONV2D;
    shape[0] = conv ? 1 : 784, shape[1] = shape[2] = 28;
    return conv ? 3 : 1;
}

int64_t tools_output_numel(const qat_model *m) {
    int64_t in[3];
    int in_rank = tools_input_shape(m, in), n = qat_model_n_layers(m), out = qat_model_output(m);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    int64_t(*shapes)[3] = malloc((size_t)n * sizeof *shapes), numel = -1;
    if (ranks && shapes && qat_model_shapes(m, in_rank, in, ranks, shapes) == QAT_OK) {
        numel = 1;
        for (int d = 0; d < ranks[out]; d++) numel *= shapes[out][d];
    }
    free(ranks), free(shapes);
    return numel;
}

qat_status tools_data_fits(qat_model *m, const qat_dataset *d, qat_split s, const qat_task_kind *kind) {
    int64_t shape[3], outputs = tools_output_numel(m);
    int rank = tools_input_shape(m, shape);
    if (outputs < 0) return qat_ctx_status(qat_model_ctx(m));
    const qat_split_info *i = qat_dataset_info(d, s);
    if (!i) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "the data set has no %s split", qat_split_str(s));
    return qat_data_check(qat_model_ctx(m), i, s, rank, shape, outputs, kind);
}

const char *tools_grouped(int64_t n, char *buf, size_t len) {
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%lld", (long long)(n < 0 ? -n : n)), k = 0;
    size_t used = 0;
    if (n < 0 && used + 1 < len) buf[used++] = '-';
    for (int i = 0; i < nd && used + 2 < len; i++, k++) {
        if (i > 0 && (nd - i) % 3 == 0) buf[used++] = ' ';
        buf[used++] = digits[i];
    }
    buf[used] = '\0';
    return buf;
}

/* ---- printing ------------------------------------------------------------------------- */

static const char *shape_text(const qat_summary_row *r, char *buf, size_t len) {
    if (r->rank == 3) snprintf(buf, len, "%lldx%lldx%lld", (long long)r->shape[0], (long long)r->shape[1], (long long)r->shape[2]);
    else snprintf(buf, len, "%lld", (long long)r->shape[0]);
    return buf;
}

static const char *granularity_text(const qat_summary_row *r, char *buf, size_t len) {
    if (r->waxis == -1) snprintf(buf, len, "tensor");
    else if (r->waxis >= 0) snprintf(buf, len, "channel");
    else snprintf(buf, len, "block:%lld", (long long)r->wblock);
    return buf;
}

/* The input normalization's numbers, "a, b, c" (the first 8 channels, then "..."). */
static void print_floats(const float *v, int n, bool json) {
    for (int c = 0; c < n && (json || c < 8); c++) printf("%s%.9g", c ? ", " : "", (double)v[c]);
    if (!json && n > 8) printf(", ... (%d channels)", n);
}

static void print_normalization(const qat_normalization *n) {
    if (!n) {
        printf("input normalization: none (the inputs are used as they are)\n");
        return;
    }
    printf("input normalization: ((x / %.9g) - mean[c]) / std[c] in float32, %d channel%s%s\n  mean ",
           (double)n->divisor, n->channels, n->channels > 1 ? "s" : "", n->raw_uint8 ? ", raw uint8 data (a byte table)" : "");
    print_floats(n->mean, n->channels, false);
    printf("\n  std  ");
    print_floats(n->std, n->channels, false);
    printf("\n");
}

static void print_table(const qat_summary *s, const char *title, bool quantized) {
    int w = 4;
    for (int i = 0; i < s->n_rows; i++) w = (int)strlen(s->rows[i].name) > w ? (int)strlen(s->rows[i].name) : w;
    char a[48], b[48], c[48], q[96], g[24];
    printf("%s\n\n%-*s  %-14s %-10s %9s %11s  %-30s %s\n", title, w, "node", "op", "output", "params", "MACs",
           "weights", "activation (output)");
    for (int i = 0; i < s->n_rows; i++) {
        const qat_summary_row *r = &s->rows[i];
        if (r->wbits)
            snprintf(q, sizeof q, "W%d %s %.3g..%.3g", r->wbits, granularity_text(r, g, sizeof g), (double)r->wscale_min,
                     (double)r->wscale_max);
        else snprintf(q, sizeof q, "-");
        printf("%-*s  %-14s %-10s %9s %11s  %-30s ", w, r->name, r->op, shape_text(r, a, sizeof a),
               tools_grouped(r->params, b, sizeof b), tools_grouped(r->macs, c, sizeof c), q);
        if (!r->abits) printf("-\n");
        else if (!r->aobserved) printf("A%d, range not observed yet\n", r->abits);
        else printf("A%d scale %.3g zp %d [%.3g, %.3g]\n", r->abits, (double)r->ascale, r->azero, (double)r->amin,
                    (double)r->amax);
    }
    printf("\ntotal: %s parameters, %s MACs per sample\n", tools_grouped(s->params, a, sizeof a),
           tools_grouped(s->macs, b, sizeof b));
    if (quantized)
        printf("weights: %s bytes at the trained bit widths (%s as float32)\n",
               tools_grouped(s->weight_bytes, a, sizeof a), tools_grouped(s->float_weight_bytes, b, sizeof b));
    else
        printf("weights: %s bytes as float32 (not quantized)\n", tools_grouped(s->weight_bytes, a, sizeof a));
    if (s->peak_activation_bytes >= 0)
        printf("peak activation memory: %s bytes per sample (the integer runtime's lifetime plan)\n",
               tools_grouped(s->peak_activation_bytes, a, sizeof a));
    else
        printf("peak activation memory: no integer plan (a float model, or one the runtime cannot run)\n");
    print_normalization(s->normalization);
}

static void print_json(const qat_summary *s, const char *kind, const char *source, bool prepared) {
    char g[24];
    printf("{\"source\": ");
    cli_json_str(source);
    printf(", \"kind\": \"%s\", \"quantized\": %s, \"rows\": [", kind, prepared ? "true" : "false");
    for (int i = 0; i < s->n_rows; i++) {
        const qat_summary_row *r = &s->rows[i];
        printf("%s{\"name\": ", i ? ", " : "");
        cli_json_str(r->name);
        printf(", \"op\": \"%s\", \"shape\": [", r->op);
        for (int d = 0; d < r->rank; d++) printf("%s%lld", d ? ", " : "", (long long)r->shape[d]);
        printf("], \"params\": %lld, \"macs\": %lld, \"weight_bytes\": %lld, \"weights\": ", (long long)r->params,
               (long long)r->macs, (long long)r->weight_bytes);
        if (r->wbits)
            printf("{\"bits\": %d, \"granularity\": \"%s\", \"scale_min\": %.9g, \"scale_max\": %.9g}", r->wbits,
                   granularity_text(r, g, sizeof g), (double)r->wscale_min, (double)r->wscale_max);
        else printf("null");
        printf(", \"activation\": ");
        if (!r->abits) printf("null");
        else if (!r->aobserved) printf("{\"bits\": %d, \"observed\": false}", r->abits);
        else printf("{\"bits\": %d, \"observed\": true, \"scale\": %.9g, \"zero_point\": %d, \"min\": %.9g, \"max\": %.9g}",
                    r->abits, (double)r->ascale, r->azero, (double)r->amin, (double)r->amax);
        printf("}");
    }
    printf("], \"params\": %lld, \"macs\": %lld, \"weight_bytes\": %lld, \"float_weight_bytes\": %lld, "
           "\"peak_activation_bytes\": ", (long long)s->params, (long long)s->macs, (long long)s->weight_bytes,
           (long long)s->float_weight_bytes);
    if (s->peak_activation_bytes >= 0) printf("%lld", (long long)s->peak_activation_bytes);
    else printf("null");
    const qat_normalization *n = s->normalization;
    printf(", \"normalization\": ");
    if (n) {
        printf("{\"channels\": %d, \"divisor\": %.9g, \"mean\": [", n->channels, (double)n->divisor);
        print_floats(n->mean, n->channels, true);
        printf("], \"std\": [");
        print_floats(n->std, n->channels, true);
        printf("], \"raw_uint8\": %s}", n->raw_uint8 ? "true" : "false");
    } else {
        printf("null");
    }
    printf("}\n");
}

/* ---- the sources ------------------------------------------------------------------------ */

/* The runtime's peak for a prepared model whose ranges were never
 * observed (untrained): the plan depends on shapes alone, so one forward
 * in training mode on two random samples gives the observers something to
 * hold, and the model is lowered and planned. It changes the model: call
 * it after taking the rows. */
static int64_t calibrated_peak(qat_model *m, int rank, const int64_t *shape, qat_ctx *ctx) {
    int64_t s4[4] = {2, shape[0], shape[1], shape[2]};
    qat_tensor *x = qat_tensor_new(qat_model_ctx(m), QAT_MEM_STEP, rank + 1, s4, false);
    if (!x) return -1;
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
    qat_model_train(m, true);
    qat_ctx_set_grad_enabled(qat_model_ctx(m), false);
    bool ok = qat_model_forward(m, x) != NULL;
    qat_ctx_step_reset(qat_model_ctx(m));
    qat_summary s;
    return ok && qat_model_summary(m, rank, shape, ctx, &s) == QAT_OK ? s.peak_activation_bytes : -1;
}

/* The model the options name, built, loaded and (unless --float or
 * QAT-trained already) prepared. */
static qat_status load_model(const opts *o, qat_ctx *ctx, qat_model **out, const char **kind) {
    qat_model *m = NULL;
    qat_status st;
    if (o->checkpoint) {
        *kind = "checkpoint";
        st = qat_checkpoint_model_limits(ctx, o->checkpoint, &o->limits, &m, NULL, 0);
    } else {
        *kind = "model";
        m = qat_model_new(ctx);
        st = !m ? qat_ctx_status(ctx)
             : qat_model_set_limits(m, &o->limits) != QAT_OK ? qat_ctx_status(ctx)
             : o->model_file ? qat_model_from_file(m, o->model_file)
             : !strcmp(o->model, "mlp") ? qat_model_mlp(m) : qat_model_lenet(m, !strcmp(o->model, "lenet-bn"));
        if (st == QAT_OK) st = qat_model_build(m, 1);
    }
    qat_prepare_config c;
    if (st == QAT_OK && !o->as_float && !qat_model_prepared(m) && qat_config(o, &c) == 0) st = qat_prepare(m, &c);
    *out = m;
    return st;
}

int cmd_summary(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    qat_prepare_config unused; /* checked before anything is read */
    if (!o.qmodel && (rc = qat_config(&o, &unused))) return rc;
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return cli_fail("qat", o.json, 1, "out of memory");
    qat_summary s;
    const char *kind = "qmodel", *source = o.qmodel ? o.qmodel : o.checkpoint ? o.checkpoint
                                                          : o.model_file ? o.model_file : o.model;
    bool quantized = true;
    char title[600];
    qat_status st;
    if (o.qmodel) {
        qat_qmodel q;
        st = qat_qmodel_load(ctx, o.qmodel, &q);
        if (st == QAT_OK) st = qat_qmodel_summary(&q, ctx, &s);
        snprintf(title, sizeof title, "%s: the integer program, a row per op", o.qmodel);
    } else {
        qat_model *m = NULL;
        bool trained = false;
        int64_t step, epoch;
        st = o.checkpoint ? qat_checkpoint_info(ctx, o.checkpoint, &step, &epoch, &trained) : QAT_OK;
        if (st == QAT_OK) st = load_model(&o, ctx, &m, &kind);
        int64_t shape[3];
        int rank = st == QAT_OK ? tools_input_shape(m, shape) : 0;
        if (st == QAT_OK) st = qat_model_summary(m, rank, shape, ctx, &s);
        quantized = st == QAT_OK && qat_model_prepared(m);
        if (st == QAT_OK && quantized && s.peak_activation_bytes < 0) s.peak_activation_bytes = calibrated_peak(m, rank, shape, ctx);
        if (!quantized) snprintf(title, sizeof title, "%s: float, a row per layer", source);
        else if (trained) snprintf(title, sizeof title, "%s: QAT-trained, a row per layer", source);
        else snprintf(title, sizeof title, "%s: as QAT would quantize it (W%ldA%ld, %s weights), a row per layer",
                      source, o.wbits, o.abits, o.granularity);
    }
    if (st != QAT_OK) {
        /* a model file it cannot take is bad input (2), as for train; a damaged checkpoint or quantized file: 1 */
        rc = cli_fail("qat", o.json, o.qmodel || o.checkpoint ? 1 : cli_status_of(st), "%s", qat_ctx_error(ctx));
    } else {
        if (o.json) print_json(&s, kind, source, quantized);
        else print_table(&s, title, quantized);
    }
    qat_ctx_free(ctx);
    return rc;
}
