/* qat_qmodel_validate: every quantity of an integer program checked
 * against the rules of docs/quantized-model-format.md. The loader runs it
 * on what it read, and export on what it is about to write, so the two
 * can never disagree about what a valid file is. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "qat/export.h"

typedef struct {
    qat_ctx *ctx;
    char where[96];
    bool ok;
} checker;

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
static bool bad(checker *c, const char *fmt, ...) {
    if (c->ok) {
        char msg[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        qat_ctx_fail(c->ctx, QAT_ERR_FORMAT, "%s: %s", c->where, msg);
    }
    return c->ok = false;
}

/* Scales are positive normal floats: a denormal scale makes 1/scale
 * overflow or lose bits, and the engines would then disagree. */
static bool good_scale(float s) { return isnormal(s) && s > 0; }

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

static bool check_shape(checker *c, const char *what, int rank, const int64_t *s) {
    if (rank != 1 && rank != 3) return bad(c, "%s has rank %d (1 or 3)", what, rank);
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (s[d] < 1 || s[d] > QAT_QMODEL_MAX_DIM) return bad(c, "%s has a dimension of %lld", what, (long long)s[d]);
        n *= s[d];
    }
    if (n > QAT_QMODEL_MAX_DIM) return bad(c, "%s has %lld elements (at most %d)", what, (long long)n, QAT_QMODEL_MAX_DIM);
    return true;
}

static bool same_aparams(const qat_aparams *a, const qat_aparams *b) {
    return a->scale == b->scale && a->zero_point == b->zero_point && a->bits == b->bits &&
           a->is_signed == b->is_signed && a->qmin == b->qmin && a->qmax == b->qmax;
}

static bool check_multipliers(checker *c, const int32_t *m, const int32_t *s, int64_t n) {
    if (!m || !s) return bad(c, "has no multipliers");
    for (int64_t i = 0; i < n; i++) {
        bool zero = m[i] == 0 && s[i] == 0;
        if (!zero && (m[i] < (1 << 30) || s[i] < -31 || s[i] > 30))
            return bad(c, "multiplier %d, shift %d outside [2^30, 2^31), [-31, 30]", m[i], s[i]);
    }
    return true;
}

/* The output shape an op computes from its input (false: does not fit). */
static bool expect_out(const qat_qop *op, int *rank, int64_t *s) {
    const int64_t *in = op->in_shape;
    int k = op->kernel, st = op->stride, p = op->kind == QAT_QOP_CONV2D ? op->pad : 0;
    switch (op->kind) {
    case QAT_QOP_LINEAR: *rank = 1, s[0] = op->out_shape[0]; return op->in_rank == 1;
    case QAT_QOP_CONV2D:
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D:
        if (op->in_rank != 3 || k < 1 || st < 1 || p < 0 || k > QAT_QOP_MAX_WINDOW || st > QAT_QOP_MAX_WINDOW ||
            p > QAT_QOP_MAX_WINDOW || in[1] + 2 * p < k || in[2] + 2 * p < k)
            return false;
        *rank = 3;
        s[0] = op->kind == QAT_QOP_CONV2D ? op->out_shape[0] : in[0];
        s[1] = (in[1] + 2 * p - k) / st + 1, s[2] = (in[2] + 2 * p - k) / st + 1;
        return true;
    case QAT_QOP_FLATTEN: *rank = 1, s[0] = op->in_rank == 3 ? in[0] * in[1] * in[2] : in[0]; return true;
    case QAT_QOP_RELU: *rank = op->in_rank, memcpy(s, in, 3 * sizeof *s); return true;
    case QAT_QOP_KIND_COUNT: break;
    }
    return false;
}

static bool check_weight(checker *c, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    bool conv = op->kind == QAT_QOP_CONV2D;
    if (!op->weight || !op->bias || !op->bias_scale || !q->scale || !q->zero_point)
        return bad(c, "has no weight, bias or scales");
    if ((unsigned)op->act > QAT_ACT_RELU6) return bad(c, "unknown fused activation %d", (int)op->act);
    if (q->rank != (conv ? 4 : 2) || q->shape[0] != op->out_shape[0] || q->shape[1] != op->in_shape[0] ||
        (conv && (q->shape[2] != op->kernel || q->shape[3] != op->kernel)))
        return bad(c, "the weight's shape does not fit the op");
    int32_t lo, hi;
    if (qat_storage_range(q->bits, q->is_signed, false, &lo, &hi) != QAT_OK || q->qmin < lo || q->qmax > hi ||
        q->qmin >= q->qmax)
        return bad(c, "bad weight storage (%d bits, [%d, %d])", q->bits, q->qmin, q->qmax);
    int64_t n = 1;
    for (int d = 0; d < q->rank; d++) {
        if (q->block[d] < 1 || q->block[d] > q->shape[d] || q->shape[d] % q->block[d])
            return bad(c, "block_sizes do not divide the weight's shape");
        n *= q->shape[d];
    }
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
        if (!good_scale(op->bias_scale[o])) return bad(c, "bias scale %g is not a positive normal number", (double)op->bias_scale[o]);
    int axis = qat_qtype_axis(q);
    bool per_channel = axis == -1 || axis == 0;
    if (per_channel != (op->multiplier != NULL))
        return bad(c, "multipliers must be present exactly for per-tensor and per-output-channel weights");
    return !per_channel || check_multipliers(c, op->multiplier, op->shift, O);
}

static bool check_op(checker *c, int i, const qat_qop *op, const qat_aparams *cur, int rank, const int64_t *shape) {
    snprintf(c->where, sizeof c->where, "op %d (%s %.*s)", i, qat_qop_kind_str(op->kind), QAT_NAME_LEN, op->name);
    if ((unsigned)op->kind >= QAT_QOP_KIND_COUNT) return bad(c, "unknown op kind %d", (int)op->kind);
    if (!check_shape(c, "its input shape", op->in_rank, op->in_shape) ||
        !check_shape(c, "its output shape", op->out_rank, op->out_shape) || !check_aparams(c, "output", &op->output))
        return false;
    int erank = 0;
    int64_t es[3] = {0};
    bool chains = op->in_rank == rank && !memcmp(op->in_shape, shape, (size_t)rank * sizeof *shape);
    if (!chains || !expect_out(op, &erank, es) || erank != op->out_rank ||
        memcmp(es, op->out_shape, (size_t)erank * sizeof *es))
        return bad(c, "its shapes do not follow from the op before it");
    if (op->act_min < op->output.qmin || op->act_max > op->output.qmax || op->act_min > op->act_max)
        return bad(c, "act_min/act_max [%d, %d] outside the output's range [%d, %d]", op->act_min, op->act_max,
                   op->output.qmin, op->output.qmax);
    switch (op->kind) {
    case QAT_QOP_LINEAR:
    case QAT_QOP_CONV2D: return check_weight(c, op);
    case QAT_QOP_AVGPOOL2D: return check_multipliers(c, op->multiplier, op->shift, 1);
    default:
        if (!same_aparams(&op->output, cur))
            return bad(c, "does not requantize, so its output must keep its input's quantization");
        return true;
    }
}

qat_status qat_qmodel_validate(qat_ctx *ctx, const qat_qmodel *q) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qmodel: NULL model");
    checker c = {.ctx = ctx, .where = "input", .ok = true};
    if (q->n_ops < 1 || q->n_ops > QAT_QMODEL_MAX_OPS)
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "n_ops %d outside 1..%d", q->n_ops, QAT_QMODEL_MAX_OPS);
    if (!check_shape(&c, "the input shape", q->in_rank, q->in_shape) || !check_aparams(&c, "input", &q->input))
        return QAT_ERR_FORMAT;
    qat_aparams cur = q->input;
    int rank = q->in_rank;
    int64_t shape[3] = {0};
    memcpy(shape, q->in_shape, (size_t)rank * sizeof *shape);
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (!check_op(&c, i, op, &cur, rank, shape)) return QAT_ERR_FORMAT;
        cur = op->output, rank = op->out_rank;
        memcpy(shape, op->out_shape, sizeof shape);
    }
    if (rank != 1) return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "the last op does not give a vector of logits");
    if (q->n_outputs != shape[0])
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "n_outputs %lld disagrees with the last op's %lld", (long long)q->n_outputs,
                            (long long)shape[0]);
    return QAT_OK;
}
