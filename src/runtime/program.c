/* The integer program: names, shapes, and qat_qmodel_check — every
 * quantity checked against the rules of docs/quantized-model-format.md.
 * The loader runs the check on what it read and export on what it is about
 * to write, so the two can never disagree about what a valid file is. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/runtime.h"
#include "subchannel.h"

static const char *const kind_names[QAT_QOP_KIND_COUNT] = {
    "linear", "conv2d", "maxpool2d", "avgpool2d", "flatten", "relu", "add", "concat", "global_avgpool", "lut", "mul"};
static const char *const act_names[] = {"none", "relu", "relu6"};
static const char *const lut_names[QAT_LUT_FN_COUNT] = {"sigmoid", "tanh", "hardswish", "table"};

const char *qat_qop_kind_str(qat_qop_kind k) { return (unsigned)k < QAT_QOP_KIND_COUNT ? kind_names[k] : "unknown"; }
const char *qat_act_kind_str(qat_act_kind k) { return (unsigned)k <= QAT_ACT_RELU6 ? act_names[k] : "unknown"; }
const char *qat_lut_fn_str(qat_lut_fn f) { return (unsigned)f < QAT_LUT_FN_COUNT ? lut_names[f] : "unknown"; }

static const char *const rounding_names[QAT_ROUNDING_COUNT] = {"double", "single"};
const char *qat_rounding_str(qat_rounding r) { return (unsigned)r < QAT_ROUNDING_COUNT ? rounding_names[r] : "unknown"; }
int qat_qmodel_file_version(const qat_qmodel *q) { return q && q->rounding == QAT_ROUNDING_SINGLE ? 5 : 4; }

bool qat_rounding_parse(const char *s, qat_rounding *out) {
    for (int r = 0; s && out && r < QAT_ROUNDING_COUNT; r++)
        if (!strcmp(s, rounding_names[r])) return *out = (qat_rounding)r, true;
    return false;
}

int64_t qat_qtensor_numel(const qat_qtensor *t) {
    if (!t) return 0;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

bool qat_qop_subchannel(const qat_qop *op) {
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return false;
    int axis = qat_qtype_axis(&op->wq);
    return axis != -1 && axis != 0;
}

bool qat_qop_int8_weights(const qat_qop *op, int8_t *out) {
    if (!op || !op->weight) return false;
    const qat_qtype *wq = &op->wq;
    int64_t n = 1;
    for (int d = 0; d < wq->rank; d++) n *= wq->shape[d];
    for (int64_t i = 0; i < n; i++) {
        int32_t v = op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)];
        if (v < INT8_MIN || v > INT8_MAX) return false;
        if (out) out[i] = (int8_t)v;
    }
    return true;
}

int qat_qop_weight_shape(const qat_qmodel *q, const qat_qop *op, int64_t *shape) {
    if (!q || !op || !shape) return 0;
    if (op->kind == QAT_QOP_LINEAR) {
        shape[0] = op->wq.shape[0], shape[1] = op->wq.shape[1];
        return 2;
    }
    if (op->kind != QAT_QOP_CONV2D) return 0;
    const qat_qtensor *in = &q->tensors[op->inputs[0]];
    shape[0] = op->wq.shape[0], shape[1] = op->groups > 0 ? in->shape[0] / op->groups : 0;
    shape[2] = op->kh, shape[3] = op->kw;
    return 4;
}

#define say(msg, len, ...) qat_message(msg, len, QAT_ERR_SHAPE, __VA_ARGS__)

/* Output size of a window op along one axis (0: does not fit). */
static int64_t window_out(int64_t in, int k, int s, int p) { return in + 2 * p < k ? 0 : (in + 2 * p - k) / s + 1; }

static bool window_ok(const qat_qop *op) {
    int v[] = {op->kh, op->kw, op->stride_h, op->stride_w};
    for (int i = 0; i < 4; i++)
        if (v[i] < 1 || v[i] > QAT_QOP_MAX_WINDOW) return false;
    return op->pad_h >= 0 && op->pad_w >= 0 && op->pad_h <= QAT_QOP_MAX_WINDOW && op->pad_w <= QAT_QOP_MAX_WINDOW;
}

qat_status qat_qop_output_shape(const qat_qmodel *q, const qat_qop *op, int *rank, int64_t *s, char *msg,
                                size_t len) {
    if (msg && len) msg[0] = '\0';
    if (!q || !op || !rank || !s) return qat_message(msg, len, QAT_ERR_ARG, "qat_qop_output_shape: NULL argument");
    const qat_qtensor *x = &q->tensors[op->inputs[0]];
    const int64_t *in = x->shape;
    const char *k = qat_qop_kind_str(op->kind);
    switch (op->kind) {
    case QAT_QOP_LINEAR:
        if (x->rank != 1) return say(msg, len, "a linear op takes a vector, its input is rank %d", x->rank);
        if (!op->weight || op->wq.rank != 2 || op->wq.shape[1] != in[0])
            return say(msg, len, "the weight does not take %lld inputs", (long long)in[0]);
        *rank = 1, s[0] = op->wq.shape[0];
        return QAT_OK;
    case QAT_QOP_CONV2D:
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D: {
        if (x->rank != 3) return say(msg, len, "a %s takes [C, H, W], its input is rank %d", k, x->rank);
        if (!window_ok(op)) return say(msg, len, "window, strides or padding outside 1..%d", QAT_QOP_MAX_WINDOW);
        int64_t oh = window_out(in[1], op->kh, op->stride_h, op->pad_h);
        int64_t ow = window_out(in[2], op->kw, op->stride_w, op->pad_w);
        if (!oh || !ow) return say(msg, len, "the %dx%d window is larger than the padded input", op->kh, op->kw);
        *rank = 3, s[0] = in[0], s[1] = oh, s[2] = ow;
        if (op->kind == QAT_QOP_MAXPOOL2D && (2 * op->pad_h > op->kh || 2 * op->pad_w > op->kw))
            return say(msg, len, "max pooling pads at most half its window");
        if (op->kind != QAT_QOP_CONV2D) return QAT_OK;
        /* the weight's type: on [O, C/groups, kh, kw], or on its matrix [O, C/groups·kh·kw] */
        const qat_qtype *w = &op->wq;
        bool fits = op->groups >= 1 && in[0] % op->groups == 0 && op->weight && w->shape[0] % op->groups == 0;
        if (fits && w->rank == 4)
            fits = w->shape[1] * op->groups == in[0] && w->shape[2] == op->kh && w->shape[3] == op->kw;
        else if (fits && w->rank == 2)
            fits = w->shape[1] == in[0] / op->groups * op->kh * op->kw;
        else fits = false;
        if (!fits)
            return say(msg, len, "the weight does not fit %lld input channels in %d group(s) and a %dx%d kernel",
                       (long long)in[0], op->groups, op->kh, op->kw);
        s[0] = w->shape[0];
        return QAT_OK;
    }
    case QAT_QOP_FLATTEN: *rank = 1, s[0] = qat_qtensor_numel(x); return QAT_OK;
    case QAT_QOP_RELU:
    case QAT_QOP_LUT: *rank = x->rank, memcpy(s, in, 3 * sizeof *s); return QAT_OK;
    case QAT_QOP_GLOBAL_AVGPOOL:
        if (x->rank != 3) return say(msg, len, "global average pooling takes [C, H, W], its input is rank %d", x->rank);
        *rank = 1, s[0] = in[0];
        return QAT_OK;
    case QAT_QOP_ADD: {
        const qat_qtensor *y = &q->tensors[op->inputs[1]];
        if (x->rank != y->rank || memcmp(in, y->shape, (size_t)x->rank * sizeof *in))
            return say(msg, len, "add needs two inputs of one shape");
        *rank = x->rank, memcpy(s, in, 3 * sizeof *s);
        return QAT_OK;
    }
    case QAT_QOP_MUL: {
        const qat_qtensor *y = &q->tensors[op->inputs[1]];
        bool same = x->rank == y->rank && !memcmp(in, y->shape, (size_t)x->rank * sizeof *in);
        bool per_channel = x->rank == 3 && y->rank == 3 && y->shape[0] == in[0] && y->shape[1] == 1 && y->shape[2] == 1;
        if (!same && !per_channel) return say(msg, len, "mul needs two inputs of one shape, or [C, H, W] and [C, 1, 1]");
        *rank = x->rank, memcpy(s, in, 3 * sizeof *s);
        return QAT_OK;
    }
    case QAT_QOP_CONCAT: {
        *rank = x->rank, memcpy(s, in, 3 * sizeof *s);
        for (int i = 1; i < op->n_inputs; i++) {
            const qat_qtensor *y = &q->tensors[op->inputs[i]];
            if (y->rank != x->rank || (x->rank == 3 && (y->shape[1] != in[1] || y->shape[2] != in[2])))
                return say(msg, len, "concat needs inputs that differ only in their channels");
            s[0] += y->shape[0];
        }
        return QAT_OK;
    }
    case QAT_QOP_KIND_COUNT: break;
    }
    return say(msg, len, "unknown op kind %d", (int)op->kind);
}

/* ---- the check ------------------------------------------------------------------ */

typedef struct {
    char *msg;
    size_t len;
    char where[80];
    qat_status st;
} checker;

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
static bool bad(checker *c, const char *fmt, ...) {
    if (c->st == QAT_OK && c->msg && c->len) {
        char text[320];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        snprintf(c->msg, c->len, "%s: %s", c->where, text);
    }
    if (c->st == QAT_OK) c->st = QAT_ERR_FORMAT;
    return false;
}

/* Scales are positive normal floats: a denormal scale makes 1/scale
 * overflow or lose bits, and the engines would then disagree. Written
 * without libm: a normal float has an exponent field of 1..254. */
static bool good_scale(float s) {
    uint32_t b;
    memcpy(&b, &s, sizeof b);
    uint32_t e = (b >> 23) & 0xFF;
    return !(b >> 31) && e >= 1 && e <= 254;
}

static bool check_aparams(checker *c, const char *what, const qat_aparams *a) {
    int32_t lo, hi;
    if (qat_storage_range(a->bits, a->is_signed, false, &lo, &hi) != QAT_OK)
        return bad(c, "%s: %d-bit storage is outside 2..16", what, a->bits);
    if (a->qmin < lo || a->qmax > hi || a->qmin >= a->qmax)
        return bad(c, "%s: storage range [%d, %d] is not inside %c%d's [%d, %d]", what, a->qmin, a->qmax,
                   a->is_signed ? 'i' : 'u', a->bits, lo, hi);
    if (a->zero_point < a->qmin || a->zero_point > a->qmax)
        return bad(c, "%s: zero point %d outside [%d, %d]", what, a->zero_point, a->qmin, a->qmax);
    if (!good_scale(a->scale)) return bad(c, "%s: scale %g is not a positive normal number", what, (double)a->scale);
    return true;
}

static bool check_tensor(checker *c, const qat_qtensor *t) {
    if (t->rank != 1 && t->rank != 3) return bad(c, "rank %d (1 or 3)", t->rank);
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 1 || t->shape[d] > QAT_QMODEL_MAX_DIM)
            return bad(c, "a dimension of %lld", (long long)t->shape[d]);
        n *= t->shape[d];
        if (n > QAT_QMODEL_MAX_DIM) return bad(c, "more than %d elements", QAT_QMODEL_MAX_DIM);
    }
    return check_aparams(c, "its quantization", &t->q);
}

static bool same_aparams(const qat_aparams *a, const qat_aparams *b) {
    return a->scale == b->scale && a->zero_point == b->zero_point && a->bits == b->bits &&
           a->is_signed == b->is_signed && a->qmin == b->qmin && a->qmax == b->qmax;
}

static bool check_multipliers(checker *c, const qat_qop *op, int n) {
    if (op->n_mult != n || !op->multiplier || !op->shift) return bad(c, "needs %d multiplier(s) and shift(s)", n);
    for (int i = 0; i < n; i++) {
        int32_t m = op->multiplier[i], s = op->shift[i];
        if (!(m == 0 && s == 0) && (m < (1 << 30) || s < -31 || s > 30))
            return bad(c, "multiplier %d, shift %d outside [2^30, 2^31), [-31, 30]", m, s);
    }
    return true;
}

static bool check_int_pairs(checker *c, const char *what, const int32_t *m, const int32_t *sh, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(m[i] == 0 && sh[i] == 0) && (m[i] < (1 << 30) || sh[i] < -31 || sh[i] > 30))
            return bad(c, "%s %lld: multiplier %d, shift %d outside [2^30, 2^31), [-31, 30]", what, (long long)i, m[i], sh[i]);
    return true;
}

/* At most 16 significant bits: v · k is exact in float32 for k < 2^8. */
static bool sixteen_bits(float v) { /* a normal float: its 24-bit significand's low 8 bits are 0 */
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0xFF) == 0;
}

/* Compact block scales: their ranges, and the block scales they make
 * (docs/subchannel.md, "Compact block scales"). */
static bool check_compact(checker *c, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    if (op->sub_bits < 4 || op->sub_bits > 8) return bad(c, "compact block scales of %d bits (4..8)", op->sub_bits);
    if (!op->row_scale || !op->subscale) return bad(c, "compact block scales need a row scale and a sub-scale per block");
    if (op->block_multiplier || op->block_shift)
        return bad(c, "compact block scales take no block multipliers (the conversion is the integer sub-scale)");
    if (!q->is_signed || q->bits > 8)
        return bad(c, "compact block scales need signed weights of at most 8 bits (%s%d): a weight times its "
                   "sub-scale must fit int16", q->is_signed ? "i" : "u", q->bits);
    int64_t J = q->nparams / q->pshape[0];
    int32_t top = (1 << op->sub_bits) - 1;
    for (int64_t r = 0; r < q->pshape[0]; r++)
        if (!good_scale(op->row_scale[r]) || !sixteen_bits(op->row_scale[r]))
            return bad(c, "row scale %lld (%g) is not a positive normal float of at most 16 significant bits",
                       (long long)r, (double)op->row_scale[r]);
    for (int64_t p = 0; p < q->nparams; p++) {
        if (op->subscale[p] < 1 || op->subscale[p] > top)
            return bad(c, "sub-scale %lld is %d, outside [1, %d]", (long long)p, op->subscale[p], top);
        if (q->zero_point[p] != 0) return bad(c, "compact block scales need zero points 0 (block %lld has %d)",
                                              (long long)p, q->zero_point[p]);
        if (q->scale[p] != op->row_scale[p / J] * (float)op->subscale[p])
            return bad(c, "block %lld's scale %g is not its row scale times its sub-scale", (long long)p,
                       (double)q->scale[p]);
    }
    return true;
}

/* A linear/conv2d op's weight, bias and multipliers; sub-channel weights
 * also their block multipliers and the accumulation bounds for inputs
 * of quantization `in` (docs/subchannel.md). */
static bool check_weight(checker *c, const qat_qop *op, const qat_aparams *in) {
    const qat_qtype *q = &op->wq;
    if (!op->weight || !op->bias || !op->bias_scale || !q->scale || !q->zero_point)
        return bad(c, "has no weight, bias or scales");
    if ((unsigned)op->act > QAT_ACT_RELU6) return bad(c, "unknown fused activation %d", (int)op->act);
    int32_t lo, hi;
    if (qat_storage_range(q->bits, q->is_signed, false, &lo, &hi) != QAT_OK || q->qmin < lo || q->qmax > hi ||
        q->qmin >= q->qmax)
        return bad(c, "bad weight storage (%d bits, [%d, %d])", q->bits, q->qmin, q->qmax);
    int64_t n = 1, np = 1;
    for (int d = 0; d < q->rank; d++) {
        /* a ragged last block is allowed: ceil(dim / block) parameters along d */
        if (q->block[d] < 1 || q->block[d] > q->shape[d] || q->pshape[d] != (q->shape[d] + q->block[d] - 1) / q->block[d])
            return bad(c, "weight block %lld along dimension %d (of %lld) with %lld scales: need 1 <= block <= dim "
                       "and ceil(dim / block) scales", (long long)q->block[d], d, (long long)q->shape[d],
                       (long long)q->pshape[d]);
        n *= q->shape[d], np *= q->pshape[d];
    }
    if (np != q->nparams) return bad(c, "the weight has %lld scales, its blocks make %lld", (long long)q->nparams, (long long)np);
    for (int64_t i = 0; i < n; i++)
        if (op->weight[i] < q->qmin || op->weight[i] > q->qmax)
            return bad(c, "weight integer %d (element %lld) outside [%d, %d]", op->weight[i], (long long)i, q->qmin,
                       q->qmax);
    for (int64_t p = 0; p < q->nparams; p++) {
        if (!good_scale(q->scale[p])) return bad(c, "weight scale %g is not a positive normal number", (double)q->scale[p]);
        if (q->zero_point[p] < q->qmin || q->zero_point[p] > q->qmax)
            return bad(c, "weight zero point %d outside [%d, %d]", q->zero_point[p], q->qmin, q->qmax);
    }
    int64_t O = q->shape[0];
    for (int64_t o = 0; o < O; o++)
        if (!good_scale(op->bias_scale[o]))
            return bad(c, "bias scale %g is not a positive normal number", (double)op->bias_scale[o]);
    if (!check_multipliers(c, op, (int)O)) return false;
    bool sub = qat_qop_subchannel(op);
    if (!sub) {
        if (op->block_multiplier || op->block_shift)
            return bad(c, "block multipliers are for sub-channel weights, and its weights are per-tensor or per output "
                       "channel");
        if (op->sub_bits || op->row_scale || op->subscale)
            return bad(c, "compact block scales are for sub-channel weights, and its weights are per-tensor or per "
                       "output channel");
        return true;
    }
    if (op->sub_bits || op->row_scale || op->subscale) {
        if (!check_compact(c, op)) return false;
    } else {
        if (!op->block_multiplier || !op->block_shift) return bad(c, "sub-channel weights need one block multiplier per block");
        if (!check_int_pairs(c, "block", op->block_multiplier, op->block_shift, q->nparams)) return false;
    }
    /* the rows that share a block's parameters share its accumulation scale */
    for (int64_t o = 1; o < O; o++)
        if (o % q->block[0] && op->bias_scale[o] != op->bias_scale[o - 1])
            return bad(c, "rows %lld and %lld share their weight scales but not their accumulation scale (bias_scale)",
                       (long long)o - 1, (long long)o);
    int64_t X = qat__sc_input_bound(in);
    int64_t J = q->nparams / q->pshape[0];
    int64_t *work = malloc((size_t)J * sizeof *work);
    if (!work) return bad(c, "out of memory checking its accumulation bounds");
    char why[200];
    bool ok = qat__sc_bounds(op, X, work, why, sizeof why);
    free(work);
    return ok || bad(c, "its sums could overflow: %s (docs/subchannel.md)", why);
}

/* The largest |q - zp| of an activation's integers. */
static int64_t reach(const qat_aparams *a) {
    int64_t lo = (int64_t)a->qmin - a->zero_point, hi = (int64_t)a->qmax - a->zero_point;
    return lo < 0 ? (-lo > hi ? -lo : hi) : hi;
}

/* TFLite's ADD in int32: each input's (q - zp) shifted left, taken by its
 * multiplier, and the two summed. The loader refuses parameters whose
 * int32 steps could overflow (the C kernels would then be undefined):
 * |q - zp|·2^left_shift within int32, and the sum of the two scaled
 * inputs' largest magnitudes (each one past its multiplier, rounding's
 * 1 included) within int32. Lowering's own programs (left shift 20,
 * input multipliers of at most 1/2) are far inside. */
static bool check_add(checker *c, const qat_qmodel *q, const qat_qop *op) {
    if (op->left_shift < 0 || op->left_shift > 30) return bad(c, "left shift %d outside 0..30", op->left_shift);
    if (!check_multipliers(c, op, 3)) return false;
    int64_t total = 0;
    for (int k = 0; k < 2; k++) {
        int64_t x = reach(&q->tensors[op->inputs[k]].q) << op->left_shift;
        if (x > INT32_MAX)
            return bad(c, "input %d's integers shifted left by %d do not fit int32 (%lld)", k, op->left_shift,
                       (long long)x);
        int sh = op->shift[k];
        if (sh > 0) x = x << sh > INT32_MAX ? INT32_MAX : x << sh; /* the kernel saturates the left shift */
        /* x·m/2^31 (m < 2^31: at most x), then the right shift, each rounding adding at most 1 */
        int64_t y = (x * (int64_t)op->multiplier[k] + ((int64_t)1 << 30)) >> 31;
        if (sh < 0) y = (y >> -sh) + 1;
        total += y + 1;
    }
    if (total > INT32_MAX)
        return bad(c, "its scaled inputs can sum to %lld, past int32 (smaller input multipliers or left shift)",
                   (long long)total);
    return true;
}

/* What each kind needs beyond shapes: multipliers, tables, unchanged
 * quantization for the ops that do not requantize. */
static bool check_kind(checker *c, const qat_qmodel *q, const qat_qop *op) {
    const qat_qtensor *in = &q->tensors[op->inputs[0]], *out = &q->tensors[op->output];
    bool pool = op->kind == QAT_QOP_AVGPOOL2D || op->kind == QAT_QOP_GLOBAL_AVGPOOL;
    if (op->keeps_scale && !pool) return bad(c, "only an average pool can keep its input's quantization by dividing");
    switch (op->kind) {
    case QAT_QOP_LINEAR:
    case QAT_QOP_CONV2D: return check_weight(c, op, &in->q);
    case QAT_QOP_AVGPOOL2D:
    case QAT_QOP_GLOBAL_AVGPOOL:
        if (!op->keeps_scale) return check_multipliers(c, op, 1);
        /* the dividing rule: no multiplier, the input's quantization (below),
         * and n >= 1 input positions in every window: padding < kernel */
        if (op->n_mult || op->multiplier || op->shift)
            return bad(c, "keeps its input's quantization by dividing, so it takes no multiplier (%d given)", op->n_mult);
        if (op->kind == QAT_QOP_AVGPOOL2D && (op->pad_h >= op->kh || op->pad_w >= op->kw))
            return bad(c, "padding %dx%d with a %dx%d window: a window of padding alone has no input position to "
                       "divide by (padding must be smaller than the window)", op->pad_h, op->pad_w, op->kh, op->kw);
        break;
    case QAT_QOP_ADD: return check_add(c, q, op);
    case QAT_QOP_CONCAT: return check_multipliers(c, op, op->n_inputs);
    case QAT_QOP_MUL: return check_multipliers(c, op, 1);
    case QAT_QOP_LUT: {
        if ((unsigned)op->lut >= QAT_LUT_FN_COUNT) return bad(c, "unknown table function %d", (int)op->lut);
        int64_t want = (int64_t)in->q.qmax - in->q.qmin + 1;
        if (in->q.bits > 8 || op->table_len != want || !op->table)
            return bad(c, "a table needs one entry per integer of an input of at most 8 bits (%lld)", (long long)want);
        for (int i = 0; i < op->table_len; i++)
            if (op->table[i] < out->q.qmin || op->table[i] > out->q.qmax)
                return bad(c, "table entry %d (%d) outside the output's range", i, op->table[i]);
        return true;
    }
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_KIND_COUNT: break;
    }
    if (!same_aparams(&in->q, &out->q))
        return bad(c, "does not requantize, so its output must keep its input's quantization");
    return true;
}

static bool check_op(checker *c, const qat_qmodel *q, int i, bool *defined) {
    const qat_qop *op = &q->ops[i];
    snprintf(c->where, sizeof c->where, "op %d (%s %.*s)", i, qat_qop_kind_str(op->kind), QAT_NAME_LEN, op->name);
    if ((unsigned)op->kind >= QAT_QOP_KIND_COUNT) return bad(c, "unknown op kind %d", (int)op->kind);
    int want = op->kind == QAT_QOP_ADD || op->kind == QAT_QOP_MUL ? 2 : op->kind == QAT_QOP_CONCAT ? -1 : 1;
    if (want > 0 ? op->n_inputs != want : op->n_inputs < 1 || op->n_inputs > QAT_QOP_MAX_INPUTS)
        return bad(c, "%d input(s)", op->n_inputs);
    for (int j = 0; j < op->n_inputs; j++) {
        int t = op->inputs[j];
        if (t < 0 || t >= q->n_tensors) return bad(c, "input tensor %d does not exist", t);
        if (!defined[t]) return bad(c, "reads tensor %d before any op makes it (a cycle, or ops out of order)", t);
    }
    if (op->output < 0 || op->output >= q->n_tensors) return bad(c, "output tensor %d does not exist", op->output);
    if (defined[op->output]) return bad(c, "writes tensor %d, which another op (or the input) already made", op->output);
    defined[op->output] = true;
    int rank = 0;
    int64_t s[3] = {0};
    char why[160] = "";
    if (qat_qop_output_shape(q, op, &rank, s, why, sizeof why) != QAT_OK) {
        bad(c, "%s", why);
        c->st = QAT_ERR_SHAPE;
        return false;
    }
    const qat_qtensor *out = &q->tensors[op->output];
    if (rank != out->rank || memcmp(s, out->shape, (size_t)rank * sizeof *s)) {
        bad(c, "its output tensor's shape does not follow from its inputs");
        c->st = QAT_ERR_SHAPE;
        return false;
    }
    if (op->act_min < out->q.qmin || op->act_max > out->q.qmax || op->act_min > op->act_max)
        return bad(c, "act_min/act_max [%d, %d] outside the output's range [%d, %d]", op->act_min, op->act_max,
                   out->q.qmin, out->q.qmax);
    return check_kind(c, q, op);
}

qat_status qat_qmodel_check(const qat_qmodel *q, char *msg, size_t len) {
    checker c = {.msg = msg, .len = len, .where = "model", .st = QAT_OK};
    if (msg && len) msg[0] = '\0';
    if (!q || !q->tensors || !q->ops) return bad(&c, "no tensors or ops"), QAT_ERR_ARG;
    if (q->n_ops < 1 || q->n_ops > QAT_QMODEL_MAX_OPS) return bad(&c, "%d ops (1..%d)", q->n_ops, QAT_QMODEL_MAX_OPS), c.st;
    if ((unsigned)q->rounding >= QAT_ROUNDING_COUNT) return bad(&c, "rounding %d (0: double, 1: single)", (int)q->rounding), c.st;
    if (q->n_tensors != q->n_ops + 1)
        return bad(&c, "%d tensors for %d ops (each op makes one, plus the input)", q->n_tensors, q->n_ops), c.st;
    if (q->input < 0 || q->input >= q->n_tensors || q->output < 0 || q->output >= q->n_tensors)
        return bad(&c, "input or output tensor id out of range"), c.st;
    /* names first (qat_name_valid, the rule of every name): the messages
     * below show them, and the C generator writes them into comments */
    char why[256];
    for (int t = 0; t < q->n_tensors; t++)
        if (!qat_name_valid(q->tensors[t].name, why, sizeof why)) {
            snprintf(c.where, sizeof c.where, "tensor %d", t);
            return bad(&c, "bad name: %s", why), c.st;
        }
    for (int i = 0; i < q->n_ops; i++)
        if (!qat_name_valid(q->ops[i].name, why, sizeof why)) {
            snprintf(c.where, sizeof c.where, "op %d", i);
            return bad(&c, "bad name: %s", why), c.st;
        }
    for (int t = 0; t < q->n_tensors; t++) {
        snprintf(c.where, sizeof c.where, "tensor %d (%.*s)", t, QAT_NAME_LEN, q->tensors[t].name);
        if (!check_tensor(&c, &q->tensors[t])) return c.st;
    }
    if (q->norm) {
        const qat_qtensor *in = &q->tensors[q->input];
        char text[200];
        snprintf(c.where, sizeof c.where, "input normalization");
        if (qat_normalization_check(q->norm, in->rank, in->shape, text, sizeof text) != QAT_OK)
            return bad(&c, "%s", text), c.st;
    }
    bool defined[QAT_QMODEL_MAX_OPS + 1] = {false};
    defined[q->input] = true;
    for (int i = 0; i < q->n_ops; i++)
        if (!check_op(&c, q, i, defined)) return c.st;
    snprintf(c.where, sizeof c.where, "model");
    if (q->tensors[q->output].rank != 1) return bad(&c, "the output is not a vector of logits"), c.st;
    return QAT_OK;
}
