/* The executor of an integer program: each op's constants prepared once
 * (qat_runtime_prepare), then ops run in order over the planned arena
 * (qat_runtime_run). One sample after another inside a tensor; linear ops
 * take the whole batch in one GEMM. */
#include <string.h>

#include "kernels.h"
#include "subchannel.h"

const char *qat_runtime_kernel(void) { return qat__gemm_kernel_name(); }

static void prepare_op(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, uint8_t *c) {
    if (op->kind == QAT_QOP_LUT) {
        for (int i = 0; i < op->table_len; i++) ((int8_t *)c)[i] = (int8_t)op->table[i];
        return;
    }
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return;
    (void)q;
    if (qat_qop_subchannel(op)) { /* blocks with their own scales: subchannel.c's layout */
        qat__sc_prepare(op, c);
        return;
    }
    const qat_qtype *wq = &op->wq;
    int16_t *w16 = (int16_t *)c;
    int64_t row = g->depthwise ? g->kk : g->Kp, rows = g->depthwise ? g->O : qat__round_up(g->O, QAT_WROWS);
    memset(w16, 0, (size_t)(rows * row) * sizeof *w16);
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t k = 0; k < g->K; k++) {
            int64_t i = o * g->K + k;
            w16[o * row + k] = (int16_t)(op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)]);
        }
}

void qat_runtime_prepare(const qat_qmodel *q, const qat_plan *plan, void *consts) {
    for (int i = 0; i < q->n_ops; i++) {
        qat__op_geom g;
        qat__op_geometry(q, &q->ops[i], plan->max_batch, &g);
        prepare_op(q, &q->ops[i], &g, (uint8_t *)consts + plan->const_offset[i]);
    }
}

/* ---- one op over n samples -------------------------------------------------------- */

typedef struct {
    const qat_qmodel *q;
    const qat_plan *plan;
    const uint8_t *consts;
    int8_t *arena;
    uint8_t *scratch;
    int64_t n;
} exec;

static int8_t *tensor(const exec *e, int t) { return e->arena + e->plan->offset[t]; }

static void run_conv(const exec *e, const qat_qop *op, const qat__op_geom *g, const int16_t *w16) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    int16_t *xpad = (int16_t *)e->scratch;
    int16_t *col = (int16_t *)(e->scratch + qat__round_up((g->C * g->Hp * g->Wp + QAT_IM2COL_CHUNK) * 2, 64));
    int32_t zp = e->q->tensors[op->output].q.zero_point;
    for (int64_t s = 0; s < e->n; s++) {
        qat__pad_s8(x + s * in_n, g->C, g->H, g->W, op->pad_h, op->pad_w, in->q.zero_point, xpad);
        if (g->depthwise) {
            qat__depthwise_args d = {.xp = xpad, .w16 = w16, .C = g->C, .Hp = g->Hp, .Wp = g->Wp, .O = g->O,
                                     .kh = op->kh, .kw = op->kw, .sh = op->stride_h, .sw = op->stride_w,
                                     .OH = g->OH, .OW = g->OW, .bias = op->bias, .m0 = op->multiplier,
                                     .shift = op->shift, .zp = zp, .lo = op->act_min, .hi = op->act_max,
                                     .y = y + s * out_n};
            qat__depthwise(&d);
            continue;
        }
        int Cg = g->C / g->groups, P = g->OH * g->OW;
        for (int grp = 0; grp < g->groups; grp++) {
            qat__im2col_s16(xpad + (int64_t)grp * Cg * g->Hp * g->Wp, Cg, g->Hp, g->Wp, op->kh, op->kw, op->stride_h,
                            op->stride_w, g->OH, g->OW, g->Pp, col);
            int64_t o0 = (int64_t)grp * g->Og;
            qat__gemm_args a = {.w = w16 + o0 * g->Kp, .col = col, .O = g->Og, .P = P, .Kp = g->Kp, .Pp = g->Pp,
                                .bias = op->bias + o0, .m0 = op->multiplier + o0, .shift = op->shift + o0, .zp = zp,
                                .lo = op->act_min, .hi = op->act_max, .out = y + s * out_n + o0 * P, .so = P, .sp = 1};
            qat__gemm_requant(&a);
        }
    }
}

static void run_linear(const exec *e, const qat_qop *op, const qat__op_geom *g, const int16_t *w16) {
    const int8_t *x = tensor(e, op->inputs[0]);
    int32_t zp_in = e->q->tensors[op->inputs[0]].q.zero_point;
    int16_t *col = (int16_t *)e->scratch;
    /* the input transposed: col[k][s] = x[s][k] - zp */
    for (int64_t s = 0; s < e->n; s++)
        for (int64_t k = 0; k < g->K; k++) col[k * g->Pp + s] = (int16_t)(x[s * g->K + k] - zp_in);
    if (g->K < g->Kp) memset(col + (int64_t)g->K * g->Pp, 0, (size_t)g->Pp * sizeof *col);
    qat__gemm_args a = {.w = w16, .col = col, .O = g->O, .P = (int)e->n, .Kp = g->Kp, .Pp = g->Pp, .bias = op->bias,
                        .m0 = op->multiplier, .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point,
                        .lo = op->act_min, .hi = op->act_max, .out = tensor(e, op->output), .so = 1, .sp = g->O};
    qat__gemm_requant(&a);
}

static qat__requant_args requant_of(const exec *e, const qat_qop *op, int input, int m) {
    return (qat__requant_args){.zp_in = e->q->tensors[op->inputs[input]].q.zero_point, .m0 = op->multiplier[m],
                               .shift = op->shift[m], .zp_out = e->q->tensors[op->output].q.zero_point,
                               .lo = op->act_min, .hi = op->act_max};
}

static void run_pool(const exec *e, const qat_qop *op) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int64_t in_n = qat_qtensor_numel(in), out_n = qat_qtensor_numel(&e->q->tensors[op->output]);
    qat__requant_args r = op->kind == QAT_QOP_AVGPOOL2D ? requant_of(e, op, 0, 0) : (qat__requant_args){0};
    bool two = op->kh == 2 && op->kw == 2 && op->stride_h == 2 && op->stride_w == 2 && !op->pad_h && !op->pad_w;
    for (int64_t s = 0; s < e->n; s++) {
        const int8_t *xs = x + s * in_n;
        int8_t *ys = y + s * out_n;
        if (op->kind == QAT_QOP_AVGPOOL2D)
            qat__avgpool_s8(xs, C, H, W, op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w, &r, ys);
        else if (!(two && qat__maxpool2_s8_simd(xs, C, H, W, ys, (int8_t *)e->scratch)))
            qat__maxpool_s8(xs, C, H, W, op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w, ys);
    }
}

/* Concatenation along the per-sample first axis (channels, or features):
 * each input's block, requantized to the output, at its place in y. */
static void run_concat(const exec *e, const qat_qop *op) {
    int8_t *y = tensor(e, op->output);
    int64_t out_n = qat_qtensor_numel(&e->q->tensors[op->output]);
    for (int64_t s = 0; s < e->n; s++) {
        int64_t at = 0;
        for (int i = 0; i < op->n_inputs; i++) {
            int64_t in_n = qat_qtensor_numel(&e->q->tensors[op->inputs[i]]);
            qat__requant_args r = requant_of(e, op, i, i);
            qat__requant_s8(tensor(e, op->inputs[i]) + s * in_n, in_n, &r, y + s * out_n + at);
            at += in_n;
        }
    }
}

static void run_op(const exec *e, int i) {
    const qat_qop *op = &e->q->ops[i];
    qat__op_geom g;
    qat__op_geometry(e->q, op, e->plan->max_batch, &g);
    const void *c = e->consts + e->plan->const_offset[i];
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]], *out = &e->q->tensors[op->output];
    int64_t n = e->n * qat_qtensor_numel(in);
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    switch (op->kind) {
    case QAT_QOP_CONV2D:
        if (qat_qop_subchannel(op)) qat__sc_run_conv(e->q, op, &g, c, x, y, e->scratch, e->n);
        else run_conv(e, op, &g, c);
        return;
    case QAT_QOP_LINEAR:
        if (qat_qop_subchannel(op)) qat__sc_run_linear(e->q, op, &g, c, x, y, e->scratch, e->n);
        else run_linear(e, op, &g, c);
        return;
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D: run_pool(e, op); return;
    case QAT_QOP_GLOBAL_AVGPOOL: {
        qat__requant_args r = requant_of(e, op, 0, 0);
        int HW = (int)(in->shape[1] * in->shape[2]);
        for (int64_t s = 0; s < e->n; s++)
            qat__global_avgpool_s8(x + s * qat_qtensor_numel(in), (int)in->shape[0], HW, &r, y + s * in->shape[0]);
        return;
    }
    case QAT_QOP_ADD: {
        const qat_qtensor *b = &e->q->tensors[op->inputs[1]];
        qat__add_args r = {.zp_a = in->q.zero_point, .zp_b = b->q.zero_point, .m_a = op->multiplier[0],
                           .m_b = op->multiplier[1], .m_out = op->multiplier[2], .sh_a = op->shift[0],
                           .sh_b = op->shift[1], .sh_out = op->shift[2], .left_shift = op->left_shift,
                           .zp_out = out->q.zero_point, .lo = op->act_min, .hi = op->act_max};
        qat__add_s8(x, tensor(e, op->inputs[1]), n, &r, y);
        return;
    }
    case QAT_QOP_CONCAT: run_concat(e, op); return;
    case QAT_QOP_LUT: qat__lut_s8(x, n, c, in->q.qmin, y); return;
    case QAT_QOP_RELU: qat__clamp_s8(x, n, op->act_min, op->act_max, y); return;
    case QAT_QOP_FLATTEN: /* the same bytes: the plan gave both tensors one buffer */
    case QAT_QOP_KIND_COUNT: return;
    }
}

qat_status qat_runtime_run(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena, void *scratch,
                           int64_t n) {
    if (!q || !plan || !arena || n < 1 || n > plan->max_batch) return QAT_ERR_ARG;
    exec e = {q, plan, consts, arena, scratch, n};
    for (int i = 0; i < q->n_ops; i++) run_op(&e, i);
    return QAT_OK;
}
