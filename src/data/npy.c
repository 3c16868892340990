/* NumPy .npy files, read as hostile input, and data sets made of them
 * (a directory of <split>_x.npy, <split>_y.npy, <split>_anomaly.npy).
 *
 * A .npy file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), the
 * header's length (2 bytes little-endian in 1.0, 4 bytes after), the
 * header: a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (N, ...), } padded with spaces and ended by '\n', then the
 * payload. The parser here takes exactly that grammar: the three keys,
 * each once, nothing else; a shape that is a tuple of decimal integers
 * (one element needs its comma: "(5)" is not a tuple); the dtypes of
 * qat_dtype in little-endian (or byte-order-free) spelling, and bool
 * ('|b1'), which reads as uint8. Before a byte
 * of payload is read, the file's size must be exactly what the header
 * promises: a payload shorter or longer than the shape says is refused,
 * and memory is never sized by a header that the file does not back. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset_internal.h"

#define NPY_MAX_HEADER 10000 /* bytes of header text (numpy's own reader stops at this too) */
#define NPY_MAX_DIM ((int64_t)1 << 40) /* one shape entry, before the data set's limits apply */

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

bool qat__is_npy(const char *path) {
    FILE *f = qat__fopen_regular(NULL, path);
    char head[6];
    bool is = f && fread(head, 1, 6, f) == 6 && !memcmp(head, magic, 6);
    if (f) fclose(f);
    return is;
}

/* ---- the header's dict ------------------------------------------------------------------ */

typedef struct {
    const char *begin;   /* the header text */
    const char *s, *end; /* the text left to parse */
    qat_ctx *ctx;
    const char *path;
} lexer;

static qat_status bad(lexer *lx, const char *what) {
    return qat_ctx_fail(lx->ctx, QAT_ERR_FORMAT, "%s: bad .npy header: %s (at byte %ld of the header text)",
                        lx->path, what, (long)(lx->s - lx->begin));
}

static void skip_ws(lexer *lx) {
    while (lx->s < lx->end && (*lx->s == ' ' || *lx->s == '\t')) lx->s++;
}

static bool accept(lexer *lx, char c) {
    skip_ws(lx);
    if (lx->s < lx->end && *lx->s == c) {
        lx->s++;
        return true;
    }
    return false;
}

/* A quoted string ('...' or "...", no escapes) of fewer than len bytes. */
static bool string(lexer *lx, char *out, size_t len) {
    skip_ws(lx);
    if (lx->s >= lx->end || (*lx->s != '\'' && *lx->s != '"')) return false;
    char q = *lx->s++;
    size_t n = 0;
    while (lx->s < lx->end && *lx->s != q) {
        if (*lx->s == '\\' || n + 1 >= len) return false;
        out[n++] = *lx->s++;
    }
    if (lx->s >= lx->end) return false;
    lx->s++;
    out[n] = '\0';
    return true;
}

/* A decimal integer without sign or leading zeros, at most NPY_MAX_DIM. */
static bool integer(lexer *lx, int64_t *v) {
    skip_ws(lx);
    const char *p = lx->s;
    int64_t x = 0;
    while (lx->s < lx->end && *lx->s >= '0' && *lx->s <= '9') {
        x = x * 10 + (*lx->s - '0');
        if (x > NPY_MAX_DIM) return false;
        lx->s++;
    }
    size_t digits = (size_t)(lx->s - p);
    if (digits == 0 || (digits > 1 && *p == '0')) return false;
    *v = x;
    return true;
}

static bool word(lexer *lx, const char *w) {
    skip_ws(lx);
    size_t n = strlen(w);
    if ((size_t)(lx->end - lx->s) < n || memcmp(lx->s, w, n)) return false;
    /* a whole word: "Falsey" is not False */
    const char *after = lx->s + n;
    if (after < lx->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                            (*after >= '0' && *after <= '9') || *after == '_'))
        return false;
    lx->s += n;
    return true;
}

/* The dtypes, as numpy spells them on a little-endian machine; the byte
 * order of a one-byte type does not matter. */
static qat_status parse_descr(lexer *lx, const char *d, qat_dtype *t) {
    static const struct {
        char kind;
        int size;
        qat_dtype t;
    } types[] = {{'u', 1, QAT_DT_U8},  {'i', 1, QAT_DT_I8},  {'u', 2, QAT_DT_U16}, {'i', 2, QAT_DT_I16},
                 {'u', 4, QAT_DT_U32}, {'i', 4, QAT_DT_I32}, {'u', 8, QAT_DT_U64}, {'i', 8, QAT_DT_I64},
                 {'f', 4, QAT_DT_F32}, {'f', 8, QAT_DT_F64}};
    const char *want = "want one of |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8 <f4 <f8 |b1";
    size_t n = strlen(d);
    char order = n ? d[0] : 0, kind = n > 1 ? d[1] : 0;
    int size = n == 3 && d[2] >= '1' && d[2] <= '9' ? d[2] - '0' : -1;
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not supported (%s)", lx->path, d,
                            want);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        if (types[i].kind != kind || types[i].size != size) continue;
        if (size > 1 && order == '>')
            return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is big-endian: save it "
                                "little-endian (numpy: a.astype(a.dtype.newbyteorder('<')))", lx->path, d);
        if (size > 1 && order != '<')
            return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: .npy dtype '%s' does not say its byte order "
                                "(numpy writes '<' on little-endian machines)", lx->path, d);
        *t = types[i].t;
        return QAT_OK;
    }
    if (kind == 'b' && size == 1) { /* numpy's bool: bytes 0 and 1 */
        *t = QAT_DT_U8;
        return QAT_OK;
    }
    if (kind == 'f' && size == 2)
        return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: .npy dtype '%s' (float16) is not supported: store "
                            "float32 (numpy: a.astype(np.float32))", lx->path, d);
    return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not supported (%s)", lx->path, d, want);
}

/* (d0, d1, ...): Python's tuple syntax, ints only. */
static bool parse_shape(lexer *lx, qat__npy_header *h) {
    if (!accept(lx, '(')) return false;
    h->rank = 0;
    if (accept(lx, ')')) return true;
    for (;;) {
        int64_t v;
        if (!integer(lx, &v)) return false;
        if (h->rank == QAT_DATA_MAX_RANK + 1) {
            h->rank++; /* too many: reported by the caller */
            return false;
        }
        h->shape[h->rank++] = v;
        if (accept(lx, ')')) return h->rank > 1; /* "(5)" is an int, not a tuple */
        if (!accept(lx, ',')) return false;
        if (accept(lx, ')')) return true;
    }
}

static qat_status parse_dict(lexer *lx, qat__npy_header *h) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false, fortran = false;
    char descr[16] = "";
    if (!accept(lx, '{')) return bad(lx, "it does not start with '{'");
    while (!accept(lx, '}')) {
        char key[32];
        if (!string(lx, key, sizeof key)) return bad(lx, "a key is not a short quoted string");
        if (!accept(lx, ':')) return bad(lx, "no ':' after a key");
        if (!strcmp(key, "descr")) {
            if (seen_descr) return bad(lx, "'descr' twice");
            seen_descr = true;
            skip_ws(lx);
            if (lx->s < lx->end && *lx->s == '[')
                return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: a structured .npy array (a record dtype): "
                                    "save each field as its own plain array", lx->path);
            if (!string(lx, descr, sizeof descr)) return bad(lx, "'descr' is not a short quoted string");
        } else if (!strcmp(key, "fortran_order")) {
            if (seen_fortran) return bad(lx, "'fortran_order' twice");
            seen_fortran = true;
            if (word(lx, "True")) fortran = true;
            else if (!word(lx, "False")) return bad(lx, "'fortran_order' is neither True nor False");
        } else if (!strcmp(key, "shape")) {
            if (seen_shape) return bad(lx, "'shape' twice");
            seen_shape = true;
            if (!parse_shape(lx, h)) {
                if (h->rank > QAT_DATA_MAX_RANK + 1)
                    return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: the .npy array has more than %d "
                                        "dimensions", lx->path, QAT_DATA_MAX_RANK + 1);
                return bad(lx, "'shape' is not a tuple of non-negative integers");
            }
        } else {
            return qat_ctx_fail(lx->ctx, QAT_ERR_FORMAT, "%s: bad .npy header: unknown key '%s' (the keys are "
                                "'descr', 'fortran_order' and 'shape')", lx->path, key);
        }
        if (!accept(lx, ',')) {
            if (!accept(lx, '}')) return bad(lx, "no ',' or '}' after a value");
            break;
        }
    }
    if (!seen_descr || !seen_fortran || !seen_shape)
        return qat_ctx_fail(lx->ctx, QAT_ERR_FORMAT, "%s: bad .npy header: no '%s' key", lx->path,
                            !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
    /* after the dict: the padding (spaces), then the header's last byte '\n' */
    while (lx->s < lx->end - 1 && *lx->s == ' ') lx->s++;
    if (lx->s != lx->end - 1 || *lx->s != '\n') return bad(lx, "the dict is not followed by spaces and a final '\\n'");
    qat_status st = parse_descr(lx, descr, &h->dtype);
    if (st != QAT_OK) return st;
    if (fortran)
        return qat_ctx_fail(lx->ctx, QAT_ERR_UNSUPPORTED, "%s: the .npy array is in Fortran order: save it in C "
                            "order (numpy: np.save(path, np.ascontiguousarray(a)))", lx->path);
    return QAT_OK;
}

/* ---- a file ----------------------------------------------------------------------------- */

static uint32_t le(const uint8_t *p, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

qat_status qat__npy_header_read(qat_ctx *ctx, const char *path, qat__npy_header *h) {
    memset(h, 0, sizeof *h);
    static const union {
        uint16_t u;
        uint8_t b[2];
    } probe = {1};
    if (!probe.b[0])
        return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: .npy files are read on little-endian machines only", path);
    FILE *f = qat__fopen_regular(ctx, path);
    if (!f) return qat_ctx_status(ctx);
    struct stat sb;
    qat_status st = QAT_OK;
    uint8_t pre[12];
    char *text = NULL;
    size_t got = 0;
    if (fstat(fileno(f), &sb) != 0) {
        st = qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    got = fread(pre, 1, 8, f);
    if (got < 6 || memcmp(pre, magic, 6)) {
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    if (got < 8) {
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated .npy header (%zu bytes)", path, got);
        goto done;
    }
    h->major = pre[6], h->minor = pre[7];
    if (h->minor != 0 || h->major < 1 || h->major > 3) {
        st = qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: .npy format version %d.%d (this reader knows 1.0, 2.0 and "
                          "3.0)", path, h->major, h->minor);
        goto done;
    }
    int lenbytes = h->major == 1 ? 2 : 4;
    if (fread(pre + 8, 1, (size_t)lenbytes, f) != (size_t)lenbytes) {
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated .npy header (no header length)", path);
        goto done;
    }
    uint32_t hlen = le(pre + 8, lenbytes);
    if (hlen == 0 || hlen > NPY_MAX_HEADER) {
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: .npy header length %u (want 1 to %d)", path, hlen, NPY_MAX_HEADER);
        goto done;
    }
    if (!(text = malloc(hlen))) {
        st = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for the .npy header", path);
        goto done;
    }
    if (fread(text, 1, hlen, f) != hlen) {
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: truncated .npy header (the file ends inside it)", path);
        goto done;
    }
    for (uint32_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t')) {
            st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: bad .npy header: byte %u is 0x%02x (the header is ASCII "
                              "text)", path, i, c);
            goto done;
        }
    }
    lexer lx = {text, text, text + hlen, ctx, path};
    if ((st = parse_dict(&lx, h)) != QAT_OK) goto done;
    /* the payload: exactly count · size bytes after the header */
    int64_t size = (int64_t)qat_dtype_size(h->dtype), count = 1;
    for (int i = 0; i < h->rank; i++) {
        if (h->shape[i] > 0 && count > ((int64_t)1 << 62) / size / h->shape[i]) {
            st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: the .npy shape promises more than 2^62 bytes", path);
            goto done;
        }
        count *= h->shape[i];
    }
    h->count = count;
    h->data_offset = 8 + lenbytes + (int64_t)hlen;
    int64_t want = h->data_offset + count * size;
    if ((int64_t)sb.st_size != want) {
        char sh[160];
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: the .npy payload is %lld bytes but shape %s of %s needs %lld "
                          "(%s)", path, (long long)sb.st_size - h->data_offset, qat__shape_str(sh, sizeof sh, h->rank,
                          h->shape), qat_dtype_str(h->dtype), (long long)(count * size),
                          (int64_t)sb.st_size < want ? "truncated" : "trailing bytes");
        goto done;
    }
done:
    free(text);
    fclose(f);
    return st;
}

qat_status qat__npy_payload_read(qat_ctx *ctx, const char *path, const qat__npy_header *h, void *buf) {
    FILE *f = qat__fopen_regular(ctx, path);
    if (!f) return qat_ctx_status(ctx);
    errno = 0;
    size_t bytes = (size_t)h->count * qat_dtype_size(h->dtype);
    bool ok = fseek(f, (long)h->data_offset, SEEK_SET) == 0 && fread(buf, 1, bytes, f) == bytes;
    int err = errno;
    fclose(f);
    if (!ok)
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot read the payload (%zu bytes)%s%s: the file changed since "
                            "its header was read?", path, bytes, err ? ": " : "", err ? strerror(err) : "");
    return QAT_OK;
}

/* ---- a directory of .npy files ----------------------------------------------------------- */

enum { PART_X, PART_Y, PART_ANOMALY, N_PARTS };
static const char *const part_names[N_PARTS] = {"x", "y", "anomaly"};

typedef struct {
    bool present;
    char path[QAT__DATA_PATH];
    qat__npy_header h;
} npy_file;

/* dir/<split>_<part>.npy: *which gets the split and the part, or false
 * when the name is not one of them. */
static bool parse_name(const char *name, int *split, int *part) {
    for (int s = 0; s < QAT_SPLIT_COUNT; s++)
        for (int p = 0; p < N_PARTS; p++) {
            char want[32];
            snprintf(want, sizeof want, "%s_%s.npy", qat_split_str((qat_split)s), part_names[p]);
            if (!strcmp(name, want)) {
                *split = s, *part = p;
                return true;
            }
        }
    return false;
}

static bool ends_npy(const char *s) {
    size_t n = strlen(s);
    return n >= 4 && !strcmp(s + n - 4, ".npy");
}

/* Reads a whole file's payload into a new buffer. */
static qat_status slurp(qat_ctx *ctx, const npy_file *f, void **out) {
    size_t bytes = (size_t)f->h.count * qat_dtype_size(f->h.dtype);
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for %zu bytes", f->path, bytes);
    return qat__npy_payload_read(ctx, f->path, &f->h, *out);
}

/* One split's files: shapes against each other, then the payloads. */
static qat_status load_split(qat_dataset *d, qat_split s, npy_file *files) {
    qat__store *st = &d->stores[s];
    const char *sn = qat_split_str(s);
    npy_file *fx = &files[PART_X], *fy = &files[PART_Y], *fa = &files[PART_ANOMALY];
    char sh[160];
    if (fx->h.rank < 2)
        return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: x has shape %s: want [N, ...] (one row per sample)",
                            fx->path, sn, qat__shape_str(sh, sizeof sh, fx->h.rank, fx->h.shape));
    int64_t n = fx->h.shape[0];
    qat__array *x = &st->x;
    x->dtype = fx->h.dtype;
    x->rank = fx->h.rank - 1;
    memcpy(x->shape, fx->h.shape + 1, (size_t)x->rank * sizeof *x->shape);
    qat_status status = qat__check_shape(d->ctx, fx->path, sn, "x", n, x->rank, x->shape, &x->row_elems);
    if (status != QAT_OK) return status;
    snprintf(x->file, sizeof x->file, "%s", fx->path);
    snprintf(x->name, sizeof x->name, "x");
    for (int p = PART_Y; p < N_PARTS; p++) {
        npy_file *f = &files[p];
        if (!f->present) continue;
        if (f->h.rank < 1)
            return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: %s is a scalar: want one row per sample", f->path, sn,
                                part_names[p]);
        if (f->h.shape[0] != n)
            return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: x has %lld rows but %s has %lld", f->path, sn,
                                (long long)n, part_names[p], (long long)f->h.shape[0]);
        if (p == PART_ANOMALY && (f->h.rank != 1 || f->h.dtype > QAT_DT_I64))
            return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: %s: anomaly is %s of shape %s: want [N] integers 0 "
                                "and 1", f->path, sn, qat_dtype_str(f->h.dtype),
                                qat__shape_str(sh, sizeof sh, f->h.rank, f->h.shape));
    }
    st->present = true;
    st->rows = n;
    if (fy->present) {
        st->y_dtype = fy->h.dtype;
        if (fy->h.dtype <= QAT_DT_I64) {
            if (fy->h.rank != 1)
                return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: y holds integers of shape %s: class labels are "
                                    "[N] (float targets are float32 or float64)", fy->path, sn,
                                    qat__shape_str(sh, sizeof sh, fy->h.rank, fy->h.shape));
            st->target = QAT_TARGET_CLASS;
        } else {
            qat__array *y = &st->targets;
            st->target = QAT_TARGET_VALUES;
            y->dtype = fy->h.dtype;
            y->rank = fy->h.rank == 1 ? 1 : fy->h.rank - 1;
            if (fy->h.rank == 1) y->shape[0] = 1;
            else memcpy(y->shape, fy->h.shape + 1, (size_t)y->rank * sizeof *y->shape);
            status = qat__check_shape(d->ctx, fy->path, sn, "y", n, y->rank, y->shape, &y->row_elems);
            if (status != QAT_OK) return status;
            snprintf(y->file, sizeof y->file, "%s", fy->path);
            snprintf(y->name, sizeof y->name, "y");
        }
    }
    /* the payloads */
    if ((status = slurp(d->ctx, fx, &x->owned)) != QAT_OK) return status;
    x->mem = x->owned;
    if (st->target == QAT_TARGET_VALUES) {
        if ((status = slurp(d->ctx, fy, &st->targets.owned)) != QAT_OK) return status;
        st->targets.mem = st->targets.owned;
    }
    for (int p = PART_Y; p < N_PARTS; p++) {
        if (!files[p].present || (p == PART_Y && st->target != QAT_TARGET_CLASS)) continue;
        void *raw = NULL;
        status = slurp(d->ctx, &files[p], &raw);
        if (status == QAT_OK && p == PART_Y) {
            if (!(st->labels_owned = malloc((size_t)n * sizeof *st->labels_owned)))
                status = qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the labels", files[p].path);
            else
                status = qat__labels_convert(d->ctx, raw, fy->h.dtype, n, 0, st->labels_owned, fy->path, sn);
            st->labels = st->labels_owned;
        } else if (status == QAT_OK) {
            if (!(st->anomaly_owned = malloc((size_t)n)))
                status = qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the anomaly flags", files[p].path);
            else
                status = qat__anomaly_convert(d->ctx, raw, fa->h.dtype, n, 0, st->anomaly_owned, fa->path, sn);
            st->anomaly = st->anomaly_owned;
        }
        free(raw);
        if (status != QAT_OK) return status;
    }
    return QAT_OK;
}

qat_status qat__npy_dir_open(qat_dataset *d, const char *dir) {
    char **names;
    int n;
    qat_status status = qat__dir_list(d->ctx, dir, &names, &n);
    if (status != QAT_OK) return status;
    npy_file *files = calloc(QAT_SPLIT_COUNT * N_PARTS, sizeof *files);
    char **npys = malloc((size_t)(n ? n : 1) * sizeof *npys);
    int n_npy = 0;
    if (!files || !npys) {
        free(names), free(files), free(npys);
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory to list the directory", dir);
    }
    for (int i = 0; i < n && status == QAT_OK; i++) {
        if (!ends_npy(names[i])) continue;
        npys[n_npy++] = names[i];
        int s, p;
        if (!parse_name(names[i], &s, &p))
            status = qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: unknown .npy file %s (the names are <split>_x.npy, "
                                  "<split>_y.npy and <split>_anomaly.npy, split train, val or test)", dir, names[i]);
        else {
            npy_file *f = &files[s * N_PARTS + p];
            f->present = true;
            snprintf(f->path, sizeof f->path, "%s/%s", dir, names[i]);
        }
    }
    char list[256];
    qat__join_names(list, sizeof list, npys, n_npy);
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) /* splits the caller leaves out: as if absent */
        for (int p = 0; !qat__wanted(d, (qat_split)s) && p < N_PARTS; p++) files[s * N_PARTS + p].present = false;
    for (int s = 0; s < QAT_SPLIT_COUNT && status == QAT_OK; s++) {
        npy_file *f = &files[s * N_PARTS];
        bool any = f[PART_Y].present || f[PART_ANOMALY].present;
        if (!qat__wanted(d, (qat_split)s)) continue;
        if (!f[PART_X].present && (s != QAT_SPLIT_VAL || any))
            status = qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: no %s_x.npy (the .npy files found: %s)", dir,
                                  qat_split_str((qat_split)s), list);
    }
    /* every header first: sizes are known before any payload is read */
    int64_t bytes = 0;
    for (int i = 0; i < QAT_SPLIT_COUNT * N_PARTS && status == QAT_OK; i++) {
        if (!files[i].present) continue;
        status = qat__npy_header_read(d->ctx, files[i].path, &files[i].h);
        int part = i % N_PARTS;
        if (status == QAT_OK && (part == PART_X || (part == PART_Y && files[i].h.dtype > QAT_DT_I64)))
            bytes += files[i].h.count * (int64_t)qat_dtype_size(files[i].h.dtype);
        /* and the per-sample tables (qat__table_bytes): labels, flags, row map */
        int64_t rows = files[i].h.rank ? files[i].h.shape[0] : 1;
        if (status == QAT_OK)
            bytes += rows * (part == PART_X ? 4 : part == PART_ANOMALY ? 1 : files[i].h.dtype <= QAT_DT_I64 ? 4 : 0);
    }
    if (status == QAT_OK && bytes > qat__data_cap(d))
        status = qat_ctx_fail(d->ctx, QAT_ERR_UNSUPPORTED, "%s: the .npy arrays take %lld bytes (with the labels and "
                              "row maps), over the memory cap of %lld: .npy sets are read whole (raise the cap, or convert the set to HDF5, which "
                              "streams)", dir, (long long)bytes, (long long)qat__data_cap(d));
    for (int s = 0; s < QAT_SPLIT_COUNT && status == QAT_OK; s++)
        if (files[s * N_PARTS].present) status = load_split(d, (qat_split)s, &files[s * N_PARTS]);
    free(names), free(files), free(npys);
    return status;
}
