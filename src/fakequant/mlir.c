/* The MLIR quant dialect spelling of a uniform type (contract §1), parsed
 * by a small recursive-descent reader (the printer, qat_qtype_to_mlir, is
 * in src/core/mlir_text.c: the integer program's targets print types too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
