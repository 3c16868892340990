/* IDX reader. Format (big-endian): 0x00 0x00 <type> <ndim>, then ndim
 * uint32 sizes, then the payload. zlib's gzread reads gzip and plain files
 * alike, and reports a damaged gzip stream. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "qat/data.h"

static qat_status gz_fail(qat_ctx *ctx, gzFile f, const char *path, const char *what) {
    int errnum = 0;
    const char *msg = f ? gzerror(f, &errnum) : "";
    return qat_ctx_fail(ctx, errnum < 0 ? QAT_ERR_IO : QAT_ERR_FORMAT, "%s: %s%s%s", path, what,
                        errnum < 0 ? ": " : "", errnum < 0 ? msg : "");
}

/* Reads exactly n bytes; returns bytes read, or -1 on a stream error. */
static int64_t read_full(gzFile f, uint8_t *buf, int64_t n) {
    int64_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1 << 30) ? (1u << 30) : (unsigned)(n - got);
        int r = gzread(f, buf + got, chunk);
        if (r < 0) return -1;
        if (r == 0) break;
        got += r;
    }
    return got;
}

void qat_idx_free(qat_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

qat_status qat_idx_read(qat_ctx *ctx, const char *path, qat_idx *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_idx_read: NULL argument");
    memset(out, 0, sizeof *out);
    gzFile f = gzopen(path, "rb");
    if (!f) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open", path);
    qat_status st = QAT_OK;
    uint8_t head[4];
    int64_t got = read_full(f, head, 4);
    if (got < 0) st = gz_fail(ctx, f, path, "damaged compressed stream");
    else if (got < 4) st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated header (%lld bytes)",
                                        path, (long long)got);
    else if (head[0] || head[1])
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: bad magic number 0x%02x%02x%02x%02x (not an IDX file)",
                          path, head[0], head[1], head[2], head[3]);
    else if (head[2] != 0x08)
        st = qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: IDX type code 0x%02x, only unsigned bytes (0x08) are supported",
                          path, head[2]);
    else if (head[3] < 1 || head[3] > 4)
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %d dimensions (1 to 4 supported)", path, head[3]);
    if (st == QAT_OK) {
        out->ndim = head[3];
        out->size = 1;
        uint8_t d[16];
        got = read_full(f, d, 4 * out->ndim);
        if (got != 4 * out->ndim) st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated dimensions", path);
        for (int i = 0; i < out->ndim && st == QAT_OK; i++) {
            uint32_t v = (uint32_t)d[4 * i] << 24 | (uint32_t)d[4 * i + 1] << 16 |
                         (uint32_t)d[4 * i + 2] << 8 | d[4 * i + 3];
            if (v == 0 || v > (1u << 28) || out->size > ((int64_t)1 << 34) / v)
                st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: implausible dimension %u at axis %d",
                                  path, v, i);
            out->dims[i] = v;
            out->size *= v;
        }
    }
    if (st == QAT_OK) {
        out->data = malloc((size_t)out->size);
        if (!out->data) st = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for %lld bytes", path,
                                          (long long)out->size);
    }
    if (st == QAT_OK) {
        got = read_full(f, out->data, out->size);
        uint8_t extra;
        if (got < 0) st = gz_fail(ctx, f, path, "damaged compressed stream");
        else if (got < out->size)
            st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated: the header promises %lld bytes of data, "
                              "the file has %lld", path, (long long)out->size, (long long)got);
        else if ((got = read_full(f, &extra, 1)) != 0)
            st = got < 0 ? gz_fail(ctx, f, path, "damaged compressed stream")
                         : qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: trailing bytes after the data", path);
    }
    gzclose(f);
    if (st != QAT_OK) qat_idx_free(out);
    return st;
}
