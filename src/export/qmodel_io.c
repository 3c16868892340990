/* The quantized model file in HDF5: writing (version 4) and checked
 * reading (versions 1 to 4). Layout: docs/quantized-model-format.md.
 *
 * The reader bounds what the file says (types, element counts, ranks, the
 * integer ranges that size arrays) as it reads; the whole program is then
 * checked by qat_qmodel_check — the same check export runs before it
 * writes, so a file qat writes is a file qat loads. */
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

/* ---- writing (version 4) ------------------------------------------------------------ */

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
static int packed_bits(int bits) { return bits <= 2 ? 2 : bits <= 4 ? 4 : 0; }

static void pack_weights(const int32_t *v, int64_t n, int pb, uint8_t *out) {
    int per = 8 / pb;
    memset(out, 0, (size_t)((n + per - 1) / per));
    for (int64_t i = 0; i < n; i++) out[i / per] |= (uint8_t)(((uint32_t)v[i] & ((1u << pb) - 1)) << (i % per * pb));
}

/* The inverse; false if an unused bit of the last byte is set. */
static bool unpack_weights(const uint8_t *in, int64_t n, int pb, bool is_signed, int32_t *v) {
    int per = 8 / pb;
    for (int64_t i = 0; i < n; i++) {
        int32_t x = (in[i / per] >> (i % per * pb)) & ((1 << pb) - 1);
        v[i] = is_signed && x >= 1 << (pb - 1) ? x - (1 << pb) : x;
    }
    return n % per == 0 || (in[n / per] >> (n % per * pb)) == 0;
}

static void put_weight(qat__h5w *w, hid_t g, const qat_qmodel *qm, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    int64_t ws[QAT_MAX_RANK], n = 1;
    int wrank = qat_qop_weight_shape(qm, op, ws), pb = packed_bits(q->bits);
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
    int need = qat_qtype_to_mlir(q, NULL, 0);
    char *mlir = need > 0 ? qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)need + 1) : NULL;
    if (!mlir) qat__h5w_fail(w, "the weight's MLIR type");
    else qat_qtype_to_mlir(q, mlir, (size_t)need + 1), qat__h5w_u8s(w, g, "weight_mlir", (const uint8_t *)mlir, need, true);
    qat__h5w_floats_z(w, g, "weight_scale", q->rank, q->pshape, q->scale);
    qat__h5w_ints_z(w, g, "weight_zero_point", H5T_STD_I32LE, q->rank, q->pshape, q->zero_point);
    int64_t O = q->shape[0];
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
    case QAT_QOP_AVGPOOL2D: put_window(w, g, op); break;
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
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_CONCAT:
    case QAT_QOP_GLOBAL_AVGPOOL:
    case QAT_QOP_MUL:
    case QAT_QOP_KIND_COUNT: break; /* their multipliers (if any) below */
    }
    if (op->multiplier) {
        int64_t n = op->n_mult;
        qat__h5w_ints(w, g, "multiplier", H5T_STD_I32LE, 1, &n, op->multiplier);
        qat__h5w_ints(w, g, "shift", H5T_STD_I32LE, 1, &n, op->shift);
    }
}

static void write_qmodel(qat__h5w *w, void *user) {
    const qat_qmodel *q = user;
    hid_t f = w->file;
    qat__h5w_str(w, f, "format", QAT_QMODEL_FORMAT);
    qat__h5w_i64(w, f, "version", QAT_QMODEL_VERSION);
    qat__h5w_str(w, f, "producer", q->producer);
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

/* The file does not store block multipliers: the reader derives them
 * from the scales (qat__sc_derive). A program whose block multipliers are
 * not the derived ones would load as another program: refused. */
static qat_status check_derivable(qat_ctx *ctx, const qat_qmodel *q) {
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (!qat_qop_subchannel(op)) continue;
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

/* ---- reading -------------------------------------------------------------------------- */

static bool get_shape(qat__h5r *r, hid_t g, const char *name, int *rank, int64_t *shape) {
    int n = 0;
    if (!qat__h5r_attr_count(r, g, name, H5T_INTEGER, 3, &n)) return false;
    if (n != 1 && n != 3) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s must have 1 or 3 dimensions", name);
    long long v[3];
    if (!qat__h5r_i64s(r, g, name, v, n, 1, MAX_DIM)) return false;
    memset(shape, 0, 3 * sizeof *shape);
    for (int d = 0; d < n; d++) shape[d] = v[d];
    *rank = n;
    return true;
}

/* Reads an activation's parameters; qat_qmodel_check checks their values. */
static bool get_aparams(qat__h5r *r, hid_t g, const char *prefix, const char *where, qat_aparams *a) {
    char name[64], st[16] = "";
#define NAME(x) (snprintf(name, sizeof name, "%s%s", prefix, x), name)
    a->scale = qat__h5r_f32(r, g, NAME("scale"));
    a->zero_point = (int32_t)qat__h5r_i64(r, g, NAME("zero_point"), INT32_MIN, INT32_MAX);
    a->bits = (int)qat__h5r_i64(r, g, NAME("bits"), 2, 16);
    a->qmin = (int32_t)qat__h5r_i64(r, g, NAME("qmin"), INT32_MIN, INT32_MAX);
    a->qmax = (int32_t)qat__h5r_i64(r, g, NAME("qmax"), INT32_MIN, INT32_MAX);
    if (!qat__h5r_str(r, g, NAME("storage_type"), st, sizeof st)) return false;
#undef NAME
    if (st[0] != 'i' && st[0] != 'u')
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: storage type \"%s\" is neither iN nor uN", where, st);
    a->is_signed = st[0] == 'i';
    return true;
}

static void *alloc(qat__h5r *r, int64_t n, size_t size) {
    void *p = r->ok ? qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, n > 0 ? (size_t)n * size : 1) : NULL;
    if (r->ok && !p) r->ok = false;
    return p;
}

/* A 1-d int32 dataset of exactly n elements into a new array. */
static int32_t *get_ints(qat__h5r *r, hid_t g, const char *name, int64_t n) {
    int32_t *v = alloc(r, n, sizeof *v);
    return v && qat__h5r_ints(r, g, name, 1, &n, v) ? v : NULL;
}

static bool get_multipliers(qat__h5r *r, hid_t g, int64_t n, qat_qop *op) {
    if (n < 1 || n > MAX_DIM) return qat__h5r_fail(r, QAT_ERR_FORMAT, "bad multiplier count %lld", (long long)n);
    op->n_mult = (int)n;
    op->multiplier = get_ints(r, g, "multiplier", n);
    op->shift = get_ints(r, g, "shift", n);
    return r->ok;
}

/* A shape attribute of `want` dimensions (2 or 4), each in 1..MAX_DIM and
 * at most 2^28 elements in all; the element count into *n. */
static bool get_dims(qat__h5r *r, hid_t set, const char *name, const char *where, int want, int64_t *shape, int64_t *n) {
    long long v[QAT_MAX_RANK];
    if (!qat__h5r_i64s(r, set, name, v, want, 1, MAX_DIM)) return false;
    *n = 1;
    for (int d = 0; d < want; d++) {
        shape[d] = v[d], *n *= v[d];
        if (*n > (1LL << 28)) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: %s makes more than 2^28 weights", where, name);
    }
    return true;
}

/* The weight's MLIR text (version 3: bytes, a length bounded by the number
 * of scales) must spell the type the datasets give. */
static bool cross_check_mlir(qat__h5r *r, hid_t g, const char *where, const qat_qtype *q) {
    int rank = 0;
    int64_t len = 0;
    if (!qat__h5r_shape(r, g, "weight_mlir", 1, &rank, &len)) return false;
    if (rank != 1 || len < 1 || len > 64 * q->nparams + 4096)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: weight_mlir is not a text of 1..%lld bytes", where,
                             (long long)(64 * q->nparams + 4096));
    char *text = qat_ctx_alloc(r->ctx, QAT_MEM_STEP, (size_t)len + 1);
    if (!text) return r->ok = false;
    if (!qat__h5r_u8s(r, g, "weight_mlir", len, (uint8_t *)text)) return false;
    text[len] = '\0';
    qat_qtype m;
    qat_ctx *tmp = qat_ctx_new(); /* the parsed type's arrays and its error stay out of the program's context */
    bool same = tmp && strlen(text) == (size_t)len &&
                qat_qtype_from_mlir_blocks(tmp, text, q->rank, q->shape, true, &m) == QAT_OK && m.bits == q->bits &&
                m.is_signed == q->is_signed && m.qmin == q->qmin && m.qmax == q->qmax &&
                !memcmp(m.block, q->block, sizeof m.block) &&
                !memcmp(m.scale, q->scale, (size_t)q->nparams * sizeof *m.scale) &&
                !memcmp(m.zero_point, q->zero_point, (size_t)q->nparams * sizeof *m.zero_point);
    qat_ctx_free(tmp);
    return same || qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: weight_mlir does not spell the type of weight_scale, "
                                 "weight_zero_point and the weight's attributes", where);
}

/* The weight of a linear/conv op (version 3: packed when <= 4 bits), its
 * type (version 3: on quantized_shape, ragged blocks allowed), its bias,
 * its multipliers; a sub-channel op's block multipliers derived from its
 * scales. Its shape is checked against the op by qat_qmodel_check. */
static bool get_weight(qat__h5r *r, hid_t g, const char *where, qat_qop *op, int version) {
    int want = op->kind == QAT_QOP_CONV2D ? 4 : 2;
    int64_t shape[QAT_MAX_RANK] = {0}, n = 1;
    hid_t set = qat__h5r_has_dataset(g, "weight") ? H5Dopen2(g, "weight", H5P_DEFAULT) : -1;
    if (set < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: cannot open the weight", where);
    int pb = version >= 3 && qat__h5r_has_attr(set, "packed_bits") ? (int)qat__h5r_i64(r, set, "packed_bits", 2, 4) : 0;
    if (version >= 3) get_dims(r, set, "shape", where, want, shape, &n);
    char st[16] = "";
    long long block[QAT_MAX_RANK] = {0}, tsh[QAT_MAX_RANK] = {0};
    int bits = (int)qat__h5r_i64(r, set, "bits", 2, 16);
    int32_t qmin = (int32_t)qat__h5r_i64(r, set, "qmin", INT32_MIN, INT32_MAX);
    int32_t qmax = (int32_t)qat__h5r_i64(r, set, "qmax", INT32_MIN, INT32_MAX);
    qat__h5r_str(r, set, "storage_type", st, sizeof st);
    int trank = want;
    if (version >= 3 && r->ok) { /* the type's shape: the weight's, or a conv's [O, C/groups·kh·kw] */
        if (qat__h5r_attr_count(r, set, "quantized_shape", H5T_INTEGER, QAT_MAX_RANK, &trank) &&
            trank != want && !(want == 4 && trank == 2))
            qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: quantized_shape has %d dimensions", where, trank);
        qat__h5r_i64s(r, set, "quantized_shape", tsh, trank, 1, MAX_DIM);
    }
    qat__h5r_i64s(r, set, "block_sizes", block, trank, 1, MAX_DIM);
    H5Dclose(set);
    if (!r->ok) return false;
    if (pb && pb != packed_bits(bits))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: %d-bit weights packed %d to a byte", where, bits, 8 / pb);
    if (version < 3) { /* the dataset's own shape */
        int rank = 0;
        if (!qat__h5r_shape(r, g, "weight", QAT_MAX_RANK, &rank, shape)) return false;
        if (rank != want) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight's shape does not fit the op", where);
        for (int d = 0; d < rank; d++) {
            if (shape[d] < 1 || shape[d] > MAX_DIM)
                return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight has a dimension of %lld", where, (long long)shape[d]);
            n *= shape[d];
        }
        if (n > (1LL << 28)) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight's shape does not fit the op", where);
        for (int d = 0; d < want; d++) tsh[d] = shape[d];
    }
    int64_t b[QAT_MAX_RANK], ts[QAT_MAX_RANK], tn = 1;
    for (int d = 0; d < trank; d++) b[d] = block[d], ts[d] = tsh[d], tn *= tsh[d];
    if (tn != n || ts[0] != shape[0])
        return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: quantized_shape does not hold the weight's elements", where);
    int32_t lo, hi;
    if ((st[0] != 'i' && st[0] != 'u') || qat_storage_range(bits, st[0] == 'i', false, &lo, &hi) != QAT_OK)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: bad weight storage (%s, %d bits)", where, st, bits);
    for (int d = 0; d < trank; d++) /* version 2 wrote whole blocks only; version 3 may end a dimension short */
        if (b[d] > ts[d] || (version < 3 && ts[d] % b[d]))
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: block_sizes do not fit the weight's shape", where);
    if (qat_qtype_init_blocks(r->ctx, &op->wq, bits, st[0] == 'i', false, trank, ts, b, true) != QAT_OK) return r->ok = false;
    op->wq.qmin = qmin, op->wq.qmax = qmax;
    int64_t O = shape[0];
    op->weight = alloc(r, n, sizeof(int32_t));
    op->bias_scale = alloc(r, O, sizeof(float));
    if (!r->ok) return false;
    if (pb) {
        int64_t bytes = (n * pb + 7) / 8;
        uint8_t *packed = qat_ctx_alloc(r->ctx, QAT_MEM_STEP, (size_t)bytes);
        if (!packed) return r->ok = false;
        if (!qat__h5r_u8s(r, g, "weight", bytes, packed)) return false;
        if (!unpack_weights(packed, n, pb, st[0] == 'i', op->weight))
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: the packed weights' last byte has bits set past the last weight", where);
    } else if (!qat__h5r_ints(r, g, "weight", want, shape, op->weight)) {
        return false;
    }
    if (!qat__h5r_floats(r, g, "weight_scale", trank, op->wq.pshape, op->wq.scale) ||
        !qat__h5r_ints(r, g, "weight_zero_point", trank, op->wq.pshape, op->wq.zero_point) ||
        !(op->bias = get_ints(r, g, "bias", O)) || !qat__h5r_floats(r, g, "bias_scale", 1, &O, op->bias_scale))
        return false;
    if (version >= 3 && !cross_check_mlir(r, g, where, &op->wq)) return false;
    if (qat__h5r_has_dataset(g, "multiplier") && !get_multipliers(r, g, O, op)) return false;
    if (!qat_qop_subchannel(op)) return true;
    op->block_multiplier = alloc(r, op->wq.nparams, sizeof(int32_t));
    op->block_shift = alloc(r, op->wq.nparams, sizeof(int32_t));
    if (!r->ok) return false;
    if (version >= 3) {
        if (!op->multiplier) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: sub-channel weights without multipliers", where);
        return true; /* the block multipliers: derived once the input's scale is known (derive_blocks) */
    }
    op->n_mult = (int)O; /* version 2 had none: lowering's choice is made at load (convert_v2) */
    op->multiplier = alloc(r, O, sizeof(int32_t));
    op->shift = alloc(r, O, sizeof(int32_t));
    return r->ok;
}

static bool get_activation(qat__h5r *r, hid_t g, const char *where, qat_qop *op) {
    char act[16] = "";
    if (!qat__h5r_str(r, g, "activation", act, sizeof act)) return false;
    op->act = !strcmp(act, "relu") ? QAT_ACT_RELU : !strcmp(act, "relu6") ? QAT_ACT_RELU6 : QAT_ACT_NONE;
    if (op->act == QAT_ACT_NONE && strcmp(act, "none"))
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown activation %s", where, act);
    return true;
}

/* kernel/stride/padding: two numbers each (version 2), or one (version 1:
 * square, and no padding but a conv's). */
static void get_window(qat__h5r *r, hid_t g, qat_qop *op, int version) {
    long long k[2] = {0}, s[2] = {0}, p[2] = {0};
    int n = version == 1 ? 1 : 2;
    qat__h5r_i64s(r, g, "kernel", k, n, 1, QAT_QOP_MAX_WINDOW);
    qat__h5r_i64s(r, g, "stride", s, n, 1, QAT_QOP_MAX_WINDOW);
    if (version > 1 || op->kind == QAT_QOP_CONV2D) qat__h5r_i64s(r, g, "padding", p, n, 0, QAT_QOP_MAX_WINDOW);
    if (n == 1) k[1] = k[0], s[1] = s[0], p[1] = p[0];
    op->kh = (int)k[0], op->kw = (int)k[1], op->stride_h = (int)s[0], op->stride_w = (int)s[1];
    op->pad_h = (int)p[0], op->pad_w = (int)p[1];
}

/* One op group; version 1 gives no tensor ids (the reader chains them). */
static bool get_op(qat__h5r *r, hid_t ops, int i, int version, int n_tensors, qat_qop *op) {
    char gname[16], kind[32] = "", where[96];
    snprintf(gname, sizeof gname, "%d", i);
    hid_t g = qat__h5r_group(r, ops, gname);
    if (g < 0) return false;
    memset(op, 0, sizeof *op);
    op->groups = 1;
    qat__h5r_str(r, g, "kind", kind, sizeof kind);
    qat__h5r_str(r, g, "name", op->name, sizeof op->name);
    char why[256];
    if (r->ok && !qat_name_valid(op->name, why, sizeof why)) {
        qat__h5r_fail(r, QAT_ERR_FORMAT, "op %d: bad name: %s", i, why);
        op->name[0] = '\0'; /* never shown again */
    }
    op->kind = QAT_QOP_KIND_COUNT;
    for (int k = 0; k < QAT_QOP_KIND_COUNT; k++)
        if (!strcmp(kind, qat_qop_kind_str((qat_qop_kind)k))) op->kind = (qat_qop_kind)k;
    /* the file's kind text is shown only when it follows the name rule (no control character) */
    snprintf(where, sizeof where, "op %d (%s %s)", i, qat_name_valid(kind, NULL, 0) ? kind : "?", op->name);
    if (r->ok && (op->kind == QAT_QOP_KIND_COUNT || (version == 1 && op->kind > QAT_QOP_RELU)))
        qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown op kind", where);
    if (version > 1 && r->ok) {
        int n = 0;
        long long in[QAT_QOP_MAX_INPUTS];
        if (qat__h5r_attr_count(r, g, "inputs", H5T_INTEGER, QAT_QOP_MAX_INPUTS, &n) && n < 1)
            qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: no inputs", where);
        if (qat__h5r_i64s(r, g, "inputs", in, n, 0, n_tensors - 1))
            for (int j = 0; j < n; j++) op->inputs[j] = (int)in[j];
        op->n_inputs = n;
        op->output = (int)qat__h5r_i64(r, g, "output", 0, n_tensors - 1);
    }
    op->act_min = (int32_t)qat__h5r_i64(r, g, "act_min", INT32_MIN, INT32_MAX);
    op->act_max = (int32_t)qat__h5r_i64(r, g, "act_max", INT32_MIN, INT32_MAX);
    switch (op->kind) {
    case QAT_QOP_CONV2D:
        get_window(r, g, op, version);
        if (version > 1) op->groups = (int)qat__h5r_i64(r, g, "groups", 1, MAX_DIM);
        /* fall through */
    case QAT_QOP_LINEAR:
        if (get_activation(r, g, where, op)) get_weight(r, g, where, op, version);
        break;
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D:
        get_window(r, g, op, version);
        if (op->kind == QAT_QOP_AVGPOOL2D) get_multipliers(r, g, 1, op);
        break;
    case QAT_QOP_GLOBAL_AVGPOOL: get_multipliers(r, g, 1, op); break;
    case QAT_QOP_ADD:
        op->left_shift = (int)qat__h5r_i64(r, g, "left_shift", 0, 24);
        if (get_activation(r, g, where, op)) get_multipliers(r, g, 3, op);
        break;
    case QAT_QOP_CONCAT: get_multipliers(r, g, op->n_inputs, op); break;
    case QAT_QOP_MUL: get_multipliers(r, g, 1, op); break;
    case QAT_QOP_LUT: {
        char fn[32] = "";
        qat__h5r_str(r, g, "function", fn, sizeof fn);
        op->lut = QAT_LUT_FN_COUNT;
        for (int f = 0; f < QAT_LUT_FN_COUNT; f++)
            if (!strcmp(fn, qat_lut_fn_str((qat_lut_fn)f))) op->lut = (qat_lut_fn)f;
        if (r->ok && op->lut == QAT_LUT_FN_COUNT) qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown function %s", where,
                                                               qat_name_valid(fn, NULL, 0) ? fn : "(not a name)");
        int64_t len = 0;
        int rk = 0;
        if (qat__h5r_shape(r, g, "table", 1, &rk, &len) && (rk != 1 || len < 1 || len > 65536))
            qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: a table of 1..65536 entries", where);
        op->table_len = (int)len;
        if (r->ok) op->table = get_ints(r, g, "table", len);
        break;
    }
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_KIND_COUNT: break; /* nothing beyond the common fields */
    }
    H5Gclose(g);
    return r->ok;
}

static bool get_tensor(qat__h5r *r, hid_t ts, int t, qat_qtensor *x) {
    char gname[16], where[64];
    snprintf(gname, sizeof gname, "%d", t);
    snprintf(where, sizeof where, "tensor %d", t);
    hid_t g = qat__h5r_group(r, ts, gname);
    if (g < 0) return false;
    memset(x, 0, sizeof *x);
    qat__h5r_str(r, g, "name", x->name, sizeof x->name);
    char why[256];
    if (r->ok && !qat_name_valid(x->name, why, sizeof why)) qat__h5r_fail(r, QAT_ERR_FORMAT, "tensor %d: bad name: %s", t, why);
    get_shape(r, g, "shape", &x->rank, x->shape);
    get_aparams(r, g, "", where, &x->q);
    H5Gclose(g);
    return r->ok;
}

/* The training configuration: a dataset (version 2) or an attribute
 * (version 1), any length up to a bound. */
static const char *get_config(qat__h5r *r, hid_t f) {
    enum { MAX_CONFIG = 1 << 20 };
    if (qat__h5r_has_attr(f, "training_config")) {
        char *buf = alloc(r, 1 << 16, 1);
        return buf && qat__h5r_str(r, f, "training_config", buf, 1 << 16) ? buf : "";
    }
    hid_t set = qat__h5r_has_dataset(f, "training_config") ? H5Dopen2(f, "training_config", H5P_DEFAULT) : -1;
    if (set < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "no training_config"), "";
    hid_t t = H5Dget_type(set), sp = H5Dget_space(set);
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    bool fixed = t >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) == 0 && sp >= 0 &&
                 H5Sget_simple_extent_npoints(sp) == 1 && size >= 1 && size <= MAX_CONFIG;
    char *buf = fixed ? alloc(r, (int64_t)size + 1, 1) : NULL;
    bool ok = false;
    if (buf) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        ok = mt >= 0 && H5Tset_size(mt, size + 1) >= 0 && H5Dread(set, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        if (mt >= 0) H5Tclose(mt);
        buf[size] = '\0';
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Dclose(set);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "training_config is not a string of at most %d bytes", MAX_CONFIG), "";
    return buf;
}

static void read_v2(qat__h5r *r, qat_qmodel *q, int version) {
    hid_t f = r->file;
    int nt = (int)qat__h5r_i64(r, f, "n_tensors", 2, QAT_QMODEL_MAX_OPS + 1);
    int no = (int)qat__h5r_i64(r, f, "n_ops", 1, QAT_QMODEL_MAX_OPS);
    q->input = (int)qat__h5r_i64(r, f, "input", 0, nt - 1);
    q->output = (int)qat__h5r_i64(r, f, "output", 0, nt - 1);
    if (r->ok && no != nt - 1)
        qat__h5r_fail(r, QAT_ERR_FORMAT, "n_ops %d with %d tensors: each op makes one tensor, the input is the other", no, nt);
    if (!r->ok) return;
    q->tensors = alloc(r, nt, sizeof *q->tensors);
    q->ops = alloc(r, no, sizeof *q->ops);
    hid_t ts = qat__h5r_group(r, f, "tensors");
    for (int t = 0; ts >= 0 && r->ok && t < nt; t++) get_tensor(r, ts, t, &q->tensors[t]);
    if (ts >= 0) H5Gclose(ts);
    hid_t ops = qat__h5r_group(r, f, "ops");
    for (int i = 0; ops >= 0 && r->ok && i < no; i++) get_op(r, ops, i, version, nt, &q->ops[i]);
    if (ops >= 0) H5Gclose(ops);
    q->n_tensors = nt, q->n_ops = no;
}

/* Version 1: a chain. Tensor 0 is the input; op i reads tensor i and
 * writes tensor i + 1, whose shape and quantization the op records. */
static void read_v1(qat__h5r *r, qat_qmodel *q) {
    hid_t f = r->file;
    int no = (int)qat__h5r_i64(r, f, "n_ops", 1, QAT_QMODEL_MAX_OPS);
    int64_t n_outputs = qat__h5r_i64(r, f, "n_outputs", 1, MAX_DIM);
    if (!r->ok) return;
    q->tensors = alloc(r, no + 1, sizeof *q->tensors);
    q->ops = alloc(r, no, sizeof *q->ops);
    if (!r->ok) return;
    qat_qtensor *in = &q->tensors[0];
    snprintf(in->name, sizeof in->name, "input");
    get_shape(r, f, "input_shape", &in->rank, in->shape);
    hid_t g = qat__h5r_group(r, f, "input");
    if (g >= 0) get_aparams(r, g, "", "input", &in->q), H5Gclose(g);
    hid_t ops = qat__h5r_group(r, f, "ops");
    for (int i = 0; ops >= 0 && r->ok && i < no; i++) {
        qat_qop *op = &q->ops[i];
        if (!get_op(r, ops, i, 1, no + 1, op)) break;
        op->n_inputs = 1, op->inputs[0] = i, op->output = i + 1;
        qat_qtensor *out = &q->tensors[i + 1];
        char gname[16], where[64];
        snprintf(gname, sizeof gname, "%d", i);
        snprintf(where, sizeof where, "op %d's output", i);
        hid_t og = qat__h5r_group(r, ops, gname);
        if (og < 0) break;
        snprintf(out->name, sizeof out->name, "%s", op->name);
        get_shape(r, og, "output_shape", &out->rank, out->shape);
        get_aparams(r, og, "output_", where, &out->q);
        H5Gclose(og);
    }
    if (ops >= 0) H5Gclose(ops);
    q->n_tensors = no + 1, q->n_ops = no, q->input = 0, q->output = no;
    if (r->ok && qat_qtensor_numel(&q->tensors[no]) != n_outputs)
        qat__h5r_fail(r, QAT_ERR_FORMAT, "n_outputs disagrees with the last op's shape");
}

/* Sub-channel ops once every tensor is read: version 3 derives each
 * block's conversion from the scales by the file's rule; versions 1 and 2
 * recorded no integer form for them (the integer engine refused them), so
 * their accumulation scales are chosen here as lowering chooses them, for
 * the real bias bias·bias_scale. qat_qmodel_check then checks it all. */
static void finish_subchannel(qat__h5r *r, qat_qmodel *q, int version) {
    for (int i = 0; r->ok && i < q->n_ops; i++) {
        qat_qop *op = &q->ops[i];
        if (!qat_qop_subchannel(op) || !op->block_multiplier) continue;
        const qat_qtensor *in = &q->tensors[op->inputs[0]];
        if (version >= 3) {
            qat__sc_derive(op, in->q.scale, 0, op->wq.shape[0]);
            continue;
        }
        int64_t O = op->wq.shape[0];
        double *b = malloc((size_t)O * sizeof *b);
        char why[200];
        if (!b) {
            qat__h5r_fail(r, QAT_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t o = 0; o < O; o++) b[o] = (double)op->bias[o] * (double)op->bias_scale[o];
        bool ok = qat__sc_accumulation(op, &in->q, q->tensors[op->output].q.scale, b, why, sizeof why);
        free(b);
        if (!ok)
            qat__h5r_fail(r, QAT_ERR_FORMAT, "op %d (%s %s): its sub-channel sums have no int32 accumulation scale: %s",
                          i, qat_qop_kind_str(op->kind), op->name, why);
    }
}

/* Version 4's optional /normalization, checked against the input
 * tensor's shape (the tensors are read). */
static void read_norm(qat__h5r *r, qat_qmodel *q) {
    if (!r->ok || H5Lexists(r->file, "normalization", H5P_DEFAULT) <= 0) return;
    qat_normalization *n = alloc(r, 1, sizeof *n);
    const qat_qtensor *in = &q->tensors[q->input];
    if (n && qat__h5r_norm(r, r->file, "normalization", in->rank, in->shape, n)) q->norm = n;
}

qat_status qat_qmodel_load(qat_ctx *ctx, const char *path, qat_qmodel *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qmodel: NULL path or output");
    memset(out, 0, sizeof *out);
    qat__h5r r = {ctx, path, -1, true};
    long long version = 0;
    H5E_BEGIN_TRY {
        if (qat__h5r_open(&r, QAT_QMODEL_FORMAT, "qat quantized model", QAT_QMODEL_VERSION, &version)) {
            qat__h5r_str(&r, r.file, "producer", out->producer, sizeof out->producer);
            out->config = get_config(&r, r.file);
            if (version == 1) read_v1(&r, out);
            else read_v2(&r, out, (int)version);
            if (version >= 4) read_norm(&r, out);
            if (r.ok) finish_subchannel(&r, out, (int)version);
            out->version = (int)version;
        }
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    if (!r.ok) return qat_ctx_status(ctx);
    char msg[400];
    qat_status st = qat_qmodel_check(out, msg, sizeof msg);
    return st == QAT_OK ? QAT_OK : qat_ctx_fail(ctx, st, "%s: %s", path, msg);
}
