/* The engines of qat/infer.h over a qat_qmodel: integer-only, hybrid
 * (weight-only) and fake-quantized float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakequant/internal.h"
#include "kernels.h"
#include "qat/infer.h"

typedef struct {
    int Kp, Pp;          /* int: reduction length and positions (conv) padded (kernels.h) */
    int16_t *w16;        /* int: [Op][Kp] weight integers minus their zero point */
    qat_tensor *wf, *bf; /* float engines: dequantized weight and bias */
    qat_qtype oq;        /* fake: the output's quantization */
} engine_op;

struct qat_engine {
    qat_ctx *err;        /* the caller's context: errors go there */
    qat_ctx *mem;        /* the engine's own: its buffers, and each float batch's graph */
    const qat_qmodel *q;
    qat_engine_mode mode;
    int64_t max_batch, in_numel;
    qat_qtype inq;       /* fake: the input's quantization */
    int16_t *buf[2];     /* int: activations, ping-pong, [max_batch][largest activation] */
    int16_t *col;        /* int: [Kp][Pp] im2col, or the transposed input of a linear op */
    int16_t *xpad;       /* int: one sample, zero point subtracted and zero padded (conv) */
    engine_op ops[QAT_QMODEL_MAX_OPS];
};

const char *qat_engine_mode_str(qat_engine_mode m) {
    return m == QAT_ENGINE_INT ? "int" : m == QAT_ENGINE_HYBRID ? "hybrid" : m == QAT_ENGINE_FAKE ? "fake" : "unknown";
}

static int64_t numel(int rank, const int64_t *s) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= s[d];
    return n;
}

static void *alloc(qat_engine *e, size_t bytes) {
    void *p = qat_ctx_alloc(e->mem, QAT_MEM_PERSIST, bytes);
    if (!p) qat_ctx_fail(e->err, QAT_ERR_NOMEM, "engine: out of memory (%zu bytes)", bytes);
    return p;
}

/* ---- integer engine ------------------------------------------------------------- */

static bool fits_int16_path(const qat_aparams *a) { return a->bits <= 8; }

static qat_status setup_int(qat_engine *e) {
    const qat_qmodel *q = e->q;
    if (!fits_int16_path(&q->input))
        return qat_ctx_fail(e->err, QAT_ERR_UNSUPPORTED, "int engine: the input is %d-bit; it runs 2..8-bit "
                            "types (use the hybrid engine)", q->input.bits);
    int64_t act = e->in_numel, col = 0, xpad = 0;
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        engine_op *eo = &e->ops[i];
        int64_t out = numel(op->out_rank, op->out_shape);
        act = out > act ? out : act;
        if (!fits_int16_path(&op->output))
            return qat_ctx_fail(e->err, QAT_ERR_UNSUPPORTED, "int engine: op %s's output is %d-bit; it runs "
                                "2..8-bit types (use the hybrid engine)", op->name, op->output.bits);
        if (op->kind == QAT_QOP_MAXPOOL2D) { /* the SIMD 2x2 pool's scratch: (H/2)·W */
            int64_t t = op->in_shape[1] / 2 * op->in_shape[2];
            col = t > col ? t : col;
        }
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        const qat_qtype *wq = &op->wq;
        if (wq->bits > 8 || !op->multiplier)
            return qat_ctx_fail(e->err, QAT_ERR_UNSUPPORTED, "int engine: op %s has %s weights; it runs "
                                "2..8-bit per-tensor or per-channel weights (use the hybrid engine)", op->name,
                                wq->bits > 8 ? "wider than 8-bit" : "sub-channel");
        int64_t O = wq->shape[0], K = wq->shape[1] * (wq->rank == 4 ? wq->shape[2] * wq->shape[3] : 1);
        /* |x - zp| <= 255 and |w - zp| <= 255: sum and bias must stay in int32 */
        int64_t bias_max = 0;
        for (int64_t o = 0; o < O; o++) bias_max = llabs(op->bias[o]) > bias_max ? llabs(op->bias[o]) : bias_max;
        if (K * 255 * 255 + bias_max > INT32_MAX)
            return qat_ctx_fail(e->err, QAT_ERR_UNSUPPORTED, "int engine: op %s sums %lld products, too many "
                                "for an int32 accumulator", op->name, (long long)K);
        eo->Kp = (int)qat__round_up(K, QAT_KPAD);
        int64_t Op = qat__round_up(O, QAT_WROWS);
        if (!(eo->w16 = alloc(e, (size_t)(Op * eo->Kp) * sizeof(int16_t)))) return QAT_ERR_NOMEM;
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < K; k++) {
                int64_t i_w = o * K + k;
                eo->w16[o * eo->Kp + k] = (int16_t)(op->weight[i_w] - wq->zero_point[qat_qtype_param_index(wq, i_w)]);
            }
        eo->Pp = (int)qat__round_up(op->kind == QAT_QOP_CONV2D ? op->out_shape[1] * op->out_shape[2] : e->max_batch,
                                    QAT_PPAD);
        col = eo->Pp * (int64_t)eo->Kp > col ? eo->Pp * (int64_t)eo->Kp : col;
        if (op->kind == QAT_QOP_CONV2D) {
            int64_t padded = op->in_shape[0] * (op->in_shape[1] + 2 * op->pad) * (op->in_shape[2] + 2 * op->pad);
            xpad = padded > xpad ? padded : xpad;
        }
    }
    e->buf[0] = alloc(e, (size_t)(e->max_batch * act) * sizeof(int16_t));
    e->buf[1] = alloc(e, (size_t)(e->max_batch * act) * sizeof(int16_t));
    /* slack for im2col's whole-chunk copies (kernels.h) */
    e->col = alloc(e, (size_t)(col + QAT_IM2COL_CHUNK) * sizeof(int16_t));
    e->xpad = alloc(e, (size_t)(xpad + QAT_IM2COL_CHUNK) * sizeof(int16_t));
    return e->buf[0] && e->buf[1] && e->col && e->xpad ? QAT_OK : QAT_ERR_NOMEM;
}

/* One op over n samples, from x into y (flatten and relu work in place
 * and return x). */
static int16_t *run_int_op(qat_engine *e, int i, const int16_t *x, int16_t *y, int64_t n, int32_t zp_in) {
    const qat_qop *op = &e->q->ops[i];
    const engine_op *eo = &e->ops[i];
    int64_t in = numel(op->in_rank, op->in_shape), out = numel(op->out_rank, op->out_shape);
    int C = (int)op->in_shape[0], H = (int)op->in_shape[1], W = (int)op->in_shape[2];
    int32_t zp = op->output.zero_point;
    switch (op->kind) {
    case QAT_QOP_CONV2D: {
        int OH = (int)op->out_shape[1], OW = (int)op->out_shape[2], P = OH * OW;
        qat__gemm_args g = {.w = eo->w16, .col = e->col, .O = (int)op->out_shape[0], .P = P, .Kp = eo->Kp,
                            .Pp = eo->Pp, .bias = op->bias, .m0 = op->multiplier, .shift = op->shift, .zp = zp,
                            .lo = op->act_min, .hi = op->act_max, .so = P, .sp = 1};
        for (int64_t s = 0; s < n; s++) {
            qat__pad_s16(x + s * in, C, H, W, op->pad, zp_in, e->xpad);
            qat__im2col_s16(e->xpad, C, H + 2 * op->pad, W + 2 * op->pad, op->kernel, op->stride, OH, OW, eo->Pp,
                            e->col);
            g.out = y + s * out;
            qat__gemm_requant_s16(&g);
        }
        return y;
    }
    case QAT_QOP_LINEAR: {
        /* the input transposed: col[k][s] = x[s][k] - zp */
        for (int64_t s = 0; s < n; s++)
            for (int64_t k = 0; k < in; k++) e->col[k * eo->Pp + s] = (int16_t)(x[s * in + k] - zp_in);
        qat__gemm_args g = {.w = eo->w16, .col = e->col, .O = (int)out, .P = (int)n, .Kp = eo->Kp, .Pp = eo->Pp,
                            .bias = op->bias, .m0 = op->multiplier, .shift = op->shift, .zp = zp,
                            .lo = op->act_min, .hi = op->act_max, .out = y, .so = 1, .sp = out};
        qat__gemm_requant_s16(&g);
        return y;
    }
    case QAT_QOP_MAXPOOL2D:
        for (int64_t s = 0; s < n; s++)
            if (!(op->kernel == 2 && op->stride == 2 && qat__maxpool2_s16_simd(x + s * in, C, H, W, y + s * out, e->col)))
                qat__maxpool_s16(x + s * in, C, H, W, op->kernel, op->stride, y + s * out);
        return y;
    case QAT_QOP_AVGPOOL2D:
        for (int64_t s = 0; s < n; s++)
            qat__avgpool_s16(x + s * in, C, H, W, op->kernel, op->stride, zp_in, op->multiplier[0], op->shift[0],
                             zp, op->act_min, op->act_max, y + s * out);
        return y;
    case QAT_QOP_RELU:
        for (int64_t j = 0; j < n * in; j++) {
            int16_t v = x[j];
            y[j] = v < op->act_min ? (int16_t)op->act_min : v > op->act_max ? (int16_t)op->act_max : v;
        }
        return y;
    case QAT_QOP_FLATTEN:
    case QAT_QOP_KIND_COUNT: break;
    }
    return (int16_t *)x; /* flatten: the same integers, NCHW order already */
}

static qat_status run_int(qat_engine *e, const float *x, int64_t n, float *logits, int32_t *logits_q) {
    const qat_qmodel *q = e->q;
    const qat_aparams *a = &q->input;
    int16_t *cur = e->buf[0];
    qat__quantize_s16(x, n * e->in_numel, 1.0f / a->scale, a->zero_point, a->qmin, a->qmax, cur);
    int32_t zp = a->zero_point;
    for (int i = 0; i < q->n_ops; i++) {
        int16_t *next = cur == e->buf[0] ? e->buf[1] : e->buf[0];
        cur = run_int_op(e, i, cur, next, n, zp);
        zp = q->ops[i].output.zero_point;
    }
    const qat_aparams *o = &q->ops[q->n_ops - 1].output;
    for (int64_t j = 0; j < n * q->n_outputs; j++) {
        if (logits_q) logits_q[j] = cur[j];
        if (logits) logits[j] = (float)(cur[j] - o->zero_point) * o->scale;
    }
    return QAT_OK;
}

/* ---- float engines (hybrid and fake) -------------------------------------------- */

static qat_status act_qtype(qat_engine *e, const qat_aparams *a, qat_qtype *t) {
    qat_status st = qat_qtype_init(e->mem, t, a->bits, a->is_signed, false, 0, NULL, NULL);
    if (st != QAT_OK) return qat_ctx_fail(e->err, st, "engine: %s", qat_ctx_error(e->mem));
    t->scale[0] = a->scale, t->zero_point[0] = a->zero_point, t->qmin = a->qmin, t->qmax = a->qmax;
    return QAT_OK;
}

static qat_status setup_float(qat_engine *e) {
    const qat_qmodel *q = e->q;
    qat_status st = e->mode == QAT_ENGINE_FAKE ? act_qtype(e, &q->input, &e->inq) : QAT_OK;
    for (int i = 0; st == QAT_OK && i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        engine_op *eo = &e->ops[i];
        if (e->mode == QAT_ENGINE_FAKE) st = act_qtype(e, &op->output, &eo->oq);
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        int64_t O = op->wq.shape[0];
        eo->wf = qat_tensor_new(e->mem, QAT_MEM_PERSIST, op->wq.rank, op->wq.shape, false);
        eo->bf = qat_tensor_new(e->mem, QAT_MEM_PERSIST, 1, &O, false);
        if (!eo->wf || !eo->bf) return qat_ctx_fail(e->err, QAT_ERR_NOMEM, "engine: out of memory");
        qat_dequantize(&op->wq, op->weight, eo->wf->data); /* (q - zp)·s, as the fake quantization */
        for (int64_t c = 0; c < O; c++) eo->bf->data[c] = (float)((double)op->bias[c] * op->bias_scale[c]);
    }
    return st;
}

static qat_tensor *run_float_op(qat_engine *e, int i, qat_tensor *x) {
    const qat_qop *op = &e->q->ops[i];
    engine_op *eo = &e->ops[i];
    qat_ctx *c = e->mem;
    qat_tensor *y = NULL;
    switch (op->kind) {
    case QAT_QOP_CONV2D: y = qat_conv2d(c, x, eo->wf, eo->bf, op->stride, op->pad); break;
    case QAT_QOP_LINEAR: y = qat_linear(c, x, eo->wf, eo->bf); break;
    case QAT_QOP_MAXPOOL2D: return qat_maxpool2d(c, x, op->kernel, op->stride);
    case QAT_QOP_AVGPOOL2D: y = qat_avgpool2d(c, x, op->kernel, op->stride); break;
    case QAT_QOP_FLATTEN: return qat_flatten(c, x);
    case QAT_QOP_RELU: return qat_relu(c, x);
    case QAT_QOP_KIND_COUNT: return NULL;
    }
    if (op->act == QAT_ACT_RELU) y = qat_relu(c, y);
    else if (op->act == QAT_ACT_RELU6) y = qat_clamp(c, y, 0.0f, 6.0f);
    return e->mode == QAT_ENGINE_FAKE ? qat_fake_quant(c, y, &eo->oq, QAT_STE_CLIPPED) : y;
}

static qat_status run_float(qat_engine *e, const float *x, int64_t n, float *logits, int32_t *logits_q) {
    const qat_qmodel *q = e->q;
    int64_t shape[4] = {n, q->in_shape[0], q->in_shape[1], q->in_shape[2]};
    qat_tensor *t = qat_tensor_from(e->mem, QAT_MEM_STEP, x, q->in_rank + 1, shape, false);
    if (e->mode == QAT_ENGINE_FAKE) t = qat_fake_quant(e->mem, t, &e->inq, QAT_STE_CLIPPED);
    for (int i = 0; t && i < q->n_ops; i++) t = run_float_op(e, i, t);
    if (!t) {
        qat_status st = qat_ctx_fail(e->err, qat_ctx_status(e->mem), "engine: %s", qat_ctx_error(e->mem));
        qat_ctx_clear_error(e->mem);
        qat_ctx_step_reset(e->mem);
        return st;
    }
    const qat_aparams *o = &q->ops[q->n_ops - 1].output;
    float inv = 1.0f / o->scale;
    for (int64_t j = 0; j < n * q->n_outputs; j++) {
        if (logits) logits[j] = t->data[j];
        if (logits_q) logits_q[j] = qat__quant1(t->data[j], inv, o->zero_point, o->qmin, o->qmax, NULL);
    }
    qat_ctx_step_reset(e->mem);
    return QAT_OK;
}

/* ---- the public face ------------------------------------------------------------ */

qat_engine *qat_engine_new(qat_ctx *ctx, const qat_qmodel *q, qat_engine_mode mode, int max_batch) {
    if (!ctx) return NULL;
    if (!q || q->n_ops < 1 || max_batch < 1 || (unsigned)mode > QAT_ENGINE_FAKE) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "engine: need a quantized model, a mode and max_batch >= 1");
        return NULL;
    }
    qat_ctx *mem = qat_ctx_new();
    qat_engine *e = mem ? qat_ctx_alloc(mem, QAT_MEM_PERSIST, sizeof *e) : NULL;
    if (!e) {
        qat_ctx_free(mem);
        qat_ctx_fail(ctx, QAT_ERR_NOMEM, "engine: out of memory");
        return NULL;
    }
    qat_ctx_set_grad_enabled(mem, false);
    *e = (qat_engine){.err = ctx, .mem = mem, .q = q, .mode = mode, .max_batch = max_batch,
                      .in_numel = numel(q->in_rank, q->in_shape)};
    if ((mode == QAT_ENGINE_INT ? setup_int(e) : setup_float(e)) != QAT_OK) {
        qat_ctx_free(mem);
        return NULL;
    }
    return e;
}

void qat_engine_free(qat_engine *e) {
    if (e) qat_ctx_free(e->mem); /* e itself lives in e->mem */
}

qat_status qat_engine_run(qat_engine *e, const float *x, int64_t n, float *logits, int32_t *logits_q) {
    if (!e) return QAT_ERR_ARG;
    if (!x || n < 1 || n > e->max_batch || (!logits && !logits_q))
        return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: need input, 1 <= n <= %lld and an output",
                            (long long)e->max_batch);
    if (logits_q && e->mode == QAT_ENGINE_HYBRID)
        return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: the hybrid engine has float logits only");
    return e->mode == QAT_ENGINE_INT ? run_int(e, x, n, logits, logits_q) : run_float(e, x, n, logits, logits_q);
}
