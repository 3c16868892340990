/* qat/layers.h — the model: a graph of named layers, and the QAT pass.
 *
 * A model is a directed acyclic graph. Layer 0 is the model's input; every
 * other layer has a kind, hyperparameters, its parameters (views into the
 * model's flat blocks) and the ids of the layers whose outputs it takes.
 * Build it with the qat_layer_* functions, which take input ids and return
 * the new layer's id (-1 on error, the message on the context):
 *
 *     qat_model *m = qat_model_new(ctx);
 *     int x = qat_model_input(m);
 *     int c = qat_layer_conv2d(m, "conv1", x, &(qat_conv2d_spec){.in = 1, .out = 16,
 *                              .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1});
 *     int r = qat_layer_relu(m, NULL, c);
 *     int a = qat_layer_add(m, NULL, r, c2);                   // a residual
 *     qat_model_build(m, seed);                                // one flat block of parameters
 *     qat_tensor *logits = qat_model_forward(m, x_batch);      // a step's graph
 *
 * or with the sequential sugar (qat_model_add_*), which feeds each new
 * layer the previous layer's output, or from a model file
 * (qat_model_from_file; the format is docs/model-format.md). The output is
 * the last layer added unless qat_model_set_output says otherwise.
 *
 * Names are PyTorch's: a layer is "<stem><k>" (conv1, fc2, bn1, ...) unless
 * given one, and its tensors are "<layer>.weight", ".bias",
 * ".running_mean", ".running_var". Parameters, their gradients and LSQ's
 * learned scales are flat blocks (llm.c's layout), so the optimizer step
 * and zero_grad are one loop each. */
#ifndef QAT_LAYERS_H
#define QAT_LAYERS_H

#include "qat/autograd.h"
#include "qat/fakequant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    QAT_LAYER_INPUT,
    QAT_LAYER_LINEAR,
    QAT_LAYER_CONV2D,         /* groups, non-square kernels, strides, padding */
    QAT_LAYER_BATCHNORM,      /* 1d on [N, C], 2d on [N, C, H, W] */
    QAT_LAYER_RELU,
    QAT_LAYER_RELU6,
    QAT_LAYER_MAXPOOL2D,
    QAT_LAYER_AVGPOOL2D,
    QAT_LAYER_GLOBAL_AVGPOOL, /* [N, C, H, W] -> [N, C] */
    QAT_LAYER_FLATTEN,
    QAT_LAYER_DROPOUT,
    QAT_LAYER_ADD,            /* two inputs of one shape */
    QAT_LAYER_CONCAT,         /* along channels */
    QAT_LAYER_SIGMOID,
    QAT_LAYER_TANH,
    QAT_LAYER_HARDSWISH,
    QAT_LAYER_CUSTOM,         /* a qat_custom_op: trains; has no integer form */
    QAT_LAYER_LEAKY_RELU,     /* x > 0 ? x : negative_slope·x */
    QAT_LAYER_MUL,            /* a·b: one shape, or b [C, 1, 1] over a [C, H, W] */
    QAT_LAYER_HARDSIGMOID,    /* min(max(x + 3, 0), 6) / 6 */
    QAT_LAYER_KIND_COUNT
} qat_layer_kind;

QAT_API const char *qat_layer_kind_str(qat_layer_kind kind); /* "linear", "conv2d", ... */
/* The kind named `name` (as qat_layer_kind_str spells it); KIND_COUNT if none. */
QAT_API qat_layer_kind qat_layer_kind_from_str(const char *name);

typedef struct qat_model qat_model; /* opaque: use the functions below */

/* A convolution: channels, kernel, strides, zero padding, groups (1 or 0:
 * dense; in: depthwise). The weight is [out, in/groups, kh, kw]. */
typedef struct {
    int in, out;
    int kh, kw;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int groups;
    bool bias;
} qat_conv2d_spec;
/* A square convolution: k x k, the same stride and padding on both axes. */
QAT_API qat_conv2d_spec qat_conv2d_square(int in, int out, int k, int stride, int pad, bool bias);

/* A pooling window; stride 0 means the window's size, as PyTorch. */
typedef struct {
    int kh, kw;
    int stride_h, stride_w;
    int pad_h, pad_w;
} qat_pool2d_spec;

/* ---- building ------------------------------------------------------------------ */

QAT_API qat_model *qat_model_new(qat_ctx *ctx); /* in ctx's persistent memory; holds layer 0, the input */
QAT_API int qat_model_input(const qat_model *m); /* 0 */
/* The per-sample input shape ([C, H, W] or [F]): model files declare it;
 * the export and the shape checks use it. */
QAT_API qat_status qat_model_set_input_shape(qat_model *m, int rank, const int64_t *shape);
/* Its rank (0: not declared) and shape. */
QAT_API int qat_model_input_shape(const qat_model *m, int64_t *shape);

/* Normalization belongs to the model: raw samples (uint8 pixels as
 * floats 0..255, float features as they are) go in, and the forward
 * first computes, per element of channel c, in float32 with each
 * operation rounded:
 *     x' = ((x / divisor) - mean[c]) / std[c]
 * then the input's fake quantization. Channels are axis 0 of a [C, H, W]
 * input; a rank-1 input is one channel. The checkpoint, the quantized
 * file and every target (the integer engine, the generated C, ONNX)
 * carry it and take raw inputs; for uint8 inputs the integer targets map
 * each raw byte through a table of 256 input integers per channel,
 * exactly these formulas followed by the input quantization
 * (docs/quantization.md, "Normalization"). The type, qat_normalization,
 * is in qat/core.h (the integer program carries it too).
 * channels 0: none (the default; inputs are used as they are). */
/* Sets (or with NULL or channels 0, removes) the model's normalization
 * (a copy); QAT_ERR_ARG for a divisor or std that is not a positive
 * normal float, a non-finite mean, or channels that do not fit the
 * declared input shape (qat_normalization_check). Before or after
 * qat_model_build and qat_prepare; a checkpoint carries it. */
QAT_API qat_status qat_model_set_normalization(qat_model *m, const qat_normalization *norm);
/* The model's normalization, NULL when it has none. */
QAT_API const qat_normalization *qat_model_normalization(const qat_model *m);
/* The forward's first op, for callers that normalize outside a model (the
 * float engines): x [N, C, H, W] (C = norm->channels, or any C when it is
 * 1) or [N, F] (norm->channels 1), contiguous; a new step tensor, each
 * element ((x / divisor) - mean[c]) / std[c] in float32. The backward
 * passes dy / std[c] / divisor. NULL norm (or channels 0): x itself. */
QAT_API qat_tensor *qat_normalize(qat_ctx *ctx, qat_tensor *x, const qat_normalization *norm);
/* y = n's normalization of `count` raw samples x of numel elements each
 * (the formula above, its operations in that order); a copy when n is
 * NULL or has no channels. numel must be a multiple of n->channels. */
QAT_API void qat_normalize_samples(const qat_normalization *n, int64_t numel, const float *x, float *y, int64_t count);

/* Each returns the new layer's id, or -1 (bad sizes, an input id that does
 * not exist, a name clash, the model already built). name may be NULL for
 * the default. */
QAT_API int qat_layer_linear(qat_model *m, const char *name, int x, int in, int out, bool bias);
QAT_API int qat_layer_conv2d(qat_model *m, const char *name, int x, const qat_conv2d_spec *spec);
QAT_API int qat_layer_batchnorm(qat_model *m, const char *name, int x, int channels, float momentum, float eps);
QAT_API int qat_layer_relu(qat_model *m, const char *name, int x);
QAT_API int qat_layer_relu6(qat_model *m, const char *name, int x);
QAT_API int qat_layer_maxpool2d(qat_model *m, const char *name, int x, const qat_pool2d_spec *spec);
QAT_API int qat_layer_avgpool2d(qat_model *m, const char *name, int x, const qat_pool2d_spec *spec);
QAT_API int qat_layer_global_avgpool(qat_model *m, const char *name, int x);
QAT_API int qat_layer_flatten(qat_model *m, const char *name, int x);
QAT_API int qat_layer_dropout(qat_model *m, const char *name, int x, float p);
QAT_API int qat_layer_add(qat_model *m, const char *name, int a, int b);
QAT_API int qat_layer_concat(qat_model *m, const char *name, int n, const int *xs);
QAT_API int qat_layer_sigmoid(qat_model *m, const char *name, int x);
QAT_API int qat_layer_tanh(qat_model *m, const char *name, int x);
QAT_API int qat_layer_hardswish(qat_model *m, const char *name, int x);
/* x > 0 ? x : negative_slope·x (PyTorch's LeakyReLU; its default slope is
 * 0.01); negative_slope in [0, 1]. */
QAT_API int qat_layer_leaky_relu(qat_model *m, const char *name, int x, float negative_slope);
/* min(max(x + 3, 0), 6) / 6 (PyTorch's Hardsigmoid: MobileNetV3's gate). */
QAT_API int qat_layer_hardsigmoid(qat_model *m, const char *name, int x);
/* a·b element by element: b of a's shape, or [C, 1, 1] over a's [C, H, W]
 * (a gate per channel: squeeze-and-excitation). */
QAT_API int qat_layer_mul(qat_model *m, const char *name, int a, int b);
/* A custom differentiable op (qat/autograd.h) as a layer: it trains and
 * checkpoints like the others (rebuilding it from a file needs the same op:
 * qat_checkpoint_model refuses it), and lowering to integers refuses it,
 * naming it. op and user must outlive the model. */
QAT_API int qat_layer_custom(qat_model *m, const char *name, const qat_custom_op *op, void *user, int n,
                             const int *xs);
/* The layer whose output the model returns (default: the last one added). */
QAT_API qat_status qat_model_set_output(qat_model *m, int id);

/* Sequential sugar: each adds a layer fed by the last one added. */
QAT_API qat_status qat_model_add_linear(qat_model *m, const char *name, int in, int out, bool bias);
QAT_API qat_status qat_model_add_conv2d(qat_model *m, const char *name, int in_ch, int out_ch,
                                        int kernel, int stride, int pad, bool bias);
QAT_API qat_status qat_model_add_batchnorm(qat_model *m, const char *name, int channels,
                                           float momentum, float eps);
QAT_API qat_status qat_model_add_relu(qat_model *m);
QAT_API qat_status qat_model_add_relu6(qat_model *m);
QAT_API qat_status qat_model_add_maxpool2d(qat_model *m, int kernel, int stride);
QAT_API qat_status qat_model_add_avgpool2d(qat_model *m, int kernel, int stride);
QAT_API qat_status qat_model_add_flatten(qat_model *m);
QAT_API qat_status qat_model_add_dropout(qat_model *m, float p);

/* ---- limits: what a model may demand ---------------------------------------------
 * A model file or a training checkpoint is a few bytes that declare sizes.
 * Each of their fields has its own range; these limits bound the totals,
 * so that an 85-byte file cannot make qat allocate gigabytes or run for
 * minutes: the parameters (with BatchNorm's buffers) of the whole model,
 * the float32 bytes of every layer's output for one sample (what a
 * training step keeps per sample: multiply by the batch), and the number
 * of layers. They are checked as layers are added (the layer count, the
 * parameters), as each line of a model file is read (the outputs so far),
 * and by qat_model_build before it allocates, with a message that says
 * the size, the limit and how to raise it. A new model has the defaults; a
 * caller whose model is bigger raises them with qat_model_set_limits
 * before adding layers (qat: --max-params, --max-activation-bytes,
 * --max-layers). */
typedef struct {
    int64_t max_params;           /* floats: parameters and buffers */
    int64_t max_activation_bytes; /* float32 outputs of every layer, one sample */
    int64_t max_layers;           /* layers, the input included */
} qat_model_limits;

/* 2^26 floats: 256 MiB of parameters, about 1 GiB with their gradients
 * and Adam's two moments; 64 MiB of layer outputs a sample (4 GiB for a
 * batch of 64); as many layers as an integer program may have ops. The
 * reference models (the models directory) need at most 0.24 M parameters (the
 * MLP), 1.4 MiB a sample (DS-CNN) and 84 layers (MobileNet). */
#define QAT_MODEL_MAX_PARAMS ((int64_t)1 << 26)
#define QAT_MODEL_MAX_ACTIVATION_BYTES ((int64_t)1 << 26)
#define QAT_MODEL_MAX_LAYERS 4096

QAT_API qat_model_limits qat_model_limits_default(void);
/* Sets m's limits (a field <= 0 keeps its default) while m has only its
 * input; QAT_ERR_STATE after layers were added. */
QAT_API qat_status qat_model_set_limits(qat_model *m, const qat_model_limits *limits);
QAT_API qat_model_limits qat_model_get_limits(const qat_model *m);

/* Adds the layers described by a model file (docs/model-format.md) to a
 * model that has only its input; errors name the file, line and field.
 * The file must be a regular file of at most 1 MiB: a directory, a FIFO
 * or a device is refused at once, before any read (a FIFO would block).
 * qat_model_from_text does the same for text in memory (origin names it
 * in messages); qat_model_file_text reads a file's text with the same
 * checks (the caller frees *text). */
QAT_API qat_status qat_model_from_file(qat_model *m, const char *path);
QAT_API qat_status qat_model_from_text(qat_model *m, const char *text, const char *origin);
QAT_API qat_status qat_model_file_text(qat_ctx *ctx, const char *path, char **text, size_t *len);
/* The model as model-file text: the input line, a line per layer (the
 * keys its kind takes, defaults left out) and an output line when the
 * output is not the last layer; qat_model_from_text reads it back into
 * the same graph (kinds, names, inputs, hyperparameters). Writes at most
 * cap bytes of it into buf (NUL-terminated when cap > 0; buf may be NULL
 * with cap 0) and returns its whole length, as snprintf; -1 (the message
 * on the context) when the model declares no input shape or has a layer
 * model files cannot declare (a custom op). */
QAT_API int64_t qat_model_to_text(const qat_model *m, char *buf, size_t cap);

/* Allocates the flat blocks and initialises: weights Kaiming-uniform with
 * a = sqrt(5) (bound 1/sqrt(fan_in)), biases U(-1/sqrt(fan_in), +), batchnorm
 * weight 1, bias 0, running mean 0, var 1 — PyTorch's defaults, layer by
 * layer in id order. The same seed gives bit-identical parameters. Checks
 * that the graph's shapes fit when the input shape is declared. */
QAT_API qat_status qat_model_build(qat_model *m, uint64_t seed);

/* ---- running -------------------------------------------------------------------- */

QAT_API void qat_model_train(qat_model *m, bool training); /* batch statistics, dropout on */
QAT_API bool qat_model_training(const qat_model *m);
QAT_API void qat_model_zero_grad(qat_model *m); /* parameters and LSQ scales */

/* Runs the graph on x (a step tensor: [N, C, H, W] or [N, F]) and returns
 * the output layer's value. NULL on error; the message names the layer. */
QAT_API qat_tensor *qat_model_forward(qat_model *m, qat_tensor *x);

/* ---- looking inside ------------------------------------------------------------------ */

QAT_API qat_ctx *qat_model_ctx(const qat_model *m);
QAT_API int qat_model_n_layers(const qat_model *m);
QAT_API int qat_model_output(const qat_model *m);
QAT_API int qat_model_find_layer(const qat_model *m, const char *name); /* id or -1 */
QAT_API const char *qat_model_layer_name(const qat_model *m, int id);
QAT_API qat_layer_kind qat_model_layer_kind(const qat_model *m, int id);
/* The ids of layer id's inputs (*ids valid while the model lives). */
QAT_API int qat_model_layer_inputs(const qat_model *m, int id, const int **ids);
/* A parameter or buffer by name ("conv1.weight", "bn1.running_var"). */
QAT_API qat_tensor *qat_model_find_param(qat_model *m, const char *name);
/* The flat blocks: parameters and their gradients [n_params]; LSQ's learned
 * scales and their gradients [n_qparams] (0 without LSQ). */
QAT_API int64_t qat_model_n_params(const qat_model *m);
QAT_API float *qat_model_params(qat_model *m);
QAT_API float *qat_model_grads(qat_model *m);
QAT_API int64_t qat_model_n_qparams(const qat_model *m);
QAT_API float *qat_model_qparams(qat_model *m);
QAT_API float *qat_model_qgrads(qat_model *m);
/* The model's whole training state as bytes: parameters, buffers
 * (BatchNorm's running statistics), LSQ scales, the dropout RNG, the mode
 * flags, the input normalization (when set), and every activation
 * quantizer's observer and quantization parameters (in an unspecified
 * layout; weight quantizers' scales are derived from these at every
 * forward), for comparing models bit for bit — e.g. the processes of a
 * data-parallel job, or a model and the one its checkpoint rebuilds. Returns the bytes needed; writes them
 * only when cap is enough. */
QAT_API size_t qat_model_state_bytes(const qat_model *m, void *buf, size_t cap);
/* Data parallelism: the batches this process forwards are the samples
 * [first, first + n) of global batches of `global` samples (the others
 * run elsewhere). Dropout then draws the masks of the whole global batch
 * and keeps this slice's, so the dropout RNG stays the same on every
 * process, and the masks are the ones one process would draw for the
 * global batch. global = 0 (the default): a batch is the whole batch.
 * QAT_ERR_ARG for first < 0 or first > global. */
QAT_API qat_status qat_model_set_batch_slice(qat_model *m, int64_t first, int64_t global);
/* Per-sample output shapes of every layer for an input of the given
 * shape: ranks[id] (1 or 3) and shapes[id][0..2]. Errors name the layer
 * whose shapes do not fit. */
QAT_API qat_status qat_model_shapes(const qat_model *m, int in_rank, const int64_t *in_shape, int *ranks,
                                    int64_t (*shapes)[3]);

/* ---- quantization-aware training ------------------------------------------------------- */

/* Weight granularity (docs/quantization.md, "Granularity of weights"):
 *   QAT_GRAN_TENSOR   one scale for the whole weight;
 *   QAT_GRAN_CHANNEL  one per output channel (LiteRT's default);
 *   QAT_GRAN_BLOCK    per output channel, in blocks of `block` along the
 *                     reduction: a Linear's input features, a Conv's
 *                     flattened C/groups·kh·kw inputs (the weight's type
 *                     is then on its [O, C/groups·kh·kw] matrix). A block
 *                     larger than a row is the whole row;
 *   QAT_GRAN_AXES     the sub-channel seed's {axis:block, ...}: a block
 *                     size per dimension of the weight itself ([O, I] or
 *                     [O, C/groups, kh, kw]; 0 = whole). */
typedef enum { QAT_GRAN_TENSOR, QAT_GRAN_CHANNEL, QAT_GRAN_BLOCK, QAT_GRAN_AXES } qat_granularity;
#define QAT_MAX_BLOCK (1 << 24) /* the largest block size a configuration may ask for */

typedef struct {
    int wbits;                 /* weights: signed, symmetric (default 8) */
    bool w_narrow;             /* [-(2^(b-1)-1), 2^(b-1)-1] (default, LiteRT) */
    qat_granularity wgran;     /* default per output channel */
    int block;                 /* QAT_GRAN_BLOCK: block size along the reduction */
    int64_t blocks[QAT_MAX_RANK]; /* QAT_GRAN_AXES: block size per weight dimension, 0 = whole */
    bool ragged;               /* a block size need not divide its dimension: the last block is
                                  shorter (default off: the seed's dim % block == 0 is checked) */
    int block_scale_bits;      /* sub-channel weights' block scales: 0 (default) each block its own
                                  float32 scale; 4..8 compact, a float32 scale per row times an
                                  unsigned sub-scale of this many bits per block, derived from the
                                  block ranges (qat_qtype_compact_scales; docs/subchannel.md). Needs
                                  QAT_GRAN_BLOCK or _AXES, wbits <= 8, and no LSQ */
    int abits;                 /* activations: signed, asymmetric by default (default 8) */
    bool a_symmetric;
    qat_observer_kind aobs;    /* default EMA */
    int window;                /* window observers (default 16) */
    float k;                   /* EMA factor (default 0.9) */
    qat_ste ste;
    int io_bits;               /* the model input and the final output (logits): default 8 */
    bool lsq;                  /* learn the weight scales (LSQ) instead of min-max per step */
    bool fold_bn;              /* fold a following BatchNorm into Linear/Conv (default on) */
    bool pool_keeps_scale;     /* average pools keep their input's quantization (TFLite's int8 rule): no
                                  activation quantizer of their own; the integer op divides the window sum
                                  rounding half away from zero (default off: they requantize) */
} qat_prepare_config;

QAT_API qat_prepare_config qat_prepare_defaults(void);
/* Is c a configuration qat_prepare takes (bit widths 2..16, a known
 * granularity and block sizes, compact block scales' conditions)? QAT_OK,
 * or QAT_ERR_ARG with the reason on ctx. qat_prepare checks it too. */
QAT_API qat_status qat_prepare_check(qat_ctx *ctx, const qat_prepare_config *c);

/* Inserts fake quantization into the model's forward pass: on the input,
 * on every Linear/Conv weight (recomputed from the current weights at every
 * forward: the dynamic strategy, or learned with LSQ), and on the
 * activation wherever the integer program requantizes — after each fusion
 * group (Linear/Conv [+ BatchNorm folded in] [+ ReLU/ReLU6], Add [+
 * ReLU/ReLU6]), after average and global average pooling, concatenation,
 * sigmoid, tanh, hard-swish and custom layers. The groups are found by one
 * matcher, which lowering uses too; a layer whose output feeds two
 * consumers is never fused with either. Works on a freshly built model and
 * on a float-trained one. With pool_keeps_scale, average and global
 * average pooling get no quantizer: their output is fake-quantized on the
 * grid of the quantizer that holds their input (found through max
 * pooling, flatten, dropout and a lone ReLU), which only its owner
 * observes; an average pool with padding is then refused (its float
 * forward counts the padding in the divisor, the integer rule does not). */
QAT_API qat_status qat_prepare(qat_model *m, const qat_prepare_config *cfg);
/* Re-configures one layer's quantizers — its weights' and its group's
 * activation point's — with its own configuration (every field honoured,
 * fold_bn and ste included). All or nothing: on error the model is as it
 * was. The activation quantizer starts afresh when its configuration
 * (abits, io_bits, symmetry, observer, window, k, ste) or its place
 * changes; otherwise it keeps its observed range, so re-configuring only
 * a layer's weights (its bits, its granularity) measures their effect
 * alone. */
QAT_API qat_status qat_prepare_layer(qat_model *m, const char *layer, const qat_prepare_config *cfg);
QAT_API bool qat_model_prepared(const qat_model *m);

/* A layer's own precision, given before qat_prepare (a model file's
 * wbits=, abits= and granularity= keys, docs/model-format.md): qat_prepare
 * quantizes that layer with the global configuration and these fields
 * over it. 0 (or has_granularity false) keeps the global value. */
typedef struct {
    int wbits;               /* 2..16: the weight's bits (linear, conv2d) */
    int abits;               /* 2..16: the activation after the layer's group (a layer that requantizes) */
    bool has_granularity;
    qat_granularity granularity; /* QAT_GRAN_TENSOR, _CHANNEL or _BLOCK (linear, conv2d) */
    int block;               /* QAT_GRAN_BLOCK: the block size along the flattened input, >= 1 */
} qat_layer_precision;
/* Sets (p NULL: clears) layer's own precision. QAT_ERR_ARG, naming the
 * layer and the field: an unknown layer, a field out of range, weight
 * fields on a layer without weights, abits on a layer whose output keeps
 * its input's quantization (a ReLU, a max pool: put it on the layer whose
 * group quantizes it). QAT_ERR_STATE once the model is prepared (then
 * qat_prepare_layer re-configures a layer). */
QAT_API qat_status qat_model_set_layer_precision(qat_model *m, const char *layer, const qat_layer_precision *p);
/* Layer's own precision (all zero when it has none); false for an
 * unknown layer. */
QAT_API bool qat_model_layer_precision(const qat_model *m, const char *layer, qat_layer_precision *out);
/* The configuration a layer was prepared with (layer NULL: the global
 * one); NULL for a float model or a layer without quantizers. */
QAT_API const qat_prepare_config *qat_model_qat_config(const qat_model *m, const char *layer);
/* The narrowest and widest weight bits of the prepared model's Linear
 * and Conv layers (a model file may set a layer's own), or the global
 * configuration's where there are none; 0 and 0 for a float model. */
QAT_API void qat_model_weight_bits(const qat_model *m, int *lo, int *hi);
/* Bits of the weights of every quantized Linear/Conv and their count. */
QAT_API int64_t qat_model_n_quantized_weights(const qat_model *m);

/* The phases of a QAT run. Fake quantization off: a float forward
 * (warm-up, or the float accuracy of the same weights). Observers frozen:
 * activation ranges stop moving. BatchNorm frozen: folded BatchNorms use
 * their running statistics and stop updating them. */
QAT_API void qat_model_set_fake_quant(qat_model *m, bool on);
QAT_API void qat_model_freeze_observers(qat_model *m, bool frozen);
QAT_API void qat_model_freeze_bn(qat_model *m, bool frozen);
QAT_API bool qat_model_fake_quant_on(const qat_model *m);
QAT_API bool qat_model_observers_frozen(const qat_model *m);
QAT_API bool qat_model_bn_frozen(const qat_model *m);

/* ---- quantization points: looking at them, switching them one by one ------------------ */

/* The layers whose output qat_prepare(m, cfg) quantizes (or has
 * quantized), in id order, the input (0) first: the tensors the integer
 * program stores with a quantization of their own (an average pool
 * prepared with pool_keeps_scale is not one: it has its input's). Works
 * before qat_prepare too (a training log names its columns before the
 * float epochs end) and changes nothing. Writes up to cap ids and returns
 * how many there are; cfg NULL: the defaults. */
QAT_API int qat_prepare_points(const qat_model *m, const qat_prepare_config *cfg, int *ids, int cap);

/* The activation quantizer at layer id's output (id 0: the model input),
 * as the forward applies it now. */
typedef struct {
    int bits;
    bool is_signed, symmetric;
    int32_t qmin, qmax;        /* storage range */
    float scale;               /* real = scale·(q - zero_point) */
    int32_t zero_point;
    float min, max;            /* the observer's range estimate */
    int64_t updates;           /* batches observed; 0: never, and the point is not applied yet */
    qat_observer_kind observer;
} qat_act_quant_info;
/* false (and *out untouched) when layer id has no activation quantizer. */
QAT_API bool qat_model_act_quant(const qat_model *m, int id, qat_act_quant_info *out);

/* Layer id's weight quantization as an eval-mode forward applies it: its
 * type (bits, storage range, blocks) with the scales and zero points of
 * the current weights — a folded BatchNorm's running statistics applied,
 * or LSQ's learned scales — the ones export writes. The arrays live in
 * ctx's persistent memory. QAT_ERR_ARG when layer id has no weight
 * quantizer. */
QAT_API qat_status qat_model_weight_qtype(const qat_model *m, int id, qat_ctx *ctx, qat_qtype *out);

/* Switches layer id's own fake quantization under the model-wide switch
 * (qat_model_set_fake_quant): its weight quantizer and the activation
 * quantizer at its output, each on or off. Observers keep observing in
 * training either way, as in a warm-up. Everything is on after
 * qat_prepare and after a checkpoint is loaded (the switches are not
 * saved): they are for analysis, one point quantized and the rest float
 * (qat/analyze.h). QAT_ERR_ARG when layer id has neither quantizer. */
QAT_API qat_status qat_model_set_layer_fake_quant(qat_model *m, int id, bool weights, bool activation);
/* Every layer's switches on or off at once. */
QAT_API void qat_model_set_all_layers_fake_quant(qat_model *m, bool on);

/* qat_model_forward that also keeps every layer's value for the caller:
 * out[id] is layer id's output as the next layer sees it (after its
 * activation quantizer, when one applied), pre[id] the same value before
 * that quantizer (out[id] itself where none applied). Both arrays have
 * qat_model_n_layers entries (either may be NULL); layers after the
 * model's output are NULL. The tensors live in the step arena, like the
 * forward's. */
QAT_API qat_tensor *qat_model_forward_all(qat_model *m, qat_tensor *x, qat_tensor **out, qat_tensor **pre);

/* ---- ready-made models -------------------------------------------------------------------- */

/* MLP 784-256-128-10 with ReLU: fc1 relu fc2 relu fc3; input [784].
 * LeNet-5: conv1(1→6, 5x5, pad 2) relu maxpool2 conv2(6→16, 5x5) relu maxpool2
 *          flatten fc1(400→120) relu fc2(120→84) relu fc3(84→10); input [1, 28, 28];
 * with batchnorm, bn1/bn2 follow conv1/conv2 (convs then have no bias). */
QAT_API qat_status qat_model_mlp(qat_model *m);
QAT_API qat_status qat_model_lenet(qat_model *m, bool batchnorm);

#ifdef __cplusplus
}
#endif
#endif
