/* The data set (qat/data.h): opening (the format readers fill the stores,
 * this file checks what does not depend on the format), the splits (rows
 * skipped for NaN or infinity, the val split carved from train), reading
 * samples (in memory over the context's pool, streamed in file order) and
 * the per-channel statistics. docs/data-format.md is the contract. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset_internal.h"
#include "qat/parallel.h"

#define GATHER_ROWS 64                    /* samples per task of an in-memory read */
#define STAGE_BYTES ((int64_t)4 << 20)    /* a streamed read's staging buffer holds at most this (or one row) */
#define SCAN_BYTES ((int64_t)4 << 20)     /* rows read at a time when a streamed array is scanned */
#define STATS_MIN_CHUNK 256               /* samples per partial sum of the statistics (at least) */
#define STATS_MAX_CHUNKS 4096             /* chunks of samples (at most) */
#define STATS_MAX_PARTS ((int64_t)1 << 22) /* chunks x channels partial sums (at most): 32 MiB */

static const char *const dtype_names[QAT_DT_COUNT] = {"uint8",  "int8",  "uint16", "int16",   "uint32",
                                                      "int32",  "uint64", "int64", "float32", "float64"};
static const size_t dtype_sizes[QAT_DT_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

const char *qat_dtype_str(qat_dtype t) { return (unsigned)t < QAT_DT_COUNT ? dtype_names[t] : "unknown"; }
size_t qat_dtype_size(qat_dtype t) { return (unsigned)t < QAT_DT_COUNT ? dtype_sizes[t] : 0; }

const char *qat_split_str(qat_split s) {
    static const char *const names[QAT_SPLIT_COUNT] = {"train", "val", "test"};
    return (unsigned)s < QAT_SPLIT_COUNT ? names[s] : "unknown";
}

qat_dataset_options qat_dataset_defaults(void) {
    qat_dataset_options o;
    memset(&o, 0, sizeof o);
    o.memory_cap = 0;
    o.val_fraction = 0;
    o.val_seed = 0;
    o.allow_nonfinite = false;
    o.channels_last = false;
    return o;
}

int64_t qat__table_bytes(const qat__store *st, bool anomaly) {
    return st->rows * (4 + (st->target == QAT_TARGET_CLASS ? 4 : 0) + (anomaly ? 1 : 0));
}

int64_t qat__data_cap(const qat_dataset *d) { return d->opt.memory_cap > 0 ? d->opt.memory_cap : QAT__DATA_DEFAULT_CAP; }

static bool is_int(qat_dtype t) { return t <= QAT_DT_I64; }
static bool is_float(qat_dtype t) { return t == QAT_DT_F32 || t == QAT_DT_F64; }

/* ---- small helpers the readers share ------------------------------------------------ */

char *qat__shape_str(char *buf, size_t len, int rank, const int64_t *shape) {
    size_t k = 0;
    buf[0] = '\0';
    k += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

void qat__join_names(char *buf, size_t len, char *const *names, int n) {
    size_t k = 0;
    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, len, "none");
        return;
    }
    for (int i = 0; i < n; i++) {
        size_t need = strlen(names[i]) + (i ? 2 : 0);
        if (k + need + 5 >= len) { /* room for ", ..." */
            snprintf(buf + k, len - k, "%s...", i ? ", " : "");
            return;
        }
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", names[i]);
    }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One block: the pointer table, then the names' bytes. */
qat_status qat__dir_list(qat_ctx *ctx, const char *dir, char ***names, int *n) {
    *names = NULL, *n = 0;
    errno = 0;
    DIR *dp = opendir(dir);
    if (!dp) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open the directory: %s", dir, strerror(errno));
    size_t bytes = 0;
    int count = 0;
    for (struct dirent *e; (e = readdir(dp)) && count < QAT__DIR_MAX;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        bytes += strlen(e->d_name) + 1;
        count++;
    }
    char **table = malloc((size_t)(count ? count : 1) * sizeof *table + bytes);
    if (!table) {
        closedir(dp);
        return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory to list the directory", dir);
    }
    char *text = (char *)(table + (count ? count : 1));
    rewinddir(dp);
    int got = 0;
    size_t used = 0;
    for (struct dirent *e; (e = readdir(dp)) && got < count;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(e->d_name) + 1;
        if (used + len > bytes) break; /* the directory changed in between: list what fits */
        memcpy(text + used, e->d_name, len);
        table[got++] = text + used;
        used += len;
    }
    closedir(dp);
    qsort(table, (size_t)got, sizeof *table, cmp_str);
    *names = table, *n = got;
    return QAT_OK;
}

qat_status qat__check_shape(qat_ctx *ctx, const char *file, const char *split, const char *what, int64_t n,
                            int rank, const int64_t *shape, int64_t *numel) {
    char sh[160];
    if (n < 1) return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: %s has no rows", file, split, what);
    if (n > QAT_DATA_MAX_SAMPLES)
        return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: %s: %s has %lld rows (at most %lld)", file, split, what,
                            (long long)n, (long long)QAT_DATA_MAX_SAMPLES);
    if (rank < 1 || rank > QAT_DATA_MAX_RANK)
        return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: %s: %s has %d dimension(s) per sample (want 1 to %d: "
                            "an array [N, ...] of rank 2 to %d)", file, split, what, rank < 0 ? 0 : rank,
                            QAT_DATA_MAX_RANK, QAT_DATA_MAX_RANK + 1);
    int64_t p = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1)
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: %s samples of shape %s have a zero dimension", file,
                                split, what, qat__shape_str(sh, sizeof sh, rank, shape));
        if (shape[i] > QAT_DATA_MAX_SAMPLE / p)
            return qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s: %s: %s samples of shape %s have more than %lld "
                                "elements (the limit)", file, split, what, qat__shape_str(sh, sizeof sh, rank, shape),
                                (long long)QAT_DATA_MAX_SAMPLE);
        p *= shape[i];
    }
    *numel = p;
    return QAT_OK;
}

qat_status qat__labels_convert(qat_ctx *ctx, const void *src, qat_dtype t, int64_t n, int64_t row0, int32_t *dst,
                               const char *file, const char *split) {
    if (!is_int(t))
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: class labels y are %s (want integers)", file, split,
                            qat_dtype_str(t));
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        switch (t) {
        case QAT_DT_U8: v = ((const uint8_t *)src)[i]; break;
        case QAT_DT_I8: v = ((const int8_t *)src)[i]; break;
        case QAT_DT_U16: v = ((const uint16_t *)src)[i]; break;
        case QAT_DT_I16: v = ((const int16_t *)src)[i]; break;
        case QAT_DT_U32: v = ((const uint32_t *)src)[i]; break;
        case QAT_DT_I32: v = ((const int32_t *)src)[i]; break;
        case QAT_DT_U64: {
            uint64_t u = ((const uint64_t *)src)[i];
            v = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u; /* only compared below */
            if (u > (uint64_t)INT32_MAX)
                return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: y row %lld: label %llu is too large (at most "
                                    "%d)", file, split, (long long)(row0 + i), (unsigned long long)u, INT32_MAX);
            break;
        }
        default: v = ((const int64_t *)src)[i]; break;
        }
        if (v < 0)
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: y row %lld: label %lld is negative (class labels "
                                "are 0, 1, ...)", file, split, (long long)(row0 + i), (long long)v);
        if (v > INT32_MAX)
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: y row %lld: label %lld is too large (at most %d)", file,
                                split, (long long)(row0 + i), (long long)v, INT32_MAX);
        dst[i] = (int32_t)v;
    }
    return QAT_OK;
}

qat_status qat__anomaly_convert(qat_ctx *ctx, const void *src, qat_dtype t, int64_t n, int64_t row0, uint8_t *dst,
                                const char *file, const char *split) {
    if (!is_int(t))
        return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: anomaly is %s (want integers 0 and 1)", file, split,
                            qat_dtype_str(t));
    size_t sz = qat_dtype_size(t);
    for (int64_t i = 0; i < n; i++) {
        /* 0 or 1 whatever the width: every byte of the element is 0 but the
         * lowest, which is 0 or 1 (little-endian); signed or not alike */
        const uint8_t *e = (const uint8_t *)src + (size_t)i * sz;
        uint8_t hi = 0;
        for (size_t b = 1; b < sz; b++) hi |= e[b];
        if (hi || e[0] > 1) {
            long long v = 0;
            switch (t) {
            case QAT_DT_I8: v = ((const int8_t *)src)[i]; break;
            case QAT_DT_I16: v = ((const int16_t *)src)[i]; break;
            case QAT_DT_U16: v = ((const uint16_t *)src)[i]; break;
            case QAT_DT_I32: v = ((const int32_t *)src)[i]; break;
            case QAT_DT_U32: v = ((const uint32_t *)src)[i]; break;
            case QAT_DT_I64: v = ((const int64_t *)src)[i]; break;
            case QAT_DT_U64: {
                uint64_t u = ((const uint64_t *)src)[i];
                v = u > (uint64_t)LLONG_MAX ? LLONG_MAX : (long long)u;
                break;
            }
            default: v = e[0]; break;
            }
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: anomaly row %lld is %lld (want 0 or 1)", file, split,
                                (long long)(row0 + i), v);
        }
        dst[i] = e[0];
    }
    return QAT_OK;
}

/* ---- rows: conversion, transposition, access ---------------------------------------- */

/* n stored elements to floats: integers exactly, float64 rounded to nearest */
static void to_float(float *dst, const void *src, qat_dtype t, int64_t n) {
#define CONV(T)                                                  \
    do {                                                         \
        const T *s = src;                                        \
        for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i];    \
    } while (0)
    switch (t) {
    case QAT_DT_U8: CONV(uint8_t); break;
    case QAT_DT_I8: CONV(int8_t); break;
    case QAT_DT_U16: CONV(uint16_t); break;
    case QAT_DT_I16: CONV(int16_t); break;
    case QAT_DT_U32: CONV(uint32_t); break;
    case QAT_DT_I32: CONV(int32_t); break;
    case QAT_DT_U64: CONV(uint64_t); break;
    case QAT_DT_I64: CONV(int64_t); break;
    case QAT_DT_F32: memcpy(dst, src, (size_t)n * sizeof *dst); break;
    default: CONV(double); break;
    }
#undef CONV
}

/* [HW, C] stored to [C, HW] floats */
static void to_float_hwc(float *dst, const void *src, qat_dtype t, int64_t hw, int64_t c) {
#define CONV(T)                                                           \
    do {                                                                  \
        const T *s = src;                                                 \
        for (int64_t p = 0; p < hw; p++)                                  \
            for (int64_t k = 0; k < c; k++) dst[k * hw + p] = (float)s[p * c + k]; \
    } while (0)
    switch (t) {
    case QAT_DT_U8: CONV(uint8_t); break;
    case QAT_DT_I8: CONV(int8_t); break;
    case QAT_DT_F32: CONV(float); break;
    default: CONV(double); break;
    }
#undef CONV
}

/* [HW, C] stored to [C, HW] stored (elements of size sz) */
static void raw_hwc(void *dst, const void *src, size_t sz, int64_t hw, int64_t c) {
#define MOVE(T)                                                           \
    do {                                                                  \
        const T *s = src;                                                 \
        T *o = dst;                                                       \
        for (int64_t p = 0; p < hw; p++)                                  \
            for (int64_t k = 0; k < c; k++) o[k * hw + p] = s[p * c + k]; \
    } while (0)
    if (sz == 1) MOVE(uint8_t);
    else if (sz == 4) MOVE(uint32_t);
    else MOVE(uint64_t);
#undef MOVE
}

static size_t row_bytes(const qat__array *a) { return (size_t)a->row_elems * qat_dtype_size(a->dtype); }

/* Is this array x stored channels last (and so transposed on the way out)? */
static bool hwc_of(const qat_dataset *d, const qat__store *st, const qat__array *a) {
    return d->opt.channels_last && a == &st->x;
}

/* One stored row of a into dst: floats ([C, H, W] when hwc) or the stored
 * type in the same layout. */
static void put_row(const qat__array *a, bool hwc, const void *src, void *dst, bool as_float) {
    if (hwc) {
        int64_t hw = a->shape[0] * a->shape[1], c = a->shape[2];
        if (as_float) to_float_hwc(dst, src, a->dtype, hw, c);
        else raw_hwc(dst, src, qat_dtype_size(a->dtype), hw, c);
    } else if (as_float) {
        to_float(dst, src, a->dtype, a->row_elems);
    } else {
        memcpy(dst, src, row_bytes(a));
    }
}

static inline int64_t store_row(const qat__split *sp, int64_t i) { return sp->rows ? sp->rows[i] : i; }

/* Rows [row0, row0 + count) of a: a pointer into memory, or read into buf. */
static qat_status rows_at(qat_dataset *d, const qat__array *a, int64_t row0, int64_t count, void *buf,
                          const void **out) {
    if (a->mem) {
        *out = (const uint8_t *)a->mem + (size_t)row0 * row_bytes(a);
        return QAT_OK;
    }
    *out = buf;
    return qat__hdf5_rows(d, a, row0, count, buf);
}

/* Grows d->stage to at least bytes (kept between reads). */
static qat_status stage_reserve(qat_dataset *d, size_t bytes) {
    if (d->stage_cap >= bytes) return QAT_OK;
    void *p = realloc(d->stage, bytes);
    if (!p) return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for %zu bytes of rows", d->path, bytes);
    d->stage = p, d->stage_cap = bytes;
    return QAT_OK;
}

/* ---- NaN and infinity ------------------------------------------------------------------------ */

/* The first element of a float row that is NaN, infinite, or (float64)
 * beyond float32's range; -1 if none. */
static int64_t first_nonfinite(const void *row, qat_dtype t, int64_t n) {
    if (t == QAT_DT_F32) {
        const float *r = row;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(r[i])) return i;
    } else {
        const double *r = row;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite((float)r[i])) return i;
    }
    return -1;
}

/* Scans every row of a float array of store st: the first bad row is an
 * error, or (allow_nonfinite) every bad row is marked in *bad (a bitmap of
 * st->rows bits, made on the first). */
static qat_status scan_nonfinite(qat_dataset *d, qat_split s, qat__store *st, qat__array *a, int64_t budget,
                                 uint8_t **bad) {
    if (!is_float(a->dtype)) return QAT_OK;
    size_t rb = row_bytes(a);
    int64_t per = a->mem ? st->rows : (int64_t)((size_t)budget / rb);
    if (per < 1) per = 1;
    void *buf = NULL;
    if (!a->mem && !(buf = malloc((size_t)(per < st->rows ? per : st->rows) * rb)))
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: %s: no memory to scan %s", a->file, qat_split_str(s), a->name);
    qat_status status = QAT_OK;
    for (int64_t r0 = 0; r0 < st->rows && status == QAT_OK; r0 += per) {
        int64_t cnt = st->rows - r0 < per ? st->rows - r0 : per;
        const void *rows;
        status = rows_at(d, a, r0, cnt, buf, &rows);
        for (int64_t r = 0; r < cnt && status == QAT_OK; r++) {
            const void *row = (const uint8_t *)rows + (size_t)r * rb;
            int64_t e = first_nonfinite(row, a->dtype, a->row_elems);
            if (e < 0) continue;
            if (!d->opt.allow_nonfinite) {
                double v = a->dtype == QAT_DT_F32 ? ((const float *)row)[e] : ((const double *)row)[e];
                const char *what = isnan(v) ? "NaN" : isinf(v) ? "infinity" : "a value beyond float32's range";
                char val[40] = "";
                if (isfinite(v)) snprintf(val, sizeof val, " (%g)", v);
                status = qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: %s: %s row %lld holds %s%s at element %lld "
                                      "(allow_nonfinite, --allow-nonfinite, skips such rows)", a->file,
                                      qat_split_str(s), a->name, (long long)(r0 + r), what, val, (long long)e);
                break;
            }
            if (!*bad && !(*bad = calloc((size_t)(st->rows + 7) / 8, 1))) {
                status = qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the skipped rows", a->file);
                break;
            }
            (*bad)[(r0 + r) / 8] |= (uint8_t)(1u << ((r0 + r) % 8));
        }
    }
    free(buf);
    return status;
}

/* ---- finishing an opened set: the checks every format shares ------------------------------ */

static bool x_dtype_ok(qat_dtype t) { return t == QAT_DT_U8 || t == QAT_DT_I8 || t == QAT_DT_F32 || t == QAT_DT_F64; }

/* The split's sample shape as the model sees it (channels first). */
static qat_status sample_shape(qat_dataset *d, qat_split s, const qat__store *st, int *rank, int64_t *shape) {
    const qat__array *x = &st->x;
    if (!d->opt.channels_last) {
        *rank = x->rank;
        memcpy(shape, x->shape, sizeof x->shape);
        return QAT_OK;
    }
    if (x->rank != 3) {
        char sh[160];
        return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: channels_last needs x of rank 4 ([N, H, W, C]); its "
                            "samples are %s", x->file, qat_split_str(s), qat__shape_str(sh, sizeof sh, x->rank, x->shape));
    }
    *rank = 3;
    shape[0] = x->shape[2], shape[1] = x->shape[0], shape[2] = x->shape[1], shape[3] = 0;
    return QAT_OK;
}

static const char *target_str(qat_target_kind k) {
    return k == QAT_TARGET_CLASS ? "class labels" : k == QAT_TARGET_VALUES ? "float targets" : "no y";
}

/* Checks one store against itself and against train's. */
static qat_status check_store(qat_dataset *d, qat_split s) {
    qat__store *st = &d->stores[s], *tr = &d->stores[QAT_SPLIT_TRAIN];
    const char *sn = qat_split_str(s), *f = st->x.file;
    if (!x_dtype_ok(st->x.dtype))
        return qat_ctx_fail(d->ctx, QAT_ERR_UNSUPPORTED, "%s: %s: x is %s (want uint8, int8, float32 or float64)", f,
                            sn, qat_dtype_str(st->x.dtype));
    if (st->target == QAT_TARGET_VALUES && !is_float(st->targets.dtype))
        return qat_ctx_fail(d->ctx, QAT_ERR_UNSUPPORTED, "%s: %s: float targets y are %s (want float32 or float64)",
                            st->targets.file, sn, qat_dtype_str(st->targets.dtype));
    int rank = 0, trank = 0;
    int64_t shape[QAT_DATA_MAX_RANK] = {0}, tshape[QAT_DATA_MAX_RANK] = {0};
    qat_status status = sample_shape(d, s, st, &rank, shape);
    if (status != QAT_OK || s == QAT_SPLIT_TRAIN || !tr->present) return status; /* train left out: nothing to match */
    if ((status = sample_shape(d, QAT_SPLIT_TRAIN, tr, &trank, tshape)) != QAT_OK) return status;
    char a[160], b[160];
    if (rank != trank || memcmp(shape, tshape, (size_t)rank * sizeof *shape))
        return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: x samples are %s but train's are %s", f, sn,
                            qat__shape_str(a, sizeof a, rank, shape), qat__shape_str(b, sizeof b, trank, tshape));
    if (st->target != tr->target)
        return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: %s: y is %s but train's is %s", f, sn, target_str(st->target),
                            target_str(tr->target));
    if (st->target == QAT_TARGET_VALUES &&
        (st->targets.rank != tr->targets.rank ||
         memcmp(st->targets.shape, tr->targets.shape, (size_t)st->targets.rank * sizeof *shape)))
        return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: y samples are %s but train's are %s", st->targets.file, sn,
                            qat__shape_str(a, sizeof a, st->targets.rank, st->targets.shape),
                            qat__shape_str(b, sizeof b, tr->targets.rank, tr->targets.shape));
    return QAT_OK;
}

/* Rows kept after skipping: the split's row map (NULL when none is skipped). */
static qat_status keep_rows(qat_dataset *d, qat__split *sp, const uint8_t *bad) {
    int64_t n = sp->store->rows, kept = 0;
    for (int64_t r = 0; r < n; r++) kept += !(bad[r / 8] >> (r % 8) & 1);
    sp->info.skipped = n - kept;
    if (kept == 0)
        return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: %s: every one of the %lld rows holds NaN or infinity",
                            sp->store->x.file, qat_split_str((qat_split)(sp - d->splits)), (long long)n);
    if (!(sp->rows = malloc((size_t)kept * sizeof *sp->rows)))
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the row map", d->path);
    for (int64_t r = 0, k = 0; r < n; r++)
        if (!(bad[r / 8] >> (r % 8) & 1)) sp->rows[k++] = (int32_t)r;
    sp->info.n = kept;
    return QAT_OK;
}

/* val: round(fraction·N) rows of train drawn with the seed (a Fisher-Yates
 * shuffle of train's positions, the first k taken); both splits keep
 * their rows in ascending order. */
static qat_status carve_val(qat_dataset *d) {
    qat__split *tr = &d->splits[QAT_SPLIT_TRAIN], *va = &d->splits[QAT_SPLIT_VAL];
    double f = d->opt.val_fraction;
    int64_t m = tr->info.n, k = (int64_t)llround(f * (double)m);
    if (k < 1 || k >= m)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: a val fraction of %g of train's %lld samples is %lld samples "
                            "(want at least 1, and at least 1 left for train)", d->path, f, (long long)m, (long long)k);
    int32_t *perm = malloc((size_t)m * sizeof *perm), *vrows = malloc((size_t)k * sizeof *vrows),
            *trows = malloc((size_t)(m - k) * sizeof *trows);
    uint8_t *is_val = calloc((size_t)m, 1);
    if (!perm || !vrows || !trows || !is_val) {
        free(perm), free(vrows), free(trows), free(is_val);
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory to carve the val split", d->path);
    }
    for (int64_t i = 0; i < m; i++) perm[i] = (int32_t)i;
    qat_rng rng;
    qat_rng_seed(&rng, d->opt.val_seed);
    qat_shuffle(perm, m, &rng);
    for (int64_t i = 0; i < k; i++) is_val[perm[i]] = 1;
    for (int64_t i = 0, a = 0, b = 0; i < m; i++) {
        int32_t r = (int32_t)store_row(tr, i);
        if (is_val[i]) vrows[a++] = r;
        else trows[b++] = r;
    }
    free(perm), free(is_val);
    free(tr->rows);
    tr->rows = trows;
    tr->info.n = m - k;
    va->present = true;
    va->store = tr->store;
    va->rows = vrows;
    va->info = tr->info;
    va->info.n = k;
    va->info.skipped = 0;
    return QAT_OK;
}

static void fill_info(qat_dataset *d, qat__split *sp) {
    const qat__store *st = sp->store;
    qat_split_info *in = &sp->info;
    in->x_dtype = st->x.dtype;
    sample_shape(d, (qat_split)(sp - d->splits), st, &in->x_rank, in->x_shape);
    in->x_numel = st->x.row_elems;
    in->target = st->target;
    in->y_dtype = st->target == QAT_TARGET_NONE ? QAT_DT_F32 : st->y_dtype;
    in->y_rank = st->target == QAT_TARGET_VALUES ? st->targets.rank : 0;
    memset(in->y_shape, 0, sizeof in->y_shape);
    if (st->target == QAT_TARGET_VALUES) memcpy(in->y_shape, st->targets.shape, sizeof in->y_shape);
    in->y_numel = st->target == QAT_TARGET_VALUES ? st->targets.row_elems : st->target == QAT_TARGET_CLASS;
    in->label_max = in->label_max_row = -1;
    for (int64_t i = 0; st->labels && i < in->n; i++) {
        int64_t r = store_row(sp, i);
        if (st->labels[r] > in->label_max) in->label_max = st->labels[r], in->label_max_row = r;
    }
    in->has_anomaly = st->anomaly != NULL;
    in->streaming = st->x.mem == NULL;
}

static int64_t held_bytes(const qat_dataset *d) {
    int64_t held = 0;
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        const qat__store *st = &d->stores[s];
        if (!st->present) continue;
        if (st->x.mem && st->x.owned) held += st->rows * (int64_t)row_bytes(&st->x);
        if (st->targets.mem && st->targets.owned) held += st->rows * (int64_t)row_bytes(&st->targets);
        held += qat__table_bytes(st, st->anomaly != NULL);
    }
    return held;
}

static qat_status finish(qat_dataset *d) {
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        if (!d->stores[s].present) continue;
        qat_status status = check_store(d, (qat_split)s);
        if (status != QAT_OK) return status;
    }
    /* a streamed array is scanned within what the cap leaves (or a row at a time) */
    int64_t budget = qat__data_cap(d) - held_bytes(d);
    if (budget > SCAN_BYTES) budget = SCAN_BYTES;
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        qat__store *st = &d->stores[s];
        qat__split *sp = &d->splits[s];
        if (!st->present) continue;
        sp->present = true;
        sp->store = st;
        sp->info.n = st->rows;
        uint8_t *bad = NULL;
        qat_status status = scan_nonfinite(d, (qat_split)s, st, &st->x, budget, &bad);
        if (status == QAT_OK && st->target == QAT_TARGET_VALUES)
            status = scan_nonfinite(d, (qat_split)s, st, &st->targets, budget, &bad);
        if (status == QAT_OK && bad) status = keep_rows(d, sp, bad);
        free(bad);
        if (status != QAT_OK) return status;
    }
    if (d->opt.val_fraction > 0) {
        qat_status status = carve_val(d);
        if (status != QAT_OK) return status;
    }
    for (int s = 0; s < QAT_SPLIT_COUNT; s++)
        if (d->splits[s].present) fill_info(d, &d->splits[s]);
    return QAT_OK;
}

static qat_status check_options(qat_ctx *ctx, const char *path, const qat_dataset_options *o) {
    if (o->memory_cap < 0)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: memory_cap %lld is negative (0: the default)", path,
                            (long long)o->memory_cap);
    if (o->splits && o->val_fraction > 0 && !(o->splits & 1u << QAT_SPLIT_TRAIN))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: a val fraction is carved from train, which the options leave out",
                            path);
    if (o->splits >> QAT_SPLIT_COUNT)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: splits mask 0x%x names no split", path, o->splits);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: val fraction %g (want 0 <= fraction < 1)", path, o->val_fraction);
    return QAT_OK;
}

static qat_dataset *dataset_new(qat_ctx *ctx, const char *path, const qat_dataset_options *opt) {
    qat_dataset *d = calloc(1, sizeof *d);
    char *p = d ? malloc(strlen(path) + 1) : NULL;
    if (!p) {
        free(d);
        qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for the data set", path);
        return NULL;
    }
    strcpy(p, path);
    d->ctx = ctx, d->path = p, d->h5file = -1, d->h5fd = -1;
    d->opt = opt ? *opt : qat_dataset_defaults();
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        d->stores[s].x.h5set = d->stores[s].targets.h5set = -1;
        d->stores[s].x.h5space = d->stores[s].targets.h5space = -1;
        d->stores[s].x.h5memtype = d->stores[s].targets.h5memtype = -1;
    }
    return d;
}

void qat_dataset_free(qat_dataset *d) {
    if (!d) return;
    qat__hdf5_close(d);
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        qat__store *st = &d->stores[s];
        free(st->x.owned), free(st->targets.owned), free(st->labels_owned), free(st->anomaly_owned);
        free(d->splits[s].rows);
    }
    free(d->stage), free(d->order), free(d->runs), free(d->path), free(d);
}

/* ---- opening ------------------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static bool is_idx_name(const char *s) { return strstr(s, "-idx") && strstr(s, "-ubyte"); }

/* A directory: .npy files or IDX files, whichever it holds. */
static qat_status open_dir(qat_dataset *d, const char *path) {
    char **names;
    int n;
    qat_status status = qat__dir_list(d->ctx, path, &names, &n);
    if (status != QAT_OK) return status;
    bool npy = false, idx = false;
    for (int i = 0; i < n; i++) npy |= ends_with(names[i], ".npy"), idx |= is_idx_name(names[i]);
    char list[256];
    qat__join_names(list, sizeof list, names, n);
    free(names);
    if (npy && idx)
        return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: the directory holds both .npy and IDX files (%s): keep "
                            "one format per directory", path, list);
    if (npy) {
        d->format = "npy";
        return qat__npy_dir_open(d, path);
    }
    if (idx) {
        d->format = "idx";
        return qat__idx_dir_open(d, path);
    }
    return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: a directory with neither .npy files (train_x.npy, ...) nor "
                        "IDX files (train-images-idx3-ubyte, ...); it holds: %s", path, list);
}

qat_status qat_dataset_open(qat_ctx *ctx, const char *path, const qat_dataset_options *opt, qat_dataset **out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_dataset_open: NULL argument");
    *out = NULL;
    qat_dataset_options o = opt ? *opt : qat_dataset_defaults();
    qat_status status = check_options(ctx, path, &o);
    if (status != QAT_OK) return status;
    struct stat sb;
    errno = 0;
    if (stat(path, &sb) != 0) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    qat_dataset *d = dataset_new(ctx, path, &o);
    if (!d) return QAT_ERR_NOMEM;
    if (S_ISDIR(sb.st_mode)) {
        status = open_dir(d, path);
    } else if (!S_ISREG(sb.st_mode)) {
        status = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: not a regular file or a directory", path);
    } else if (qat__is_npy(path)) {
        status = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: a single .npy file: give the directory that holds "
                              "train_x.npy, train_y.npy, test_x.npy and test_y.npy", path);
    } else if (qat__is_hdf5(path)) {
        d->format = "hdf5";
        status = qat__hdf5_open(d, path);
    } else {
        status = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: not an HDF5 file (nor a directory of .npy or IDX files)",
                              path);
    }
    if (status == QAT_OK && d->opt.val_fraction > 0 && d->stores[QAT_SPLIT_VAL].present)
        status = qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: the set has a val split: a val fraction would make a second "
                              "one", path);
    if (status == QAT_OK) status = finish(d);
    if (status != QAT_OK) {
        qat_dataset_free(d);
        return status;
    }
    *out = d;
    return QAT_OK;
}

/* ---- arrays in memory ------------------------------------------------------------------------ */

static qat_status store_from_array(qat_dataset *d, qat_split s, const qat_array_split *a) {
    qat__store *st = &d->stores[s];
    const char *sn = qat_split_str(s), *f = "arrays";
    if (!a->x) return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: x is NULL", f, sn);
    if ((unsigned)a->x_dtype >= QAT_DT_COUNT)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: x dtype %d is not a qat_dtype", f, sn, (int)a->x_dtype);
    qat_status status = qat__check_shape(d->ctx, f, sn, "x", a->n, a->x_rank, a->x_shape, &st->x.row_elems);
    if (status != QAT_OK) return status;
    st->present = true;
    st->rows = a->n;
    st->x.dtype = a->x_dtype;
    st->x.rank = a->x_rank;
    memcpy(st->x.shape, a->x_shape, (size_t)a->x_rank * sizeof *a->x_shape);
    st->x.mem = a->x;
    snprintf(st->x.file, sizeof st->x.file, "%s", f);
    snprintf(st->x.name, sizeof st->x.name, "x");
    if (a->y) {
        if ((unsigned)a->y_dtype >= QAT_DT_COUNT)
            return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: y dtype %d is not a qat_dtype", f, sn, (int)a->y_dtype);
        st->y_dtype = a->y_dtype;
        if (a->y_rank == 0) {
            st->target = QAT_TARGET_CLASS;
            if (a->y_dtype == QAT_DT_I32) { /* borrowed, once checked */
                const int32_t *y = a->y;
                int32_t dummy;
                for (int64_t i = 0; i < a->n; i++)
                    if (y[i] < 0) return qat__labels_convert(d->ctx, y + i, QAT_DT_I32, 1, i, &dummy, f, sn);
                st->labels = y;
            } else {
                if (!(st->labels_owned = malloc((size_t)a->n * sizeof *st->labels_owned)))
                    return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: %s: no memory for the labels", f, sn);
                status = qat__labels_convert(d->ctx, a->y, a->y_dtype, a->n, 0, st->labels_owned, f, sn);
                if (status != QAT_OK) return status;
                st->labels = st->labels_owned;
            }
        } else {
            st->target = QAT_TARGET_VALUES;
            status = qat__check_shape(d->ctx, f, sn, "y", a->n, a->y_rank, a->y_shape, &st->targets.row_elems);
            if (status != QAT_OK) return status;
            st->targets.dtype = a->y_dtype;
            st->targets.rank = a->y_rank;
            memcpy(st->targets.shape, a->y_shape, (size_t)a->y_rank * sizeof *a->y_shape);
            st->targets.mem = a->y;
            snprintf(st->targets.file, sizeof st->targets.file, "%s", f);
            snprintf(st->targets.name, sizeof st->targets.name, "y");
        }
    }
    if (a->anomaly) {
        uint8_t dummy;
        for (int64_t i = 0; i < a->n; i++)
            if (a->anomaly[i] > 1) return qat__anomaly_convert(d->ctx, a->anomaly + i, QAT_DT_U8, 1, i, &dummy, f, sn);
        st->anomaly = a->anomaly;
    }
    return QAT_OK;
}

qat_status qat_dataset_from_arrays(qat_ctx *ctx, const qat_array_split *train, const qat_array_split *val,
                                   const qat_array_split *test, const qat_dataset_options *opt, qat_dataset **out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_dataset_from_arrays: NULL out");
    *out = NULL;
    if (!train || !test)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "arrays: the %s split is missing (train and test are required)",
                            train ? "test" : "train");
    qat_dataset_options o = opt ? *opt : qat_dataset_defaults();
    qat_status status = check_options(ctx, "arrays", &o);
    if (status != QAT_OK) return status;
    if (val && o.val_fraction > 0)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "arrays: a val split is given: a val fraction would make a second one");
    qat_dataset *d = dataset_new(ctx, "", &o);
    if (!d) return QAT_ERR_NOMEM;
    d->format = "memory";
    const qat_array_split *in[QAT_SPLIT_COUNT] = {train, val, test};
    for (int s = 0; s < QAT_SPLIT_COUNT && status == QAT_OK; s++)
        if (in[s]) status = store_from_array(d, (qat_split)s, in[s]);
    if (status == QAT_OK) status = finish(d);
    if (status != QAT_OK) {
        qat_dataset_free(d);
        return status;
    }
    *out = d;
    return QAT_OK;
}

/* ---- describing ----------------------------------------------------------------------------- */

const char *qat_dataset_format(const qat_dataset *d) { return d ? d->format : ""; }

const qat_split_info *qat_dataset_info(const qat_dataset *d, qat_split s) {
    if (!d || (unsigned)s >= QAT_SPLIT_COUNT || !d->splits[s].present) return NULL;
    return &d->splits[s].info;
}

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct {
    const qat__split *sp;
    const qat__array *a;
    bool hwc, as_float;
    const int32_t *idx;
    int64_t n;
    uint8_t *out;
    size_t out_row; /* bytes per output row */
} gather_job;

static void gather_task(void *user, int64_t task, int worker) {
    (void)worker;
    const gather_job *j = user;
    size_t rb = row_bytes(j->a);
    int64_t end = (task + 1) * GATHER_ROWS < j->n ? (task + 1) * GATHER_ROWS : j->n;
    for (int64_t i = task * GATHER_ROWS; i < end; i++) {
        const uint8_t *src = (const uint8_t *)j->a->mem + (size_t)store_row(j->sp, j->idx[i]) * rb;
        put_row(j->a, j->hwc, src, j->out + (size_t)i * j->out_row, j->as_float);
    }
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *p = a, *q = b;
    return p[0] != q[0] ? (p[0] < q[0] ? -1 : 1) : (p[1] < q[1] ? -1 : p[1] > q[1]);
}

/* A streamed array: the batch's rows sorted by their place in the file,
 * read in runs of consecutive rows through a staging buffer of at most
 * STAGE_BYTES (or one row), then put in place. */
static qat_status gather_streamed(qat_dataset *d, const gather_job *j) {
    size_t rb = row_bytes(j->a);
    if ((size_t)j->n > d->order_cap) {
        int64_t *p = realloc(d->order, (size_t)j->n * 2 * sizeof *p);
        if (p) d->order = p;
        int64_t *q = p ? realloc(d->runs, (size_t)j->n * 2 * sizeof *q) : NULL;
        if (q) d->runs = q;
        if (!p || !q) return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory to order %lld rows", d->path, (long long)j->n);
        d->order_cap = (size_t)j->n;
    }
    int64_t *ord = d->order;
    for (int64_t i = 0; i < j->n; i++) ord[2 * i] = store_row(j->sp, j->idx[i]), ord[2 * i + 1] = i;
    qsort(ord, (size_t)j->n, 2 * sizeof *ord, cmp_pair);
    int64_t cap_rows = (int64_t)((size_t)STAGE_BYTES / rb);
    if (cap_rows < 1) cap_rows = 1;
    int64_t distinct = 0;
    for (int64_t i = 0; i < j->n; i++) distinct += i == 0 || ord[2 * i] != ord[2 * i - 2];
    if (cap_rows > distinct) cap_rows = distinct;
    qat_status status = stage_reserve(d, (size_t)cap_rows * rb);
    uint8_t *stage = d->stage;
    for (int64_t p = 0; p < j->n && status == QAT_OK;) {
        /* the group: pairs [p, q) holding at most cap_rows distinct rows */
        int64_t q = p, k = 0;
        while (q < j->n && (k < cap_rows || ord[2 * q] == ord[2 * q - 2])) {
            k += q == p || ord[2 * q] != ord[2 * q - 2];
            q++;
        }
        /* its runs of consecutive rows, read at once: slot i of the stage
         * holds the group's i-th distinct row */
        int64_t n_runs = 0;
        for (int64_t i = p; i < q;) {
            int64_t r0 = ord[2 * i], len = 1, e = i + 1;
            for (; e < q; e++) {
                if (ord[2 * e] == ord[2 * e - 2]) continue;
                if (ord[2 * e] != r0 + len) break;
                len++;
            }
            d->runs[2 * n_runs] = r0, d->runs[2 * n_runs + 1] = len, n_runs++;
            i = e;
        }
        status = qat__hdf5_runs(d, j->a, d->runs, n_runs, stage);
        int64_t slot = -1;
        for (int64_t i = p; i < q && status == QAT_OK; i++) {
            slot += i == p || ord[2 * i] != ord[2 * i - 2];
            put_row(j->a, j->hwc, stage + (size_t)slot * rb, j->out + (size_t)ord[2 * i + 1] * j->out_row, j->as_float);
        }
        p = q;
    }
    return status;
}

static qat_status gather(qat_dataset *d, const qat__split *sp, const qat__array *a, bool hwc, const int32_t *idx,
                         int64_t n, void *out, bool as_float) {
    gather_job j = {sp, a, hwc, as_float, idx, n, out,
                    (size_t)a->row_elems * (as_float ? sizeof(float) : qat_dtype_size(a->dtype))};
    if (!a->mem) return gather_streamed(d, &j);
    qat_pool_run(qat_ctx_pool(d->ctx), (n + GATHER_ROWS - 1) / GATHER_ROWS, gather_task, &j);
    return QAT_OK;
}

/* The checks every read makes: the split, the indices, what is asked. */
static qat_status read_args(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, const char *fn,
                            const qat__split **spp) {
    if (!d) return QAT_ERR_ARG;
    if ((unsigned)s >= QAT_SPLIT_COUNT || !d->splits[s].present)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: the set has no %s split", d->path, fn, qat_split_str(s));
    const qat__split *sp = &d->splits[s];
    if (n < 0 || (n > 0 && !idx))
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: %lld indices%s", d->path, fn, (long long)n,
                            n > 0 ? " at NULL" : "");
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= sp->info.n)
            return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s: index %lld is %d, outside %s's [0, %lld)", d->path, fn,
                                (long long)i, idx[i], qat_split_str(s), (long long)sp->info.n);
    *spp = sp;
    return QAT_OK;
}

qat_status qat_dataset_read(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, float *x, int32_t *labels,
                            float *targets, uint8_t *anomaly) {
    const qat__split *sp = NULL;
    qat_status status = read_args(d, s, idx, n, "qat_dataset_read", &sp);
    if (status != QAT_OK) return status;
    const qat__store *st = sp->store;
    const char *sn = qat_split_str(s);
    if (labels && st->target != QAT_TARGET_CLASS)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s has no class labels (its y: %s)", d->path, sn,
                            target_str(st->target));
    if (targets && st->target != QAT_TARGET_VALUES)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s has no float targets (its y: %s)", d->path, sn,
                            target_str(st->target));
    if (anomaly && !st->anomaly)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s has no anomaly flags", d->path, sn);
    if (x) status = gather(d, sp, &st->x, hwc_of(d, st, &st->x), idx, n, x, true);
    if (status == QAT_OK && targets) status = gather(d, sp, &st->targets, false, idx, n, targets, true);
    for (int64_t i = 0; status == QAT_OK && i < n; i++) {
        int64_t r = store_row(sp, idx[i]);
        if (labels) labels[i] = st->labels[r];
        if (anomaly) anomaly[i] = st->anomaly[r];
    }
    return status;
}

qat_status qat_dataset_read_raw(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, void *x) {
    const qat__split *sp = NULL;
    qat_status status = read_args(d, s, idx, n, "qat_dataset_read_raw", &sp);
    if (status != QAT_OK || !x) return status;
    return gather(d, sp, &sp->store->x, hwc_of(d, sp->store, &sp->store->x), idx, n, x, false);
}

/* ---- per-channel statistics ------------------------------------------------------------------- */

/* Adds one stored row's values (each /div; minus mean[c], squared, when
 * mean is given) to part[c]: channel c is the row's c-th block of hw
 * elements, or (hwc) every c-th element. */
static void stats_row(const void *row, qat_dtype t, int64_t elems, int64_t channels, bool hwc, double div,
                      const double *mean, double *part) {
    int64_t hw = elems / channels;
#define ACC(T)                                                                      \
    do {                                                                            \
        const T *r = row;                                                           \
        for (int64_t e = 0; e < elems; e++) {                                       \
            int64_t c = hwc ? e % channels : e / hw;                                \
            double v = (double)r[e] / div;                                          \
            if (mean) v = (v - mean[c]) * (v - mean[c]);                            \
            part[c] += v;                                                           \
        }                                                                           \
    } while (0)
    switch (t) {
    case QAT_DT_U8: ACC(uint8_t); break;
    case QAT_DT_I8: ACC(int8_t); break;
    case QAT_DT_F32: ACC(float); break;
    default: ACC(double); break;
    }
#undef ACC
}

typedef struct {
    qat_dataset *d;
    const qat__split *sp;
    const qat__array *a;
    int64_t n, chunk, channels;
    bool hwc;
    double div;
    const double *mean; /* NULL: pass 1 (sums) */
    double *parts;      /* [chunks, channels] */
} stats_job;

static void stats_task(void *user, int64_t task, int worker) {
    (void)worker;
    const stats_job *j = user;
    size_t rb = row_bytes(j->a);
    double *part = j->parts + task * j->channels;
    int64_t end = (task + 1) * j->chunk < j->n ? (task + 1) * j->chunk : j->n;
    for (int64_t i = task * j->chunk; i < end; i++)
        stats_row((const uint8_t *)j->a->mem + (size_t)store_row(j->sp, i) * rb, j->a->dtype, j->a->row_elems,
                  j->channels, j->hwc, j->div, j->mean, part);
}

/* A streamed split: the same chunks, each read through the staging
 * buffer in ascending rows, in the same order: the same bits. */
static qat_status stats_streamed(stats_job *j, int64_t chunks) {
    qat_dataset *d = j->d;
    size_t rb = row_bytes(j->a);
    int64_t per = (int64_t)((size_t)STAGE_BYTES / rb);
    if (per < 1) per = 1;
    if (per > j->chunk) per = j->chunk;
    qat_status status = stage_reserve(d, (size_t)per * rb);
    for (int64_t t = 0; t < chunks && status == QAT_OK; t++) {
        int64_t end = (t + 1) * j->chunk < j->n ? (t + 1) * j->chunk : j->n;
        for (int64_t i = t * j->chunk; i < end && status == QAT_OK;) {
            /* a run of consecutive file rows, at most per long */
            int64_t r0 = store_row(j->sp, i), len = 1;
            while (i + len < end && len < per && store_row(j->sp, i + len) == r0 + len) len++;
            status = qat__hdf5_rows(d, j->a, r0, len, d->stage);
            for (int64_t k = 0; k < len && status == QAT_OK; k++)
                stats_row((const uint8_t *)d->stage + (size_t)k * rb, j->a->dtype, j->a->row_elems, j->channels,
                          j->hwc, j->div, j->mean, j->parts + t * j->channels);
            i += len;
        }
    }
    return status;
}

qat_status qat_dataset_channel_stats(qat_dataset *d, qat_split s, int64_t limit, double divisor, double *mean,
                                     double *std) {
    const qat__split *sp = NULL;
    qat_status status = read_args(d, s, NULL, 0, "qat_dataset_channel_stats", &sp);
    if (status != QAT_OK) return status;
    if (!mean || !std)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: qat_dataset_channel_stats: NULL mean or std", d->path);
    if (!(divisor > 0) || !isfinite(divisor))
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: qat_dataset_channel_stats: divisor %g (want > 0)", d->path,
                            divisor);
    if (limit < 0)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: qat_dataset_channel_stats: limit %lld is negative", d->path,
                            (long long)limit);
    const qat_split_info *in = &sp->info;
    stats_job j = {d, sp, &sp->store->x, limit > 0 && limit < in->n ? limit : in->n, 0,
                   in->x_rank == 3 ? in->x_shape[0] : 1, hwc_of(d, sp->store, &sp->store->x), divisor, NULL, NULL};
    /* chunks cut by the sample count (and the channels) alone: the same
     * sums for any pool; at most STATS_MAX_PARTS partial sums */
    int64_t max_chunks = STATS_MAX_PARTS / j.channels;
    if (max_chunks > STATS_MAX_CHUNKS) max_chunks = STATS_MAX_CHUNKS;
    if (max_chunks < 1) max_chunks = 1;
    j.chunk = (j.n + max_chunks - 1) / max_chunks;
    if (j.chunk < STATS_MIN_CHUNK) j.chunk = STATS_MIN_CHUNK;
    int64_t chunks = (j.n + j.chunk - 1) / j.chunk;
    double *parts = calloc((size_t)(chunks * j.channels), sizeof *parts);
    double *m = calloc((size_t)j.channels, sizeof *m);
    if (!parts || !m) {
        free(parts), free(m);
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the statistics", d->path);
    }
    j.parts = parts;
    double count = (double)j.n * (double)(in->x_numel / j.channels);
    for (int pass = 0; pass < 2 && status == QAT_OK; pass++) {
        memset(parts, 0, (size_t)(chunks * j.channels) * sizeof *parts);
        j.mean = pass ? m : NULL;
        if (j.a->mem) qat_pool_run(qat_ctx_pool(d->ctx), chunks, stats_task, &j);
        else status = stats_streamed(&j, chunks);
        for (int64_t c = 0; c < j.channels && status == QAT_OK; c++) {
            double sum = 0;
            for (int64_t t = 0; t < chunks; t++) sum += parts[t * j.channels + c];
            if (pass == 0) m[c] = sum / count;
            else mean[c] = m[c], std[c] = sqrt(sum / count);
        }
    }
    free(parts), free(m);
    return status;
}

const char *qat_dims_str(int rank, const int64_t *shape, char *buf, size_t len) {
    return qat__shape_str(buf, len, rank, shape);
}

bool qat__wanted(const qat_dataset *d, qat_split s) { return !d->opt.splits || (d->opt.splits & 1u << s); }
