/* qat/train.h — the trainer: a model trained on a data set (qat/data.h)
 * for a task, with everything a run needs around the step: schedules,
 * the QAT phases, normalization computed from the data, augmentation,
 * validation and the best checkpoint, early stopping, checkpoints and
 * exact resume, threads and data-parallel processes, and callbacks for
 * progress. The `qat` tool and examples/mnist are two users of it.
 *
 *     qat_dataset *d;  qat_dataset_open(ctx, "data.h5", NULL, &d);
 *     qat_model *m = qat_model_new(ctx);  qat_model_from_file(m, "models/ds-cnn.qnet");
 *     qat_model_build(m, 1);
 *     qat_train_config c = qat_train_defaults();
 *     c.data = d, c.epochs = 5, c.qat = true, c.out = "run.ckpt.h5";
 *     qat_trainer *t;
 *     qat_trainer_new(m, &c, &t);  qat_trainer_run(t);
 *     qat_trainer_result(t)->test.accuracy;
 *     qat_trainer_free(t);
 *
 * Metrics (qat_metrics) are the same for every engine: the trainer fills
 * them from the model (float or fake-quantized), qat_engine_evaluate
 * (qat/infer.h) from the integer program. */
#ifndef QAT_TRAIN_H
#define QAT_TRAIN_H

#include "qat/data.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "qat/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tasks ------------------------------------------------------------------------ */

typedef enum {
    QAT_TASK_CLASSIFY,    /* y: class labels; cross-entropy; the model's output [K] are logits */
    QAT_TASK_REGRESS,     /* y: float targets; mean squared error; output numel = y numel */
    QAT_TASK_AUTOENCODER  /* no y: the target is the model's normalized input; mean squared error */
} qat_task_kind;
QAT_API const char *qat_task_kind_str(qat_task_kind k); /* "classify", "regress", "autoencoder" */

#define QAT_MAX_CLASSES 65536

typedef struct {
    qat_task_kind kind;
    float label_smoothing;        /* CLASSIFY: in [0, 1), 0 = none (PyTorch's label_smoothing) */
    const float *class_weights;   /* CLASSIFY: [n_class_weights], each >= 0, or NULL (PyTorch's weight) */
    int n_class_weights;          /* must be the model's number of classes */
    int topk;                     /* CLASSIFY: also measure top-k accuracy (0 = not) */
} qat_task;

/* ---- metrics ------------------------------------------------------------------------
 * What an evaluation measures, whatever runs the model. The loss is the
 * task's plain loss (cross-entropy without weights or smoothing, or the
 * MSE), averaged over samples. A ROC AUC is measured when the split has
 * anomaly labels: each sample's reconstruction error is its score, an
 * anomaly (1) the positive class, ties counted half (the Mann-Whitney
 * statistic), as scikit-learn's roc_auc_score. */
typedef struct {
    qat_task_kind task;
    int64_t n;                 /* samples measured */
    double loss;
    /* CLASSIFY */
    int classes, topk;
    double accuracy, topk_accuracy;
    int64_t *confusion;        /* [classes][classes]: row = label, column = prediction */
    int32_t *predictions;      /* [n]: argmax of each output, the first of equal maxima */
    /* REGRESS, AUTOENCODER */
    double mse;                /* mean over samples and elements */
    float *errors;             /* [n]: each sample's mean squared error */
    bool has_auc;
    double auc;
    /* the accumulation (private) */
    int64_t cap, out_numel, correct, topk_correct;
    double loss_sum, se_sum;
    uint8_t *anomaly;          /* [cap] */
} qat_metrics;

/* Ready to measure up to n samples of outputs with out_numel elements
 * (classes = out_numel for CLASSIFY). QAT_ERR_NOMEM, QAT_ERR_ARG. */
QAT_API qat_status qat_metrics_init(qat_metrics *m, const qat_task *task, int64_t n, int64_t out_numel);
/* Samples [first, first + n) of the evaluation: outputs [n, out_numel]
 * (floats: logits, or the values the model produced), with labels [n]
 * (CLASSIFY), targets [n, out_numel] (the others) and anomaly [n] (may
 * be NULL). Samples may come in any order of blocks, each once. */
QAT_API qat_status qat_metrics_add(qat_metrics *m, int64_t first, int64_t n, const float *outputs,
                                   const int32_t *labels, const float *targets, const uint8_t *anomaly);
/* The figures from what was added. */
QAT_API void qat_metrics_finish(qat_metrics *m);
QAT_API void qat_metrics_free(qat_metrics *m); /* accepts NULL and a zeroed struct */
/* A figure by name: "loss", "accuracy", "top<k>" (the measured k),
 * "mse", "auc"; NAN when the metrics have none of that name. higher
 * (may be NULL): whether higher is better. */
QAT_API double qat_metrics_get(const qat_metrics *m, const char *name, bool *higher);
/* The ROC AUC of scores against 0/1 labels (1: positive), ties counted
 * half; NAN when either class is absent. O(n log n). */
QAT_API double qat_roc_auc(const float *scores, const uint8_t *labels, int64_t n);

/* ---- data-parallel processes ----------------------------------------------------------
 * The trainer's hook into a job of several processes (each a rank, each
 * holding the same model and a share of every batch): the caller
 * implements the reductions (MPI in the qat tool; the library knows
 * nothing of MPI). NULL in the config: one process. The context's own
 * reducer (qat_ctx_set_reducer) reduces observers and BatchNorm. */
typedef struct {
    int rank, size;
    /* v summed over the processes, in place (float: the gradient block) */
    qat_status (*sum_f32)(void *user, float *v, int64_t n, char *msg, size_t len);
    qat_status (*sum_f64)(void *user, double *v, int64_t n, char *msg, size_t len);
    /* *same = 1 when the bytes are equal on every process, 0 otherwise */
    qat_status (*identical)(void *user, const void *bytes, size_t n, int *same, char *msg, size_t len);
    void *user;
} qat_train_dist;

/* ---- the trainer -------------------------------------------------------------------- */

typedef enum {
    QAT_NORM_FROM_DATA, /* per-channel mean and std of the training split (the default) */
    QAT_NORM_GIVEN,     /* config.norm */
    QAT_NORM_NONE       /* raw inputs go in as they are */
} qat_norm_mode;

typedef struct {
    int64_t step, total_steps;   /* steps done (this one included), in all */
    int epoch, epochs;           /* 1-based */
    int64_t epoch_done, epoch_samples; /* samples of this epoch done, and in all */
    double loss, epoch_loss;     /* this step's; the epoch's mean so far */
    float lr;                    /* this step's */
    int64_t batch;               /* this step's samples (every rank's) */
} qat_train_progress;

typedef struct {
    int epoch;
    int64_t step;
    bool partial;                /* stopped part way (stop_after, or interrupted) */
    double train_loss, train_seconds;
    bool has_val;
    const qat_metrics *val;      /* the validation split, when there is one */
    const qat_metrics *test;     /* the test split: the model as it stands (fake-quantized once QAT runs) */
    bool best;                   /* the best epoch so far by the chosen metric (best_out written) */
} qat_epoch_report;

typedef struct {
    /* the data and the task */
    qat_dataset *data;           /* borrowed; train and test splits, val optional */
    int64_t limit_train, limit_test; /* the first N samples (0: all) */
    qat_task task;
    /* optimization */
    int epochs;                  /* QAT epochs (or float epochs without qat) */
    int64_t batch;
    uint64_t seed;               /* initial order, shuffling, dropout, augmentation */
    qat_optim_config optim;
    qat_lr_kind schedule;        /* cosine over the run; step: x0.5 every 2 epochs; constant */
    int64_t warmup;              /* linear warm-up steps */
    float clip;                  /* global gradient norm (0: off) */
    /* quantization-aware training */
    bool qat;
    qat_prepare_config qcfg;
    int float_epochs;            /* float epochs before the QAT ones */
    int64_t qat_warmup;          /* steps after prepare with observers on, fake quant off */
    int64_t freeze_observers;    /* steps after prepare; -1 never */
    int64_t freeze_bn;           /* steps after prepare; -1 never */
    /* the model's normalization (a fresh run sets it; a resumed one keeps the checkpoint's) */
    qat_norm_mode norm_mode;
    qat_normalization norm;      /* QAT_NORM_GIVEN */
    /* augmentation of the training batches (qat/data.h) */
    qat_augment augment;
    /* validation: the metric that picks the best epoch (qat_metrics_get's
     * names; NULL: accuracy to classify, loss otherwise), measured on
     * the val split, which best_out and patience need */
    const char *metric;
    int patience;                /* stop after this many epochs without a better val metric (0: never) */
    /* checkpoints (qat/io.h) */
    const char *out;             /* the final checkpoint, and where an interruption saves */
    const char *best_out;        /* the best epoch's checkpoint */
    int64_t save_every;          /* also write out every N steps (0: never) */
    const char *resume;          /* continue from this checkpoint */
    const char *init;            /* a fresh run that starts from this checkpoint's parameters, buffers and
                                    normalization (qat_checkpoint_load_weights: a fine-tune, e.g. QAT of a
                                    float model or of another precision); norm_mode is then not used */
    bool skip_units_check;       /* resume and init: do not refuse training data in other units than the
                                    checkpoint's normalization was made for (qat_data_check_units) */
    int64_t stop_after;          /* stop after this many steps in all (0: never), writing out */
    const char *config;          /* the caller's record of the run's options, saved in every checkpoint */
    /* processes (NULL: one) */
    const qat_train_dist *dist;
    /* callbacks (each may be NULL); user goes back to them */
    void (*on_step)(void *user, const qat_train_progress *p, qat_model *m);
    void (*on_epoch)(void *user, const qat_epoch_report *r, qat_model *m);
    void (*on_message)(void *user, const char *line); /* "fake quantization on: ...", "resumed ..." */
    void *user;
    /* Set to nonzero (by a signal handler: SIGINT, SIGTERM) to stop after
     * the current step; the trainer writes out (when given) and returns
     * with result.interrupted. Every process stops at the same step. */
    volatile int *stop;
} qat_train_config;

/* The defaults: classification, 5 epochs, batch 64, seed 1, Adam (lr
 * 0.001), cosine schedule, W8A8 QAT settings when qat is set, the
 * normalization from the data, no augmentation, freezes never. */
QAT_API qat_train_config qat_train_defaults(void);

typedef struct {
    int64_t steps;               /* steps done in all (a resumed run counts its earlier ones) */
    int epochs_done;
    bool stopped;                /* by stop_after */
    bool interrupted;            /* by *stop */
    bool early_stopped;          /* by patience */
    bool units_refused;          /* resume or init: the training data failed qat_data_check_units
                                    (qat_trainer_start's error) */
    double train_loss;           /* the last epoch's mean */
    double train_seconds, samples_per_s; /* this process's training steps */
    double pool_share;           /* of train_seconds, in the pool's parallel loops */
    double data_share;           /* of train_seconds, reading and augmenting batches */
    int best_epoch;              /* 0: none measured */
    double best_value;
    qat_metrics test;            /* the final model on the test split */
    bool has_test_float;
    qat_metrics test_float;      /* QAT: the same weights with fake quantization off */
} qat_train_result;

typedef struct qat_trainer qat_trainer;

/* Checks the configuration against the data and the model (a built
 * model, not prepared; its input shape declared) and makes a trainer.
 * Errors are one line, in the context of m: the data's sample shape
 * against the model's input, labels outside the model's K outputs
 * (naming the value and the row), a task the data cannot give, a
 * best_out or patience without a val split, and the like. */
QAT_API qat_status qat_trainer_new(qat_model *m, const qat_train_config *cfg, qat_trainer **out);
/* What comes before the first step, in this process alone (no
 * collective): cfg.resume's checkpoint loaded (refused when it is at or
 * past the run's last step), or cfg.init's weights, each with its
 * normalization, and then the training split's units checked against it
 * (qat_data_check_units, unless skip_units_check; result.units_refused);
 * or, for a fresh run, the normalization made. A caller that wants these
 * refusals before it writes anything (a log, a data-parallel job's
 * agreement) calls it after qat_trainer_new; qat_trainer_run calls it
 * otherwise. A second call returns the first one's status. */
QAT_API qat_status qat_trainer_start(qat_trainer *t);
/* Trains (after qat_trainer_start): to the last epoch, stop_after, an
 * early stop or an interruption; then the final metrics and checkpoint.
 * Once per trainer (a second call: QAT_ERR_STATE); a new trainer with
 * cfg.resume goes on from the checkpoint. */
QAT_API qat_status qat_trainer_run(qat_trainer *t);
/* The result so far (NULL for a NULL trainer). */
QAT_API const qat_train_result *qat_trainer_result(const qat_trainer *t);
/* Steps per epoch and training samples (0 for a NULL trainer). */
QAT_API int64_t qat_trainer_steps_per_epoch(const qat_trainer *t);
/* Writes the trainer's whole state (model, optimizers, loop) as a
 * training checkpoint, from any process (qat_trainer_run writes cfg.out
 * from process 0 only). */
QAT_API qat_status qat_trainer_save(qat_trainer *t, const char *path);
QAT_API int64_t qat_trainer_train_samples(const qat_trainer *t);
QAT_API void qat_trainer_free(qat_trainer *t); /* accepts NULL */

/* The model on split s of d (its first `limit` samples; 0: all), in
 * eval mode with gradients off, as it stands (fake-quantized when it is
 * prepared and fake quantization is on): m gets the metrics (init
 * here; qat_metrics_free after). With dist, each process measures a
 * share and the figures are summed. */
QAT_API qat_status qat_model_evaluate(qat_model *m, qat_dataset *d, qat_split s, int64_t limit,
                                      const qat_task *task, const qat_train_dist *dist, qat_metrics *out);

/* Does sample shape (rank, shape) of a data set fit the model's input
 * (rank 1 or 3)? Equal after removing dimensions of size 1 ([28, 28]
 * for [1, 28, 28]), or any shape of as many elements for a rank-1
 * model. */
QAT_API bool qat_data_fits_input(int rank, const int64_t *shape, int in_rank, const int64_t *in_shape);

/* Does split s (info) fit a model of input shape (in_rank, in_shape) and
 * `outputs` output values? The samples' layout (qat_data_fits_input, with
 * a hint for images stored channels-last), class labels within the
 * outputs, and for the task *kind (NULL: none, the inputs and any class
 * labels only) the y it needs (class labels, float targets; an
 * autoencoder takes any), a regression's y as wide as the outputs, an autoencoder's
 * output as wide as its input. The checks the trainer and
 * qat_engine_evaluate make: QAT_OK, or QAT_ERR_SHAPE / QAT_ERR_ARG with
 * the message on ctx. */
QAT_API qat_status qat_data_check(qat_ctx *ctx, const qat_split_info *info, qat_split s, int in_rank,
                                  const int64_t *in_shape, int64_t outputs, const qat_task_kind *kind);

/* Are split s's raw inputs in the units the normalization nm was made
 * for? Data in other units (0..1 floats for a model trained on bytes
 * 0..255, bytes for one trained on 0..1 floats, bytes normalized already
 * for a model trained on bytes) are read without complaint and give
 * chance-level results. The check takes the split's per-channel mean and
 * standard deviation over its first `limit` samples (0: all), in x /
 * divisor units (qat_dataset_channel_stats; the channels pooled when nm
 * has one), and refuses a channel whose standard deviation is more than
 * QAT_UNITS_RATIO times larger or smaller than nm's std, or whose mean is
 * more than QAT_UNITS_RATIO of nm's std from nm's mean: QAT_ERR_ARG with
 * both figures and a likely cause, and *refused (may be NULL) set; any
 * other error (reading the data) leaves it false. A channel whose std is
 * exactly 1 (the trainer's stand-in for a constant channel) and a
 * constant channel of the data are judged by the mean alone. QAT_OK when
 * nm is NULL or has no channels. */
#define QAT_UNITS_RATIO 32.0
QAT_API qat_status qat_data_check_units(qat_ctx *ctx, qat_dataset *d, qat_split s, int64_t limit,
                                        const qat_normalization *nm, bool *refused);
/* The samples the trainer and the tool check (the first ones): enough for
 * a standard deviation, a fraction of a pass over a large set. */
#define QAT_UNITS_SAMPLES 8192

#ifdef __cplusplus
}
#endif
#endif
