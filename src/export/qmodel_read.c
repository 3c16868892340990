/* The quantized model file in HDF5: checked reading (versions 1 to 5).
 * Layout: docs/quantized-model-format.md; the writer is qmodel_write.c.
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

/* ---- reading -------------------------------------------------------------------------- */

static bool unpack_weights(const uint8_t *in, int64_t n, int pb, bool is_signed, int32_t *v) {
    int per = 8 / pb;
    for (int64_t i = 0; i < n; i++) {
        int32_t x = (in[i / per] >> (i % per * pb)) & ((1 << pb) - 1);
        v[i] = is_signed && x >= 1 << (pb - 1) ? x - (1 << pb) : x;
    }
    return n % per == 0 || (in[n / per] >> (n % per * pb)) == 0;
}


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

/* Compact block scales (version 4; docs/quantized-model-format.md): the
 * row scales and the packed sub-scales make the block scales (zero points
 * 0); the bias scales and multipliers are derived once the tensors'
 * scales are known (finish_subchannel), and qat_qmodel_check checks the
 * ranges and the sums' bounds. A file that also gives what is derived
 * would hold two records that could disagree: refused. */
static bool get_compact(qat__h5r *r, hid_t g, const char *where, qat_qop *op) {
    static const char *const derived[] = {"weight_scale", "weight_zero_point", "weight_mlir", "bias_scale",
                                          "multiplier", "shift"};
    for (size_t i = 0; i < sizeof derived / sizeof *derived; i++)
        if (qat__h5r_has_dataset(g, derived[i]))
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: compact block scales (weight_subscale) and a %s dataset: the "
                                 "file's rule derives it", where, derived[i]);
    qat_qtype *q = &op->wq;
    if (!qat_qop_subchannel(op))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: compact block scales on weights that are not sub-channel", where);
    hid_t set = H5Dopen2(g, "weight_subscale", H5P_DEFAULT);
    if (set < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: cannot open weight_subscale", where);
    int bits = (int)qat__h5r_i64(r, set, "bits", 4, 8);
    H5Dclose(set);
    if (!r->ok) return false;
    int64_t n = q->nparams, pb = bits <= 4 ? 4 : 8, bytes = (n * pb + 7) / 8, rows = q->pshape[0], J = n / rows;
    uint8_t *packed = qat_ctx_alloc(r->ctx, QAT_MEM_STEP, (size_t)bytes);
    op->sub_bits = bits;
    op->subscale = alloc(r, n, sizeof(int32_t));
    op->row_scale = alloc(r, rows, sizeof(float)); /* bias_scale: get_weight's, filled by finish_subchannel */
    if (!packed || !r->ok) return r->ok = false;
    if (!qat__h5r_u8s(r, g, "weight_subscale", bytes, packed)) return false;
    if (!unpack_weights(packed, n, (int)pb, false, op->subscale))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: weight_subscale's last byte has bits set past the last sub-scale", where);
    if (!qat__h5r_floats(r, g, "weight_row_scale", 1, &rows, op->row_scale) ||
        !(op->bias = get_ints(r, g, "bias", q->shape[0])))
        return false;
    for (int64_t p = 0; p < n; p++)
        if (op->subscale[p] < 1 || op->subscale[p] >= 1 << bits)
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: sub-scale %lld is %d, outside [1, %d]", where, (long long)p,
                                 op->subscale[p], (1 << bits) - 1);
    for (int64_t p = 0; p < n; p++) { /* a float times an integer below 2^8; checked exact by qat_qmodel_check */
        q->scale[p] = op->row_scale[p / J] * (float)op->subscale[p];
        q->zero_point[p] = 0;
    }
    op->n_mult = (int)q->shape[0];
    op->multiplier = alloc(r, q->shape[0], sizeof(int32_t));
    op->shift = alloc(r, q->shape[0], sizeof(int32_t));
    return r->ok;
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
    if (pb && pb != qat__packed_bits(bits))
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
    for (int d = 0; d < trank; d++) { /* each entry at least 1, so a product past n stops before it can overflow */
        b[d] = block[d], ts[d] = tsh[d];
        tn = tn <= n ? tn * tsh[d] : tn;
    }
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
    if (version >= 4 && qat__h5r_has_dataset(g, "weight_subscale")) return get_compact(r, g, where, op);
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

/* An average pool's rule: `rounding` "multiplier" (or absent: the
 * requantization) or "divide" (keeps_scale: the input's quantization, no
 * multiplier; a file that gave one too would run that multiplier in a
 * reader that predates the attribute, so it is refused). */
static bool get_rounding(qat__h5r *r, hid_t g, const char *where, qat_qop *op) {
    if (!r->ok || !qat__h5r_has_attr(g, "rounding")) return r->ok;
    char v[32] = "";
    if (!qat__h5r_str(r, g, "rounding", v, sizeof v)) return false;
    if (strcmp(v, "multiplier") && strcmp(v, "divide"))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: rounding \"%s\" is neither \"multiplier\" nor \"divide\"", where,
                             qat_name_valid(v, NULL, 0) ? v : "(not a name)");
    op->keeps_scale = !strcmp(v, "divide");
    if (op->keeps_scale && (qat__h5r_has_dataset(g, "multiplier") || qat__h5r_has_dataset(g, "shift")))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: rounding \"divide\" takes no multiplier or shift, and the op has one",
                             where);
    return true;
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
        if (op->kind == QAT_QOP_AVGPOOL2D && get_rounding(r, g, where, op) && !op->keeps_scale) get_multipliers(r, g, 1, op);
        break;
    case QAT_QOP_GLOBAL_AVGPOOL:
        if (get_rounding(r, g, where, op) && !op->keeps_scale) get_multipliers(r, g, 1, op);
        break;
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
        const qat_qtensor *in = &q->tensors[op->inputs[0]];
        if (op->subscale) {
            if (!qat__sc_compact_derive(op, in->q.scale, q->tensors[op->output].q.scale, op->bias_scale, op->multiplier,
                                        op->shift))
                qat__h5r_fail(r, QAT_ERR_FORMAT, "op %d (%s %s): its output multiplier is not a finite number", i,
                              qat_qop_kind_str(op->kind), op->name);
            continue;
        }
        if (!qat_qop_subchannel(op) || !op->block_multiplier) continue;
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

/* Version 5's root attribute requant_rounding: "double" or "single" (qat_rounding). */
static void read_rounding(qat__h5r *r, qat_qmodel *q) {
    char text[16];
    if (!qat__h5r_str(r, r->file, "requant_rounding", text, sizeof text)) return;
    if (!qat_rounding_parse(text, &q->rounding))
        qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute requant_rounding: \"%s\" (double or single)", text);
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
            if (version >= 5) read_rounding(&r, out);
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

