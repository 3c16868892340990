/* Reading samples (in memory over the context's pool, streamed in file
 * order) and the per-channel statistics of a split. */
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
#define STATS_MIN_CHUNK 256               /* samples per partial sum of the statistics (at least) */
#define STATS_MAX_CHUNKS 4096             /* chunks of samples (at most) */
#define STATS_MAX_PARTS ((int64_t)1 << 22) /* chunks x channels partial sums (at most): 32 MiB */

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
    size_t rb = qat__row_bytes(j->a);
    int64_t end = (task + 1) * GATHER_ROWS < j->n ? (task + 1) * GATHER_ROWS : j->n;
    for (int64_t i = task * GATHER_ROWS; i < end; i++) {
        const uint8_t *src = (const uint8_t *)j->a->mem + (size_t)qat__store_row(j->sp, j->idx[i]) * rb;
        qat__put_row(j->a, j->hwc, src, j->out + (size_t)i * j->out_row, j->as_float);
    }
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *p = a, *q = b;
    return p[0] != q[0] ? (p[0] < q[0] ? -1 : 1) : (p[1] < q[1] ? -1 : p[1] > q[1]);
}

/* A streamed array: the batch's rows sorted by their place in the file,
 * read in runs of consecutive rows through a staging buffer of at most
 * QAT__STAGE_BYTES (or one row), then put in place. */
static qat_status gather_streamed(qat_dataset *d, const gather_job *j) {
    size_t rb = qat__row_bytes(j->a);
    if ((size_t)j->n > d->order_cap) {
        int64_t *p = realloc(d->order, (size_t)j->n * 2 * sizeof *p);
        if (p) d->order = p;
        int64_t *q = p ? realloc(d->runs, (size_t)j->n * 2 * sizeof *q) : NULL;
        if (q) d->runs = q;
        if (!p || !q) return qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory to order %lld rows", d->path, (long long)j->n);
        d->order_cap = (size_t)j->n;
    }
    int64_t *ord = d->order;
    for (int64_t i = 0; i < j->n; i++) ord[2 * i] = qat__store_row(j->sp, j->idx[i]), ord[2 * i + 1] = i;
    qsort(ord, (size_t)j->n, 2 * sizeof *ord, cmp_pair);
    int64_t cap_rows = (int64_t)((size_t)QAT__STAGE_BYTES / rb);
    if (cap_rows < 1) cap_rows = 1;
    int64_t distinct = 0;
    for (int64_t i = 0; i < j->n; i++) distinct += i == 0 || ord[2 * i] != ord[2 * i - 2];
    if (cap_rows > distinct) cap_rows = distinct;
    qat_status status = qat__stage_reserve(d, (size_t)cap_rows * rb);
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
            qat__put_row(j->a, j->hwc, stage + (size_t)slot * rb, j->out + (size_t)ord[2 * i + 1] * j->out_row, j->as_float);
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
                            qat__target_str(st->target));
    if (targets && st->target != QAT_TARGET_VALUES)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s has no float targets (its y: %s)", d->path, sn,
                            qat__target_str(st->target));
    if (anomaly && !st->anomaly)
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: %s has no anomaly flags", d->path, sn);
    if (x) status = gather(d, sp, &st->x, qat__hwc_of(d, st, &st->x), idx, n, x, true);
    if (status == QAT_OK && targets) status = gather(d, sp, &st->targets, false, idx, n, targets, true);
    for (int64_t i = 0; status == QAT_OK && i < n; i++) {
        int64_t r = qat__store_row(sp, idx[i]);
        if (labels) labels[i] = st->labels[r];
        if (anomaly) anomaly[i] = st->anomaly[r];
    }
    return status;
}

qat_status qat_dataset_read_raw(qat_dataset *d, qat_split s, const int32_t *idx, int64_t n, void *x) {
    const qat__split *sp = NULL;
    qat_status status = read_args(d, s, idx, n, "qat_dataset_read_raw", &sp);
    if (status != QAT_OK || !x) return status;
    return gather(d, sp, &sp->store->x, qat__hwc_of(d, sp->store, &sp->store->x), idx, n, x, false);
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
    size_t rb = qat__row_bytes(j->a);
    double *part = j->parts + task * j->channels;
    int64_t end = (task + 1) * j->chunk < j->n ? (task + 1) * j->chunk : j->n;
    for (int64_t i = task * j->chunk; i < end; i++)
        stats_row((const uint8_t *)j->a->mem + (size_t)qat__store_row(j->sp, i) * rb, j->a->dtype, j->a->row_elems,
                  j->channels, j->hwc, j->div, j->mean, part);
}

/* A streamed split: the same chunks, each read through the staging
 * buffer in ascending rows, in the same order: the same bits. */
static qat_status stats_streamed(stats_job *j, int64_t chunks) {
    qat_dataset *d = j->d;
    size_t rb = qat__row_bytes(j->a);
    int64_t per = (int64_t)((size_t)QAT__STAGE_BYTES / rb);
    if (per < 1) per = 1;
    if (per > j->chunk) per = j->chunk;
    qat_status status = qat__stage_reserve(d, (size_t)per * rb);
    for (int64_t t = 0; t < chunks && status == QAT_OK; t++) {
        int64_t end = (t + 1) * j->chunk < j->n ? (t + 1) * j->chunk : j->n;
        for (int64_t i = t * j->chunk; i < end && status == QAT_OK;) {
            /* a run of consecutive file rows, at most per long */
            int64_t r0 = qat__store_row(j->sp, i), len = 1;
            while (i + len < end && len < per && qat__store_row(j->sp, i + len) == r0 + len) len++;
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
                   in->x_rank == 3 ? in->x_shape[0] : 1, qat__hwc_of(d, sp->store, &sp->store->x), divisor, NULL, NULL};
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

