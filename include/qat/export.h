/* qat/export.h — from a trained QAT model to its integer program
 * (qat/runtime.h), and the quantized model file (HDF5) that carries it.
 *
 * Lowering walks the model graph with the same fusion matcher as the QAT
 * pass: each group becomes one integer op — Linear/Conv with its
 * BatchNorm folded, its int32 bias at s_in·s_w[c], the fixed-point
 * multiplier of M[c] = s_in·s_w[c]/s_out and its ReLU/ReLU6 as the clamp;
 * Add as TFLite's ADD; average pools with their multiplier; sigmoid, tanh
 * and hard-swish as 256-entry tables; dropout disappears. The file layout
 * is docs/quantized-model-format.md; the engines are qat/infer.h.
 *
 *     qat_ctx *pctx = qat_ctx_new();                              // the program's memory
 *     qat_qmodel q;
 *     qat_qmodel_lower(model, 3, (int64_t[]){1, 28, 28}, pctx, &q);  // prepared, trained
 *     qat_qmodel_save(pctx, &q, "model.qat.h5");                   // checked, atomic
 *     qat_qmodel_load(ctx, "model.qat.h5", &q2);                   // checked
 *     qat_ctx_free(pctx);
 */
#ifndef QAT_EXPORT_H
#define QAT_EXPORT_H

#include "qat/io.h"
#include "qat/layers.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_QMODEL_FORMAT "qat-quantized-model"
/* 4: the input normalization (/normalization); 3 (weights of <= 4 bits
 * packed, quantized_shape, ragged blocks, the MLIR text as bytes,
 * sub-channel integer sums), 2 (tensor table, ops naming tensors) and 1 (a
 * chain of ops) still load, as programs without normalization */
#define QAT_QMODEL_VERSION 4

/* Lowers a prepared, trained model (its activation observers must have
 * seen data) for inputs of per-sample shape in_shape (rank 1 or 3; NULL:
 * the model's declared input shape). The program carries the model's
 * normalization (a copy in ctx), which must fit in_shape. The program's arrays live in ctx
 * (give each export its own context and free it after, so exporting every
 * epoch does not grow the model's memory). Errors name the layer: an
 * unfolded BatchNorm, a standalone ReLU6, a custom op, a shape that does
 * not fit, non-finite weights. */
QAT_API qat_status qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx,
                                    qat_qmodel *out);

/* Checks the program (qat_qmodel_check) and writes it atomically
 * (docs/saving.md) in the version-4 layout. */
QAT_API qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);
/* The same, staged in set (qat/io.h): the file is written beside path and
 * renamed by qat_save_set_commit. set NULL: qat_qmodel_save. */
QAT_API qat_status qat_qmodel_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set);

/* Reads and checks a quantized model file of version 1 to 4: every
 * attribute's type and size, then qat_qmodel_check on the whole program.
 * A version-1 chain of ops becomes the same program; versions 1 to 3 have
 * no normalization (norm NULL). Arrays live in ctx. */
QAT_API qat_status qat_qmodel_load(qat_ctx *ctx, const char *path, qat_qmodel *out);

/* qat_qmodel_check with the message on the context. */
QAT_API qat_status qat_qmodel_validate(qat_ctx *ctx, const qat_qmodel *q);

/* Lower (in a context of its own) + save, with a training-configuration
 * text (may be NULL). peak_bytes (may be NULL) gets the integer runtime's
 * peak activation bytes per sample for the program, from its lifetime
 * plan (-1 if the runtime cannot run it). */
QAT_API qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                              const char *path, int64_t *peak_bytes);

#ifdef __cplusplus
}
#endif
#endif
