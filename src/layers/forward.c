/* The model's forward pass: each layer maps to one or two graph ops. */
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

/* The weight as the layer sees it: fake-quantized with scales from the
 * current weights (dynamic strategy) once the model is prepared. */
static qat_tensor *weight(qat_model *m, qat_layer *l) {
    if (!l->wq || !m->fake_quant_on) return l->weight;
    if (l->wscale) { /* LSQ: learned scales, kept positive (a projection after each step) */
        for (int64_t p = 0; p < l->wscale->numel; p++)
            if (!(l->wscale->data[p] >= 1e-8f)) l->wscale->data[p] = 1e-8f;
        return qat_fake_quant_lsq(m->ctx, l->weight, l->wscale, l->wzero, l->wq,
                                  qat_lsq_grad_factor(l->weight->numel / l->wq->nparams, l->wq->qmax));
    }
    qat_qtype_calibrate(l->wq, l->weight->data, true);
    return qat_fake_quant(m->ctx, l->weight, l->wq, m->qcfg.ste);
}

static qat_tensor *layer_forward(qat_model *m, qat_layer *l, qat_tensor *x) {
    qat_ctx *ctx = m->ctx;
    switch (l->kind) {
    case QAT_LAYER_LINEAR: return qat_linear(ctx, x, weight(m, l), l->bias);
    case QAT_LAYER_CONV2D: return qat_conv2d(ctx, x, weight(m, l), l->bias, l->stride, l->pad);
    case QAT_LAYER_BATCHNORM:
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
