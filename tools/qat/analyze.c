/* qat analyze: where a QAT checkpoint's quantization loses
 * accuracy, point by point, on the first samples of a data set's test split —
 * ranked worst first, with a hint where one point stands out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
#include "qat/analyze.h"
#include "data_arg.h"
#include "qat/data.h"
#include "qat/io.h"
#include "qat/train.h"
#include "tools.h"

static const char *const analyze_usage =
    "usage: qat analyze --checkpoint CKPT [options]\n"
    "\n"
    "Measures each quantization point of a QAT checkpoint (each tensor the\n"
    "integer program stores, with the weights of the layer that computes it) on\n"
    "the first test samples, in eval mode, float and fake-quantized side by side:\n"
    "  SQNR     the point's tensor, float forward against all points quantized (dB)\n"
    "  own      its quantizer's input against its output: the noise it adds itself (dB)\n"
    "  clipped  the values its quantizer clamps at qmin or qmax\n"
    "  alone    the logits' noise with only this point quantized (its weights and\n"
    "           activation; then each alone), as a share of the noise with every\n"
    "           point quantized, and the accuracy it leaves\n"
    "Points are ranked by that share, worst first; a point that stands out gets a\n"
    "one-line hint.\n"
    "\n"
    "  --checkpoint CKPT   a training checkpoint of a --qat run (qat train --out)\n"
    DATA_ARG_USAGE
    "  --limit-test N      the first N test samples (default 1000)\n"
    "  --batch B           samples per forward (default 100)\n"
    "  --threads T         OpenBLAS threads (default 1)\n"
    "  --json              the figures as one JSON object (last line of stdout)\n"
    "  --help              this text\n";

#define P "qat analyze"

/* Is there a drop to explain? The fake-quantized model 0.2 points or more
 * less accurate than its own weights in float, on this sample (less is a
 * sample's noise: 2 images in 1000). A low-bit QAT model is often *more*
 * accurate than its float weights (it was trained quantized): its noise
 * against float is large, but costs nothing. */

/* Accuracies are -1 where the data have no class labels (regression, autoencoders). */
static bool labelled(const qat_analysis_report *r) { return r->accuracy_float >= 0; }
static bool dropped(const qat_analysis_report *r) {
    return labelled(r) && r->accuracy_float - r->accuracy_quant >= 0.002;
}

/* A point that clips 1 % of its values or more has a range too narrow
 * for its data: worth a hint whatever the accuracy says (a model trained
 * with clipped ranges adapts to them, and loses anyway). */
static bool clips(const qat_point_report *p) { return p->clipped_low + p->clipped_high >= 0.01; }

/* A point stands out when it clips, or when the model dropped and,
 * quantized alone, the point carries at least a quarter of the
 * all-quantized model's logit noise and twice the median point's, and
 * costs accuracy by itself (0.2 points or more). At W8A8 the logits' own
 * 8 bits usually carry most of a small noise that costs nothing: no hint
 * then. */
static bool stands_out(const qat_analysis_report *r, const qat_point_report *p) {
    if (clips(p)) return true;
    if (!dropped(r) || r->accuracy_float - p->alone_accuracy < 0.002) return false;
    double *shares = malloc((size_t)r->n_points * sizeof *shares), median = 0;
    if (!shares) return false;
    for (int i = 0; i < r->n_points; i++) shares[i] = r->points[i].alone_share;
    for (int i = 1; i < r->n_points; i++) /* insertion sort: a handful of points */
        for (int j = i; j > 0 && shares[j] < shares[j - 1]; j--) {
            double t = shares[j];
            shares[j] = shares[j - 1], shares[j - 1] = t;
        }
    median = shares[r->n_points / 2];
    free(shares);
    return p->alone_share >= 0.25 && p->alone_share >= 2 * median;
}

/* The one-line hint for a point that stands out, by what makes its noise.
 * frozen: the checkpoint's ranges were frozen (--freeze-observers). */
static void hint(const qat_point_report *p, int output_layer, bool frozen, char *buf, size_t len) {
    double clipped = p->clipped_low + p->clipped_high;
    bool io = p->layer == 0 || p->layer == output_layer;
    if (clips(p))
        snprintf(buf, len, "%s clips %.1f %% of its values: its range is too narrow for the data%s", p->name,
                 100 * clipped, frozen ? " (frozen by --freeze-observers before it settled: freeze later)"
                                       : " (an observer that lags, or a fixed range): recalibrate it, or more bits");
    else if (p->wbits && p->alone_weights_share >= 2 * p->alone_activation_share)
        snprintf(buf, len, "%s: %s's weights (W%d per %s) add most of its noise: %s", p->name, p->anchor_name, p->wbits,
                 p->waxis == -1 ? "tensor" : p->waxis == 0 ? "channel" : "block",
                 p->waxis == -1 ? "per-channel scales (--granularity channel), more weight bits or --lsq"
                                : "more weight bits for this layer (qat_prepare_layer) or learned scales (--lsq)");
    else if (p->alone_activation_share >= 2 * p->alone_weights_share)
        snprintf(buf, len, "%s: its activation (A%d) adds most of its noise: %s", p->name, p->bits,
                 io ? "more bits for the model's input and logits (--io-bits)"
                    : "more activation bits for this layer (qat_prepare_layer), or a longer QAT run");
    else
        snprintf(buf, len, "%s: its weights (W%d) and its activation (A%d) both add noise: more bits for this layer "
                 "(qat_prepare_layer)", p->name, p->wbits, p->bits);
}

static void json_num(double x) {
    if (isfinite(x)) printf("%.6g", x);
    else printf("null"); /* an infinite SQNR: no noise at all */
}

/* An accuracy, null without class labels. */
static void json_acc(double x) { x >= 0 ? json_num(x) : (void)printf("null"); }

static void print_json(const char *ckpt, const qat_analysis_report *r, int output_layer, bool frozen) {
    printf("{\"checkpoint\": ");
    cli_json_str(ckpt);
    printf(", \"samples\": %lld, \"accuracy_float\": ", (long long)r->samples);
    json_acc(r->accuracy_float);
    printf(", \"accuracy_fake_quant\": ");
    json_acc(r->accuracy_quant);
    printf(", \"logits_sqnr_db\": ");
    json_num(r->logits_sqnr_db);
    printf(", \"points\": [");
    for (int i = 0; i < r->n_points; i++) {
        const qat_point_report *p = &r->points[i];
        printf("%s{\"rank\": %d, \"point\": ", i ? ", " : "", i + 1);
        cli_json_str(p->name);
        printf(", \"layer\": ");
        cli_json_str(p->anchor_name);
        printf(", \"abits\": %d, \"wbits\": %d, \"sqnr_db\": ", p->bits, p->wbits);
        json_num(p->sqnr_db);
        printf(", \"own_sqnr_db\": ");
        json_num(p->own_sqnr_db);
        printf(", \"clipped_low\": %.6g, \"clipped_high\": %.6g, \"alone_share\": %.6g, \"alone_weights_share\": %.6g, "
               "\"alone_activation_share\": %.6g, \"alone_logits_sqnr_db\": ", p->clipped_low, p->clipped_high,
               p->alone_share, p->alone_weights_share, p->alone_activation_share);
        json_num(p->alone_logits_sqnr_db);
        printf(", \"alone_accuracy\": ");
        json_acc(p->alone_accuracy);
        printf(", \"hint\": ");
        char h[512];
        if (stands_out(r, p)) hint(p, output_layer, frozen, h, sizeof h), cli_json_str(h);
        else printf("null");
        printf("}");
    }
    printf("]}\n");
}

static void print_table(const char *ckpt, const qat_analysis_report *r, int output_layer, bool frozen) {
    printf("%s: %lld test samples\n", ckpt, (long long)r->samples);
    if (labelled(r))
        printf("accuracy: float %.2f %%, fake-quantized %.2f %%; logits SQNR %.1f dB (fake-quantized vs float)\n\n",
               100 * r->accuracy_float, 100 * r->accuracy_quant, r->logits_sqnr_db);
    else
        printf("no class labels (not a classification set): outputs' SQNR %.1f dB (fake-quantized vs float)\n\n",
               r->logits_sqnr_db);
    int w = 5, wa = 5;
    for (int i = 0; i < r->n_points; i++) {
        w = (int)strlen(r->points[i].name) > w ? (int)strlen(r->points[i].name) : w;
        wa = (int)strlen(r->points[i].anchor_name) > wa ? (int)strlen(r->points[i].anchor_name) : wa;
    }
    printf("rank  %-*s  %-*s  bits    SQNR dB  own dB  clipped   alone: share (weights / activation)  accuracy\n", w,
           "point", wa, "after");
    for (int i = 0; i < r->n_points; i++) {
        const qat_point_report *p = &r->points[i];
        char bits[16];
        if (p->wbits) snprintf(bits, sizeof bits, "W%dA%d", p->wbits, p->bits);
        else snprintf(bits, sizeof bits, "A%d", p->bits);
        char acc[16];
        if (p->alone_accuracy >= 0) snprintf(acc, sizeof acc, "%6.2f %%", 100 * p->alone_accuracy);
        else snprintf(acc, sizeof acc, "%8s", "n/a");
        printf("%4d  %-*s  %-*s  %-6s %8.1f %7.1f  %6.2f %%  %11.1f %%  (%5.1f %% / %5.1f %%)     %s\n", i + 1, w,
               p->name, wa, p->anchor_name, bits, p->sqnr_db, p->own_sqnr_db, 100 * (p->clipped_low + p->clipped_high),
               100 * p->alone_share, 100 * p->alone_weights_share, 100 * p->alone_activation_share, acc);
    }
    int hints = 0;
    for (int i = 0; i < r->n_points; i++) {
        char h[512];
        if (!stands_out(r, &r->points[i])) continue;
        hint(&r->points[i], output_layer, frozen, h, sizeof h);
        printf("%shint: %s\n", hints++ ? "" : "\n", h);
    }
    if (hints) return;
    if (!labelled(r))
        printf("\nno class labels to count a drop: the ranking by output noise (alone: share) shows where quantization\n"
               "costs most\n");
    else if (!dropped(r))
        printf("\nno drop to explain: the fake-quantized model is within 0.2 points of its float weights here, or\n"
               "better; the ranking shows where the noise is\n");
    else
        printf("\nno point stands out: the drop comes from the noise of many points together (more bits, or a\n"
               "longer QAT run), not from one\n");
}

/* Runs the analysis over the first n test samples (with their labels
 * when the split has classes: the accuracies). */
static qat_status run(qat_model *m, qat_dataset *d, int64_t n, int64_t B, qat_analysis_report *r) {
    int64_t shape[3], numel = 1;
    int rank = tools_input_shape(m, shape);
    for (int k = 0; k < rank; k++) numel *= shape[k];
    bool labelled = qat_dataset_info(d, QAT_SPLIT_TEST)->target == QAT_TARGET_CLASS;
    qat_analysis *a = qat_analysis_new(m, (int)B, rank, shape);
    float *x = malloc((size_t)(B * numel) * sizeof *x);
    int32_t *idx = malloc((size_t)B * sizeof *idx), *y = malloc((size_t)B * sizeof *y);
    qat_status st = !a ? qat_ctx_status(qat_model_ctx(m)) : QAT_OK;
    if (st == QAT_OK && (!x || !idx || !y)) st = qat_ctx_fail(qat_model_ctx(m), QAT_ERR_NOMEM, "out of memory");
    progress bar;
    if (st == QAT_OK) progress_start(&bar, "analyze", n);
    for (int64_t s = 0; st == QAT_OK && s < n; s += B) {
        int64_t b = n - s < B ? n - s : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(s + i);
        st = qat_dataset_read(d, QAT_SPLIT_TEST, idx, b, x, labelled ? y : NULL, NULL, NULL);
        if (st == QAT_OK) st = qat_analysis_add(a, x, b, labelled ? y : NULL);
        progress_update(&bar, s + b, "");
    }
    if (st == QAT_OK) progress_end(&bar, ""), st = qat_analysis_result(a, r);
    free(x), free(idx), free(y);
    return st;
}

/* The test split against the model: its samples' layout and its labels
 * (what eval checks, qat_data_check). */
int cmd_analyze(int argc, char **argv) {
    const char *ckpt = NULL;
    data_arg data = {.path = "data/mnist"};
    long limit = 1000, batch = 100, threads = 1;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
#define VAL() (v = cli_value(P, argc, argv, &i))
        int d = data_arg_parse(&data, P, argc, argv, &i);
        if (d) ok = d > 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(analyze_usage, stdout), 0;
        else if (!strcmp(a, "--checkpoint")) ok = VAL() && (ckpt = v);
        else if (!strcmp(a, "--limit-test")) ok = VAL() && cli_int(P, a, v, 1, 2147483647L, &limit);
        else if (!strcmp(a, "--batch")) ok = VAL() && cli_int(P, a, v, 1, 1000, &batch);
        else if (!strcmp(a, "--threads")) ok = VAL() && cli_int(P, a, v, 1, 256, &threads);
        else if (!strcmp(a, "--json")) json = true;
        else fprintf(stderr, "%s: unknown option \"%s\" (%s --help lists the options)\n", P, a, P), ok = false;
#undef VAL
        if (!ok) return EXIT_USAGE; /* the message said it, with the --help hint */
    }
    if (!ckpt) return cli_usage_fail(P, json, analyze_usage, "--checkpoint is required");
    qat_set_threads((int)threads);
    cli_blas_note();
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return cli_fail("qat", json, 1, "out of memory");
    qat_dataset *test = NULL;
    qat_model *m = NULL;
    qat_analysis_report r;
    int rc = 0;
    if (qat_checkpoint_model(ctx, ckpt, &m, NULL, 0) != QAT_OK) {
        rc = cli_fail("qat", json, 1, "%s", qat_ctx_error(ctx));
    } else if (!qat_model_prepared(m)) { /* before the data is read: input the command cannot take */
        rc = cli_fail("qat", json, EXIT_USAGE, "%s is a float checkpoint: analyze measures quantization, train with "
                      "--qat", ckpt);
    } else if (data_arg_open(&data, "qat", 1, 1u << QAT_SPLIT_TEST, ctx, &test) != QAT_OK) {
        rc = cli_fail("qat", json, 1, "%s", qat_ctx_error(ctx));
    } else if (tools_data_fits(m, test, QAT_SPLIT_TEST, NULL) != QAT_OK || /* the samples are read into the model's input */
               data_arg_check_units(&data, test, QAT_SPLIT_TEST, limit, qat_model_normalization(m), ctx) != QAT_OK) {
        rc = cli_fail("qat", json, cli_status_of(qat_ctx_status(ctx)), "%s: %s", data.path, qat_ctx_error(ctx));
    } else if (run(m, test, limit < qat_dataset_info(test, QAT_SPLIT_TEST)->n ? limit : qat_dataset_info(test, QAT_SPLIT_TEST)->n,
                   batch, &r) != QAT_OK) {
        rc = cli_fail("qat", json, 1, "%s: %s", ckpt, qat_ctx_error(ctx));
    } else if (json) {
        print_json(ckpt, &r, qat_model_output(m), qat_model_observers_frozen(m));
    } else {
        print_table(ckpt, &r, qat_model_output(m), qat_model_observers_frozen(m));
    }
    qat_dataset_free(test);
    qat_ctx_free(ctx);
    return rc;
}
