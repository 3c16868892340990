/* qat/export.h — from a trained QAT model to its integer program
 * (qat/runtime.h), the quantized model file (HDF5) that carries it, and
 * the files of every target of the program (the quantized file, ONNX,
 * generated C), written together.
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
 *
 * One export, every target, one lowering (qat_export_all):
 *
 *     qat_export_targets t = {.qmodel = "m.qat.h5", .onnx = "m.onnx", .c_dir = "fw", .c_name = "m"};
 *     qat_export_all(model, 0, NULL, &t, NULL);  // lowered once; all written, or none
 */
#ifndef QAT_EXPORT_H
#define QAT_EXPORT_H

#include "qat/codegen.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "qat/onnx.h"
#include "qat/tflite.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * (docs/saving.md) in the version-5 layout. */
QAT_API qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);
/* The same, staged in set (qat/io.h): the file is written beside path and
 * renamed by qat_save_set_commit. set NULL: qat_qmodel_save. */
QAT_API qat_status qat_qmodel_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set);

/* Reads and checks a quantized model file of version 1 to 5: every
 * attribute's type and size, then qat_qmodel_check on the whole program.
 * A version-1 chain of ops becomes the same program; versions 1 to 3 have
 * no normalization (norm NULL). Arrays live in ctx. */
QAT_API qat_status qat_qmodel_load(qat_ctx *ctx, const char *path, qat_qmodel *out);

/* qat_qmodel_check with the message on the context. */
QAT_API qat_status qat_qmodel_validate(qat_ctx *ctx, const qat_qmodel *q);

/* ---- the targets' files ------------------------------------------------------------
 * The targets (qat/onnx.h, qat/codegen.h) make bytes from a program; these
 * write them as every qat file is written (docs/saving.md): atomically,
 * and staged in a save set (qat/io.h) with a model's other outputs. Errors
 * go on ctx. */

/* qat_onnx_serialize's bytes written atomically to path. */
QAT_API qat_status qat_onnx_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);
/* The same, staged in set, renamed by qat_save_set_commit. A program ONNX
 * cannot express is refused before anything is written. set NULL:
 * qat_onnx_save. */
QAT_API qat_status qat_onnx_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set);

/* qat_tflite_serialize's bytes written atomically to path. */
QAT_API qat_status qat_tflite_save(qat_ctx *ctx, const qat_qmodel *q, const char *path);
/* The same, staged in set (NULL: qat_tflite_save). A program TFLite cannot
 * express is refused before anything is written. */
QAT_API qat_status qat_tflite_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set);

/* qat_codegen_generate's three files, DIR/NAME.h, DIR/NAME.c and
 * DIR/NAME_io.c (DIR must exist; NAME NULL: "model"), staged in set with
 * the caller's other outputs: each is made in memory and written beside
 * its target, and qat_save_set_commit renames them with the rest. info
 * (may be NULL) gets the generated code's sizes. */
QAT_API qat_status qat_codegen_stage(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                     qat_save_set *set, qat_codegen_info *info);
/* The same with the generator's options (NULL: the defaults). */
QAT_API qat_status qat_codegen_stage_ex(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                        const qat_codegen_options *opt, qat_save_set *set, qat_codegen_info *info);
/* qat_codegen_stage with a set of its own, committed at once: the three
 * files reach DIR together, or none does (an old NAME.c is never left
 * beside a new NAME.h by a failure). */
QAT_API qat_status qat_codegen_c(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                 qat_codegen_info *info);

/* ---- one export, every target ---------------------------------------------------------- */

/* What one export writes; every path may be NULL (not written), but not all. */
typedef struct {
    const char *qmodel;  /* the quantized model file (qat_qmodel_stage) */
    const char *onnx;    /* the ONNX file (qat_onnx_stage) */
    const char *tflite;  /* the .tflite file (qat_tflite_stage) */
    const char *c_dir;   /* the generated C's directory, which must exist (qat_codegen_stage) */
    const char *c_name;  /* its NAME (NULL: "model") */
    const qat_codegen_options *c_options; /* the generator's options (NULL: the defaults) */
    const char *config;  /* the training configuration text the program carries into the
                            quantized file and ONNX's metadata (NULL: none, "") */
    qat_rounding rounding; /* the program's requantization rounding (0: the contract's double) */
} qat_export_targets;

/* What it wrote. */
typedef struct {
    int64_t peak_bytes;  /* the integer runtime's peak activation bytes per sample for the
                            program, from its lifetime plan (-1 if the runtime cannot run it) */
    qat_codegen_info c;  /* the generated C's sizes (c_dir given) */
    int n_tensors, n_ops; /* the program's */
} qat_export_report;

/* Lowers the prepared, trained model once (qat_qmodel_lower, in a context
 * of its own; in_rank, in_shape as it takes them) and writes every target of
 * t from that one program, all or nothing (docs/saving.md, "Several files
 * at once"): each file is made and staged beside its target first, in
 * the order ONNX, TFLite, quantized file, C; any refusal (an op a target cannot
 * express), bad path or full disk fails there, before any target changes;
 * then all are renamed into place. Errors go on the model's context.
 * report may be NULL. */
QAT_API qat_status qat_export_all(qat_model *m, int in_rank, const int64_t *in_shape, const qat_export_targets *t,
                                  qat_export_report *report);

/* qat_export_all with the quantized file alone, with a training-configuration
 * text (may be NULL). peak_bytes (may be NULL) gets the integer runtime's
 * peak activation bytes per sample for the program, from its lifetime
 * plan (-1 if the runtime cannot run it). */
QAT_API qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                              const char *path, int64_t *peak_bytes);
/* qat_export_all with the ONNX file alone, with a training-configuration
 * text (may be NULL). Errors go on the model's context: an unprepared
 * (float) model, an op with no ONNX form. */
QAT_API qat_status qat_onnx_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                                   const char *path);
/* qat_export_all with the C source alone: DIR/NAME.h, NAME.c, NAME_io.c. */
QAT_API qat_status qat_codegen_model(qat_model *m, int in_rank, const int64_t *in_shape, const char *dir,
                                     const char *name, qat_codegen_info *info);

#ifdef __cplusplus
}
#endif
#endif
