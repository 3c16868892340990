/* qat/infer.h — running an integer program (qat/runtime.h) on the host.
 *
 * Three engines over the same program, each taking raw inputs (the
 * program's normalization, qat_qmodel.norm, is applied first):
 *   QAT_ENGINE_INT     integer only: the device runtime (qat/runtime.h),
 *                      with the raw input normalized and quantized on the
 *                      way in and the logits dequantized on the way out.
 *   QAT_ENGINE_HYBRID  weight-only (the hybrid seed): float activations,
 *                      op(x, dequantize(w)), through sgemm.
 *   QAT_ENGINE_FAKE    the fake-quantized float model the QAT run trained:
 *                      dequantized weights, activations fake-quantized at
 *                      every requantization point. The reference the
 *                      integer engine must agree with.
 *
 * The requantization of contract §5, as gemmlowp and TFLite's
 * MultiplyByQuantizedMultiplier compute it: an int32 accumulator at scale
 * s_in·s_w becomes an output at scale s_out through M = s_in·s_w/s_out,
 * represented as M0·2^(shift-31) with M0 in [2^30, 2^31). */
#ifndef QAT_INFER_H
#define QAT_INFER_H

#include "qat/fakequant.h"
#include "qat/runtime.h"
#include "qat/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed-point functions (qat_quantize_multiplier, ...) are in qat/core.h. */

typedef enum { QAT_ENGINE_INT, QAT_ENGINE_HYBRID, QAT_ENGINE_FAKE } qat_engine_mode;

QAT_API const char *qat_engine_mode_str(qat_engine_mode mode); /* "int", "hybrid", "fake" */

typedef struct qat_engine qat_engine;

/* Prepares an engine for batches of up to max_batch samples: every buffer
 * is allocated here, none while running. Threads: the engines run on the
 * pool of ctx (qat_ctx_set_pool); the integer engine cuts each batch into
 * one slice per thread the pool has now (each slice its own activation
 * arena), the float engines split their ops' work. The outputs are the
 * same bits for any number of threads. q must outlive the engine. NULL
 * on error, with the message on ctx (the integer engine refuses types it
 * cannot run exactly: storage wider than 8 bits). Sub-channel weights run
 * on every engine: the integer one converts each block's partial sum to
 * the row's accumulation scale (docs/subchannel.md); the hybrid and fake
 * ones dequantize each block with its own scale. */
QAT_API qat_engine *qat_engine_new(qat_ctx *ctx, const qat_qmodel *q, qat_engine_mode mode, int max_batch);
QAT_API void qat_engine_free(qat_engine *e); /* accepts NULL */
/* The int engine's activation arena for one sample, from the runtime's
 * lifetime-based plan (-1 for the float engines). */
QAT_API int64_t qat_engine_peak_activation_bytes(const qat_engine *e);

/* Runs n <= max_batch samples: x is [n, input_shape], RAW floats (uint8
 * pixels as 0..255, features as they are): the program's normalization,
 * if it has one, then the input quantization, exactly the training
 * forward's float32 operations and the fake quantization's rounding
 * (docs/quantization.md, "Normalization"). Without a normalization x is
 * what the model was trained on. logits gets [n, n_outputs] floats;
 * logits_q (int and fake engines; may be NULL) the output integers. */
QAT_API qat_status qat_engine_run(qat_engine *e, const float *x, int64_t n, float *logits, int32_t *logits_q);

/* The same on raw bytes x [n, input numel] (uint8 images, C·H·W per
 * sample). The integer engine maps each byte through a table of 256 input
 * integers per channel, built once when the engine is made
 * (qat_input_table): the integers qat_engine_run computes for the floats
 * (float)b, with no float arithmetic per sample. The float engines run
 * (float)b through qat_engine_run's path. */
QAT_API qat_status qat_engine_run_u8(qat_engine *e, const uint8_t *x, int64_t n, float *logits, int32_t *logits_q);

/* The raw-byte table of qat_engine_run_u8 is qat_input_table, and the
 * raw floats' path qat_input_quantize (qat/runtime.h): the program's own
 * input path, shared with the generated C. */

/* ---- measuring an engine on a data set ------------------------------------------------- */

typedef struct {
    int64_t limit;                 /* the first N samples of the split (0: all) */
    int batch;                     /* samples per qat_engine_run: at most the engine's max_batch (0: 64, or
                                      max_batch when it is less) */
    int32_t *outputs_q;            /* [n, outputs]: every sample's output integers (int, fake), or NULL */
    float *outputs_f;              /* [n, outputs]: every sample's outputs as floats, or NULL */
    void (*progress)(void *user, int64_t done, int64_t total); /* after every batch (may be NULL) */
    void *user;
    double seconds;                /* out: the time spent inside qat_engine_run */
} qat_engine_eval;

/* Runs e (made for q) on split s of d and measures the task (qat/train.h):
 * *out gets the metrics (qat_metrics_free after). An autoencoder's target
 * is its input as the program normalizes it (q->norm), as in training.
 * Errors on ctx. */
QAT_API qat_status qat_engine_evaluate(qat_ctx *ctx, qat_engine *e, const qat_qmodel *q, qat_dataset *d, qat_split s,
                                       const qat_task *task, qat_engine_eval *opt, qat_metrics *out);

#ifdef __cplusplus
}
#endif
#endif
