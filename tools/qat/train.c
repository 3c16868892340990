/* qat train: the command over the library's trainer (qat/train.h): its
 * options (train_options.c), the data set, the model, the processes of
 * an MPI job, Ctrl-C, progress, the metrics log and the summary. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "dist.h"
#include "metrics_log.h"
#include "progress.h"
#include "tools.h"
#include "train_options.h"

#define PROG "qat"

/* Under mpirun, rank 0 alone prints. The other ranks' stdout goes to
 * /dev/null; their stderr is held in a temporary file while they set up,
 * until the ranks agree that every one is ready (agree, below): a rank
 * whose refusal is the job's then prints it. From then on their stderr
 * goes to /dev/null and comes back for an error (every failure goes
 * through cli_fail, which unmutes first). The process's own stderr is the
 * state this keeps, so it lives here. */
static int muted_stderr = -1, muted_rank;
static FILE *held; /* a rank > 0's stderr while it sets up */
static void unmute(void) {
    if (muted_stderr < 0 || held) return; /* while setting up: held, said at the agreement */
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
    held = tmpfile();
    dup2(null, 1), dup2(held ? fileno(held) : null, 2);
    close(null);
}
/* Ends the holding: stderr to /dev/null, and, when say, the held stderr's
 * last line (this rank's refusal: one line, as every error) to the real
 * one. */
static void release_held(bool say) {
    if (!held) return;
    fflush(stderr);
    char *line = NULL, *last = NULL;
    size_t cap = 0;
    rewind(held);
    for (ssize_t n; (n = getline(&line, &cap, held)) > 0;)
        if (n > 1) free(last), last = strdup(line);
    free(line);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2), close(null);
    fclose(held);
    held = NULL;
    if (say && last) unmute(), fputs(last, stderr);
    free(last);
}
#define cli_fail(...) (unmute(), cli_fail(__VA_ARGS__))

/* ---- signals ------------------------------------------------------------------------------
 * Ctrl-C (SIGINT), SIGTERM and SIGUSR1 ask the trainer to stop after the
 * step it is in: it writes --out and the command says how to resume. A
 * second signal ends the process at once, unsaved, and says so; one that
 * comes within a second of the first is taken as the same request (a
 * terminal's Ctrl-C, or `timeout`, signals the process and its group
 * alike). In an MPI job SIGTERM comes from the runtime, when another rank
 * died or mpirun itself was interrupted, and SIGKILL follows it at once:
 * no collective can complete then, so rank 0 says which checkpoint is the
 * last complete one (saves are atomic) and ends at once; the message is
 * formatted after every save. SIGUSR1 is the way to stop a job and save:
 * mpirun forwards it to every rank. */
static volatile int stop_requested;
static struct timespec stop_at; /* when it was requested */
static volatile sig_atomic_t in_mpi_job;
static char last_ckpt_msg[600];
static volatile sig_atomic_t last_ckpt_len;
/* The agreed status of a job that refused to start (agree): every rank is
 * ending, each has said what it had to, and mpirun, seeing one end with
 * that status, sends SIGTERM to the others while they finish: that
 * SIGTERM ends a rank quietly with the same status. */
static volatile sig_atomic_t refused_rc;
static volatile sig_atomic_t json_mode; /* --json: the quit's line goes to stdout too */

static void on_signal(int sig) {
    if (refused_rc && sig == SIGTERM) _exit(refused_rc);
    if (in_mpi_job && sig == SIGTERM) {
        static const char head[] = "\nqat: rank 0: stopped by the MPI runtime (a rank died, or mpirun was interrupted: "
                                   "kill -USR1 mpirun's pid stops a job and saves)";
        ssize_t w = write(2, head, sizeof head - 1);
        if (last_ckpt_len > 0) w = write(2, last_ckpt_msg, (size_t)last_ckpt_len);
        else w = write(2, "; no checkpoint written yet\n", sizeof "; no checkpoint written yet\n" - 1);
        (void)w;
        _exit(128 + sig);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe (POSIX) */
    if (stop_requested) { /* the second one */
        double since = (double)(now.tv_sec - stop_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - stop_at.tv_nsec);
        if (since < 1.0) return; /* the same request, delivered twice */
        static const char quit[] = "\nqat: quitting at once: nothing saved since the last checkpoint\n";
        ssize_t w = write(2, quit, sizeof quit - 1);
        if (json_mode) { /* the last line of stdout, as for every failure (what stdio holds is lost) */
            char line[] = "{\"error\": \"quit at once: nothing saved since the last checkpoint\", \"status\": 000}\n";
            char *d = line + sizeof line - 6; /* the status's three digits: 128 + a signal number */
            int status = 128 + sig;
            d[0] = (char)('0' + status / 100), d[1] = (char)('0' + status / 10 % 10), d[2] = (char)('0' + status % 10);
            w = write(1, line, sizeof line - 1);
        }
        (void)w;
        _exit(128 + sig);
    }
    stop_at = now; /* before the flag: a handler that interrupts this one (SIGTERM) sees both or neither */
    atomic_signal_fence(memory_order_seq_cst);
    stop_requested = 1;
    static const char msg[] = "\nqat: stopping after this step (again to quit at once)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT), sigaddset(&sa.sa_mask, SIGTERM), sigaddset(&sa.sa_mask, SIGUSR1); /* one at a time */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* ---- the processes of an MPI job, for the trainer -------------------------------------- */

static qat_status dist_f32(void *user, float *v, int64_t n, char *msg, size_t len) {
    dist *d = user;
    if (dist_sum_floats(d, v, n)) return snprintf(msg, len, "%s", d->msg), QAT_ERR_IO;
    return QAT_OK;
}
static qat_status dist_f64(void *user, double *v, int64_t n, char *msg, size_t len) {
    qat_reducer r = dist_reducer(user);
    return r.sum(r.user, v, n, msg, len);
}
static qat_status dist_same(void *user, const void *bytes, size_t n, int *same, char *msg, size_t len) {
    dist *d = user;
    *same = dist_identical(d, bytes, n);
    if (*same < 0) return snprintf(msg, len, "%s", d->msg), QAT_ERR_IO;
    return QAT_OK;
}

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct {
    const train_opts *o;
    qat_ctx *ctx;
    qat_dataset *data;
    qat_model *m;
    qat_trainer *tr;
    qat_task_kind task;
    dist *d;
    qat_train_dist td;
    char model_name[64];
    uint32_t model_crc;
    char config[4096];
    progress bar;
    bool bar_on;
    int bar_epoch;
    double step_end; /* when the last step (or epoch's evaluation) ended: the next step's start (0: none yet) */
    metrics_log log;
} run;

static int fail(const run *r) { return cli_fail(PROG, r->o->json, 1, "%s", qat_ctx_error(r->ctx)); }
/* A failure of the input (the data set, its fit to the model): exit 2 unless the system failed. */
static int bad_input(const run *r) {
    return cli_fail(PROG, r->o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s", qat_ctx_error(r->ctx));
}

static qat_status make_model(run *r) {
    return train_make_model(r->o, r->ctx, &r->m, r->model_name, sizeof r->model_name, &r->model_crc);
}

/* --task, or the data's y: class labels, float targets, or none. */
static qat_task_kind task_of(const run *r) {
    const char *t = r->o->task;
    if (t) return !strcmp(t, "classify") ? QAT_TASK_CLASSIFY : !strcmp(t, "regress") ? QAT_TASK_REGRESS : QAT_TASK_AUTOENCODER;
    qat_target_kind y = qat_dataset_info(r->data, QAT_SPLIT_TRAIN)->target;
    return y == QAT_TARGET_CLASS ? QAT_TASK_CLASSIFY : y == QAT_TARGET_VALUES ? QAT_TASK_REGRESS : QAT_TASK_AUTOENCODER;
}

/* ---- callbacks: progress, messages, epochs ---------------------------------------------- */

static void on_message(void *user, const char *line) {
    run *r = user;
    if (r->bar_on) progress_cut(&r->bar), r->bar_on = false; /* where it got to: a stop part way says so */
    fprintf(stderr, "%s: %s\n", PROG, line);
}

static void on_step(void *user, const qat_train_progress *p, qat_model *m) {
    run *r = user;
    if (!r->bar_on || r->bar_epoch != p->epoch) {
        static char label[64];
        snprintf(label, sizeof label, "epoch %d/%d", p->epoch, p->epochs);
        progress_start(&r->bar, label, p->epoch_samples);
        /* the clock starts when this step did (the last one's end), or, for a run's first step, after it; a
         * resumed epoch's earlier samples are not in the rate */
        r->bar.done = p->epoch_done - p->batch, r->bar.first = r->step_end > 0 ? r->bar.done : p->epoch_done;
        if (r->step_end > 0) r->bar.start = r->bar.last_print = r->step_end;
        r->bar.last_decile = (int)(10 * r->bar.done / r->bar.total);
        r->bar_on = true, r->bar_epoch = p->epoch;
    }
    char extra[64];
    snprintf(extra, sizeof extra, "loss %.4f", p->epoch_loss);
    progress_update(&r->bar, p->epoch_done, extra);
    metrics_log_step(&r->log, m, p->step, p->loss, p->lr, p->batch);
    if (r->o->save_every && p->step % r->o->save_every == 0 && r->d->size > 1) { /* written right after this */
        int len = snprintf(last_ckpt_msg, sizeof last_ckpt_msg, "; the last complete checkpoint is %.400s (step %lld)\n",
                           r->o->out, (long long)p->step);
        last_ckpt_len = len > 0 && len < (int)sizeof last_ckpt_msg ? len : 0;
    }
    if (p->epoch_done >= p->epoch_samples) progress_end(&r->bar, extra), r->bar_on = false;
    r->step_end = cli_now();
}

/* "accuracy 98.12 %" or "mse 0.0123, auc 0.912": a split's headline figures. */
static const char *figures(const qat_metrics *m, char *buf, size_t len) {
    if (m->task == QAT_TASK_CLASSIFY) {
        int at = snprintf(buf, len, "accuracy %.2f %%", 100 * m->accuracy);
        if (m->topk && at > 0 && (size_t)at < len)
            snprintf(buf + at, len - (size_t)at, ", top-%d %.2f %%", m->topk, 100 * m->topk_accuracy);
    } else {
        int at = snprintf(buf, len, "mse %.6g", m->mse);
        if (m->has_auc && at > 0 && (size_t)at < len) snprintf(buf + at, len - (size_t)at, ", auc %.4f", m->auc);
    }
    return buf;
}

static void on_epoch(void *user, const qat_epoch_report *e, qat_model *m) {
    run *r = user;
    if (r->bar_on) progress_end(&r->bar, NULL), r->bar_on = false;
    char a[96], b[96] = "";
    if (e->has_val) {
        char v[80], by[48] = ""; /* a --metric the figures do not show: its value beside them */
        const char *metric = r->o->metric;
        if (metric && strcmp(metric, "accuracy") && strcmp(metric, "mse") && strcmp(metric, "auc") &&
            strncmp(metric, "top", 3)) /* top<K>: the figures show it */
            snprintf(by, sizeof by, ", %s %.4g", metric, qat_metrics_get(e->val, metric, NULL));
        snprintf(b, sizeof b, ", val %s%s%s", figures(e->val, v, sizeof v), by, e->best ? " (best)" : "");
    }
    fprintf(stderr, "epoch %d%s: train loss %.4f%s, test %s\n", e->epoch, e->partial ? " (stopped part way)" : "",
            e->train_loss, b, figures(e->test, a, sizeof a));
    if (e->best && r->o->best_out && r->d->rank == 0)
        fprintf(stderr, "%s: wrote %s (the best epoch so far)\n", PROG, r->o->best_out);
    metrics_log_epoch(&r->log, m, e->step, e->epoch, e->train_loss, e->test, r->data, r->o->limit_test, &r->td);
    r->step_end = cli_now();
}

/* ---- the summary --------------------------------------------------------------------------- */

static void json_metrics(const char *prefix, const qat_metrics *m) {
    if (m->task == QAT_TASK_CLASSIFY) {
        printf(", \"%saccuracy\": %.6f", prefix, m->accuracy);
        if (m->topk) printf(", \"%stop%d_accuracy\": %.6f", prefix, m->topk, m->topk_accuracy);
    } else {
        printf(", \"%smse\": %.8g", prefix, m->mse);
        if (m->has_auc) printf(", \"%sauc\": %.6f", prefix, m->auc);
        else printf(", \"%sauc\": null", prefix);
    }
    printf(", \"%sloss\": %.6f", prefix, m->loss);
}

static void print_json(const run *r, const qat_train_result *res) {
    const train_opts *o = r->o;
    const char *core = getenv("OPENBLAS_CORETYPE");
    const qat_metrics *t = &res->test;
    bool classify = t->task == QAT_TASK_CLASSIFY;
    printf("{\"model\": \"%s\", \"task\": \"%s\", \"data\": ", r->model_name, qat_task_kind_str(r->task));
    cli_json_str(o->data.path);
    printf(", \"data_format\": \"%s\", \"epochs\": %d, \"batch\": %ld, \"optimizer\": \"%s\", \"lr\": %g, "
           "\"seed\": %ld, \"threads\": %ld, \"train_samples\": %lld, \"train_samples_per_s\": %.1f, "
           "\"train_loss\": %.6f, \"test_samples\": %lld",
           qat_dataset_format(r->data), (int)(o->epochs + (o->qat ? o->float_epochs : 0)), o->batch, o->optimizer,
           o->lr, o->seed, o->threads, (long long)qat_trainer_train_samples(r->tr), res->samples_per_s,
           res->train_loss, (long long)t->n);
    json_metrics("test_", t);
    printf(", \"peak_rss_mib\": %.1f, \"openblas_coretype\": \"%s\", \"blas_core\": \"%s\", \"ranks\": %d, "
           "\"ranks_identical\": true, \"in_parallel_loops\": %.3f, \"data_share\": %.4f, \"stopped\": %s, "
           "\"early_stopped\": %s, \"best_epoch\": ",
           cli_peak_rss_mib(), core ? core : "", qat_blas_core(), r->d->size, res->pool_share, res->data_share,
           res->stopped ? "true" : "false", res->early_stopped ? "true" : "false");
    if (res->best_epoch > 0) printf("%d, \"best_value\": %.6g", res->best_epoch, res->best_value);
    else printf("null");
    if (o->qat) {
        bool fq = qat_model_prepared(r->m);
        printf(", \"qat\": true, \"wbits\": %ld, \"abits\": %ld, \"granularity\": \"%s\", "
               "\"observer\": \"%s\", \"target\": \"%s\", \"float_epochs\": %ld, \"fake_quant\": %s",
               o->wbits, o->abits, o->gran, o->observer, o->target, o->float_epochs, fq ? "true" : "false");
        if (classify) { /* the test_* figures are the fake-quantized model's once fake quantization runs */
            printf(", \"test_accuracy_fake_quant\": ");
            if (fq) printf("%.6f", t->accuracy);
            else printf("null");
        }
        /* before fake quantization starts, the float weights are the model */
        const qat_metrics *fw = res->has_test_float ? &res->test_float : t;
        if (classify) printf(", \"test_accuracy_float_weights\": %.6f", fw->accuracy);
        else json_metrics("test_float_weights_", fw);
    }
    printf("}\n");
}

static int report(run *r) {
    const qat_train_result *res = qat_trainer_result(r->tr);
    const train_opts *o = r->o;
    if (res->interrupted) {
        if (o->out && strcmp(o->prog, "qat train")) /* qat fit's training: fit takes no --resume */
            fprintf(stderr, "%s: interrupted at step %lld; wrote %s, the training as far as it went: %s does not "
                    "resume, the same command starts over\n", o->prog, (long long)res->steps, o->out, o->prog);
        else if (o->out) fprintf(stderr, "%s: interrupted at step %lld; wrote %s: continue with the same command and "
                            "--resume %s\n", PROG, (long long)res->steps, o->out, o->out);
        else fprintf(stderr, "%s: interrupted at step %lld; nothing saved (no --out)\n", PROG, (long long)res->steps);
        if (o->json) cli_json_error("interrupted", 130);
        return 130;
    }
    if (o->out) fprintf(stderr, "%s: wrote %s\n", PROG, o->out);
    if (r->d->size > 1) fprintf(stderr, "%s: all %d ranks hold the same parameters, observers and BatchNorm "
                                "statistics, bit for bit\n", PROG, r->d->size);
    char a[96], b[96];
    if (res->has_test_float)
        fprintf(stderr, "%s: fake-quantized test %s; same weights in float %s\n", PROG, figures(&res->test, a, sizeof a),
                figures(&res->test_float, b, sizeof b));
    fprintf(stderr, "%s: test %s, %.0f training samples/s, peak RSS %.1f MiB\n", PROG, figures(&res->test, a, sizeof a),
            res->samples_per_s, cli_peak_rss_mib());
    if (o->json) print_json(r, res);
    return 0;
}

/* The trainer's configuration from the options. */
static void configure(run *r, qat_train_config *c) {
    const train_opts *o = r->o;
    *c = qat_train_defaults();
    c->data = r->data;
    c->limit_train = o->limit_train, c->limit_test = o->limit_test;
    c->task = (qat_task){.kind = r->task, .label_smoothing = (float)o->label_smoothing,
                         .class_weights = o->n_weights ? o->weights : NULL, .n_class_weights = o->n_weights,
                         .topk = (int)o->topk};
    c->epochs = (int)o->epochs, c->batch = o->batch, c->seed = (uint64_t)o->seed;
    c->optim = qat_optim_defaults(!strcmp(o->optimizer, "sgd") ? QAT_OPTIM_SGD
                                  : !strcmp(o->optimizer, "adam") ? QAT_OPTIM_ADAM
                                                                  : QAT_OPTIM_ADAMW);
    c->optim.lr = (float)o->lr, c->optim.weight_decay = (float)o->weight_decay, c->optim.nesterov = o->nesterov;
    if (c->optim.kind == QAT_OPTIM_SGD) c->optim.momentum = (float)o->momentum;
    c->schedule = !strcmp(o->schedule, "cosine") ? QAT_LR_COSINE : !strcmp(o->schedule, "step") ? QAT_LR_STEP : QAT_LR_CONSTANT;
    c->warmup = o->warmup, c->clip = (float)o->clip;
    c->qat = o->qat, c->qcfg = o->qcfg, c->float_epochs = (int)o->float_epochs, c->qat_warmup = o->qat_warmup;
    c->freeze_observers = o->freeze_observers, c->freeze_bn = o->freeze_bn;
    c->norm_mode = o->norm_mode, c->norm = o->norm;
    if (o->norm_mode == QAT_NORM_GIVEN) { /* uint8 data is divided by 255 first, as torchvision's ToTensor */
        bool u8 = qat_dataset_info(r->data, QAT_SPLIT_TRAIN)->x_dtype == QAT_DT_U8;
        c->norm.divisor = u8 ? 255.0f : 1.0f, c->norm.raw_uint8 = u8;
    }
    c->augment = (qat_augment){.crop_pad = (int)o->aug_crop, .hflip = o->aug_flip, .time_shift = (int)o->aug_shift,
                               .noise = (float)o->aug_noise};
    c->metric = o->metric, c->patience = (int)o->patience;
    c->out = o->out, c->best_out = o->best_out, c->save_every = o->save_every, c->resume = o->resume;
    c->stop_after = o->stop_after, c->config = r->config, c->init = o->init;
    c->skip_units_check = o->data.no_units_check;
    c->dist = r->d->size > 1 ? &r->td : NULL;
    c->on_step = on_step, c->on_epoch = on_epoch, c->on_message = on_message, c->user = r;
    c->stop = &stop_requested;
}

/* Everything before training: the checks, the model, the data, the
 * trainer, the log. No collective runs here (agree comes after). */
static int train_setup(run *r) {
    const train_opts *o = r->o;
    int rc;
    if ((rc = cli_check_output(PROG, o->json, "--out", o->out)) ||
        (rc = cli_check_output(PROG, o->json, "--best-out", o->best_out)) ||
        (rc = cli_check_output(PROG, o->json, "--log", o->log)))
        return rc;
    const char *ins[2][2] = {{"--resume", o->resume}, {"--init", o->init}}; /* missing ones: said before any work */
    for (int i = 0; i < 2; i++)
        if (ins[i][1] && access(ins[i][1], R_OK) != 0)
            return cli_fail(PROG, o->json, 1, "%s %s: cannot open: %s", ins[i][0], ins[i][1], strerror(errno));
    /* an output over one of the run's inputs, or over another output, would destroy it */
    const char *outs[3][2] = {{"--out", o->out}, {"--best-out", o->best_out}, {"--log", o->log}};
    for (int i = 0; i < 3; i++) {
        if (cli_in_data(outs[i][1], o->data.path))
            return cli_fail(PROG, o->json, EXIT_USAGE, "%s %s would write into the data set %s: write it elsewhere",
                            outs[i][0], outs[i][1], o->data.path);
        if ((i > 0 && cli_same_file(outs[i][1], o->resume)) ||
            cli_same_file(outs[i][1], o->init) ||
            (train_opts_model_is_file(o) && cli_same_file(outs[i][1], o->model)))
            return cli_fail(PROG, o->json, EXIT_USAGE, "%s %s is one of this run's inputs: writing it would destroy it",
                            outs[i][0], outs[i][1]);
        for (int j = 0; j < i; j++)
            if (cli_same_file(outs[i][1], outs[j][1]))
                return cli_fail(PROG, o->json, EXIT_USAGE, "%s and %s name the same file %s", outs[j][0], outs[i][0],
                                outs[i][1]);
    }
    if (make_model(r) != QAT_OK) return bad_input(r);
    if (o->norm_mode == QAT_NORM_GIVEN) { /* said before the data are read */
        int64_t shape[3];
        int rank = tools_input_shape(r->m, shape);
        char msg[256];
        if (qat_normalization_check(&o->norm, rank, shape, msg, sizeof msg) != QAT_OK)
            return cli_fail(PROG, o->json, EXIT_USAGE, "--normalize %s: %s", o->normalize, msg);
    }
    if (data_arg_open(&o->data, PROG, o->seed, 0, r->ctx, &r->data) != QAT_OK) return bad_input(r);
    r->task = task_of(r);
    const qat_split_info *ti = qat_dataset_info(r->data, QAT_SPLIT_TRAIN);
    if (!o->task && r->task == QAT_TASK_REGRESS && ti->y_numel == 1) /* labels stored as floats are a common slip */
        fprintf(stderr, "%s: y holds floats, one a sample: training a regression (class labels are integers: store "
                "them so, or say --task classify after converting)\n", PROG);
    const char *classifier_only = o->n_weights ? "--class-weights" : o->label_smoothing > 0 ? "--label-smoothing"
                                  : o->topk_set && o->topk ? "--topk" : NULL;
    if (classifier_only && r->task != QAT_TASK_CLASSIFY)
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s is for classification; the task here is %s", classifier_only,
                        qat_task_kind_str(r->task));
    train_config_text(o, r->model_name, r->model_crc, r->task, r->config, sizeof r->config);
    /* a resume that contradicts the checkpoint is refused before anything is said or written */
    if (o->resume && (rc = train_check_resume(o, r->ctx, r->config))) return rc;
    qat_train_config c;
    configure(r, &c);
    if (qat_trainer_new(r->m, &c, &r->tr) != QAT_OK) { /* the data and the model do not fit: say which data */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", qat_ctx_error(r->ctx));
        return cli_fail(PROG, o->json, cli_status_of(qat_ctx_status(r->ctx)), "%s: %s", o->data.path, msg);
    }
    char err[512];
    int64_t resume_step = -1, resume_epoch; /* a resumed log loses its rows past the checkpoint: measured again */
    bool prepared;
    if (o->log && o->resume && r->d->rank == 0 &&
        qat_checkpoint_info(r->ctx, o->resume, &resume_step, &resume_epoch, &prepared) != QAT_OK)
        return bad_input(r);
    if (o->log && r->d->rank == 0 &&
        (rc = metrics_log_open(&r->log, o->log, resume_step, r->m, o->qat ? &o->qcfg : NULL, o->log_every,
                               qat_trainer_steps_per_epoch(r->tr), err, sizeof err)))
        return cli_fail(PROG, o->json, rc, "%s", err);
    if (o->log && r->d->rank > 0) metrics_log_follow(&r->log); /* measures with rank 0, writes nothing */
    /* the checkpoint of a resume or --init, and its units against the data: refused before the log is
     * touched, and agreed by an MPI job's ranks */
    if (qat_trainer_start(r->tr) != QAT_OK) {
        if (!qat_trainer_result(r->tr)->units_refused) return bad_input(r); /* a checkpoint that does not fit: 2 */
        return cli_fail(PROG, o->json, EXIT_USAGE, "%s: %s%s", o->data.path, qat_ctx_error(r->ctx), DATA_ARG_UNITS_HINT);
    }
    fprintf(stderr, "%s: %s, %s, %lld parameters, %lld training samples, %ld epoch%s, batch %ld, %s lr %g, %ld "
            "thread(s)", PROG, r->model_name, qat_task_kind_str(r->task), (long long)qat_model_n_params(r->m),
            (long long)qat_trainer_train_samples(r->tr), o->epochs, o->epochs == 1 ? "" : "s", o->batch, o->optimizer,
            o->lr, o->threads);
    if (r->d->size > 1) fprintf(stderr, " per rank, %d ranks (global batch %ld)", r->d->size, o->batch);
    fputc('\n', stderr);
    if (r->d->rank == 0 && o->batch > qat_trainer_train_samples(r->tr)) /* legal, and rarely meant */
        fprintf(stderr, "%s: note: the batch (%ld) is larger than the training set: one step of %lld samples an "
                "epoch\n", PROG, o->batch, (long long)qat_trainer_train_samples(r->tr));
    return 0;
}

/* Every process, once, after its setup (rc: its status): the job trains
 * only if every rank is ready. Otherwise every process returns the status
 * of the lowest rank that refused, that rank alone has said why (rank 0 at
 * once, another rank now, from its held stderr), and *refused says no
 * MPI_Abort is needed: every process ends by itself. */
static int agree(dist *d, int rc, bool json, bool *refused) {
    int first, first_rc;
    *refused = false;
    if (dist_agree(d, rc, &first, &first_rc)) {
        release_held(false);
        return cli_fail(PROG, json, 1, "%s", d->msg); /* and the abort ends the others */
    }
    release_held(rc && first == d->rank);
    if (!first_rc) return 0;
    *refused = d->size > 1;
    if (d->rank == 0 && first != 0 && json) {
        char msg[96];
        snprintf(msg, sizeof msg, "rank %d could not start (its message is on stderr)", first);
        cli_json_error(msg, first_rc);
    }
    if (*refused) fflush(stdout), fflush(stderr), refused_rc = first_rc;
    return first_rc;
}

static int train_run(run *r) {
    const train_opts *o = r->o;
    char err[512];
    if (metrics_log_start(&r->log, err, sizeof err)) return cli_fail(PROG, o->json, 1, "%s", err);
    if (qat_trainer_run(r->tr) != QAT_OK) return fail(r);
    if (o->rank_checkpoints && o->out && r->d->rank > 0) { /* the tests compare every rank's state */
        char path[4200];
        snprintf(path, sizeof path, "%s.rank%d", o->out, r->d->rank);
        if (qat_trainer_save(r->tr, path) != QAT_OK) return fail(r);
    }
    if (o->out && r->d->size > 1) {
        int len = snprintf(last_ckpt_msg, sizeof last_ckpt_msg, "; the last complete checkpoint is %.400s\n", o->out);
        last_ckpt_len = len > 0 && len < (int)sizeof last_ckpt_msg ? len : 0;
    }
    return report(r);
}

static int train_job(const train_opts *o, dist *d, bool *refused) {
    in_mpi_job = d->size > 1, json_mode = o->json;
    catch_signals();
    qat_set_threads(1); /* the pool splits the work, OpenBLAS's threads would multiply it */
    cli_blas_note();
    qat_status pst;
    qat_pool *pool = qat_pool_new((int)o->threads, &pst);
    run r = {.o = o, .ctx = qat_ctx_new(), .d = d,
             .td = {.rank = d->rank, .size = d->size, .sum_f32 = dist_f32, .sum_f64 = dist_f64,
                    .identical = dist_same, .user = d}};
    qat_reducer red = dist_reducer(d);
    int rc = !pool  ? cli_fail(PROG, o->json, 1, "cannot start %ld threads: %s", o->threads, qat_status_str(pst))
             : !r.ctx ? cli_fail(PROG, o->json, 1, "out of memory")
                      : 0;
    if (!rc) {
        qat_ctx_set_pool(r.ctx, pool);
        if (d->size > 1) qat_ctx_set_reducer(r.ctx, &red);
        rc = train_setup(&r);
    }
    rc = agree(d, rc, o->json, refused);
    if (!rc) rc = train_run(&r);
    if (metrics_log_close(&r.log) && !rc) rc = cli_fail(PROG, o->json, 1, "--log %s: cannot write it", o->log);
    qat_trainer_free(r.tr);
    qat_dataset_free(r.data);
    qat_ctx_free(r.ctx);
    qat_pool_free(pool);
    return rc;
}

int cmd_train(int argc, char **argv) {
    dist d;
    if (dist_init(&d, &argc, &argv)) { /* before the options: only rank 0 prints their errors */
        fprintf(stderr, "%s: %s\n", PROG, d.msg);
        return dist_abort(&d, 1);
    }
    if (d.rank > 0) mute(d.rank);
    static train_opts o; /* large (class weights, normalization): not on the stack */
    int rc = train_parse(argc, argv, &o);
    bool refused = false; /* every rank stops by itself: the ranks agreed on a refusal */
    if (!rc) { /* the collectives' watchdog: its timeout, and what its message says (dist.h) */
        d.timeout_s = o.mpi_timeout, d.out_path = o.out, d.ckpt_note = d.rank == 0 ? last_ckpt_msg : NULL;
        if (muted_stderr >= 0) d.err_fd = dup(muted_stderr);
        rc = train_job(&o, &d, &refused);
    } else if (rc > 0) {
        rc = agree(&d, rc, o.json, &refused);
    } else {
        release_held(false), rc = 0; /* --help: rank 0 printed it */
    }
    fflush(stdout);
    /* an error in training ends the job: no rank may wait in a collective */
    if (rc && rc != 130 && !refused) return dist_abort(&d, rc);
    dist_finalize(&d);
    return rc;
}
