/* Architecture records and rebuilding a model from a training checkpoint.
 * Layout: docs/checkpoint-format.md, group "architecture".
 *
 * Version 3 records the graph: every layer (layer 0 is the input) with its
 * kind, name, input ids, hyperparameters and, once prepared, its own QAT
 * configuration. Version 2 recorded a chain without the input layer; it
 * still rebuilds (each layer reads the one before it). */
#include "architecture.h"

#include "h5norm.h"

#include <hdf5_hl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "layers/op.h"
#include "qat/io.h"

/* qat_config's entries; files written before pool_keeps_scale have the
 * first N_QCFG_OLD (it reads as off) */
#define N_QCFG 13
#define N_QCFG_OLD 12

static void qcfg_values(const qat_prepare_config *c, long long *v) {
    long long x[N_QCFG] = {c->wbits, c->w_narrow, c->wgran, c->block, c->abits, c->a_symmetric, c->aobs,
                           c->window, c->ste, c->io_bits, c->lsq, c->fold_bn, c->pool_keeps_scale};
    memcpy(v, x, sizeof x);
}

static bool same_qcfg(const qat_prepare_config *a, const qat_prepare_config *b) {
    long long x[N_QCFG], y[N_QCFG];
    qcfg_values(a, x), qcfg_values(b, y);
    return !memcmp(x, y, sizeof x) && a->k == b->k && !memcmp(a->blocks, b->blocks, sizeof a->blocks) &&
           a->ragged == b->ragged && a->block_scale_bits == b->block_scale_bits;
}

/* qat_config_blocks: the seed-form block sizes per weight dimension, then ragged */
#define N_BLOCKS (QAT_MAX_RANK + 1)

static void put_qcfg(qat__h5w *w, hid_t g, const qat_prepare_config *c) {
    long long v[N_QCFG], b[N_BLOCKS];
    qcfg_values(c, v);
    /* the old length while the new entry is off: a build that predates
     * pool_keeps_scale still reads every checkpoint that does not use it */
    qat__h5w_i64s(w, g, "qat_config", v, c->pool_keeps_scale ? N_QCFG : N_QCFG_OLD);
    qat__h5w_f32(w, g, "qat_config_k", c->k);
    for (int d = 0; d < QAT_MAX_RANK; d++) b[d] = c->blocks[d];
    b[QAT_MAX_RANK] = c->ragged;
    qat__h5w_i64s(w, g, "qat_config_blocks", b, N_BLOCKS);
    /* only when on: a build that predates compact block scales still
     * reads every checkpoint that does not use them */
    if (c->block_scale_bits) qat__h5w_i64(w, g, "qat_config_block_scales", c->block_scale_bits);
}

void qat__arch_write(qat__h5w *w, const qat_model *m) {
    hid_t a = qat__h5w_group(w, w->file, "architecture");
    if (a < 0) return;
    qat__h5w_i64(w, a, "n_layers", m->n_layers);
    qat__h5w_i64(w, a, "output", qat__model_output(m));
    qat__h5w_i64(w, a, "prepared", m->prepared);
    if (m->in_rank) {
        long long s[3] = {m->in_shape[0], m->in_shape[1], m->in_shape[2]};
        qat__h5w_i64s(w, a, "input_shape", s, m->in_rank);
    }
    if (m->prepared) put_qcfg(w, a, &m->qcfg); /* the global configuration qat_prepare ran with */
    if (m->norm) qat__h5w_norm(w, a, m->norm); /* a group of its own, only when the model has one */
    for (int i = 0; w->ok && i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        hid_t g = qat__h5w_group(w, a, name);
        if (g < 0) break;
        qat__h5w_str(w, g, "kind", qat_layer_kind_str(l->kind));
        qat__h5w_str(w, g, "name", l->name);
        long long in[QAT_CUSTOM_MAX_INPUTS];
        for (int j = 0; j < l->n_in; j++) in[j] = l->in[j];
        if (l->n_in) qat__h5w_i64s(w, g, "inputs", in, l->n_in);
        long long hp[] = {l->cin, l->cout, l->kh, l->kw, l->sh, l->sw, l->ph, l->pw, l->groups, l->has_bias};
        qat__h5w_i64s(w, g, "in_out_kh_kw_sh_sw_ph_pw_groups_bias", hp, 10);
        qat__h5w_f32(w, g, "p", l->p);
        qat__h5w_f32(w, g, "momentum", l->momentum);
        qat__h5w_f32(w, g, "eps", l->eps);
        const qat__op_kind *op = qat__op(l->kind);
        for (int k = 0; k < op->n_attrs; k++) qat__h5w_f32(w, g, op->attrs[k].key, l->attr[k]);
        if (l->custom) qat__h5w_str(w, g, "custom_op", l->custom->name);
        const qat_layer_precision *p = &l->prec;
        if (p->wbits || p->abits || p->has_granularity) { /* its own precision: -1 where none */
            long long pv[4] = {p->wbits, p->abits, p->has_granularity ? (long long)p->granularity : -1, p->block};
            qat__h5w_i64s(w, g, "precision", pv, 4);
        }
        if (l->qcfg) put_qcfg(w, g, l->qcfg);
        H5Gclose(g);
    }
    H5Gclose(a);
}

/* ---- reading ------------------------------------------------------------------------ */

/* A QAT configuration, each entry in its own range (an enum outside its
 * values is refused, not cast). */
static bool read_qcfg(qat__h5r *r, hid_t g, qat_prepare_config *c) {
    static const long long lo[N_QCFG] = {2, 0, QAT_GRAN_TENSOR, 0, 2, 0, QAT_OBS_MINMAX, 0, QAT_STE_CLIPPED, 2, 0, 0, 0};
    static const long long hi[N_QCFG] = {16, 1, QAT_GRAN_AXES, 1 << 24, 16, 1, QAT_OBS_EMA_BIAS_CORRECTED,
                                         QAT_OBS_MAX_WINDOW, QAT_STE_PLAIN, 16, 1, 1, 1};
    static const char *const names[N_QCFG] = {"wbits", "w_narrow", "granularity", "block", "abits", "a_symmetric",
                                              "observer", "window", "ste", "io_bits", "lsq", "fold_bn",
                                              "pool_keeps_scale"};
    long long v[N_QCFG] = {0}; /* an older list's missing entries: 0 */
    int n = 0;
    if (!qat__h5r_attr_count(r, g, "qat_config", H5T_INTEGER, N_QCFG, &n)) return false;
    if (n != N_QCFG && n != N_QCFG_OLD)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "qat_config: %d entries (%d, or %d before pool_keeps_scale)", n,
                             N_QCFG, N_QCFG_OLD);
    if (!qat__h5r_i64s(r, g, "qat_config", v, n, LLONG_MIN, LLONG_MAX)) return false;
    for (int i = 0; i < n; i++)
        if (v[i] < lo[i] || v[i] > hi[i])
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "qat_config: %s = %lld is outside [%lld, %lld]", names[i], v[i],
                                 lo[i], hi[i]);
    float k = qat__h5r_f32(r, g, "qat_config_k");
    *c = (qat_prepare_config){.wbits = (int)v[0], .w_narrow = v[1], .wgran = (qat_granularity)v[2], .block = (int)v[3],
                              .abits = (int)v[4], .a_symmetric = v[5], .aobs = (qat_observer_kind)v[6],
                              .window = (int)v[7], .k = k, .ste = (qat_ste)v[8], .io_bits = (int)v[9], .lsq = v[10],
                              .fold_bn = v[11], .pool_keeps_scale = v[12]};
    if (qat__h5r_has_attr(g, "qat_config_blocks")) {
        long long b[N_BLOCKS];
        if (!qat__h5r_i64s(r, g, "qat_config_blocks", b, N_BLOCKS, 0, QAT_MAX_BLOCK)) return false;
        for (int d = 0; d < QAT_MAX_RANK; d++) c->blocks[d] = b[d];
        if (b[QAT_MAX_RANK] > 1) return qat__h5r_fail(r, QAT_ERR_FORMAT, "qat_config_blocks: ragged is %lld", b[QAT_MAX_RANK]);
        c->ragged = b[QAT_MAX_RANK];
    } else if (c->wgran == QAT_GRAN_BLOCK) {
        /* written before qat_config_blocks: blocks of `block` along dimension 1
         * of the weight itself (a Conv's input channels), dividing it */
        c->wgran = QAT_GRAN_AXES, c->blocks[0] = 1, c->blocks[1] = c->block;
    }
    if (qat__h5r_has_attr(g, "qat_config_block_scales")) { /* absent: a float scale per block */
        long long bs;
        if (!qat__h5r_i64s(r, g, "qat_config_block_scales", &bs, 1, 4, 8)) return false;
        c->block_scale_bits = (int)bs;
    }
    return r->ok;
}

/* Adds layer i (group g of the architecture) to m. version 2: a chain,
 * with the old six hyperparameters (square windows). */
static qat_status add_layer(qat__h5r *r, hid_t g, qat_model *m, int i, int version) {
    char kind_s[32] = "", name[QAT_NAME_LEN] = "";
    long long hp[10] = {0};
    qat__h5r_str(r, g, "kind", kind_s, sizeof kind_s);
    qat__h5r_str(r, g, "name", name, sizeof name);
    char why[256];
    if (r->ok && !qat_name_valid(name, why, sizeof why))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %d: bad name: %s", i, why), QAT_ERR_FORMAT;
    int in[QAT_CUSTOM_MAX_INPUTS] = {i - 1}, n = 1;
    /* sizes far beyond any model that fits in memory are refused here, so
     * the (int) conversions are exact */
    if (version == 2) {
        long long old[6] = {0}; /* in, out, kernel, stride, pad, bias */
        qat__h5r_i64s(r, g, "in_out_kernel_stride_pad_bias", old, 6, 0, 1 << 24);
        long long v[10] = {old[0], old[1], old[2], old[2], old[3], old[3], old[4], old[4], 1, old[5]};
        memcpy(hp, v, sizeof hp);
    } else {
        long long ids[QAT_CUSTOM_MAX_INPUTS];
        if (qat__h5r_attr_count(r, g, "inputs", H5T_INTEGER, QAT_CUSTOM_MAX_INPUTS, &n) &&
            qat__h5r_i64s(r, g, "inputs", ids, n, 0, i - 1))
            for (int j = 0; j < n; j++) in[j] = (int)ids[j];
        qat__h5r_i64s(r, g, "in_out_kh_kw_sh_sw_ph_pw_groups_bias", hp, 10, 0, 1 << 24);
    }
    qat__hparams h = {.p = qat__h5r_f32(r, g, "p"), .momentum = qat__h5r_f32(r, g, "momentum"),
                      .eps = qat__h5r_f32(r, g, "eps")};
    memcpy(h.hp, hp, sizeof hp);
    if (!r->ok) return qat_ctx_status(r->ctx);
    qat_layer_kind kind = qat_layer_kind_from_str(kind_s);
    const qat__op_kind *op = qat__op(kind);
    if (op && op->rebuild_refusal)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "layer %s %s", name, op->rebuild_refusal), QAT_ERR_UNSUPPORTED;
    if (n < 1) return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s has no input", name), QAT_ERR_FORMAT;
    int id = -2;
    if (op && n >= op->min_inputs && n <= op->max_inputs) {
        h.kind = kind;
        for (int k = 0; k < op->n_attrs; k++) { /* the kind's own attributes, each in its range */
            const qat__attr *at = &op->attrs[k];
            h.attr[k] = qat__h5r_f32(r, g, at->key);
            if (r->ok && !(h.attr[k] >= at->lo && h.attr[k] <= at->hi))
                return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s: %s = %g is outside [%g, %g]", name, at->key,
                                     (double)h.attr[k], (double)at->lo, (double)at->hi), QAT_ERR_FORMAT;
        }
        if (!r->ok) return qat_ctx_status(r->ctx);
        id = op->rebuild ? op->rebuild(m, name, n, in, &h) : qat__add_layer(m, kind, name, n, in, h.attr);
    }
    if (id == -2) return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s: unknown kind \"%s\" (or wrong inputs)", name,
                                   qat_name_valid(kind_s, NULL, 0) ? kind_s : "?"), QAT_ERR_FORMAT;
    if (id < 0) {
        char what[QAT_NAME_LEN + 16];
        snprintf(what, sizeof what, "layer %s: ", name);
        return qat__h5r_adopt(r, what), qat_ctx_status(r->ctx);
    }
    if (version > 2 && qat__h5r_has_attr(g, "precision")) { /* its own precision, checked by the setter */
        long long pv[4];
        if (!qat__h5r_i64s(r, g, "precision", pv, 4, -1, QAT_MAX_BLOCK)) return qat_ctx_status(r->ctx);
        qat_layer_precision p = {.wbits = (int)pv[0], .abits = (int)pv[1], .has_granularity = pv[2] >= 0,
                                 .granularity = pv[2] >= 0 ? (qat_granularity)pv[2] : QAT_GRAN_TENSOR, .block = (int)pv[3]};
        if (pv[0] < 0 || pv[1] < 0 || pv[3] < 0 || pv[2] > QAT_GRAN_BLOCK ||
            qat_model_set_layer_precision(m, name, &p) != QAT_OK) {
            qat_ctx_clear_error(m->ctx);
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s: precision [%lld, %lld, %lld, %lld] is not one a "
                                 "model can have", name, pv[0], pv[1], pv[2], pv[3]), QAT_ERR_FORMAT;
        }
    }
    return QAT_OK;
}

/* Version 2's per-layer override: a weight type (bits, qmin, blocks)
 * different from the global one, and its group's activation bits. */
static qat_status restore_v2_layer(qat__h5r *r, hid_t arch, hid_t g, qat_model *m, int id) {
    qat__layer *l = &m->layers[id];
    if (!l->wq || !qat__h5r_has_attr(g, "weight_bits_qmin_block")) return QAT_OK;
    long long wt[2 + QAT_MAX_RANK] = {0};
    if (!qat__h5r_i64s(r, g, "weight_bits_qmin_block", wt, 2 + l->wq->rank, -32768, 1 << 24)) return qat_ctx_status(r->ctx);
    bool same = wt[0] == l->wq->bits && wt[1] == l->wq->qmin;
    for (int d = 0; d < l->wq->rank; d++) same = same && wt[2 + d] == l->wq->block[d];
    if (same) return QAT_OK;
    qat_prepare_config c = m->qcfg;
    c.wbits = (int)wt[0];
    int32_t full_min, full_max;
    if (qat_storage_range(c.wbits, true, false, &full_min, &full_max) != QAT_OK || (wt[1] != full_min && wt[1] != full_min + 1))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "layer %s: weight type %lld bits, qmin %lld is neither full nor "
                             "narrow range", l->name, wt[0], wt[1]), QAT_ERR_FORMAT;
    c.w_narrow = wt[1] != full_min;
    /* version 2 blocked dimensions 0 and 1 of the weight itself */
    c.wgran = wt[2] == l->wq->shape[0] && l->wq->shape[0] > 1 ? QAT_GRAN_TENSOR
              : wt[3] < l->wq->shape[1]                     ? QAT_GRAN_AXES
                                                            : QAT_GRAN_CHANNEL;
    memset(c.blocks, 0, sizeof c.blocks);
    c.blocks[0] = 1, c.blocks[1] = wt[3];
    for (int j = id; j < m->n_layers; j++) { /* the activation point of this layer's group */
        if (!m->layers[j].aq) continue;
        char name[16];
        snprintf(name, sizeof name, "%d", j - 1); /* version 2 numbered layers without the input */
        hid_t lj = H5Gopen2(arch, name, H5P_DEFAULT);
        if (lj >= 0 && qat__h5r_has_attr(lj, "act_bits")) c.abits = c.io_bits = (int)qat__h5r_i64(r, lj, "act_bits", 2, 16);
        if (lj >= 0) H5Gclose(lj);
        break;
    }
    return qat_prepare_layer(m, l->name, &c);
}

/* Each layer's own configuration where it differs from the global one. */
static qat_status restore_configs(qat__h5r *r, hid_t a, qat_model *m, int version) {
    for (int i = 1; i < m->n_layers; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", version == 2 ? i - 1 : i);
        hid_t g = qat__h5r_group(r, a, name);
        if (g < 0) return qat_ctx_status(r->ctx);
        qat_status st = QAT_OK;
        if (version == 2) {
            st = restore_v2_layer(r, a, g, m, i);
        } else if (qat__h5r_has_attr(g, "qat_config")) {
            qat_prepare_config c;
            if (!read_qcfg(r, g, &c)) st = qat_ctx_status(r->ctx);
            else if (!same_qcfg(&c, m->layers[i].qcfg ? m->layers[i].qcfg : &m->qcfg))
                st = qat_prepare_layer(m, m->layers[i].name, &c);
        }
        H5Gclose(g);
        if (st != QAT_OK) return st;
    }
    return QAT_OK;
}

static qat_status rebuild(qat__h5r *r, qat_model *m, int version) {
    hid_t a = qat__h5r_group(r, r->file, "architecture");
    if (a < 0)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "no architecture recorded (a version 1 checkpoint: it can "
                             "resume training but not rebuild a model)"), QAT_ERR_UNSUPPORTED;
    long long n = qat__h5r_i64(r, a, "n_layers", 1, 1 << 16), prepared = qat__h5r_i64(r, a, "prepared", 0, 1);
    int first = version == 2 ? 0 : 1, count = version == 2 ? (int)n + 1 : (int)n;
    if (version > 2 && qat__h5r_has_attr(a, "input_shape")) {
        int rank = 0;
        long long s[3];
        if (qat__h5r_attr_count(r, a, "input_shape", H5T_INTEGER, 3, &rank) && qat__h5r_i64s(r, a, "input_shape", s, rank, 1, 1 << 24)) {
            int64_t shape[3] = {s[0], rank > 1 ? s[1] : 0, rank > 2 ? s[2] : 0};
            if (qat_model_set_input_shape(m, rank, shape) != QAT_OK) qat__h5r_adopt(r, "");
        }
    }
    qat_status st = r->ok ? QAT_OK : qat_ctx_status(r->ctx);
    for (int i = 1; st == QAT_OK && i < count; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i - 1 + first);
        hid_t g = qat__h5r_group(r, a, name);
        st = g < 0 ? qat_ctx_status(r->ctx) : add_layer(r, g, m, i, version);
        if (g >= 0) H5Gclose(g);
    }
    if (st == QAT_OK && version > 2) {
        long long out = qat__h5r_i64(r, a, "output", 1, count - 1);
        st = r->ok ? qat_model_set_output(m, (int)out) : qat_ctx_status(r->ctx);
    }
    if (st == QAT_OK) st = qat_model_build(m, 1);
    if (st == QAT_OK && prepared) {
        qat_prepare_config c;
        st = read_qcfg(r, a, &c) ? qat_prepare(m, &c) : qat_ctx_status(r->ctx);
        if (st == QAT_OK) st = restore_configs(r, a, m, version);
    }
    H5Gclose(a);
    if (st != QAT_OK) qat__h5r_adopt(r, "cannot rebuild the model: ");
    return st;
}

bool qat__arch_read_norm(qat__h5r *r, const qat_model *m, qat_normalization *out) {
    memset(out, 0, sizeof *out);
    if (!r->ok || H5Lexists(r->file, "architecture", H5P_DEFAULT) <= 0) return r->ok; /* version 1: none */
    hid_t a = qat__h5r_group(r, r->file, "architecture");
    if (a < 0) return false;
    bool ok = H5Lexists(a, "normalization", H5P_DEFAULT) <= 0 ||
              qat__h5r_norm(r, a, "architecture/normalization", m->in_rank, m->in_shape, out);
    H5Gclose(a);
    return ok;
}

qat_status qat_checkpoint_model(qat_ctx *ctx, const char *path, qat_model **out, char *config, size_t len) {
    return qat_checkpoint_model_limits(ctx, path, NULL, out, config, len);
}

qat_status qat_checkpoint_model_limits(qat_ctx *ctx, const char *path, const qat_model_limits *limits, qat_model **out,
                                       char *config, size_t len) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: NULL path or output");
    qat_model *m = qat_model_new(ctx);
    if (!m) return qat_ctx_status(ctx);
    if (limits && qat_model_set_limits(m, limits) != QAT_OK) return qat_ctx_status(ctx);
    qat__h5r r = {ctx, path, -1, true};
    qat_status st = QAT_OK;
    long long version = 0;
    H5E_BEGIN_TRY {
        if (qat__h5r_open(&r, QAT_CHECKPOINT_FORMAT, "qat training checkpoint", QAT_CHECKPOINT_VERSION, &version))
            st = rebuild(&r, m, (int)version);
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
