/* Rows of a data set: the helpers every format reader shares (shapes in
 * messages, directory listings, the label and anomaly-flag conversions),
 * a row's conversion to float and from HWC to CHW, reading rows from
 * memory or the file, and the scan for NaN and infinity. */
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
            return qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: %s: %s samples of shape %s have a %s dimension", file,
                                split, what, qat__shape_str(sh, sizeof sh, rank, shape), shape[i] ? "negative" : "zero");
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
    if (!qat__dtype_is_int(t))
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
    if (!qat__dtype_is_int(t))
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

size_t qat__row_bytes(const qat__array *a) { return (size_t)a->row_elems * qat_dtype_size(a->dtype); }

/* Is this array x stored channels last (and so transposed on the way out)? */
bool qat__hwc_of(const qat_dataset *d, const qat__store *st, const qat__array *a) {
    return d->opt.channels_last && a == &st->x;
}

/* One stored row of a into dst: floats ([C, H, W] when hwc) or the stored
 * type in the same layout. */
void qat__put_row(const qat__array *a, bool hwc, const void *src, void *dst, bool as_float) {
    if (hwc) {
        int64_t hw = a->shape[0] * a->shape[1], c = a->shape[2];
        if (as_float) to_float_hwc(dst, src, a->dtype, hw, c);
        else raw_hwc(dst, src, qat_dtype_size(a->dtype), hw, c);
    } else if (as_float) {
        to_float(dst, src, a->dtype, a->row_elems);
    } else {
        memcpy(dst, src, qat__row_bytes(a));
    }
}

int64_t qat__store_row(const qat__split *sp, int64_t i) { return sp->rows ? sp->rows[i] : i; }

/* Rows [row0, row0 + count) of a: a pointer into memory, or read into buf. */
qat_status qat__rows_at(qat_dataset *d, const qat__array *a, int64_t row0, int64_t count, void *buf,
                          const void **out) {
    if (a->mem) {
        *out = (const uint8_t *)a->mem + (size_t)row0 * qat__row_bytes(a);
        return QAT_OK;
    }
    *out = buf;
    return qat__hdf5_rows(d, a, row0, count, buf);
}

/* Grows d->stage to at least bytes (kept between reads). */
qat_status qat__stage_reserve(qat_dataset *d, size_t bytes) {
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
qat_status qat__scan_nonfinite(qat_dataset *d, qat_split s, qat__store *st, qat__array *a, int64_t budget,
                                 uint8_t **bad) {
    if (!qat__dtype_is_float(a->dtype)) return QAT_OK;
    size_t rb = qat__row_bytes(a);
    int64_t per = a->mem ? st->rows : (int64_t)((size_t)budget / rb);
    if (per < 1) per = 1;
    void *buf = NULL;
    if (!a->mem && !(buf = malloc((size_t)(per < st->rows ? per : st->rows) * rb)))
        return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: %s: no memory to scan %s", a->file, qat_split_str(s), a->name);
    qat_status status = QAT_OK;
    for (int64_t r0 = 0; r0 < st->rows && status == QAT_OK; r0 += per) {
        int64_t cnt = st->rows - r0 < per ? st->rows - r0 : per;
        const void *rows;
        status = qat__rows_at(d, a, r0, cnt, buf, &rows);
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

