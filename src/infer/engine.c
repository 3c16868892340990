/* The engines of qat/infer.h over an integer program: integer-only (the
 * device runtime, with the raw input normalized and quantized and the
 * logits dequantized at the edges), hybrid (weight-only) and
 * fake-quantized float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakequant/kernels.h"
#include "internal.h"
#include "qat/layers.h"

typedef struct {
    qat_tensor *wf, *bf; /* float engines: dequantized weight and bias */
    qat_qtype oq;        /* fake: the output's quantization */
} engine_op;

struct qat_engine {
    qat_ctx *err;        /* the caller's context: errors go there */
    qat_ctx *mem;        /* the engine's own: its buffers, and each float batch's graph */
    const qat_qmodel *q;
    qat_engine_mode mode;
    int64_t max_batch, in_numel, out_numel;
    /* int: the runtime's plan (for a slice of the batch), the shared
     * constants, and an arena and a scratch buffer per slice */
    qat_plan plan;
    void *consts;
    void **arena, **scratch;
    int slices;          /* the batch is cut into this many slices, one task each */
    int64_t slice;       /* samples per slice (the plan's max_batch) */
    int8_t *table;       /* raw bytes to input integers, [channels][256] (qat_input_table) */
    /* float engines */
    qat_qtype inq;       /* fake: the input's quantization */
    engine_op *ops;      /* [n_ops] */
    qat_tensor **vals;   /* [n_tensors]: each tensor's value in the running batch */
};

const char *qat_engine_mode_str(qat_engine_mode m) {
    return m == QAT_ENGINE_INT ? "int" : m == QAT_ENGINE_HYBRID ? "hybrid" : m == QAT_ENGINE_FAKE ? "fake" : "unknown";
}

static void *alloc(qat_engine *e, size_t bytes) {
    void *p = qat_ctx_alloc(e->mem, QAT_MEM_PERSIST, bytes ? bytes : 1);
    if (!p) qat_ctx_fail(e->err, QAT_ERR_NOMEM, "engine: out of memory (%zu bytes)", bytes);
    return p;
}

/* ---- integer engine ------------------------------------------------------------- */

/* Threads: the batch is cut into one slice per thread of the caller's
 * pool at creation (samples are independent and the arithmetic is on
 * integers, so any cut gives the same outputs), each slice with its own
 * arena and scratch planned for its size; the constants are shared. */
static qat_status setup_int(qat_engine *e) {
    const qat_qmodel *q = e->q;
    int64_t *offsets = alloc(e, (size_t)(q->n_tensors + q->n_ops) * sizeof *offsets);
    if (!offsets) return QAT_ERR_NOMEM;
    char msg[320];
    int threads = qat_pool_threads(qat_ctx_pool(e->err));
    e->slices = threads < e->max_batch ? threads : (int)e->max_batch;
    e->slice = (e->max_batch + e->slices - 1) / e->slices;
    e->slices = (int)((e->max_batch + e->slice - 1) / e->slice);
    e->arena = alloc(e, (size_t)e->slices * sizeof *e->arena);
    e->scratch = alloc(e, (size_t)e->slices * sizeof *e->scratch);
    if (!e->arena || !e->scratch) return QAT_ERR_NOMEM;
    qat_status st = qat_plan_program(q, (int)e->slice, offsets, &e->plan, msg, sizeof msg);
    if (st != QAT_OK)
        return qat_ctx_fail(e->err, st, "int engine: %s%s", msg,
                            st == QAT_ERR_UNSUPPORTED ? " (use the hybrid engine)" : "");
    e->consts = alloc(e, (size_t)e->plan.const_bytes);
    if (!e->consts) return QAT_ERR_NOMEM;
    for (int i = 0; i < e->slices; i++) {
        e->arena[i] = alloc(e, (size_t)e->plan.arena_bytes);
        e->scratch[i] = alloc(e, (size_t)e->plan.scratch_bytes);
        if (!e->arena[i] || !e->scratch[i]) return QAT_ERR_NOMEM;
    }
    qat_runtime_prepare(q, &e->plan, e->consts);
    /* the byte table, built once: 256 bytes per channel */
    if (!(e->table = alloc(e, (size_t)qat_input_table_channels(q) * 256))) return QAT_ERR_NOMEM;
    st = qat_input_table(q, e->table);
    return st == QAT_OK ? QAT_OK : qat_ctx_fail(e->err, st, "int engine: the input's storage is not a byte");
}

typedef struct {
    qat_engine *e;
    const float *x;     /* raw float samples, or */
    const uint8_t *xb;  /* raw bytes */
    int64_t n;
    float *logits;
    int32_t *logits_q;
} int_job;

/* Slice t: samples [t·slice, ...) through arena t. */
static void int_task(void *u, int64_t t, int worker) {
    const int_job *j = u;
    qat_engine *e = j->e;
    const qat_qmodel *q = e->q;
    (void)worker;
    int64_t s0 = t * e->slice, n = j->n - s0 < e->slice ? j->n - s0 : e->slice;
    int8_t *arena = e->arena[t];
    if (j->x) qat_input_quantize(q, j->x + s0 * e->in_numel, n, arena + e->plan.offset[q->input]);
    else qat_input_lookup(q, e->table, j->xb + s0 * e->in_numel, n, arena + e->plan.offset[q->input]);
    qat_runtime_run(q, &e->plan, e->consts, arena, e->scratch[t], n);
    const int8_t *y = arena + e->plan.offset[q->output];
    const qat_aparams *o = &q->tensors[q->output].q;
    for (int64_t k = 0; k < n * e->out_numel; k++) {
        int64_t i = s0 * e->out_numel + k;
        if (j->logits_q) j->logits_q[i] = y[k];
        if (j->logits) j->logits[i] = (float)(y[k] - o->zero_point) * o->scale;
    }
}

static qat_status run_int(qat_engine *e, const float *x, const uint8_t *xb, int64_t n, float *logits,
                          int32_t *logits_q) {
    int_job j = {e, x, xb, n, logits, logits_q};
    qat_pool_run(qat_ctx_pool(e->err), (n + e->slice - 1) / e->slice, int_task, &j);
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
    char msg[320];
    qat_status st = qat_qmodel_check(q, msg, sizeof msg);
    if (st != QAT_OK) return qat_ctx_fail(e->err, st, "engine: %s", msg);
    e->ops = alloc(e, (size_t)q->n_ops * sizeof *e->ops);
    e->vals = alloc(e, (size_t)q->n_tensors * sizeof *e->vals);
    if (!e->ops || !e->vals) return QAT_ERR_NOMEM;
    if (e->mode == QAT_ENGINE_FAKE) st = act_qtype(e, &q->tensors[q->input].q, &e->inq);
    for (int i = 0; st == QAT_OK && i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        engine_op *eo = &e->ops[i];
        if (e->mode == QAT_ENGINE_FAKE) st = act_qtype(e, &q->tensors[op->output].q, &eo->oq);
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        int64_t O = op->wq.shape[0], ws[QAT_MAX_RANK];
        int wr = qat_qop_weight_shape(q, op, ws); /* the type may be on a conv's [O, C/groups·kh·kw] view */
        eo->wf = qat_tensor_new(e->mem, QAT_MEM_PERSIST, wr, ws, false);
        eo->bf = qat_tensor_new(e->mem, QAT_MEM_PERSIST, 1, &O, false);
        if (!eo->wf || !eo->bf) return qat_ctx_fail(e->err, QAT_ERR_NOMEM, "engine: out of memory");
        qat_dequantize(&op->wq, op->weight, eo->wf->data); /* (q - zp)·s, as the fake quantization; any blocks */
        for (int64_t c = 0; c < O; c++) eo->bf->data[c] = (float)((double)op->bias[c] * op->bias_scale[c]);
    }
    return st;
}

/* The table alone: x quantized to its tensor's integers (as the fake
 * quantization rounds), looked up, the output integer's real value. On a
 * fake engine's x (on the input's grid) this is the integer op exactly;
 * a hybrid engine's float x is rounded to the input's grid first. */
static qat_tensor *lut_table(qat_ctx *c, const qat_qmodel *q, const qat_qop *op, const qat_tensor *x) {
    const qat_aparams *in = &q->tensors[op->inputs[0]].q, *out = &q->tensors[op->output].q;
    qat_tensor *y = qat_tensor_new(c, QAT_MEM_STEP, x->rank, x->shape, false);
    if (!y) return NULL;
    float inv = 1.0f / in->scale;
    for (int64_t i = 0; i < x->numel; i++) {
        int32_t v = qat__quant1(x->data[i], inv, in->zero_point, in->qmin, in->qmax, NULL);
        y->data[i] = out->scale * (float)(op->table[v - in->qmin] - out->zero_point);
    }
    return y;
}

/* A lookup table's function on float values, as the training op computes it. */
static qat_tensor *lut_float(qat_ctx *c, const qat_qmodel *q, const qat_qop *op, qat_tensor *x) {
    switch (op->lut) {
    case QAT_LUT_SIGMOID: return qat_sigmoid(c, x);
    case QAT_LUT_TANH: return qat_tanh(c, x);
    case QAT_LUT_HARDSWISH: return qat_hardswish(c, x);
    case QAT_LUT_TABLE: return lut_table(c, q, op, x);
    case QAT_LUT_FN_COUNT: break;
    }
    return NULL;
}

/* An average pool that keeps its input's quantization and pads, in
 * float: each window's mean over its positions inside the input (the
 * integer rule's n), where the float op divides by kh·kw. x [N, C, H, W]. */
static qat_tensor *avgpool_inside(qat_ctx *c, const qat_qop *op, const qat_tensor *x) {
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t OH = (H + 2 * op->pad_h - op->kh) / op->stride_h + 1, OW = (W + 2 * op->pad_w - op->kw) / op->stride_w + 1;
    qat_tensor *y = qat_tensor_new(c, QAT_MEM_STEP, 4, (int64_t[]){N, C, OH, OW}, false);
    for (int64_t p = 0; y && p < N * C; p++) {
        const float *xp = x->data + p * H * W;
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                int64_t ya = oy * op->stride_h - op->pad_h, yb = ya + op->kh, xa = ox * op->stride_w - op->pad_w;
                int64_t xb = xa + op->kw;
                ya = ya < 0 ? 0 : ya, yb = yb > H ? H : yb, xa = xa < 0 ? 0 : xa, xb = xb > W ? W : xb;
                float sum = 0.0f;
                for (int64_t yy = ya; yy < yb; yy++)
                    for (int64_t xx = xa; xx < xb; xx++) sum += xp[yy * W + xx];
                y->data[(p * OH + oy) * OW + ox] = sum / (float)((yb - ya) * (xb - xa));
            }
    }
    return y;
}

static qat_tensor *run_float_op(qat_engine *e, int i) {
    const qat_qop *op = &e->q->ops[i];
    engine_op *eo = &e->ops[i];
    qat_ctx *c = e->mem;
    qat_tensor *x = e->vals[op->inputs[0]], *y = NULL;
    qat_conv2d_params cp = {op->stride_h, op->stride_w, op->pad_h, op->pad_w, op->groups};
    qat_pool2d_params pp = {op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w};
    switch (op->kind) {
    case QAT_QOP_CONV2D: y = qat_conv2d_ex(c, x, eo->wf, eo->bf, &cp); break;
    case QAT_QOP_LINEAR: y = qat_linear(c, x, eo->wf, eo->bf); break;
    case QAT_QOP_MAXPOOL2D: return qat_maxpool2d_ex(c, x, &pp);
    case QAT_QOP_AVGPOOL2D:
        y = op->keeps_scale && (op->pad_h || op->pad_w) ? avgpool_inside(c, op, x) : qat_avgpool2d_ex(c, x, &pp);
        break;
    case QAT_QOP_GLOBAL_AVGPOOL: y = qat_global_avgpool2d(c, x); break;
    case QAT_QOP_ADD: y = qat_add(c, x, e->vals[op->inputs[1]]); break;
    case QAT_QOP_MUL: y = qat_mul(c, x, e->vals[op->inputs[1]]); break; /* [N, C, 1, 1] broadcasts */
    case QAT_QOP_CONCAT: {
        qat_tensor *xs[QAT_QOP_MAX_INPUTS];
        for (int j = 0; j < op->n_inputs; j++) xs[j] = e->vals[op->inputs[j]];
        y = qat_concat(c, op->n_inputs, xs, 1);
        break;
    }
    case QAT_QOP_LUT: y = lut_float(c, e->q, op, x); break;
    case QAT_QOP_FLATTEN: return qat_flatten(c, x);
    case QAT_QOP_RELU: return qat_relu(c, x);
    case QAT_QOP_KIND_COUNT: return NULL;
    }
    if (op->act == QAT_ACT_RELU) y = qat_relu(c, y);
    else if (op->act == QAT_ACT_RELU6) y = qat_clamp(c, y, 0.0f, 6.0f);
    return e->mode == QAT_ENGINE_FAKE ? qat_fake_quant(c, y, &eo->oq, QAT_STE_CLIPPED) : y;
}

/* The float engines take raw floats x, or raw bytes xb as the floats
 * (float)b; the program's normalization first (the training forward's op),
 * then, fake, the input's quantization. */
static qat_status run_float(qat_engine *e, const float *x, const uint8_t *xb, int64_t n, float *logits,
                            int32_t *logits_q) {
    const qat_qmodel *q = e->q;
    const qat_qtensor *in = &q->tensors[q->input];
    int64_t shape[4] = {n, in->shape[0], in->shape[1], in->shape[2]};
    qat_ctx_set_pool(e->mem, qat_ctx_pool(e->err)); /* the caller's threads, as they are now */
    qat_tensor *t = x ? qat_tensor_from(e->mem, QAT_MEM_STEP, x, in->rank + 1, shape, false)
                      : qat_tensor_new(e->mem, QAT_MEM_STEP, in->rank + 1, shape, false);
    for (int64_t i = 0; t && xb && i < t->numel; i++) t->data[i] = (float)xb[i];
    t = qat_normalize(e->mem, t, q->norm);
    if (e->mode == QAT_ENGINE_FAKE) t = qat_fake_quant(e->mem, t, &e->inq, QAT_STE_CLIPPED);
    e->vals[q->input] = t;
    for (int i = 0; t && i < q->n_ops; i++) t = e->vals[q->ops[i].output] = run_float_op(e, i);
    if (!t) {
        qat_status st = qat_ctx_fail(e->err, qat_ctx_status(e->mem), "engine: %s", qat_ctx_error(e->mem));
        qat_ctx_clear_error(e->mem);
        qat_ctx_step_reset(e->mem);
        return st;
    }
    const qat_tensor *y = e->vals[q->output];
    const qat_aparams *o = &q->tensors[q->output].q;
    float inv = 1.0f / o->scale;
    for (int64_t j = 0; j < n * e->out_numel; j++) {
        if (logits) logits[j] = y->data[j];
        if (logits_q) logits_q[j] = qat__quant1(y->data[j], inv, o->zero_point, o->qmin, o->qmax, NULL);
    }
    qat_ctx_step_reset(e->mem);
    return QAT_OK;
}

/* ---- the public face ------------------------------------------------------------ */

int64_t qat__engine_max_batch(const qat_engine *e) { return e->max_batch; }

qat_engine *qat_engine_new(qat_ctx *ctx, const qat_qmodel *q, qat_engine_mode mode, int max_batch) {
    if (!ctx) return NULL;
    if (!q || q->n_ops < 1 || !q->tensors || max_batch < 1 || (unsigned)mode > QAT_ENGINE_FAKE) {
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
    *e = (qat_engine){.err = ctx, .mem = mem, .q = q, .mode = mode, .max_batch = max_batch};
    if (q->input >= 0 && q->input < q->n_tensors && q->output >= 0 && q->output < q->n_tensors) {
        e->in_numel = qat_qtensor_numel(&q->tensors[q->input]);
        e->out_numel = qat_qtensor_numel(&q->tensors[q->output]);
    }
    if ((mode == QAT_ENGINE_INT ? setup_int(e) : setup_float(e)) != QAT_OK) {
        qat_ctx_free(mem);
        return NULL;
    }
    return e;
}

void qat_engine_free(qat_engine *e) {
    if (e) qat_ctx_free(e->mem); /* e itself lives in e->mem */
}

int64_t qat_engine_peak_activation_bytes(const qat_engine *e) {
    return e && e->mode == QAT_ENGINE_INT ? e->plan.peak_activation_bytes : -1;
}

static qat_status run(qat_engine *e, const float *x, const uint8_t *xb, int64_t n, float *logits, int32_t *logits_q) {
    if (!e) return QAT_ERR_ARG;
    if ((!x && !xb) || n < 1 || n > e->max_batch || (!logits && !logits_q))
        return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: need input, 1 <= n <= %lld and an output",
                            (long long)e->max_batch);
    if (logits_q && e->mode == QAT_ENGINE_HYBRID)
        return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: the hybrid engine has float logits only");
    return e->mode == QAT_ENGINE_INT ? run_int(e, x, xb, n, logits, logits_q) : run_float(e, x, xb, n, logits, logits_q);
}

qat_status qat_engine_run(qat_engine *e, const float *x, int64_t n, float *logits, int32_t *logits_q) {
    if (e && !x) return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: NULL input");
    return run(e, x, NULL, n, logits, logits_q);
}

qat_status qat_engine_run_u8(qat_engine *e, const uint8_t *x, int64_t n, float *logits, int32_t *logits_q) {
    if (e && !x) return qat_ctx_fail(e->err, QAT_ERR_ARG, "engine: NULL input");
    return run(e, NULL, x, n, logits, logits_q);
}
