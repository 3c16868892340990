/* qat/runtime.h — the integer program, and the device runtime that runs it.
 *
 * The integer program is what lowering produces and every target consumes
 * (the HDF5 quantized file, the engines, generated microcontroller code,
 * ONNX): a table of activation tensors — per-sample shape and quantization
 * — and a list of ops that name their input and output tensors by id and
 * carry their integer weights, biases, fixed-point multipliers, shifts and
 * lookup tables (TFLite's flatbuffer schema, in spirit). Ops run in order;
 * every tensor but the input is the output of exactly one op.
 *
 * The runtime runs a program on storage integers, one byte per element
 * (activations are signed 2..8-bit types), with every tensor at an offset
 * in one arena planned from the tensors' lifetimes (qat_plan_program). It
 * depends on qat/core.h alone: no HDF5, no BLAS, no allocation while
 * running, no float in the integer path. Firmware and tests can link it alone (qat_runtime).
 *
 *     qat_plan plan;
 *     qat_plan_program(q, 64, offsets, &plan, msg, sizeof msg); // offsets: n_tensors + n_ops
 *     // consts, arena, scratch: the plan's sizes, 64-byte aligned
 *     qat_runtime_prepare(q, &plan, consts);
 *     memcpy(arena + plan.offset[q->input], input_integers, n * input_numel);
 *     qat_runtime_run(q, &plan, consts, arena, scratch, n);
 *     int8_t *logits = (int8_t *)arena + plan.offset[q->output];
 */
#ifndef QAT_RUNTIME_H
#define QAT_RUNTIME_H

#include "qat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-tensor quantization of an activation: real = scale·(q - zero_point). */
typedef struct {
    float scale;
    int32_t zero_point;
    int bits;
    bool is_signed;
    int32_t qmin, qmax;
} qat_aparams;

/* An activation tensor of the program. */
typedef struct {
    char name[QAT_NAME_LEN]; /* the graph layer whose output it is; "input" for the model input */
    int rank;                /* per sample: 1 ([F]) or 3 ([C, H, W]) */
    int64_t shape[3];
    qat_aparams q;
} qat_qtensor;

typedef enum {
    QAT_QOP_LINEAR,         /* y = requant(W·(x - zp_in) + b) per output channel */
    QAT_QOP_CONV2D,         /* the same as a convolution (groups, strides, zero padding) */
    QAT_QOP_MAXPOOL2D,      /* on the integers (the max commutes with the affine map) */
    QAT_QOP_AVGPOOL2D,      /* int32 window sum, requantized by s_in / (s_out·kh·kw); or keeps_scale */
    QAT_QOP_FLATTEN,        /* [C, H, W] -> [C·H·W]: the same bytes */
    QAT_QOP_RELU,           /* clamp(x, act_min, act_max): ReLU on the integers */
    QAT_QOP_ADD,            /* TFLite's ADD: each input rescaled to a common scale, int32 add, requantized */
    QAT_QOP_CONCAT,         /* along channels; each input requantized to the output's parameters */
    QAT_QOP_GLOBAL_AVGPOOL, /* [C, H, W] -> [C]: int32 sum over H·W, requantized by s_in / (s_out·H·W);
                               or keeps_scale */
    QAT_QOP_LUT,            /* an element-wise function as a table of output integers */
    QAT_QOP_MUL,            /* TFLite's MUL: (a - zp_a)·(b - zp_b) in int32, requantized by s_a·s_b / s_out;
                               b of a's shape, or [C, 1, 1] over a's [C, H, W] (one factor per channel) */
    QAT_QOP_KIND_COUNT
} qat_qop_kind;

typedef enum { QAT_ACT_NONE, QAT_ACT_RELU, QAT_ACT_RELU6 } qat_act_kind;
/* A lut op's function: a named one the float engines and ONNX compute
 * again (sigmoid, tanh, hard-swish), or QAT_LUT_TABLE, the table alone:
 * an element-wise kind lowers its own function into the table and no
 * target needs to know it (the float engines look the input's integer up
 * in the table, ONNX gathers from it; docs/quantized-model-format.md). */
typedef enum { QAT_LUT_SIGMOID, QAT_LUT_TANH, QAT_LUT_HARDSWISH, QAT_LUT_TABLE, QAT_LUT_FN_COUNT } qat_lut_fn;

QAT_API const char *qat_qop_kind_str(qat_qop_kind k); /* "linear", "conv2d", ... */
QAT_API const char *qat_act_kind_str(qat_act_kind k); /* "none", "relu", "relu6" */
QAT_API const char *qat_lut_fn_str(qat_lut_fn f);     /* "sigmoid", "tanh", "hardswish", "table" */

/* The program's file (docs/quantized-model-format.md; written and read by
 * qat/export.h) and its version, which ONNX's metadata also names. 5: the
 * requantization's rounding (requant_rounding); 4: the
 * input normalization (/normalization); 3 (weights of <= 4 bits packed,
 * quantized_shape, ragged blocks, the MLIR text as bytes, sub-channel
 * integer sums), 2 (tensor table, ops naming tensors) and 1 (a chain of
 * ops) still load, as programs without normalization */
#define QAT_QMODEL_FORMAT "qat-quantized-model"
#define QAT_QMODEL_VERSION 5 /* the newest the reader knows */

/* How every requantizing multiply of a program rounds (version 5's
 * requant_rounding; docs/quantization.md, "Requantization"): the contract's
 * double rounding (gemmlowp's SRDHM, then a rounding right shift:
 * qat_multiply_by_quantized_multiplier), or one rounding of the exact
 * 64-bit product (qat_multiply_by_quantized_multiplier_single). The
 * multipliers and shifts are the same; only the integer arithmetic
 * differs. Files of versions 1 to 4 round twice. */
typedef enum { QAT_ROUNDING_DOUBLE, QAT_ROUNDING_SINGLE, QAT_ROUNDING_COUNT } qat_rounding;
QAT_API const char *qat_rounding_str(qat_rounding r); /* "double", "single" */
/* "double" or "single" to *out; false for anything else. */
QAT_API bool qat_rounding_parse(const char *s, qat_rounding *out);

#define QAT_QOP_MAX_INPUTS 16
#define QAT_QOP_MAX_WINDOW 64        /* largest kernel, stride and padding */
#define QAT_QMODEL_MAX_DIM (1 << 24) /* largest dimension, and element count, of a per-sample shape */
#define QAT_QMODEL_MAX_OPS 4096
#define QAT_ADD_LEFT_SHIFT 20        /* TFLite's, for 8-bit inputs: headroom before the input multipliers */

typedef struct {
    qat_qop_kind kind;
    char name[QAT_NAME_LEN];         /* the layer it comes from ("conv1", "pool2") */
    int n_inputs;
    int inputs[QAT_QOP_MAX_INPUTS];  /* tensor ids */
    int output;                      /* tensor id */
    /* conv2d and the window pools: window, strides, zero padding; conv2d: groups */
    int kh, kw, stride_h, stride_w, pad_h, pad_w, groups;
    /* The final clamp of the output integers: the output's [qmin, qmax],
     * narrowed by a fused ReLU (act_min = zero point) or ReLU6. */
    qat_act_kind act;
    int32_t act_min, act_max;
    /* linear, conv2d: the weight [O, I] or [O, C/groups, kh, kw]
     * (qat_qop_weight_shape) and its type wq, on that shape or, for a conv
     * quantized along its flattened input, on the matrix [O, C/groups·kh·kw]
     * (the same elements in the same order); the int32 bias at bias_scale[o]:
     * s_in·s_w[o], or the row's accumulation scale for sub-channel weights */
    qat_qtype wq;
    int32_t *weight, *bias;
    float *bias_scale;
    /* Fixed-point multipliers and shifts: linear/conv2d one per output
     * channel (M = s_in·s_w[o]/s_out; sub-channel: bias_scale[o]/s_out, the
     * reduction seed's output_conversion); avgpool, global avgpool [1];
     * add [3] (input 0, input 1, output); concat one per input. */
    int n_mult;
    int32_t *multiplier, *shift;
    /* avgpool2d, global_avgpool: the op keeps its input's quantization
     * (TFLite's int8 rule; QAT's pool_keeps_scale). Its output tensor has
     * exactly the input's qat_aparams, it has no multiplier (n_mult 0), and
     * each window's output is, over the raw integers x (not x - zp) at the
     * window's n positions inside the input (global_avgpool: all H·W;
     * padding is skipped, never counted):
     *     acc = Σ x;  acc = acc > 0 ? (acc + n/2) / n : (acc - n/2) / n
     * (C's division, truncating: half away from zero), clamped to
     * [act_min, act_max] (the input's [qmin, qmax] when lowered). */
    bool keeps_scale;
    /* Sub-channel linear/conv2d (qat_qop_subchannel; docs/subchannel.md):
     * one per weight block, in the order of wq's scales, taking the block's
     * int32 partial sum at s_in·s_w[block] to the row's accumulation scale
     * bias_scale[o] (the reduction seed's input_conversion). NULL otherwise. */
    int32_t *block_multiplier, *block_shift;
    /* Compact block scales (docs/subchannel.md, "Compact block scales"): a
     * sub-channel op whose block scales are wq.scale[p] = row_scale[p / J] ·
     * subscale[p] exactly (J = wq.nparams / wq.pshape[0] blocks a parameter
     * row), zero points 0, sub_bits in 4..8 and subscale[p] in
     * [1, 2^sub_bits - 1]. The row's accumulation scale is bias_scale[o] =
     * s_in·row_scale, each block's partial sum P_j is taken there by the
     * exact integer product P_j·subscale[p] (no block multipliers: NULL),
     * and multiplier/shift are those of s_in·row_scale/s_out. 0 and NULL
     * for every other op. */
    int sub_bits;
    float *row_scale;   /* [wq.pshape[0]] */
    int32_t *subscale;  /* [wq.nparams] */
    int left_shift;                  /* add: QAT_ADD_LEFT_SHIFT */
    /* lut: table[q - in.qmin] is the output integer for input integer q */
    qat_lut_fn lut;
    int32_t *table;
    int table_len;
} qat_qop;

typedef struct {
    int n_tensors, n_ops;
    qat_qtensor *tensors;
    qat_qop *ops;
    int input, output;   /* tensor ids: the model input, the logits */
    int version;         /* the file format version it was read from; 0 when lowered in memory */
    char producer[64];
    const char *config;  /* training configuration (free text, JSON from the qat tool); never NULL once made */
    /* The model's input normalization (qat/core.h): the targets take raw
     * inputs and normalize them before the input quantization (the host
     * engines, qat/infer.h; the generated C; ONNX). NULL: none, the input
     * quantization takes the inputs as they are. The runtime itself never
     * reads it: it starts from the input integers. */
    const qat_normalization *norm;
    /* The requantization's rounding, for every op (QAT_ROUNDING_DOUBLE: 0,
     * what a zeroed program has). */
    qat_rounding rounding;
} qat_qmodel;

/* The version a program is written as: 5 when it rounds once, else 4, so
 * that every double-rounding file stays what it was and a reader that
 * predates version 5 refuses a single-rounding file instead of running it
 * with the other arithmetic. */
QAT_API int qat_qmodel_file_version(const qat_qmodel *q);

/* Elements of a tensor per sample. */
QAT_API int64_t qat_qtensor_numel(const qat_qtensor *t);

/* A linear/conv2d op whose weight has more than one scale along the
 * reduction: blocks along the input (sub-channel), or a type that is
 * neither per-tensor nor per output channel. Its sums run block by block
 * (docs/subchannel.md). */
QAT_API bool qat_qop_subchannel(const qat_qop *op);
/* Whether every weight of a linear/conv2d op minus its zero point fits
 * int8 (the kernels that hold weights as int8: the runtime's byte paths,
 * the generated C); out (may be NULL) gets those differences. */
QAT_API bool qat_qop_int8_weights(const qat_qop *op, int8_t *out);
/* The weight's own shape: [O, I] for linear, [O, C/groups, kh, kw] for
 * conv2d (C: the input's channels). Returns the rank; 0 for other ops. */
QAT_API int qat_qop_weight_shape(const qat_qmodel *q, const qat_qop *op, int64_t *shape);

/* The output shape an op computes from its inputs' shapes (rank and
 * shape of the output tensor). QAT_ERR_SHAPE if the inputs do not fit the
 * op; the message goes into msg (len bytes). */
QAT_API qat_status qat_qop_output_shape(const qat_qmodel *q, const qat_qop *op, int *rank, int64_t *shape,
                                        char *msg, size_t len);

/* Checks every quantity of a program: storage ranges inside their bit
 * width, scales positive normal floats, zero points and integers in their
 * ranges, multipliers in [2^30, 2^31) (or 0) with shifts in [-31, 30],
 * the normalization (qat_normalization_check against the input's shape),
 * weight blocks (1 <= block <= dim, ceil(dim / block) scales along each
 * dimension), and for sub-channel weights the accumulation bounds of
 * docs/subchannel.md (no int32 partial sum, conversion or sum can
 * overflow, for any input),
 * every tensor id in range and defined before it is read (no dangling id,
 * no cycle), every shape following from its op, tables of the right
 * length, the output a vector of logits, and every op's and tensor's name
 * following qat_name_valid's rule (names from a file reach messages and
 * generated source). QAT_ERR_FORMAT (or _SHAPE) with a
 * message naming the op and the quantity in msg. The loader runs it on
 * what it read, and export before it writes. */
QAT_API qat_status qat_qmodel_check(const qat_qmodel *q, char *msg, size_t len);

/* ---- the input path ----------------------------------------------------------
 * Raw samples to the program's input integers, as every target computes
 * them (the host engines, qat/infer.h; the generated C; ONNX's graph): the
 * program's normalization (if any), each operation in float32, then the
 * input quantization clamp(round_half_even(x·(1/scale)) + zp, qmin, qmax),
 * the product in float32, NaN to zp (docs/quantization.md,
 * "Normalization"). Float at the edge of the program (no libm); the
 * runtime itself starts from the integers. */

/* Raw float samples x [n, input numel] to the input integers out [n, input numel]. */
QAT_API void qat_input_quantize(const qat_qmodel *q, const float *x, int64_t n, int8_t *out);

/* The raw-byte table: table[c·256 + b] (c < qat_input_table_channels(q):
 * the normalization's channels, 1 without one) is the input integer of
 * byte b in channel c, computed by qat_input_quantize's element function
 * on the float (float)b, so the two agree by construction. The channel of
 * element i of a [C, H, W] sample is i / (H·W) (always 0 with one
 * channel). QAT_ERR_ARG for a NULL argument, QAT_ERR_UNSUPPORTED for an
 * input whose storage range is wider than int8. */
QAT_API int qat_input_table_channels(const qat_qmodel *q);
QAT_API qat_status qat_input_table(const qat_qmodel *q, int8_t *table);

/* Raw byte samples x [n, input numel] through a table made by qat_input_table. */
QAT_API void qat_input_lookup(const qat_qmodel *q, const int8_t *table, const uint8_t *x, int64_t n, int8_t *out);

/* ---- the runtime ------------------------------------------------------------ */

/* The memory plan: each tensor's byte offset in one arena, for batches
 * of up to max_batch samples (a tensor of n elements per sample takes
 * n·max_batch bytes, samples one after another). Tensors whose lifetimes
 * do not overlap share bytes; flatten is a view of its input, and ReLU,
 * lookup tables and add write over an input that dies there. Each op's
 * constants in the layout its kernel reads (weights minus their zero
 * points, padded for the GEMM; tables as bytes) go in a second buffer,
 * filled once by qat_runtime_prepare. */
typedef struct {
    int max_batch;
    int64_t *offset;               /* [n_tensors]: byte offset in the arena */
    int64_t *const_offset;         /* [n_ops]: byte offset in the constants */
    int64_t arena_bytes;           /* activations, for max_batch samples */
    int64_t const_bytes;           /* the ops' prepared constants */
    int64_t scratch_bytes;         /* working memory of the kernels (padding, im2col) */
    int64_t peak_activation_bytes; /* the arena for one sample: the figure to quote */
} qat_plan;

/* Plans q for max_batch samples. offsets: the caller's array of
 * n_tensors + n_ops entries (tensors first). The program must pass
 * qat_qmodel_check; the runtime runs signed activations of 2..8 bits and
 * weights of at most 8 bits, per-tensor, per-channel or sub-channel
 * (block conversions, docs/subchannel.md): QAT_ERR_UNSUPPORTED with the
 * reason in msg otherwise. The planner itself
 * allocates working memory (it runs once, at setup). */
QAT_API qat_status qat_plan_program(const qat_qmodel *q, int max_batch, int64_t *offsets, qat_plan *plan,
                                    char *msg, size_t len);

/* qat_plan_program with flags: QAT_PLAN_INPUT_OUTSIDE plans for a caller
 * that keeps the input in its own memory and lets the ops read it there
 * (the generated C): the input takes no arena bytes (a view of it, a
 * flatten, still gets its own copy). */
#define QAT_PLAN_INPUT_OUTSIDE 1u
/* QAT_PLAN_SMALL: the generated C's small-RAM plan, for a caller whose
 * kernels can (docs/codegen.md, "RAM"): depthwise and pointwise
 * convolutions with byte weights write over their input, and a
 * convolution followed by a max pool of disjoint windows (its only
 * reader) is one step whose convolution output takes no bytes. */
#define QAT_PLAN_SMALL 2u
QAT_API qat_status qat_plan_program_flags(const qat_qmodel *q, int max_batch, unsigned flags, int64_t *offsets,
                                          qat_plan *plan, char *msg, size_t len);

/* Fills consts (plan->const_bytes, 64-byte aligned) from q's integers. */
QAT_API void qat_runtime_prepare(const qat_qmodel *q, const qat_plan *plan, void *consts);

/* Runs n <= plan->max_batch samples. The input integers must be at
 * arena + offset[input] ([n][input numel] int8), the output integers are
 * at arena + offset[output] afterwards. arena and scratch: the plan's
 * sizes, 64-byte aligned. QAT_ERR_ARG for a bad n. */
QAT_API qat_status qat_runtime_run(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena,
                                   void *scratch, int64_t n);

/* The integer GEMM kernel the runtime picked for this CPU
 * ("AVX-512 VNNI", "AVX2" or "portable C"). */
QAT_API const char *qat_runtime_kernel(void);

#ifdef __cplusplus
}
#endif
#endif
