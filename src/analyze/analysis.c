/* Where quantization loses accuracy: each quantization point's noise,
 * clipping, and the error it adds when quantized alone (qat/analyze.h).
 *
 * Per batch, in eval mode: one float forward (its logits and every
 * point's tensor kept), one forward with every point quantized, and per
 * point up to three forwards with only that point on — its weights and
 * activation, its weights alone, its activation alone. A "point" is an
 * activation quantizer together with the weights of the Linear/Conv that
 * starts its fusion group: the two quantizations of one integer op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/model.h"
#include "qat/analyze.h"

/* Running sums of one point, in double. */
typedef struct {
    double sig, noise;         /* Σ float², Σ (float - quantized)² at the point's tensor */
    double own_sig, own_noise; /* Σ in², Σ (in - out)² across its own quantizer */
    int64_t values, clip_lo, clip_hi;
    double alone, alone_w, alone_a; /* logit squared error vs float with only this point on */
    int64_t alone_correct;
} point_sums;

struct qat_analysis {
    qat_model *m;
    int max_batch, in_rank;
    int64_t in_shape[3], in_numel;
    int n_points;
    int *layer, *anchor;          /* [n_points] */
    int64_t *numel;               /* [n_points]: per-sample elements (0 until the first batch) */
    float **ftap;                 /* [n_points][max_batch·numel]: the float forward's tensors */
    float *flogits;               /* [max_batch·K] */
    int64_t K;                    /* logits per sample */
    qat_tensor **out, **pre;      /* [n_layers]: forward_all's arrays */
    point_sums *sums;
    double logit_sig, logit_noise;
    int64_t samples, correct_float, correct_quant;
    bool labelled;                /* every batch so far came with labels */
    qat_point_report *reports;
};

static void *palloc(qat_ctx *ctx, size_t bytes) { return qat_ctx_alloc(ctx, QAT_MEM_PERSIST, bytes ? bytes : 1); }

/* The layer that starts the group ending at `end` (the point's weights'
 * owner): the anchor whose configuration the QAT pass recorded. */
static int anchor_of(const qat_model *m, int end) {
    for (int i = 1; i <= end; i++) {
        const qat__layer *l = &m->layers[i];
        if (!l->qcfg) continue;
        qat__group g;
        qat__match_group(m, i, l->fold_bn >= 0, &g);
        if (g.end == end) return i;
    }
    return end;
}

qat_analysis *qat_analysis_new(qat_model *m, int max_batch, int in_rank, const int64_t *in_shape) {
    if (!m) return NULL;
    qat_ctx *ctx = m->ctx;
    if (!m->prepared) return qat_ctx_fail(ctx, QAT_ERR_STATE, "analysis: the model is not prepared for QAT"), NULL;
    if (max_batch < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "analysis: max_batch must be >= 1"), NULL;
    if (!in_shape) in_rank = m->in_rank, in_shape = m->in_shape;
    if (in_rank != 1 && in_rank != 3)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "analysis: the model declares no input shape: give one"), NULL;
    qat_analysis *a = palloc(ctx, sizeof *a);
    if (!a) return NULL;
    *a = (qat_analysis){.m = m, .max_batch = max_batch, .in_rank = in_rank, .in_numel = 1, .labelled = true};
    for (int d = 0; d < in_rank; d++) a->in_shape[d] = in_shape[d], a->in_numel *= in_shape[d];
    int last = qat__model_output(m); /* layers after the output never run */
    for (int i = 0; i <= last; i++) {
        const qat__act_quant *q = m->layers[i].aq;
        if (!q) continue;
        if (q->obs.updates == 0)
            return qat_ctx_fail(ctx, QAT_ERR_STATE, "analysis: the activation range of %s was never observed: "
                                "train or calibrate the prepared model first", m->layers[i].name), NULL;
        a->n_points++;
    }
    int P = a->n_points;
    a->layer = palloc(ctx, (size_t)P * sizeof *a->layer);
    a->anchor = palloc(ctx, (size_t)P * sizeof *a->anchor);
    a->numel = palloc(ctx, (size_t)P * sizeof *a->numel);
    a->ftap = palloc(ctx, (size_t)P * sizeof *a->ftap);
    a->sums = palloc(ctx, (size_t)P * sizeof *a->sums);
    a->reports = palloc(ctx, (size_t)P * sizeof *a->reports);
    a->out = palloc(ctx, (size_t)m->n_layers * sizeof *a->out);
    a->pre = palloc(ctx, (size_t)m->n_layers * sizeof *a->pre);
    if (!a->layer || !a->anchor || !a->numel || !a->ftap || !a->sums || !a->reports || !a->out || !a->pre) return NULL;
    memset(a->sums, 0, (size_t)P * sizeof *a->sums);
    for (int i = 0, p = 0; i <= last; i++) {
        if (!m->layers[i].aq) continue;
        a->layer[p] = i, a->anchor[p] = anchor_of(m, i), a->numel[p] = 0, a->ftap[p] = NULL;
        p++;
    }
    return a;
}

/* ---- switching points ------------------------------------------------------------ */

/* Every quantizer off but point p's weights (w) and activation (act). */
static void only(qat_analysis *a, int p, bool w, bool act) {
    qat_model *m = a->m;
    qat_model_set_all_layers_fake_quant(m, false);
    m->layers[a->anchor[p]].wq_off = !w;
    m->layers[a->layer[p]].aq->off = !act;
}

/* ---- one forward ---------------------------------------------------------------- */

/* Runs the model on the batch; NULL on error. The results live in the
 * step arena until the caller resets it. */
static qat_tensor *forward(qat_analysis *a, const float *x, int64_t n) {
    int64_t shape[4] = {n, a->in_shape[0], a->in_shape[1], a->in_shape[2]};
    qat_tensor *t = qat_tensor_new(a->m->ctx, QAT_MEM_STEP, a->in_rank + 1, shape, false);
    if (!t) return NULL;
    memcpy(t->data, x, (size_t)(n * a->in_numel) * sizeof *x);
    qat_tensor *y = qat_model_forward_all(a->m, t, a->out, a->pre);
    if (y && (y->rank != 2 || (a->K && y->shape[1] != a->K))) {
        qat_ctx_fail(a->m->ctx, QAT_ERR_SHAPE, "analysis: the model's output is not [N, classes] logits");
        return NULL;
    }
    return y;
}

static int64_t argmax(const float *v, int64_t K) {
    int64_t best = 0;
    for (int64_t k = 1; k < K; k++) best = v[k] > v[best] ? k : best;
    return best;
}

/* Σ (flogits - y)² over the batch, and the number of correct predictions. */
static double logit_error(const qat_analysis *a, const qat_tensor *y, int64_t n, const int32_t *labels,
                          int64_t *correct) {
    double e = 0;
    for (int64_t i = 0; i < n * a->K; i++) {
        double d = (double)a->flogits[i] - (double)y->data[i];
        e += d * d;
    }
    for (int64_t i = 0; labels && i < n; i++) *correct += argmax(y->data + i * a->K, a->K) == labels[i];
    return e;
}

/* The float forward: keeps the logits and every point's tensor. */
static qat_status float_pass(qat_analysis *a, const float *x, int64_t n, const int32_t *labels) {
    qat_model *m = a->m;
    qat_model_set_fake_quant(m, false);
    qat_tensor *y = forward(a, x, n);
    if (!y) return qat_ctx_status(m->ctx);
    if (!a->K) { /* the first batch: the sizes of every kept tensor */
        a->K = y->shape[1];
        if (!(a->flogits = palloc(m->ctx, (size_t)(a->max_batch * a->K) * sizeof *a->flogits))) return qat_ctx_status(m->ctx);
        for (int p = 0; p < a->n_points; p++) {
            a->numel[p] = a->out[a->layer[p]]->numel / n;
            a->ftap[p] = palloc(m->ctx, (size_t)(a->max_batch * a->numel[p]) * sizeof(float));
            if (!a->ftap[p]) return qat_ctx_status(m->ctx);
        }
    }
    memcpy(a->flogits, y->data, (size_t)(n * a->K) * sizeof(float));
    for (int p = 0; p < a->n_points; p++)
        memcpy(a->ftap[p], a->out[a->layer[p]]->data, (size_t)(n * a->numel[p]) * sizeof(float));
    for (int64_t i = 0; i < n * a->K; i++) a->logit_sig += (double)a->flogits[i] * a->flogits[i];
    for (int64_t i = 0; labels && i < n; i++) a->correct_float += argmax(a->flogits + i * a->K, a->K) == labels[i];
    qat_ctx_step_reset(m->ctx);
    return QAT_OK;
}

/* Point p's sums from the all-quantized forward: its tensor against the
 * float one, its quantizer's input against its output, the clipping. */
static void point_noise(qat_analysis *a, int p, int64_t n) {
    const qat__act_quant *q = a->m->layers[a->layer[p]].aq;
    const float *f = a->ftap[p], *in = a->pre[a->layer[p]]->data, *out = a->out[a->layer[p]]->data;
    point_sums *s = &a->sums[p];
    float inv = 1.0f / q->q.scale[0], lo = (float)(q->q.qmin - q->q.zero_point[0]), hi = (float)(q->q.qmax - q->q.zero_point[0]);
    for (int64_t i = 0; i < n * a->numel[p]; i++) {
        double d = (double)f[i] - out[i], e = (double)in[i] - out[i];
        s->sig += (double)f[i] * f[i], s->noise += d * d;
        s->own_sig += (double)in[i] * in[i], s->own_noise += e * e;
        float r = rintf(in[i] * inv); /* the fake-quant op's integer before its clamp */
        s->clip_lo += r < lo, s->clip_hi += r > hi;
    }
    s->values += n * a->numel[p];
}

/* The forward with every point quantized. */
static qat_status quant_pass(qat_analysis *a, const float *x, int64_t n, const int32_t *labels) {
    qat_model *m = a->m;
    qat_model_set_fake_quant(m, true);
    qat_model_set_all_layers_fake_quant(m, true);
    qat_tensor *y = forward(a, x, n);
    if (!y) return qat_ctx_status(m->ctx);
    for (int p = 0; p < a->n_points; p++) point_noise(a, p, n);
    a->logit_noise += logit_error(a, y, n, labels, &a->correct_quant);
    qat_ctx_step_reset(m->ctx);
    return QAT_OK;
}

/* The forwards with point p alone: weights and activation; weights only;
 * activation only (the first stands for the last without weights). */
static qat_status alone_passes(qat_analysis *a, int p, const float *x, int64_t n, const int32_t *labels) {
    qat_model *m = a->m;
    point_sums *s = &a->sums[p];
    bool has_w = m->layers[a->anchor[p]].wq != NULL;
    for (int pass = 0; pass < (has_w ? 3 : 1); pass++) {
        only(a, p, pass != 2, pass != 1);
        qat_tensor *y = forward(a, x, n);
        if (!y) return qat_ctx_status(m->ctx);
        int64_t unused = 0;
        double e = logit_error(a, y, n, pass == 0 ? labels : NULL, pass == 0 ? &s->alone_correct : &unused);
        if (pass == 0) s->alone += e;
        if (pass == 1) s->alone_w += e;
        if (pass == 2 || !has_w) s->alone_a += e;
        qat_ctx_step_reset(m->ctx);
    }
    return QAT_OK;
}

qat_status qat_analysis_add(qat_analysis *a, const float *x, int64_t n, const int32_t *labels) {
    if (!a || !x) return QAT_ERR_ARG;
    qat_model *m = a->m;
    qat_ctx *ctx = m->ctx;
    if (n < 1 || n > a->max_batch)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "analysis: a batch of %lld samples (1..%d)", (long long)n, a->max_batch);
    /* the model's state, restored below */
    bool training = m->training, grad = qat_ctx_grad_enabled(ctx), fq = m->fake_quant_on;
    bool *w_off = malloc((size_t)m->n_layers * sizeof *w_off), *a_off = malloc((size_t)m->n_layers * sizeof *a_off);
    if (!w_off || !a_off) {
        free(w_off), free(a_off);
        return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "analysis: out of memory");
    }
    for (int i = 0; i < m->n_layers; i++) w_off[i] = m->layers[i].wq_off, a_off[i] = m->layers[i].aq && m->layers[i].aq->off;
    qat_model_train(m, false);
    qat_ctx_set_grad_enabled(ctx, false);
    qat_status st = float_pass(a, x, n, labels);
    if (st == QAT_OK) st = quant_pass(a, x, n, labels);
    for (int p = 0; st == QAT_OK && p < a->n_points; p++) st = alone_passes(a, p, x, n, labels);
    if (st != QAT_OK) qat_ctx_step_reset(ctx);
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i].wq_off = w_off[i];
        if (m->layers[i].aq) m->layers[i].aq->off = a_off[i];
    }
    free(w_off), free(a_off);
    qat_model_train(m, training);
    qat_ctx_set_grad_enabled(ctx, grad);
    qat_model_set_fake_quant(m, fq);
    if (st == QAT_OK) a->samples += n, a->labelled &= labels != NULL;
    return st;
}

/* ---- the report ----------------------------------------------------------------- */

static double db(double sig, double noise) { return noise > 0 ? 10.0 * log10(sig / noise) : INFINITY; }

static int by_share(const void *x, const void *y) {
    const qat_point_report *a = x, *b = y;
    if (a->alone_share != b->alone_share) return a->alone_share < b->alone_share ? 1 : -1;
    return a->layer - b->layer; /* ties in graph order: the sort is stable in effect */
}

qat_status qat_analysis_result(qat_analysis *a, qat_analysis_report *out) {
    if (!a || !out) return QAT_ERR_ARG;
    const qat_model *m = a->m;
    double all = a->logit_noise, N = (double)(a->samples > 0 ? a->samples : 1);
    bool labelled = a->labelled && a->samples > 0;
    for (int p = 0; p < a->n_points; p++) {
        const point_sums *s = &a->sums[p];
        const qat__layer *l = &m->layers[a->layer[p]], *an = &m->layers[a->anchor[p]];
        qat_point_report *r = &a->reports[p];
        double V = (double)(s->values > 0 ? s->values : 1);
        *r = (qat_point_report){.layer = a->layer[p], .anchor = a->anchor[p], .bits = l->aq->q.bits,
                                .wbits = an->wq ? an->wq->bits : 0, .waxis = an->wq ? qat_qtype_axis(an->wq) : 0,
                                .sqnr_db = db(s->sig, s->noise), .own_sqnr_db = db(s->own_sig, s->own_noise),
                                .clipped_low = (double)s->clip_lo / V, .clipped_high = (double)s->clip_hi / V,
                                .alone_share = all > 0 ? s->alone / all : 0,
                                .alone_weights_share = all > 0 ? s->alone_w / all : 0,
                                .alone_activation_share = all > 0 ? s->alone_a / all : 0,
                                .alone_logits_sqnr_db = db(a->logit_sig, s->alone),
                                .alone_accuracy = labelled ? (double)s->alone_correct / N : -1};
        memcpy(r->name, l->name, sizeof r->name);
        memcpy(r->anchor_name, an->name, sizeof r->anchor_name);
    }
    qsort(a->reports, (size_t)a->n_points, sizeof *a->reports, by_share);
    *out = (qat_analysis_report){.samples = a->samples,
                                 .accuracy_float = labelled ? (double)a->correct_float / N : -1,
                                 .accuracy_quant = labelled ? (double)a->correct_quant / N : -1,
                                 .logits_sqnr_db = db(a->logit_sig, a->logit_noise),
                                 .n_points = a->n_points, .points = a->reports};
    return QAT_OK;
}
