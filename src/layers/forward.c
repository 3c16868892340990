/* The model's forward pass: each layer maps to one or two graph ops. */
#include <math.h>

#include "autograd/internal.h"
#include "qat/layers.h"

/* Observes (in training, unless frozen) and fake-quantizes an activation. */
static qat_tensor *act_quant(qat_model *m, qat_act_quant *a, qat_tensor *x) {
    if (!a || !x) return x;
    if (m->training && !m->observers_frozen) {
        qat_observer_update(&a->obs, x->data, x->numel);
        qat_observer_qparams(&a->obs, &a->q);
    }
    if (!m->fake_quant_on || a->obs.updates == 0) return x; /* nothing observed yet */
    return qat_fake_quant(m->ctx, x, &a->q, m->qcfg.ste);
}

static qat_tensor *fake_quant_weight(qat_model *m, qat_layer *l, qat_tensor *w);

/* The weight as the layer sees it: fake-quantized with scales from the
 * current weights (dynamic strategy) once the model is prepared. */
static qat_tensor *weight(qat_model *m, qat_layer *l) {
    if (!l->wq || !m->fake_quant_on) return l->weight;
    return fake_quant_weight(m, l, l->weight);
}

/* Fake quantization of a weight tensor (the layer's own, or a folded one). */
static qat_tensor *fake_quant_weight(qat_model *m, qat_layer *l, qat_tensor *w) {
    if (l->wscale) { /* LSQ: learned scales, kept positive (a projection after each step) */
        for (int64_t p = 0; p < l->wscale->numel; p++)
            if (!(l->wscale->data[p] >= 1e-8f)) l->wscale->data[p] = 1e-8f;
        return qat_fake_quant_lsq(m->ctx, w, l->wscale, l->wzero, l->wq,
                                  qat_lsq_grad_factor(w->numel / l->wq->nparams, l->wq->qmax));
    }
    qat_qtype_calibrate(l->wq, w->data, true);
    return qat_fake_quant(m->ctx, w, l->wq, m->qcfg.ste);
}

static qat_tensor *product(qat_model *m, qat_layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    return l->kind == QAT_LAYER_LINEAR ? qat_linear(m->ctx, x, w, b)
                                       : qat_conv2d(m->ctx, x, w, b, l->stride, l->pad);
}

static qat_tensor *batchnorm(qat_model *m, qat_layer *bn, qat_tensor *x, bool training) {
    return qat_batchnorm(m->ctx, x, bn->gamma, bn->beta, bn->running_mean, bn->running_var,
                         bn->momentum, bn->eps, training);
}

/* Linear/Conv with its BatchNorm folded in (Jacob et al. 2018, as PyTorch's
 * ConvBn2d): sf = gamma / sqrt(running_var + eps); the product uses
 * fake_quant(w · sf), is divided by sf again, and then batch-normalised:
 * with batch statistics while training, with running statistics once
 * frozen, when the whole equals a product with the folded weight and bias
 * beta - running_mean · sf — what the integer model computes. */
static qat_tensor *fold_forward(qat_model *m, qat_layer *l, qat_tensor *x) {
    qat_ctx *ctx = m->ctx;
    qat_layer *bn = l->fold_bn;
    bool bn_train = m->training && !m->bn_frozen;
    if (!m->fake_quant_on) return batchnorm(m, bn, product(m, l, x, l->weight, l->bias), bn_train);
    int64_t C = bn->out, shape[4] = {C, 1, 1, 1};
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

static qat_tensor *layer_forward(qat_model *m, qat_layer *l, qat_tensor *x) {
    qat_ctx *ctx = m->ctx;
    if (l->fold_bn) return fold_forward(m, l, x);
    switch (l->kind) {
    case QAT_LAYER_LINEAR: return qat_linear(ctx, x, weight(m, l), l->bias);
    case QAT_LAYER_CONV2D: return qat_conv2d(ctx, x, weight(m, l), l->bias, l->stride, l->pad);
    case QAT_LAYER_BATCHNORM:
        if (l->folded) return x; /* applied by the Linear/Conv before it */
        return qat_batchnorm(ctx, x, l->gamma, l->beta, l->running_mean, l->running_var,
                             l->momentum, l->eps, m->training);
    case QAT_LAYER_RELU: return qat_relu(ctx, x);
    case QAT_LAYER_RELU6: return qat_clamp(ctx, x, 0.0f, 6.0f);
    case QAT_LAYER_MAXPOOL2D: return qat_maxpool2d(ctx, x, l->kernel, l->stride);
    case QAT_LAYER_AVGPOOL2D: return qat_avgpool2d(ctx, x, l->kernel, l->stride);
    case QAT_LAYER_FLATTEN: return qat_flatten(ctx, x);
    case QAT_LAYER_DROPOUT: return m->training && l->p > 0 ? qat_dropout(ctx, x, l->p, &m->rng) : x;
    case QAT_LAYER_KIND_COUNT: break;
    }
    qat_ctx_fail(ctx, QAT_ERR_ARG, "model: layer %s has an unknown kind", l->name);
    return NULL;
}

qat_tensor *qat_model_forward(qat_model *m, qat_tensor *x) {
    if (!m) return NULL;
    if (!m->built) {
        qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: call qat_model_build before forward");
        return NULL;
    }
    x = act_quant(m, m->input_aq, x);
    for (int i = 0; i < m->n_layers; i++) {
        bool had_error = qat_ctx_status(m->ctx) != QAT_OK;
        x = act_quant(m, m->layers[i].aq, layer_forward(m, &m->layers[i], x));
        if (!x) {
            /* name the layer that failed: "layer conv2: qat_conv2d: ..." */
            if (!had_error) qat__error_prefix(m->ctx, "layer %s: ", m->layers[i].name);
            return NULL;
        }
    }
    return x;
}
