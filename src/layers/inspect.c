/* Looking at a prepared model's quantization points, and switching them
 * one by one: what the summary, the analysis and the training log read
 * (qat/layers.h, "quantization points"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "op.h"

bool qat__pool_keeps_scale(const qat__layer *l) {
    return qat__op(l->kind)->averages && l->qcfg && l->qcfg->pool_keeps_scale && !l->aq;
}

qat__act_quant *qat__grid_quant(const qat_model *m, int id) {
    for (;;) { /* ids decrease along the walk: it ends */
        const qat__layer *l = &m->layers[id];
        if (l->aq) return l->aq;
        if (id == 0 || !(qat__op(l->kind)->keeps_quant || qat__pool_keeps_scale(l))) return NULL;
        id = l->in[0];
    }
}

int qat_prepare_points(const qat_model *m, const qat_prepare_config *cfg, int *ids, int cap) {
    if (!m || !m->built) return 0;
    int n = 0;
    if (m->prepared) { /* what is there, per-layer configurations included */
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].aq && n++ < cap && ids) ids[n - 1] = i;
        return n;
    }
    /* what qat_prepare would place: the input, then the end of every
     * requantizing group (quantize_layer's rule), average pools not with
     * pool_keeps_scale */
    qat_prepare_config c = cfg ? *cfg : qat_prepare_defaults();
    if (n++ < cap && ids) ids[0] = 0;
    for (int i = 1; i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        if (!qat__requantizes(l->kind) || (c.pool_keeps_scale && qat__op(l->kind)->averages)) continue;
        bool product = qat__op(l->kind)->weighted;
        qat__group g;
        qat__match_group(m, i, product && c.fold_bn, &g);
        if (n++ < cap && ids) ids[n - 1] = g.end;
    }
    return n;
}

bool qat_model_act_quant(const qat_model *m, int id, qat_act_quant_info *out) {
    if (!m || id < 0 || id >= m->n_layers || !m->layers[id].aq || !out) return false;
    const qat__act_quant *a = m->layers[id].aq;
    *out = (qat_act_quant_info){.bits = a->q.bits, .is_signed = a->q.is_signed, .symmetric = a->obs.symmetric,
                                .qmin = a->q.qmin, .qmax = a->q.qmax, .scale = a->q.scale[0],
                                .zero_point = a->q.zero_point[0], .min = a->obs.min, .max = a->obs.max,
                                .updates = a->obs.updates, .observer = a->obs.kind};
    return true;
}

void qat__effective_weight(const qat_model *m, const qat__layer *l, float *w, double *b) {
    int64_t O = l->weight->shape[0], per = l->weight->numel / O;
    memcpy(w, l->weight->data, (size_t)l->weight->numel * sizeof *w);
    for (int64_t c = 0; c < O; c++) b[c] = l->bias ? l->bias->data[c] : 0.0;
    if (l->fold_bn < 0) return;
    const qat__layer *bn = &m->layers[l->fold_bn];
    for (int64_t c = 0; c < O; c++) {
        float inv_std = 1.0f / sqrtf(bn->running_var[c] + bn->eps);
        float sf = bn->gamma->data[c] * inv_std; /* the float ops of fold_forward */
        for (int64_t j = 0; j < per; j++) w[c * per + j] *= sf;
        b[c] = (double)bn->beta->data[c] + (b[c] - (double)bn->running_mean[c]) * (double)sf;
    }
}

qat_status qat_model_weight_qtype(const qat_model *m, int id, qat_ctx *ctx, qat_qtype *out) {
    if (!m || !ctx || !out) return QAT_ERR_ARG;
    if (id < 0 || id >= m->n_layers || !m->layers[id].wq)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "weight_qtype: layer %d has no weight quantizer", id);
    const qat__layer *l = &m->layers[id];
    const qat_qtype *src = l->wq;
    qat_status st = qat_qtype_init_blocks(ctx, out, src->bits, src->is_signed, false, src->rank, src->shape, src->block,
                                          true); /* the prepared type, ragged or not */
    if (st != QAT_OK) return st;
    out->qmin = src->qmin, out->qmax = src->qmax; /* narrow or full, as prepared */
    if (l->wscale) { /* LSQ: the learned scales, as the forward projects and rounds them */
        for (int64_t p = 0; p < out->nparams; p++) {
            float s = l->wscale->data[p], z = nearbyintf(l->wzero->data[p]);
            out->scale[p] = s >= 1e-8f ? s : 1e-8f;
            out->zero_point[p] = (int32_t)(z < (float)src->qmin ? (float)src->qmin : z > (float)src->qmax ? (float)src->qmax : z);
        }
        return QAT_OK;
    }
    /* working copies on the heap: ctx's step arena may hold a caller's step */
    float *w = malloc((size_t)l->weight->numel * sizeof *w);
    double *b = malloc((size_t)l->weight->shape[0] * sizeof *b);
    bool ok = w && b;
    if (ok) {
        qat__effective_weight(m, l, w, b);
        qat_qtype_calibrate(out, w, true); /* the dynamic strategy: min-max of the weights in use */
        if (l->qcfg && l->qcfg->block_scale_bits) qat_qtype_compact_scales(out, l->qcfg->block_scale_bits, NULL, NULL);
    }
    free(w), free(b);
    return ok ? QAT_OK : qat_ctx_fail(ctx, QAT_ERR_NOMEM, "weight_qtype: out of memory");
}

qat_status qat_model_set_layer_fake_quant(qat_model *m, int id, bool weights, bool activation) {
    if (!m) return QAT_ERR_ARG;
    if (id < 0 || id >= m->n_layers || (!m->layers[id].wq && !m->layers[id].aq))
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "set_layer_fake_quant: layer %d has no quantizer", id);
    qat__layer *l = &m->layers[id];
    l->wq_off = !weights;
    if (l->aq) l->aq->off = !activation;
    return QAT_OK;
}

void qat_model_set_all_layers_fake_quant(qat_model *m, bool on) {
    for (int i = 0; m && i < m->n_layers; i++) {
        m->layers[i].wq_off = !on;
        if (m->layers[i].aq) m->layers[i].aq->off = !on;
    }
}
