/* The data set (qat/data.h): opening (the format readers fill the stores,
 * this file checks what does not depend on the format), the splits (rows
 * skipped for NaN or infinity, the val split carved from train) and sets
 * made from arrays in memory. Rows and their checks: rows.c; reading and
 * statistics: dataset_read.c. docs/data-format.md is the contract. */
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

/* What a store's y is, for messages: "no y", "class labels in y (int64)". */
static const char *y_str(const qat__store *st, char *buf, size_t len) {
    if (st->target == QAT_TARGET_NONE) return "no y";
    snprintf(buf, len, "%s in y (%s)", qat__target_str(st->target), qat_dtype_str(st->y_dtype));
    return buf;
}

/* Checks one store against itself and against train's. */
static qat_status check_store(qat_dataset *d, qat_split s) {
    qat__store *st = &d->stores[s], *tr = &d->stores[QAT_SPLIT_TRAIN];
    const char *sn = qat_split_str(s), *f = st->x.file;
    if (!x_dtype_ok(st->x.dtype))
        return qat_ctx_fail(d->ctx, QAT_ERR_UNSUPPORTED, "%s: %s: x is %s (want uint8, int8, float32 or float64)", f,
                            sn, qat_dtype_str(st->x.dtype));
    if (st->target == QAT_TARGET_VALUES && !qat__dtype_is_float(st->targets.dtype))
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
    if (st->target != tr->target) { /* y's file is not kept for class labels: the data set and the dtypes say it */
        char ys[64], yt[64];
        return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: %s has %s but train has %s: store every split's y alike "
                            "(integer class labels, or float targets)", d->path, sn, y_str(st, ys, sizeof ys), y_str(tr, yt, sizeof yt));
    }
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
        return qat_ctx_fail(d->ctx, QAT_ERR_ARG, "%s: a val fraction of %g of train's %lld samples is %lld samples, "
                            "which leaves %s (want at least 1 for val and 1 for train)", d->path, f, (long long)m,
                            (long long)k, k < 1 ? "val empty" : "train empty");
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
        int32_t r = (int32_t)qat__store_row(tr, i);
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
        int64_t r = qat__store_row(sp, i);
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
        if (st->x.mem && st->x.owned) held += st->rows * (int64_t)qat__row_bytes(&st->x);
        if (st->targets.mem && st->targets.owned) held += st->rows * (int64_t)qat__row_bytes(&st->targets);
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
    if (budget > QAT__SCAN_BYTES) budget = QAT__SCAN_BYTES;
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
        qat__store *st = &d->stores[s];
        qat__split *sp = &d->splits[s];
        if (!st->present) continue;
        sp->present = true;
        sp->store = st;
        sp->info.n = st->rows;
        uint8_t *bad = NULL;
        qat_status status = qat__scan_nonfinite(d, (qat_split)s, st, &st->x, budget, &bad);
        if (status == QAT_OK && st->target == QAT_TARGET_VALUES)
            status = qat__scan_nonfinite(d, (qat_split)s, st, &st->targets, budget, &bad);
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
    qat_dataset *d = dataset_new(ctx, "arrays", &o); /* the name messages give */
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

const char *qat_dims_str(int rank, const int64_t *shape, char *buf, size_t len) {
    if (!buf || !len) return "";
    if (!shape) return snprintf(buf, len, "[]"), buf;
    return qat__shape_str(buf, len, rank, shape);
}

bool qat__wanted(const qat_dataset *d, qat_split s) { return !d->opt.splits || (d->opt.splits & 1u << s); }
