/* The model's forward pass: the layers in id order (a topological order:
 * inputs come first), each one or a few graph ops, each output
 * fake-quantized where the QAT pass put an activation quantizer. */
#include <math.h>

#include "autograd/internal.h"
#include "internal.h"

/* Observes (in training, unless frozen) and fake-quantizes an activation. */
static qat_tensor *act_quant(qat_model *m, qat__act_quant *a, qat_tensor *x) {
    if (!a || !x) return x;
    if (m->training && !m->observers_frozen) {
        qat_observer_update(&a->obs, x->data, x->numel);
        qat_observer_qparams(&a->obs, &a->q);
    }
    if (!m->fake_quant_on || a->off || a->obs.updates == 0) return x; /* off, or nothing observed yet */
    return qat_fake_quant(m->ctx, x, &a->q, a->ste);
}

/* Fake quantization of a weight tensor (the layer's own, or a folded one). */
static qat_tensor *fake_quant_weight(qat_model *m, qat__layer *l, qat_tensor *w) {
    if (l->wscale) { /* LSQ: learned scales, kept positive (a projection after each step) */
        for (int64_t p = 0; p < l->wscale->numel; p++)
            if (!(l->wscale->data[p] >= 1e-8f)) l->wscale->data[p] = 1e-8f;
        return qat_fake_quant_lsq(m->ctx, w, l->wscale, l->wzero, l->wq,
                                  qat_lsq_grad_factor(w->numel / l->wq->nparams, l->wq->qmax));
    }
    qat_qtype_calibrate(l->wq, w->data, true);
    return qat_fake_quant(m->ctx, w, l->wq, l->qcfg->ste);
}

/* The weight as the layer sees it: fake-quantized with scales from the
 * current weights (dynamic strategy) once the model is prepared. */
static qat_tensor *weight(qat_model *m, qat__layer *l) {
    if (!l->wq || !m->fake_quant_on || l->wq_off) return l->weight;
    return fake_quant_weight(m, l, l->weight);
}

static qat_tensor *product(qat_model *m, const qat__layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    if (l->kind == QAT_LAYER_LINEAR) return qat_linear(m->ctx, x, w, b);
    qat_conv2d_params p = {l->sh, l->sw, l->ph, l->pw, l->groups};
    return qat_conv2d_ex(m->ctx, x, w, b, &p);
}

static qat_tensor *batchnorm(qat_model *m, const qat__layer *bn, qat_tensor *x, bool training) {
    return qat_batchnorm(m->ctx, x, bn->gamma, bn->beta, bn->running_mean, bn->running_var, bn->momentum, bn->eps,
                         training);
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
    if (!m->fake_quant_on || l->wq_off) return batchnorm(m, bn, product(m, l, x, l->weight, l->bias), bn_train);
    int64_t C = bn->cout, shape[4] = {C, 1, 1, 1};
    qat_tensor *inv_std = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &C, false);
    if (!inv_std) return NULL;
    for (int64_t c = 0; c < C; c++) inv_std->data[c] = 1.0f / sqrtf(bn->running_var[c] + bn->eps);
    qat_tensor *sf = qat_mul(ctx, bn->gamma, inv_std);
    qat_tensor *wf = qat_mul(ctx, l->weight, qat_reshape(ctx, sf, l->weight->rank, shape));
    if (!wf) return NULL;
    qat_tensor *y = product(m, l, x, fake_quant_weight(m, l, wf), NULL);
    int out_rank = l->kind == QAT_LAYER_LINEAR ? 1 : 3; /* [C] or [C, 1, 1] against y */
    y = qat_mul(ctx, y, qat_reshape(ctx, qat_reciprocal(ctx, sf), out_rank, shape));
    if (l->bias) y = qat_add(ctx, y, qat_reshape(ctx, l->bias, out_rank, shape));
    return y ? batchnorm(m, bn, y, bn_train) : NULL;
}

static qat_tensor *layer_forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    qat_ctx *ctx = m->ctx;
    qat_tensor *x = xs[0];
    qat_pool2d_params pp = {l->kh, l->kw, l->sh, l->sw, l->ph, l->pw};
    if (l->fold_bn >= 0) return fold_forward(m, l, x);
    switch (l->kind) {
    case QAT_LAYER_LINEAR:
    case QAT_LAYER_CONV2D: return product(m, l, x, weight(m, l), l->bias);
    case QAT_LAYER_BATCHNORM:
        if (l->folded) return x; /* applied by the Linear/Conv before it */
        return batchnorm(m, l, x, m->training);
    case QAT_LAYER_RELU: return qat_relu(ctx, x);
    case QAT_LAYER_RELU6: return qat_clamp(ctx, x, 0.0f, 6.0f);
    case QAT_LAYER_MAXPOOL2D: return qat_maxpool2d_ex(ctx, x, &pp);
    case QAT_LAYER_AVGPOOL2D: return qat_avgpool2d_ex(ctx, x, &pp);
    case QAT_LAYER_GLOBAL_AVGPOOL: return qat_global_avgpool2d(ctx, x);
    case QAT_LAYER_FLATTEN: return qat_flatten(ctx, x);
    case QAT_LAYER_DROPOUT: return m->training && l->p > 0 ? qat_dropout(ctx, x, l->p, &m->rng) : x;
    case QAT_LAYER_ADD: return qat_add(ctx, x, xs[1]);
    case QAT_LAYER_CONCAT: return qat_concat(ctx, l->n_in, xs, 1);
    case QAT_LAYER_SIGMOID: return qat_sigmoid(ctx, x);
    case QAT_LAYER_TANH: return qat_tanh(ctx, x);
    case QAT_LAYER_HARDSWISH: return qat_hardswish(ctx, x);
    case QAT_LAYER_CUSTOM: return qat_custom(ctx, l->custom, l->custom_user, l->n_in, xs);
    case QAT_LAYER_INPUT:
    case QAT_LAYER_KIND_COUNT: break;
    }
    qat_ctx_fail(ctx, QAT_ERR_ARG, "model: layer %s has an unknown kind", l->name);
    return NULL;
}

/* The forward; vals (n_layers entries, or NULL for step scratch) gets
 * every layer's output, pre (may be NULL) each one before its activation
 * quantizer. */
static qat_tensor *run(qat_model *m, qat_tensor *x, qat_tensor **vals, qat_tensor **pre) {
    if (!m) return NULL;
    if (!m->built) {
        qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: call qat_model_build before forward");
        return NULL;
    }
    if (!vals && !(vals = qat__step_scratch(m->ctx, (size_t)m->n_layers * sizeof *vals))) return NULL;
    int out = qat__model_output(m);
    for (int i = out + 1; i < m->n_layers; i++) {
        vals[i] = NULL;
        if (pre) pre[i] = NULL;
    }
    if (pre) pre[0] = x;
    vals[0] = act_quant(m, m->layers[0].aq, x);
    for (int i = 1; i <= out; i++) {
        qat__layer *l = &m->layers[i];
        qat_tensor *xs[QAT_CUSTOM_MAX_INPUTS];
        for (int j = 0; j < l->n_in; j++) xs[j] = vals[l->in[j]];
        bool had_error = qat_ctx_status(m->ctx) != QAT_OK;
        qat_tensor *y = layer_forward(m, l, xs);
        if (pre) pre[i] = y;
        vals[i] = act_quant(m, l->aq, y);
        if (!vals[i]) {
            /* name the layer that failed: "layer conv2: qat_conv2d: ..." */
            if (!had_error) qat__error_prefix(m->ctx, "layer %s: ", l->name);
            return NULL;
        }
    }
    return vals[out];
}

qat_tensor *qat_model_forward(qat_model *m, qat_tensor *x) { return run(m, x, NULL, NULL); }

qat_tensor *qat_model_forward_all(qat_model *m, qat_tensor *x, qat_tensor **out, qat_tensor **pre) {
    return run(m, x, out, pre);
}
