/* The MLIR quant dialect spelling of a uniform type (contract §1; qat/core.h):
 * printed with the shortest float text that reads back to the same float32.
 * In core because the type is, and the integer program's targets (ONNX's
 * metadata, the quantized file) print it without the training side; the
 * parser, which allocates the type, is in src/fakequant/mlir.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/core.h"

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
