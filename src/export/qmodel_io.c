/* The quantized model file in HDF5: writing (version 2) and checked
 * reading (versions 1 and 2). Layout: docs/quantized-model-format.md.
 *
 * The reader bounds what the file says (types, element counts, ranks, the
 * integer ranges that size arrays) as it reads; the whole program is then
 * checked by qat_qmodel_check — the same check export runs before it
 * writes, so a file qat writes is a file qat loads. */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/internal.h"
#include "io/h5util.h"
#include "qat/export.h"

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

/* ---- writing (version 2) ------------------------------------------------------------ */

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

static void put_weight(qat__h5w *w, hid_t g, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    hid_t type = q->bits <= 8 ? (q->is_signed ? H5T_STD_I8LE : H5T_STD_U8LE) : (q->is_signed ? H5T_STD_I16LE : H5T_STD_U16LE);
    qat__h5w_ints(w, g, "weight", type, q->rank, q->shape, op->weight);
    hid_t set = w->ok ? H5Dopen2(g, "weight", H5P_DEFAULT) : -1;
    if (set < 0) {
        qat__h5w_fail(w, "weight");
        return;
    }
    char text[64];
    long long block[QAT_MAX_RANK];
    for (int d = 0; d < q->rank; d++) block[d] = q->block[d];
    int axis = qat_qtype_axis(q);
    qat__h5w_i64(w, set, "bits", q->bits);
    qat__h5w_i64(w, set, "qmin", q->qmin);
    qat__h5w_i64(w, set, "qmax", q->qmax);
    storage_name(q->bits, q->is_signed, text, sizeof text);
    qat__h5w_str(w, set, "storage_type", text);
    qat__h5w_str(w, set, "expressed_type", "f32");
    qat__h5w_str(w, set, "granularity", axis == -1 ? "per-tensor" : axis >= 0 ? "per-axis" : "sub-channel");
    if (axis >= 0) qat__h5w_i64(w, set, "quantized_dimension", axis);
    qat__h5w_i64s(w, set, "block_sizes", block, q->rank);
    H5Dclose(set);
    int need = qat_qtype_to_mlir(q, NULL, 0);
    char *mlir = need > 0 ? qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)need + 1) : NULL;
    if (!mlir) qat__h5w_fail(w, "the weight's MLIR type");
    else qat_qtype_to_mlir(q, mlir, (size_t)need + 1), put_text(w, g, "weight_mlir", mlir);
    qat__h5w_floats(w, g, "weight_scale", q->rank, q->pshape, q->scale);
    qat__h5w_ints(w, g, "weight_zero_point", H5T_STD_I32LE, q->rank, q->pshape, q->zero_point);
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

static void put_op(qat__h5w *w, hid_t g, const qat_qop *op) {
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
        put_weight(w, g, op);
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
    default: break;
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
        put_op(w, g, &q->ops[i]);
        H5Gclose(g);
    }
    if (ops >= 0) H5Gclose(ops);
}

qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || !path || q->n_ops < 1) return qat_ctx_fail(ctx, QAT_ERR_ARG, "export: need a lowered model and a path");
    /* the loader's own check: never write a file qat would then refuse */
    char msg[400];
    if (qat_qmodel_check(q, msg, sizeof msg) != QAT_OK)
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "export: the model would not load back: %s", msg);
    return qat__h5_write_atomic(ctx, path, write_qmodel, (void *)q);
}

qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config, const char *path,
                      int64_t *peak_bytes) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = qat_model_ctx(m);
    qat_ctx *pctx = qat_ctx_new(); /* the program's own memory, freed below */
    if (!pctx) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "export: out of memory");
    qat_qmodel q;
    qat_status st = qat_qmodel_lower(m, in_rank, in_shape, pctx, &q);
    if (st == QAT_OK) {
        q.config = config ? config : "";
        st = qat_qmodel_save(pctx, &q, path);
        if (st != QAT_OK) qat_ctx_fail(ctx, st, "%s", qat_ctx_error(pctx));
    }
    if (st == QAT_OK && peak_bytes) {
        int64_t *offsets = qat_ctx_alloc(pctx, QAT_MEM_PERSIST, (size_t)(q.n_tensors + q.n_ops) * sizeof *offsets);
        qat_plan plan;
        *peak_bytes = offsets && qat_plan_program(&q, 1, offsets, &plan, NULL, 0) == QAT_OK ? plan.peak_activation_bytes : -1;
    }
    qat_ctx_free(pctx);
    return st;
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

/* The weight of a linear/conv op, its type, its bias; its shape is
 * checked against the op by qat_qmodel_check. */
static bool get_weight(qat__h5r *r, hid_t g, const char *where, qat_qop *op) {
    int64_t shape[QAT_MAX_RANK] = {0};
    int rank = 0;
    if (!qat__h5r_shape(r, g, "weight", QAT_MAX_RANK, &rank, shape)) return false;
    int want = op->kind == QAT_QOP_CONV2D ? 4 : 2;
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 1 || shape[d] > MAX_DIM) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight has a dimension of %lld", where, (long long)shape[d]);
        n *= shape[d];
    }
    if (rank != want || n > (1LL << 28)) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight's shape does not fit the op", where);
    hid_t set = H5Dopen2(g, "weight", H5P_DEFAULT);
    if (set < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: cannot open the weight", where);
    char st[16] = "";
    long long block[QAT_MAX_RANK] = {0};
    int bits = (int)qat__h5r_i64(r, set, "bits", 2, 16);
    int32_t qmin = (int32_t)qat__h5r_i64(r, set, "qmin", INT32_MIN, INT32_MAX);
    int32_t qmax = (int32_t)qat__h5r_i64(r, set, "qmax", INT32_MIN, INT32_MAX);
    qat__h5r_str(r, set, "storage_type", st, sizeof st);
    qat__h5r_i64s(r, set, "block_sizes", block, rank, 1, MAX_DIM);
    H5Dclose(set);
    if (!r->ok) return false;
    int64_t b[QAT_MAX_RANK];
    for (int d = 0; d < rank; d++) b[d] = block[d];
    int32_t lo, hi;
    if ((st[0] != 'i' && st[0] != 'u') || qat_storage_range(bits, st[0] == 'i', false, &lo, &hi) != QAT_OK)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: bad weight storage (%s, %d bits)", where, st, bits);
    for (int d = 0; d < rank; d++)
        if (b[d] > shape[d] || shape[d] % b[d])
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: block_sizes do not divide the weight's shape", where);
    if (qat_qtype_init(r->ctx, &op->wq, bits, st[0] == 'i', false, rank, shape, b) != QAT_OK) return r->ok = false;
    op->wq.qmin = qmin, op->wq.qmax = qmax;
    int64_t O = shape[0];
    op->weight = alloc(r, n, sizeof(int32_t));
    op->bias_scale = alloc(r, O, sizeof(float));
    if (!r->ok || !qat__h5r_ints(r, g, "weight", rank, shape, op->weight) ||
        !qat__h5r_floats(r, g, "weight_scale", rank, op->wq.pshape, op->wq.scale) ||
        !qat__h5r_ints(r, g, "weight_zero_point", rank, op->wq.pshape, op->wq.zero_point) ||
        !(op->bias = get_ints(r, g, "bias", O)) || !qat__h5r_floats(r, g, "bias_scale", 1, &O, op->bias_scale))
        return false;
    return !qat__h5r_has_dataset(g, "multiplier") || get_multipliers(r, g, O, op);
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
    snprintf(where, sizeof where, "op %d (%s %s)", i, kind, op->name);
    op->kind = QAT_QOP_KIND_COUNT;
    for (int k = 0; k < QAT_QOP_KIND_COUNT; k++)
        if (!strcmp(kind, qat_qop_kind_str((qat_qop_kind)k))) op->kind = (qat_qop_kind)k;
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
        if (get_activation(r, g, where, op)) get_weight(r, g, where, op);
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
    case QAT_QOP_LUT: {
        char fn[32] = "";
        qat__h5r_str(r, g, "function", fn, sizeof fn);
        op->lut = QAT_LUT_FN_COUNT;
        for (int f = 0; f < QAT_LUT_FN_COUNT; f++)
            if (!strcmp(fn, qat_lut_fn_str((qat_lut_fn)f))) op->lut = (qat_lut_fn)f;
        if (r->ok && op->lut == QAT_LUT_FN_COUNT) qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown function %s", where, fn);
        int64_t len = 0;
        int rk = 0;
        if (qat__h5r_shape(r, g, "table", 1, &rk, &len) && (rk != 1 || len < 1 || len > 65536))
            qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: a table of 1..65536 entries", where);
        op->table_len = (int)len;
        if (r->ok) op->table = get_ints(r, g, "table", len);
        break;
    }
    default: break;
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

static void read_v2(qat__h5r *r, qat_qmodel *q) {
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
    for (int i = 0; ops >= 0 && r->ok && i < no; i++) get_op(r, ops, i, 2, nt, &q->ops[i]);
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
            else read_v2(&r, out);
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
