/* The quantized checkpoint in HDF5: writing and validated reading.
 * Layout: docs/quantized-model-format.md. */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/internal.h"
#include "io/h5util.h"
#include "qat/export.h"

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

/* ---- writing ---------------------------------------------------------------------- */

/* prefix "" for the input group, "output_" on an op. */
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
    long long v[3] = {0};
    for (int d = 0; d < rank; d++) v[d] = shape[d];
    qat__h5w_i64s(w, g, name, v, rank);
}

static void put_weight(qat__h5w *w, hid_t g, const qat_qop *op) {
    const qat_qtype *q = &op->wq;
    hid_t type = q->bits <= 8 ? (q->is_signed ? H5T_STD_I8LE : H5T_STD_U8LE)
                              : (q->is_signed ? H5T_STD_I16LE : H5T_STD_U16LE);
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
    int need = qat_qtype_to_mlir(q, NULL, 0);
    char *mlir = need > 0 ? qat_ctx_alloc(w->ctx, QAT_MEM_STEP, (size_t)need + 1) : NULL;
    if (!mlir) qat__h5w_fail(w, "the weight's MLIR type");
    else qat_qtype_to_mlir(q, mlir, (size_t)need + 1), qat__h5w_str(w, set, "mlir", mlir);
    H5Dclose(set);
    qat__h5w_floats(w, g, "weight_scale", q->rank, q->pshape, q->scale);
    qat__h5w_ints(w, g, "weight_zero_point", H5T_STD_I32LE, q->rank, q->pshape, q->zero_point);
    int64_t O = q->shape[0];
    qat__h5w_ints(w, g, "bias", H5T_STD_I32LE, 1, &O, op->bias);
    qat__h5w_floats(w, g, "bias_scale", 1, &O, op->bias_scale);
}

static void write_qmodel(qat__h5w *w, void *user) {
    const qat_qmodel *q = user;
    hid_t f = w->file;
    qat__h5w_str(w, f, "format", QAT_QMODEL_FORMAT);
    qat__h5w_i64(w, f, "version", QAT_QMODEL_VERSION);
    qat__h5w_str(w, f, "producer", q->producer);
    qat__h5w_str(w, f, "training_config", q->config[0] ? q->config : "{}");
    qat__h5w_i64(w, f, "n_ops", q->n_ops);
    qat__h5w_i64(w, f, "n_outputs", q->n_outputs);
    put_shape(w, f, "input_shape", q->in_rank, q->in_shape);
    hid_t g = qat__h5w_group(w, f, "input");
    if (g >= 0) put_aparams(w, g, "", &q->input), H5Gclose(g);
    hid_t ops = qat__h5w_group(w, f, "ops");
    for (int i = 0; ops >= 0 && w->ok && i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if ((g = qat__h5w_group(w, ops, name)) < 0) break;
        qat__h5w_str(w, g, "kind", qat_qop_kind_str(op->kind));
        qat__h5w_str(w, g, "name", op->name);
        put_shape(w, g, "input_shape", op->in_rank, op->in_shape);
        put_shape(w, g, "output_shape", op->out_rank, op->out_shape);
        put_aparams(w, g, "output_", &op->output);
        qat__h5w_i64(w, g, "act_min", op->act_min);
        qat__h5w_i64(w, g, "act_max", op->act_max);
        if (op->kind == QAT_QOP_CONV2D || op->kind == QAT_QOP_MAXPOOL2D || op->kind == QAT_QOP_AVGPOOL2D) {
            qat__h5w_i64(w, g, "kernel", op->kernel);
            qat__h5w_i64(w, g, "stride", op->stride);
        }
        if (op->kind == QAT_QOP_CONV2D) qat__h5w_i64(w, g, "padding", op->pad);
        if (op->kind == QAT_QOP_CONV2D || op->kind == QAT_QOP_LINEAR) {
            qat__h5w_str(w, g, "activation", qat_act_kind_str(op->act));
            put_weight(w, g, op);
        }
        if (op->multiplier) {
            int64_t n = op->kind == QAT_QOP_AVGPOOL2D ? 1 : op->wq.shape[0];
            qat__h5w_ints(w, g, "multiplier", H5T_STD_I32LE, 1, &n, op->multiplier);
            qat__h5w_ints(w, g, "shift", H5T_STD_I32LE, 1, &n, op->shift);
        }
        H5Gclose(g);
    }
    if (ops >= 0) H5Gclose(ops);
}

qat_status qat_qmodel_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    if (!ctx) return QAT_ERR_ARG;
    if (!q || !path || q->n_ops < 1)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "export: need a lowered model and a path");
    /* the loader's own check: never write a file qat would then refuse */
    qat_status st = qat_qmodel_validate(ctx, q);
    if (st != QAT_OK) return qat__error_prefix(ctx, "export: the model would not load back: "), st;
    return qat__h5_write_atomic(ctx, path, write_qmodel, (void *)q);
}

qat_status qat_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config, const char *path) {
    if (!m) return QAT_ERR_ARG;
    qat_qmodel *q = qat_ctx_alloc(m->ctx, QAT_MEM_STEP, sizeof *q);
    if (!q) return qat_ctx_status(m->ctx);
    qat_status st = qat_qmodel_lower(m, in_rank, in_shape, q);
    if (st == QAT_OK && config && strlen(config) >= sizeof q->config)
        st = qat_ctx_fail(m->ctx, QAT_ERR_ARG, "export: the configuration text is over %d bytes",
                          QAT_QMODEL_CONFIG_LEN - 1);
    if (st == QAT_OK && config) strcpy(q->config, config);
    return st == QAT_OK ? qat_qmodel_save(m->ctx, q, path) : st;
}

/* ---- reading ----------------------------------------------------------------------
 * The reader bounds what the file says (types, element counts, ranks,
 * integer ranges that size arrays) as it reads; every quantity is then
 * checked by qat_qmodel_validate, the same check export runs before it
 * writes, so a file qat writes is a file qat loads. */

#define MAX_DIM (1 << 24)

static bool get_shape(qat__h5r *r, hid_t g, const char *name, int *rank, int64_t *shape) {
    int n = 0;
    if (!qat__h5r_attr_count(r, g, name, H5T_INTEGER, 3, &n)) return false;
    if (n != 1 && n != 3) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s must have 1 or 3 dimensions", name);
    long long v[3];
    if (!qat__h5r_i64s(r, g, name, v, n, 1, MAX_DIM)) return false;
    for (int d = 0; d < n; d++) shape[d] = v[d];
    *rank = n;
    return true;
}

/* Reads an activation's parameters; qat_qmodel_validate checks them. */
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

static void *alloc(qat__h5r *r, size_t bytes) {
    void *p = r->ok ? qat_ctx_alloc(r->ctx, QAT_MEM_PERSIST, bytes ? bytes : 1) : NULL;
    if (r->ok && !p) r->ok = false;
    return p;
}

static bool get_multipliers(qat__h5r *r, hid_t g, int64_t n, qat_qop *op) {
    op->multiplier = alloc(r, (size_t)n * sizeof(int32_t));
    op->shift = alloc(r, (size_t)n * sizeof(int32_t));
    return r->ok && qat__h5r_ints(r, g, "multiplier", 1, &n, op->multiplier) &&
           qat__h5r_ints(r, g, "shift", 1, &n, op->shift);
}

static bool get_weight(qat__h5r *r, hid_t g, const char *where, qat_qop *op) {
    bool conv = op->kind == QAT_QOP_CONV2D;
    int rank = conv ? 4 : 2;
    int64_t shape[QAT_MAX_RANK] = {0};
    int have = 0;
    if (!qat__h5r_shape(r, g, "weight", QAT_MAX_RANK, &have, shape)) return false;
    if (have != rank || shape[0] != op->out_shape[0] || shape[1] != op->in_shape[0] ||
        (conv && (shape[2] != op->kernel || shape[3] != op->kernel)))
        return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: the weight's shape does not fit the op", where);
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
    int64_t n = 1, O = shape[0];
    for (int d = 0; d < rank; d++) n *= shape[d];
    op->weight = alloc(r, (size_t)n * sizeof(int32_t));
    op->bias = alloc(r, (size_t)O * sizeof(int32_t));
    op->bias_scale = alloc(r, (size_t)O * sizeof(float));
    if (!r->ok || !qat__h5r_ints(r, g, "weight", rank, shape, op->weight) ||
        !qat__h5r_floats(r, g, "weight_scale", rank, op->wq.pshape, op->wq.scale) ||
        !qat__h5r_ints(r, g, "weight_zero_point", rank, op->wq.pshape, op->wq.zero_point) ||
        !qat__h5r_ints(r, g, "bias", 1, &O, op->bias) || !qat__h5r_floats(r, g, "bias_scale", 1, &O, op->bias_scale))
        return false;
    return !qat__h5r_has_dataset(g, "multiplier") || get_multipliers(r, g, O, op);
}

static bool get_op(qat__h5r *r, hid_t ops, int i, qat_qop *op) {
    char gname[16], kind[32] = "", where[96];
    snprintf(gname, sizeof gname, "%d", i);
    hid_t g = qat__h5r_group(r, ops, gname);
    if (g < 0) return false;
    memset(op, 0, sizeof *op);
    qat__h5r_str(r, g, "kind", kind, sizeof kind);
    qat__h5r_str(r, g, "name", op->name, sizeof op->name);
    snprintf(where, sizeof where, "op %d (%s %s)", i, kind, op->name);
    op->kind = QAT_QOP_KIND_COUNT;
    for (int k = 0; k < QAT_QOP_KIND_COUNT; k++)
        if (!strcmp(kind, qat_qop_kind_str((qat_qop_kind)k))) op->kind = (qat_qop_kind)k;
    if (r->ok && op->kind == QAT_QOP_KIND_COUNT) qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown op kind", where);
    get_shape(r, g, "input_shape", &op->in_rank, op->in_shape);
    get_shape(r, g, "output_shape", &op->out_rank, op->out_shape);
    get_aparams(r, g, "output_", where, &op->output);
    op->act_min = (int32_t)qat__h5r_i64(r, g, "act_min", INT32_MIN, INT32_MAX);
    op->act_max = (int32_t)qat__h5r_i64(r, g, "act_max", INT32_MIN, INT32_MAX);
    bool windowed = op->kind == QAT_QOP_CONV2D || op->kind == QAT_QOP_MAXPOOL2D || op->kind == QAT_QOP_AVGPOOL2D;
    if (windowed) {
        op->kernel = (int)qat__h5r_i64(r, g, "kernel", 1, QAT_QOP_MAX_WINDOW);
        op->stride = (int)qat__h5r_i64(r, g, "stride", 1, QAT_QOP_MAX_WINDOW);
    }
    if (op->kind == QAT_QOP_CONV2D) op->pad = (int)qat__h5r_i64(r, g, "padding", 0, QAT_QOP_MAX_WINDOW);
    if (r->ok && (op->kind == QAT_QOP_LINEAR || op->kind == QAT_QOP_CONV2D)) {
        char act[16] = "";
        qat__h5r_str(r, g, "activation", act, sizeof act);
        op->act = !strcmp(act, "relu") ? QAT_ACT_RELU : !strcmp(act, "relu6") ? QAT_ACT_RELU6 : QAT_ACT_NONE;
        if (r->ok && op->act == QAT_ACT_NONE && strcmp(act, "none"))
            qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s: unknown activation %s", where, act);
        /* the weight's shape is checked against the op's, so its input
         * shape must be sane first */
        if (r->ok && ((op->kind == QAT_QOP_CONV2D) != (op->in_rank == 3) || op->out_rank != op->in_rank))
            qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: its input and output shapes do not fit a %s", where, kind);
        get_weight(r, g, where, op);
    }
    if (op->kind == QAT_QOP_AVGPOOL2D) get_multipliers(r, g, 1, op);
    H5Gclose(g);
    return r->ok;
}

static void read_qmodel(qat__h5r *r, qat_qmodel *q) {
    hid_t f = r->file;
    qat__h5r_str(r, f, "producer", q->producer, sizeof q->producer);
    qat__h5r_str(r, f, "training_config", q->config, sizeof q->config);
    long long n_ops = qat__h5r_i64(r, f, "n_ops", 1, QAT_QMODEL_MAX_OPS);
    q->n_outputs = qat__h5r_i64(r, f, "n_outputs", 1, MAX_DIM);
    get_shape(r, f, "input_shape", &q->in_rank, q->in_shape);
    hid_t g = qat__h5r_group(r, f, "input");
    if (g >= 0) get_aparams(r, g, "", "input", &q->input), H5Gclose(g);
    hid_t ops = qat__h5r_group(r, f, "ops");
    if (ops < 0) return;
    for (int i = 0; r->ok && i < n_ops; i++) get_op(r, ops, i, &q->ops[i]);
    H5Gclose(ops);
    q->n_ops = (int)n_ops;
}

qat_status qat_qmodel_load(qat_ctx *ctx, const char *path, qat_qmodel *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qmodel: NULL path or output");
    memset(out, 0, sizeof *out);
    qat__h5r r = {ctx, path, -1, true};
    H5E_BEGIN_TRY {
        if (qat__h5r_open(&r, QAT_QMODEL_FORMAT, "qat quantized model", QAT_QMODEL_VERSION, NULL))
            read_qmodel(&r, out);
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    if (!r.ok) return qat_ctx_status(ctx);
    qat_status st = qat_qmodel_validate(ctx, out);
    if (st != QAT_OK) qat__error_prefix(ctx, "%s: ", path);
    return st;
}
