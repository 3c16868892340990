/* The trainer: epochs of shuffled batches from a data set through a
 * model, the QAT phases, evaluations, checkpoints and exact resume, on
 * one process or as one rank of a data-parallel job (qat/train.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "qat/train.h"
#include "qat/parallel.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct qat_trainer {
    qat_train_config c;
    qat_model *m;
    qat_ctx *ctx;
    const qat_split_info *tr, *va, *te;
    int in_rank;
    int64_t in_shape[3], in_numel, out_numel;
    int64_t n, steps_per_epoch, step, samples_done;
    int all_epochs;
    int64_t qat_step0; /* the step at which qat_prepare runs; -1 without qat */
    int64_t qat_start; /* the step at which it ran; -1 before */
    qat_optim opt, qopt; /* qopt: LSQ's scales, the same settings */
    qat_lr_schedule sched;
    qat_train_state ts;
    int32_t *perm, *labels;
    float *targets, *scratch, *stage; /* stage: gradients, LSQ's, the loss and the stop flag, all-reduced at once */
    int64_t n_stage;
    const char *metric;
    bool higher;
    int size, rank;
    int first_epoch;   /* qat_trainer_start's: where the loop begins */
    int64_t start_s;
    bool started, ran; /* qat_trainer_start and qat_trainer_run called */
    qat_status start_status;
    qat_train_result r;
};

static void say(const qat_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const qat_trainer *t, const char *fmt, ...) {
    if (!t->c.on_message) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    t->c.on_message(t->c.user, line);
}

qat_train_config qat_train_defaults(void) {
    return (qat_train_config){.task = {.kind = QAT_TASK_CLASSIFY, .topk = 5},
                              .epochs = 5,
                              .batch = 64,
                              .seed = 1,
                              .optim = qat_optim_defaults(QAT_OPTIM_ADAM),
                              .schedule = QAT_LR_COSINE,
                              .qcfg = qat_prepare_defaults(),
                              .freeze_observers = -1,
                              .freeze_bn = -1,
                              .norm_mode = QAT_NORM_FROM_DATA};
}

int64_t qat_trainer_steps_per_epoch(const qat_trainer *t) { return t ? t->steps_per_epoch : 0; }
int64_t qat_trainer_train_samples(const qat_trainer *t) { return t ? t->n : 0; }
const qat_train_result *qat_trainer_result(const qat_trainer *t) { return t ? &t->r : NULL; }

void qat_trainer_free(qat_trainer *t) {
    if (!t) return;
    free(t->perm), free(t->labels), free(t->targets), free(t->scratch), free(t->stage);
    qat_metrics_free(&t->r.test);
    qat_metrics_free(&t->r.test_float);
    free(t);
}

/* ---- checks, before anything runs ------------------------------------------------------ */

/* The task the data can give, the model's output that fits it, labels
 * within the outputs. */
static qat_status check_task(qat_trainer *t) {
    qat_ctx *ctx = t->ctx;
    const qat_task *k = &t->c.task;
    int n_layers = qat_model_n_layers(t->m), out = qat_model_output(t->m);
    int *ranks = malloc((size_t)n_layers * sizeof *ranks);
    int64_t(*shapes)[3] = malloc((size_t)n_layers * sizeof *shapes);
    qat_status st = ranks && shapes ? qat_model_shapes(t->m, t->in_rank, t->in_shape, ranks, shapes) : QAT_ERR_NOMEM;
    if (st == QAT_OK) {
        t->out_numel = 1;
        for (int d = 0; d < ranks[out]; d++) t->out_numel *= shapes[out][d];
    }
    int out_rank = st == QAT_OK ? ranks[out] : 0;
    free(ranks), free(shapes);
    if (st == QAT_ERR_NOMEM) return qat_ctx_fail(ctx, st, "trainer: out of memory");
    if (st != QAT_OK) return st;
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat_split_info *i = qat_dataset_info(t->c.data, (qat_split)s);
        if (!i) continue;
        if ((st = qat_data_check(ctx, i, (qat_split)s, t->in_rank, t->in_shape, t->out_numel, &k->kind)) != QAT_OK)
            return st;
    }
    if (k->kind == QAT_TASK_CLASSIFY && out_rank != 1)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "classification needs a model whose output is a vector of logits; "
                            "this one outputs rank-%d samples", out_rank);
    if (k->kind == QAT_TASK_CLASSIFY && k->class_weights && k->n_class_weights != t->out_numel)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%d class weights for a model of %lld classes", k->n_class_weights,
                            (long long)t->out_numel);
    if (k->kind != QAT_TASK_CLASSIFY && k->class_weights)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "class weights are for classification; the task here is %s",
                            qat_task_kind_str(k->kind));
    if (k->kind == QAT_TASK_CLASSIFY && !(k->label_smoothing >= 0.0f && k->label_smoothing < 1.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "label smoothing %g is outside [0, 1)", (double)k->label_smoothing);
    return QAT_OK;
}

/* A metric the task measures, and whether higher is better. */
static bool metric_ok(const qat_task *k, const char *name, int64_t classes, bool *higher) {
    *higher = strcmp(name, "loss") && strcmp(name, "mse");
    if (!strcmp(name, "loss")) return true;
    if (k->kind != QAT_TASK_CLASSIFY) return !strcmp(name, "mse") || !strcmp(name, "auc");
    if (!strcmp(name, "accuracy")) return true;
    char want[16];
    snprintf(want, sizeof want, "top%d", k->topk);
    return k->topk > 0 && k->topk < classes && !strcmp(name, want);
}

static qat_status check_config(qat_trainer *t) {
    qat_ctx *ctx = t->ctx;
    const qat_train_config *c = &t->c;
    if (!c->data) return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: no data set");
    if ((unsigned)c->task.kind > QAT_TASK_AUTOENCODER)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: unknown task kind %d", (int)c->task.kind);
    if (qat_model_n_params(t->m) == 0)
        return qat_ctx_fail(ctx, QAT_ERR_STATE, "trainer: the model has no parameters (not built yet? "
                            "qat_model_build)");
    t->tr = qat_dataset_info(c->data, QAT_SPLIT_TRAIN), t->te = qat_dataset_info(c->data, QAT_SPLIT_TEST);
    t->va = qat_dataset_info(c->data, QAT_SPLIT_VAL);
    if (!t->tr || !t->te) return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: the data set needs train and test splits");
    if (c->epochs < 1 || c->batch < 1 || c->float_epochs < 0)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: epochs and batch must be at least 1 (epochs %d, batch %lld)",
                            c->epochs, (long long)c->batch);
    if (!(c->optim.lr > 0.0f) || !isfinite(c->optim.lr))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: the learning rate must be a positive number (got %g)",
                            (double)c->optim.lr);
    t->in_rank = qat_model_input_shape(t->m, t->in_shape);
    if (t->in_rank == 0) return qat_ctx_fail(ctx, QAT_ERR_STATE, "trainer: the model declares no input shape");
    t->in_numel = 1;
    for (int d = 0; d < t->in_rank; d++) t->in_numel *= t->in_shape[d];
    if ((c->best_out || c->patience > 0) && !t->va)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "choosing the best epoch (%s) needs a val split; the data set has none "
                            "(carve one from train: the data set's val_fraction, the tool's --val)",
                            c->best_out ? "a best checkpoint" : "early stopping");
    if (c->save_every && !c->out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "trainer: save_every needs out");
    qat_status st = c->qat ? qat_prepare_check(ctx, &c->qcfg) : QAT_OK;
    if (st == QAT_OK) st = qat_augment_check(ctx, &c->augment, t->in_rank, t->in_shape);
    if (st == QAT_OK) st = check_task(t);
    if (st != QAT_OK) return st;
    t->metric = c->metric ? c->metric : c->task.kind == QAT_TASK_CLASSIFY ? "accuracy" : "loss";
    if (!metric_ok(&c->task, t->metric, t->out_numel, &t->higher))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "no metric \"%s\" for the %s task (%s)", t->metric,
                            qat_task_kind_str(c->task.kind),
                            c->task.kind == QAT_TASK_CLASSIFY ? "loss, accuracy or top<k> with the task's k"
                                                              : "loss, mse or auc");
    if (!strcmp(t->metric, "auc") && (!t->va || !t->va->has_anomaly))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "the metric auc needs anomaly labels in the val split");
    return QAT_OK;
}

/* ---- set-up --------------------------------------------------------------------------- */

/* The normalization from the training split: per channel of the model's
 * input (the whole sample when the model takes vectors). */
static qat_status normalization_from_data(qat_trainer *t, qat_normalization *nm) {
    const qat_split_info *i = t->tr;
    int data_ch = i->x_rank == 3 ? (int)i->x_shape[0] : 1, model_ch = t->in_rank == 3 ? (int)t->in_shape[0] : 1;
    if (data_ch > QAT_NORM_MAX_CHANNELS || model_ch > QAT_NORM_MAX_CHANNELS)
        return qat_ctx_fail(t->ctx, QAT_ERR_ARG, "normalization: more than %d channels", QAT_NORM_MAX_CHANNELS);
    double mean[QAT_NORM_MAX_CHANNELS], sd[QAT_NORM_MAX_CHANNELS];
    double div = i->x_dtype == QAT_DT_U8 ? 255.0 : 1.0;
    qat_status st = qat_dataset_channel_stats(t->c.data, QAT_SPLIT_TRAIN, t->c.limit_train, div, mean, sd);
    if (st != QAT_OK) return st;
    if (data_ch != model_ch) qat__pool_channel_stats(data_ch, mean, sd); /* channels of equal size, into one */
    memset(nm, 0, sizeof *nm);
    nm->channels = model_ch, nm->divisor = (float)div, nm->raw_uint8 = i->x_dtype == QAT_DT_U8;
    for (int c = 0; c < model_ch; c++) {
        nm->mean[c] = (float)mean[c];
        nm->std[c] = sd[c] > 1e-12 && isfinite(sd[c]) ? (float)sd[c] : 1.0f; /* a constant channel: centred only */
    }
    return QAT_OK;
}

static qat_status setup(qat_trainer *t) {
    const qat_train_config *c = &t->c;
    qat_ctx *ctx = t->ctx;
    t->size = c->dist ? c->dist->size : 1, t->rank = c->dist ? c->dist->rank : 0;
    int64_t n = t->n = c->limit_train > 0 && c->limit_train < t->tr->n ? c->limit_train : t->tr->n;
    t->all_epochs = c->epochs + (c->qat ? c->float_epochs : 0);
    t->steps_per_epoch = (n + c->batch - 1) / c->batch;
    int N = t->size;
    if (c->batch < N)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%d processes need at least %d samples in every batch: the batch is "
                            "%lld", N, N, (long long)c->batch);
    if (n % c->batch && n % c->batch < N)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%d processes need at least %d samples in every batch: batch %lld over "
                            "%lld samples leaves a last batch of %lld (choose a batch or a limit so that it has none or "
                            "at least %d)", N, N, (long long)c->batch, (long long)n, (long long)(n % c->batch), N);
    qat_status st = qat_optim_init(&t->opt, ctx, &c->optim, qat_model_n_params(t->m));
    if (st != QAT_OK) return st;
    qat_optim_set_pool(&t->opt, qat_ctx_pool(ctx));
    int threads = qat_pool_threads(qat_ctx_pool(ctx));
    t->perm = malloc((size_t)n * sizeof *t->perm);
    t->labels = malloc((size_t)c->batch * sizeof *t->labels);
    t->targets = c->task.kind == QAT_TASK_CLASSIFY ? NULL
                                                   : malloc((size_t)(c->batch * t->out_numel) * sizeof *t->targets);
    t->scratch = qat_augment_on(&c->augment) ? malloc((size_t)(threads * t->in_numel) * sizeof *t->scratch) : NULL;
    t->n_stage = qat_model_n_params(t->m) + 2;
    t->stage = N > 1 ? malloc((size_t)t->n_stage * sizeof *t->stage) : NULL;
    if (!t->perm || !t->labels || (c->task.kind != QAT_TASK_CLASSIFY && !t->targets) ||
        (qat_augment_on(&c->augment) && !t->scratch) || (N > 1 && !t->stage))
        return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "trainer: out of memory");
    t->sched = (qat_lr_schedule){.kind = c->schedule, .base_lr = c->optim.lr,
                                 .total_steps = t->steps_per_epoch * t->all_epochs,
                                 .step_size = t->steps_per_epoch * 2, .gamma = 0.5f,
                                 .warmup_steps = c->warmup, .warmup_start = 0.0f};
    for (int64_t i = 0; i < n; i++) t->perm[i] = (int32_t)i;
    qat_rng shuffle_rng;
    qat_rng_seed(&shuffle_rng, c->seed * 0x9E3779B97F4A7C15ull + 7);
    t->ts = (qat_train_state){.shuffle_rng = shuffle_rng, .order = t->perm, .n_order = n, .config = c->config};
    t->qat_step0 = c->qat ? (int64_t)c->float_epochs * t->steps_per_epoch : -1;
    t->qat_start = -1;
    return QAT_OK;
}

qat_status qat_trainer_new(qat_model *m, const qat_train_config *cfg, qat_trainer **out) {
    if (!m) return QAT_ERR_ARG;
    if (!cfg || !out) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "qat_trainer_new: NULL %s", !cfg ? "cfg" : "out");
    *out = NULL;
    qat_trainer *t = calloc(1, sizeof *t);
    if (!t) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_NOMEM, "trainer: out of memory");
    t->c = *cfg, t->m = m, t->ctx = qat_model_ctx(m);
    qat_status st = check_config(t);
    if (st == QAT_OK) st = setup(t);
    if (st != QAT_OK) return qat_trainer_free(t), st;
    *out = t;
    return QAT_OK;
}

/* ---- the steps ---------------------------------------------------------------------------- */

/* qat_prepare, and LSQ's optimizer when the model has learned scales. */
static qat_status prepare(qat_trainer *t) {
    qat_status st = qat_prepare(t->m, &t->c.qcfg);
    int64_t nq = qat_model_n_qparams(t->m);
    if (st == QAT_OK && nq > 0) st = qat_optim_init(&t->qopt, t->ctx, &t->c.optim, nq);
    qat_optim_set_pool(&t->qopt, qat_ctx_pool(t->ctx));
    if (st == QAT_OK && t->stage && nq > 0) { /* LSQ's scales join the all-reduce */
        t->n_stage = qat_model_n_params(t->m) + nq + 2;
        float *s = realloc(t->stage, (size_t)t->n_stage * sizeof *s);
        if (!s) return qat_ctx_fail(t->ctx, QAT_ERR_NOMEM, "trainer: out of memory");
        t->stage = s;
    }
    return st;
}

static qat_tensor *input_tensor(qat_trainer *t, int64_t n) {
    int64_t s[4] = {n, t->in_shape[0], t->in_shape[1], t->in_shape[2]};
    return qat_tensor_new(t->ctx, QAT_MEM_STEP, t->in_rank + 1, s, false);
}

/* The loss of the step's outputs y for its targets. */
static qat_tensor *task_loss(qat_trainer *t, qat_tensor *y) {
    const qat_task *k = &t->c.task;
    if (!y) return NULL;
    if (k->kind == QAT_TASK_CLASSIFY) return qat_cross_entropy_ex(t->ctx, y, t->labels, k->class_weights, k->label_smoothing);
    return qat_mse_loss(t->ctx, y, t->targets);
}

/* Sums the gradients (and LSQ's), the loss and the stop flag over the
 * processes in one call. */
static qat_status all_reduce(qat_trainer *t, double *loss, bool *stop) {
    qat_model *m = t->m;
    int64_t np = qat_model_n_params(m), nq = t->qopt.n ? qat_model_n_qparams(m) : 0;
    memcpy(t->stage, qat_model_grads(m), (size_t)np * sizeof(float));
    if (nq) memcpy(t->stage + np, qat_model_qgrads(m), (size_t)nq * sizeof(float));
    t->stage[np + nq] = (float)*loss, t->stage[np + nq + 1] = *stop ? 1.0f : 0.0f;
    char msg[256] = "";
    qat_status st = t->c.dist->sum_f32(t->c.dist->user, t->stage, np + nq + 2, msg, sizeof msg);
    if (st != QAT_OK) return qat_ctx_fail(t->ctx, st, "%s", msg);
    memcpy(qat_model_grads(m), t->stage, (size_t)np * sizeof(float));
    if (nq) memcpy(qat_model_qgrads(m), t->stage + np, (size_t)nq * sizeof(float));
    *loss = t->stage[np + nq], *stop = t->stage[np + nq + 1] > 0.0f;
    return QAT_OK;
}

/* One step on the global batch perm[s, s + b): its loss, or NAN after an
 * error (on the context); *stop: a process asked to stop. */
static double train_step(qat_trainer *t, int64_t s, int64_t b, bool *stop) {
    const qat_train_config *c = &t->c;
    qat_model *m = t->m;
    if (t->qat_start >= 0) {
        int64_t since = t->step - t->qat_start;
        qat_model_set_fake_quant(m, since >= c->qat_warmup);
        qat_model_freeze_observers(m, c->freeze_observers >= 0 && since >= c->freeze_observers);
        qat_model_freeze_bn(m, c->freeze_bn >= 0 && since >= c->freeze_bn);
    }
    int N = t->size, r = t->rank; /* this process's share of the global batch */
    int64_t lo = b * r / N, hi = b * (r + 1) / N, k = hi - lo;
    if (N > 1 && qat_model_set_batch_slice(m, lo, b) != QAT_OK) return NAN; /* dropout: the global batch's masks */
    qat_tensor *x = input_tensor(t, k);
    if (!x) return NAN;
    const int32_t *idx = t->perm + s + lo;
    double t0 = now();
    qat_status st = qat_dataset_read(c->data, QAT_SPLIT_TRAIN, idx, k, x->data,
                                     c->task.kind == QAT_TASK_CLASSIFY ? t->labels : NULL,
                                     c->task.kind == QAT_TASK_REGRESS ? t->targets : NULL, NULL);
    if (st != QAT_OK) return NAN;
    if (c->task.kind == QAT_TASK_AUTOENCODER) /* the clean input is the target, before augmentation */
        qat_normalize_samples(qat_model_normalization(m), t->in_numel, x->data, t->targets, k);
    qat_augment_batch(t->ctx, &c->augment, c->seed, t->step * c->batch + lo, k, t->in_rank, t->in_shape, x->data,
                      t->scratch);
    t->r.data_share += now() - t0; /* seconds, until finish divides */
    qat_tensor *loss = task_loss(t, qat_model_forward(m, x));
    /* the global loss is the mean over b: each process differentiates its
     * share, (local mean)·(local count / b), and the gradients add up */
    if (loss && N > 1) loss = qat_scale(t->ctx, loss, (float)((double)k / (double)b));
    if (qat_backward(t->ctx, loss) != QAT_OK) return NAN;
    double l = loss->data[0];
    *stop = c->stop && *c->stop;
    if (N > 1 && all_reduce(t, &l, stop) != QAT_OK) return NAN;
    if (!isfinite(l)) return l;
    if (c->clip > 0) qat_clip_grad_norm(qat_model_grads(m), qat_model_n_params(m), c->clip);
    float lr = qat_lr_at(&t->sched, t->step);
    qat_optim_step(&t->opt, qat_model_params(m), qat_model_grads(m), lr);
    if (t->qopt.n) qat_optim_step(&t->qopt, qat_model_qparams(m), qat_model_qgrads(m), lr);
    qat_model_zero_grad(m);
    qat_ctx_step_reset(t->ctx);
    return l;
}

qat_status qat_trainer_save(qat_trainer *t, const char *path) {
    if (!t || !path) return QAT_ERR_ARG;
    return qat_checkpoint_save(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, path);
}

/* Process 0 alone writes: every process holds the same state. */
static qat_status save(qat_trainer *t, const char *path) {
    if (t->rank != 0 || !path) return QAT_OK;
    return qat_checkpoint_save(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, path);
}

/* After epoch `epoch` (1-based): the test metrics, the val metrics and the
 * best epoch; *early: patience ran out. */
static qat_status evaluate_epoch(qat_trainer *t, int epoch, double loss_avg, double seconds, bool partial, bool *early) {
    const qat_train_config *c = &t->c;
    qat_metrics val = {0};
    qat_metrics_free(&t->r.test);
    qat_status st = qat_model_evaluate(t->m, c->data, QAT_SPLIT_TEST, c->limit_test, &c->task, c->dist, &t->r.test);
    if (st == QAT_OK && t->va) st = qat_model_evaluate(t->m, c->data, QAT_SPLIT_VAL, 0, &c->task, c->dist, &val);
    if (st != QAT_OK) return st;
    bool best = false;
    if (t->va) {
        float v = (float)qat_metrics_get(&val, t->metric, NULL);
        best = isfinite(v) && (t->ts.best_epoch == 0 || (t->higher ? v > t->ts.best_value : v < t->ts.best_value));
        if (best) t->ts.best_epoch = epoch, t->ts.best_value = v, t->ts.since_best = 0;
        else t->ts.since_best++;
        t->r.best_epoch = (int)t->ts.best_epoch, t->r.best_value = t->ts.best_value;
        if (best && c->best_out) {
            t->ts.step = t->step, t->ts.epoch = epoch - partial;
            st = save(t, c->best_out);
        }
        *early = c->patience > 0 && t->ts.since_best >= c->patience && epoch < t->all_epochs; /* the last ends anyway */
    }
    qat_epoch_report rep = {.epoch = epoch, .step = t->step, .partial = partial, .train_loss = loss_avg,
                            .train_seconds = seconds, .has_val = t->va != NULL, .val = t->va ? &val : NULL,
                            .test = &t->r.test, .best = best};
    if (st == QAT_OK && c->on_epoch) c->on_epoch(c->user, &rep, t->m);
    qat_metrics_free(&val);
    return st;
}

/* Epoch `epoch` (1-based) from sample start_s, or up to stop_after or a
 * stop request. */
static qat_status run_epoch(qat_trainer *t, int epoch, int64_t start_s, bool *early) {
    const qat_train_config *c = &t->c;
    qat_status st;
    if (c->qat && !qat_model_prepared(t->m) && t->step == t->qat_step0) {
        if ((st = prepare(t)) != QAT_OK) return st;
        t->qat_start = t->step;
        int wlo, whi; /* a model file may set a layer's own width */
        qat_model_weight_bits(t->m, &wlo, &whi);
        if (wlo == whi) say(t, "fake quantization on: W%dA%d", wlo, c->qcfg.abits);
        else say(t, "fake quantization on: A%d, weights of %d to %d bits (the model file sets some layers')", c->qcfg.abits,
                 wlo, whi);
    }
    if (start_s == 0) qat_shuffle(t->perm, t->n, &t->ts.shuffle_rng);
    qat_model_train(t->m, true);
    /* a resumed epoch's mean loss counts the steps before the checkpoint too */
    double t0 = now(), loss_sum = start_s > 0 ? t->ts.epoch_loss_sum : 0, p0;
    qat_pool_stats(qat_ctx_pool(t->ctx), &p0, NULL);
    int64_t k = start_s > 0 ? t->ts.epoch_loss_steps : 0;
    bool partial = false;
    for (int64_t s = start_s; s < t->n; s += c->batch) {
        int64_t b = t->n - s < c->batch ? t->n - s : c->batch;
        bool stop = false;
        double loss = train_step(t, s, b, &stop);
        if (isnan(loss) && qat_ctx_status(t->ctx) != QAT_OK) return qat_ctx_status(t->ctx);
        if (!isfinite(loss))
            return qat_ctx_fail(t->ctx, QAT_ERR_STATE, "the loss diverged (%g) at step %lld; try a lower learning rate",
                                loss, (long long)t->step);
        t->step++, k++, loss_sum += loss, t->samples_done += b;
        t->ts.epoch_loss_sum = loss_sum, t->ts.epoch_loss_steps = k; /* what a checkpoint part way through keeps */
        if (c->save_every && t->step % c->save_every == 0) {
            t->ts.step = t->step, t->ts.epoch = epoch - 1;
            if ((st = save(t, c->out)) != QAT_OK) return st;
        }
        if (c->on_step) {
            qat_train_progress p = {.step = t->step, .total_steps = t->steps_per_epoch * t->all_epochs,
                                    .epoch = epoch, .epochs = t->all_epochs, .epoch_done = s + b,
                                    .epoch_samples = t->n, .loss = loss, .epoch_loss = loss_sum / (double)k,
                                    .lr = qat_lr_at(&t->sched, t->step - 1), .batch = b};
            c->on_step(c->user, &p, t->m);
        }
        bool at_end = s + b >= t->n;
        if ((c->stop_after && t->step == c->stop_after) || stop) {
            t->ts.epoch = epoch - 1 + at_end; /* the epoch counts once finished */
            t->r.stopped = !stop, t->r.interrupted = stop;
            partial = !at_end;
            break;
        }
    }
    double p1;
    qat_pool_stats(qat_ctx_pool(t->ctx), &p1, NULL);
    double seconds = now() - t0;
    t->r.train_seconds += seconds;
    t->r.pool_share += p1 - p0; /* seconds, until qat_trainer_run divides */
    t->r.train_loss = loss_sum / (double)(k > 0 ? k : 1);
    if (!partial) t->r.epochs_done = epoch, t->ts.epoch_loss_sum = 0, t->ts.epoch_loss_steps = 0;
    if (t->r.interrupted) return QAT_OK; /* Ctrl-C: save and go, no evaluation */
    if (t->r.stopped) say(t, "stopped after step %lld (stop_after)", (long long)t->step);
    t->ts.step = t->step;
    if (!partial) t->ts.epoch = epoch;
    return evaluate_epoch(t, epoch, t->r.train_loss, seconds, partial, early);
}

/* ---- the run ---------------------------------------------------------------------------- */

/* Continues from c.resume: the first epoch and the sample it starts at. */
static qat_status resume(qat_trainer *t, int *first_epoch, int64_t *start_s) {
    const qat_train_config *c = &t->c;
    int64_t rstep, repoch, total = t->steps_per_epoch * t->all_epochs;
    bool prepared;
    qat_status st = qat_checkpoint_info(t->ctx, c->resume, &rstep, &repoch, &prepared);
    if (st != QAT_OK) return st;
    if (prepared && !c->qat)
        return qat_ctx_fail(t->ctx, QAT_ERR_ARG, "%s is a QAT checkpoint: resume with the QAT options that made it",
                            c->resume);
    if (rstep >= total)
        return qat_ctx_fail(t->ctx, QAT_ERR_ARG, "%s is at step %lld of %lld: nothing left to train (more epochs?)",
                            c->resume, (long long)rstep, (long long)total);
    if (prepared && (st = prepare(t)) != QAT_OK) return st;
    st = qat_checkpoint_load(t->m, &t->opt, t->qopt.n ? &t->qopt : NULL, &t->ts, c->resume);
    if (st != QAT_OK && !(st == QAT_ERR_SHAPE && t->ts.n_order > t->n)) return st;
    if (t->ts.n_order != t->n) { /* longer (the load said so) or shorter: another data set */
        qat_ctx_clear_error(t->ctx);
        return qat_ctx_fail(t->ctx, QAT_ERR_ARG, "%s was made with %lld training samples, this run has %lld (another "
                            "data set?)", c->resume, (long long)t->ts.n_order, (long long)t->n);
    }
    t->ts.config = c->config;
    if (prepared) t->qat_start = t->qat_step0;
    t->step = t->ts.step;
    t->r.best_epoch = (int)t->ts.best_epoch, t->r.best_value = t->ts.best_value;
    *first_epoch = (int)(t->step / t->steps_per_epoch) + 1;
    *start_s = (t->step % t->steps_per_epoch) * c->batch;
    say(t, "resumed from %s at step %lld (epoch %d)", c->resume, (long long)t->step, *first_epoch);
    return QAT_OK;
}

/* Do all processes hold the same model state, bit for bit? */
static qat_status check_identical(qat_trainer *t) {
    const qat_train_dist *D = t->c.dist;
    if (!D || D->size <= 1) return QAT_OK;
    size_t n = qat_model_state_bytes(t->m, NULL, 0);
    void *buf = malloc(n ? n : 1);
    if (!buf) return qat_ctx_fail(t->ctx, QAT_ERR_NOMEM, "trainer: out of memory");
    qat_model_state_bytes(t->m, buf, n);
    int same = 0;
    char msg[256] = "";
    qat_status st = D->identical(D->user, buf, n, &same, msg, sizeof msg);
    free(buf);
    if (st != QAT_OK) return qat_ctx_fail(t->ctx, st, "comparing the processes' states: %s", msg);
    if (!same)
        return qat_ctx_fail(t->ctx, QAT_ERR_STATE, "the %d processes ended with different model states (a bug: please "
                            "report it)", D->size);
    return QAT_OK;
}

/* The final checkpoint, the closing figures. */
static qat_status finish(qat_trainer *t) {
    const qat_train_config *c = &t->c;
    qat_ctx_step_trim(t->ctx); /* training is over: the save and the last evaluations start from little */
    qat_status st = QAT_OK;
    if (c->out) {
        t->ts.step = t->step;
        if (!t->r.stopped && !t->r.interrupted && !t->r.early_stopped) t->ts.epoch = t->all_epochs;
        if ((st = save(t, c->out)) != QAT_OK) return st;
    }
    if ((st = check_identical(t)) != QAT_OK) return st;
    t->r.steps = t->step;
    t->r.samples_per_s = t->r.train_seconds > 0 ? (double)t->samples_done / t->r.train_seconds : 0;
    t->r.pool_share = t->r.train_seconds > 0 ? t->r.pool_share / t->r.train_seconds : 0;
    t->r.data_share = t->r.train_seconds > 0 ? t->r.data_share / t->r.train_seconds : 0;
    if (t->r.interrupted) return QAT_OK;
    if (t->r.test.n == 0 && (st = qat_model_evaluate(t->m, c->data, QAT_SPLIT_TEST, c->limit_test, &c->task, c->dist,
                                                     &t->r.test)) != QAT_OK)
        return st;
    if (qat_model_prepared(t->m)) { /* the same weights with fake quantization off */
        bool on = qat_model_fake_quant_on(t->m);
        qat_model_set_fake_quant(t->m, false);
        st = qat_model_evaluate(t->m, c->data, QAT_SPLIT_TEST, c->limit_test, &c->task, c->dist, &t->r.test_float);
        qat_model_set_fake_quant(t->m, on);
        t->r.has_test_float = st == QAT_OK;
    }
    return st;
}

qat_status qat_trainer_start(qat_trainer *t) {
    if (!t) return QAT_ERR_ARG;
    if (t->started) return t->start_status;
    const qat_train_config *c = &t->c;
    t->started = true, t->first_epoch = 1, t->start_s = 0;
    qat_status st = QAT_OK;
    if (c->resume || c->init) { /* the checkpoint's normalization, checked against this run's data */
        if (c->resume) st = resume(t, &t->first_epoch, &t->start_s);
        else if ((st = qat_checkpoint_load_weights(t->m, c->init)) == QAT_OK)
            say(t, "started from the weights of %s", c->init);
        if (st == QAT_OK && !c->skip_units_check) {
            int64_t limit = c->limit_train > 0 && c->limit_train < QAT_UNITS_SAMPLES ? c->limit_train
                                                                                     : QAT_UNITS_SAMPLES;
            st = qat_data_check_units(t->ctx, c->data, QAT_SPLIT_TRAIN, limit, qat_model_normalization(t->m),
                                      &t->r.units_refused);
        }
    } else if (c->norm_mode != QAT_NORM_NONE) {
        qat_normalization nm;
        if (c->norm_mode == QAT_NORM_GIVEN) nm = c->norm;
        else st = normalization_from_data(t, &nm);
        if (st == QAT_OK) st = qat_model_set_normalization(t->m, &nm);
    }
    return t->start_status = st;
}

qat_status qat_trainer_run(qat_trainer *t) {
    if (!t) return QAT_ERR_ARG;
    if (t->ran)
        return qat_ctx_fail(t->ctx, QAT_ERR_STATE, "qat_trainer_run: this trainer has run once; a new trainer goes on "
                            "from its checkpoint (cfg.resume)");
    t->ran = true;
    qat_status st = qat_trainer_start(t);
    int first_epoch = t->first_epoch;
    int64_t start_s = t->start_s;
    bool early = false;
    for (int epoch = first_epoch; st == QAT_OK && !early && !t->r.stopped && !t->r.interrupted &&
                                  epoch <= t->all_epochs;
         epoch++, start_s = 0)
        st = run_epoch(t, epoch, start_s, &early);
    if (early) {
        t->r.early_stopped = true;
        say(t, "early stop after epoch %d: the val %s has not improved for %d epochs (best: epoch %lld)",
            t->r.epochs_done, t->metric, t->c.patience, (long long)t->ts.best_epoch);
    }
    return st == QAT_OK ? finish(t) : st;
}
