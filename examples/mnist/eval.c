/* qat-mnist eval: runs a quantized checkpoint on the MNIST test set with
 * the integer, hybrid or fake-quantized engine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qat/data.h"
#include "qat/export.h"
#include "qat/infer.h"

static const char *const eval_usage =
    "usage: qat-mnist eval --model MODEL [options]\n"
    "\n"
    "Evaluates a quantized checkpoint (qat-mnist export) on the MNIST test set\n"
    "and reports test accuracy and inference samples/s.\n"
    "\n"
    "  --model MODEL            quantized checkpoint (.qat.h5)\n"
    "  --engine int|hybrid|fake int: integer only (default); hybrid: float\n"
    "                           activations, dequantized weights; fake: the\n"
    "                           fake-quantized float model the QAT run trained\n"
    "  --compare ENGINE         also run ENGINE and report how often the two agree\n"
    "  --data DIR               MNIST directory (default data/mnist)\n"
    "  --batch B                samples per run (default 64)\n"
    "  --limit-test N           use the first N test samples (default all)\n"
    "  --threads T              threads (default 1): the integer engine runs a slice of each\n"
    "                           batch per thread, the float engines split their ops\n"
    "  --predictions FILE       write each test image's predicted label, one a line\n"
    "  --json                   print a JSON summary as the last line of stdout\n"
    "                           ({\"error\": ..., \"status\": ...} when it fails)\n"
    "  --help                   this text\n";

/* One predicted label a line, written to a temporary file and renamed:
 * a comparison never reads half a file. 0, or -1 with errno set. */
static int write_predictions(const char *path, const int32_t *pred, int64_t n) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) return errno = ENAMETOOLONG, -1;
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    for (int64_t i = 0; i < n; i++) fprintf(f, "%d\n", pred[i]);
    int e = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && !e) e = errno;
    if (e || rename(tmp, path) != 0) {
        if (!e) e = errno;
        remove(tmp);
        return errno = e, -1;
    }
    return 0;
}

static const char *const engines[] = {"int", "hybrid", "fake", NULL};
static const qat_engine_mode engine_modes[] = {QAT_ENGINE_INT, QAT_ENGINE_HYBRID, QAT_ENGINE_FAKE};

/* --engine or --compare into *m; a message (naming the engines) and
 * EXIT_USAGE when it names none. */
static int parse_engine(const char *opt, const char *s, bool json, qat_engine_mode *m) {
    char list[64];
    int i = cli_choice(s, engines);
    if (i < 0)
        return cli_usage_fail("qat-mnist eval", json, eval_usage, "unknown value \"%s\" for %s (one of %s)", s, opt,
                              cli_choice_list(engines, list, sizeof list));
    *m = engine_modes[i];
    return 0;
}

/* Predictions of engine e over the first n test samples; returns the
 * seconds spent inside qat_engine_run (0 > on error). */
static double predict(qat_engine *e, const qat_qmodel *q, const qat_mnist *d, int64_t n, int64_t B,
                      float *x, float *logits, int32_t *idx, int32_t *y, int32_t *pred) {
    double t = 0;
    for (int64_t s = 0; s < n; s += B) {
        int64_t b = n - s < B ? n - s : B;
        for (int64_t i = 0; i < b; i++) idx[i] = (int32_t)(s + i);
        qat_mnist_batch(d, idx, b, x, y);
        double t0 = cli_now();
        if (qat_engine_run(e, x, b, logits, NULL) != QAT_OK) return -1;
        t += cli_now() - t0;
        for (int64_t i = 0; i < b; i++) {
            int64_t K = qat_qtensor_numel(&q->tensors[q->output]);
            const float *l = logits + i * K;
            int best = 0;
            for (int k = 1; k < K; k++) best = l[k] > l[best] ? k : best;
            pred[s + i] = best;
        }
    }
    return t;
}

int cmd_eval(int argc, char **argv) {
    const char *P = "qat-mnist eval", *path = NULL, *data = "data/mnist", *engine = "int", *compare = NULL;
    long batch = 64, limit = 0, threads = 1;
    bool json = false;
    const char *predictions = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
#define VAL() (v = cli_value(P, argc, argv, &i))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(eval_usage, stdout), 0;
        else if (!strcmp(a, "--model")) ok = VAL() && (path = v);
        else if (!strcmp(a, "--engine")) ok = VAL() && (engine = v);
        else if (!strcmp(a, "--compare")) ok = VAL() && (compare = v);
        else if (!strcmp(a, "--data")) ok = VAL() && (data = v);
        else if (!strcmp(a, "--batch")) ok = VAL() && cli_int(P, a, v, 1, 10000, &batch);
        else if (!strcmp(a, "--limit-test")) ok = VAL() && cli_int(P, a, v, 1, 10000, &limit);
        else if (!strcmp(a, "--threads")) ok = VAL() && cli_int(P, a, v, 1, 256, &threads);
        else if (!strcmp(a, "--predictions")) ok = VAL() && (predictions = v);
        else if (!strcmp(a, "--json")) json = true;
        else fprintf(stderr, "%s: unknown option \"%s\"\n", P, a), ok = false;
#undef VAL
        if (!ok) return fputs(eval_usage, stderr), EXIT_USAGE;
    }
    qat_engine_mode mode = QAT_ENGINE_INT, cmode = QAT_ENGINE_INT;
    if (!path) return cli_usage_fail(P, json, eval_usage, "--model is required");
    int rc = parse_engine("--engine", engine, json, &mode);
    if (!rc && compare) rc = parse_engine("--compare", compare, json, &cmode);
    if (rc) return rc;
    qat_set_threads(1); /* the pool splits the work: OpenBLAS's own threads would multiply it */
    if (mode != QAT_ENGINE_INT || (compare && cmode != QAT_ENGINE_INT)) cli_blas_note();
    qat_status pst;
    qat_pool *pool = qat_pool_new((int)threads, &pst);
    if (!pool) return cli_fail("qat-mnist", json, 1, "cannot start %ld threads: %s", threads, qat_status_str(pst));
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return qat_pool_free(pool), cli_fail("qat-mnist", json, 1, "out of memory");
    qat_ctx_set_pool(ctx, pool);
    qat_mnist test = {0};
    qat_engine *e = NULL, *ce = NULL;
    float *x = NULL, *logits = NULL;
    int32_t *idx = NULL, *y = NULL, *pred = NULL, *cpred = NULL;
    rc = 1;
    qat_qmodel *q = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *q);
    if (!q || qat_qmodel_load(ctx, path, q) != QAT_OK || qat_mnist_load(ctx, data, "test", &test) != QAT_OK)
        goto fail;
    int64_t in_numel = qat_qtensor_numel(&q->tensors[q->input]), n_out = qat_qtensor_numel(&q->tensors[q->output]);
    if (in_numel != (int64_t)test.rows * test.cols) {
        cli_fail("qat-mnist", json, 1, "%s takes %lld inputs per sample, MNIST has %d", path, (long long)in_numel,
                 test.rows * test.cols);
        goto done;
    }
    int64_t n = limit > 0 && limit < test.n ? limit : test.n;
    x = malloc((size_t)(batch * in_numel) * sizeof *x);
    logits = malloc((size_t)(batch * n_out) * sizeof *logits);
    idx = malloc((size_t)batch * sizeof *idx), y = malloc((size_t)batch * sizeof *y);
    pred = malloc((size_t)n * sizeof *pred), cpred = malloc((size_t)n * sizeof *cpred);
    if (!x || !logits || !idx || !y || !pred || !cpred) {
        cli_fail("qat-mnist", json, 1, "out of memory");
        goto done;
    }
    if (!(e = qat_engine_new(ctx, q, mode, (int)batch))) goto fail;
    if (compare && !(ce = qat_engine_new(ctx, q, cmode, (int)batch))) goto fail;
    double secs = predict(e, q, &test, n, batch, x, logits, idx, y, pred);
    if (secs < 0 || (ce && predict(ce, q, &test, n, batch, x, logits, idx, y, cpred) < 0)) goto fail;
    int64_t correct = 0, agree = 0;
    for (int64_t i = 0; i < n; i++) {
        correct += pred[i] == test.labels[i];
        if (ce) agree += pred[i] == cpred[i];
    }
    double acc = (double)correct / (double)n, rate = (double)n / (secs > 0 ? secs : 1e-9);
    if (predictions && write_predictions(predictions, pred, n) != 0) {
        cli_fail("qat-mnist", json, 1, "%s: cannot write: %s", predictions, strerror(errno));
        goto done;
    }
    int64_t peak = qat_engine_peak_activation_bytes(e);
    fprintf(stderr, "qat-mnist: %s engine: test accuracy %.2f %% on %lld samples, %.0f samples/s (batch %ld)\n",
            engine, 100 * acc, (long long)n, rate, batch);
    if (peak >= 0)
        fprintf(stderr, "qat-mnist: integer runtime: %lld bytes of activations per sample (lifetime plan), %s kernel\n",
                (long long)peak, qat_runtime_kernel());
    if (ce) fprintf(stderr, "qat-mnist: %s and %s engines agree on %.2f %% of predictions\n", engine, compare,
                    100.0 * (double)agree / (double)n);
    if (json) {
        const char *core = getenv("OPENBLAS_CORETYPE");
        printf("{\"model\": ");
        cli_json_str(path);
        printf(", \"engine\": \"%s\", \"test_samples\": %lld, \"test_accuracy\": %.6f, \"infer_samples_per_s\": %.1f, "
               "\"batch\": %ld, \"threads\": %ld, \"peak_rss_mib\": %.1f, \"peak_activation_bytes\": %lld, \"openblas_coretype\": ",
               engine, (long long)n, acc, rate, batch, threads, cli_peak_rss_mib(), (long long)peak);
        cli_json_str(core ? core : "");
        printf(", \"blas_core\": ");
        cli_json_str(qat_blas_core());
        if (ce) {
            int64_t ccorrect = 0;
            for (int64_t i = 0; i < n; i++) ccorrect += cpred[i] == test.labels[i];
            printf(", \"compare_engine\": \"%s\", \"compare_test_accuracy\": %.6f, \"agreement\": %.6f", compare,
                   (double)ccorrect / (double)n, (double)agree / (double)n);
        }
        printf("}\n");
    }
    rc = 0;
    goto done;
fail:
    cli_fail("qat-mnist", json, 1, "%s", qat_ctx_error(ctx));
done:
    qat_engine_free(e);
    qat_engine_free(ce);
    free(x), free(logits), free(idx), free(y), free(pred), free(cpred);
    qat_mnist_free(&test);
    qat_ctx_free(ctx);
    qat_pool_free(pool);
    return rc;
}
