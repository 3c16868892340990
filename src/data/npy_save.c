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

qat_status qat_npy_save(qat_ctx *ctx, const char *path, qat_dtype t, int rank, const int64_t *shape, const void *data) {
    if (!path || !descr(t) || rank < 0 || rank > 8 || (rank && !shape))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_npy_save: bad arguments");
    char dict[512];
    int at = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr(t));
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_npy_save: negative dimension");
        n *= shape[d];
        at += snprintf(dict + at, sizeof dict - (size_t)at, "%lld%s", (long long)shape[d], rank == 1 ? "," : d + 1 < rank ? ", " : "");
    }
    at += snprintf(dict + at, sizeof dict - (size_t)at, "), }");
    size_t head = 10 + (size_t)at + 1, pad = (64 - head % 64) % 64, hlen = (size_t)at + pad + 1;
    size_t bytes = (size_t)n * qat_dtype_size(t), total = 10 + hlen + bytes;
    unsigned char *buf = malloc(total);
    if (!buf) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory for %zu bytes", path, total);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff), buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)at);
    memset(buf + 10 + at, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    if (bytes) memcpy(buf + 10 + hlen, data, bytes); /* x86-64 and the Arm hosts are little-endian */
    qat_status st = qat__replace_file(ctx, path, buf, total);
    free(buf);
    return st;
}
