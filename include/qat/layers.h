/* qat/layers.h — layers and the sequential model that holds them.
 *
 * A model lives in a context's persistent memory. Add layers in order,
 * then qat_model_build allocates every parameter in one flat block (and
 * every gradient in a mirrored block, every buffer in a third), and
 * initialises them as PyTorch does from the seed given:
 *
 *     qat_model *m = qat_model_new(ctx);
 *     qat_model_add_conv2d(m, NULL, 1, 6, 5, 1, 2, true);   // "conv1"
 *     ...
 *     qat_model_build(m, seed);
 *     qat_tensor *logits = qat_model_forward(m, x);         // a step's graph
 *
 * Names are PyTorch's: a layer is "<kind><k>" (conv1, fc2, bn1, ...) unless
 * given one, and its tensors are "<layer>.weight", ".bias",
 * ".running_mean", ".running_var". */
#ifndef QAT_LAYERS_H
#define QAT_LAYERS_H

#include "qat/autograd.h"
#include "qat/fakequant.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_MAX_LAYERS 64
#define QAT_NAME_LEN 32

typedef enum {
    QAT_LAYER_LINEAR,
    QAT_LAYER_CONV2D,
    QAT_LAYER_BATCHNORM, /* 1d on [N, C], 2d on [N, C, H, W] */
    QAT_LAYER_RELU,
    QAT_LAYER_RELU6,
    QAT_LAYER_MAXPOOL2D,
    QAT_LAYER_AVGPOOL2D,
    QAT_LAYER_FLATTEN,
    QAT_LAYER_DROPOUT,
    QAT_LAYER_KIND_COUNT
} qat_layer_kind;

QAT_API const char *qat_layer_kind_str(qat_layer_kind kind); /* "linear", "conv2d", ... */

/* An activation quantization point: per-tensor type + its observer. */
typedef struct {
    qat_qtype q; /* rank 0: applies to any activation shape */
    qat_observer obs;
} qat_act_quant;

typedef struct qat_layer {
    qat_layer_kind kind;
    char name[QAT_NAME_LEN];
    int in, out;            /* features (linear) or channels (conv, batchnorm) */
    int kernel, stride, pad; /* conv; pools use kernel and stride */
    bool has_bias;
    float p;                /* dropout probability */
    float momentum, eps;    /* batchnorm */
    /* Views into the model's flat blocks (NULL where the kind has none). */
    qat_tensor *weight, *bias;       /* linear [out, in], conv [out, in, k, k] */
    qat_tensor *gamma, *beta;        /* batchnorm [C], named weight and bias */
    float *running_mean, *running_var; /* batchnorm buffers [C] */
    /* Set by qat_prepare (NULL in a float model): */
    qat_qtype *wq;          /* weight fake quantization (symmetric) */
    qat_tensor *wscale, *wzero; /* LSQ: learned scales [nparams] (views into the
                                 * model's qparams block) and fixed zero points */
    struct qat_layer *fold_bn;  /* Linear/Conv: the BatchNorm folded into it */
    bool folded;                /* BatchNorm: applied by the layer before it */
    qat_act_quant *aq;      /* fake quantization of this layer's output */
} qat_layer;

typedef struct {
    const char *name; /* "conv1.weight" */
    qat_tensor *tensor;
} qat_named_tensor;

typedef struct qat_model {
    qat_ctx *ctx;
    int n_layers;
    qat_layer layers[QAT_MAX_LAYERS];
    bool built;
    bool training; /* train mode: batch statistics, dropout on */
    /* Flat blocks: parameters, their gradients (same layout), buffers. */
    int64_t n_params, n_buffers;
    float *params, *grads, *buffers;
    int n_param_tensors, n_buffer_tensors;
    qat_named_tensor *param_list, *buffer_list;
    qat_rng rng; /* dropout masks; part of the training state */
    /* Quantization-aware training (qat_prepare): */
    bool prepared;
    qat_prepare_config qcfg;
    qat_act_quant *input_aq;
    bool fake_quant_on;    /* off: a float forward (warm-up, or float accuracy) */
    bool observers_frozen; /* on: activation ranges stop moving */
    bool bn_frozen;        /* on: folded BatchNorms use running statistics, stop updating */
    /* LSQ's learned scales: a second flat block (and its gradients) that
     * the training loop steps like the parameters. */
    int64_t n_qparams;
    float *qparams, *qgrads;
} qat_model;

QAT_API qat_model *qat_model_new(qat_ctx *ctx); /* in ctx's persistent memory */

/* Each add returns QAT_OK or an error (bad sizes, too many layers, name
 * clash, already built). name may be NULL for the default. */
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

/* Allocates the flat blocks and initialises: weights Kaiming-uniform with
 * a = sqrt(5) (bound 1/sqrt(fan_in)), biases U(-1/sqrt(fan_in), +), batchnorm
 * weight 1, bias 0, running mean 0, var 1 — PyTorch's defaults. The same
 * seed gives bit-identical parameters. */
QAT_API qat_status qat_model_build(qat_model *m, uint64_t seed);

QAT_API void qat_model_train(qat_model *m, bool training);
QAT_API void qat_model_zero_grad(qat_model *m); /* parameters and LSQ scales */

/* Runs the layers in order on x (a step tensor). NULL on error. */
QAT_API qat_tensor *qat_model_forward(qat_model *m, qat_tensor *x);

QAT_API qat_layer *qat_model_find_layer(qat_model *m, const char *name);
QAT_API qat_tensor *qat_model_find_param(qat_model *m, const char *name);

/* Ready-made models.
 * MLP 784-256-128-10 with ReLU: fc1 relu fc2 relu fc3.
 * LeNet-5: conv1(1→6, 5x5, pad 2) relu maxpool2 conv2(6→16, 5x5) relu maxpool2
 *          flatten fc1(400→120) relu fc2(120→84) relu fc3(84→10);
 * with batchnorm, bn1/bn2 follow conv1/conv2 (convs then have no bias). */
QAT_API qat_status qat_model_mlp(qat_model *m);
QAT_API qat_status qat_model_lenet(qat_model *m, bool batchnorm);

#ifdef __cplusplus
}
#endif
#endif
