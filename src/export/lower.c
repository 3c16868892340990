/* Lowering: a prepared model becomes the integer program of qat/export.h.
 *
 * Every number is computed the way the fake-quantized forward computes
 * it (same float operations, same order), so the integers here are the
 * ones the QAT model simulated: weights through qat_qtype_calibrate and
 * qat_quantize (or the learned LSQ scales), BatchNorm folded as
 * fold_forward does in eval mode. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qat/export.h"
#include "qat/infer.h"

static const char *const qop_names[QAT_QOP_KIND_COUNT] = {"linear", "conv2d", "maxpool2d",
                                                          "avgpool2d", "flatten", "relu"};
static const char *const act_names[] = {"none", "relu", "relu6"};

const char *qat_qop_kind_str(qat_qop_kind k) {
    return (unsigned)k < QAT_QOP_KIND_COUNT ? qop_names[k] : "unknown";
}
const char *qat_act_kind_str(qat_act_kind k) { return (unsigned)k <= QAT_ACT_RELU6 ? act_names[k] : "unknown"; }

typedef struct {
    qat_model *m;
    qat_qmodel *q;
    qat_aparams cur;      /* quantization of the tensor flowing between ops */
    int rank;             /* its per-sample shape */
    int64_t shape[3];
} lowering;

static qat_status fail(lowering *L, const qat_layer *l, qat_status s, const char *msg) {
    return qat_ctx_fail(L->m->ctx, s, "lower: layer %s: %s", l ? l->name : "input", msg);
}

/* The quantization an observed activation point has reached. */
static qat_status aparams_of(lowering *L, const qat_layer *l, const qat_act_quant *a, qat_aparams *out) {
    if (!a) return fail(L, l, QAT_ERR_STATE, "has no activation quantizer (prepare the model first)");
    if (a->obs.updates == 0)
        return fail(L, l, QAT_ERR_STATE, "its activation range was never observed: train (or calibrate) "
                    "the prepared model before exporting");
    *out = (qat_aparams){.scale = a->q.scale[0], .zero_point = a->q.zero_point[0], .bits = a->q.bits,
                         .is_signed = a->q.is_signed, .qmin = a->q.qmin, .qmax = a->q.qmax};
    if (!(out->scale > 0) || !isfinite(out->scale))
        return fail(L, l, QAT_ERR_STATE, "its activation scale is not a positive number");
    return QAT_OK;
}

static qat_qop *new_op(lowering *L, const qat_layer *l, qat_qop_kind kind) {
    qat_qop *op = &L->q->ops[L->q->n_ops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    snprintf(op->name, sizeof op->name, "%s", l->name);
    op->kernel = l->kernel, op->stride = l->stride, op->pad = l->pad;
    op->in_rank = L->rank;
    memcpy(op->in_shape, L->shape, sizeof op->in_shape);
    op->output = L->cur, op->act_min = L->cur.qmin, op->act_max = L->cur.qmax;
    return op;
}

/* The op's output shape becomes the current one. */
static void set_out(lowering *L, qat_qop *op, int rank, int64_t a, int64_t b, int64_t c) {
    op->out_rank = L->rank = rank;
    op->out_shape[0] = L->shape[0] = a, op->out_shape[1] = L->shape[1] = b;
    op->out_shape[2] = L->shape[2] = c;
}

static qat_status window_shape(lowering *L, const qat_layer *l, int k, int s, int pad, int64_t *h, int64_t *w) {
    if (L->rank != 3) return fail(L, l, QAT_ERR_SHAPE, "needs [C, H, W] input (is a Flatten misplaced?)");
    *h = (L->shape[1] + 2 * pad - k) / s + 1;
    *w = (L->shape[2] + 2 * pad - k) / s + 1;
    if (L->shape[1] + 2 * pad < k || L->shape[2] + 2 * pad < k)
        return fail(L, l, QAT_ERR_SHAPE, "its window is larger than its input");
    return QAT_OK;
}

/* The weight and bias a Linear/Conv computes with in eval mode, with a
 * folded BatchNorm's running statistics applied as fold_forward does. */
static void effective_weight(const qat_layer *l, float *w, double *b) {
    int64_t O = l->weight->shape[0], per = l->weight->numel / O;
    memcpy(w, l->weight->data, (size_t)l->weight->numel * sizeof *w);
    for (int64_t c = 0; c < O; c++) b[c] = l->bias ? l->bias->data[c] : 0.0;
    const qat_layer *bn = l->fold_bn;
    if (!bn) return;
    for (int64_t c = 0; c < O; c++) {
        float inv_std = 1.0f / sqrtf(bn->running_var[c] + bn->eps);
        float sf = bn->gamma->data[c] * inv_std; /* the float ops of fold_forward */
        for (int64_t j = 0; j < per; j++) w[c * per + j] *= sf;
        b[c] = (double)bn->beta->data[c] + (b[c] - (double)bn->running_mean[c]) * (double)sf;
    }
}

/* The weight's type and integers: min-max scales from the effective weight
 * (the dynamic strategy), or the learned LSQ scales. */
static qat_status quantize_weight(lowering *L, const qat_layer *l, const float *w, qat_qop *op) {
    qat_ctx *ctx = L->m->ctx;
    const qat_qtype *src = l->wq;
    qat_status st = qat_qtype_init(ctx, &op->wq, src->bits, src->is_signed, false, src->rank, src->shape, src->block);
    if (st != QAT_OK) return st;
    op->wq.qmin = src->qmin, op->wq.qmax = src->qmax; /* keep narrow or full as prepared */
    if (l->wscale) {
        for (int64_t p = 0; p < op->wq.nparams; p++) {
            float s = l->wscale->data[p];
            op->wq.scale[p] = s >= 1e-8f ? s : 1e-8f; /* the forward's projection */
            float z = nearbyintf(l->wzero->data[p]);
            op->wq.zero_point[p] = (int32_t)(z < (float)src->qmin ? (float)src->qmin
                                             : z > (float)src->qmax ? (float)src->qmax : z);
        }
    } else {
        qat_qtype_calibrate(&op->wq, w, true);
    }
    op->weight = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)l->weight->numel * sizeof(int32_t));
    if (!op->weight) return qat_ctx_status(ctx);
    qat_quantize(&op->wq, w, op->weight);
    return QAT_OK;
}

/* Bias in int32 at s_in·s_w[c]; multiplier and shift of s_in·s_w[c]/s_out. */
static qat_status quantize_bias(lowering *L, const qat_layer *l, float s_in, const double *b, qat_qop *op) {
    qat_ctx *ctx = L->m->ctx;
    int64_t O = op->wq.shape[0], per = l->weight->numel / O;
    int axis = qat_qtype_axis(&op->wq);
    bool one_per_channel = axis == -1 || axis == 0;
    op->bias = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
    op->bias_scale = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(float));
    if (one_per_channel) {
        op->multiplier = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
        op->shift = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)O * sizeof(int32_t));
        if (!op->multiplier || !op->shift) return qat_ctx_status(ctx);
    }
    if (!op->bias || !op->bias_scale) return qat_ctx_status(ctx);
    for (int64_t c = 0; c < O; c++) {
        double sw = op->wq.scale[qat_qtype_param_index(&op->wq, c * per)];
        double bs = (double)s_in * sw, qb = nearbyint(b[c] / bs);
        if (!(fabs(qb) <= 2147483647.0))
            return fail(L, l, QAT_ERR_STATE, "a bias does not fit int32 at scale s_in·s_w (scales collapsed?)");
        op->bias[c] = (int32_t)qb;
        op->bias_scale[c] = (float)bs;
        if (one_per_channel) {
            int sh;
            if (qat_quantize_multiplier(bs / (double)op->output.scale, &op->multiplier[c], &sh) != QAT_OK)
                return fail(L, l, QAT_ERR_STATE, "its requantization multiplier is not finite");
            op->shift[c] = sh;
        }
    }
    return QAT_OK;
}

/* A Linear/Conv with its folded BatchNorm and fused ReLU/ReLU6; returns
 * the index of the last layer of the group in *end. */
static qat_status lower_product(lowering *L, int i, int *end) {
    qat_model *m = L->m;
    qat_layer *l = &m->layers[i];
    bool conv = l->kind == QAT_LAYER_CONV2D;
    if (!l->wq) return fail(L, l, QAT_ERR_STATE, "has no weight quantizer (prepare the model first)");
    if (conv ? L->rank != 3 || L->shape[0] != l->in : L->rank != 1 || L->shape[0] != l->in)
        return fail(L, l, QAT_ERR_SHAPE, conv ? "its input is not [in_channels, H, W]"
                                              : "its input is not [in_features] (Flatten missing?)");
    int j = i;
    if (j + 1 < m->n_layers && m->layers[j + 1].kind == QAT_LAYER_BATCHNORM) {
        if (!l->fold_bn) return fail(L, &m->layers[j + 1], QAT_ERR_UNSUPPORTED,
                                     "a BatchNorm not folded into the layer before it has no integer form");
        j++;
    }
    qat_act_kind act = QAT_ACT_NONE;
    if (j + 1 < m->n_layers && m->layers[j + 1].kind == QAT_LAYER_RELU) act = QAT_ACT_RELU, j++;
    else if (j + 1 < m->n_layers && m->layers[j + 1].kind == QAT_LAYER_RELU6) act = QAT_ACT_RELU6, j++;
    qat_aparams in = L->cur;
    qat_status st = aparams_of(L, &m->layers[j], m->layers[j].aq, &L->cur);
    if (st != QAT_OK) return st;
    qat_qop *op = new_op(L, l, conv ? QAT_QOP_CONV2D : QAT_QOP_LINEAR);
    op->act = act;
    /* ReLU and ReLU6 commute with rounding: fq(relu(y)) = max(fq(y), zp), and
     * fq(min(y, 6)) = min(q, zp + rint(6·(1/s))) as the fake quant rounds. */
    if (act != QAT_ACT_NONE && L->cur.zero_point > op->act_min) op->act_min = L->cur.zero_point;
    if (act == QAT_ACT_RELU6) {
        float six = nearbyintf(6.0f * (1.0f / L->cur.scale)) + (float)L->cur.zero_point;
        if (six < (float)op->act_max) op->act_max = (int32_t)six;
    }
    if (conv) {
        int64_t h, w;
        if ((st = window_shape(L, l, l->kernel, l->stride, l->pad, &h, &w)) != QAT_OK) return st;
        set_out(L, op, 3, l->out, h, w);
    } else {
        set_out(L, op, 1, l->out, 0, 0);
    }
    qat_ctx *ctx = m->ctx;
    float *wf = qat_ctx_alloc(ctx, QAT_MEM_STEP, (size_t)l->weight->numel * sizeof(float));
    double *bf = qat_ctx_alloc(ctx, QAT_MEM_STEP, (size_t)l->out * sizeof(double));
    if (!wf || !bf) return qat_ctx_status(ctx);
    effective_weight(l, wf, bf);
    for (int64_t i = 0; i < l->weight->numel; i++)
        if (!isfinite(wf[i])) return fail(L, l, QAT_ERR_STATE, "has a weight that is not a finite number (diverged training?)");
    for (int64_t c = 0; c < l->out; c++)
        if (!isfinite(bf[c])) return fail(L, l, QAT_ERR_STATE, "has a bias that is not a finite number (diverged training?)");
    if ((st = quantize_weight(L, l, wf, op)) != QAT_OK ||
        (st = quantize_bias(L, l, in.scale, bf, op)) != QAT_OK)
        return st;
    *end = j; /* L->cur already holds op->output (set by aparams_of above) */
    return QAT_OK;
}

static qat_status lower_layer(lowering *L, int *i) {
    qat_model *m = L->m;
    qat_layer *l = &m->layers[*i];
    qat_qop *op;
    int64_t h, w;
    qat_status st;
    switch (l->kind) {
    case QAT_LAYER_LINEAR:
    case QAT_LAYER_CONV2D: return lower_product(L, *i, i);
    case QAT_LAYER_BATCHNORM:
        return fail(L, l, QAT_ERR_UNSUPPORTED, "a BatchNorm not folded into a Linear/Conv has no integer form");
    case QAT_LAYER_RELU:
        op = new_op(L, l, QAT_QOP_RELU);
        if (L->cur.zero_point > op->act_min) op->act_min = L->cur.zero_point;
        set_out(L, op, L->rank, L->shape[0], L->shape[1], L->shape[2]);
        return QAT_OK;
    case QAT_LAYER_RELU6:
        return fail(L, l, QAT_ERR_UNSUPPORTED, "a ReLU6 not fused to a Linear/Conv leaves the quantization grid");
    case QAT_LAYER_MAXPOOL2D:
        if ((st = window_shape(L, l, l->kernel, l->stride, 0, &h, &w)) != QAT_OK) return st;
        op = new_op(L, l, QAT_QOP_MAXPOOL2D);
        set_out(L, op, 3, L->shape[0], h, w);
        return QAT_OK;
    case QAT_LAYER_AVGPOOL2D: {
        if ((st = window_shape(L, l, l->kernel, l->stride, 0, &h, &w)) != QAT_OK) return st;
        qat_aparams in = L->cur;
        if ((st = aparams_of(L, l, l->aq, &L->cur)) != QAT_OK) return st;
        op = new_op(L, l, QAT_QOP_AVGPOOL2D);
        set_out(L, op, 3, L->shape[0], h, w);
        op->multiplier = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, sizeof(int32_t));
        op->shift = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, sizeof(int32_t));
        if (!op->multiplier || !op->shift) return qat_ctx_status(m->ctx);
        int sh;
        double M = (double)in.scale / ((double)L->cur.scale * l->kernel * l->kernel);
        if (qat_quantize_multiplier(M, op->multiplier, &sh) != QAT_OK)
            return fail(L, l, QAT_ERR_STATE, "its requantization multiplier is not finite");
        *op->shift = sh;
        return QAT_OK;
    }
    case QAT_LAYER_FLATTEN:
        op = new_op(L, l, QAT_QOP_FLATTEN);
        set_out(L, op, 1, L->rank == 3 ? L->shape[0] * L->shape[1] * L->shape[2] : L->shape[0], 0, 0);
        return QAT_OK;
    case QAT_LAYER_DROPOUT: return QAT_OK; /* identity at inference */
    case QAT_LAYER_KIND_COUNT: break;
    }
    return fail(L, l, QAT_ERR_ARG, "unknown layer kind");
}

qat_status qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_qmodel *out) {
    if (!m || !out) return QAT_ERR_ARG;
    qat_ctx *ctx = m->ctx;
    if (!m->built || !m->prepared)
        return qat_ctx_fail(ctx, QAT_ERR_STATE, "lower: the model must be built and prepared for QAT (qat_prepare)");
    if ((in_rank != 1 && in_rank != 3) || !in_shape)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "lower: the input shape must be [C, H, W] or [F]");
    for (int d = 0; d < in_rank; d++)
        if (in_shape[d] < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "lower: input dimensions must be >= 1");
    memset(out, 0, sizeof *out);
    snprintf(out->producer, sizeof out->producer, "qat %s", QAT_VERSION_STRING);
    lowering L = {.m = m, .q = out, .rank = in_rank};
    memcpy(L.shape, in_shape, (size_t)in_rank * sizeof *in_shape);
    out->in_rank = in_rank;
    memcpy(out->in_shape, L.shape, sizeof out->in_shape);
    qat_status st = aparams_of(&L, NULL, m->input_aq, &L.cur);
    out->input = L.cur;
    for (int i = 0; st == QAT_OK && i < m->n_layers; i++) st = lower_layer(&L, &i);
    if (st != QAT_OK) return st;
    if (out->n_ops == 0 || L.rank != 1)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "lower: the model must end in a vector of logits");
    out->n_outputs = L.shape[0];
    return QAT_OK;
}
