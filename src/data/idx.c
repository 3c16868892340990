/* IDX reader, written to survive hostile files. Format (big-endian): 0x00
 * 0x00 <type> <ndim>, then ndim uint32 sizes, then the payload.
 *
 * A file that starts with the gzip magic (1f 8b) goes through zlib's
 * inflate, any other file is read as it is. The reader drives inflate
 * itself rather than through gzread, because gzread silently drops bytes
 * that follow the last gzip member, and a file with a tail nobody checked
 * is exactly what the reader must refuse. Memory follows the data that
 * arrives, not the header's promise: a 16-byte file that claims gigabytes
 * costs a megabyte, not the claim. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/dataset_internal.h"
#include "qat/data.h"

#define IN_CHUNK ((size_t)1 << 16)        /* compressed bytes per fread: inflate's input */
#define FIRST_ALLOC ((int64_t)1 << 20)    /* the payload buffer starts at this, doubles after */
#define MAX_DIM ((uint32_t)1 << 28)       /* one dimension; see QAT_IDX_MAX_BYTES for all */
#define MAX_STEP ((int64_t)1 << 30)       /* bytes per fread / inflate call: fits uInt */

/* A byte source: the file as it is, or the file through inflate. The
 * lookahead z.next_in[0..z.avail_in) serves both, so the two bytes read to
 * sniff the gzip magic are not lost on a pipe, where there is no rewind. */
typedef struct {
    qat_ctx *ctx;
    const char *path;
    FILE *f;
    bool eof;       /* the file has no more bytes (what is in z.next_in aside) */
    bool gz;        /* the file started with 1f 8b */
    bool z_ready;   /* inflateInit2 succeeded: inflateEnd is owed */
    bool z_done;    /* the last gzip member ended and no byte follows it */
    z_stream z;
    uint8_t *in;    /* [IN_CHUNK] */
} idx_src;

static qat_status read_error(idx_src *s) {
    return qat_ctx_fail(s->ctx, QAT_ERR_IO, "%s: read error: %s", s->path, strerror(errno));
}

/* Moves the unread lookahead to the front of the buffer and reads the file
 * into the rest of it. */
static qat_status fill(idx_src *s) {
    if (s->eof) return QAT_OK;
    if (s->z.avail_in && s->z.next_in != s->in) memmove(s->in, s->z.next_in, s->z.avail_in);
    s->z.next_in = s->in;
    size_t want = IN_CHUNK - s->z.avail_in;
    errno = 0;
    size_t got = fread(s->in + s->z.avail_in, 1, want, s->f);
    s->z.avail_in += (uInt)got;
    if (got < want) {
        if (ferror(s->f)) return read_error(s);
        s->eof = true;
    }
    return QAT_OK;
}

/* regular: only a regular file (a data set's folder); otherwise a pipe
 * too (process substitution), read as a stream, never seeked. */
static qat_status src_open(idx_src *s, qat_ctx *ctx, const char *path, bool regular) {
    memset(s, 0, sizeof *s);
    s->ctx = ctx, s->path = path;
    errno = 0;
    if (regular) s->f = qat__fopen_regular(ctx, path);
    else if (!(s->f = fopen(path, "rb"))) qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!s->f) return qat_ctx_status(ctx);
    s->in = malloc(IN_CHUNK);
    if (!s->in) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for the read buffer", path);
    s->z.next_in = s->in;
    qat_status st = fill(s);
    if (st != QAT_OK) return st;
    s->gz = s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (!s->gz) return QAT_OK;
    /* 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer), nothing else */
    if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK)
        return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: cannot start zlib's inflate", path);
    s->z_ready = true;
    return QAT_OK;
}

static void src_close(idx_src *s) {
    if (s->z_ready) inflateEnd(&s->z);
    free(s->in);
    if (s->f) fclose(s->f);
}

/* After a gzip member's end: another member may follow (gzip allows them
 * concatenated, as `cat a.gz b.gz` makes), or nothing; anything else is
 * an error. Two bytes decide, so make sure two are here if the file has
 * them. */
static qat_status next_member(idx_src *s) {
    qat_status st = s->z.avail_in < 2 ? fill(s) : QAT_OK;
    if (st != QAT_OK) return st;
    if (s->z.avail_in == 0) {
        s->z_done = true;
        return QAT_OK;
    }
    if (s->z.avail_in < 2 || s->z.next_in[0] != 0x1f || s->z.next_in[1] != 0x8b)
        return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: trailing bytes after the gzip stream", s->path);
    if (inflateReset(&s->z) != Z_OK)
        return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: damaged gzip stream", s->path);
    return QAT_OK;
}

/* Up to n decompressed bytes into buf; *got < n only at the end of the data. */
static qat_status read_gz(idx_src *s, uint8_t *buf, int64_t n, int64_t *got) {
    while (*got < n && !s->z_done) {
        qat_status st = s->z.avail_in == 0 ? fill(s) : QAT_OK;
        if (st != QAT_OK) return st;
        int64_t room = n - *got < MAX_STEP ? n - *got : MAX_STEP;
        s->z.next_out = buf + *got;
        s->z.avail_out = (uInt)room;
        int ret = inflate(&s->z, Z_NO_FLUSH);
        *got += room - (int64_t)s->z.avail_out;
        if (ret == Z_STREAM_END) st = next_member(s);
        else if (ret == Z_BUF_ERROR && s->z.avail_in == 0 && s->eof)
            /* no progress, no input left: the file stops inside a member */
            st = qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: truncated gzip stream (the file ends inside "
                              "the compressed data)", s->path);
        else if (ret == Z_MEM_ERROR)
            st = qat_ctx_fail(s->ctx, QAT_ERR_NOMEM, "%s: no memory for zlib's inflate", s->path);
        else if (ret != Z_OK) /* Z_BUF_ERROR with input left cannot happen: stop rather than spin */
            st = qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: damaged gzip stream: %s", s->path,
                              s->z.msg ? s->z.msg : "inflate failed");
        if (st != QAT_OK) return st;
    }
    return QAT_OK;
}

/* The same for a plain file: the lookahead first, then the file. */
static qat_status read_raw(idx_src *s, uint8_t *buf, int64_t n, int64_t *got) {
    int64_t take = (int64_t)s->z.avail_in < n - *got ? (int64_t)s->z.avail_in : n - *got;
    if (take > 0) {
        memcpy(buf + *got, s->z.next_in, (size_t)take);
        s->z.next_in += take;
        s->z.avail_in -= (uInt)take;
        *got += take;
    }
    while (*got < n && !s->eof) {
        size_t want = (size_t)(n - *got < MAX_STEP ? n - *got : MAX_STEP);
        errno = 0;
        size_t r = fread(buf + *got, 1, want, s->f);
        *got += (int64_t)r;
        if (r < want) {
            if (ferror(s->f)) return read_error(s);
            s->eof = true;
        }
    }
    return QAT_OK;
}

static qat_status src_read(idx_src *s, uint8_t *buf, int64_t n, int64_t *got) {
    *got = 0;
    return s->gz ? read_gz(s, buf, n, got) : read_raw(s, buf, n, got);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The magic, the type, the dimensions; out->size is their product, checked
 * against the limits before each multiplication so it never overflows. */
static qat_status read_header(idx_src *s, qat_idx *out) {
    const char *path = s->path;
    uint8_t head[4 + 16];
    int64_t got;
    qat_status st = src_read(s, head, 4, &got);
    if (st != QAT_OK) return st;
    if (got < 4) return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: truncated header (%lld bytes)", path, (long long)got);
    if (head[0] || head[1])
        return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: bad magic number 0x%02x%02x%02x%02x (not an IDX file)",
                            path, head[0], head[1], head[2], head[3]);
    if (head[2] != 0x08)
        return qat_ctx_fail(s->ctx, QAT_ERR_UNSUPPORTED, "%s: IDX type code 0x%02x, only unsigned bytes "
                            "(0x08) are supported", path, head[2]);
    int ndim = head[3];
    if (ndim < 1 || ndim > 4)
        return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: %d dimensions (1 to 4 supported)", path, ndim);
    st = src_read(s, head + 4, 4 * ndim, &got);
    if (st != QAT_OK) return st;
    if (got < 4 * ndim) return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: truncated dimensions", path);
    int64_t size = 1;
    for (int i = 0; i < ndim; i++) {
        uint32_t v = be32(head + 4 + 4 * i);
        if (v == 0 || v > MAX_DIM)
            return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: implausible dimension %u at axis %d", path, v, i);
        if (size > QAT_IDX_MAX_BYTES / v)
            return qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: dimension %u at axis %d takes the payload "
                                "past %lld bytes (the reader's limit)", path, v, i, (long long)QAT_IDX_MAX_BYTES);
        out->dims[i] = v;
        size *= v;
    }
    out->ndim = ndim;
    out->size = size;
    return QAT_OK;
}

/* Grows out->data to cap bytes (realloc keeps what arrived). */
static qat_status grow(idx_src *s, qat_idx *out, int64_t cap) {
    void *p = (uint64_t)cap <= SIZE_MAX ? realloc(out->data, (size_t)cap) : NULL;
    if (!p) return qat_ctx_fail(s->ctx, QAT_ERR_NOMEM, "%s: no memory for %lld bytes", s->path, (long long)cap);
    out->data = p;
    return QAT_OK;
}

/* The payload, into a buffer that doubles as data arrives (up to the
 * promised size), so a file that lies about its size costs at most twice
 * what it really holds, plus FIRST_ALLOC. */
static qat_status read_payload(idx_src *s, qat_idx *out) {
    int64_t want = out->size, have = 0, cap = want < FIRST_ALLOC ? want : FIRST_ALLOC;
    qat_status st = grow(s, out, cap);
    while (st == QAT_OK && have < want) {
        if (have == cap) {
            cap = cap > want / 2 ? want : 2 * cap;
            st = grow(s, out, cap);
            if (st != QAT_OK) break;
        }
        int64_t room = cap - have, got;
        st = src_read(s, out->data + have, room, &got);
        have += got;
        if (got < room) break; /* the data ended */
    }
    if (st == QAT_OK && have < want)
        st = qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: truncated: the header promises %lld bytes of data, "
                          "the file has %lld", s->path, (long long)want, (long long)have);
    return st;
}

/* Nothing may follow the payload: neither decompressed bytes nor, for
 * gzip, bytes after the last member (read_gz checks those). */
static qat_status expect_end(idx_src *s) {
    uint8_t extra;
    int64_t got;
    qat_status st = src_read(s, &extra, 1, &got);
    if (st == QAT_OK && got)
        st = qat_ctx_fail(s->ctx, QAT_ERR_FORMAT, "%s: trailing bytes after the data", s->path);
    return st;
}

void qat_idx_free(qat_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

static qat_status read_idx(qat_ctx *ctx, const char *path, bool regular, qat_idx *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_idx_read: NULL argument");
    memset(out, 0, sizeof *out);
    idx_src s;
    qat_status st = src_open(&s, ctx, path, regular);
    if (st == QAT_OK) st = read_header(&s, out);
    if (st == QAT_OK) st = read_payload(&s, out);
    if (st == QAT_OK) st = expect_end(&s);
    src_close(&s);
    if (st != QAT_OK) qat_idx_free(out);
    return st;
}

qat_status qat_idx_read(qat_ctx *ctx, const char *path, qat_idx *out) { return read_idx(ctx, path, false, out); }

qat_status qat__idx_read_regular(qat_ctx *ctx, const char *path, qat_idx *out) { return read_idx(ctx, path, true, out); }
