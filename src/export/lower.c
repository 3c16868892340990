/* Lowering: a prepared model graph becomes an integer program
 * (qat/runtime.h), one op per fusion group. Each kind's rule is the lower
 * hook of its op-table entry (src/layers/ops/<kind>.c); this file is the
 * driver and the kit the hooks call (src/layers/op.h).
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

#include "fakequant/kernels.h"
#include "internal.h"
#include "layers/op.h"
#include "runtime/subchannel.h"

struct qat__lowering {
    qat_model *m;
    qat_ctx *ctx;      /* the program's memory */
    qat_qmodel *q;
    int *tensor_of;    /* [n_layers]: the program tensor holding each layer's output, or -1 */
    bool *consumed;    /* [n_layers]: fused into a group already emitted */
    int *ranks;        /* [n_layers] per-sample shapes */
    int64_t (*shapes)[3];
};
typedef qat__lowering lowering;

qat_model *qat__lower_model(const lowering *L) { return L->m; }

qat_status qat__lower_fail(lowering *L, const qat__layer *l, qat_status s, const char *msg) {
    return qat_ctx_fail(L->m->ctx, s, "lower: layer %s: %s", l->name, msg);
}

/* The quantization an observed activation point has reached. */
qat_status qat__lower_aparams(lowering *L, const qat__layer *l, qat_aparams *out) {
    const qat__act_quant *a = l->aq;
    if (!a) return qat__lower_fail(L, l, QAT_ERR_STATE, "has no activation quantizer (prepare the model first)");
    if (a->obs.updates == 0)
        return qat__lower_fail(L, l, QAT_ERR_STATE, "its activation range was never observed: train (or calibrate) "
                    "the prepared model before exporting");
    *out = (qat_aparams){.scale = a->q.scale[0], .zero_point = a->q.zero_point[0], .bits = a->q.bits,
                         .is_signed = a->q.is_signed, .qmin = a->q.qmin, .qmax = a->q.qmax};
    if (!(out->scale > 0) || !isfinite(out->scale))
        return qat__lower_fail(L, l, QAT_ERR_STATE, "its activation scale is not a positive number");
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
qat_qop *qat__lower_op(lowering *L, qat_qop_kind kind, int name_id, int n, const int *in, int out_id,
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

void *qat__lower_alloc(lowering *L, int64_t n, size_t size) { return qat_ctx_alloc(L->ctx, QAT_MEM_PERSIST, (size_t)n * size); }

qat_status qat__lower_multipliers(lowering *L, const qat__layer *l, qat_qop *op, int n, const double *M) {
    op->n_mult = n;
    op->multiplier = qat__lower_alloc(L, n, sizeof(int32_t));
    op->shift = qat__lower_alloc(L, n, sizeof(int32_t));
    if (!op->multiplier || !op->shift) return qat_ctx_status(L->ctx);
    for (int i = 0; i < n; i++) {
        int sh;
        if (qat_quantize_multiplier(M[i], &op->multiplier[i], &sh) != QAT_OK)
            return qat__lower_fail(L, l, QAT_ERR_STATE, "its requantization multiplier is not finite");
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
    int bits = l->qcfg ? l->qcfg->block_scale_bits : 0;
    if (bits && qat_qop_subchannel(op)) { /* compact: the forward's scales, with their two levels kept */
        op->sub_bits = bits;
        op->row_scale = qat__lower_alloc(L, op->wq.pshape[0], sizeof(float));
        op->subscale = qat__lower_alloc(L, op->wq.nparams, sizeof(int32_t));
        if (!op->row_scale || !op->subscale) return qat_ctx_status(L->ctx);
        qat_qtype_compact_scales(&op->wq, bits, op->row_scale, op->subscale);
    } else if (bits) { /* one block a row: a per-channel op, on the scales the forward used */
        qat_qtype_compact_scales(&op->wq, bits, NULL, NULL);
    }
    if (!(op->weight = qat__lower_alloc(L, l->weight->numel, sizeof(int32_t)))) return qat_ctx_status(L->ctx);
    qat_quantize(&op->wq, w, op->weight);
    return QAT_OK;
}

/* Sub-channel weights: each row's accumulation scale, its bias there, the
 * output multiplier and every block's conversion (docs/subchannel.md). */
static qat_status subchannel_sums(lowering *L, const qat__layer *l, const double *b, qat_qop *op) {
    int64_t O = op->wq.shape[0];
    op->n_mult = (int)O;
    op->multiplier = qat__lower_alloc(L, O, sizeof(int32_t)), op->shift = qat__lower_alloc(L, O, sizeof(int32_t));
    op->block_multiplier = qat__lower_alloc(L, op->wq.nparams, sizeof(int32_t)), op->block_shift = qat__lower_alloc(L, op->wq.nparams, sizeof(int32_t));
    if (!op->multiplier || !op->shift || !op->block_multiplier || !op->block_shift) return qat_ctx_status(L->ctx);
    char why[200], msg[280];
    if (qat__sc_accumulation(op, &L->q->tensors[op->inputs[0]].q, L->q->tensors[op->output].q.scale, b, why, sizeof why))
        return QAT_OK;
    snprintf(msg, sizeof msg, "its sub-channel sums have no int32 accumulation scale: %s", why);
    return qat__lower_fail(L, l, QAT_ERR_UNSUPPORTED, msg);
}

/* Compact block scales: T = bias + Σ_j q_j·P_j must fit int32 for every
 * input (docs/subchannel.md); a layer where it could not is refused. */
static qat_status compact_bounds(lowering *L, const qat__layer *l, qat_qop *op) {
    const qat_qtype *q = &op->wq;
    int64_t X = qat__sc_input_bound(&L->q->tensors[op->inputs[0]].q);
    int64_t *work = malloc((size_t)(q->nparams / q->pshape[0]) * sizeof *work);
    if (!work) return qat_ctx_fail(L->m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    char why[200], msg[300];
    bool ok = true;
    for (int64_t o = 0; ok && o < q->shape[0]; o++) {
        qat__sc_row_sums(op, o, work);
        ok = qat__sc_row_bounds(op, o, X, work, why, sizeof why);
    }
    free(work);
    if (ok) return QAT_OK;
    snprintf(msg, sizeof msg, "its compact block scales make sums that could overflow int32: %s", why);
    return qat__lower_fail(L, l, QAT_ERR_UNSUPPORTED, msg);
}

/* Bias in int32 at s_in·s_w[c]; multiplier and shift of s_in·s_w[c]/s_out
 * (sub-channel weights: subchannel_sums). */
static qat_status quantize_bias(lowering *L, const qat__layer *l, float s_in, const double *b, qat_qop *op) {
    int64_t O = op->wq.shape[0], per = l->weight->numel / O;
    bool one_per_channel = !qat_qop_subchannel(op);
    op->bias = qat__lower_alloc(L, O, sizeof(int32_t));
    op->bias_scale = qat__lower_alloc(L, O, sizeof(float));
    double *M = malloc((size_t)O * sizeof *M);
    if (!op->bias || !op->bias_scale || !M) return free(M), qat_ctx_fail(L->m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (!one_per_channel && !op->subscale) return free(M), subchannel_sums(L, l, b, op);
    float s_out = L->q->tensors[op->output].q.scale;
    for (int64_t c = 0; c < O; c++) {
        /* compact block scales: the row scale, as a per-channel weight's */
        double sw = op->subscale ? op->row_scale[c / op->wq.block[0]]
                                 : op->wq.scale[qat_qtype_param_index(&op->wq, c * per)];
        double bs = (double)s_in * sw, qb = nearbyint(b[c] / bs);
        if (!(fabs(qb) <= 2147483647.0))
            return free(M), qat__lower_fail(L, l, QAT_ERR_STATE, "a bias does not fit int32 at scale s_in·s_w (scales collapsed?)");
        op->bias[c] = (int32_t)qb;
        op->bias_scale[c] = (float)bs;
        M[c] = bs / (double)s_out;
    }
    qat_status st = qat__lower_multipliers(L, l, op, (int)O, M);
    free(M);
    return st == QAT_OK && op->subscale ? compact_bounds(L, l, op) : st;
}

/* ReLU and ReLU6 commute with rounding: fq(relu(y)) = max(fq(y), zp), and
 * fq(min(y, 6)) = min(q, zp + rint(6·(1/s))) as the fake quant rounds. */
void qat__lower_fuse_act(lowering *L, qat_qop *op, const qat_aparams *out, int act_id) {
    op->act = act_id >= 0 ? qat__op(L->m->layers[act_id].kind)->act : QAT_ACT_NONE;
    if (op->act != QAT_ACT_NONE && out->zero_point > op->act_min) op->act_min = out->zero_point;
    if (op->act == QAT_ACT_RELU6) {
        float six = nearbyintf(6.0f * (1.0f / out->scale)) + (float)out->zero_point;
        if (six < (float)op->act_max) op->act_max = (int32_t)six;
    }
    if (act_id >= 0) L->consumed[act_id] = true;
}

qat_status qat__lower_product(lowering *L, int id, qat_qop_kind kind) {
    qat_model *m = L->m;
    qat__layer *l = &m->layers[id];
    if (!l->wq) return qat__lower_fail(L, l, QAT_ERR_STATE, "has no weight quantizer (prepare the model first)");
    qat__group g;
    qat__match_group(m, id, l->fold_bn >= 0, &g);
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, &m->layers[g.end], &out);
    if (st != QAT_OK) return st;
    float s_in = L->q->tensors[L->tensor_of[l->in[0]]].q.scale;
    qat_qop *op = qat__lower_op(L, kind, id, 1, l->in, g.end, &out);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    op->groups = kind == QAT_QOP_CONV2D ? l->groups : 1;
    qat__lower_fuse_act(L, op, &out, g.act);
    float *wf = malloc((size_t)l->weight->numel * sizeof *wf);
    double *bf = malloc((size_t)l->cout * sizeof *bf);
    if (!wf || !bf) st = qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (st == QAT_OK) qat__effective_weight(m, l, wf, bf);
    for (int64_t i = 0; st == QAT_OK && i < l->weight->numel; i++)
        if (!isfinite(wf[i])) st = qat__lower_fail(L, l, QAT_ERR_STATE, "has a weight that is not a finite number (diverged training?)");
    for (int64_t c = 0; st == QAT_OK && c < l->cout; c++)
        if (!isfinite(bf[c])) st = qat__lower_fail(L, l, QAT_ERR_STATE, "has a bias that is not a finite number (diverged training?)");
    if (st == QAT_OK) st = quantize_weight(L, l, wf, op);
    if (st == QAT_OK) st = quantize_bias(L, l, s_in, bf, op);
    free(wf), free(bf);
    if (g.bn >= 0) L->consumed[g.bn] = true;
    return st;
}

/* ---- what the other kinds share --------------------------------------------------------- */

const qat_aparams *qat__lower_in(const lowering *L, const qat__layer *l, int j) {
    return &L->q->tensors[L->tensor_of[l->in[j]]].q;
}

const int64_t *qat__lower_shape(const lowering *L, int id, int *rank) {
    *rank = L->ranks[id];
    return L->shapes[id];
}

qat_status qat__lower_table(lowering *L, int id, qat_lut_fn fn, float (*f)(float x, const float *attr)) {
    qat__layer *l = &L->m->layers[id];
    const qat_aparams *in = qat__lower_in(L, l, 0);
    if (in->bits > 8) return qat__lower_fail(L, l, QAT_ERR_UNSUPPORTED, "a table needs an input of at most 8 bits");
    qat_aparams out;
    qat_status st = qat__lower_aparams(L, l, &out);
    if (st != QAT_OK) return st;
    qat_qop *op = qat__lower_op(L, QAT_QOP_LUT, id, 1, l->in, id, &out);
    op->lut = fn;
    op->table_len = in->qmax - in->qmin + 1;
    if (!(op->table = qat__lower_alloc(L, op->table_len, sizeof(int32_t)))) return qat_ctx_status(L->ctx);
    float inv = 1.0f / out.scale;
    for (int32_t v = in->qmin; v <= in->qmax; v++) {
        float x = (float)(v - in->zero_point) * in->scale;
        op->table[v - in->qmin] = qat__quant1(f(x, l->attr), inv, out.zero_point, out.qmin, out.qmax, NULL);
    }
    return QAT_OK;
}

qat_qop *qat__lower_same(lowering *L, int id, qat_qop_kind kind) {
    qat__layer *l = &L->m->layers[id];
    qat_aparams a = *qat__lower_in(L, l, 0);
    qat_qop *op = qat__lower_op(L, kind, id, 1, l->in, id, &a);
    op->kh = l->kh, op->kw = l->kw, op->stride_h = l->sh, op->stride_w = l->sw, op->pad_h = l->ph, op->pad_w = l->pw;
    return op;
}

void qat__lower_alias(lowering *L, int id) { L->tensor_of[id] = L->tensor_of[L->m->layers[id].in[0]]; }

/* Each layer by its kind's rule, unless a group before it took it in. */
static qat_status lower_layer(lowering *L, int id) {
    if (L->consumed[id]) return QAT_OK;
    const qat__op_kind *op = qat__op(L->m->layers[id].kind);
    if (!op->lower) return qat__lower_fail(L, &L->m->layers[id], QAT_ERR_ARG, "unknown layer kind");
    return op->lower(L, id);
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
        st = qat__lower_aparams(&L, &m->layers[0], &a);
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
    /* only the layers the output depends on: a branch that feeds nothing
     * is trained with the rest but has no place in the program */
    bool *live = st == QAT_OK ? calloc((size_t)n, sizeof *live) : NULL;
    if (st == QAT_OK && !live) st = qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "lower: out of memory");
    if (live) live[last] = true;
    for (int i = last; live && i > 0; i--)
        for (int k = 0; live[i] && k < m->layers[i].n_in; k++) live[m->layers[i].in[k]] = true;
    for (int i = 1; st == QAT_OK && i <= last; i++)
        if (live[i]) st = lower_layer(&L, i);
    free(live);
    if (st == QAT_OK) {
        out->output = L.tensor_of[last];
        if (out->output < 0 || out->tensors[out->output].rank != 1)
            st = qat_ctx_fail(m->ctx, QAT_ERR_SHAPE, "lower: the model must end in a vector of logits");
    }
    free(L.tensor_of), free(L.consumed), free(L.ranks), free(L.shapes);
    return st;
}
