/* qat eval: a quantized model file run on a split of a data set by the
 * integer, hybrid or fake-quantized engine, and the task's metrics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data_arg.h"
#include "progress.h"
#include "train_options.h"
#include "qat/export.h"
#include "qat/infer.h"

#define P "qat eval"
#define PROG "qat"

static const char *const eval_usage =
    "usage: qat eval --model MODEL [options]\n"
    "\n"
    "Runs a quantized model file (qat export) on a split of a data set and reports\n"
    "the task's metrics (accuracy, top-k, per-class accuracy; or the MSE and, with\n"
    "anomaly labels, the ROC AUC) and the inference speed.\n"
    "\n"
    "  --model MODEL               quantized model file (.qat.h5)\n"
    "  --engine int|hybrid|fake    int: integer only (default); hybrid: float activations,\n"
    "                              dequantized weights; fake: the fake-quantized float model\n"
    "                              the QAT run trained\n"
    "  --compare ENGINE            also run ENGINE and report how often the two agree\n"
    DATA_ARG_USAGE
    "  --split S                   test (default), val or train\n"
    "  --task T                    classify, regress or autoencoder (default: the task the model's\n"
    "                              training recorded, else from the data's y)\n"
    "  --topk K                    classify: also report top-K accuracy, K below the classes (default 5,\n"
    "                              not shown for 5 classes or fewer; 0: off)\n"
    "  --batch B                   samples per run (default 64)\n"
    "  --limit-test N              use the first N samples of the split (default all)\n"
    "  --threads T                 threads (default 1): the integer engine runs a slice of each\n"
    "                              batch per thread, the float engines split their ops\n"
    "  --predictions FILE          classify: each sample's predicted class, one a line\n"
    "  --outputs FILE.npy          every sample's raw outputs: the integers (int32) for the\n"
    "                              int engine, the floats (float32) for hybrid and fake\n"
    "  --per-class                 classify: print each class's accuracy and the confusion matrix\n"
    "  --json                      print a JSON summary as the last line of stdout\n"
    "                              ({\"error\": ..., \"status\": ...} when it fails)\n"
    "  --help                      this text\n";

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
static const char *const splits[] = {"train", "val", "test", NULL};
static const char *const tasks[] = {"classify", "regress", "autoencoder", NULL};

typedef struct {
    const char *path, *engine, *compare, *split, *task, *predictions, *outputs;
    data_arg data;
    long batch, limit, threads, topk;
    bool json, per_class, topk_set;
} eval_opts;

/* A choice among allowed, or a one-line message naming them (EXIT_USAGE). */
static int choice(const eval_opts *o, const char *opt, const char *v, const char *const *allowed, int *out) {
    char list[80];
    if ((*out = cli_choice(v, allowed)) >= 0) return 0;
    return cli_fail(P, o->json, EXIT_USAGE, "unknown value \"%s\" for %s (one of %s)", v, opt,
                    cli_choice_list(allowed, list, sizeof list));
}

static int parse(int argc, char **argv, eval_opts *o) {
    *o = (eval_opts){.engine = "int", .split = "test", .data = {.path = "data/mnist"}, .batch = 64, .threads = 1,
                     .topk = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
#define VAL() (v = cli_value(P, argc, argv, &i))
        int d = data_arg_parse(&o->data, P, argc, argv, &i);
        if (d) ok = d > 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(eval_usage, stdout), -1;
        else if (!strcmp(a, "--model")) ok = VAL() && (o->path = v);
        else if (!strcmp(a, "--engine")) ok = VAL() && (o->engine = v);
        else if (!strcmp(a, "--compare")) ok = VAL() && (o->compare = v);
        else if (!strcmp(a, "--split")) ok = VAL() && (o->split = v);
        else if (!strcmp(a, "--task")) ok = VAL() && (o->task = v);
        else if (!strcmp(a, "--batch")) ok = VAL() && cli_int(P, a, v, 1, 10000, &o->batch);
        else if (!strcmp(a, "--limit-test")) ok = VAL() && cli_int(P, a, v, 1, 2147483647L, &o->limit);
        else if (!strcmp(a, "--threads")) ok = VAL() && cli_int(P, a, v, 1, 256, &o->threads);
        else if (!strcmp(a, "--topk")) ok = VAL() && cli_int(P, a, v, 0, 1000, &o->topk) && (o->topk_set = true);
        else if (!strcmp(a, "--predictions")) ok = VAL() && (o->predictions = v);
        else if (!strcmp(a, "--outputs")) ok = VAL() && (o->outputs = v);
        else if (!strcmp(a, "--per-class")) o->per_class = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else return cli_fail(P, o->json, EXIT_USAGE, "unknown option \"%s\" (qat eval --help lists the options)", a);
#undef VAL
        if (!ok) return EXIT_USAGE; /* the message said it, with the --help hint */
    }
    if (!o->path) return cli_fail(P, o->json, EXIT_USAGE, "--model is required (qat eval --help lists the options)");
    return 0;
}

static void on_progress(void *user, int64_t done, int64_t total) {
    progress *bar = user;
    (void)total;
    progress_update(bar, done, NULL);
}

/* The per-class accuracies and the confusion matrix (rows: labels). */
static void print_classes(const qat_metrics *m) {
    int K = m->classes;
    fprintf(stderr, "class  samples  accuracy\n");
    for (int k = 0; k < K; k++) {
        int64_t row = 0;
        for (int j = 0; j < K; j++) row += m->confusion[(int64_t)k * K + j];
        if (row) fprintf(stderr, "%5d  %7lld  %6.2f %%\n", k, (long long)row,
                         100.0 * (double)m->confusion[(int64_t)k * K + k] / (double)row);
        else fprintf(stderr, "%5d  %7d  -\n", k, 0);
    }
    if (K > 32) return;
    fprintf(stderr, "confusion matrix (row: label, column: prediction)\n");
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < K; j++) fprintf(stderr, "%6lld", (long long)m->confusion[(int64_t)k * K + j]);
        fputc('\n', stderr);
    }
}

static void json_figures(const qat_metrics *m, const char *prefix) {
    if (m->task == QAT_TASK_CLASSIFY) {
        printf(", \"%saccuracy\": %.6f", prefix, m->accuracy);
        if (m->topk) printf(", \"%stop%d_accuracy\": %.6f", prefix, m->topk, m->topk_accuracy);
    } else {
        printf(", \"%smse\": %.8g, \"%sauc\": ", prefix, m->mse, prefix);
        if (m->has_auc) printf("%.6f", m->auc);
        else printf("null");
    }
    printf(", \"%sloss\": %.6f", prefix, m->loss);
}

typedef struct {
    eval_opts o;
    qat_ctx *ctx;
    qat_dataset *data;
    qat_qmodel *q;
    qat_split split;
    qat_task task;
    int64_t n, K;
} eval_run;

/* Engine `mode` over the split: its metrics, the seconds inside the
 * engine, the outputs when asked for. */
static int measure(eval_run *r, qat_engine_mode mode, const char *name, qat_metrics *m, double *seconds,
                   void *outputs) {
    qat_engine *e = qat_engine_new(r->ctx, r->q, mode, (int)r->o.batch);
    if (!e) return cli_fail(PROG, r->o.json, 1, "%s", qat_ctx_error(r->ctx));
    char label[32];
    snprintf(label, sizeof label, "%s engine", name);
    progress bar;
    progress_start(&bar, label, r->n);
    qat_engine_eval how = {.limit = r->o.limit, .batch = (int)r->o.batch,
                           .progress = on_progress, .user = &bar};
    if (mode == QAT_ENGINE_INT) how.outputs_q = outputs;
    else how.outputs_f = outputs;
    qat_status st = qat_engine_evaluate(r->ctx, e, r->q, r->data, r->split, &r->task, &how, m);
    qat_engine_free(e);
    if (st != QAT_OK) return cli_fail(PROG, r->o.json, cli_status_of(st), "%s", qat_ctx_error(r->ctx));
    progress_end(&bar, NULL);
    *seconds = how.seconds;
    return 0;
}

static int evaluate(eval_run *r, qat_engine_mode mode, qat_engine_mode cmode) {
    const eval_opts *o = &r->o;
    r->q = qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, sizeof *r->q);
    if (!r->q || qat_qmodel_load(r->ctx, o->path, r->q) != QAT_OK) return cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(r->ctx));
    fprintf(stderr, "%s: building the evaluation: %s on %s\n", PROG, o->path, o->data.path);
    /* the split measured alone (a val carved from train needs train too) */
    unsigned splits = r->split == QAT_SPLIT_VAL && o->data.val > 0 ? (1u << QAT_SPLIT_TRAIN | 1u << QAT_SPLIT_VAL)
                                                                   : 1u << r->split;
    /* the task the training recorded: the default, and --task may not contradict it (a classifier's
     * logits scored as a regression's MSE say nothing) */
    char trained[16];
    int rec_task = train_config_string(r->q->config, "task", trained, sizeof trained) ? cli_choice(trained, tasks) : -1;
    if (o->task && rec_task >= 0 && cli_choice(o->task, tasks) != rec_task)
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s was trained for the %s task; --task asks for %s", o->path,
                        trained, o->task);
    /* a val carved from train: by the seed the training recorded, unless --val-seed says otherwise */
    double rec_seed = 1;
    long seed = train_config_number(r->q->config, "val_seed", &rec_seed) && rec_seed >= 0 && rec_seed <= 2147483647.0
                    ? (long)rec_seed : 1;
    if (data_arg_open(&o->data, PROG, seed, splits, r->ctx, &r->data) != QAT_OK)
        return cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s", qat_ctx_error(r->ctx));
    const qat_split_info *info = qat_dataset_info(r->data, r->split);
    if (!info)
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s: the data set has no %s split%s", o->data.path, o->split,
                        r->split == QAT_SPLIT_VAL ? " (a training run's --val F carved its val from train: give eval the "
                                                    "same --val F; eval draws it with the seed the run recorded, or --val-seed S)"
                                                  : "");
    if (data_arg_check_units(&o->data, r->data, r->split, o->limit, r->q->norm, r->ctx) != QAT_OK)
        return cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s: %s", o->data.path,
                        qat_ctx_error(r->ctx));
    int t; /* --task, else the recorded task (the evaluation checks the data against it), else the data's y */
    if (o->task) t = cli_choice(o->task, tasks);
    else if (rec_task >= 0) t = rec_task;
    else t = info->target == QAT_TARGET_CLASS ? 0 : info->target == QAT_TARGET_VALUES ? 1 : 2;
    r->task = (qat_task){.kind = (qat_task_kind)t, .topk = (int)o->topk};
    r->n = o->limit > 0 && o->limit < info->n ? o->limit : info->n;
    r->K = qat_qtensor_numel(&r->q->tensors[r->q->output]);
    if (o->topk_set && o->topk > 0 && r->task.kind == QAT_TASK_CLASSIFY && o->topk >= r->K) /* the default 5 goes quietly */
        return cli_fail(PROG, o->json, EXIT_USAGE, "--topk %ld: the model has %lld classes, so every sample is in its "
                        "top %ld (take K below %lld, or 0)", o->topk, (long long)r->K, o->topk, (long long)r->K);
    const char *classifier_only = o->predictions ? "--predictions" : o->per_class ? "--per-class" : o->topk_set && o->topk ? "--topk" : NULL;
    if (classifier_only && r->task.kind != QAT_TASK_CLASSIFY)
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s is for classification; the task here is %s", classifier_only,
                        qat_task_kind_str(r->task.kind));
    void *outputs = o->outputs ? malloc((size_t)(r->n * r->K) * 4) : NULL;
    if (o->outputs && !outputs) return cli_fail(PROG, o->json, 1, "out of memory for the outputs");
    qat_metrics m = {0}, cm = {0};
    double secs = 0, csecs = 0;
    int rc = measure(r, mode, o->engine, &m, &secs, outputs);
    if (!rc && o->compare) rc = measure(r, cmode, o->compare, &cm, &csecs, NULL);
    if (!rc && o->predictions && write_predictions(o->predictions, m.predictions, m.n) != 0)
        rc = cli_fail(PROG, o->json, 1, "%s: cannot write: %s", o->predictions, strerror(errno));
    if (!rc && o->outputs) {
        const qat_qtensor *ot = &r->q->tensors[r->q->output];
        int64_t shape[4] = {r->n, ot->shape[0], ot->shape[1], ot->shape[2]};
        if (qat_npy_save(r->ctx, o->outputs, mode == QAT_ENGINE_INT ? QAT_DT_I32 : QAT_DT_F32, ot->rank + 1, shape,
                         outputs) != QAT_OK)
            rc = cli_fail(PROG, o->json, 1, "%s", qat_ctx_error(r->ctx));
    }
    free(outputs);
    if (rc) return qat_metrics_free(&m), qat_metrics_free(&cm), rc;
    double rate = (double)m.n / (secs > 0 ? secs : 1e-9);
    char what[96];
    if (m.task == QAT_TASK_CLASSIFY) snprintf(what, sizeof what, "accuracy %.2f %%", 100 * m.accuracy);
    else if (m.has_auc) snprintf(what, sizeof what, "mse %.6g, auc %.4f", m.mse, m.auc);
    else snprintf(what, sizeof what, "mse %.6g", m.mse);
    fprintf(stderr, "%s: %s engine: %s %s on %lld samples, %.0f samples/s in the engine (batch %ld; the bar counts reading the data too)\n", PROG, o->engine, o->split,
            what, (long long)m.n, rate, o->batch);
    if (m.task == QAT_TASK_CLASSIFY && m.topk)
        fprintf(stderr, "%s: top-%d accuracy %.2f %%\n", PROG, m.topk, 100 * m.topk_accuracy);
    int64_t peak = -1;
    if (mode == QAT_ENGINE_INT) {
        qat_engine *e = qat_engine_new(r->ctx, r->q, mode, 1);
        peak = qat_engine_peak_activation_bytes(e);
        qat_engine_free(e);
        fprintf(stderr, "%s: integer runtime: %lld bytes of activations per sample (lifetime plan), %s kernel, %s "
                "rounding\n", PROG, (long long)peak, qat_runtime_kernel(), qat_rounding_str(r->q->rounding));
    }
    if (o->per_class && m.task == QAT_TASK_CLASSIFY) print_classes(&m);
    int64_t agree = 0;
    if (o->compare && m.task == QAT_TASK_CLASSIFY) {
        for (int64_t i = 0; i < m.n; i++) agree += m.predictions[i] == cm.predictions[i];
        fprintf(stderr, "%s: %s and %s engines agree on %.2f %% of predictions\n", PROG, o->engine, o->compare,
                100.0 * (double)agree / (double)m.n);
    } else if (o->compare) { /* regression, autoencoder: the other engine's figures side by side */
        if (cm.has_auc) snprintf(what, sizeof what, "mse %.6g, auc %.4f", cm.mse, cm.auc);
        else snprintf(what, sizeof what, "mse %.6g", cm.mse);
        fprintf(stderr, "%s: %s engine: %s %s\n", PROG, o->compare, o->split, what);
    }
    if (o->json) {
        const char *core = getenv("OPENBLAS_CORETYPE");
        printf("{\"model\": ");
        cli_json_str(o->path);
        /* the figures are named after the split: test_accuracy, val_mse, ... */
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%s_", o->split);
        printf(", \"engine\": \"%s\", \"task\": \"%s\", \"split\": \"%s\", \"%ssamples\": %lld", o->engine,
               qat_task_kind_str(m.task), o->split, prefix, (long long)m.n);
        json_figures(&m, prefix);
        printf(", \"infer_samples_per_s\": %.1f, \"batch\": %ld, \"threads\": %ld, \"peak_rss_mib\": %.1f, "
               "\"peak_activation_bytes\": ", rate, o->batch, o->threads, cli_peak_rss_mib());
        if (peak >= 0) printf("%lld", (long long)peak);
        else printf("null"); /* the int engine's plan only */
        printf(", \"openblas_coretype\": ");
        cli_json_str(core ? core : "");
        printf(", \"blas_core\": ");
        cli_json_str(qat_blas_core());
        printf(", \"requant_rounding\": \"%s\"", qat_rounding_str(r->q->rounding));
        if (o->compare) {
            printf(", \"compare_engine\": \"%s\"", o->compare);
            if (m.task == QAT_TASK_CLASSIFY)
                printf(", \"agreement\": %.6f", (double)agree / (double)m.n);
            char cprefix[24];
            snprintf(cprefix, sizeof cprefix, "compare_%s_", o->split);
            json_figures(&cm, cprefix);
        }
        printf("}\n");
    }
    qat_metrics_free(&m);
    qat_metrics_free(&cm);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    eval_run r = {0};
    int rc = parse(argc, argv, &r.o);
    if (rc) return rc < 0 ? 0 : rc;
    const eval_opts *o = &r.o;
    int mode = 0, cmode = 0, split = 2, t;
    if ((rc = choice(o, "--engine", o->engine, engines, &mode)) ||
        (o->compare && (rc = choice(o, "--compare", o->compare, engines, &cmode))) ||
        (rc = choice(o, "--split", o->split, splits, &split)) || (o->task && (rc = choice(o, "--task", o->task, tasks, &t))))
        return rc;
    r.split = (qat_split)split;
    if (o->data.val > 0 && r.split != QAT_SPLIT_VAL)
        return cli_fail(P, o->json, EXIT_USAGE, "--val %g carves a val split from train: it goes with --split val",
                        o->data.val);
    /* an output over one of the inputs, or over the other output, would destroy it */
    const char *outs[2][2] = {{"--predictions", o->predictions}, {"--outputs", o->outputs}};
    for (int i = 0; i < 2; i++) {
        if (cli_in_data(outs[i][1], o->data.path))
            return cli_fail(P, o->json, EXIT_USAGE, "%s %s would write into the data set %s: write it elsewhere",
                            outs[i][0], outs[i][1], o->data.path);
        if (cli_same_file(outs[i][1], o->path))
            return cli_fail(P, o->json, EXIT_USAGE, "%s %s is one of this command's inputs: writing it would destroy it",
                            outs[i][0], outs[i][1]);
    }
    if (cli_same_file(o->predictions, o->outputs))
        return cli_fail(P, o->json, EXIT_USAGE, "--predictions and --outputs name the same file %s", o->outputs);
    if ((rc = cli_check_output(PROG, o->json, "--predictions", o->predictions)) ||
        (rc = cli_check_output(PROG, o->json, "--outputs", o->outputs)))
        return rc; /* before the evaluation, not after it */
    qat_set_threads(1); /* the pool splits the work: OpenBLAS's own threads would multiply it */
    if (engine_modes[mode] != QAT_ENGINE_INT || (o->compare && engine_modes[cmode] != QAT_ENGINE_INT)) cli_blas_note();
    qat_status pst;
    qat_pool *pool = qat_pool_new((int)o->threads, &pst);
    if (!pool) return cli_fail(PROG, o->json, 1, "cannot start %ld threads: %s", o->threads, qat_status_str(pst));
    r.ctx = qat_ctx_new();
    if (!r.ctx) return qat_pool_free(pool), cli_fail(PROG, o->json, 1, "out of memory");
    qat_ctx_set_pool(r.ctx, pool);
    rc = evaluate(&r, engine_modes[mode], engine_modes[cmode]);
    qat_dataset_free(r.data);
    qat_ctx_free(r.ctx);
    qat_pool_free(pool);
    return rc;
}
