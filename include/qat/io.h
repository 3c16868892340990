/* qat/io.h — training checkpoints in HDF5 (the quantized export is qat/export.h).
 *
 * A training checkpoint holds everything a run needs to continue
 * bit-identically: parameters, buffers, LSQ scales, optimizer state,
 * observer state, the model's RNG, and the caller's loop state (step,
 * epoch, shuffling RNG and sample order). The layout is in
 * docs/checkpoint-format.md. Files are written atomically: to a temporary
 * file beside the target, flushed and synced, then renamed over it, so a
 * crash or a full disk never leaves a damaged file at the target path. */
#ifndef QAT_IO_H
#define QAT_IO_H

#include "qat/layers.h"
#include "qat/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_CHECKPOINT_FORMAT "qat-training-checkpoint"
#define QAT_CHECKPOINT_VERSION 4 /* 4: the input normalization; 3 (the model graph, no normalization) and 2 (a
                                    chain) still rebuild; 1 still resumes */

/* The training loop's own state, saved and restored with the model. */
typedef struct {
    int64_t step, epoch;     /* steps taken; epochs completed */
    qat_rng shuffle_rng;
    int32_t *order;          /* sample order of the current epoch [n_order] (may be NULL) */
    int64_t n_order;
    const char *config;      /* free text (e.g. JSON) recorded with the checkpoint; may be NULL */
    int64_t best_epoch;      /* the best epoch so far by the run's validation metric (0: none) */
    float best_value;        /* its value */
    int64_t since_best;      /* epochs since then (early stopping's count) */
} qat_train_state;

/* opt and qopt (the LSQ scales' optimizer) may be NULL. */
QAT_API qat_status qat_checkpoint_save(qat_model *m, const qat_optim *opt, const qat_optim *qopt,
                                       const qat_train_state *ts, const char *path);

/* Restores into a model of the same architecture (built, and prepared the
 * same way if the checkpoint was), and optimizers initialised with the
 * same sizes. ts->order must have room for the saved order (ts->n_order
 * in: capacity, out: count). The model's input normalization becomes the
 * checkpoint's (none when it has none: a model saved without one, or a
 * file of version 1 to 3). Mismatches, damaged and wrong-version files
 * are errors that name what is wrong. */
QAT_API qat_status qat_checkpoint_load(qat_model *m, qat_optim *opt, qat_optim *qopt,
                                       qat_train_state *ts, const char *path);

/* Reads only the loop position and whether the model was prepared for QAT,
 * so a caller can rebuild the model the same way before qat_checkpoint_load. */
QAT_API qat_status qat_checkpoint_info(qat_ctx *ctx, const char *path, int64_t *step, int64_t *epoch,
                                       bool *prepared);

/* The configuration text the checkpoint was saved with (ts->config): ""
 * when it has none. Fails (QAT_ERR_FORMAT) when the text does not fit in
 * len bytes, or the file is not a training checkpoint. */
QAT_API qat_status qat_checkpoint_config(qat_ctx *ctx, const char *path, char *buf, size_t len);

/* Rebuilds, in ctx, the model a (version 2 or later) training checkpoint
 * was made from: its layers from the recorded architecture, prepared for
 * QAT as it was (global and per-layer settings), then its parameters,
 * buffers, LSQ scales, observers, mode flags and normalization loaded. *out lives in ctx. For export
 * and evaluation: no optimizer state is read. config (may be NULL) gets
 * the checkpoint's configuration text ("" if none), cut to len bytes. */
QAT_API qat_status qat_checkpoint_model(qat_ctx *ctx, const char *path, qat_model **out, char *config,
                                        size_t len);

#ifdef __cplusplus
}
#endif
#endif
