/* The quantized model file in HDF5: writing (version 4, or 5 for a program
 * that rounds its requantization once). Layout:
 * docs/quantized-model-format.md; the reader is qmodel_read.c. The
 * program is checked by qat_qmodel_check before it is written, the same
 * check the reader ends with, so a file qat writes is a file qat loads. */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "io/h5norm.h"
#include "io/h5util.h"

#define MAX_DIM QAT_QMODEL_MAX_DIM

/* "i8", "u4": the storage type's name in MLIR spelling. */
static void storage_name(int bits, bool is_signed, char *buf, size_t len) {
    snprintf(buf, len, "%c%d", is_signed ? 'i' : 'u', bits);
}

/* A per-tensor qtype view of activation parameters (for the MLIR spelling). */
static qat_qtype aparams_qtype(const qat_aparams *a, float *scale, int32_t *zp) {
    *scale = a->scale, *zp = a->zero_point;
    return (qat_qtype){.bits = a->bits, .is_signed = a->is_signed, .qmin = a->qmin, .qmax = a->qmax,
                       .rank = 0, .nparams = 1, .scale = scale, .zero_point = zp};
}

qat_status qat_qmodel_validate(qat_ctx *ctx, const qat_qmodel *q) {
    if (!ctx) return QAT_ERR_ARG;
    char msg[400];
    qat_status st = qat_qmodel_check(q, msg, sizeof msg);
    return st == QAT_OK ? QAT_OK : qat_ctx_fail(ctx, st, "%s", msg);
}

/* ---- writing (versions 4 and 5) --------------------------------------------------------- */

static void put_aparams(qat__h5w *w, hid_t g, const char *prefix, const qat_aparams *a) {
    char name[64], text[256];
    float s;
    int32_t z;
    qat_qtype q = aparams_qtype(a, &s, &z);
#define NAME(x) (snprintf(name, sizeof name, "%s%s", prefix, x), name)
    qat__h5w_f32(w, g, NAME("scale"), a->scale);
    qat__h5w_i64(w, g, NAME("zero_point"), a->zero_point);
    qat__h5w_i64(w, g, NAME("bits"), a->bits);
    qat__h5w_i64(w, g, NAME("qmin"), a->qmin);
    qat__h5w_i64(w, g, NAME("qmax"), a->qmax);
    storage_name(a->bits, a->is_signed, text, sizeof text);
    qat__h5w_str(w, g, NAME("storage_type"), text);
    qat_qtype_to_mlir(&q, text, sizeof text);
    qat__h5w_str(w, g, NAME("mlir"), text);
#undef NAME
}

static void put_shape(qat__h5w *w, hid_t g, const char *name, int rank, const int64_t *shape) {
    long long v[QAT_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++) v[d] = shape[d];
    qat__h5w_i64s(w, g, name, v, rank);
}

/* A string of any length as a scalar dataset: an attribute would cap it
 * at 64 KiB, and a sub-channel type's spelling grows with its blocks. */
static void put_text(qat__h5w *w, hid_t g, const char *name, const char *text) {
    if (!w->ok) return;
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    hid_t set = t >= 0 && sp >= 0 && H5Tset_size(t, strlen(text) + 1) >= 0
                    ? H5Dcreate2(g, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                    : -1;
    if (set < 0 || H5Dwrite(set, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text) < 0) qat__h5w_fail(w, name);
    if (set >= 0) H5Dclose(set);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
}

/* Weights of at most 4 bits go into the file packed: b = 4 (3- and 4-bit
 * weights) or 2 bits per weight, 8/b to a byte, element i (row-major over
 * the weight's own shape) at bits (i mod 8/b)·b and up of byte i / (8/b):
 * low bits first, two's complement for signed storage, the last byte's
 * unused bits 0. 0 for weights stored one integer each. */

static void pack_weights(const int32_t *v, int64_t n, int pb, uint8_t *out) {
    int per = 8 / pb;
    memset(out, 0, (size_t)((n + per - 1) / per));
    for (int64_t i = 0; i < n; i++) out[i / per] |= (uint8_t)(((uint32_t)v[i] & ((1u << pb) - 1)) << (i % per * pb));
}

/* The inverse; false if an unused bit of the last byte is set. */

/* Compact block scales (docs/quantized-model-format.md): weight_row_scale,
 * float32 [pshape[0]], and weight_subscale, uint8 bytes: two 4-bit
 * sub-scales to a byte (low first) when they have 4 bits, else one a byte,
 * in the flat order of the type's parameters; its attribute bits. */
static void put_compact(qat__h5w *w, hid_t g, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    int64_t n = q->nparams, pb = op->sub_bits <= 4 ? 4 : 8, bytes = (n * pb + 7) / 8;
    qat__h5w_floats(w, g, "weight_row_scale", 1, &q->pshape[0], op->row_scale);
    uint8_t *packed = qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)bytes);
    if (!packed) {
        qat__h5w_fail(w, "the sub-scales");
        return;
    }
    pack_weights(op->subscale, n, (int)pb, packed);
    qat__h5w_u8s(w, g, "weight_subscale", packed, bytes, false);
    hid_t set = w->ok ? H5Dopen2(g, "weight_subscale", H5P_DEFAULT) : -1;
    if (set < 0) {
        qat__h5w_fail(w, "weight_subscale");
        return;
    }
    qat__h5w_i64(w, set, "bits", op->sub_bits);
    H5Dclose(set);
}

static void put_weight(qat__h5w *w, hid_t g, const qat_qmodel *qm, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    int64_t ws[QAT_MAX_RANK], n = 1;
    int wrank = qat_qop_weight_shape(qm, op, ws), pb = qat__packed_bits(q->bits);
    for (int d = 0; d < wrank; d++) n *= ws[d];
    if (pb) {
        int64_t bytes = (n * pb + 7) / 8;
        uint8_t *packed = qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)bytes);
        if (!packed) {
            qat__h5w_fail(w, "the packed weights");
            return;
        }
        pack_weights(op->weight, n, pb, packed);
        qat__h5w_u8s(w, g, "weight", packed, bytes, false);
    } else {
        hid_t type = q->bits <= 8 ? (q->is_signed ? H5T_STD_I8LE : H5T_STD_U8LE) : (q->is_signed ? H5T_STD_I16LE : H5T_STD_U16LE);
        qat__h5w_ints(w, g, "weight", type, wrank, ws, op->weight);
    }
    hid_t set = w->ok ? H5Dopen2(g, "weight", H5P_DEFAULT) : -1;
    if (set < 0) {
        qat__h5w_fail(w, "weight");
        return;
    }
    char text[64];
    long long block[QAT_MAX_RANK], tshape[QAT_MAX_RANK], wshape[QAT_MAX_RANK];
    for (int d = 0; d < q->rank; d++) block[d] = q->block[d], tshape[d] = q->shape[d];
    for (int d = 0; d < wrank; d++) wshape[d] = ws[d];
    int axis = qat_qtype_axis(q);
    qat__h5w_i64s(w, set, "shape", wshape, wrank);
    if (pb) qat__h5w_i64(w, set, "packed_bits", pb);
    qat__h5w_i64(w, set, "bits", q->bits);
    qat__h5w_i64(w, set, "qmin", q->qmin);
    qat__h5w_i64(w, set, "qmax", q->qmax);
    storage_name(q->bits, q->is_signed, text, sizeof text);
    qat__h5w_str(w, set, "storage_type", text);
    qat__h5w_str(w, set, "expressed_type", "f32");
    qat__h5w_str(w, set, "granularity", axis == -1 ? "per-tensor" : axis >= 0 ? "per-axis" : "sub-channel");
    if (axis >= 0) qat__h5w_i64(w, set, "quantized_dimension", axis);
    qat__h5w_i64s(w, set, "quantized_shape", tshape, q->rank);
    qat__h5w_i64s(w, set, "block_sizes", block, q->rank);
    H5Dclose(set);
    int64_t O = q->shape[0];
    if (op->subscale) { /* compact block scales: row scales and sub-scales; the rest is derived */
        put_compact(w, g, op);
        qat__h5w_ints(w, g, "bias", H5T_STD_I32LE, 1, &O, op->bias);
        return;
    }
    int need = qat_qtype_to_mlir(q, NULL, 0);
    char *mlir = need > 0 ? qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)need + 1) : NULL;
    if (!mlir) qat__h5w_fail(w, "the weight's MLIR type");
    else qat_qtype_to_mlir(q, mlir, (size_t)need + 1), qat__h5w_u8s(w, g, "weight_mlir", (const uint8_t *)mlir, need, true);
    qat__h5w_floats_z(w, g, "weight_scale", q->rank, q->pshape, q->scale);
    qat__h5w_ints_z(w, g, "weight_zero_point", H5T_STD_I32LE, q->rank, q->pshape, q->zero_point);
    qat__h5w_ints(w, g, "bias", H5T_STD_I32LE, 1, &O, op->bias);
    qat__h5w_floats(w, g, "bias_scale", 1, &O, op->bias_scale);
}

static void put_window(qat__h5w *w, hid_t g, const qat_qop *op) {
    long long k[2] = {op->kh, op->kw}, s[2] = {op->stride_h, op->stride_w}, p[2] = {op->pad_h, op->pad_w};
    qat__h5w_i64s(w, g, "kernel", k, 2);
    qat__h5w_i64s(w, g, "stride", s, 2);
    qat__h5w_i64s(w, g, "padding", p, 2);
}

static void put_op(qat__h5w *w, hid_t g, const qat_qmodel *q, const qat_qop *op) {
    qat__h5w_str(w, g, "kind", qat_qop_kind_str(op->kind));
    qat__h5w_str(w, g, "name", op->name);
    long long in[QAT_QOP_MAX_INPUTS];
    for (int j = 0; j < op->n_inputs; j++) in[j] = op->inputs[j];
    qat__h5w_i64s(w, g, "inputs", in, op->n_inputs);
    qat__h5w_i64(w, g, "output", op->output);
    qat__h5w_i64(w, g, "act_min", op->act_min);
    qat__h5w_i64(w, g, "act_max", op->act_max);
    switch (op->kind) {
    case QAT_QOP_CONV2D:
        put_window(w, g, op);
        qat__h5w_i64(w, g, "groups", op->groups);
        /* fall through */
    case QAT_QOP_LINEAR:
        qat__h5w_str(w, g, "activation", qat_act_kind_str(op->act));
        put_weight(w, g, q, op);
        break;
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D:
        put_window(w, g, op);
        if (op->kind == QAT_QOP_AVGPOOL2D && op->keeps_scale) qat__h5w_str(w, g, "rounding", "divide");
        break;
    case QAT_QOP_ADD:
        qat__h5w_i64(w, g, "left_shift", op->left_shift);
        qat__h5w_str(w, g, "activation", qat_act_kind_str(op->act));
        break;
    case QAT_QOP_LUT: {
        qat__h5w_str(w, g, "function", qat_lut_fn_str(op->lut));
        int64_t n = op->table_len;
        qat__h5w_ints(w, g, "table", H5T_STD_I32LE, 1, &n, op->table);
        break;
    }
    case QAT_QOP_GLOBAL_AVGPOOL:
        /* written only for the dividing rule: the files of the multiplier
         * rule stay what they were (the attribute's absence says it) */
        if (op->keeps_scale) qat__h5w_str(w, g, "rounding", "divide");
        break;
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_CONCAT:
    case QAT_QOP_MUL:
    case QAT_QOP_KIND_COUNT: break; /* their multipliers (if any) below */
    }
    if (op->multiplier && !op->subscale) { /* compact block scales: derived by the reader */
        int64_t n = op->n_mult;
        qat__h5w_ints(w, g, "multiplier", H5T_STD_I32LE, 1, &n, op->multiplier);
        qat__h5w_ints(w, g, "shift", H5T_STD_I32LE, 1, &n, op->shift);
    }
}

static void write_qmodel(qat__h5w *w, void *user) {
    const qat_qmodel *q = user;
    hid_t f = w->file;
    qat__h5w_str(w, f, "format", QAT_QMODEL_FORMAT);
    int version = qat_qmodel_file_version(q);
    qat__h5w_i64(w, f, "version", version);
    qat__h5w_str(w, f, "producer", q->producer);
    if (version >= 5) qat__h5w_str(w, f, "requant_rounding", qat_rounding_str(q->rounding));
    put_text(w, f, "training_config", q->config && q->config[0] ? q->config : "{}");
    qat__h5w_i64(w, f, "n_tensors", q->n_tensors);
    qat__h5w_i64(w, f, "n_ops", q->n_ops);
    qat__h5w_i64(w, f, "input", q->input);
    qat__h5w_i64(w, f, "output", q->output);
    hid_t ts = qat__h5w_group(w, f, "tensors");
    for (int t = 0; ts >= 0 && w->ok && t < q->n_tensors; t++) {
        char name[16];
        snprintf(name, sizeof name, "%d", t);
        hid_t g = qat__h5w_group(w, ts, name);
        if (g < 0) break;
        qat__h5w_str(w, g, "name", q->tensors[t].name);
        put_shape(w, g, "shape", q->tensors[t].rank, q->tensors[t].shape);
        put_aparams(w, g, "", &q->tensors[t].q);
        H5Gclose(g);
    }
    if (ts >= 0) H5Gclose(ts);
    hid_t ops = qat__h5w_group(w, f, "ops");
    for (int i = 0; ops >= 0 && w->ok && i < q->n_ops; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        hid_t g = qat__h5w_group(w, ops, name);
        if (g < 0) break;
        put_op(w, g, q, &q->ops[i]);
        H5Gclose(g);
    }
    if (ops >= 0) H5Gclose(ops);
    if (q->norm) qat__h5w_norm(w, f, q->norm); /* version 4: a group of its own, only with one */
}

/* A compact op's bias scales and multipliers are the derived ones. */
static bool compact_derivable(const qat_qmodel *q, const qat_qop *op) {
    int64_t O = op->wq.shape[0];
    float *bs = malloc((size_t)O * sizeof *bs);
    int32_t *m = malloc((size_t)O * 2 * sizeof *m);
    bool same = bs && m && op->n_mult == O &&
                qat__sc_compact_derive(op, q->tensors[op->inputs[0]].q.scale, q->tensors[op->output].q.scale, bs, m,
                                       m + O) &&
                !memcmp(bs, op->bias_scale, (size_t)O * sizeof *bs) && !memcmp(m, op->multiplier, (size_t)O * sizeof *m) &&
                !memcmp(m + O, op->shift, (size_t)O * sizeof *m);
    free(bs), free(m);
    return same;
}

/* The file does not store block multipliers: the reader derives them
 * from the scales (qat__sc_derive). A program whose block multipliers are
 * not the derived ones would load as another program: refused. */
static qat_status check_derivable(qat_ctx *ctx, const qat_qmodel *q) {
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (!qat_qop_subchannel(op)) continue;
        if (op->subscale) {
            if (!compact_derivable(q, op))
                return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "export: op %d (%s %s): its bias scales or multipliers are not "
                                    "the ones the file's rule derives from its row scales (docs/subchannel.md), so the "
                                    "file could not hold them", i, qat_qop_kind_str(op->kind), op->name);
            continue;
        }
        int64_t np = op->wq.nparams;
        int32_t *m = malloc((size_t)np * 2 * sizeof *m);
        if (!m) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "export: out of memory");
        qat_qop d = *op;
        d.block_multiplier = m, d.block_shift = m + np;
        qat__sc_derive(&d, q->tensors[op->inputs[0]].q.scale, 0, op->wq.shape[0]);
        bool same = !memcmp(m, op->block_multiplier, (size_t)np * sizeof *m) &&
                    !memcmp(m + np, op->block_shift, (size_t)np * sizeof *m);
        free(m);
        if (!same)
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "export: op %d (%s %s): its block multipliers are not the ones "
                                "the file's rule derives from its scales (docs/subchannel.md), so the file could not "
                                "hold them", i, qat_qop_kind_str(op->kind), op->name);
    }
    return QAT_OK;
}

qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    return qat_qmodel_stage(ctx, q, path, NULL);
}

qat_status qat_qmodel_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || !path || q->n_ops < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "export: need a lowered model and a path");
    /* the loader's own check: never write a file qat would then refuse */
    char msg[400];
    if (qat_qmodel_check(q, msg, sizeof msg) != QAT_OK)
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "export: the model would not load back: %s", msg);
    qat_status st = check_derivable(ctx, q);
    return st == QAT_OK ? qat__h5_stage(ctx, path, write_qmodel, (void *)q, set) : st;
}

