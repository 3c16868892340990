/* qat-mnist train: float training of the MLP or LeNet-5 on MNIST. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
#include "qat/data.h"
#include "qat/fakequant.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "qat/optim.h"

static const char *const train_usage =
    "usage: qat-mnist train [options]\n"
    "\n"
    "Trains a model on MNIST and reports test accuracy after every epoch.\n"
    "\n"
    "  --model mlp|lenet|lenet-bn  model (default lenet)\n"
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
    "  --threads T                 OpenBLAS threads (default 1)\n"
    "  --limit-train N             use the first N training samples (default all)\n"
    "  --limit-test N              use the first N test samples (default all)\n"
    "  --qat                       quantization-aware training (fake quantization)\n"
    "  --wbits B                   weight bits, 2..16 (default 8)\n"
    "  --abits B                   activation bits, 2..16 (default 8)\n"
    "  --granularity tensor|channel|block:N  weight scales (default channel)\n"
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
    "  --resume CKPT               continue from a checkpoint (same options as the run that made it)\n"
    "  --stop-after N              stop after N steps in all, writing --out (split a long run)\n"
    "  --json                      print a JSON summary as the last line of stdout\n"
    "  --help                      this text\n";

typedef struct {
    const char *model, *optimizer, *schedule, *data;
    long epochs, batch, seed, threads, limit_train, limit_test, warmup;
    double lr, momentum, weight_decay, clip;
    bool nesterov, json, lr_set, wd_set;
    bool qat, lsq;
    long wbits, abits, io_bits, window, float_epochs, qat_warmup, freeze_observers, freeze_bn;
    const char *granularity, *observer, *out, *resume;
    long save_every, stop_after;
    qat_prepare_config qcfg;
} train_opts;

static int parse(int argc, char **argv, train_opts *o) {
    const char *P = "qat-mnist train";
    *o = (train_opts){.model = "lenet", .optimizer = "adam", .schedule = "cosine",
                      .data = "data/mnist", .epochs = 5, .batch = 64, .seed = 1, .threads = 1,
                      .momentum = 0.9, .wbits = 8, .abits = 8, .io_bits = 8, .window = 16,
                      .granularity = "channel", .observer = "ema", .freeze_observers = -1,
                      .freeze_bn = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool ok = true;
#define VAL() (v = cli_value(P, argc, argv, &i))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(train_usage, stdout);
            return -1;
        } else if (!strcmp(a, "--model")) ok = VAL() && (o->model = v);
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
    const char *bad = NULL;
    if (strcmp(o->model, "mlp") && strcmp(o->model, "lenet") && strcmp(o->model, "lenet-bn")) bad = "--model";
    else if (strcmp(o->optimizer, "sgd") && strcmp(o->optimizer, "adam") && strcmp(o->optimizer, "adamw"))
        bad = "--optimizer";
    else if (strcmp(o->schedule, "cosine") && strcmp(o->schedule, "step") && strcmp(o->schedule, "constant"))
        bad = "--schedule";
    qat_prepare_config *q = &o->qcfg;
    *q = qat_prepare_defaults();
    q->wbits = (int)o->wbits, q->abits = (int)o->abits, q->window = (int)o->window;
    q->io_bits = (int)o->io_bits;
    q->lsq = o->lsq;
    if (!strcmp(o->granularity, "tensor")) q->wgran = QAT_GRAN_TENSOR;
    else if (!strcmp(o->granularity, "channel")) q->wgran = QAT_GRAN_CHANNEL;
    else if (!strncmp(o->granularity, "block:", 6) && cli_int(P, "--granularity block:N", o->granularity + 6, 1, 100000, &o->window))
        q->wgran = QAT_GRAN_BLOCK, q->block = (int)o->window, o->window = q->window;
    else if (!bad) bad = "--granularity";
    if (!strcmp(o->observer, "ema")) q->aobs = QAT_OBS_EMA;
    else if (!strcmp(o->observer, "window-mean")) q->aobs = QAT_OBS_WINDOW_MEAN;
    else if (!strcmp(o->observer, "window-max")) q->aobs = QAT_OBS_WINDOW_MAX;
    else if (!strcmp(o->observer, "minmax")) q->aobs = QAT_OBS_MINMAX;
    else if (!strcmp(o->observer, "ema-bc")) q->aobs = QAT_OBS_EMA_BIAS_CORRECTED;
    else if (!bad) bad = "--observer";
    if (o->save_every && !o->out) {
        fprintf(stderr, "%s: --save-every needs --out\n", P);
        return EXIT_USAGE;
    }
    if (bad) {
        fprintf(stderr, "%s: unknown value for %s\n%s", P, bad, train_usage);
        return EXIT_USAGE;
    }
    if (!o->lr_set) o->lr = strcmp(o->optimizer, "sgd") ? 0.001 : 0.05;
    if (!o->wd_set && !strcmp(o->optimizer, "adamw")) o->weight_decay = 0.01;
    return 0;
}

/* qat_prepare, and the LSQ scales' optimizer when there are any. */
static qat_status prepare(qat_model *m, const train_opts *o, qat_optim *qopt, const qat_optim_config *oc) {
    qat_status st = qat_prepare(m, &o->qcfg);
    if (st == QAT_OK && m->n_qparams > 0) st = qat_optim_init(qopt, m->ctx, oc, m->n_qparams);
    return st;
}

static int fail(qat_ctx *ctx) {
    fprintf(stderr, "qat-mnist: %s\n", qat_ctx_error(ctx));
    return 1;
}

/* A step tensor shaped for the model's first layer: [n, 1, 28, 28] for a
 * conv net, [n, 784] otherwise. */
static qat_tensor *input_tensor(qat_model *m, const qat_mnist *d, int64_t n) {
    int64_t s4[4] = {n, 1, d->rows, d->cols}, s2[2] = {n, (int64_t)d->rows * d->cols};
    bool conv = m->layers[0].kind == QAT_LAYER_CONV2D;
    return qat_tensor_new(m->ctx, QAT_MEM_STEP, conv ? 4 : 2, conv ? s4 : s2, false);
}

/* Test-set accuracy in eval mode with grad off; predictions (optional) gets
 * the predicted class of every sample. Returns -1 on error. */
static double mnist_accuracy(qat_model *m, const qat_mnist *d, int64_t limit, int32_t *predictions) {
    int64_t n = limit > 0 && limit < d->n ? limit : d->n, correct = 0, B = 100; /* small: the step arena keeps its high-water mark */
    bool was_training = m->training, grad = qat_ctx_grad_enabled(m->ctx);
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(m->ctx, false);
    int32_t idx[100], y[100];
    for (int64_t s = 0; s < n; s += B) {
        int64_t b = n - s < B ? n - s : B;
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
        qat_ctx_step_reset(m->ctx);
    }
    qat_model_train(m, was_training);
    qat_ctx_set_grad_enabled(m->ctx, grad);
    return (double)correct / (double)n;
}

int cmd_train(int argc, char **argv) {
    train_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    qat_set_threads((int)o.threads);
    cli_blas_note();
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return fprintf(stderr, "qat-mnist: out of memory\n"), 1;
    qat_mnist train = {0}, test = {0};
    int32_t *perm = NULL, *labels = NULL;
    rc = 1;
    if (qat_mnist_load(ctx, o.data, "train", &train) || qat_mnist_load(ctx, o.data, "test", &test)) {
        rc = fail(ctx);
        goto done;
    }
    int64_t n = o.limit_train > 0 && o.limit_train < train.n ? o.limit_train : train.n;
    qat_model *m = qat_model_new(ctx);
    qat_status st = !m ? qat_ctx_status(ctx)
                       : !strcmp(o.model, "mlp") ? qat_model_mlp(m)
                                                  : qat_model_lenet(m, !strcmp(o.model, "lenet-bn"));
    if (st == QAT_OK) st = qat_model_build(m, (uint64_t)o.seed);
    qat_optim opt, qopt = {0}; /* qopt: LSQ scales, same optimizer settings, no decay */
    qat_optim_config oc = qat_optim_defaults(!strcmp(o.optimizer, "sgd") ? QAT_OPTIM_SGD
                                             : !strcmp(o.optimizer, "adam") ? QAT_OPTIM_ADAM
                                                                            : QAT_OPTIM_ADAMW);
    oc.lr = (float)o.lr, oc.weight_decay = (float)o.weight_decay, oc.nesterov = o.nesterov;
    if (oc.kind == QAT_OPTIM_SGD) oc.momentum = (float)o.momentum;
    if (st == QAT_OK) st = qat_optim_init(&opt, ctx, &oc, m->n_params);
    perm = malloc((size_t)n * sizeof *perm);
    labels = malloc((size_t)o.batch * sizeof *labels);
    if (st != QAT_OK || !perm || !labels) {
        rc = st != QAT_OK ? fail(ctx) : (fprintf(stderr, "qat-mnist: out of memory\n"), 1);
        goto done;
    }
    long all_epochs = o.epochs + (o.qat ? o.float_epochs : 0);
    int64_t steps_per_epoch = (n + o.batch - 1) / o.batch, total = steps_per_epoch * all_epochs;
    int64_t qat_start = -1; /* step at which qat_prepare ran */
    qat_lr_schedule sched = {.kind = !strcmp(o.schedule, "cosine") ? QAT_LR_COSINE
                                     : !strcmp(o.schedule, "step") ? QAT_LR_STEP : QAT_LR_CONSTANT,
                             .base_lr = (float)o.lr, .total_steps = total,
                             .step_size = steps_per_epoch * 2, .gamma = 0.5f,
                             .warmup_steps = o.warmup, .warmup_start = 0.0f};
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    qat_rng shuffle_rng;
    qat_rng_seed(&shuffle_rng, (uint64_t)o.seed * 0x9E3779B97F4A7C15ull + 7);
    fprintf(stderr, "qat-mnist: %s, %lld parameters, %lld training samples, %ld epochs, batch %ld, "
            "%s lr %g, %ld thread(s)\n", o.model, (long long)m->n_params, (long long)n, o.epochs,
            o.batch, o.optimizer, o.lr, o.threads);
    double train_time = 0, acc = 0, loss_avg = 0;
    int64_t step = 0;
    char config[512];
    snprintf(config, sizeof config,
             "{\"model\": \"%s\", \"optimizer\": \"%s\", \"lr\": %g, \"batch\": %ld, \"seed\": %ld, "
             "\"epochs\": %ld, \"qat\": %s, \"wbits\": %ld, \"abits\": %ld, \"granularity\": \"%s\", "
             "\"observer\": \"%s\", \"float_epochs\": %ld, \"lsq\": %s}",
             o.model, o.optimizer, o.lr, o.batch, o.seed, o.epochs, o.qat ? "true" : "false", o.wbits,
             o.abits, o.granularity, o.observer, o.float_epochs, o.lsq ? "true" : "false");
    qat_train_state ts = {.shuffle_rng = shuffle_rng, .order = perm, .n_order = n, .config = config};
    int64_t qat_step0 = o.qat ? o.float_epochs * steps_per_epoch : -1; /* where prepare happens */
    int64_t start_s = 0;
    long first_epoch = 1;
    if (o.resume) {
        int64_t rstep, repoch;
        bool rprepared;
        if (qat_checkpoint_info(ctx, o.resume, &rstep, &repoch, &rprepared) != QAT_OK) {
            rc = fail(ctx);
            goto done;
        }
        if (rprepared && !o.qat) {
            fprintf(stderr, "qat-mnist: %s is a QAT checkpoint: resume with the --qat options that made it\n", o.resume);
            goto done;
        }
        if (rstep >= total) {
            fprintf(stderr, "qat-mnist: %s is at step %lld of %lld: nothing left to train (raise --epochs)\n",
                    o.resume, (long long)rstep, (long long)total);
            goto done;
        }
        if (rprepared && prepare(m, &o, &qopt, &oc) != QAT_OK) {
            rc = fail(ctx);
            goto done;
        }
        if (qat_checkpoint_load(m, &opt, qopt.n ? &qopt : NULL, &ts, o.resume) != QAT_OK) {
            rc = fail(ctx);
            goto done;
        }
        if (ts.n_order != n) {
            fprintf(stderr, "qat-mnist: %s was made with %lld training samples, this run has %lld\n",
                    o.resume, (long long)ts.n_order, (long long)n);
            goto done;
        }
        if (rprepared) qat_start = qat_step0;
        step = ts.step;
        first_epoch = (long)(step / steps_per_epoch) + 1;
        start_s = (step % steps_per_epoch) * o.batch;
        fprintf(stderr, "qat-mnist: resumed from %s at step %lld (epoch %ld)\n", o.resume, (long long)step, first_epoch);
    }
    int64_t samples_done = 0;
    bool stopped = false;
    for (long epoch = first_epoch; epoch <= all_epochs; epoch++, start_s = 0) {
        if (o.qat && !m->prepared && step == qat_step0) {
            if (prepare(m, &o, &qopt, &oc) != QAT_OK) {
                rc = fail(ctx);
                goto done;
            }
            qat_start = step;
            fprintf(stderr, "qat-mnist: fake quantization on: W%ldA%ld, %s weights, %s observer\n",
                    o.wbits, o.abits, o.granularity, o.observer);
        }
        if (start_s == 0) qat_shuffle(perm, n, &ts.shuffle_rng);
        qat_model_train(m, true);
        char label[64], extra[64] = "";
        snprintf(label, sizeof label, "epoch %ld/%ld", epoch, all_epochs);
        progress bar;
        progress_start(&bar, label, n);
        double t0 = cli_now(), loss_sum = 0;
        int64_t k = 0;
        for (int64_t s = start_s; s < n; s += o.batch, step++) {
            int64_t b = n - s < o.batch ? n - s : o.batch;
            if (qat_start >= 0) {
                m->fake_quant_on = step - qat_start >= o.qat_warmup;
                m->observers_frozen = o.freeze_observers >= 0 && step - qat_start >= o.freeze_observers;
                m->bn_frozen = o.freeze_bn >= 0 && step - qat_start >= o.freeze_bn;
            }
            qat_tensor *x = input_tensor(m, &train, b);
            if (x) qat_mnist_batch(&train, perm + s, b, x->data, labels);
            qat_tensor *loss = qat_cross_entropy(ctx, qat_model_forward(m, x), labels);
            if (qat_backward(ctx, loss) != QAT_OK) {
                rc = fail(ctx);
                goto done;
            }
            if (!isfinite(loss->data[0])) {
                fprintf(stderr, "qat-mnist: the loss diverged (%g) at step %lld; try a lower --lr\n",
                        (double)loss->data[0], (long long)step);
                goto done;
            }
            loss_sum += loss->data[0];
            if (o.clip > 0) qat_clip_grad_norm(m->grads, m->n_params, (float)o.clip);
            qat_optim_step(&opt, m->params, m->grads, qat_lr_at(&sched, step));
            if (qopt.n) qat_optim_step(&qopt, m->qparams, m->qgrads, qat_lr_at(&sched, step));
            qat_model_zero_grad(m);
            qat_ctx_step_reset(ctx);
            k++;
            if (o.save_every && (step + 1) % o.save_every == 0) {
                ts.step = step + 1, ts.epoch = epoch - 1;
                if (qat_checkpoint_save(m, &opt, qopt.n ? &qopt : NULL, &ts, o.out) != QAT_OK) {
                    rc = fail(ctx);
                    goto done;
                }
            }
            samples_done += b;
            snprintf(extra, sizeof extra, "loss %.4f", loss_sum / (double)k);
            progress_update(&bar, s + b, extra);
            if (o.stop_after && step + 1 == o.stop_after) {
                step++;
                ts.epoch = epoch - 1 + (s + b >= n); /* the epoch counts once finished */
                train_time += cli_now() - t0;
                progress_end(&bar, extra);
                fprintf(stderr, "qat-mnist: stopped after step %lld (--stop-after)\n", (long long)step);
                stopped = true;
                break;
            }
        }
        if (stopped) break;
        train_time += cli_now() - t0;
        loss_avg = loss_sum / (double)k;
        progress_end(&bar, extra);
        acc = mnist_accuracy(m, &test, o.limit_test, NULL);
        if (acc < 0) {
            rc = fail(ctx);
            goto done;
        }
        fprintf(stderr, "epoch %ld: train loss %.4f, test accuracy %.2f %%\n", epoch, loss_avg, 100 * acc);
    }
    if (o.out) {
        ts.step = step;
        if (!stopped) ts.epoch = all_epochs;
        if (qat_checkpoint_save(m, &opt, qopt.n ? &qopt : NULL, &ts, o.out) != QAT_OK) {
            rc = fail(ctx);
            goto done;
        }
        fprintf(stderr, "qat-mnist: wrote %s\n", o.out);
    }
    double rate = (double)samples_done / train_time;
    double acc_float = acc;
    if (m->prepared) { /* the same weights with fake quantization off */
        m->fake_quant_on = false;
        acc_float = mnist_accuracy(m, &test, o.limit_test, NULL);
        m->fake_quant_on = true;
        fprintf(stderr, "qat-mnist: fake-quant accuracy %.2f %%, same weights in float %.2f %%\n",
                100 * acc, 100 * acc_float);
    }
    fprintf(stderr, "qat-mnist: test accuracy %.2f %%, %.0f training samples/s, peak RSS %.1f MiB\n",
            100 * acc, rate, cli_peak_rss_mib());
    if (o.json) {
        const char *core = getenv("OPENBLAS_CORETYPE");
        printf("{\"model\": \"%s\", \"epochs\": %ld, \"batch\": %ld, \"optimizer\": \"%s\", \"lr\": %g, "
               "\"seed\": %ld, \"threads\": %ld, \"train_samples\": %lld, \"train_samples_per_s\": %.1f, "
               "\"train_loss\": %.6f, \"test_accuracy\": %.6f, \"peak_rss_mib\": %.1f, "
               "\"openblas_coretype\": \"%s\", \"blas_core\": \"%s\"",
               o.model, all_epochs, o.batch, o.optimizer, o.lr, o.seed, o.threads, (long long)n, rate,
               loss_avg, acc, cli_peak_rss_mib(), core ? core : "", qat_blas_core());
        if (o.qat)
            printf(", \"qat\": true, \"wbits\": %ld, \"abits\": %ld, \"granularity\": \"%s\", "
                   "\"observer\": \"%s\", \"float_epochs\": %ld, \"test_accuracy_fake_quant\": %.6f, "
                   "\"test_accuracy_float_weights\": %.6f",
                   o.wbits, o.abits, o.granularity, o.observer, o.float_epochs, acc, acc_float);
        printf("}\n");
    }
    rc = 0;
done:
    free(perm);
    free(labels);
    qat_mnist_free(&train);
    qat_mnist_free(&test);
    qat_ctx_free(ctx);
    return rc;
}
