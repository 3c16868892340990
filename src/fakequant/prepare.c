/* The QAT pass: attaches weight and activation quantizers to a model. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "qat/layers.h"

qat_prepare_config qat_prepare_defaults(void) {
    return (qat_prepare_config){.wbits = 8, .w_narrow = true, .wgran = QAT_GRAN_CHANNEL, .block = 0,
                                .abits = 8, .a_symmetric = false, .aobs = QAT_OBS_EMA,
                                .window = 16, .k = 0.9f, .ste = QAT_STE_CLIPPED, .io_bits = 8, .fold_bn = true};
}

static qat_status check_config(qat_ctx *ctx, const qat_prepare_config *c) {
    if (c->wbits < 2 || c->wbits > 16 || c->abits < 2 || c->abits > 16 || c->io_bits < 2 ||
        c->io_bits > 16)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: bit widths must be 2..16 (weights %d, "
                            "activations %d, input/output %d)", c->wbits, c->abits, c->io_bits);
    if (c->wgran == QAT_GRAN_BLOCK && c->block < 1)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: block granularity needs a block size >= 1");
    return QAT_OK;
}

static qat_status new_act_quant(qat_model *m, const qat_prepare_config *c, int bits,
                                qat_act_quant **out) {
    qat_act_quant *a = *out ? *out : qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, sizeof *a);
    if (!a) return qat_ctx_status(m->ctx);
    qat_status st = qat_qtype_init(m->ctx, &a->q, bits, true, false, 0, NULL, NULL);
    if (st == QAT_OK) st = qat_observer_init(m->ctx, &a->obs, c->aobs, c->a_symmetric, c->window, c->k);
    *out = a;
    return st;
}

/* LSQ weight scales: views into the model's qparams block, which grows by
 * copying (prepare runs once, outside the training loop). Initialised as
 * LSQ does: 2·mean|w| / sqrt(qmax) per block. */
static qat_status lsq_scales(qat_model *m, qat_layer *l) {
    qat_ctx *ctx = m->ctx;
    int64_t np = l->wq->nparams, old = m->n_qparams;
    if (l->wscale) return qat_ctx_fail(ctx, QAT_ERR_STATE, "prepare: %s already has LSQ scales", l->name);
    float *p = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(old + np) * sizeof(float));
    float *g = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(old + np) * sizeof(float));
    float *z = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)np * sizeof(float));
    if (!p || !g || !z) return qat_ctx_status(ctx);
    if (old) memcpy(p, m->qparams, (size_t)old * sizeof(float));
    /* re-point the earlier layers' views at the new block */
    for (int i = 0; i < m->n_layers; i++) {
        qat_tensor *t = m->layers[i].wscale;
        if (!t) continue;
        int64_t off = t->data - m->qparams;
        t->data = p + off, t->grad = g + off;
    }
    m->qparams = p, m->qgrads = g, m->n_qparams = old + np;
    l->wscale = qat_tensor_wrap(ctx, QAT_MEM_PERSIST, p + old, g + old, 1, &np);
    l->wzero = qat_tensor_wrap(ctx, QAT_MEM_PERSIST, z, NULL, 1, &np);
    if (!l->wscale || !l->wzero) return qat_ctx_status(ctx);
    /* Weight blocks split dims 0 and 1 only, so each block is one run of
     * consecutive elements: one pass, summed in double. */
    int64_t run = qat__qtype_run(l->wq);
    for (int64_t s0 = 0; s0 < l->weight->numel; s0 += run) {
        double a = 0;
        for (int64_t j = s0; j < s0 + run; j++) a += fabsf(l->weight->data[j]);
        float s = (float)(2.0 * a / (double)run / sqrt((double)l->wq->qmax)); /* 2·mean|w|/sqrt(qmax) */
        p[old + qat_qtype_param_index(l->wq, s0)] = s > 1e-8f ? s : 1e-8f;
    }
    return QAT_OK;
}

/* Index of the layer that ends the fused group starting at i: a
 * Linear/Conv, then optionally BatchNorm, then optionally ReLU/ReLU6. */
static int group_end(const qat_model *m, int i) {
    int j = i;
    if (j + 1 < m->n_layers && m->layers[j + 1].kind == QAT_LAYER_BATCHNORM) j++;
    if (j + 1 < m->n_layers &&
        (m->layers[j + 1].kind == QAT_LAYER_RELU || m->layers[j + 1].kind == QAT_LAYER_RELU6))
        j++;
    return j;
}

static qat_status prepare_at(qat_model *m, int i, const qat_prepare_config *c) {
    qat_layer *l = &m->layers[i];
    qat_ctx *ctx = m->ctx;
    int64_t block[QAT_MAX_RANK] = {0};
    if (c->wgran != QAT_GRAN_TENSOR) block[0] = 1; /* per output channel */
    if (c->wgran == QAT_GRAN_BLOCK) {
        if (l->weight->shape[1] % c->block)
            return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "prepare: block size %d does not divide the %lld "
                                "inputs of %s", c->block, (long long)l->weight->shape[1], l->name);
        block[1] = c->block;
    }
    if (!l->wq && !(l->wq = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *l->wq))) return qat_ctx_status(ctx);
    qat_status st = qat_qtype_init(ctx, l->wq, c->wbits, true, c->w_narrow, l->weight->rank,
                                   l->weight->shape, block);
    if (st != QAT_OK) return st;
    if (c->lsq && (st = lsq_scales(m, l)) != QAT_OK) return st;
    /* Jacob et al. 2018: the BatchNorm after a Linear/Conv is folded into
     * the weight that gets fake-quantized (see fold_forward in layers). */
    if (c->fold_bn && i + 1 < m->n_layers && m->layers[i + 1].kind == QAT_LAYER_BATCHNORM &&
        m->layers[i + 1].out == l->out) {
        l->fold_bn = &m->layers[i + 1];
        m->layers[i + 1].folded = true;
    }
    /* The logits (the last layer's output) keep io_bits: with 2-bit logits
     * cross-entropy can only lower the loss by inflating their range. */
    int end = group_end(m, i);
    return new_act_quant(m, c, end == m->n_layers - 1 ? c->io_bits : c->abits, &m->layers[end].aq);
}

qat_status qat_prepare(qat_model *m, const qat_prepare_config *cfg) {
    if (!m) return QAT_ERR_ARG;
    qat_prepare_config c = cfg ? *cfg : qat_prepare_defaults();
    if (!m->built) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare: build the model first");
    if (m->prepared) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare: model already prepared");
    qat_status st = check_config(m->ctx, &c);
    if (st != QAT_OK) return st;
    m->qcfg = c;
    if ((st = new_act_quant(m, &c, c.io_bits, &m->input_aq)) != QAT_OK) return st;
    for (int i = 0; i < m->n_layers; i++) {
        qat_layer *l = &m->layers[i];
        if (l->kind == QAT_LAYER_LINEAR || l->kind == QAT_LAYER_CONV2D) st = prepare_at(m, i, &c);
        else if (l->kind == QAT_LAYER_AVGPOOL2D) st = new_act_quant(m, &c, c.abits, &l->aq); /* averages requantize */
        if (st != QAT_OK) return st;
    }
    m->prepared = true;
    m->fake_quant_on = true;
    return QAT_OK;
}

qat_status qat_prepare_layer(qat_model *m, const char *name, const qat_prepare_config *cfg) {
    if (!m || !cfg) return QAT_ERR_ARG;
    if (!m->prepared) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare_layer: call qat_prepare first");
    qat_layer *l = qat_model_find_layer(m, name);
    if (!l || (l->kind != QAT_LAYER_LINEAR && l->kind != QAT_LAYER_CONV2D))
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "prepare_layer: no Linear/Conv layer named \"%s\"",
                            name ? name : "(null)");
    qat_status st = check_config(m->ctx, cfg);
    return st != QAT_OK ? st : prepare_at(m, (int)(l - m->layers), cfg);
}
