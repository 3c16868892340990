/* The MLIR quant dialect spelling of a uniform type (contract §1): printed
 * with the shortest float text that reads back to the same float32, and
 * parsed by a small recursive-descent reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Shortest of %.7g .. %.9g that reads back exactly. */
static void float_text(float v, char *buf, size_t len) {
    for (int digits = 7; digits <= 9; digits++) {
        snprintf(buf, len, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

typedef struct {
    char *buf;
    size_t len, n; /* n: characters the whole string needs */
} out_t;

static void put(out_t *o, const char *fmt, const char *s, long v) {
    char tmp[64];
    int k = s ? snprintf(tmp, sizeof tmp, fmt, s) : snprintf(tmp, sizeof tmp, fmt, v);
    if (o->n < o->len) snprintf(o->buf + o->n, o->len - o->n, "%s", tmp);
    o->n += (size_t)k;
}

/* Nested braces over the parameter shape: one level per dimension. */
static void put_params(out_t *o, const qat_qtype *q, int d, int64_t *at) {
    put(o, "{", "", 0);
    for (int64_t i = 0; i < q->pshape[d]; i++) {
        if (i) put(o, ", ", "", 0);
        if (d + 1 < q->rank && d + 1 < QAT_MAX_RANK) {
            put_params(o, q, d + 1, at);
        } else {
            char f[32];
            float_text(q->scale[*at], f, sizeof f);
            put(o, "%s", f, 0);
            put(o, ":%ld", NULL, q->zero_point[(*at)++]);
        }
    }
    put(o, "}", "", 0);
}

int qat_qtype_to_mlir(const qat_qtype *q, char *buf, size_t len) {
    out_t o = {buf, buf ? len : 0, 0};
    if (buf && len) buf[0] = '\0';
    if (!q || !q->scale) return -1;
    put(&o, "!quant.uniform<%s", q->is_signed ? "i" : "u", 0);
    put(&o, "%ld", NULL, q->bits);
    int32_t fmin, fmax;
    qat_storage_range(q->bits, q->is_signed, false, &fmin, &fmax);
    if (q->qmin != fmin || q->qmax != fmax) {
        put(&o, "<%ld", NULL, q->qmin);
        put(&o, ":%ld>", NULL, q->qmax);
    }
    put(&o, ":f32", "", 0);
    int axis = qat_qtype_axis(q);
    if (axis >= 0) {
        put(&o, ":%ld, ", NULL, axis);
        /* per-axis: one flat list over the quantized dimension */
        put(&o, "{", "", 0);
        for (int64_t i = 0; i < q->nparams; i++) {
            char f[32];
            float_text(q->scale[i], f, sizeof f);
            put(&o, i ? ", %s" : "%s", f, 0);
            put(&o, ":%ld", NULL, q->zero_point[i]);
        }
        put(&o, "}", "", 0);
    } else if (axis == -2) {
        put(&o, ":{", "", 0);
        bool first = true;
        for (int d = 0; d < q->rank; d++) {
            if (q->block[d] == q->shape[d]) continue;
            put(&o, first ? "%ld" : ", %ld", NULL, d);
            put(&o, ":%ld", NULL, (long)q->block[d]);
            first = false;
        }
        put(&o, "}, ", "", 0);
        int64_t at = 0;
        put_params(&o, q, 0, &at);
    } else {
        char f[32];
        float_text(q->scale[0], f, sizeof f);
        put(&o, ", %s", f, 0);
        put(&o, ":%ld", NULL, q->zero_point[0]);
    }
    put(&o, ">", "", 0);
    return (int)o.n;
}

/* ---- parsing --------------------------------------------------------------------- */

typedef struct {
    const char *s, *start;
    qat_ctx *ctx;
    bool failed;
} rd;

static void skip(rd *r) {
    while (*r->s == ' ' || *r->s == '\t' || *r->s == '\n') r->s++;
}

static bool fail(rd *r, const char *what) {
    if (!r->failed)
        qat_ctx_fail(r->ctx, QAT_ERR_FORMAT, "quant type: %s at offset %d of \"%s\"", what,
                     (int)(r->s - r->start), r->start);
    r->failed = true;
    return false;
}

static bool lit(rd *r, const char *t) {
    skip(r);
    size_t n = strlen(t);
    if (strncmp(r->s, t, n)) return false;
    r->s += n;
    return true;
}

static bool need(rd *r, const char *t) {
    if (lit(r, t)) return true;
    char msg[48];
    snprintf(msg, sizeof msg, "expected \"%s\"", t);
    return fail(r, msg);
}

static bool integer(rd *r, long *v) {
    skip(r);
    char *end;
    long x = strtol(r->s, &end, 10);
    if (end == r->s) return fail(r, "expected an integer");
    r->s = end;
    *v = x;
    return true;
}

/* scale[:zp] */
static bool pair(rd *r, float *scale, int32_t *zp) {
    skip(r);
    char *end;
    float s = strtof(r->s, &end);
    if (end == r->s) return fail(r, "expected a scale");
    r->s = end;
    long z = 0;
    if (lit(r, ":") && !integer(r, &z)) return false;
    if (!(s > 0) || z < -65536 || z > 65536) return fail(r, "scale must be > 0, zero point in range");
    *scale = s;
    *zp = (int32_t)z;
    return true;
}

/* A brace list of pairs or nested lists, flattened in order into at most max. */
static bool pairs(rd *r, float *sc, int32_t *zp, int64_t max, int64_t *n) {
    if (!need(r, "{")) return false;
    do {
        if (lit(r, "{")) {
            r->s--;
            if (!pairs(r, sc, zp, max, n)) return false;
        } else {
            if (*n >= max) return fail(r, "more scales than blocks");
            if (!pair(r, &sc[*n], &zp[*n])) return false;
            ++*n;
        }
    } while (lit(r, ","));
    return need(r, "}");
}

qat_status qat_qtype_from_mlir(qat_ctx *ctx, const char *text, int rank, const int64_t *shape,
                               qat_qtype *out) {
    return qat_qtype_from_mlir_blocks(ctx, text, rank, shape, false, out);
}

qat_status qat_qtype_from_mlir_blocks(qat_ctx *ctx, const char *text, int rank, const int64_t *shape, bool ragged,
                                      qat_qtype *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!text || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "quant type: NULL argument");
    rd r = {text, text, ctx, false};
    if (!need(&r, "!quant.uniform<")) return QAT_ERR_FORMAT;
    bool is_signed;
    if (lit(&r, "ui") || lit(&r, "u")) is_signed = false;
    else if (lit(&r, "i")) is_signed = true;
    else return fail(&r, "expected a storage type (i8, u8, ...)"), QAT_ERR_FORMAT;
    long bits, lo = 0, hi = 0;
    if (!integer(&r, &bits)) return QAT_ERR_FORMAT;
    bool ranged = lit(&r, "<");
    if (ranged && !(integer(&r, &lo) && need(&r, ":") && integer(&r, &hi) && need(&r, ">")))
        return QAT_ERR_FORMAT;
    if (!need(&r, ":") || !need(&r, "f32")) return QAT_ERR_FORMAT;
    int64_t block[QAT_MAX_RANK] = {0};
    bool per_tensor = true;
    if (lit(&r, ":")) {
        per_tensor = false;
        if (lit(&r, "{")) {
            do {
                long d, b;
                if (!integer(&r, &d) || !need(&r, ":") || !integer(&r, &b)) return QAT_ERR_FORMAT;
                if (d < 0 || d >= rank || b < 1) return fail(&r, "block dimension outside the tensor"), QAT_ERR_FORMAT;
                if (block[d]) return fail(&r, "a dimension given two block sizes"), QAT_ERR_FORMAT;
                block[d] = b;
            } while (lit(&r, ","));
            if (!need(&r, "}")) return QAT_ERR_FORMAT;
        } else {
            long axis;
            if (!integer(&r, &axis)) return QAT_ERR_FORMAT;
            if (axis < 0 || axis >= rank) return fail(&r, "quantized dimension outside the tensor"), QAT_ERR_FORMAT;
            block[axis] = 1;
        }
    }
    if (!need(&r, ",")) return QAT_ERR_FORMAT;
    bool narrow = false;
    if (ranged) {
        int32_t fmin, fmax;
        if (qat_storage_range((int)bits, is_signed, false, &fmin, &fmax) != QAT_OK)
            return fail(&r, "bad storage width"), QAT_ERR_FORMAT;
        narrow = is_signed && lo == fmin + 1 && hi == fmax;
        if (!narrow && !(lo == fmin && hi == fmax))
            return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "quant type: storage range <%ld:%ld> is "
                                "neither full nor narrow", lo, hi);
    }
    qat_status st = qat_qtype_init_blocks(ctx, out, (int)bits, is_signed, narrow, rank, shape, block, ragged);
    if (st != QAT_OK) return st;
    int64_t n = 0;
    if (per_tensor) {
        if (!pair(&r, &out->scale[0], &out->zero_point[0])) return QAT_ERR_FORMAT;
        n = 1;
    } else if (!pairs(&r, out->scale, out->zero_point, out->nparams, &n)) {
        return QAT_ERR_FORMAT;
    }
    if (n != out->nparams)
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "quant type: %lld scales for %lld blocks in \"%s\"",
                            (long long)n, (long long)out->nparams, text);
    for (int64_t i = 0; i < n; i++)
        if (out->zero_point[i] < out->qmin || out->zero_point[i] > out->qmax)
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "quant type: zero point %d outside [%d, %d]",
                                out->zero_point[i], out->qmin, out->qmax);
    if (!need(&r, ">")) return QAT_ERR_FORMAT;
    skip(&r);
    if (*r.s) return fail(&r, "trailing text"), QAT_ERR_FORMAT;
    return QAT_OK;
}
