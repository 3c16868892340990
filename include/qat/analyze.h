/* qat/analyze.h — looking inside a quantized model: what it is made of,
 * and where its quantization loses accuracy.
 *
 * The summary is a row per node — a layer of the model graph, or an op of
 * the integer program (qat/runtime.h) — with its output shape,
 * parameters, multiply-accumulates per sample and quantization, and the
 * totals: parameters, MACs, weight bytes at the trained bit widths and
 * the integer runtime's peak activation memory (its lifetime plan).
 *
 * The analysis runs a prepared, trained model on batches of data, float
 * and fake-quantized side by side (eval mode), and measures each
 * quantization point — the tensors the integer program stores, with the
 * weights of the Linear/Conv that computes each one:
 *   - sqnr_db: the point's tensor in the float forward against the same
 *     tensor with every point quantized (the noise accumulated up to it);
 *   - own_sqnr_db: its quantizer's input against its output, in the
 *     quantized forward (the noise it adds by itself);
 *   - clipped: the fraction of its values clamped at qmin or qmax;
 *   - alone: the model's logits with only this point (and its weights)
 *     quantized, every other point float, against the float logits — as a
 *     share of the noise the fully quantized model has there; and the
 *     same for its weights alone and its activation alone.
 * Points come back ranked, worst (largest share alone) first.
 *
 *     qat_summary s;
 *     qat_model_summary(m, 3, (int64_t[]){1, 28, 28}, ctx, &s);
 *     qat_analysis *a = qat_analysis_new(m, 100, 3, (int64_t[]){1, 28, 28});
 *     for (each batch) qat_analysis_add(a, x, n, labels);   // x: [n, 1, 28, 28] floats
 *     qat_analysis_report r;
 *     qat_analysis_result(a, &r);                            // r.points[0]: the worst
 */
#ifndef QAT_ANALYZE_H
#define QAT_ANALYZE_H

#include "qat/layers.h"
#include "qat/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the summary ------------------------------------------------------------------ */

typedef struct {
    char name[QAT_NAME_LEN];   /* the layer, or the integer op */
    char op[32];               /* its kind: "conv2d", "relu", ...; an integer op with a fused
                                  activation: "conv2d+relu" */
    int rank;                  /* per-sample output shape: [F] or [C, H, W] */
    int64_t shape[3];
    int64_t params;            /* parameters: weights, biases, BatchNorm's gamma and beta */
    int64_t macs;              /* multiply-accumulates per sample (Linear and Conv; 0 elsewhere) */
    /* weight quantization (wbits 0: none) */
    int wbits;
    int waxis;                 /* qat_qtype_axis: -1 per tensor, 0 per output channel, -2 blocks */
    int64_t wblock;            /* blocks: the block size along the input dimension */
    float wscale_min, wscale_max;
    /* the activation quantizer at this node's output (abits 0: none) */
    int abits;
    bool aobserved;            /* false: never observed (an untrained model): scale and range unknown */
    float ascale;
    int32_t azero;
    float amin, amax;          /* the real range it represents: scale·(qmin - zp) .. scale·(qmax - zp) */
    int64_t weight_bytes;      /* storage of its parameters: quantized weights packed at their bit
                                  width plus int32 biases; unquantized parameters 4 bytes each; a
                                  BatchNorm folded into the layer before it 0 */
} qat_summary_row;

typedef struct {
    int n_rows;
    qat_summary_row *rows;          /* in the context the summary was made in */
    int64_t params, macs;           /* per sample */
    int64_t weight_bytes;           /* the rows' sum: at the trained bit widths */
    int64_t float_weight_bytes;     /* every parameter as float32 */
    int64_t peak_activation_bytes;  /* the integer runtime's plan for one sample; -1 when the model
                                       cannot be lowered or planned (a float model, a point never
                                       observed, a custom op, types the runtime does not run) */
    const qat_normalization *normalization; /* the input's (the model's or the program's, valid
                                               while it lives); NULL: none */
} qat_summary;

/* A row per layer of m, the input included, up to the model's output,
 * for inputs of per-sample shape in_shape (rank 1 or 3; NULL: the
 * model's declared shape). A prepared model whose points have all been
 * observed is lowered (in a context of its own) for the memory plan.
 * The rows live in ctx. */
QAT_API qat_status qat_model_summary(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx,
                                     qat_summary *out);

/* A row per tensor-producing step of an integer program: the input, then
 * each op (fused groups are one op, as the device runs them). Parameters
 * are what the program stores (a folded BatchNorm is in the weights and
 * the int32 bias). The rows live in ctx. */
QAT_API qat_status qat_qmodel_summary(const qat_qmodel *q, qat_ctx *ctx, qat_summary *out);

/* ---- the analysis ----------------------------------------------------------------- */

typedef struct {
    int layer;                     /* the layer whose output it quantizes (0: the model input) */
    int anchor;                    /* the layer that starts its fusion group (its weights' owner) */
    char name[QAT_NAME_LEN];       /* layer's name */
    char anchor_name[QAT_NAME_LEN];
    int bits;                      /* the activation's */
    int wbits;                     /* the anchor's weights' (0: no weights) */
    int waxis;                     /* their granularity, as qat_summary_row.waxis */
    double sqnr_db;                /* float vs all quantized at this tensor (INFINITY: no noise) */
    double own_sqnr_db;            /* its quantizer's input vs output, all quantized */
    double clipped_low, clipped_high; /* fractions of its values clamped at qmin, at qmax */
    /* only this point quantized, the others float; logits against the float model's: */
    double alone_share;            /* logit noise (squared error) over the all-quantized model's */
    double alone_weights_share;    /* with only its weights quantized (0 without weights) */
    double alone_activation_share; /* with only its activation quantized */
    double alone_logits_sqnr_db;
    double alone_accuracy;         /* -1 without labels */
} qat_point_report;

typedef struct {
    int64_t samples;
    double accuracy_float, accuracy_quant; /* -1 without labels */
    double logits_sqnr_db;                 /* all quantized vs float */
    int n_points;
    qat_point_report *points;              /* ranked: largest alone_share first */
} qat_analysis_report;

typedef struct qat_analysis qat_analysis;

/* An analysis of m (prepared, every point observed) for batches of up to
 * max_batch samples of per-sample shape in_shape (rank 1 or 3; NULL: the
 * model's declared input shape). Its memory is m's context's
 * (persistent: it goes with the context). NULL on error, with the
 * message on the model's context. */
QAT_API qat_analysis *qat_analysis_new(qat_model *m, int max_batch, int in_rank, const int64_t *in_shape);

/* Adds a batch: x holds n samples of the model's input, contiguous floats
 * ([n, C, H, W] or [n, F]; raw when the model normalizes its input); labels (may be NULL) their classes. Runs the
 * model 2 + 3·(points) times in eval mode with gradients off, resetting
 * the model context's step arena after each run (call it between training
 * steps, not inside one); the model's mode, phase and switches are as
 * they were afterwards. */
QAT_API qat_status qat_analysis_add(qat_analysis *a, const float *x, int64_t n, const int32_t *labels);

/* The figures so far; out->points lives in the analysis (valid until the
 * next call). */
QAT_API qat_status qat_analysis_result(qat_analysis *a, qat_analysis_report *out);

#ifdef __cplusplus
}
#endif
#endif
