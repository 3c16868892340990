/* The summary of a model graph or of an integer program: a row per node
 * (shape, parameters, multiply-accumulates, quantization) and the totals
 * (qat/analyze.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "qat/analyze.h"
#include "qat/export.h"

/* Bytes of n weights packed at `bits` each, rounded up to whole bytes. */
static int64_t packed_bytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

/* A weight type's bits, granularity and the range of its scales, into r. */
static void weight_columns(const qat_qtype *q, qat_summary_row *r) {
    r->wbits = q->bits;
    r->waxis = qat_qtype_axis(q);
    r->wblock = r->waxis == -2 && q->rank > 1 ? q->block[1] : 0;
    r->wscale_min = r->wscale_max = q->scale[0];
    for (int64_t p = 1; p < q->nparams; p++) {
        r->wscale_min = fminf(r->wscale_min, q->scale[p]);
        r->wscale_max = fmaxf(r->wscale_max, q->scale[p]);
    }
}

/* An activation quantization's columns: bits, scale, zero point and the
 * real range the storage range stands for. */
static void act_columns(int bits, int32_t qmin, int32_t qmax, float scale, int32_t zp, bool observed,
                        qat_summary_row *r) {
    r->abits = bits;
    r->aobserved = observed;
    if (!observed) return;
    r->ascale = scale, r->azero = zp;
    r->amin = scale * (float)(qmin - zp), r->amax = scale * (float)(qmax - zp);
}

/* The integer runtime's peak activation bytes for one sample of q; -1
 * when it cannot plan q. */
static int64_t plan_peak(const qat_qmodel *q, qat_ctx *ctx) {
    int64_t *offsets = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(q->n_tensors + q->n_ops) * sizeof *offsets);
    qat_plan plan;
    return offsets && qat_plan_program(q, 1, offsets, &plan, NULL, 0) == QAT_OK ? plan.peak_activation_bytes : -1;
}

/* m's peak activation bytes when it can be lowered: prepared, every point
 * observed. Lowering failures (a custom op, say) are not the summary's:
 * their message is dropped and the peak is -1. */
static int64_t model_peak(qat_model *m, int rank, const int64_t *shape) {
    if (!m->prepared) return -1;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].aq && m->layers[i].aq->obs.updates == 0) return -1;
    qat_ctx *pctx = qat_ctx_new();
    if (!pctx) return -1;
    qat_qmodel q;
    int64_t peak = -1;
    if (qat_qmodel_lower(m, rank, shape, pctx, &q) == QAT_OK) peak = plan_peak(&q, pctx);
    else qat_ctx_clear_error(m->ctx);
    qat_ctx_free(pctx);
    return peak;
}

/* Parameters, MACs and weight storage of layer l, whose per-sample output
 * shape is s (rank 1 or 3). */
static void layer_sizes(const qat__layer *l, const int64_t *s, int rank, qat_summary_row *r) {
    if (l->weight) r->params += l->weight->numel;
    if (l->bias) r->params += l->bias->numel;
    if (l->gamma) r->params += l->gamma->numel + l->beta->numel;
    const qat__op_kind *op = qat__op(l->kind);
    if (op->macs) r->macs = op->macs(l, rank, s);
    if (l->wq) /* the integer program's op: packed weights and an int32 bias per output channel */
        r->weight_bytes = packed_bytes(l->weight->numel, l->wq->bits) + 4 * l->weight->shape[0];
    else if (l->folded)
        r->weight_bytes = 0; /* in the weights and bias of the layer before it */
    else
        r->weight_bytes = 4 * r->params;
}

qat_status qat_model_summary(qat_model *m, int in_rank, const int64_t *in_shape, qat_ctx *ctx, qat_summary *out) {
    if (!m || !ctx || !out) return QAT_ERR_ARG;
    if (!m->built) return qat_ctx_fail(ctx, QAT_ERR_STATE, "summary: build the model first");
    if (!in_shape) in_rank = m->in_rank, in_shape = m->in_shape;
    if (in_rank != 1 && in_rank != 3)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "summary: the model declares no input shape: give one ([C, H, W] or [F])");
    int n = qat__model_output(m) + 1;
    qat_summary_row *rows = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n * sizeof *rows);
    int *ranks = malloc((size_t)m->n_layers * sizeof *ranks);
    int64_t(*shapes)[3] = malloc((size_t)m->n_layers * sizeof *shapes);
    qat_status st = !rows ? qat_ctx_status(ctx)
                    : !ranks || !shapes ? qat_ctx_fail(ctx, QAT_ERR_NOMEM, "summary: out of memory")
                                        : qat_model_shapes(m, in_rank, in_shape, ranks, shapes);
    if (st != QAT_OK && ctx != m->ctx && qat_ctx_status(m->ctx) != QAT_OK) /* the shapes' message, on ctx */
        qat_ctx_fail(ctx, st, "summary: %s", qat_ctx_error(m->ctx));
    *out = (qat_summary){.n_rows = n, .rows = rows};
    for (int i = 0; st == QAT_OK && i < n; i++) {
        const qat__layer *l = &m->layers[i];
        qat_summary_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", l->name);
        snprintf(r->op, sizeof r->op, "%s", qat_layer_kind_str(l->kind));
        r->rank = ranks[i];
        memcpy(r->shape, shapes[i], sizeof r->shape);
        layer_sizes(l, shapes[i], ranks[i], r);
        qat_qtype q;
        if (l->wq && (st = qat_model_weight_qtype(m, i, ctx, &q)) != QAT_OK) break;
        if (l->wq) weight_columns(&q, r);
        if (l->aq)
            act_columns(l->aq->q.bits, l->aq->q.qmin, l->aq->q.qmax, l->aq->q.scale[0], l->aq->q.zero_point[0],
                        l->aq->obs.updates > 0, r);
        out->params += r->params, out->macs += r->macs, out->weight_bytes += r->weight_bytes;
    }
    free(ranks), free(shapes);
    if (st != QAT_OK) return st;
    out->float_weight_bytes = 4 * out->params;
    out->peak_activation_bytes = model_peak(m, in_rank, in_shape);
    out->normalization = m->norm;
    return QAT_OK;
}

qat_status qat_qmodel_summary(const qat_qmodel *q, qat_ctx *ctx, qat_summary *out) {
    if (!q || !ctx || !out) return QAT_ERR_ARG;
    int n = q->n_ops + 1;
    qat_summary_row *rows = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n * sizeof *rows);
    if (!rows) return qat_ctx_status(ctx);
    *out = (qat_summary){.n_rows = n, .rows = rows};
    for (int i = 0; i < n; i++) {
        qat_summary_row *r = &rows[i];
        const qat_qop *op = i ? &q->ops[i - 1] : NULL;
        const qat_qtensor *t = &q->tensors[op ? op->output : q->input];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", op ? op->name : t->name);
        if (!op) snprintf(r->op, sizeof r->op, "input");
        else if (op->act != QAT_ACT_NONE)
            snprintf(r->op, sizeof r->op, "%s+%s", qat_qop_kind_str(op->kind), qat_act_kind_str(op->act));
        else snprintf(r->op, sizeof r->op, "%s", qat_qop_kind_str(op->kind));
        r->rank = t->rank;
        memcpy(r->shape, t->shape, sizeof r->shape);
        act_columns(t->q.bits, t->q.qmin, t->q.qmax, t->q.scale, t->q.zero_point, true, r);
        if (op && (op->kind == QAT_QOP_LINEAR || op->kind == QAT_QOP_CONV2D)) {
            int64_t wn = 1, O = op->wq.shape[0];
            for (int d = 0; d < op->wq.rank; d++) wn *= op->wq.shape[d];
            r->params = wn + O; /* the program always has an int32 bias per output channel */
            r->macs = wn * (op->kind == QAT_QOP_CONV2D && t->rank == 3 ? t->shape[1] * t->shape[2] : 1);
            r->weight_bytes = packed_bytes(wn, op->wq.bits) + 4 * O;
            weight_columns(&op->wq, r);
        }
        out->params += r->params, out->macs += r->macs, out->weight_bytes += r->weight_bytes;
    }
    out->float_weight_bytes = 4 * out->params;
    qat_ctx *pctx = qat_ctx_new(); /* the plan's offsets: freed with it */
    out->peak_activation_bytes = pctx ? plan_peak(q, pctx) : -1;
    qat_ctx_free(pctx);
    out->normalization = q->norm;
    return QAT_OK;
}
