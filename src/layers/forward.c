/* The model's forward pass: the layers in id order (a topological order:
 * inputs come first), each one or a few graph ops, each output
 * fake-quantized where the QAT pass put an activation quantizer. */
#include <math.h>

#include "autograd/op_api.h"
#include "fakequant/kernels.h"
#include "internal.h"
#include "op.h"

/* Observes (in training, unless frozen) and fake-quantizes an activation.
 * clo < chi: the activation is clamp(x, clo, chi) — a ReLU/ReLU6 done here
 * with the quantizer (its batch range is x's, clamped: the same numbers
 * the observer would see). over: x has no other reader. */
static qat_tensor *act_quant(qat_model *m, qat__act_quant *a, qat_tensor *x, bool over, float clo, float chi) {
    if (!a || !x) return x;
    bool fused = clo < chi;
    if (m->training && !m->observers_frozen) {
        /* the batch's range; with a reducer (data-parallel training) the
         * global batch's, so every process folds in the same range */
        float lo = INFINITY, hi = -INFINITY;
        qat__minmax_par(m->ctx, x->data, x->numel, &lo, &hi);
        if (qat_ctx_reduce_minmax(m->ctx, &lo, &hi, 1) != QAT_OK) return NULL;
        float pair[2] = {lo, hi};
        if (fused) pair[0] = fminf(fmaxf(lo, clo), chi), pair[1] = fminf(fmaxf(hi, clo), chi);
        if (lo <= hi) qat_observer_update(&a->obs, pair, 2);
        qat_observer_qparams(&a->obs, &a->q);
    }
    if (!m->fake_quant_on || a->off || a->obs.updates == 0) /* off, or nothing observed yet: the float value */
        return !fused ? x : chi == INFINITY ? qat_relu(m->ctx, x) : qat_clamp(m->ctx, x, clo, chi);
    /* a layer's value before quantization has no other reader: quantize
     * over it where its producer allows (a tensor the size of the
     * activation less, two with a ReLU fused in). Never over the caller's
     * input. */
    return over ? qat__fake_quant_over(m->ctx, x, &a->q, a->ste, clo, chi) : qat_fake_quant(m->ctx, x, &a->q, a->ste);
}

/* An average pool that keeps its input's quantization: its value y on
 * the grid of the quantizer that holds its input, found now (qat_prepare_layer
 * may have replaced it since), with that quantizer's STE. It never
 * observes: the quantizer's owner alone does, earlier in this forward, so
 * its parameters are the ones the input was quantized with. Before that
 * quantizer has observed anything, or with it switched off, y as it is
 * (as act_quant). over: y has no other reader. */
static qat_tensor *kept_quant(qat_model *m, const qat__layer *l, qat_tensor *y, bool over) {
    const qat__act_quant *a = y ? qat__grid_quant(m, l->in[0]) : NULL;
    if (!a || !m->fake_quant_on || a->off || a->obs.updates == 0) return y;
    return over ? qat__fake_quant_over(m->ctx, y, &a->q, a->ste, 0.0f, 0.0f) : qat_fake_quant(m->ctx, y, &a->q, a->ste);
}

/* Fake quantization of a weight tensor (the layer's own, or a folded one).
 * A Conv quantized in blocks along its flattened input has a type on its
 * [O, C/groups·kh·kw] matrix: the weight is seen through that view (the
 * same elements) and the result viewed back. */
static qat_tensor *fake_quant_weight(qat_model *m, qat__layer *l, qat_tensor *w) {
    qat_tensor *v = l->wq->rank == w->rank ? w : qat_reshape(m->ctx, w, l->wq->rank, l->wq->shape), *y;
    if (!v) return NULL;
    if (l->wscale) { /* LSQ: learned scales, kept positive (a projection after each step) */
        for (int64_t p = 0; p < l->wscale->numel; p++)
            if (!(l->wscale->data[p] >= 1e-8f)) l->wscale->data[p] = 1e-8f;
        y = qat_fake_quant_lsq(m->ctx, v, l->wscale, l->wzero, l->wq,
                               qat_lsq_grad_factor(w->numel / l->wq->nparams, l->wq->qmax));
    } else {
        qat__qtype_calibrate_par(m->ctx, l->wq, w->data, true);
        if (l->qcfg->block_scale_bits) qat_qtype_compact_scales(l->wq, l->qcfg->block_scale_bits, NULL, NULL);
        y = qat_fake_quant(m->ctx, v, l->wq, l->qcfg->ste);
    }
    return v == w || !y ? y : qat_reshape(m->ctx, y, w->rank, w->shape);
}

/* The weight as the layer sees it: fake-quantized with scales from the
 * current weights (dynamic strategy) once the model is prepared. */
static qat_tensor *weight(qat_model *m, qat__layer *l) {
    if (!l->wq || !m->fake_quant_on || l->wq_off) return l->weight;
    return fake_quant_weight(m, l, l->weight);
}

static qat_tensor *product(qat_model *m, const qat__layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    return qat__op(l->kind)->product(m->ctx, l, x, w, b);
}

static qat_tensor *batchnorm(qat_model *m, const qat__layer *bn, qat_tensor *x, bool training) {
    return qat_batchnorm(m->ctx, x, bn->gamma, bn->beta, bn->running_mean, bn->running_var, bn->momentum, bn->eps,
                         training);
}

/* With grad off, the product inside a folded layer is dead once its
 * BatchNorm (which writes a new tensor) has read it: its memory goes back
 * to the step, as the layers' dead values do (qat_model_forward). */
static qat_tensor *product_read(qat_model *m, qat_tensor *product, qat_tensor *bn_out) {
    if (product && bn_out && !qat_ctx_grad_enabled(m->ctx))
        qat__step_release(m->ctx, product->data, (size_t)product->numel * sizeof(float));
    return bn_out;
}

/* Linear/Conv with its BatchNorm folded in (Jacob et al. 2018, as PyTorch's
 * ConvBn2d): sf = gamma / sqrt(running_var + eps); the product uses
 * fake_quant(w · sf), is divided by sf again, and then batch-normalised:
 * with batch statistics while training, with running statistics once
 * frozen, when the whole equals a product with the folded weight and bias
 * beta - running_mean · sf — what the integer program computes. */
static qat_tensor *fold_forward(qat_model *m, qat__layer *l, qat_tensor *x) {
    qat_ctx *ctx = m->ctx;
    const qat__layer *bn = &m->layers[l->fold_bn];
    bool bn_train = m->training && !m->bn_frozen;
    /* weights not quantized: the float layer itself (bit for bit the float model's) */
    if (!m->fake_quant_on || l->wq_off) {
        qat_tensor *y = product(m, l, x, l->weight, l->bias);
        return product_read(m, y, batchnorm(m, bn, y, bn_train));
    }
    int64_t C = bn->cout, shape[4] = {C, 1, 1, 1};
    qat_tensor *inv_std = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &C, false);
    if (!inv_std) return NULL;
    for (int64_t c = 0; c < C; c++) inv_std->data[c] = 1.0f / sqrtf(bn->running_var[c] + bn->eps);
    qat_tensor *sf = qat_mul(ctx, bn->gamma, inv_std);
    qat_tensor *wf = qat_mul(ctx, l->weight, qat_reshape(ctx, sf, l->weight->rank, shape));
    if (!wf) return NULL;
    qat_tensor *y = product(m, l, x, fake_quant_weight(m, l, wf), NULL);
    /* y / sf (+ bias), batch-normalised: one op (autograd's folded BatchNorm) */
    return product_read(m, y, qat__batchnorm_scaled(ctx, y, qat_reciprocal(ctx, sf), l->bias, bn->gamma, bn->beta,
                                                    bn->running_mean, bn->running_var, bn->momentum, bn->eps,
                                                    bn_train));
}

qat_tensor *qat__product_forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    if (l->fold_bn >= 0) return fold_forward(m, l, xs[0]);
    return product(m, l, xs[0], weight(m, l), l->bias);
}

/* A layer and its activation quantizer. A ReLU/ReLU6 that ends a group
 * with a quantizer is done by the quantizer itself (one op, two tensors
 * less, the same values and gradients). When the caller inspects every
 * value (qat_model_forward_all), each layer's own output is kept as it is:
 * no fusion, nothing written over; pre (may be NULL) gets it. */
static qat_tensor *quantized_layer(qat_model *m, qat__layer *l, qat_tensor *const *xs, bool inspect,
                                   qat_tensor **pre) {
    qat_act_kind act = qat__op(l->kind)->act; /* a ReLU (ReLU6): a clamp to [0, inf) ([0, 6]) */
    bool relu = act != QAT_ACT_NONE;
    float hi = act == QAT_ACT_RELU6 ? 6.0f : INFINITY;
    if (!inspect && relu && l->aq) return act_quant(m, l->aq, xs[0], true, 0.0f, hi);
    /* a ReLU/ReLU6 alone (a float model) over its input when it is the
     * input's only reader (never over the caller's input) */
    if (!inspect && relu && l->in[0] != 0 && m->layers[l->in[0]].n_consumers == 1)
        return qat__clamp_over(m->ctx, xs[0], 0.0f, hi);
    qat_tensor *y = qat__op(l->kind)->forward(m, l, xs);
    if (pre) *pre = y;
    if (qat__pool_keeps_scale(l)) return kept_quant(m, l, y, !inspect);
    return act_quant(m, l->aq, y, !inspect, 0.0f, 0.0f);
}

/* With grad off nothing is kept for a backward pass, so a layer's value
 * is dead once its last reader has run, and its memory goes back to the
 * step for the layers after it: an evaluation pass then holds the widest
 * frontier of the graph, not every value of it. Some layers return their
 * input's memory (flatten, a folded BatchNorm, dropout in evaluation), so
 * a buffer goes back only when no live value shares it; the caller's input
 * and the output never do. left[j]: readers of layer j still to run. */
static void release_dead(qat_model *m, qat_tensor **vals, const int *left, int j, int upto, const qat_tensor *x) {
    qat_tensor *t = vals[j];
    if (!t || t->data == x->data) return;
    for (int k = 0; k <= upto; k++)
        if (k != j && vals[k] && vals[k]->data == t->data && (left[k] > 0 || k == upto)) return;
    qat__step_release(m->ctx, t->data, (size_t)t->numel * sizeof(float));
    for (int k = 0; k <= upto; k++) /* every dead alias of the buffer */
        if (k != upto && vals[k] && vals[k]->data == t->data) vals[k] = NULL;
}

/* The forward; vals (n_layers entries, or NULL for step scratch) gets
 * every layer's output, pre (may be NULL) each one before its activation
 * quantizer. Dead values are recycled (grad off), and values written
 * over, only when the caller asked for neither. */
static qat_tensor *run(qat_model *m, qat_tensor *x, qat_tensor **vals, qat_tensor **pre) {
    if (!m) return NULL;
    if (!m->built) {
        qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: call qat_model_build before forward");
        return NULL;
    }
    if (!x) return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: NULL input"), NULL;
    int out = qat__model_output(m);
    bool inspect = vals || pre, recycle = !inspect && !qat_ctx_grad_enabled(m->ctx);
    if (!vals && !(vals = qat__step_scratch(m->ctx, (size_t)m->n_layers * sizeof *vals))) return NULL;
    int *left = recycle ? qat__step_alloc(m->ctx, (size_t)m->n_layers * sizeof *left) : NULL;
    if (recycle && !left) return NULL;
    if (recycle) {
        for (int i = 1; i <= out; i++)
            for (int j = 0; j < m->layers[i].n_in; j++) left[m->layers[i].in[j]]++;
        left[out] = 1; /* the caller reads it */
    }
    for (int i = out + 1; i < m->n_layers; i++) {
        vals[i] = NULL;
        if (pre) pre[i] = NULL;
    }
    /* the input: normalized first (the model's own tensor then, which its
     * quantizer may write over unless the caller inspects it), quantized */
    qat_tensor *xn = qat_normalize(m->ctx, x, m->norm);
    if (!xn) return qat_ctx_error_prefix(m->ctx, "model input: "), NULL;
    if (pre) pre[0] = xn;
    vals[0] = act_quant(m, m->layers[0].aq, xn, xn != x && !inspect, 0.0f, 0.0f);
    for (int i = 1; i <= out; i++) {
        qat__layer *l = &m->layers[i];
        qat_tensor *xs[QAT_CUSTOM_MAX_INPUTS];
        for (int j = 0; j < l->n_in; j++) xs[j] = vals[l->in[j]];
        bool had_error = qat_ctx_status(m->ctx) != QAT_OK;
        vals[i] = quantized_layer(m, l, xs, inspect, pre ? &pre[i] : NULL);
        if (!vals[i]) {
            /* name the layer that failed: "layer conv2: qat_conv2d: ..." */
            if (!had_error) qat_ctx_error_prefix(m->ctx, "layer %s: ", l->name);
            return NULL;
        }
        if (recycle)
            for (int j = 0; j < l->n_in; j++)
                if (--left[l->in[j]] == 0) release_dead(m, vals, left, l->in[j], i, x);
    }
    return vals[out];
}

qat_tensor *qat_model_forward(qat_model *m, qat_tensor *x) { return run(m, x, NULL, NULL); }

qat_tensor *qat_model_forward_all(qat_model *m, qat_tensor *x, qat_tensor **out, qat_tensor **pre) {
    return run(m, x, out, pre);
}
