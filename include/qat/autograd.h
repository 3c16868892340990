/* qat/autograd.h — float32 tensors and reverse-mode autograd, on a
 * context (qat/context.h).
 *
 * The flow, as in ggml:  make a context; create parameter tensors in its
 * persistent memory; each step, build the graph by calling ops (they record
 * themselves on a tape in the step arena); call qat_backward on the scalar
 * loss; read or update the parameter gradients; qat_ctx_step_reset frees the
 * whole step at once (no per-op malloc once the arena has grown to size).
 *
 * Errors: functions that do something return a qat_status. Graph ops return
 * the new tensor, or NULL on failure; the status is then qat_ctx_status(ctx)
 * and the message qat_ctx_error(ctx). A NULL input makes an op return NULL
 * without overwriting the first error, so a whole forward pass can be
 * written without checks and tested once at the end. The first error sticks
 * until qat_ctx_clear_error. The library never exits or aborts. */
#ifndef QAT_AUTOGRAD_H
#define QAT_AUTOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- grad mode and BLAS threads ----------------------------------------------- */

/* Grad mode: when off (evaluation), ops record nothing. On by default. */
QAT_API void qat_ctx_set_grad_enabled(qat_ctx *ctx, bool enabled);
QAT_API bool qat_ctx_grad_enabled(const qat_ctx *ctx);

/* Threads OpenBLAS may use for every sgemm (process-wide, OpenBLAS's own
 * setting). Returns the number in force. With a pool of more than one
 * thread, keep it at 1 (qat_pool_new sets it so): the pool's tasks make
 * the sgemm calls, each on its own block. */
QAT_API int qat_set_threads(int n);
/* The name of the kernel family OpenBLAS chose for this CPU ("Haswell",
 * "SkylakeX", "Prescott", ...): it decides most of the float speed, and
 * OpenBLAS falls back to its generic "Prescott" on CPUs newer than it
 * knows. A static string. */
QAT_API const char *qat_blas_core(void);

/* ---- tensors -------------------------------------------------------------------- */

typedef struct qat_node qat_node; /* a tape entry; private */

typedef struct qat_tensor {
    float *data;  /* first element */
    float *grad;  /* same layout as data; NULL until a gradient arrives */
    int rank;     /* 0..QAT_MAX_RANK */
    int64_t shape[QAT_MAX_RANK];
    int64_t stride[QAT_MAX_RANK]; /* in elements */
    int64_t numel;
    bool requires_grad;
    qat_mem mem;
    qat_node *node; /* op that produced it in this step, or NULL (a leaf) */
} qat_tensor;

/* New zeroed tensor. A persistent tensor with requires_grad gets a zeroed
 * persistent gradient at once; gradients persist until qat_tensor_zero_grad. */
QAT_API qat_tensor *qat_tensor_new(qat_ctx *ctx, qat_mem where, int rank,
                                   const int64_t *shape, bool requires_grad);
/* A tensor over memory the caller owns (e.g. a model's flat parameter block);
 * grad may be NULL. Contiguous. The qat_tensor header lives in `where`. */
QAT_API qat_tensor *qat_tensor_wrap(qat_ctx *ctx, qat_mem where, float *data, float *grad,
                                    int rank, const int64_t *shape);
/* Step tensor holding a copy of n floats. */
QAT_API qat_tensor *qat_tensor_from(qat_ctx *ctx, qat_mem where, const float *values,
                                    int rank, const int64_t *shape, bool requires_grad);
QAT_API bool qat_tensor_is_contiguous(const qat_tensor *t);
QAT_API bool qat_tensor_same_shape(const qat_tensor *a, const qat_tensor *b);
QAT_API void qat_tensor_zero_grad(qat_tensor *t); /* accepts NULL */
/* Writes "[2, 3, 4]" into buf; returns buf. */
QAT_API char *qat_shape_str(const qat_tensor *t, char *buf, size_t len);

/* ---- ops (each records its backward) ---------------------------------------------- */

/* Elementwise with broadcasting (numpy rules, shapes aligned on the right):
 * a bias [K] against [N, K], a per-channel [C, 1, 1] against [N, C, H, W]. */
QAT_API qat_tensor *qat_add(qat_ctx *ctx, qat_tensor *a, qat_tensor *b);
QAT_API qat_tensor *qat_sub(qat_ctx *ctx, qat_tensor *a, qat_tensor *b);
QAT_API qat_tensor *qat_mul(qat_ctx *ctx, qat_tensor *a, qat_tensor *b);
QAT_API qat_tensor *qat_scale(qat_ctx *ctx, qat_tensor *x, float c);

/* op(a) · op(b) for rank-2 tensors, op = transpose when the flag is set. */
QAT_API qat_tensor *qat_matmul(qat_ctx *ctx, qat_tensor *a, qat_tensor *b, bool trans_a,
                               bool trans_b);
/* x [N, in] · wᵀ [in, out] + b [out]; b may be NULL. */
QAT_API qat_tensor *qat_linear(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b);

QAT_API qat_tensor *qat_reciprocal(qat_ctx *ctx, qat_tensor *x); /* 1/x; x must be nonzero */
QAT_API qat_tensor *qat_relu(qat_ctx *ctx, qat_tensor *x);
/* min(max(x, lo), hi); gradient passes where lo < x < hi (ReLU6 = clamp(0, 6)). */
QAT_API qat_tensor *qat_clamp(qat_ctx *ctx, qat_tensor *x, float lo, float hi);

QAT_API qat_tensor *qat_sum(qat_ctx *ctx, qat_tensor *x);  /* scalar; double accumulation */
QAT_API qat_tensor *qat_mean(qat_ctx *ctx, qat_tensor *x); /* scalar */

/* Views: share storage with x (x must be contiguous). One dim may be -1. */
QAT_API qat_tensor *qat_reshape(qat_ctx *ctx, qat_tensor *x, int rank, const int64_t *shape);
/* [N, d1, d2, ...] -> [N, d1*d2*...] */
QAT_API qat_tensor *qat_flatten(qat_ctx *ctx, qat_tensor *x);

/* Mean over the batch of -log softmax(logits)[label]; logits [N, K],
 * labels[i] in [0, K). Fused and stable (max subtracted). */
QAT_API qat_tensor *qat_cross_entropy(qat_ctx *ctx, qat_tensor *logits, const int32_t *labels);
/* Cross-entropy with class weights (weights [K], each >= 0, or NULL) and
 * label smoothing eps in [0, 1), as PyTorch's cross_entropy(weight=,
 * label_smoothing=, reduction='mean'):
 *     loss = [(1 - eps)·Σ_r w[y_r]·(-log p[r, y_r])
 *             + (eps/K)·Σ_r Σ_k w[k]·(-log p[r, k])] / Σ_r w[y_r]
 * (w = 1 without weights, so the divisor is N). No weights and eps 0 is
 * qat_cross_entropy, bit for bit. QAT_ERR_ARG when the batch's weights
 * sum to 0. */
QAT_API qat_tensor *qat_cross_entropy_ex(qat_ctx *ctx, qat_tensor *logits, const int32_t *labels,
                                         const float *weights, float smoothing);
/* Mean squared error over every element: Σ (x - target)² / numel, summed
 * in double (PyTorch's mse_loss, reduction='mean'). target has x's
 * numel, in x's (row-major) order. */
QAT_API qat_tensor *qat_mse_loss(qat_ctx *ctx, qat_tensor *x, const float *target);

/* x [N, C, H, W], w [O, C, KH, KW], b [O] or NULL; same stride and zero
 * padding on both spatial axes. im2col + one cblas_sgemm per call. */
QAT_API qat_tensor *qat_conv2d(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                               int stride, int padding);
/* Windows k x k, stride s, no padding, floor of the output size. */
QAT_API qat_tensor *qat_maxpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride);
QAT_API qat_tensor *qat_avgpool2d(qat_ctx *ctx, qat_tensor *x, int k, int stride);

/* The general 2-d convolution: separate height/width stride and zero
 * padding, and groups (PyTorch's Conv2d). x [N, C, H, W], w [O, C/groups,
 * KH, KW], b [O] or NULL; C and O divisible by groups; output [N, O, OH,
 * OW] with OH = (H + 2·pad_h - KH) / stride_h + 1 (floor). Group g maps
 * input channels [g·C/groups, (g+1)·C/groups) to outputs [g·O/groups, ...).
 * groups == C == O is a depthwise convolution, which has its own direct
 * kernels; qat_conv2d(x, w, b, s, p) is this with s, s, p, p, 1. */
typedef struct {
    int stride_h, stride_w, pad_h, pad_w, groups;
} qat_conv2d_params;
QAT_API qat_tensor *qat_conv2d_ex(qat_ctx *ctx, qat_tensor *x, qat_tensor *w, qat_tensor *b,
                                  const qat_conv2d_params *p);

/* Pooling with KH x KW windows, separate strides and padding (PyTorch's
 * MaxPool2d / AvgPool2d with ceil_mode off): max pooling pads with -inf
 * (padding at most half the window, as PyTorch requires), average pooling
 * with zeros that count in the divisor (count_include_pad, PyTorch's
 * default), so every window divides by KH·KW. */
typedef struct {
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
} qat_pool2d_params;
QAT_API qat_tensor *qat_maxpool2d_ex(qat_ctx *ctx, qat_tensor *x, const qat_pool2d_params *p);
QAT_API qat_tensor *qat_avgpool2d_ex(qat_ctx *ctx, qat_tensor *x, const qat_pool2d_params *p);
/* Mean over H and W: [N, C, H, W] -> [N, C] (PyTorch's AdaptiveAvgPool2d(1)
 * then flatten). Sums in double. */
QAT_API qat_tensor *qat_global_avgpool2d(qat_ctx *ctx, qat_tensor *x);

/* Concatenation of n >= 1 contiguous tensors along `axis`; every other
 * dimension equal. */
QAT_API qat_tensor *qat_concat(qat_ctx *ctx, int n, qat_tensor *const *xs, int axis);

/* Element-wise functions, float32 as PyTorch computes them:
 * sigmoid 1/(1 + exp(-x)), tanh, hard-swish x·min(max(x + 3, 0), 6)/6.
 * qat_eval_sigmoid/tanh/hardswish compute one value exactly as the op's
 * forward does (the integer program's tables are built with them). */
QAT_API qat_tensor *qat_sigmoid(qat_ctx *ctx, qat_tensor *x);
QAT_API qat_tensor *qat_tanh(qat_ctx *ctx, qat_tensor *x);
QAT_API qat_tensor *qat_hardswish(qat_ctx *ctx, qat_tensor *x);
QAT_API float qat_eval_sigmoid(float x);
QAT_API float qat_eval_tanh(float x);
QAT_API float qat_eval_hardswish(float x);

/* ---- custom ops ------------------------------------------------------------------- */

/* A differentiable op written outside the library, with n >= 1 inputs and
 * one output. The library calls shape() to size the output (a step
 * tensor), forward() to fill it, and, in qat_backward, backward() once
 * with y->grad set; backward adds into gx[i] (which is NULL for an input
 * that needs no gradient; otherwise zeroed or holding earlier gradients:
 * always add). user is passed through. Every callback returns QAT_OK or an
 * error status, with a message set by qat_ctx_fail(ctx, ...). */
typedef struct {
    const char *name; /* for messages and graph records: "my_op" */
    qat_status (*shape)(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank,
                        int64_t *shape);
    qat_status (*forward)(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y);
    qat_status (*backward)(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x,
                           const qat_tensor *y, float *const *gx);
} qat_custom_op;
/* Runs op on xs (contiguous tensors; at most QAT_CUSTOM_MAX_INPUTS) and
 * records its backward. NULL on error. */
#define QAT_CUSTOM_MAX_INPUTS 16
QAT_API qat_tensor *qat_custom(qat_ctx *ctx, const qat_custom_op *op, void *user, int n,
                               qat_tensor *const *xs);

/* Inverted dropout: zero with probability p, scale survivors by 1/(1-p). */
QAT_API qat_tensor *qat_dropout(qat_ctx *ctx, qat_tensor *x, float p, qat_rng *rng);

/* Batch normalisation over the channel axis 1 of [N, C] or [N, C, H, W].
 * Training: normalise with the batch mean and biased variance, and update
 * running_mean/var (unbiased variance) with `momentum` as PyTorch does.
 * Evaluation: normalise with the running statistics. gamma, beta: [C]. */
QAT_API qat_tensor *qat_batchnorm(qat_ctx *ctx, qat_tensor *x, qat_tensor *gamma, qat_tensor *beta,
                                  float *running_mean, float *running_var, float momentum,
                                  float eps, bool training);

/* ---- backward --------------------------------------------------------------------- */

/* Reverse-mode pass from a scalar loss through this step's tape. Gradients
 * accumulate (+=) into every persistent tensor that requires them (leaves:
 * parameters). A step tensor's gradient is working memory: an op's
 * backward may hand it on, masked in place, as its input's gradient (ReLU,
 * clamp, dropout, reshape, fake quantization do), and once an op's
 * backward has run, its output's gradient is released (grad NULL) and its
 * memory serves the gradients still to come: like PyTorch, which keeps no
 * .grad on non-leaf tensors. Step tensors made by the caller (leaves, such
 * as an input with requires_grad) keep theirs. Once per step. */
QAT_API qat_status qat_backward(qat_ctx *ctx, qat_tensor *loss);

/* ---- gradient check (central differences), for tests ------------------------------- */

/* Builds the scalar whose gradient is checked from the given inputs. */
typedef qat_tensor *(*qat_graph_fn)(qat_ctx *ctx, qat_tensor *const *inputs, void *user);

typedef struct {
    double max_abs_err;  /* over every element of every input */
    double max_rel_err;
    int64_t worst_input; /* where max_abs_err happened */
    int64_t worst_index;
    int64_t n_checked;
} qat_gradcheck_result;

/* Compares the autograd gradient of fn wrt each input (persistent tensors
 * with requires_grad) with (f(x+eps) - f(x-eps)) / 2eps, element by element.
 * Fails (QAT_ERR_STATE, message naming input and index) when an element has
 * |analytic - numeric| > atol + rtol * |numeric|. */
QAT_API qat_status qat_gradcheck(qat_ctx *ctx, qat_graph_fn fn, void *user,
                                 qat_tensor *const *inputs, int n_inputs, float eps, float atol,
                                 float rtol, qat_gradcheck_result *result);

#ifdef __cplusplus
}
#endif
#endif
