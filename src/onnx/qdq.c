/* The integer program as a QDQ graph (docs/onnx.md).
 *
 * Each tensor t of the program is the output of a QuantizeLinear,
 * "<t>.q" (int8, or uint8 for an unsigned type), at t's scale and zero
 * point; a consumer reads its DequantizeLinear, "<t>.dq". Each op becomes
 * the float op that, given those dequantized values, computes what the
 * integer op requantizes: Conv/Gemm over dequantized weights and biases,
 * Add, Concat, the pools, Sigmoid/Tanh/HardSwish (the functions qat's
 * tables sample). The op's fused clamp (act_min/act_max: ReLU, ReLU6, or a
 * storage range narrower than 8 bits) is a float Relu/Clip before the
 * QuantizeLinear where the Q's saturation makes it redundant, else an
 * integer Clip after it (see quantize).
 *
 * With a normalization, the graph's float input is raw: Div(divisor),
 * Sub(mean), Div(std), as float32 ops in the model's order, then the
 * input's quantization as qat rounds it (raw_input).
 *
 * Names: "<t>.q", "<t>.dq", "<t>.scale", "<t>.zero_point" for tensors;
 * "<op>.weight.q" / ".weight.scale" / ".weight.zero_point" -> "<op>.weight",
 * the same for ".bias"; the graph's input "input", output "logits". The
 * node of each op is named after its layer, every other node after the
 * value it makes (so node names are unique when value names are). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    qat__onnx_builder *b;
    const qat_qmodel *q;
    const char **qv;    /* [n_tensors]: the value holding tensor t's integers */
    const char **dqv;   /* [n_tensors]: its DequantizeLinear output, made on first use */
    const char **scale; /* [n_tensors]: its scale and zero point initializers, made on first use */
    const char **zp;
} qdq;

static const char *tname(const qdq *x, int t) { return x->q->tensors[t].name; }

static bool is_signed(const qat_aparams *a) { return a->is_signed; }
static int32_t type_min(const qat_aparams *a) { return is_signed(a) ? -128 : 0; }
static int32_t type_max(const qat_aparams *a) { return is_signed(a) ? 127 : 255; }

/* ---- what ONNX can say ---------------------------------------------------------------- */

qat_status qat__onnx_supported(const qat_qmodel *q, qat__onnx_err *err) {
    for (int t = 0; t < q->n_tensors; t++) {
        const qat_qtensor *x = &q->tensors[t];
        if (x->q.bits > 8)
            return qat__onnx_fail(err, QAT_ERR_UNSUPPORTED, "onnx: tensor %s: %d-bit activations have no ONNX form "
                                "at opset %d (QuantizeLinear takes 16-bit integers from opset 21)", x->name,
                                x->q.bits, QAT_ONNX_OPSET);
    }
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (op->keeps_scale) /* a QDQ pool would round the mean of the dequantized values half to even */
            return qat__onnx_fail(err, QAT_ERR_UNSUPPORTED, "onnx: layer %s: an average pool that keeps its input's "
                                "quantization divides its integer sum rounding half away from zero, which no "
                                "AveragePool between DequantizeLinear and QuantizeLinear (half to even) computes "
                                "exactly", op->name);
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        const qat_qtype *w = &op->wq;
        if (w->bits > 8)
            return qat__onnx_fail(err, QAT_ERR_UNSUPPORTED, "onnx: layer %s: %d-bit weights have no ONNX form at "
                                "opset %d (DequantizeLinear takes 16-bit integers from opset 21)", op->name, w->bits,
                                QAT_ONNX_OPSET);
        int axis = qat_qtype_axis(w);
        if (axis == -2) {
            char blocks[96] = "";
            for (int d = 0, k = 0; d < w->rank && k < (int)sizeof blocks; d++)
                k += snprintf(blocks + k, sizeof blocks - (size_t)k, "%s%lld", d ? "x" : "", (long long)w->block[d]);
            return qat__onnx_fail(err, QAT_ERR_UNSUPPORTED, "onnx: layer %s: sub-channel weight quantization (blocks "
                                "%s) has no ONNX form before opset 21's blocked DequantizeLinear; quantize that "
                                "layer per channel or per tensor to export it", op->name, blocks);
        }
        if (axis > 0)
            return qat__onnx_fail(err, QAT_ERR_UNSUPPORTED, "onnx: layer %s: weights quantized along axis %d: an "
                                "integer kernel needs one scale per output channel (axis 0) or one per tensor",
                                op->name, axis);
    }
    return QAT_OK;
}

/* ---- activations: QuantizeLinear / DequantizeLinear ---------------------------------- */

/* Tensor t's scale and zero point as scalar initializers. */
static void params(qdq *x, int t) {
    if (x->scale[t]) return;
    const qat_aparams *a = &x->q->tensors[t].q;
    x->scale[t] = qat__ob_str(x->b, "%s.scale", tname(x, t));
    x->zp[t] = qat__ob_str(x->b, "%s.zero_point", tname(x, t));
    qat__ob_init_floats(x->b, x->scale[t], 0, NULL, &a->scale);
    qat__ob_init_ints(x->b, x->zp[t], is_signed(a) ? QAT__ONNX_INT8 : QAT__ONNX_UINT8, 0, NULL, &a->zero_point);
}

/* A float scalar initializer s·(k - zp): the real value of integer k. Its
 * QuantizeLinear is k exactly: (s·k')/s rounds to k' for |k'| <= 255. */
static const char *real_of(qdq *x, int t, const char *what, int32_t k) {
    const qat_aparams *a = &x->q->tensors[t].q;
    const char *name = qat__ob_str(x->b, "%s.%s", tname(x, t), what);
    float v = a->scale * (float)(k - a->zero_point);
    qat__ob_init_floats(x->b, name, 0, NULL, &v);
    return name;
}

/* Quantizes the float value into tensor t's integers (named out) with the
 * integer op's final clamp [lo, hi] and fused activation.
 *
 * Where QuantizeLinear's own saturation is the clamp (an 8-bit type whose
 * ReLU clamps at the bottom of its range, a ReLU6 whose 6 lies past the
 * top), the activation is the float Relu, or Clip(0, s·(act_max - zp)),
 * right before the QuantizeLinear: the standard QDQ shape, which
 * onnxruntime recognises as redundant and fuses away. Where the clamp is
 * narrower (storage under 8 bits, a ReLU over a zero point above the
 * bottom), it is an integer Clip after the QuantizeLinear: exact, and it
 * leaves the op's DQ -> op -> Q group whole for the fusion, which a float
 * clamp in front of the Q would break (docs/onnx.md has the measurement). */
static void quantize(qdq *x, int t, const char *value, qat_act_kind act, int32_t lo, int32_t hi, const char *out) {
    qat__onnx_builder *b = x->b;
    const qat_aparams *a = &x->q->tensors[t].q;
    const char *n = tname(x, t);
    bool saturates = lo <= type_min(a) && hi >= type_max(a);
    if (saturates && act == QAT_ACT_RELU) {
        const char *r = qat__ob_str(b, "%s.relu", n);
        qat__ob_node(b, "Relu", r, 1, &value, r);
        value = r;
    } else if (saturates && act == QAT_ACT_RELU6) {
        const char *in[3] = {value, real_of(x, t, "clip_min", a->zero_point), real_of(x, t, "clip_max", hi)};
        const char *c = qat__ob_str(b, "%s.clip", n);
        qat__ob_node(b, "Clip", c, 3, in, c);
        value = c;
    }
    params(x, t);
    const char *q = saturates ? out : qat__ob_str(b, "%s.unclamped", n);
    const char *in[3] = {value, x->scale[t], x->zp[t]};
    qat__ob_node(b, "QuantizeLinear", q, 3, in, q);
    if (saturates) return;
    const char *lon = qat__ob_str(b, "%s.act_min", n), *hin = qat__ob_str(b, "%s.act_max", n);
    int type = is_signed(a) ? QAT__ONNX_INT8 : QAT__ONNX_UINT8;
    qat__ob_init_ints(b, lon, type, 0, NULL, &lo);
    qat__ob_init_ints(b, hin, type, 0, NULL, &hi);
    const char *cin[3] = {q, lon, hin};
    qat__ob_node(b, "Clip", out, 3, cin, out);
}

/* The float value of tensor t, for its consumers. */
static const char *dq(qdq *x, int t) {
    if (!x->dqv[t]) {
        params(x, t);
        const char *n = tname(x, t), *out = qat__ob_str(x->b, "%s.dq", n);
        const char *in[3] = {x->qv[t], x->scale[t], x->zp[t]};
        qat__ob_node(x->b, "DequantizeLinear", out, 3, in, out);
        x->dqv[t] = out;
    }
    return x->dqv[t];
}

/* ---- the raw input: normalization, then qat's input quantization ---------------------- */

/* A per-channel constant of the normalization: [1, C, 1, 1] for C > 1
 * (broadcast along the channels of [N, C, H, W]), a scalar for one channel. */
static const char *norm_const(qdq *x, const char *what, const float *v, int channels) {
    const char *name = qat__ob_str(x->b, "input.%s", what);
    int64_t dims[4] = {1, channels, 1, 1};
    qat__ob_init_floats(x->b, name, channels > 1 ? 4 : 0, dims, v);
    return name;
}

/* ((input / divisor) - mean) / std, as qat computes it: three float32
 * operations in that order (onnxruntime computes each elementwise, in
 * IEEE single precision), then the quantization. QuantizeLinear(v, s)
 * would compute v / s; qat computes v · (1/s) (the fake quantization's
 * rounding), and the two can round apart. So the product is a Mul by the
 * float32 constant 1/s, and its QuantizeLinear has scale 1: dividing by 1
 * is exact, and the integers are qat's on every input. The DequantizeLinear
 * that the first op reads keeps the input's real scale. */
static void raw_input(qdq *x, const char *in) {
    qat__onnx_builder *b = x->b;
    const qat_normalization *n = x->q->norm;
    int t = x->q->input;
    const qat_aparams *a = &x->q->tensors[t].q;
    const char *d = qat__ob_str(b, "input.divisor");
    qat__ob_init_floats(b, d, 0, NULL, &n->divisor);
    const char *args[3] = {in, d, NULL};
    qat__ob_node(b, "Div", "input.divided", 2, args, "input.divided");
    args[0] = "input.divided", args[1] = norm_const(x, "mean", n->mean, n->channels);
    qat__ob_node(b, "Sub", "input.centered", 2, args, "input.centered");
    args[0] = "input.centered", args[1] = norm_const(x, "std", n->std, n->channels);
    qat__ob_node(b, "Div", "input.normalized", 2, args, "input.normalized");
    float inv = 1.0f / a->scale, one = 1.0f;
    args[0] = "input.normalized", args[1] = "input.inv_scale";
    qat__ob_init_floats(b, "input.inv_scale", 0, NULL, &inv);
    qat__ob_node(b, "Mul", "input.times_inv_scale", 2, args, "input.times_inv_scale");
    params(x, t);
    qat__ob_init_floats(b, "input.unit_scale", 0, NULL, &one);
    bool saturates = a->qmin <= type_min(a) && a->qmax >= type_max(a);
    const char *q = saturates ? x->qv[t] : "input.unclamped";
    const char *qin[3] = {"input.times_inv_scale", "input.unit_scale", x->zp[t]};
    qat__ob_node(b, "QuantizeLinear", q, 3, qin, q);
    if (saturates) return;
    /* a storage range narrower than the type: the integer Clip, as quantize() */
    int type = is_signed(a) ? QAT__ONNX_INT8 : QAT__ONNX_UINT8;
    qat__ob_init_ints(b, "input.act_min", type, 0, NULL, &a->qmin);
    qat__ob_init_ints(b, "input.act_max", type, 0, NULL, &a->qmax);
    const char *cin[3] = {q, "input.act_min", "input.act_max"};
    qat__ob_node(b, "Clip", x->qv[t], 3, cin, x->qv[t]);
}

/* ---- weights and biases --------------------------------------------------------------- */

/* A DequantizeLinear of integer constants: values [rank dims], scales and
 * zero points either one each (per tensor) or dims[0] each (axis 0). */
static const char *dequantized_const(qdq *x, const char *name, int type, int rank, const int64_t *dims,
                                     const int32_t *v, bool per_channel, const float *scale, const int32_t *zp) {
    qat__onnx_builder *b = x->b;
    const char *qn = qat__ob_str(b, "%s.q", name), *sn = qat__ob_str(b, "%s.scale", name);
    const char *zn = qat__ob_str(b, "%s.zero_point", name);
    qat__ob_init_ints(b, qn, type, rank, dims, v);
    qat__ob_init_floats(b, sn, per_channel, dims, scale);
    qat__ob_init_ints(b, zn, type, per_channel, dims, zp);
    const char *in[3] = {qn, sn, zn};
    Qat__Onnx__NodeProto *node = qat__ob_node(b, "DequantizeLinear", name, 3, in, name);
    if (per_channel) qat__ob_attr_int(b, node, "axis", 0);
    return name;
}

static const char *weight(qdq *x, const qat_qop *op) {
    const qat_qtype *w = &op->wq;
    bool per_channel = qat_qtype_axis(w) == 0; /* else per tensor: qat__onnx_supported refused the rest */
    return dequantized_const(x, qat__ob_str(x->b, "%s.weight", op->name), w->is_signed ? QAT__ONNX_INT8 : QAT__ONNX_UINT8,
                             w->rank, w->shape, op->weight, per_channel, w->scale, w->zero_point);
}

/* The int32 bias at scale s_in·s_w[o], zero point 0: one scale when they
 * are all equal (per-tensor weights), else one per output channel. */
static const char *bias(qdq *x, const qat_qop *op) {
    int64_t O = op->wq.shape[0];
    bool per_channel = false;
    for (int64_t o = 1; o < O; o++) per_channel |= op->bias_scale[o] != op->bias_scale[0];
    int32_t *zeros = qat__ob_alloc(x->b, (size_t)O * sizeof *zeros);
    if (!zeros) return "";
    return dequantized_const(x, qat__ob_str(x->b, "%s.bias", op->name), QAT__ONNX_INT32, 1, &O, op->bias,
                             per_channel, op->bias_scale, zeros);
}

/* ---- ops ------------------------------------------------------------------------------ */

static void window(qat__onnx_builder *b, Qat__Onnx__NodeProto *n, const qat_qop *op) {
    qat__ob_attr_ints(b, n, "kernel_shape", 2, (int64_t[]){op->kh, op->kw});
    qat__ob_attr_ints(b, n, "strides", 2, (int64_t[]){op->stride_h, op->stride_w});
    qat__ob_attr_ints(b, n, "pads", 4, (int64_t[]){op->pad_h, op->pad_w, op->pad_h, op->pad_w});
}

/* The float op of one integer op, and the QuantizeLinear of its output. */
/* A table alone (QAT_LUT_TABLE) as Gather: the input's integers as int32
 * indices less qmin, into the real values s_out·(table[i] - zp_out) of the
 * output's integers, which its QuantizeLinear gives back exactly (as
 * real_of's); the value named f. */
static void table(qdq *x, const qat_qop *op, const char *f) {
    qat__onnx_builder *b = x->b;
    int t = op->output;
    const qat_aparams *in = &x->q->tensors[op->inputs[0]].q, *out = &x->q->tensors[t].q;
    const char *n = tname(x, t);
    const char *i32 = qat__ob_str(b, "%s.lut_int32", n), *idx = qat__ob_str(b, "%s.lut_index", n);
    const char *lo = qat__ob_str(b, "%s.lut_qmin", n), *vals = qat__ob_str(b, "%s.lut_table", n);
    const char *qv = x->qv[op->inputs[0]];
    Qat__Onnx__NodeProto *c = qat__ob_node(b, "Cast", i32, 1, &qv, i32);
    qat__ob_attr_int(b, c, "to", QAT__ONNX_INT32);
    qat__ob_init_ints(b, lo, QAT__ONNX_INT32, 0, NULL, &in->qmin);
    const char *sub[2] = {i32, lo};
    qat__ob_node(b, "Sub", idx, 2, sub, idx);
    float *v = qat__ob_alloc(b, (size_t)op->table_len * sizeof *v);
    for (int32_t i = 0; v && i < op->table_len; i++) v[i] = out->scale * (float)(op->table[i] - out->zero_point);
    int64_t len = op->table_len;
    if (v) qat__ob_init_floats(b, vals, 1, &len, v);
    const char *g[2] = {vals, idx};
    qat__ob_node(b, "Gather", op->name, 2, g, f);
}

static void emit(qdq *x, const qat_qop *op) {
    qat__onnx_builder *b = x->b;
    int t = op->output;
    const qat_aparams *a = &x->q->tensors[t].q;
    const char *f = qat__ob_str(b, "%s.f", tname(x, t)), *in[QAT_QOP_MAX_INPUTS];
    bool gather = op->kind == QAT_QOP_LUT && op->lut == QAT_LUT_TABLE; /* reads the integers themselves */
    for (int j = 0; j < op->n_inputs; j++) in[j] = gather ? NULL : dq(x, op->inputs[j]);
    qat_act_kind act = op->act;
    int32_t lo = op->act_min, hi = op->act_max;
    Qat__Onnx__NodeProto *n = NULL;
    switch (op->kind) {
    case QAT_QOP_LINEAR:
    case QAT_QOP_CONV2D: {
        const char *args[3] = {in[0], weight(x, op), bias(x, op)};
        bool conv = op->kind == QAT_QOP_CONV2D;
        n = qat__ob_node(b, conv ? "Conv" : "Gemm", op->name, 3, args, f);
        if (conv) {
            window(b, n, op);
            qat__ob_attr_ints(b, n, "dilations", 2, (int64_t[]){1, 1});
            qat__ob_attr_int(b, n, "group", op->groups);
        } else { /* y = x·Wᵀ + b, every attribute spelled out (some runtimes read them all) */
            qat__ob_attr_float(b, n, "alpha", 1.0f);
            qat__ob_attr_float(b, n, "beta", 1.0f);
            qat__ob_attr_int(b, n, "transA", 0);
            qat__ob_attr_int(b, n, "transB", 1);
        }
        break;
    }
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_FLATTEN:
        /* the same integers, the same parameters: no clamp to add (ORT drops the pair) */
        n = qat__ob_node(b, op->kind == QAT_QOP_FLATTEN ? "Flatten" : "MaxPool", op->name, 1, in, f);
        if (op->kind == QAT_QOP_FLATTEN) qat__ob_attr_int(b, n, "axis", 1);
        else window(b, n, op);
        lo = type_min(a), hi = type_max(a);
        break;
    case QAT_QOP_RELU: /* the op is the Relu; the integers' clamp at zp is what it computes */
        qat__ob_node(b, "Relu", op->name, 1, in, f);
        act = QAT_ACT_NONE, lo = a->qmin;
        break;
    case QAT_QOP_AVGPOOL2D:
        n = qat__ob_node(b, "AveragePool", op->name, 1, in, f);
        window(b, n, op);
        qat__ob_attr_int(b, n, "count_include_pad", 1); /* padding is real 0 and counts, as in qat */
        break;
    case QAT_QOP_GLOBAL_AVGPOOL: {
        /* [N, C, H, W] -> [N, C, 1, 1], quantized; then [N, C] by a Flatten
         * between a DQ/Q pair of the same parameters (exact) */
        qat__ob_node(b, "GlobalAveragePool", op->name, 1, in, f);
        const char *pq = qat__ob_str(b, "%s.pool.q", tname(x, t)), *pdq = qat__ob_str(b, "%s.pool", tname(x, t));
        quantize(x, t, f, act, lo, hi, pq);
        const char *args[3] = {pq, x->scale[t], x->zp[t]};
        qat__ob_node(b, "DequantizeLinear", pdq, 3, args, pdq);
        f = qat__ob_str(b, "%s.flat", tname(x, t));
        n = qat__ob_node(b, "Flatten", f, 1, &pdq, f);
        qat__ob_attr_int(b, n, "axis", 1);
        act = QAT_ACT_NONE, lo = type_min(a), hi = type_max(a);
        break;
    }
    case QAT_QOP_ADD: qat__ob_node(b, "Add", op->name, 2, in, f); break;
    case QAT_QOP_MUL: qat__ob_node(b, "Mul", op->name, 2, in, f); break; /* [N, C, 1, 1] broadcasts */
    case QAT_QOP_CONCAT:
        n = qat__ob_node(b, "Concat", op->name, op->n_inputs, in, f);
        qat__ob_attr_int(b, n, "axis", 1); /* channels, or the features of a vector */
        break;
    case QAT_QOP_LUT: {
        static const char *const fn[QAT_LUT_FN_COUNT] = {"Sigmoid", "Tanh", "HardSwish", NULL};
        if (gather) table(x, op, f);
        else qat__ob_node(b, fn[op->lut], op->name, 1, in, f);
        break;
    }
    case QAT_QOP_KIND_COUNT: break;
    }
    quantize(x, t, f, act, lo, hi, x->qv[t]);
}

/* Every value and every node name once (onnxruntime refuses a repeated
 * node name): names come from layer names, which a hand-made or loaded
 * program might repeat, or spell like one of the suffixes. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static qat_status unique(const char **all, size_t n, const char *what, qat__onnx_err *err) {
    qsort(all, n, sizeof *all, cmp_str);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(all[i - 1], all[i]))
            return qat__onnx_fail(err, QAT_ERR_FORMAT, "onnx: two %s would both be named \"%s\": the program's "
                                "layer names must be unique (and none may be \"input\" or \"logits\")", what, all[i]);
    return QAT_OK;
}

static qat_status check_names(const qat__onnx_builder *b, qat__onnx_err *err) {
    const Qat__Onnx__GraphProto *g = &b->graph;
    size_t n = g->n_input + g->n_initializer + g->n_node, k = 0;
    const char **all = malloc((n ? n : 1) * sizeof *all);
    if (!all) return qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory");
    for (size_t i = 0; i < g->n_input; i++) all[k++] = g->input[i]->name;
    for (size_t i = 0; i < g->n_initializer; i++) all[k++] = g->initializer[i]->name;
    for (size_t i = 0; i < g->n_node; i++) all[k++] = g->node[i]->output[0];
    qat_status st = unique(all, k, "values", err);
    for (k = 0; k < g->n_node; k++) all[k] = g->node[k]->name;
    if (st == QAT_OK) st = unique(all, k, "nodes", err);
    free(all);
    return st;
}

qat_status qat__onnx_graph(qat__onnx_builder *b, const qat_qmodel *q, qat__onnx_err *err) {
    qdq x = {.b = b, .q = q};
    size_t n = (size_t)q->n_tensors;
    x.qv = calloc(n, sizeof *x.qv), x.dqv = calloc(n, sizeof *x.dqv);
    x.scale = calloc(n, sizeof *x.scale), x.zp = calloc(n, sizeof *x.zp);
    qat_status st = QAT_OK;
    if (!x.qv || !x.dqv || !x.scale || !x.zp) st = qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory");
    for (int t = 0; st == QAT_OK && t < q->n_tensors; t++) x.qv[t] = qat__ob_str(b, "%s.q", tname(&x, t));
    if (st == QAT_OK) {
        const qat_qtensor *in = &q->tensors[q->input], *out = &q->tensors[q->output];
        qat__ob_input(b, "input", QAT__ONNX_FLOAT, in->rank, in->shape);
        if (q->norm) raw_input(&x, "input");
        else quantize(&x, q->input, "input", QAT_ACT_NONE, in->q.qmin, in->q.qmax, x.qv[q->input]);
        for (int i = 0; i < q->n_ops; i++) emit(&x, &q->ops[i]);
        /* the logits: the output integers dequantized */
        params(&x, q->output);
        const char *args[3] = {x.qv[q->output], x.scale[q->output], x.zp[q->output]};
        qat__ob_node(b, "DequantizeLinear", "logits", 3, args, "logits");
        qat__ob_output(b, "logits", QAT__ONNX_FLOAT, out->rank, out->shape);
        if (!b->ok) st = qat__onnx_fail(err, QAT_ERR_NOMEM, "onnx: out of memory");
    }
    if (st == QAT_OK) st = check_names(b, err);
    free(x.qv), free(x.dqv), free(x.scale), free(x.zp);
    return st;
}
