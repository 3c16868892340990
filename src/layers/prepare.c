/* The QAT pass over the model graph: weight quantizers on Linear/Conv,
 * activation quantizers after each fusion group that requantizes (the
 * matcher in fusion.c decides the groups), BatchNorm folding, LSQ's
 * learned scales. Per-layer configurations are whole: every field of a
 * layer's own configuration is honoured. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakequant/kernels.h"
#include "internal.h"
#include "op.h"

qat_prepare_config qat_prepare_defaults(void) {
    return (qat_prepare_config){.wbits = 8, .w_narrow = true, .wgran = QAT_GRAN_CHANNEL, .block = 0,
                                .abits = 8, .a_symmetric = false, .aobs = QAT_OBS_EMA,
                                .window = 16, .k = 0.9f, .ste = QAT_STE_CLIPPED, .io_bits = 8, .fold_bn = true,
                                .pool_keeps_scale = false};
}

qat_status qat__check_qat_config(qat_ctx *ctx, const qat_prepare_config *c) {
    if (c->wbits < 2 || c->wbits > 16 || c->abits < 2 || c->abits > 16 || c->io_bits < 2 || c->io_bits > 16)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: bit widths must be 2..16 (weights %d, "
                            "activations %d, input/output %d)", c->wbits, c->abits, c->io_bits);
    if ((unsigned)c->wgran > QAT_GRAN_AXES) return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: unknown granularity %d", (int)c->wgran);
    if (c->wgran == QAT_GRAN_BLOCK && c->block < 1)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: block granularity needs a block size >= 1");
    for (int d = 0; c->wgran == QAT_GRAN_AXES && d < QAT_MAX_RANK; d++)
        if (c->blocks[d] < 0 || c->blocks[d] > QAT_MAX_BLOCK)
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: block size %lld for dimension %d is outside 0..%d (0: whole)",
                                (long long)c->blocks[d], d, QAT_MAX_BLOCK);
    if (c->block_scale_bits != 0 && (c->block_scale_bits < 4 || c->block_scale_bits > 8))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: block_scale_bits %d: 0 (a float scale per block) or 4..8 "
                            "(compact sub-scales)", c->block_scale_bits);
    if (c->block_scale_bits && c->wgran != QAT_GRAN_BLOCK && c->wgran != QAT_GRAN_AXES)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: compact block scales (block_scale_bits %d) need sub-channel "
                            "weights (block granularity)", c->block_scale_bits);
    if (c->block_scale_bits && c->wbits > 8)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: compact block scales need weights of at most 8 bits (wbits %d): "
                            "a weight times its sub-scale must fit int16", c->wbits);
    if (c->block_scale_bits && c->lsq)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: compact block scales are derived from the block ranges at "
                            "every step; LSQ learns a float scale per block: choose one");
    if ((unsigned)c->ste > QAT_STE_PLAIN) return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: unknown STE %d", (int)c->ste);
    return QAT_OK;
}

qat_status qat_prepare_check(qat_ctx *ctx, const qat_prepare_config *c) {
    if (!ctx) return QAT_ERR_ARG;
    if (!c) return qat_ctx_fail(ctx, QAT_ERR_ARG, "prepare: NULL configuration");
    return qat__check_qat_config(ctx, c);
}

/* A fresh activation quantizer for configuration c at `bits`. */
static qat__act_quant *new_act_quant(qat_model *m, const qat_prepare_config *c, int bits) {
    qat__act_quant *a = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, sizeof *a);
    if (!a) return NULL;
    if (qat_qtype_init(m->ctx, &a->q, bits, true, false, 0, NULL, NULL) != QAT_OK ||
        qat_observer_init(m->ctx, &a->obs, c->aobs, c->a_symmetric, c->window, c->k) != QAT_OK)
        return NULL;
    a->ste = c->ste;
    return a;
}

/* The weight type configuration c asks for layer l (not yet attached).
 * QAT_GRAN_BLOCK types a Conv's weight as its [O, C/groups·kh·kw] matrix:
 * the same elements in the same order, blocks along the flattened input. */
static qat_status weight_type(qat_model *m, const qat__layer *l, const qat_prepare_config *c, qat_qtype *out) {
    int rank = l->weight->rank;
    int64_t block[QAT_MAX_RANK] = {0}, shape[QAT_MAX_RANK];
    memcpy(shape, l->weight->shape, sizeof shape);
    switch (c->wgran) {
    case QAT_GRAN_TENSOR: break;
    case QAT_GRAN_CHANNEL: block[0] = 1; break; /* per output channel */
    case QAT_GRAN_BLOCK:
        rank = 2, shape[1] = l->weight->numel / shape[0];
        block[0] = 1, block[1] = c->block < shape[1] ? c->block : shape[1];
        break;
    case QAT_GRAN_AXES:
        for (int d = 0; d < QAT_MAX_RANK; d++) {
            if (c->blocks[d] > 0 && d >= rank)
                return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "prepare: %s: a block size for dimension %d, but its weight "
                                    "has %d dimensions", l->name, d, rank);
            if (d < rank) block[d] = c->blocks[d];
        }
        break;
    }
    qat_status st = qat_qtype_init_blocks(m->ctx, out, c->wbits, true, c->w_narrow, rank, shape, block, c->ragged);
    if (st != QAT_OK) {
        char msg[256], dims[64] = "";
        snprintf(msg, sizeof msg, "%s", qat_ctx_error(m->ctx));
        for (int d = 0, at = 0; d < rank && at < (int)sizeof dims; d++)
            at += snprintf(dims + at, sizeof dims - (size_t)at, d ? ", %lld" : "%lld", (long long)shape[d]);
        qat_ctx_clear_error(m->ctx);
        return qat_ctx_fail(m->ctx, st, "prepare: %s's weight [%s]: %s", l->name, dims, msg);
    }
    return QAT_OK;
}

/* LSQ's initial scales for layer l's type q: 2·mean|w| / sqrt(qmax) per
 * block, summed in double over the block's runs (a block of several
 * dimensions is several runs). w is the weight as it is quantized: with
 * BatchNorm bn folded in (bn >= 0), each output channel's weights times
 * gamma / sqrt(running_var + eps), as the folded forward scales them
 * before its fake quantizer (forward.c). */
static bool lsq_init(const qat_model *m, const qat__layer *l, int bn, const qat_qtype *q, float *scales) {
    double *sum = calloc((size_t)q->nparams, sizeof *sum);
    int64_t *count = calloc((size_t)q->nparams, sizeof *count);
    if (!sum || !count) return free(sum), free(count), false;
    const qat__layer *b = bn >= 0 ? &m->layers[bn] : NULL;
    int64_t per_out = l->weight->numel / l->weight->shape[0], at = -1;
    float sf = 1.0f;
    for (int64_t s0 = 0, run; s0 < l->weight->numel; s0 += run) {
        run = qat__qtype_run_len(q, s0);
        int64_t p = qat_qtype_param_index(q, s0);
        for (int64_t j = s0; j < s0 + run; j++) {
            if (b && j / per_out != at) /* a new output channel: its factor */
                at = j / per_out, sf = b->gamma->data[at] * (1.0f / sqrtf(b->running_var[at] + b->eps));
            sum[p] += fabsf(l->weight->data[j] * sf);
        }
        count[p] += run;
    }
    for (int64_t p = 0; p < q->nparams; p++) {
        float s = count[p] ? (float)(2.0 * sum[p] / (double)count[p] / sqrt((double)q->qmax)) : 1e-8f;
        scales[p] = s > 1e-8f ? s : 1e-8f;
    }
    free(sum), free(count);
    return true;
}

/* The LSQ block laid out again in layer order, with layer `changed`
 * taking type q (its scales initialised afresh) and LSQ on or off per
 * `lsq`; the other layers keep their learned scales. All allocation comes
 * first: on failure nothing has changed. */
static qat_status relayout_lsq(qat_model *m, int changed, int bn, const qat_qtype *q, bool lsq) {
    qat_ctx *ctx = m->ctx;
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        if (i == changed) total += lsq ? q->nparams : 0;
        else if (l->wscale) total += l->wscale->numel;
    }
    float *p = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(total + 1) * sizeof(float));
    float *g = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(total + 1) * sizeof(float));
    qat_tensor **views = qat_ctx_alloc(ctx, QAT_MEM_STEP, (size_t)m->n_layers * 2 * sizeof *views);
    if (!p || !g || !views) return qat_ctx_status(ctx);
    int64_t off = 0;
    for (int i = 0; i < m->n_layers; i++) { /* new views first: they can fail */
        const qat__layer *l = &m->layers[i];
        views[2 * i] = views[2 * i + 1] = NULL;
        int64_t np = i == changed ? (lsq ? q->nparams : 0) : l->wscale ? l->wscale->numel : 0;
        if (!np) continue;
        views[2 * i] = qat_tensor_wrap(ctx, QAT_MEM_PERSIST, p + off, g + off, 1, &np);
        float *z = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)np * sizeof(float));
        views[2 * i + 1] = z ? qat_tensor_wrap(ctx, QAT_MEM_PERSIST, z, NULL, 1, &np) : NULL;
        if (!views[2 * i] || !views[2 * i + 1]) return qat_ctx_status(ctx);
        if (i == changed) {
            if (!lsq_init(m, l, bn, q, p + off)) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "prepare: out of memory");
        } else memcpy(p + off, l->wscale->data, (size_t)np * sizeof(float)), memcpy(z, l->wzero->data, (size_t)np * sizeof(float));
        off += np;
    }
    for (int i = 0; i < m->n_layers; i++) m->layers[i].wscale = views[2 * i], m->layers[i].wzero = views[2 * i + 1];
    m->qparams = p, m->qgrads = g, m->n_qparams = total;
    return QAT_OK;
}

/* Is `id` the model's output, or does its group end there? Its activation
 * quantizer then keeps io_bits: with 2-bit logits cross-entropy can only
 * lower the loss by inflating their range. */
static int act_bits(const qat_model *m, int end, const qat_prepare_config *c) {
    return end == qat__model_output(m) ? c->io_bits : c->abits;
}

/* An average pool may keep its input's quantization only unpadded: its
 * float forward (PyTorch's) counts padding in the divisor, the integer
 * rule counts only the window's positions inside the input. */
static qat_status check_keep(qat_model *m, const qat__layer *l) {
    if (!l->ph && !l->pw) return QAT_OK;
    return qat_ctx_fail(m->ctx, QAT_ERR_UNSUPPORTED, "prepare: layer %s: an average pool with padding %dx%d cannot "
                        "keep its input's quantization (pool_keeps_scale): its float forward counts the padding in "
                        "the divisor, the integer rule only the input's positions", l->name, l->ph, l->pw);
}

/* Do two configurations quantize a group's output alike (bits, symmetry,
 * observer and its parameters, gradient rule)? */
static bool same_activation(const qat_prepare_config *a, const qat_prepare_config *b) {
    return a->abits == b->abits && a->io_bits == b->io_bits && a->a_symmetric == b->a_symmetric &&
           a->aobs == b->aobs && a->window == b->window && a->k == b->k && a->ste == b->ste;
}

/* Quantizers for layer id (an anchor of a requantizing group) under
 * configuration c: its weight type (Linear/Conv), its BatchNorm folding,
 * its group's activation quantizer. Everything that can fail happens
 * before anything changes. */
static qat_status quantize_layer(qat_model *m, int id, const qat_prepare_config *c) {
    qat_ctx *ctx = m->ctx;
    qat__layer *l = &m->layers[id];
    bool product = qat__op(l->kind)->weighted;
    qat_prepare_config *cfg = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *cfg);
    qat_qtype *wq = product ? qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *wq) : NULL;
    if (!cfg || (product && !wq)) return qat_ctx_status(ctx);
    *cfg = *c;
    qat_status st = product ? weight_type(m, l, c, wq) : QAT_OK;
    if (st != QAT_OK) return st;
    qat__group old, g;
    qat__match_group(m, id, l->fold_bn >= 0, &old);
    qat__match_group(m, id, product && c->fold_bn, &g);
    /* an average pool that keeps its input's quantization has no quantizer
     * of its own (its forward finds its input's: forward.c) */
    bool keep = qat__op(l->kind)->averages && c->pool_keeps_scale;
    if (keep && (st = check_keep(m, l)) != QAT_OK) return st;
    /* the same activation configuration at the same place keeps its
     * observer: re-configuring a layer's weights leaves its range as it is */
    qat__act_quant *prev = m->layers[old.end].aq;
    bool same = !keep && prev && old.end == g.end && l->qcfg && same_activation(l->qcfg, c) &&
                prev->q.bits == act_bits(m, g.end, c);
    qat__act_quant *aq = keep ? NULL : same ? prev : new_act_quant(m, c, act_bits(m, g.end, c));
    if (!keep && !aq) return qat_ctx_status(ctx);
    bool had_lsq = l->wscale != NULL;
    if (product && (c->lsq || had_lsq) && (st = relayout_lsq(m, id, g.bn, wq, c->lsq)) != QAT_OK) return st;
    /* commit */
    if (old.bn >= 0) m->layers[old.bn].folded = false;
    m->layers[old.end].aq = NULL;
    l->qcfg = cfg;
    if (product) l->wq = wq;
    l->fold_bn = g.bn;
    if (g.bn >= 0) m->layers[g.bn].folded = true;
    m->layers[g.end].aq = aq;
    return QAT_OK;
}

/* c with layer l's own precision over it. */
static qat_prepare_config with_precision(const qat__layer *l, const qat_prepare_config *c) {
    qat_prepare_config out = *c;
    const qat_layer_precision *p = &l->prec;
    if (p->wbits) out.wbits = p->wbits;
    if (p->abits) out.abits = p->abits;
    if (p->has_granularity) {
        out.wgran = p->granularity, out.block = p->granularity == QAT_GRAN_BLOCK ? p->block : 0;
        if (p->granularity != QAT_GRAN_BLOCK) out.block_scale_bits = 0; /* compact scales are for blocks */
        memset(out.blocks, 0, sizeof out.blocks);
    }
    return out;
}

qat_status qat_model_set_layer_precision(qat_model *m, const char *layer, const qat_layer_precision *p) {
    if (!m) return QAT_ERR_ARG;
    int id = qat_model_find_layer(m, layer);
    if (id < 1) return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "precision: no layer named \"%s\"", layer ? layer : "(null)");
    if (m->prepared)
        return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "precision: layer %s: the model is prepared already "
                            "(qat_prepare_layer re-configures a prepared layer)", layer);
    qat__layer *l = &m->layers[id];
    const qat__op_kind *op = qat__op(l->kind);
    qat_layer_precision none = {0};
    if (!p) p = &none;
    if ((p->wbits && (p->wbits < 2 || p->wbits > 16)) || (p->abits && (p->abits < 2 || p->abits > 16)))
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "precision: layer %s: bits must be 2..16 (weights %d, "
                            "activations %d)", layer, p->wbits, p->abits);
    if ((p->wbits || p->has_granularity) && !op->weighted)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "precision: layer %s: a %s has no weights (wbits and granularity "
                            "belong to linear and conv2d layers)", layer, op->name);
    if (p->abits && !op->requantizes)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "precision: layer %s: a %s keeps the quantization of its input "
                            "(give abits to the layer whose group quantizes it: a linear, conv2d, add, ...)", layer,
                            op->name);
    if (p->has_granularity && p->granularity != QAT_GRAN_TENSOR && p->granularity != QAT_GRAN_CHANNEL &&
        !(p->granularity == QAT_GRAN_BLOCK && p->block >= 1 && p->block <= QAT_MAX_BLOCK))
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "precision: layer %s: granularity tensor, channel or block:N "
                            "(N in 1..%d)", layer, QAT_MAX_BLOCK);
    l->prec = *p;
    if (!p->has_granularity) l->prec.granularity = QAT_GRAN_TENSOR, l->prec.block = 0;
    return QAT_OK;
}

bool qat_model_layer_precision(const qat_model *m, const char *layer, qat_layer_precision *out) {
    int id = m ? qat_model_find_layer(m, layer) : -1;
    if (id < 1) return false;
    if (out) *out = m->layers[id].prec;
    return true;
}

qat_status qat_prepare(qat_model *m, const qat_prepare_config *cfg) {
    if (!m) return QAT_ERR_ARG;
    qat_prepare_config c = cfg ? *cfg : qat_prepare_defaults();
    if (!m->built) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare: build the model first");
    if (m->prepared) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare: model already prepared");
    qat_status st = qat__check_qat_config(m->ctx, &c);
    if (st != QAT_OK) return st;
    for (int i = 1; i < m->n_layers; i++) { /* refused before anything changes */
        const qat__layer *l = &m->layers[i];
        bool keeps = c.pool_keeps_scale && qat__op(l->kind)->averages;
        if (keeps && (st = check_keep(m, l)) != QAT_OK) return st;
        if (keeps && l->prec.abits)
            return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "prepare: layer %s: abits=%d, but this pool keeps its input's "
                                "quantization (pool_keeps_scale): it has no activation bits of its own", l->name,
                                l->prec.abits);
        qat_prepare_config lc = with_precision(l, &c);
        if (qat__requantizes(l->kind) && (st = qat__check_qat_config(m->ctx, &lc)) != QAT_OK)
            return qat_ctx_error_prefix(m->ctx, "layer %s: ", l->name), st;
    }
    m->qcfg = c;
    qat__act_quant *in = new_act_quant(m, &c, c.io_bits);
    if (!in) return qat_ctx_status(m->ctx);
    m->layers[0].aq = in;
    for (int i = 1; i < m->n_layers; i++) {
        if (!qat__requantizes(m->layers[i].kind) || m->layers[i].folded) continue;
        qat_prepare_config lc = with_precision(&m->layers[i], &c);
        if ((st = quantize_layer(m, i, &lc)) != QAT_OK) return st;
    }
    m->prepared = true;
    m->fake_quant_on = true;
    return QAT_OK;
}

qat_status qat_prepare_layer(qat_model *m, const char *name, const qat_prepare_config *cfg) {
    if (!m || !cfg) return QAT_ERR_ARG;
    if (!m->prepared) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "prepare_layer: call qat_prepare first");
    int id = qat_model_find_layer(m, name);
    if (id < 1 || !m->layers[id].qcfg)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "prepare_layer: no layer with quantizers named \"%s\" (Linear, "
                            "Conv, Add, Concat, pooling, activations)", name ? name : "(null)");
    qat_status st = qat__check_qat_config(m->ctx, cfg);
    return st != QAT_OK ? st : quantize_layer(m, id, cfg);
}

bool qat_model_prepared(const qat_model *m) { return m && m->prepared; }

const qat_prepare_config *qat_model_qat_config(const qat_model *m, const char *layer) {
    if (!m || !m->prepared) return NULL;
    if (!layer) return &m->qcfg;
    int id = qat_model_find_layer(m, layer);
    return id > 0 ? m->layers[id].qcfg : NULL;
}

void qat_model_weight_bits(const qat_model *m, int *lo, int *hi) {
    if (!lo || !hi) return;
    *lo = 0, *hi = 0;
    if (!m || !m->prepared) return;
    for (int i = 1; i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        if (!l->qcfg || (l->kind != QAT_LAYER_LINEAR && l->kind != QAT_LAYER_CONV2D)) continue;
        int b = l->qcfg->wbits;
        *lo = *lo == 0 || b < *lo ? b : *lo, *hi = b > *hi ? b : *hi;
    }
    if (*hi == 0) *lo = *hi = m->qcfg.wbits; /* no weighted layer: the run's */
}

int64_t qat_model_n_quantized_weights(const qat_model *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->n_layers; i++)
        if (m->layers[i].wq) n += m->layers[i].weight->numel;
    return n;
}

void qat_model_set_fake_quant(qat_model *m, bool on) {
    if (m) m->fake_quant_on = on;
}
void qat_model_freeze_observers(qat_model *m, bool frozen) {
    if (m) m->observers_frozen = frozen;
}
qat_status qat_model_set_batch_slice(qat_model *m, int64_t first, int64_t global) {
    if (!m) return QAT_ERR_ARG;
    if (first < 0 || global < 0 || first > global)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "qat_model_set_batch_slice: sample %lld of a global batch of %lld",
                            (long long)first, (long long)global);
    m->slice_first = first, m->slice_global = global;
    return QAT_OK;
}

void qat_model_freeze_bn(qat_model *m, bool frozen) {
    if (m) m->bn_frozen = frozen;
}
bool qat_model_fake_quant_on(const qat_model *m) { return m && m->fake_quant_on; }
bool qat_model_observers_frozen(const qat_model *m) { return m && m->observers_frozen; }
bool qat_model_bn_frozen(const qat_model *m) { return m && m->bn_frozen; }
