/* The model's layout: its layers, their quantization points and the
 * fusion groups, read by the modules that save, lower and inspect a
 * model. Only the layers module changes a model's structure.
 * Shared with: src/analyze src/export src/fit src/io
 * Prefix qat__. */
#ifndef QAT_LAYERS_MODEL_H
#define QAT_LAYERS_MODEL_H

#include "qat/layers.h"

/* An activation quantization point: a per-tensor type, its observer, and
 * the straight-through estimator of the layer that owns it. */
typedef struct {
    qat_qtype q; /* rank 0: applies to any activation shape */
    qat_observer obs;
    qat_ste ste;
    bool off; /* this point skipped (qat_model_set_layer_fake_quant): analysis only, not saved */
} qat__act_quant;

/* Float attributes a kind may define for itself (op.h). */
#define QAT__MAX_ATTRS 2

typedef struct {
    const char *name; /* "conv1.weight" */
    qat_tensor *tensor;
} qat__named_tensor;

typedef struct {
    qat_layer_kind kind;
    char name[QAT_NAME_LEN];
    int n_in;
    int *in;                 /* input layer ids, each smaller than this layer's */
    /* hyperparameters */
    int cin, cout;           /* linear: features; conv: channels; batchnorm: channels */
    int kh, kw, sh, sw, ph, pw, groups; /* conv and pools */
    bool has_bias;
    float p;                 /* dropout probability */
    float momentum, eps;     /* batchnorm */
    float attr[QAT__MAX_ATTRS]; /* the kind's own attributes (op.h, qat__attr), in its order */
    const qat_custom_op *custom;
    void *custom_user;
    /* views into the model's flat blocks (NULL where the kind has none) */
    qat_tensor *weight, *bias;         /* linear [out, in], conv [out, in/groups, kh, kw] */
    qat_tensor *gamma, *beta;          /* batchnorm [C], named weight and bias */
    float *running_mean, *running_var; /* batchnorm buffers [C] */
    int n_consumers;         /* layers that read this one's output (+1 for the model output) */
    qat_layer_precision prec; /* its own precision over the global configuration (zero: none) */
    /* set by the QAT pass (NULL / -1 in a float model): */
    qat_prepare_config *qcfg; /* this layer's own configuration */
    qat_qtype *wq;            /* weight fake quantization (symmetric) */
    qat_tensor *wscale, *wzero; /* LSQ: learned scales [nparams] (views into the qparams block) */
    bool wq_off;              /* weight quantizer skipped (qat_model_set_layer_fake_quant): not saved */
    int fold_bn;              /* Linear/Conv: the BatchNorm folded into it, or -1 */
    bool folded;              /* BatchNorm: applied by the layer before it */
    qat__act_quant *aq;       /* fake quantization of this layer's output */
} qat__layer;

struct qat_model {
    qat_ctx *ctx;
    qat_model_limits limits;  /* what the model may demand (qat_model_set_limits) */
    int64_t declared_params;  /* parameters and buffers of the layers added so far */
    int n_layers, cap;
    qat__layer *layers;       /* [cap]; layer 0 is the input */
    int output;               /* -1: the last layer */
    int in_rank;              /* declared per-sample input shape (0: none) */
    int64_t in_shape[3];
    const qat_normalization *norm; /* the input's normalization; NULL: none (qat_model_set_normalization) */
    qat_normalization *norm_mem;   /* its storage, allocated on first use and reused */
    bool built;
    bool training;            /* train mode: batch statistics, dropout on */
    /* flat blocks: parameters, their gradients (same layout), buffers */
    int64_t n_params, n_buffers;
    float *params, *grads, *buffers;
    int n_param_tensors, n_buffer_tensors;
    qat__named_tensor *param_list, *buffer_list;
    qat_rng rng;              /* dropout masks; part of the training state */
    int64_t slice_first, slice_global; /* qat_model_set_batch_slice (0, 0: the whole batch) */
    /* quantization-aware training */
    bool prepared;
    qat_prepare_config qcfg;  /* the global configuration */
    bool fake_quant_on, observers_frozen, bn_frozen;
    /* LSQ's learned scales: a second flat block (and its gradients), in
     * layer order, that the training loop steps like the parameters */
    int64_t n_qparams;
    float *qparams, *qgrads;
};

static inline int qat__model_output(const qat_model *m) { return m->output >= 0 ? m->output : m->n_layers - 1; }

/* ---- the fusion matcher (fusion.c): one place for prepare and lowering ----
 * A group is an anchor and the layers fused into it: Linear/Conv, then a
 * BatchNorm folded in (when fold_bn and the anchor's output feeds only
 * it), then a ReLU/ReLU6 (when the output so far feeds only it); or Add,
 * then a ReLU/ReLU6. Every other layer is a group of its own. */
typedef struct {
    int anchor, bn, act, end; /* bn, act: -1 when absent; end: the last layer of the group */
} qat__group;
void qat__match_group(const qat_model *m, int anchor, bool fold_bn, qat__group *g);
/* The weight and bias Linear/Conv layer l computes with in eval mode: its
 * own, or with a folded BatchNorm's running statistics applied exactly as
 * the forward's fold does (w·sf in float, b in double). w [numel], b [cout]
 * (inspect.c). */
void qat__effective_weight(const qat_model *m, const qat__layer *l, float *w, double *b);

#endif
