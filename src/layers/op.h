/* The op-kind table: one entry per qat_layer_kind, each defined in the
 * kind's own file (src/layers/ops/<kind>.c) and filling the interface
 * below — its model-file syntax, shape rule, parameters, float forward,
 * QAT rule, lowering to integer ops, checkpoint record and summary row.
 * The model, the model-file reader and writer, the QAT pass, lowering,
 * checkpoints and the summary call through qat__op(kind) where kinds
 * differ; ops/registry.c lists the entries and fails the build when a
 * kind has none (docs/architecture.md, "Adding an op").
 *
 * Shared with: src/analyze src/export src/io
 * Prefix qat__. */
#ifndef QAT_LAYERS_OP_H
#define QAT_LAYERS_OP_H

#include <stdio.h>

#include "model.h"
#include "qat/runtime.h"

/* ---- the interface --------------------------------------------------------------------- */

/* A float attribute of a kind (leaky_relu's negative slope): its key in
 * model files and its attribute in checkpoints, its range and default.
 * A layer keeps its values in qat__layer.attr, in the kind's order. */
typedef struct {
    const char *key;
    float lo, hi, def;
} qat__attr;

typedef struct qat__qnet qat__qnet;         /* a model-file line being read (modelfile.c) */
typedef struct qat__text qat__text;         /* model-file text being written (modelfile.c) */
typedef struct qat__builder qat__builder;   /* the flat blocks being laid out (model.c) */
typedef struct qat__lowering qat__lowering; /* a graph being lowered (src/export/lower.c) */

/* A layer's hyperparameters as a training checkpoint records them
 * (docs/checkpoint-format.md, "architecture"): every layer has hp
 * (in, out, kh, kw, sh, sw, ph, pw, groups, bias), p, momentum and eps,
 * each kind reading the ones it has; attributes are the kind's own. */
typedef struct {
    qat_layer_kind kind;
    long long hp[10];
    float p, momentum, eps;
    float attr[QAT__MAX_ATTRS];
} qat__hparams;

typedef struct {
    qat_layer_kind kind;
    const char *name;               /* model files and checkpoints: "conv2d" (qat_layer_kind_str) */
    const char *stem;               /* default layer names: stem + count ("conv1") */
    int min_inputs, max_inputs;
    int n_attrs;
    qat__attr attrs[QAT__MAX_ATTRS];

    /* ---- model files (docs/model-format.md) ---- */
    bool in_files;                  /* a model-file line can declare it (not the input, not a custom op) */
    const char *keys;               /* its keys, for messages ("out, bias, in"); NULL: its attributes' */
    /* Adds the layer of a line (its inputs resolved, its fields in p)
     * with the public builder; NULL: qat__add_layer with its attributes. */
    qat_status (*parse)(qat__qnet *p, const char *name, int n, const int *in);
    /* Writes the line's key=value fields (each after a space); NULL: its
     * attributes. */
    void (*print)(const qat_model *m, const qat__layer *l, qat__text *t);

    /* ---- shapes, parameters, forward ---- */
    /* Per-sample output shape from its inputs' (qat__layer_shape); NULL:
     * element-wise, the shape of input 0. */
    qat_status (*shape)(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s);
    int64_t (*n_params)(const qat__layer *l);          /* parameters and buffers; NULL: none */
    void (*lay_out)(qat__builder *b, qat__layer *l);   /* its tensors in the flat blocks; NULL: none */
    void (*init)(qat__layer *l, qat_rng *rng);         /* PyTorch's initialisation; NULL: nothing */
    /* Its float value from its inputs' (a step tensor; NULL + error on
     * the context). Weighted kinds fake-quantize their weight here. */
    qat_tensor *(*forward)(qat_model *m, qat__layer *l, qat_tensor *const *xs);
    /* Weighted kinds: y = x·w (+ b) with the weight given, for the
     * BatchNorm folding of qat__product_forward. */
    qat_tensor *(*product)(qat_ctx *ctx, const qat__layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b);

    /* ---- the QAT rule (prepare.c, fusion.c) ---- */
    bool requantizes;  /* the integer op writes a new quantization: an activation quantizer after its group */
    bool weighted;     /* a weight quantizer; a following BatchNorm folds into it (Linear, Conv) */
    bool fuses_act;    /* its group takes a following ReLU/ReLU6 in (Linear, Conv, Add) */
    bool folds;        /* folds into the weighted layer before it (BatchNorm) */
    qat_act_kind act;  /* the clamp it is when fused into a group (ReLU, ReLU6); NONE otherwise */
    bool keeps_quant;  /* the integer op keeps its input's quantization without a quantizer of its own
                          (max pooling, flatten, dropout, a lone ReLU) */
    bool averages;     /* an average pool: with pool_keeps_scale it keeps its input's quantization too */

    /* ---- lowering (src/export/lower.c) ---- */
    /* Emits the integer op(s) of the layer (or of the group it anchors);
     * NULL for the input, which lowering makes itself. */
    qat_status (*lower)(qat__lowering *L, int id);

    /* ---- checkpoints (src/io/architecture.c) ---- */
    /* Adds the layer recorded with hyperparameters h (the id, or -1 with
     * the error on the context; -2: inputs the kind cannot take); NULL:
     * qat__add_layer with the recorded attributes. */
    int (*rebuild)(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h);
    const char *rebuild_refusal; /* why a checkpoint cannot rebuild it at all (custom ops: the code is not in the file) */

    /* ---- the summary (src/analyze/summary.c) ---- */
    /* Multiply-accumulates of one sample, its output shape given; NULL: 0. */
    int64_t (*macs)(const qat__layer *l, int rank, const int64_t *out);
} qat__op_kind;

/* The entry of a kind (registry.c); NULL for a value outside the enum. */
const qat__op_kind *qat__op(qat_layer_kind kind);

/* ---- building (model.c) ------------------------------------------------------------------ */

/* Adds a layer of a kind whose hyperparameters are its attributes alone
 * (attrs: the kind's n_attrs values, NULL for the defaults): checks the
 * number of inputs and each attribute's range. The id or -1. */
int qat__add_layer(qat_model *m, qat_layer_kind kind, const char *name, int n, const int *in, const float *attrs);
/* The layer just appended, its hyperparameters refused: taken back, the
 * message "model: <kind> <name>: <what>" on the context. Returns -1. */
int qat__refuse(qat_model *m, const char *what);
/* The layer just appended, its hyperparameters set: its parameters
 * counted against the model's limit. The id, or -1 (taken back). */
int qat__admit(qat_model *m);
/* A named tensor of n = Π shape floats in the parameter block, or of n
 * floats in the buffer block (lay_out's calls; NULL while counting). */
qat_tensor *qat__param(qat__builder *b, const qat__layer *l, const char *suffix, int rank, const int64_t *shape);
float *qat__buffer(qat__builder *b, const qat__layer *l, const char *suffix, int64_t n);
/* n floats uniform in [-bound, bound) (PyTorch's kaiming/bias init). */
void qat__uniform(qat_rng *rng, float *p, int64_t n, float bound);
/* PyTorch's default init of Linear and Conv2d: Kaiming-uniform with
 * a = sqrt(5), bound 1/sqrt(fan_in) for the weight and the bias alike. */
void qat__kaiming_init(qat__layer *l, qat_rng *rng);

/* ---- shapes (shapes.c) -------------------------------------------------------------------- */

/* The error for inputs that do not fit layer l ("model: <kind> <name>:
 * <what> (its input is [..] per sample)"). */
qat_status qat__misfit(const qat_model *m, const qat__layer *l, const char *what, int rank, const int64_t *s);
/* Output size of a window along one axis (0: it does not fit). */
static inline int64_t qat__window_out(int64_t in, int k, int s, int p) {
    return in + 2 * p < k ? 0 : (in + 2 * p - k) / s + 1;
}

/* ---- forward (forward.c) ----------------------------------------------------------------- */

/* A weighted layer's forward: its product with the weight fake-quantized
 * (dynamic min-max or LSQ scales) once the model is prepared, or with a
 * folded BatchNorm (Jacob et al. 2018). */
qat_tensor *qat__product_forward(qat_model *m, qat__layer *l, qat_tensor *const *xs);

/* ---- model files (modelfile.c) -------------------------------------------------------------- */

struct qat__qnet {
    qat_model *m;
    qat_layer_kind kind;  /* the kind of the line being read */
    const char *origin;
    int line;
    int *ranks;           /* per-sample shapes of the layers so far */
    int64_t (*shapes)[3];
    int cap;
    int64_t act_bytes;    /* float32 bytes of the outputs so far, one sample (the input's included) */
    /* the line's key=value fields, each used at most once */
    const char *key[32], *val[32];
    bool used[32];
    int n_fields;
};

/* The value of key on the line (marked used), or NULL. */
const char *qat__qnet_get(qat__qnet *p, const char *key);
/* "file:line: message" as QAT_ERR_FORMAT. */
qat_status qat__qnet_fail(qat__qnet *p, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A required key of layer `name` (of kind `kind`) absent (v NULL) or
 * unreadable: "KIND NAME: WANT is required", or "KIND NAME: WANT, not \"v\"". */
qat_status qat__qnet_need(qat__qnet *p, const char *v, const char *kind, const char *name, const char *want);
/* A whole number in [lo, hi]; a real in [lo, hi]; "5" or "10x4" (two
 * whole numbers in [lo, hi], heights first). */
bool qat__qnet_int(const char *text, long lo, long hi, long *out);
bool qat__qnet_real(const char *text, double lo, double hi, double *out);
bool qat__qnet_pair(const char *text, long lo, long hi, int *a, int *b);
/* QAT_OK when a builder returned an id, else the context's error. */
qat_status qat__qnet_added(qat__qnet *p, int id);

/* Appends printf-formatted text. */
void qat__text_printf(qat__text *t, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- the lowering kit (implemented by src/export/lower.c) --------------------------------------
 * What a kind's lower hook calls to emit integer ops: each op named
 * after a layer, reading the program tensors of layers, writing a new
 * tensor for a layer, with the quantization every number of the
 * fake-quantized forward implies. */

qat_model *qat__lower_model(const qat__lowering *L);
/* "lower: layer <name>: <msg>" with status s, on the model's context. */
qat_status qat__lower_fail(qat__lowering *L, const qat__layer *l, qat_status s, const char *msg);
/* The quantization layer l's activation quantizer has reached; an error
 * when it has none or never observed a batch. */
qat_status qat__lower_aparams(qat__lowering *L, const qat__layer *l, qat_aparams *out);
/* The quantization of the program tensor holding layer l's input j. */
const qat_aparams *qat__lower_in(const qat__lowering *L, const qat__layer *l, int j);
/* Layer id's per-sample output shape (its rank in *rank). */
const int64_t *qat__lower_shape(const qat__lowering *L, int id, int *rank);
/* A new op of `kind` named after layer name_id, reading the tensors of
 * the n layers in[], writing a new tensor (quantized by a) for layer
 * out_id; its clamp is a's storage range. */
qat_qop *qat__lower_op(qat__lowering *L, qat_qop_kind kind, int name_id, int n, const int *in, int out_id,
                       const qat_aparams *a);
/* An op that keeps its input's quantization (max pooling, flatten, ReLU). */
qat_qop *qat__lower_same(qat__lowering *L, int id, qat_qop_kind kind);
/* Layer id's value is its input's tensor (an identity at inference). */
void qat__lower_alias(qat__lowering *L, int id);
/* n multipliers and shifts of op from the real factors M (QuantizeMultiplier). */
qat_status qat__lower_multipliers(qat__lowering *L, const qat__layer *l, qat_qop *op, int n, const double *M);
/* The ReLU/ReLU6 layer act_id (-1: none) fused into op: its clamp on the
 * output integers, and the layer marked as emitted. */
void qat__lower_fuse_act(qat__lowering *L, qat_qop *op, const qat_aparams *out, int act_id);
/* The op of a weighted layer's group (its BatchNorm folded, its ReLU
 * fused): integer weights, int32 biases, a multiplier per output channel. */
qat_status qat__lower_product(qat__lowering *L, int id, qat_qop_kind kind);
/* An element-wise function of an input of at most 8 bits as a table:
 * out[q] = fake_quant(f(dequantize(q), attr)) in float32, as the
 * training forward computes it, for every input integer q. */
qat_status qat__lower_table(qat__lowering *L, int id, qat_lut_fn fn, float (*f)(float x, const float *attr));
/* Persistent memory of the program: n elements of size bytes. */
void *qat__lower_alloc(qat__lowering *L, int64_t n, size_t size);

#endif
