/* Architecture records and rebuilding a model from a training checkpoint.
 * Layout: docs/checkpoint-format.md, group "architecture". */
#include "architecture.h"

#include <hdf5_hl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "qat/io.h"

static const qat_act_quant *act_of(const qat_model *m, int i) { return m->layers[i].aq; }

void qat__arch_write(qat__h5w *w, const qat_model *m) {
    hid_t a = qat__h5w_group(w, w->file, "architecture");
    if (a < 0) return;
    qat__h5w_i64(w, a, "n_layers", m->n_layers);
    qat__h5w_i64(w, a, "prepared", m->prepared);
    if (m->prepared) { /* the global configuration qat_prepare ran with */
        const qat_prepare_config *c = &m->qcfg;
        long long v[] = {c->wbits, c->w_narrow, c->wgran, c->block, c->abits, c->a_symmetric, c->aobs,
                         c->window, c->ste, c->io_bits, c->lsq, c->fold_bn};
        qat__h5w_i64s(w, a, "qat_config", v, (int)(sizeof v / sizeof *v));
        qat__h5w_f32(w, a, "qat_config_k", c->k);
    }
    for (int i = 0; w->ok && i < m->n_layers; i++) {
        const qat_layer *l = &m->layers[i];
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        hid_t g = qat__h5w_group(w, a, name);
        if (g < 0) break;
        qat__h5w_str(w, g, "kind", qat_layer_kind_str(l->kind));
        qat__h5w_str(w, g, "name", l->name);
        long long hp[] = {l->in, l->out, l->kernel, l->stride, l->pad, l->has_bias};
        qat__h5w_i64s(w, g, "in_out_kernel_stride_pad_bias", hp, 6);
        qat__h5w_f32(w, g, "p", l->p);
        qat__h5w_f32(w, g, "momentum", l->momentum);
        qat__h5w_f32(w, g, "eps", l->eps);
        if (l->wq) { /* per-layer weight type (qat_prepare_layer may have changed it) */
            long long wt[2 + QAT_MAX_RANK] = {l->wq->bits, l->wq->qmin};
            for (int d = 0; d < l->wq->rank; d++) wt[2 + d] = l->wq->block[d];
            qat__h5w_i64s(w, g, "weight_bits_qmin_block", wt, 2 + l->wq->rank);
        }
        if (act_of(m, i)) qat__h5w_i64(w, g, "act_bits", act_of(m, i)->q.bits);
        H5Gclose(g);
    }
    H5Gclose(a);
}

/* Adds layer g (of the architecture group) to m. */
static qat_status add_layer(qat__h5r *r, hid_t g, qat_model *m) {
    char kind[32] = "", name[QAT_NAME_LEN] = "";
    long long hp[6] = {0};
    qat__h5r_str(r, g, "kind", kind, sizeof kind);
    qat__h5r_str(r, g, "name", name, sizeof name);
    /* sizes far beyond any model that fits in memory are refused here, so
     * the (int) conversions below are exact */
    qat__h5r_i64s(r, g, "in_out_kernel_stride_pad_bias", hp, 6, 0, 1 << 24);
    float p = qat__h5r_f32(r, g, "p"), mom = qat__h5r_f32(r, g, "momentum"), eps = qat__h5r_f32(r, g, "eps");
    if (qat__h5r_has_attr(g, "act_bits")) qat__h5r_i64(r, g, "act_bits", 2, 16); /* used later, checked now */
    if (!r->ok) return qat_ctx_status(r->ctx);
    int in = (int)hp[0], out = (int)hp[1], k = (int)hp[2], s = (int)hp[3], pad = (int)hp[4];
    bool bias = hp[5] != 0;
    qat_status st = QAT_ERR_FORMAT;
    if (!strcmp(kind, "linear")) st = qat_model_add_linear(m, name, in, out, bias);
    else if (!strcmp(kind, "conv2d")) st = qat_model_add_conv2d(m, name, in, out, k, s, pad, bias);
    else if (!strcmp(kind, "batchnorm")) st = qat_model_add_batchnorm(m, name, out, mom, eps);
    else if (!strcmp(kind, "relu")) st = qat_model_add_relu(m);
    else if (!strcmp(kind, "relu6")) st = qat_model_add_relu6(m);
    else if (!strcmp(kind, "maxpool2d")) st = qat_model_add_maxpool2d(m, k, s);
    else if (!strcmp(kind, "avgpool2d")) st = qat_model_add_avgpool2d(m, k, s);
    else if (!strcmp(kind, "flatten")) st = qat_model_add_flatten(m);
    else if (!strcmp(kind, "dropout")) st = qat_model_add_dropout(m, p);
    if (st == QAT_ERR_FORMAT) return qat__h5r_fail(r, st, "unknown layer kind \"%s\"", kind), st;
    if (st != QAT_OK) {
        char what[QAT_NAME_LEN + 16];
        snprintf(what, sizeof what, "layer %s: ", name);
        return qat__h5r_adopt(r, what), st;
    }
    /* the parameterless kinds take default names: keep the recorded one */
    snprintf(m->layers[m->n_layers - 1].name, QAT_NAME_LEN, "%s", name);
    return QAT_OK;
}

/* Re-applies a layer's own weight type and activation bits where they
 * differ from what the global qat_prepare gave it. */
static qat_status restore_layer_config(qat__h5r *r, hid_t arch, hid_t g, qat_model *m, int i) {
    qat_layer *l = &m->layers[i];
    if (!l->wq || !qat__h5r_has_attr(g, "weight_bits_qmin_block")) return QAT_OK;
    long long wt[2 + QAT_MAX_RANK] = {0};
    if (!qat__h5r_i64s(r, g, "weight_bits_qmin_block", wt, 2 + l->wq->rank, -32768, 1 << 24))
        return qat_ctx_status(r->ctx);
    bool same = wt[0] == l->wq->bits && wt[1] == l->wq->qmin;
    for (int d = 0; d < l->wq->rank; d++) same = same && wt[2 + d] == l->wq->block[d];
    if (same) return QAT_OK;
    qat_prepare_config c = m->qcfg;
    c.wbits = (int)wt[0];
    int32_t full_min, full_max;
    if (qat_storage_range(c.wbits, true, false, &full_min, &full_max) != QAT_OK ||
        (wt[1] != full_min && wt[1] != full_min + 1))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s: weight type %lld bits, qmin %lld is neither full nor "
                             "narrow range", l->name, wt[0], wt[1]), QAT_ERR_FORMAT;
    c.w_narrow = wt[1] != full_min;
    c.wgran = wt[2] == l->wq->shape[0] && l->wq->shape[0] > 1 ? QAT_GRAN_TENSOR
              : wt[3] < l->wq->shape[1]                     ? QAT_GRAN_BLOCK
                                                            : QAT_GRAN_CHANNEL;
    c.block = (int)wt[3];
    for (int j = i; j < m->n_layers; j++) { /* the activation point of this layer's group */
        char name[16];
        snprintf(name, sizeof name, "%d", j);
        if (!m->layers[j].aq) continue;
        hid_t lj = H5Gopen2(arch, name, H5P_DEFAULT);
        if (lj >= 0 && qat__h5r_has_attr(lj, "act_bits")) c.abits = c.io_bits = (int)qat__h5r_i64(r, lj, "act_bits", 2, 16);
        if (lj >= 0) H5Gclose(lj);
        break;
    }
    return qat_prepare_layer(m, l->name, &c);
}

/* The global QAT configuration, each entry in its own range (an enum
 * outside its values is refused, not cast). */
static bool read_qat_config(qat__h5r *r, hid_t a, long long *v) {
    static const long long lo[12] = {2, 0, QAT_GRAN_TENSOR, 0, 2, 0, QAT_OBS_MINMAX, 0, QAT_STE_CLIPPED, 2, 0, 0};
    static const long long hi[12] = {16, 1, QAT_GRAN_BLOCK, 1 << 24, 16, 1, QAT_OBS_EMA_BIAS_CORRECTED,
                                     QAT_OBS_MAX_WINDOW, QAT_STE_PLAIN, 16, 1, 1};
    static const char *const names[12] = {"wbits", "w_narrow", "granularity", "block", "abits", "a_symmetric",
                                          "observer", "window", "ste", "io_bits", "lsq", "fold_bn"};
    if (!qat__h5r_i64s(r, a, "qat_config", v, 12, LLONG_MIN, LLONG_MAX)) return false;
    for (int i = 0; i < 12; i++)
        if (v[i] < lo[i] || v[i] > hi[i])
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "qat_config: %s = %lld is outside [%lld, %lld]", names[i], v[i],
                                 lo[i], hi[i]);
    return true;
}

static qat_status rebuild(qat__h5r *r, qat_model *m) {
    hid_t a = qat__h5r_group(r, r->file, "architecture");
    if (a < 0) return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "no architecture recorded (a version 1 "
                                    "checkpoint: it can resume training but not rebuild a model)"),
                  QAT_ERR_UNSUPPORTED;
    long long n = qat__h5r_i64(r, a, "n_layers", 1, QAT_MAX_LAYERS), prepared = qat__h5r_i64(r, a, "prepared", 0, 1);
    qat_status st = r->ok ? QAT_OK : qat_ctx_status(r->ctx);
    for (int i = 0; st == QAT_OK && i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        hid_t g = qat__h5r_group(r, a, name);
        st = g < 0 ? qat_ctx_status(r->ctx) : add_layer(r, g, m);
        if (g >= 0) H5Gclose(g);
    }
    if (st == QAT_OK) st = qat_model_build(m, 1);
    if (st == QAT_OK && prepared) {
        long long v[12] = {0};
        float k = qat__h5r_f32(r, a, "qat_config_k");
        if (!read_qat_config(r, a, v)) st = qat_ctx_status(r->ctx);
        qat_prepare_config c = {.wbits = (int)v[0], .w_narrow = v[1], .wgran = (qat_granularity)v[2],
                                .block = (int)v[3], .abits = (int)v[4], .a_symmetric = v[5],
                                .aobs = (qat_observer_kind)v[6], .window = (int)v[7], .k = k,
                                .ste = (qat_ste)v[8], .io_bits = (int)v[9], .lsq = v[10], .fold_bn = v[11]};
        if (st == QAT_OK) st = qat_prepare(m, &c);
        for (int i = 0; st == QAT_OK && i < n; i++) {
            char name[16];
            snprintf(name, sizeof name, "%d", i);
            hid_t g = qat__h5r_group(r, a, name);
            st = g < 0 ? qat_ctx_status(r->ctx) : restore_layer_config(r, a, g, m, i);
            if (g >= 0) H5Gclose(g);
        }
    }
    H5Gclose(a);
    if (st != QAT_OK) qat__h5r_adopt(r, "cannot rebuild the model: ");
    return st;
}

qat_status qat_checkpoint_model(qat_ctx *ctx, const char *path, qat_model **out, char *config, size_t len) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: NULL path or output");
    qat_model *m = qat_model_new(ctx);
    if (!m) return qat_ctx_status(ctx);
    qat__h5r r = {ctx, path, -1, true};
    qat_status st = QAT_OK;
    H5E_BEGIN_TRY {
        if (qat__h5r_open(&r, QAT_CHECKPOINT_FORMAT, "qat training checkpoint", QAT_CHECKPOINT_VERSION, NULL))
            st = rebuild(&r, m);
        if (r.ok && config && len) { /* optional: a missing text is "" */
            config[0] = '\0';
            if (qat__h5r_has_attr(r.file, "config")) qat__h5r_str(&r, r.file, "config", config, len);
        }
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    if (!r.ok) return qat_ctx_status(ctx);
    if (st == QAT_OK) st = qat_checkpoint_load(m, NULL, NULL, NULL, path);
    if (st == QAT_OK) *out = m;
    return st;
}
