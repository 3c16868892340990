/* Writing a .npy file (qat/data.h): numpy's format 1.0 — the magic, the
 * version, a little-endian header length, a Python dict literal padded
 * with spaces to a multiple of 64 bytes and ended by a newline, then the
 * array's bytes in C order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic.h"
#include "qat/data.h"

/* numpy's descr of each type, little-endian ('|' where byte order is moot) */
static const char *descr(qat_dtype t) {
    static const char *const d[QAT_DT_COUNT] = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8"};
    return (unsigned)t < QAT_DT_COUNT ? d[t] : NULL;
}

size_t qat_npy_header(char *buf, size_t len, qat_dtype t, int rank, const int64_t *shape) {
    if (!buf || !descr(t) || rank < 0 || rank > 8 || (rank && !shape)) return 0;
    char dict[512];
    int at = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr(t));
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0) return 0;
        at += snprintf(dict + at, sizeof dict - (size_t)at, "%lld%s", (long long)shape[d],
                       rank == 1 ? "," : d + 1 < rank ? ", " : "");
    }
    at += snprintf(dict + at, sizeof dict - (size_t)at, "), }");
    size_t pad = (64 - (10 + (size_t)at + 1) % 64) % 64, hlen = (size_t)at + pad + 1;
    if (10 + hlen > len) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff), buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)at);
    memset(buf + 10 + at, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    return 10 + hlen;
}

qat_status qat_npy_save(qat_ctx *ctx, const char *path, qat_dtype t, int rank, const int64_t *shape, const void *data) {
    char head[640];
    size_t hl = path ? qat_npy_header(head, sizeof head, t, rank, shape) : 0;
    if (!hl) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_npy_save: bad arguments");
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    size_t bytes = (size_t)n * qat_dtype_size(t), total = hl + bytes;
    if (bytes && !data) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_npy_save: NULL data for %lld values", (long long)n);
    unsigned char *buf = malloc(total);
    if (!buf) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory for %zu bytes", path, total);
    memcpy(buf, head, hl);
    if (bytes) memcpy(buf + hl, data, bytes); /* x86-64 and the Arm hosts are little-endian */
    qat_status st = qat__replace_file(ctx, path, buf, total);
    free(buf);
    return st;
}
