/* Lowering: a prepared model graph becomes an integer program
 * (qat/runtime.h), one op per fusion group.
 *
 * Every number is computed the way the fake-quantized forward computes
 * it (same float operations, same order), so the integers here are the
 * ones the QAT model simulated: weights through qat_qtype_calibrate and
 * qat_quantize (or the learned LSQ scales), BatchNorm folded as
 * fold_forward does in eval mode, tables through the training ops' own
 * scalar functions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakequant/internal.h"
#include "internal.h"
#include "layers/internal.h"

typedef struct {
    qat_model *m;
    qat_ctx *ctx;      /* the program's memory */
    qat_qmodel *q;
    int *tensor_of;    /* [n_layers]: the program tensor holding each layer's output, or -1 */
    bool *consumed;    /* [n_layers]: fused into a group already emitted */
    int *ranks;        /* [n_layers] per-sample shapes */
    int64_t (*shapes)[3];
} lowering;

static qat_status fail(lowering *L, const qat__layer *l, qat_status s, const char *msg) {
    return qat_ctx_fail(L->m->ctx, s, "lower: layer %s: %s", l->name, msg);
}

/* The quantization an observed activation point has reached. */
static qat_status aparams_of(lowering *L, const qat__layer *l, qat_aparams *out) {
    const qat__act_quant *a = l->aq;
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

/* A new tensor for layer id's output (its per-sample shape), quantized by a. */
static int new_tensor(lowering *L, int id, const qat_aparams *a) {
    qat_qmodel *q = L->q;
    int t = q->n_tensors++;
    qat_qtensor *x = &q->tensors[t];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", L->m->layers[id].name);
    x->rank = L->ranks[id];
    memcpy(x->shape, L->shapes[id], sizeof x->shape);
    x->q = *a;
    L->tensor_of[id] = t;
    return t;
}

/* A new op named after layer `name_id`, reading the tensors of `n` layers,
 * writing a new tensor for layer out_id. */
static qat_qop *new_op(lowering *L, qat_qop_kind kind, int name_id, int n, const int *in, int out_id,
                       const qat_aparams *a) {
    qat_qmodel *q = L->q;
    qat_qop *op = &q->ops[q->n_ops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    snprintf(op->name, sizeof op->name, "%s", L->m->layers[name_id].name);
    op->n_inputs = n;
    for (int j = 0; j < n; j++) op->inputs[j] = L->tensor_of[in[j]];
    op->output = new_tensor(L, out_id, a);
    op->act_min = a->qmin, op->act_max = a->qmax, op->groups = 1;
    return op;
}

static void *arr(lowering *L, int64_t n, size_t size) { return qat_ctx_alloc(L->ctx, QAT_MEM_PERSIST, (size_t)n * size); }

static qat_status multipliers(lowering *L, const qat__layer *l, qat_qop *op, int n, const double *M) {
    op->n_mult = n;
    op->multiplier = arr(L, n, sizeof(int32_t));
    op->shift = arr(L, n, sizeof(int32_t));
    if (!op->multiplier || !op->shift) return qat_ctx_status(L->ctx);
    for (int i = 0; i < n; i++) {
        int sh;
        if (qat_quantize_multiplier(M[i], &op->multiplier[i], &sh) != QAT_OK)
            return fail(L, l, QAT_ERR_STATE, "its requantization multiplier is not finite");
        op->shift[i] = sh;
    }
    return QAT_OK;
}

/* ---- Linear / Conv ------------------------------------------------------------------ */

/* The weight's type and integers: min-max scales from the effective weight
 * (the dynamic strategy), or the learned LSQ scales. */
static qat_status quantize_weight(lowering *L, const qat__layer *l, const float *w, qat_qop *op) {
    const qat_qtype *src = l->wq;
    qat_status st = qat_qtype_init_blocks(L->ctx, &op->wq, src->bits, src->is_signed, false, src->rank, src->shape,
                                          src->block, true); /* the prepared type, ragged or not */
    if (st != QAT_OK) return qat_ctx_fail(L->m->ctx, st, "lower: %s", qat_ctx_error(L->ctx));
    op->wq.qmin = src->qmin, op->wq.qmax = src->qmax; /* keep narrow or full as prepared */
    if (l->wscale) {
        for (int64_t p = 0; p < op->wq.nparams; p++) {
            float s = l->wscale->data[p];
            op->wq.scale[p] = s >= 1e-8f ? s : 1e-8f; /* the forward's projection */
            float z = nearbyintf(l->wzero->data[p]);
            op->wq.zero_point[p] = (int32_t)(z < (float)src->qmin ? (float)src->qmin : z > (float)src->qmax ? (float)src->qmax : z);
        }
    } else {
        qat_qtype_calibrate(&op->wq, w, true);
    }
    if (!(op->weight = arr(L, l->weight->numel, sizeof(int32_t)))) return qat_ctx_status(L->ctx);
    qat_quantize(&op->wq, w, op->weight);
    return QAT_OK;
}

/* Sub-channel weights: each row's accumulation scale, its bias there, the
 * output multiplier and every block's conversion (docs/subchannel.md). */
static qat_status subchannel_sums(lowering *L, const qat__layer *l, const double *b, qat_qop *op) {
    int64_t O = op->wq.shape[0];
    op->n_mult = (int)O;
    op->multiplier = arr(L, O, sizeof(int32_t)), op->shift = arr(L, O, sizeof(int32_t));
    op->block_multiplier = arr(L, op->wq.nparams, sizeof(int32_t)), op->block_shift = arr(L, op->wq.nparams, sizeof(int32_t));
    if (!op->multiplier || !op->shift || !op->block_multiplier || !op->block_shift) return qat_ctx_status(L->ctx);
    char why[200], msg[280];
    if (qat__sc_accumulation(op, &L->q->tensors[op->inputs[0]].q, L->q->tensors[op->output].q.scale, b, why, sizeof why))
        return QAT_OK;
    snprintf(msg, sizeof msg, "its sub-channel sums have no int32 accumulation scale: %s", why);
    return fail(L, l, QAT_ERR_UNSUPPORTED, msg);
}

/* Bias in int32 at s_in·s_w[c]; multiplier and shift of s_in·s_w[c]/s_out
 * (sub-channel weights: subchannel_sums). */
static qat_status quantize_bias(lowering *L, const qat__layer *l, float s_in, const double *b, qat_qop *op) {
    int64_t O = op->wq.shape[0], per = l->weight->numel / O;
    bool one_per_channel = !qat_qop_subchannel(op);
    op->bias = arr(L, O, sizeof(int32_t));
    op->bias_scale = arr(L, O, sizeof(float));
    double *M = malloc((size_t)O * sizeof *M);
    if (!op->bias || !op->bias_scale || !M) return free(M), qat_ctx_fail(L->m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (!one_per_channel) return free(M), subchannel_sums(L, l, b, op);
    float s_out = L->q->tensors[op->output].q.scale;
    for (int64_t c = 0; c < O; c++) {
        double sw = op->wq.scale[qat_qtype_param_index(&op->wq, c * per)];
        double bs = (double)s_in * sw, qb = nearbyint(b[c] / bs);
        if (!(fabs(qb) <= 2147483647.0))
            return free(M), fail(L, l, QAT_ERR_STATE, "a bias does not fit int32 at scale s_in·s_w (scales collapsed?)");
        op->bias[c] = (int32_t)qb;
        op->bias_scale[c] = (float)bs;
        M[c] = bs / (double)s_out;
    }
    qat_status st = one_per_channel ? multipliers(L, l, op, (int)O, M) : QAT_OK;
    free(M);
    return st;
}

/* ReLU and ReLU6 commute with rounding: fq(relu(y)) = max(fq(y), zp), and
 * fq(min(y, 6)) = min(q, zp + rint(6·(1/s))) as the fake quant rounds. */
static void fuse_act(qat_qop *op, const qat_aparams *out, qat_layer_kind act) {
    op->act = act == QAT_LAYER_RELU ? QAT_ACT_RELU : act == QAT_LAYER_RELU6 ? QAT_ACT_RELU6 : QAT_ACT_NONE;
    if (op->act != QAT_ACT_NONE && out->zero_point > op->act_min) op->act_min = out->zero_point;
    if (op->act == QAT_ACT_RELU6) {
        float six = nearbyintf(6.0f * (1.0f / out->scale)) + (float)out->zero_point;
        if (six < (float)op->act_max) op->act_max = (int32_t)six;
    }
}

static qat_status lower_product(lowering *L, int id) {
    qat_model *m = L->m;
    qat__layer *l = &m->layers[id];
    if (!l->wq) return fail(L, l, QAT_ERR_STATE, "has no weight quantizer (prepare the model first)");
    qat__group g;
    qat__match_group(m, id, l->fold_bn >= 0, &g);
    qat_aparams out;
    qat_status st = aparams_of(L, &m->layers[g.end], &out);
    if (st != QAT_OK) return st;
    float s_in = L->q->tensors[L->tensor_of[l->in[0]]].q.scale;
    qat_qop *op = new_op(L, l->kind == QAT_LAYER_CONV2D ? QAT_QOP_CONV2D : QAT_QOP_LINEAR, id, 1, l->in, g.end, &out);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    op->groups = l->kind == QAT_LAYER_CONV2D ? l->groups : 1;
    fuse_act(op, &out, g.act >= 0 ? m->layers[g.act].kind : QAT_LAYER_KIND_COUNT);
    float *wf = malloc((size_t)l->weight->numel * sizeof *wf);
    double *bf = malloc((size_t)l->cout * sizeof *bf);
    if (!wf || !bf) st = qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (st == QAT_OK) qat__effective_weight(m, l, wf, bf);
    for (int64_t i = 0; st == QAT_OK && i < l->weight->numel; i++)
        if (!isfinite(wf[i])) st = fail(L, l, QAT_ERR_STATE, "has a weight that is not a finite number (diverged training?)");
    for (int64_t c = 0; st == QAT_OK && c < l->cout; c++)
        if (!isfinite(bf[c])) st = fail(L, l, QAT_ERR_STATE, "has a bias that is not a finite number (diverged training?)");
    if (st == QAT_OK) st = quantize_weight(L, l, wf, op);
    if (st == QAT_OK) st = quantize_bias(L, l, s_in, bf, op);
    free(wf), free(bf);
    if (g.bn >= 0) L->consumed[g.bn] = true;
    if (g.act >= 0) L->consumed[g.act] = true;
    return st;
}

/* ---- the other kinds ------------------------------------------------------------------ */

static const qat_aparams *in_q(lowering *L, const qat__layer *l, int j) { return &L->q->tensors[L->tensor_of[l->in[j]]].q; }

/* TFLite's ADD: both inputs to 2·max(s_a, s_b) after a left shift of 20,
 * summed in int32, the sum to the output scale. */
static qat_status lower_add(lowering *L, int id) {
    qat_model *m = L->m;
    qat__layer *l = &m->layers[id];
    qat__group g;
    qat__match_group(m, id, false, &g);
    qat_aparams out;
    qat_status st = aparams_of(L, &m->layers[g.end], &out);
    if (st != QAT_OK) return st;
    double sa = in_q(L, l, 0)->scale, sb = in_q(L, l, 1)->scale, twice = 2.0 * (sa > sb ? sa : sb);
    qat_qop *op = new_op(L, QAT_QOP_ADD, id, 2, l->in, g.end, &out);
    op->left_shift = QAT_ADD_LEFT_SHIFT;
    fuse_act(op, &out, g.act >= 0 ? m->layers[g.act].kind : QAT_LAYER_KIND_COUNT);
    if (g.act >= 0) L->consumed[g.act] = true;
    double M[3] = {sa / twice, sb / twice, twice / ((double)(1 << QAT_ADD_LEFT_SHIFT) * out.scale)};
    return multipliers(L, l, op, 3, M);
}

/* Average pooling, global average pooling and concatenation: a requant
 * of int32 sums (or of each input) to the layer's own quantization. */
static qat_status lower_requant(lowering *L, int id, qat_qop_kind kind) {
    qat__layer *l = &L->m->layers[id];
    qat_aparams out;
    qat_status st = aparams_of(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = new_op(L, kind, id, l->n_in, l->in, id, &out);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    double M[QAT_QOP_MAX_INPUTS];
    double s_in = in_q(L, l, 0)->scale;
    if (kind == QAT_QOP_AVGPOOL2D) M[0] = s_in / ((double)out.scale * l->kh * l->kw);
    if (kind == QAT_QOP_GLOBAL_AVGPOOL) {
        const int64_t *x = L->shapes[l->in[0]];
        M[0] = s_in / ((double)out.scale * (double)(x[1] * x[2]));
    }
    if (kind == QAT_QOP_CONCAT)
        for (int j = 0; j < l->n_in; j++) M[j] = in_q(L, l, j)->scale / (double)out.scale;
    return multipliers(L, l, op, kind == QAT_QOP_CONCAT ? l->n_in : 1, M);
}

/* An element-wise function of an input of at most 8 bits as a table: the
 * output integer for each input integer, computed as the fake-quantized
 * model computes it (dequantize in float32, the op's own scalar
 * function, fake-quantize). Integer-only and exact. */
static qat_status lower_table(lowering *L, int id) {
    qat__layer *l = &L->m->layers[id];
    const qat_aparams *in = in_q(L, l, 0);
    if (in->bits > 8) return fail(L, l, QAT_ERR_UNSUPPORTED, "a table needs an input of at most 8 bits");
    qat_aparams out;
    qat_status st = aparams_of(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = new_op(L, QAT_QOP_LUT, id, 1, l->in, id, &out);
    op->lut = l->kind == QAT_LAYER_SIGMOID ? QAT_LUT_SIGMOID : l->kind == QAT_LAYER_TANH ? QAT_LUT_TANH : QAT_LUT_HARDSWISH;
    op->table_len = in->qmax - in->qmin + 1;
    if (!(op->table = arr(L, op->table_len, sizeof(int32_t)))) return qat_ctx_status(L->ctx);
    float inv = 1.0f / out.scale;
    for (int32_t v = in->qmin; v <= in->qmax; v++) {
        float x = (float)(v - in->zero_point) * in->scale;
        float y = op->lut == QAT_LUT_SIGMOID ? qat_eval_sigmoid(x) : op->lut == QAT_LUT_TANH ? qat_eval_tanh(x)
                                                                                             : qat_eval_hardswish(x);
        op->table[v - in->qmin] = qat__quant1(y, inv, out.zero_point, out.qmin, out.qmax, NULL);
    }
    return QAT_OK;
}

/* Ops that keep their input's quantization: max pooling, flatten, ReLU. */
static qat_status lower_same(lowering *L, int id, qat_qop_kind kind) {
    qat__layer *l = &L->m->layers[id];
    qat_aparams a = *in_q(L, l, 0);
    qat_qop *op = new_op(L, kind, id, 1, l->in, id, &a);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    if (kind == QAT_QOP_RELU && a.zero_point > op->act_min) op->act_min = a.zero_point;
    return QAT_OK;
}

static qat_status lower_layer(lowering *L, int id) {
    qat__layer *l = &L->m->layers[id];
    if (L->consumed[id]) return QAT_OK;
    switch (l->kind) {
    case QAT_LAYER_LINEAR:
    case QAT_LAYER_CONV2D: return lower_product(L, id);
    case QAT_LAYER_ADD: return lower_add(L, id);
    case QAT_LAYER_AVGPOOL2D: return lower_requant(L, id, QAT_QOP_AVGPOOL2D);
    case QAT_LAYER_GLOBAL_AVGPOOL: return lower_requant(L, id, QAT_QOP_GLOBAL_AVGPOOL);
    case QAT_LAYER_CONCAT: return lower_requant(L, id, QAT_QOP_CONCAT);
    case QAT_LAYER_SIGMOID:
    case QAT_LAYER_TANH:
    case QAT_LAYER_HARDSWISH: return lower_table(L, id);
    case QAT_LAYER_MAXPOOL2D: return lower_same(L, id, QAT_QOP_MAXPOOL2D);
    case QAT_LAYER_FLATTEN: return lower_same(L, id, QAT_QOP_FLATTEN);
    case QAT_LAYER_RELU: return lower_same(L, id, QAT_QOP_RELU);
    case QAT_LAYER_DROPOUT: L->tensor_of[id] = L->tensor_of[l->in[0]]; return QAT_OK; /* identity at inference */
    case QAT_LAYER_BATCHNORM:
        return fail(L, l, QAT_ERR_UNSUPPORTED, "a BatchNorm not folded into the Linear/Conv before it (fold_bn off, or "
                    "that layer's output feeds other layers too) has no integer form");
    case QAT_LAYER_RELU6:
        return fail(L, l, QAT_ERR_UNSUPPORTED, "a ReLU6 not fused to a Linear/Conv/Add leaves the quantization grid");
    case QAT_LAYER_CUSTOM: {
        char msg[96];
        snprintf(msg, sizeof msg, "custom op \"%s\" has no integer form", l->custom->name);
        return fail(L, l, QAT_ERR_UNSUPPORTED, msg);
    }
    case QAT_LAYER_INPUT:
    case QAT_LAYER_KIND_COUNT: break;
    }
    return fail(L, l, QAT_ERR_ARG, "unknown layer kind");
}

qat_status qat_qmodel_lower(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx, qat_qmodel *out) {
    if (!m || !out || !ctx) return QAT_ERR_ARG;
    if (!m->built || !m->prepared)
        return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "lower: the model must be built and prepared for QAT (qat_prepare)");
    if (!in_shape) in_rank = m->in_rank, in_shape = m->in_shape;
    if (in_rank != 1 && in_rank != 3)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "lower: the input shape must be [C, H, W] or [F] (the model declares none)");
    int n = m->n_layers;
    memset(out, 0, sizeof *out);
    lowering L = {.m = m, .ctx = ctx, .q = out};
    L.tensor_of = malloc((size_t)n * sizeof *L.tensor_of);
    L.consumed = calloc((size_t)n, sizeof *L.consumed);
    L.ranks = malloc((size_t)n * sizeof *L.ranks);
    L.shapes = malloc((size_t)n * sizeof *L.shapes);
    out->tensors = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(n + 1) * sizeof *out->tensors);
    out->ops = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(n + 1) * sizeof *out->ops);
    qat_status st = QAT_OK;
    if (!L.tensor_of || !L.consumed || !L.ranks || !L.shapes || !out->tensors || !out->ops)
        st = qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (st == QAT_OK) st = qat_model_shapes(m, in_rank, in_shape, L.ranks, L.shapes);
    if (st == QAT_OK) {
        snprintf(out->producer, sizeof out->producer, "qat %s", QAT_VERSION_STRING);
        out->config = "";
        qat_aparams a;
        st = aparams_of(&L, &m->layers[0], &a);
        if (st == QAT_OK) out->input = new_tensor(&L, 0, &a);
    }
    if (st == QAT_OK && m->norm) { /* the program's own copy, checked against the shape lowered for */
        char msg[200];
        qat_normalization *norm = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *norm);
        if (!norm) st = qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
        else if (qat_normalization_check(m->norm, in_rank, in_shape, msg, sizeof msg) != QAT_OK)
            st = qat_ctx_fail(m->ctx, QAT_ERR_SHAPE, "lower: the input normalization: %s", msg);
        else *norm = *m->norm, out->norm = norm;
    }
    int last = qat__model_output(m);
    for (int i = 1; st == QAT_OK && i <= last; i++) st = lower_layer(&L, i);
    if (st == QAT_OK) {
        out->output = L.tensor_of[last];
        if (out->output < 0 || out->tensors[out->output].rank != 1)
            st = qat_ctx_fail(m->ctx, QAT_ERR_SHAPE, "lower: the model must end in a vector of logits");
    }
    free(L.tensor_of), free(L.consumed), free(L.ranks), free(L.shapes);
    return st;
}
