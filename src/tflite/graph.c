/* The integer program as a TFLite graph (docs/tflite.md): each program
 * op becomes the TFLite int8 op whose reference kernel computes the same
 * integers, or the export is refused, naming the layer and the reason.
 *
 * Layout. The program's per-sample tensors are [C, H, W] or [F]; TFLite's
 * are NHWC with a batch of 1: [1, H, W, C] and [1, F]. Weights are laid
 * out again: a convolution's [O, I, kh, kw] as [O, kh, kw, I], a
 * depthwise one's [O, 1, kh, kw] as [1, kh, kw, O]. A flatten of
 * [C, H, W] reads NHWC memory in (h, w, c) order, not qat's (c, h, w):
 * when every reader of the flatten is a linear op, their weight columns
 * are permuted to match (no op added); otherwise a TRANSPOSE to
 * [1, C, H, W] comes first. A linear op is a 1x1 CONV_2D between two
 * RESHAPEs: LiteRT's int8 FULLY_CONNECTED with per-channel weights rounds
 * its requantization once, CONV_2D twice as qat's contract does
 * (docs/tflite.md, "Linear").
 *
 * Numerics. TFLite derives each op's multipliers and clamps from the
 * scales, zero points and fused activation written here, with the same
 * formulas qat's lowering used (docs/tflite.md, rule by rule); what this
 * file checks is that the program is inside what TFLite can say: int8
 * activations over the full range, symmetric int8 weights per tensor or
 * per output channel, clamps TFLite's fused activations reproduce,
 * paddings TFLite's SAME or VALID (or an explicit PAD) reproduce, pools
 * and concatenations that keep their inputs' quantization. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "qat/runtime.h"
#include "qat/tflite.h"

typedef struct {
    const qat_qmodel *q;
    qat__tfl_graph g;
    int cap_t, cap_o;
    int *tid;        /* [n_tensors]: the TFLite tensor holding program tensor t */
    int64_t *flat_c; /* [n_tensors]: C when t is a flatten of [C, H, W] kept in (h, w, c) order, else 0 */
    void **owned;    /* every allocation, freed at the end */
    int n_owned, cap_owned;
    char *msg;
    size_t len;
} tfl;

/* st, with its one-line message in the caller's buffer */
#define fail(x, st, ...) qat_message((x)->msg, (x)->len, st, __VA_ARGS__)

/* n·size zeroed bytes, freed with the graph; NULL when out of memory. */
static void *own(tfl *x, size_t n, size_t size) {
    if (x->n_owned == x->cap_owned) {
        int cap = x->cap_owned ? 2 * x->cap_owned : 64;
        void **p = realloc(x->owned, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        x->owned = p, x->cap_owned = cap;
    }
    void *p = calloc(n ? n : 1, size);
    if (p) x->owned[x->n_owned++] = p;
    return p;
}

/* A new tensor (its id, or -1 when out of memory). */
static int add_tensor(tfl *x, const char *name, const char *suffix, int type, int rank, const int32_t *shape) {
    if (x->g.n_tensors == x->cap_t) {
        int cap = x->cap_t ? 2 * x->cap_t : 64;
        qat__tfl_tensor *p = realloc(x->g.tensors, (size_t)cap * sizeof *p);
        if (!p) return -1;
        x->g.tensors = p, x->cap_t = cap;
    }
    qat__tfl_tensor *t = &x->g.tensors[x->g.n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", name, suffix);
    t->type = type, t->rank = rank;
    memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
    return x->g.n_tensors++;
}

/* The version TFLite's schema gives each op with int8 tensors (its
 * op_version rules: per-channel int8 convolutions are version 3, the other
 * int8 kernels 2, RESHAPE 1): a runtime that predates a version refuses the
 * file instead of running a kernel it does not have. */
static int int8_version(int code) {
    switch (code) {
    case QAT__TFL_CONV_2D:
    case QAT__TFL_DEPTHWISE_CONV_2D: return 3;
    case QAT__TFL_RESHAPE: return 1;
    default: return 2;
    }
}

static qat__tfl_op *add_op(tfl *x, int code, int n_in, const int *in, int out) {
    if (x->g.n_ops == x->cap_o) {
        int cap = x->cap_o ? 2 * x->cap_o : 64;
        qat__tfl_op *p = realloc(x->g.ops, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        x->g.ops = p, x->cap_o = cap;
    }
    qat__tfl_op *op = &x->g.ops[x->g.n_ops++];
    memset(op, 0, sizeof *op);
    op->code = code, op->n_in = n_in, op->out = out, op->version = int8_version(code);
    memcpy(op->in, in, (size_t)n_in * sizeof *in);
    return op;
}

/* Per-tensor quantization of an activation (scale, zero point). */
static qat_status quantize_as(tfl *x, int id, const qat_aparams *a) {
    float *s = own(x, 1, sizeof *s);
    int64_t *z = own(x, 1, sizeof *z);
    if (!s || !z) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    *s = a->scale, *z = a->zero_point;
    qat__tfl_tensor *t = &x->g.tensors[id];
    t->n_q = 1, t->scale = s, t->zero_point = z;
    return QAT_OK;
}

/* The TFLite shape of a program tensor: [1, H, W, C] or [1, F]. */
static int nhwc(const qat_qtensor *t, int32_t *shape) {
    shape[0] = 1;
    if (t->rank == 1) return shape[1] = (int32_t)t->shape[0], 2;
    shape[1] = (int32_t)t->shape[1], shape[2] = (int32_t)t->shape[2], shape[3] = (int32_t)t->shape[0];
    return 4;
}

/* The TFLite tensor of program tensor t, made on first use. */
static qat_status activation(tfl *x, int t, const char *name) {
    if (x->tid[t] >= 0) return QAT_OK;
    const qat_qtensor *p = &x->q->tensors[t];
    int32_t shape[4];
    int rank = nhwc(p, shape);
    int id = add_tensor(x, name ? name : p->name, "", QAT__TFL_INT8, rank, shape);
    if (id < 0) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    x->tid[t] = id;
    return quantize_as(x, id, &p->q);
}

static bool same_q(const qat_aparams *a, const qat_aparams *b) {
    return a->scale == b->scale && a->zero_point == b->zero_point;
}

/* ---- clamps: which fused activation TFLite derives ours from -------------------------- */

/* TFLite's clamp for a fused activation on an int8 output of scale s and
 * zero point zp: RELU from max(-128, zp), RELU6 to min(127, zp +
 * round(6 / s)) (float division, rounding half away from zero). */
static void tfl_range(int act, const qat_aparams *a, int32_t *lo, int32_t *hi) {
    *lo = -128, *hi = 127;
    if (act == QAT__TFL_ACT_NONE) return;
    if (a->zero_point > *lo) *lo = a->zero_point;
    if (act == QAT__TFL_ACT_RELU6) { /* compared in float first: a tiny scale makes 6 / s huge */
        float six = roundf(6.0f / a->scale);
        if (six < (float)(*hi - a->zero_point)) *hi = a->zero_point + (int32_t)six;
    }
}

/* The fused activation whose clamp is op's [act_min, act_max]; the op's
 * own kind first (RELU and NONE clamp alike when zp is -128). */
static qat_status fused_act(tfl *x, const qat_qop *op, int *act) {
    const qat_aparams *a = &x->q->tensors[op->output].q;
    int order[3] = {QAT__TFL_ACT_NONE, QAT__TFL_ACT_RELU, QAT__TFL_ACT_RELU6};
    if (op->act == QAT_ACT_RELU) order[0] = QAT__TFL_ACT_RELU, order[1] = QAT__TFL_ACT_NONE;
    if (op->act == QAT_ACT_RELU6) order[0] = QAT__TFL_ACT_RELU6, order[2] = QAT__TFL_ACT_NONE;
    for (int k = 0; k < 3; k++) {
        int32_t lo, hi;
        tfl_range(order[k], a, &lo, &hi);
        if (lo == op->act_min && hi == op->act_max) return *act = order[k], QAT_OK;
    }
    return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: its output clamp [%d, %d] is none of TFLite's fused "
                "activations (none, RELU, RELU6) for scale %g and zero point %d", op->name, (int)op->act_min,
                (int)op->act_max, (double)a->scale, (int)a->zero_point);
}

/* ---- padding -------------------------------------------------------------------------- */

/* TFLite's SAME along one axis: out = ceil(in / s), padding before the
 * data floor(total / 2) of total = max((out - 1)·s + k - in, 0). */
static bool same_fits(int64_t in, int k, int s, int p) {
    int64_t out = (in + s - 1) / s, total = (out - 1) * s + k - in;
    if (total < 0) total = 0;
    int64_t ours = (in + 2 * p - k) / s + 1;
    return out == ours && total / 2 == p;
}

/* VALID, SAME, or -1 when neither reproduces op's zero padding. */
static int window_padding(const qat_qop *op, const qat_qtensor *in) {
    if (op->pad_h == 0 && op->pad_w == 0) return QAT__TFL_VALID;
    if (same_fits(in->shape[1], op->kh, op->stride_h, op->pad_h) &&
        same_fits(in->shape[2], op->kw, op->stride_w, op->pad_w))
        return QAT__TFL_SAME;
    return -1;
}

/* An explicit PAD of program tensor t by op's padding (real zeros: the
 * zero point), for a convolution neither SAME nor VALID fits. The padded
 * tensor's id, or -1 with the error in x. */
static int pad_input(tfl *x, const qat_qop *op, int t) {
    const qat_qtensor *p = &x->q->tensors[t];
    int32_t shape[4] = {1, (int32_t)(p->shape[1] + 2 * op->pad_h), (int32_t)(p->shape[2] + 2 * op->pad_w),
                        (int32_t)p->shape[0]};
    int32_t pshape[2] = {4, 2}, *pads = own(x, 8, sizeof *pads);
    if (!pads) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory"), -1;
    pads[2] = pads[3] = op->pad_h, pads[4] = pads[5] = op->pad_w;
    int pid = add_tensor(x, op->name, ".paddings", QAT__TFL_INT32, 2, pshape);
    int out = pid < 0 ? -1 : add_tensor(x, op->name, ".padded", QAT__TFL_INT8, 4, shape);
    if (out < 0) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory"), -1;
    x->g.tensors[pid].data = pads, x->g.tensors[pid].bytes = 8 * sizeof *pads;
    int in[2] = {x->tid[t], pid};
    if (!add_op(x, QAT__TFL_PAD, 2, in, out) || quantize_as(x, out, &p->q) != QAT_OK)
        return fail(x, QAT_ERR_NOMEM, "tflite: out of memory"), -1;
    return out;
}

/* ---- weights and biases --------------------------------------------------------------- */

/* Checks op's weight is what TFLite's int8 kernels take: per tensor or
 * per output channel, zero points 0, values in int8. */
static qat_status check_weight(tfl *x, const qat_qop *op, int64_t O, int64_t n) {
    const qat_qtype *w = &op->wq;
    if (qat_qop_subchannel(op))
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: sub-channel (block) weights have no TFLite int8 "
                    "form (one scale per tensor or per output channel)", op->name);
    if (w->nparams != 1 && w->nparams != O)
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: weights quantized along an axis other than the "
                    "output channel have no TFLite int8 form", op->name);
    for (int64_t p = 0; p < w->nparams; p++)
        if (w->zero_point[p] != 0)
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: asymmetric weights (zero point %d): TFLite's "
                        "int8 weights are symmetric (train with symmetric weights, the default)", op->name,
                        (int)w->zero_point[p]);
    if (w->bits > 8)
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: %d-bit weights; TFLite's int8 kernels take weights "
                    "of at most 8 bits", op->name, w->bits);
    for (int64_t i = 0; i < n; i++) /* the type's range is checked by qat_qmodel_check; int8 is what TFLite reads */
        if (op->weight[i] < -128 || op->weight[i] > 127)
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a weight of %d does not fit int8", op->name,
                        (int)op->weight[i]);
    return QAT_OK;
}

/* A constant int8 weight tensor of TFLite shape `shape` whose element i
 * is program weight src[i]; scales one per output channel along qdim
 * (or one). */
static int weight_tensor(tfl *x, const qat_qop *op, int rank, const int32_t *shape, const int64_t *src, int qdim,
                         int64_t O) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    int8_t *w = own(x, (size_t)n, 1);
    int nq = op->wq.nparams == 1 ? 1 : (int)O;
    float *s = own(x, (size_t)nq, sizeof *s);
    int64_t *z = own(x, (size_t)nq, sizeof *z);
    int id = w && s && z ? add_tensor(x, op->name, ".weight", QAT__TFL_INT8, rank, shape) : -1;
    if (id < 0) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory"), -1;
    for (int64_t i = 0; i < n; i++) w[i] = (int8_t)op->weight[src[i]];
    for (int c = 0; c < nq; c++) s[c] = op->wq.scale[c];
    qat__tfl_tensor *t = &x->g.tensors[id];
    t->data = w, t->bytes = (size_t)n, t->n_q = nq, t->scale = s, t->zero_point = z, t->qdim = nq > 1 ? qdim : 0;
    return id;
}

/* The int32 bias [O] at scale s_in·s_w[o], zero point 0. */
static int bias_tensor(tfl *x, const qat_qop *op, int64_t O) {
    int32_t shape[1] = {(int32_t)O}, *b = own(x, (size_t)O, sizeof *b);
    float *s = own(x, (size_t)O, sizeof *s);
    int64_t *z = own(x, (size_t)O, sizeof *z);
    int id = b && s && z ? add_tensor(x, op->name, ".bias", QAT__TFL_INT32, 1, shape) : -1;
    if (id < 0) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory"), -1;
    for (int64_t o = 0; o < O; o++) b[o] = op->bias ? op->bias[o] : 0, s[o] = op->bias_scale ? op->bias_scale[o] : 0.0f;
    qat__tfl_tensor *t = &x->g.tensors[id];
    t->data = b, t->bytes = (size_t)O * sizeof *b, t->n_q = (int)O, t->scale = s, t->zero_point = z, t->qdim = 0;
    return id;
}

/* A RESHAPE of tensor `in` into tensor `out` (its shape, the batch any). */
static qat_status reshape(tfl *x, const char *name, const char *suffix, int in, int out) {
    const qat__tfl_tensor *o = &x->g.tensors[out];
    int rank = o->rank;
    int32_t sh[1] = {rank}, *dims = own(x, (size_t)rank, sizeof *dims);
    int s = dims ? add_tensor(x, name, suffix, QAT__TFL_INT32, 1, sh) : -1;
    if (s < 0) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    memcpy(dims, x->g.tensors[out].shape, (size_t)rank * sizeof *dims);
    dims[0] = -1;
    x->g.tensors[s].data = dims, x->g.tensors[s].bytes = (size_t)rank * sizeof *dims;
    int ins[2] = {in, s};
    return add_op(x, QAT__TFL_RESHAPE, 2, ins, out) ? QAT_OK : fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
}

/* ---- multipliers: TFLite derives them from the scales ------------------------------- */

/* Whether multiplier k of op is QuantizeMultiplier(M), M computed as
 * TFLite computes it (in double, from the float32 scales); refused
 * otherwise: a program whose multipliers are not its scales' (a file
 * written by hand) would run differently under TFLite. */
static qat_status derived(tfl *x, const qat_qop *op, int k, double M) {
    int32_t m0;
    int sh;
    if (qat_quantize_multiplier(M, &m0, &sh) == QAT_OK && op->n_mult > k && op->multiplier[k] == m0 &&
        op->shift[k] == sh)
        return QAT_OK;
    return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: multiplier %d (%d, shift %d) is not the one TFLite "
                "derives from the scales (M = %.9g)", op->name, k, op->n_mult > k ? (int)op->multiplier[k] : 0,
                op->n_mult > k ? (int)op->shift[k] : 0, M);
}

static qat_status check_multipliers(tfl *x, const qat_qop *op) {
    const qat_qmodel *q = x->q;
    double s_in = q->tensors[op->inputs[0]].q.scale, s_out = q->tensors[op->output].q.scale;
    qat_status st = QAT_OK;
    switch (op->kind) {
    case QAT_QOP_LINEAR:
    case QAT_QOP_CONV2D: {
        if (qat_qop_subchannel(op)) break; /* refused for what it is (check_weight) */
        int64_t O = q->tensors[op->output].shape[0];
        for (int64_t o = 0; st == QAT_OK && o < O; o++)
            st = derived(x, op, (int)o, s_in * (double)op->wq.scale[op->wq.nparams == 1 ? 0 : o] / s_out);
        break;
    }
    case QAT_QOP_ADD: {
        double sa = s_in, sb = q->tensors[op->inputs[1]].q.scale, t = 2.0 * (sa > sb ? sa : sb);
        st = derived(x, op, 0, sa / t);
        if (st == QAT_OK) st = derived(x, op, 1, sb / t);
        if (st == QAT_OK) st = derived(x, op, 2, t / ((double)(1 << op->left_shift) * s_out));
        break;
    }
    case QAT_QOP_MUL: st = derived(x, op, 0, s_in * (double)q->tensors[op->inputs[1]].q.scale / s_out); break;
    case QAT_QOP_CONCAT: /* TFLite copies: each input's requantization must be the identity */
        for (int j = 0; st == QAT_OK && j < op->n_inputs; j++)
            st = derived(x, op, j, (double)q->tensors[op->inputs[j]].q.scale / s_out);
        break;
    default: break; /* the others have no multiplier, or keep their input's quantization (checked where written) */
    }
    return st;
}

/* ---- ops ------------------------------------------------------------------------------ */

/* What a product (conv2d, linear) checks first: its n weights, its fused
 * activation (*act); then *src, room for the re-layout's source indices. */
static qat_status product_start(tfl *x, const qat_qop *op, int64_t O, int64_t n, int *act, int64_t **src) {
    qat_status st = check_weight(x, op, O, n);
    if (st == QAT_OK) st = fused_act(x, op, act);
    if (st != QAT_OK) return st;
    return (*src = own(x, (size_t)n, sizeof **src)) ? QAT_OK : fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
}

static qat_status conv(tfl *x, const qat_qop *op) {
    const qat_qtensor *in = &x->q->tensors[op->inputs[0]];
    int64_t C = in->shape[0], O = x->q->tensors[op->output].shape[0], kh = op->kh, kw = op->kw;
    bool depthwise = op->groups > 1 && op->groups == C && O % C == 0;
    if (op->groups > 1 && !depthwise)
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a grouped convolution (%d groups of %lld channels) "
                    "is neither CONV_2D nor DEPTHWISE_CONV_2D", op->name, op->groups, (long long)(C / op->groups));
    int64_t per = C / op->groups, n = O * per * kh * kw, *src;
    int act;
    qat_status st = product_start(x, op, O, n, &act, &src);
    if (st != QAT_OK) return st;
    int32_t shape[4];
    if (depthwise) { /* [O, 1, kh, kw] -> [1, kh, kw, O] */
        shape[0] = 1, shape[1] = (int32_t)kh, shape[2] = (int32_t)kw, shape[3] = (int32_t)O;
        for (int64_t i = 0; i < kh * kw; i++)
            for (int64_t o = 0; o < O; o++) src[i * O + o] = o * kh * kw + i;
    } else { /* [O, I, kh, kw] -> [O, kh, kw, I] */
        shape[0] = (int32_t)O, shape[1] = (int32_t)kh, shape[2] = (int32_t)kw, shape[3] = (int32_t)per;
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < kh * kw; i++)
                for (int64_t c = 0; c < per; c++) src[(o * kh * kw + i) * per + c] = (o * per + c) * kh * kw + i;
    }
    int w = weight_tensor(x, op, 4, shape, src, depthwise ? 3 : 0, O), b = w < 0 ? -1 : bias_tensor(x, op, O);
    if (b < 0) return QAT_ERR_NOMEM;
    int pad = window_padding(op, in), xin = x->tid[op->inputs[0]];
    if (pad < 0) {
        if ((xin = pad_input(x, op, op->inputs[0])) < 0) return QAT_ERR_NOMEM;
        pad = QAT__TFL_VALID;
    }
    if ((st = activation(x, op->output, NULL)) != QAT_OK) return st;
    int ins[3] = {xin, w, b};
    qat__tfl_op *t = add_op(x, depthwise ? QAT__TFL_DEPTHWISE_CONV_2D : QAT__TFL_CONV_2D, 3, ins, x->tid[op->output]);
    if (!t) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    t->padding = pad, t->stride_w = op->stride_w, t->stride_h = op->stride_h, t->act = act;
    t->depth_multiplier = depthwise ? (int)(O / C) : 0;
    return QAT_OK;
}

/* A linear op; when its input is a flatten of [C, H, W] kept in TFLite's
 * (h, w, c) order, its weight columns follow that order. */
static qat_status linear(tfl *x, const qat_qop *op) {
    int64_t O = x->q->tensors[op->output].shape[0], I = x->q->tensors[op->inputs[0]].shape[0], n = O * I, *src;
    int act;
    qat_status st = product_start(x, op, O, n, &act, &src);
    if (st != QAT_OK) return st;
    int t_in = op->inputs[0];
    /* the flattened [C, H, W]: column (h·W + w)·C + c of TFLite's is qat's c·H·W + h·W + w */
    int64_t C = x->flat_c[t_in] ? x->flat_c[t_in] : 1, HW = I / C;
    for (int64_t o = 0; o < O; o++)
        for (int64_t j = 0; j < I; j++) src[o * I + j] = o * I + (j % C) * HW + j / C;
    /* [1, I] -> [1, 1, 1, I], a 1x1 CONV_2D, [1, 1, 1, O] -> [1, O] (the reason: docs/tflite.md) */
    int32_t shape[4] = {(int32_t)O, 1, 1, (int32_t)I}, in4[4] = {1, 1, 1, (int32_t)I}, out4[4] = {1, 1, 1, (int32_t)O};
    int w = weight_tensor(x, op, 4, shape, src, 0, O), b = w < 0 ? -1 : bias_tensor(x, op, O);
    if (b < 0) return QAT_ERR_NOMEM;
    if ((st = activation(x, op->output, NULL)) != QAT_OK) return st;
    const qat_aparams *qi = &x->q->tensors[t_in].q, *qo = &x->q->tensors[op->output].q;
    int xi = add_tensor(x, op->name, ".in", QAT__TFL_INT8, 4, in4);
    int y = xi < 0 ? -1 : add_tensor(x, op->name, ".conv", QAT__TFL_INT8, 4, out4);
    if (y < 0 || quantize_as(x, xi, qi) != QAT_OK || quantize_as(x, y, qo) != QAT_OK)
        return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    if ((st = reshape(x, op->name, ".in_shape", x->tid[t_in], xi)) != QAT_OK) return st;
    int ins[3] = {xi, w, b};
    qat__tfl_op *t = add_op(x, QAT__TFL_CONV_2D, 3, ins, y);
    if (!t) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    t->padding = QAT__TFL_VALID, t->stride_w = t->stride_h = 1, t->act = act;
    return reshape(x, op->name, ".shape", y, x->tid[op->output]);
}

static qat_status pool(tfl *x, const qat_qop *op, bool global) {
    const qat_qtensor *in = &x->q->tensors[op->inputs[0]], *out = &x->q->tensors[op->output];
    bool avg = op->kind != QAT_QOP_MAXPOOL2D;
    if (avg && !op->keeps_scale)
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: an average pool that requantizes (its own scale): "
                    "TFLite's int8 AVERAGE_POOL_2D keeps its input's quantization (train with --target tflite)",
                    op->name);
    if (!same_q(&in->q, &out->q))
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a pool whose output quantization differs from its "
                    "input's", op->name);
    int act = QAT__TFL_ACT_NONE;
    qat_status st = avg ? fused_act(x, op, &act) : QAT_OK;
    if (st != QAT_OK) return st;
    int pad = global ? QAT__TFL_VALID : window_padding(op, in);
    if (pad < 0)
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: padding %dx%d is neither TFLite's SAME nor VALID "
                    "for this window and stride", op->name, op->pad_h, op->pad_w);
    int y;
    if (global) { /* a window of the whole map, [1, 1, 1, C], then [1, C] */
        int32_t shape[4] = {1, 1, 1, (int32_t)in->shape[0]};
        if ((y = add_tensor(x, op->name, ".pool", QAT__TFL_INT8, 4, shape)) < 0 || quantize_as(x, y, &out->q) != QAT_OK)
            return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    } else {
        if ((st = activation(x, op->output, NULL)) != QAT_OK) return st;
        y = x->tid[op->output];
    }
    int xin = x->tid[op->inputs[0]];
    qat__tfl_op *t = add_op(x, avg ? QAT__TFL_AVERAGE_POOL_2D : QAT__TFL_MAX_POOL_2D, 1, &xin, y);
    if (!t) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    t->padding = pad, t->act = act;
    t->filter_h = global ? (int)in->shape[1] : op->kh, t->filter_w = global ? (int)in->shape[2] : op->kw;
    t->stride_h = global ? 1 : op->stride_h, t->stride_w = global ? 1 : op->stride_w;
    if (!global) return QAT_OK;
    if ((st = activation(x, op->output, NULL)) != QAT_OK) return st;
    return reshape(x, op->name, ".shape", y, x->tid[op->output]);
}

/* Whether every op reading tensor t is a fully connected op. */
static bool read_by_linear_only(const qat_qmodel *q, int t) {
    if (t == q->output) return false;
    for (int k = 0; k < q->n_ops; k++)
        for (int j = 0; j < q->ops[k].n_inputs; j++)
            if (q->ops[k].inputs[j] == t && q->ops[k].kind != QAT_QOP_LINEAR) return false;
    return true;
}

static qat_status flatten(tfl *x, const qat_qop *op) {
    const qat_qtensor *in = &x->q->tensors[op->inputs[0]];
    int xin = x->tid[op->inputs[0]];
    qat_status st;
    if (in->rank == 3 && in->shape[1] * in->shape[2] > 1) {
        if (read_by_linear_only(x->q, op->output)) {
            x->flat_c[op->output] = in->shape[0];
        } else { /* [1, H, W, C] -> [1, C, H, W]: qat's order */
            int32_t shape[4] = {1, (int32_t)in->shape[0], (int32_t)in->shape[1], (int32_t)in->shape[2]};
            int32_t pshape[1] = {4}, *perm = own(x, 4, sizeof *perm);
            int p = perm ? add_tensor(x, op->name, ".perm", QAT__TFL_INT32, 1, pshape) : -1;
            int y = p < 0 ? -1 : add_tensor(x, op->name, ".nchw", QAT__TFL_INT8, 4, shape);
            if (y < 0 || quantize_as(x, y, &in->q) != QAT_OK) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
            perm[0] = 0, perm[1] = 3, perm[2] = 1, perm[3] = 2;
            x->g.tensors[p].data = perm, x->g.tensors[p].bytes = 4 * sizeof *perm;
            int ins[2] = {xin, p};
            if (!add_op(x, QAT__TFL_TRANSPOSE, 2, ins, y)) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
            xin = y;
        }
    }
    if ((st = activation(x, op->output, NULL)) != QAT_OK) return st;
    return reshape(x, op->name, ".shape", xin, x->tid[op->output]);
}

/* ADD, MUL, CONCATENATION, RELU/RELU6: element-wise or along channels
 * (never on a flatten kept in (h, w, c) order: only linear ops read one). */
static qat_status elementwise(tfl *x, const qat_qop *op) {
    const qat_aparams *o = &x->q->tensors[op->output].q;
    int code = 0, act = QAT__TFL_ACT_NONE;
    qat_status st = QAT_OK;
    switch (op->kind) {
    case QAT_QOP_ADD:
        if (op->left_shift != QAT_ADD_LEFT_SHIFT || op->shift[2] > 0)
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: an add whose left shift (%d) or output multiplier "
                        "TFLite's int8 ADD does not use", op->name, op->left_shift);
        code = QAT__TFL_ADD, st = fused_act(x, op, &act);
        break;
    case QAT_QOP_MUL:
        code = QAT__TFL_MUL, st = fused_act(x, op, &act);
        break;
    case QAT_QOP_CONCAT:
        for (int j = 0; j < op->n_inputs; j++)
            if (!same_q(&x->q->tensors[op->inputs[j]].q, o))
                return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: input %s has its own quantization; TFLite's "
                            "int8 CONCATENATION needs every input at the output's scale and zero point", op->name,
                            x->q->tensors[op->inputs[j]].name);
        if (op->act_min != -128 || op->act_max != 127) /* TFLite's CONCATENATION takes no fused activation */
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a concatenation that clamps to [%d, %d]; TFLite's "
                        "int8 CONCATENATION copies integers", op->name, (int)op->act_min, (int)op->act_max);
        code = QAT__TFL_CONCATENATION;
        break;
    case QAT_QOP_RELU:
        if (!same_q(&x->q->tensors[op->inputs[0]].q, o))
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a ReLU that requantizes", op->name);
        if (op->act_min == -128 && op->act_max == 127) { /* a clamp that is the storage range: nothing */
            x->tid[op->output] = x->tid[op->inputs[0]];
            return QAT_OK;
        }
        st = fused_act(x, op, &act);
        code = act == QAT__TFL_ACT_RELU6 ? QAT__TFL_RELU6 : QAT__TFL_RELU, act = QAT__TFL_ACT_NONE;
        break;
    default: break;
    }
    if (st != QAT_OK || (st = activation(x, op->output, NULL)) != QAT_OK) return st;
    int ins[QAT_QOP_MAX_INPUTS];
    for (int j = 0; j < op->n_inputs; j++) ins[j] = x->tid[op->inputs[j]];
    qat__tfl_op *t = add_op(x, code, op->n_inputs, ins, x->tid[op->output]);
    if (!t) return fail(x, QAT_ERR_NOMEM, "tflite: out of memory");
    t->act = act, t->axis = x->q->tensors[op->output].rank == 3 ? 3 : 1;
    return QAT_OK;
}

/* ---- the whole program ---------------------------------------------------------------- */

static qat_status check_activations(tfl *x) {
    for (int t = 0; t < x->q->n_tensors; t++) {
        const qat_qtensor *p = &x->q->tensors[t];
        if (p->q.bits != 8 || !p->q.is_signed || p->q.qmin != -128 || p->q.qmax != 127)
            return fail(x, QAT_ERR_UNSUPPORTED, "tflite: tensor %s: %s%d activations over [%d, %d]; TFLite's int8 "
                        "kernels take int8 over [-128, 127] (train with 8-bit activations)", p->name,
                        p->q.is_signed ? "i" : "u", p->q.bits, (int)p->q.qmin, (int)p->q.qmax);
    }
    return QAT_OK;
}

static qat_status build(tfl *x) {
    const qat_qmodel *q = x->q;
    qat_status st = check_activations(x);
    if (st == QAT_OK) st = activation(x, q->input, "input");
    for (int i = 0; st == QAT_OK && i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if ((st = check_multipliers(x, op)) != QAT_OK) break;
        switch (op->kind) {
        case QAT_QOP_CONV2D: st = conv(x, op); break;
        case QAT_QOP_LINEAR: st = linear(x, op); break;
        case QAT_QOP_MAXPOOL2D:
        case QAT_QOP_AVGPOOL2D: st = pool(x, op, false); break;
        case QAT_QOP_GLOBAL_AVGPOOL: st = pool(x, op, true); break;
        case QAT_QOP_FLATTEN: st = flatten(x, op); break;
        case QAT_QOP_ADD:
        case QAT_QOP_MUL:
        case QAT_QOP_CONCAT:
        case QAT_QOP_RELU: st = elementwise(x, op); break;
        case QAT_QOP_LUT:
            st = fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: a %s table: TFLite's int8 LOGISTIC, TANH and "
                      "HARD_SWISH compute their own integers, which qat does not reproduce", op->name,
                      qat_lut_fn_str(op->lut));
            break;
        default: st = fail(x, QAT_ERR_UNSUPPORTED, "tflite: layer %s: op %s has no TFLite form", op->name,
                           qat_qop_kind_str(op->kind));
        }
    }
    if (st != QAT_OK) return st;
    x->g.input = x->tid[q->input], x->g.output = x->tid[q->output];
    snprintf(x->g.tensors[x->g.output].name, sizeof x->g.tensors[0].name, "output");
    size_t total = 0; /* constants, and each tensor's scales and zero points (12 bytes a channel) */
    for (int t = 0; t < x->g.n_tensors; t++) total += x->g.tensors[t].bytes + 12 * (size_t)x->g.tensors[t].n_q + 256;
    if (total > ((size_t)1 << 30))
        return fail(x, QAT_ERR_UNSUPPORTED, "tflite: %zu bytes of constants: over the 1 GiB a flatbuffer holds "
                    "safely", total);
    return QAT_OK;
}

bool qat_tflite_available(void) { return true; }

qat_status qat_tflite_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len) {
    if (msg && len) msg[0] = '\0';
    if (!bytes || !size) return QAT_ERR_ARG;
    *bytes = NULL, *size = 0;
    if (!q) return QAT_ERR_ARG;
    qat_status st = qat_qmodel_check(q, msg, len);
    if (st != QAT_OK) return st;
    if (q->rounding != QAT_ROUNDING_DOUBLE) { /* TFLite's stock kernels: TFLITE_SINGLE_ROUNDING is a build flag */
        if (msg && len)
            snprintf(msg, len, "tflite: the program rounds its requantization once; TFLite's int8 kernels, as "
                     "built by default, round twice and would give other integers (export with --rounding double)");
        return QAT_ERR_UNSUPPORTED;
    }
    tfl x = {.q = q, .msg = msg, .len = len};
    x.tid = malloc((size_t)q->n_tensors * sizeof *x.tid);
    x.flat_c = calloc((size_t)q->n_tensors, sizeof *x.flat_c);
    if (!x.tid || !x.flat_c) st = fail(&x, QAT_ERR_NOMEM, "tflite: out of memory");
    for (int t = 0; st == QAT_OK && t < q->n_tensors; t++) x.tid[t] = -1;
    char description[160];
    snprintf(description, sizeof description, "qat %s integer program (docs/tflite.md)", qat_version()); /* the producer */
    x.g.description = description;
    if (st == QAT_OK) st = build(&x);
    if (st == QAT_OK) st = qat__tfl_serialize(&x.g, bytes, size, msg, len);
    for (int k = 0; k < x.n_owned; k++) free(x.owned[k]);
    free(x.owned), free(x.tid), free(x.flat_c), free(x.g.tensors), free(x.g.ops);
    return st;
}
