/* qat/codegen.h — C source for microcontrollers from the integer program.
 *
 * qat_codegen_generate makes three files for a program (qat/runtime.h),
 * in memory:
 *   NAME.h     the API: NAME_run, the sizes and quantization macros
 *   NAME.c     the integer path: one function per op, specialized to
 *              its shapes, weights and multipliers as static const
 *              arrays, one static arena laid out by qat_plan_program
 *              (max_batch 1). C99, <stdint.h> and <string.h> only, no
 *              malloc, no float; the DSP extension through ACLE
 *              intrinsics where __ARM_FEATURE_DSP is defined. For a
 *              program whose normalization says raw_uint8, also
 *              NAME_quantize_input_u8: raw bytes to input integers
 *              through a const table of 256 per channel
 *              (qat_input_table's), no float.
 *   NAME_io.c  float at the edges: NAME_quantize_input (the program's
 *              input path on raw floats, qat_input_quantize, bit for
 *              bit: the normalization, then the input quantization) and
 *              NAME_dequantize_output.
 * The generated NAME_run computes the integers qat_runtime_run computes,
 * bit for bit (docs/codegen.md says how that is tested).
 *
 * This module reads the program and nothing else (it links against the
 * runtime alone: library qat_codegen). The files reach a directory,
 * together and atomically, through the export (qat/export.h:
 * qat_codegen_c, qat_codegen_stage, qat_export_all).
 *
 *     qat_codegen_source src;
 *     char msg[400];
 *     if (qat_codegen_generate(&q, "lenet", &src, msg, sizeof msg) == QAT_OK) {
 *         for (int k = 0; k < QAT_CODEGEN_FILES; k++) // write src.text[k] to "lenet" + qat_codegen_suffix(k)
 *         qat_codegen_source_free(&src);
 *     }
 *     // firmware: #include "lenet.h"; lenet_run(input, logits);
 */
#ifndef QAT_CODEGEN_H
#define QAT_CODEGEN_H

#include "qat/core.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_CODEGEN_MAX_NAME 48 /* NAME: a C identifier of at most this many characters */
#define QAT_CODEGEN_FILES 3     /* NAME.h, NAME.c, NAME_io.c */

/* Whether name can be the generated API's NAME: a C identifier (a letter
 * or '_', then letters, digits and '_') of 1..QAT_CODEGEN_MAX_NAME
 * characters, not a standard header's name (below). Tools check it before
 * any work; the generator refuses any other. */
QAT_API bool qat_codegen_name_ok(const char *name);
/* Whether name is one qat_codegen_name_ok refuses because NAME.h would
 * hide a header of that name (C11's, Arm's intrinsics', CMSIS's: stdint,
 * string, arm_acle, ...) from a build that has NAME's folder on its
 * include path. */
QAT_API bool qat_codegen_name_reserved(const char *name);

/* What the generated code needs, in bytes. */
typedef struct {
    int64_t arena_bytes;  /* the static arena (NAME_ARENA_BYTES): activations, and the scratch of packed convolutions */
    int64_t weight_bytes; /* constant data as stored (packed weights packed): weights, biases, multipliers, shifts,
                           * tables */
    int64_t input_size, output_size; /* elements */
    int n_ops;            /* ops of the program */
} qat_codegen_info;

/* The three files' text, each malloc'd (qat_codegen_source_free). */
typedef struct {
    char *text[QAT_CODEGEN_FILES];  /* in the order of qat_codegen_suffix */
    size_t size[QAT_CODEGEN_FILES]; /* bytes (the text has no NUL inside; one follows it) */
    qat_codegen_info info;
} qat_codegen_source;

/* File k's name after NAME: ".h", ".c", "_io.c" (NULL for another k). */
QAT_API const char *qat_codegen_suffix(int k);

/* Generates the files of program q (NAME: a C identifier, "model" when
 * NULL). The program must pass qat_qmodel_check and the runtime's plan
 * (signed 2..8-bit activations, weights of at most 8 bits, per-tensor or
 * per-channel) and its weights minus their zero points must fit int8:
 * QAT_ERR_UNSUPPORTED otherwise, with a one-line message naming the op in
 * msg (len bytes; msg may be NULL). On failure out holds nothing. */
QAT_API qat_status qat_codegen_generate(const qat_qmodel *q, const char *name, qat_codegen_source *out, char *msg,
                                        size_t len);
/* How to generate. small_ram: the small-RAM plan (qat/runtime.h,
 * QAT_PLAN_SMALL; docs/codegen.md, "RAM"): depthwise and pointwise
 * convolutions written over their input, and a convolution followed by a
 * max pool computed one output channel at a time into a scratch and
 * pooled from there, for a smaller arena at some cycles' cost. */
typedef struct {
    bool small_ram;
} qat_codegen_options;

/* qat_codegen_generate with options (NULL: the defaults, as
 * qat_codegen_generate). */
QAT_API qat_status qat_codegen_generate_ex(const qat_qmodel *q, const char *name, const qat_codegen_options *opt,
                                           qat_codegen_source *out, char *msg, size_t len);
/* Frees the texts (accepts NULL and a source freed already). */
QAT_API void qat_codegen_source_free(qat_codegen_source *s);

#ifdef __cplusplus
}
#endif
#endif
