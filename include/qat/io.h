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
    double epoch_loss_sum;   /* the current epoch's losses so far, when saved part way through it */
    int64_t epoch_loss_steps; /* and their count (0: at an epoch's start) */
} qat_train_state;

/* opt and qopt (the LSQ scales' optimizer) may be NULL. */
QAT_API qat_status qat_checkpoint_save(qat_model *m, const qat_optim *opt, const qat_optim *qopt,
                                       const qat_train_state *ts, const char *path);

/* Restores into a model of the same architecture (built, and prepared the
 * same way if the checkpoint was), and optimizers initialised with the
 * same sizes. ts->order must have room for the saved order (ts->n_order
 * in: capacity, out: count; when the saved order is longer, QAT_ERR_SHAPE
 * with ts->n_order set to its length). The model's input normalization becomes the
 * checkpoint's (none when it has none: a model saved without one, or a
 * file of version 1 to 3). Mismatches, damaged and wrong-version files
 * are errors that name what is wrong. */
QAT_API qat_status qat_checkpoint_load(qat_model *m, qat_optim *opt, qat_optim *qopt,
                                       qat_train_state *ts, const char *path);

/* A warm start: the parameters, buffers (BatchNorm's running statistics)
 * and input normalization of a training checkpoint into a built model
 * of the same layers and shapes, prepared or not, whatever the precision
 * it was trained at; quantizers, optimizer and loop are not read. On
 * failure the parameters, buffers and normalization are as they were. */
QAT_API qat_status qat_checkpoint_load_weights(qat_model *m, const char *path);

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
 * the checkpoint's configuration text ("" if none); a text that does not
 * fit in len bytes fails the call (QAT_ERR_FORMAT), as in
 * qat_checkpoint_config. */
QAT_API qat_status qat_checkpoint_model(qat_ctx *ctx, const char *path, qat_model **out, char *config,
                                        size_t len);
/* The same, the rebuilt model held to limits (qat/layers.h; NULL: the
 * defaults, as qat_checkpoint_model). A checkpoint declares its layers'
 * sizes before its datasets are read: the totals are checked first. */
QAT_API qat_status qat_checkpoint_model_limits(qat_ctx *ctx, const char *path, const qat_model_limits *limits,
                                               qat_model **out, char *config, size_t len);

/* ---- several files saved together (docs/saving.md, "Several files at once") ----
 * A save set holds files that are staged but not yet in place: each is
 * written in full to its temporary file beside its target and flushed to
 * disk, while every target keeps its old file. qat_save_set_commit then
 * renames them all over their targets, one after the other (renames in
 * the directories the temporaries are already in: nothing is left that
 * can fail for lack of space). Freeing a set that was not committed
 * removes its temporaries: no target has changed. The savers have staging
 * forms that take a set (qat_qmodel_stage, qat_onnx_stage,
 * qat_codegen_stage); their plain forms are a set of their own, committed
 * at once.
 *
 *     qat_save_set *s = qat_save_set_new(ctx);
 *     qat_status st = qat_qmodel_stage(ctx, &q, "m.qat.h5", s);
 *     if (st == QAT_OK) st = qat_onnx_stage(ctx, &q, "m.onnx", s);
 *     if (st == QAT_OK) st = qat_codegen_stage(ctx, &q, "fw", "m", s, NULL);
 *     if (st == QAT_OK) st = qat_save_set_commit(s);   // all renamed, or (failure) none
 *     qat_save_set_free(s);                              // removes what was not renamed
 *
 * A set is not one atomic operation against a kill or a crash during the
 * renames (microseconds): every file is then whole, some old and some
 * new. A rename that fails (an I/O error between two renames) stops the
 * commit: the files before it are new, the rest keep their old files
 * (their temporaries are removed), and the message says how many were
 * replaced. */
typedef struct qat_save_set qat_save_set;

/* An empty set; errors of the set's own calls go on ctx. NULL (error on
 * ctx) when out of memory. */
QAT_API qat_save_set *qat_save_set_new(qat_ctx *ctx);
/* Stages size bytes for path (its temporary written and flushed; the old
 * file stays). Refused: a target that is a directory, and a file staged
 * already in this set (under any spelling of its directory). */
QAT_API qat_status qat_save_set_add(qat_save_set *set, const char *path, const void *data, size_t size);
/* Files staged and not yet renamed. */
QAT_API int qat_save_set_count(const qat_save_set *set);
/* Renames every staged file over its target, in the order staged. */
QAT_API qat_status qat_save_set_commit(qat_save_set *set);
/* Removes the temporaries of files not renamed, and frees the set. */
QAT_API void qat_save_set_free(qat_save_set *set);

#ifdef __cplusplus
}
#endif
#endif
