/* qat/codegen.h — C source for microcontrollers from the integer program.
 *
 * qat_codegen_c writes three files for a program (qat/runtime.h), together
 * and atomically (docs/saving.md):
 *   DIR/NAME.h     the API: NAME_run, the sizes and quantization macros
 *   DIR/NAME.c     the integer path: one function per op, specialized to
 *                  its shapes, weights and multipliers as static const
 *                  arrays, one static arena laid out by qat_plan_program
 *                  (max_batch 1). C99, <stdint.h> and <string.h> only, no
 *                  malloc, no float; the DSP extension through ACLE
 *                  intrinsics where __ARM_FEATURE_DSP is defined. For a
 *                  program whose normalization says raw_uint8, also
 *                  NAME_quantize_input_u8: raw bytes to input integers
 *                  through a const table of 256 per channel
 *                  (qat_input_table's), no float.
 *   DIR/NAME_io.c  float at the edges: NAME_quantize_input (the integer
 *                  engine's input path on raw floats, bit for bit: the
 *                  program's normalization, then the input quantization)
 *                  and NAME_dequantize_output.
 * The generated NAME_run computes the integers qat_runtime_run computes,
 * bit for bit (docs/codegen.md says how that is tested).
 *
 *     qat_codegen_info info;
 *     qat_codegen_c(ctx, &q, "out", "lenet", &info);   // q: lowered or loaded
 *     // firmware: #include "lenet.h"; lenet_run(input, logits);
 */
#ifndef QAT_CODEGEN_H
#define QAT_CODEGEN_H

#include "qat/autograd.h"
#include "qat/io.h"
#include "qat/layers.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_CODEGEN_MAX_NAME 48 /* NAME: a C identifier of at most this many characters */

/* What the generated code needs, in bytes. */
typedef struct {
    int64_t arena_bytes;  /* the static activation arena (NAME_ARENA_BYTES) */
    int64_t weight_bytes; /* constant data: weights, biases, multipliers, shifts, tables */
    int64_t input_size, output_size; /* elements */
    int n_ops;            /* op functions written (flatten writes none) */
} qat_codegen_info;

/* Writes DIR/NAME.h, DIR/NAME.c and DIR/NAME_io.c for program q (DIR must
 * exist; NAME: a C identifier, "model" when NULL). The program must pass
 * qat_qmodel_check and the runtime's plan (signed 2..8-bit activations,
 * weights of at most 8 bits, per-tensor or per-channel) and its weights
 * minus their zero points must fit int8: QAT_ERR_UNSUPPORTED otherwise,
 * with a message naming the op. info may be NULL. */
QAT_API qat_status qat_codegen_c(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                 qat_codegen_info *info);
/* qat_codegen_c's files staged in set (qat/io.h) with the caller's other
 * outputs: each is made in memory and written beside its target, and
 * qat_save_set_commit renames them with the rest. qat_codegen_c is this
 * with a set of its own, committed at once: the three files reach DIR
 * together, or none does (an old NAME.c is never left beside a new
 * NAME.h by a failure; docs/saving.md). */
QAT_API qat_status qat_codegen_stage(qat_ctx *ctx, const qat_qmodel *q, const char *dir, const char *name,
                                     qat_save_set *set, qat_codegen_info *info);

/* Lowers a prepared, trained model (qat_qmodel_lower, in a context of its
 * own) and writes its C source as qat_codegen_c does. */
QAT_API qat_status qat_codegen_model(qat_model *m, int in_rank, const int64_t *in_shape, const char *dir,
                                     const char *name, qat_codegen_info *info);

#ifdef __cplusplus
}
#endif
#endif
