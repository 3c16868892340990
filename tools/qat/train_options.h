/* qat train's options: parsed and checked, the record of them a
 * checkpoint keeps, and the check a resume makes against that record. */
#ifndef QAT_TOOL_TRAIN_OPTIONS_H
#define QAT_TOOL_TRAIN_OPTIONS_H

#include <stdio.h>

#include "data_arg.h"
#include "qat/train.h"

/* What a resume may change; every other option must be the checkpoint's. */
#define RESUME_MAY_CHANGE                                                                                      \
    "--epochs, --out, --best-out, --save-every, --stop-after, --threads, --json, --data, --memory-cap, "    \
    "--limit-test, --log, --log-every"

typedef struct {
    const char *prog; /* "qat train", or "qat fit" when fit's options are passed on (argv[0] "fit") */
    const char *model, *optimizer, *schedule, *task;
    data_arg data;
    long epochs, batch, seed, threads, limit_train, limit_test, warmup, topk;
    double lr, momentum, weight_decay, clip, label_smoothing;
    bool nesterov, json, lr_set, wd_set, rank_checkpoints, topk_set;
    bool qat, lsq, ragged_blocks;
    long wbits, abits, io_bits, window, float_epochs, qat_warmup, freeze_observers, freeze_bn;
    const char *granularity, *block_scales, *observer, *out, *best_out, *resume, *metric, *normalize, *class_weights;
    const char *init; /* --init: a fresh run from this checkpoint's weights */
    const char *target; /* --target: the deployment target whose integer rules QAT follows (default, tflite) */
    long save_every, stop_after, patience;
    const char *log;
    long log_every;
    long aug_crop, aug_shift;
    double aug_noise;
    bool aug_flip;
    bool quant_option; /* a quantization option was given (refused without --qat) */
    bool model_file;   /* --model-file: model names a file whatever it looks like */
    qat_prepare_config qcfg;
    char gran[64];     /* --granularity in its canonical spelling (block:8, {0:1, 1:2}, ragged {1:3}) */
    float weights[QAT_MAX_CLASSES > 4096 ? 4096 : QAT_MAX_CLASSES];
    int n_weights;
    qat_normalization norm; /* --normalize MEAN,STD */
    qat_model_limits limits; /* --max-params, --max-activation-bytes, --max-layers (0: the default) */
    double mpi_timeout;      /* --mpi-timeout: seconds a collective may wait (0: forever) */
    qat_norm_mode norm_mode;
} train_opts;

/* The built-in models (NULL-ended), and whether --model names a file
 * instead (a path: it has a '/' or ends in .qnet). */
extern const char *const train_builtin_models[];
bool train_model_is_file(const char *model);
/* Does this run's --model name a file (--model-file, or a path)? */
bool train_opts_model_is_file(const train_opts *o);

/* --model, built: a built-in name, or a model file (a path: it has a '/'
 * or ends in .qnet), held to --max-*, with its name for the record (JSON-
 * safe, into name) and the file's CRC-32 (0: a built-in model). *m lives
 * in ctx, from the start (so that a failure can still free it there). */
qat_status train_make_model(const train_opts *o, qat_ctx *ctx, qat_model **m, char *name, size_t name_len,
                            uint32_t *crc);

/* Prints qat train --help. */
void train_usage(FILE *f);

/* Options, checked, with the defaults that depend on others filled in;
 * 0, -1 after --help, or EXIT_USAGE (reported). */
int train_parse(int argc, char **argv, train_opts *o);

/* The record of every option that shapes the training, as one JSON
 * object (the keys are the options' names without dashes). model_crc:
 * the model file's CRC-32 (0: a built-in model). */
void train_config_text(const train_opts *o, const char *model, uint32_t model_crc, qat_task_kind task, char *buf,
                       size_t len);

/* The number a configuration text (train_config_text's form, as a
 * checkpoint records it) gives key; false when it has none. */
bool train_config_number(const char *config, const char *key, double *out);
/* The string it gives key, without its quotes, into out (len bytes);
 * false when it has none, or when it is not a string or does not fit. */
bool train_config_string(const char *config, const char *key, char *out, size_t len);
/* A resume keeps every option but the free ones: 0, or the exit status
 * after saying which option differs (2), or that the checkpoint's options
 * cannot be checked (1: no record, or not in this program's form). */
int train_check_resume(const train_opts *o, qat_ctx *ctx, const char *mine);

#endif
