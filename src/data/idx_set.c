/* IDX data sets: a directory of IDX files named as MNIST's, each plain
 * or gzipped: train-images-idx3-ubyte, train-labels-idx1-ubyte and the
 * test pair t10k-... (or test-...), with any prefix ending in '-'
 * (emnist-letters-train-images-idx3-ubyte). Read by qat_idx_read, which
 * checks every file's header and payload. Images [N, H, W] become
 * samples [1, H, W] (one channel, as torchvision's MNIST); [N, F]
 * samples [F]; [N, A, B, C] samples [A, B, C]. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"

enum { IMAGES, LABELS };

/* Is name (without ".gz") <prefix-><role>-<kind>-idx<digit>-ubyte for
 * one of the split's roles? */
static bool matches(const char *name, qat_split s, int kind) {
    char base[256];
    size_t n = strlen(name);
    if (n >= sizeof base) return false;
    memcpy(base, name, n + 1);
    if (n > 3 && !strcmp(base + n - 3, ".gz")) base[n -= 3] = '\0';
    static const char *const train_roles[] = {"train", NULL}, *const test_roles[] = {"t10k", "test", NULL};
    const char *const *roles = s == QAT_SPLIT_TRAIN ? train_roles : test_roles;
    for (int r = 0; roles[r]; r++) {
        char tail[64];
        int len = snprintf(tail, sizeof tail, "%s-%s-idx", roles[r], kind == IMAGES ? "images" : "labels");
        /* tail, one digit, "-ubyte" at the end */
        if (n < (size_t)len + 7) continue;
        const char *t = base + n - (size_t)len - 7;
        if (memcmp(t, tail, (size_t)len) || t[len] < '1' || t[len] > '4' || strcmp(t + len + 1, "-ubyte")) continue;
        if (t == base || t[-1] == '-') return true;
    }
    return false;
}

/* The one file of (split, kind) in the directory: name.gz is preferred to
 * name (qat_mnist_load's rule); two different names are an error. */
static qat_status find(qat_dataset *d, const char *dir, char **names, int n, qat_split s, int kind, char *path,
                       size_t len, bool *found) {
    const char *pick = NULL;
    *found = false;
    for (int i = 0; i < n; i++) {
        if (!matches(names[i], s, kind)) continue;
        if (!pick) {
            pick = names[i];
            continue;
        }
        /* the same stem plain and gzipped: take the .gz */
        size_t a = strlen(pick), b = strlen(names[i]);
        if (b == a + 3 && !strncmp(pick, names[i], a) && !strcmp(names[i] + a, ".gz")) pick = names[i];
        else if (!(a == b + 3 && !strncmp(pick, names[i], b) && !strcmp(pick + b, ".gz")))
            return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: two IDX files for the %s %s: %s and %s (keep one set "
                                "per directory)", dir, qat_split_str(s), kind == IMAGES ? "images" : "labels", pick,
                                names[i]);
    }
    if (pick) snprintf(path, len, "%s/%s", dir, pick), *found = true;
    return QAT_OK;
}

static qat_status load_split(qat_dataset *d, qat_split s, const char *ipath, const char *lpath, int64_t *bytes) {
    qat__store *st = &d->stores[s];
    const char *sn = qat_split_str(s);
    qat_idx im, lb;
    memset(&lb, 0, sizeof lb);
    /* a data set's files are files: a FIFO in its folder would block the read until a writer came */
    qat_status status = qat__idx_read_regular(d->ctx, ipath, &im);
    if (status != QAT_OK) return status;
    qat__array *x = &st->x;
    x->owned = im.data; /* the store owns it from here */
    x->mem = im.data;
    x->dtype = QAT_DT_U8;
    snprintf(x->file, sizeof x->file, "%s", ipath);
    snprintf(x->name, sizeof x->name, "x");
    if (im.ndim < 2)
        return qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: images of 1 dimension: want [N, ...] (one row per sample)",
                            ipath, sn);
    if (im.ndim == 3) {
        x->rank = 3;
        x->shape[0] = 1, x->shape[1] = im.dims[1], x->shape[2] = im.dims[2];
    } else {
        x->rank = im.ndim - 1;
        memcpy(x->shape, im.dims + 1, (size_t)x->rank * sizeof *x->shape);
    }
    status = qat__check_shape(d->ctx, ipath, sn, "x", im.dims[0], x->rank, x->shape, &x->row_elems);
    if (status != QAT_OK) return status;
    st->present = true;
    st->rows = im.dims[0];
    *bytes += im.size + st->rows * (lpath ? 8 : 4); /* with the labels and row map (qat__table_bytes) */
    if (*bytes > qat__data_cap(d))
        return qat_ctx_fail(d->ctx, QAT_ERR_UNSUPPORTED, "%s: the IDX images take %lld bytes (with the labels and row "
                            "maps), over the memory cap of %lld: IDX sets are read whole (raise the cap, or convert the set to HDF5, which streams)",
                            ipath, (long long)*bytes, (long long)qat__data_cap(d));
    if (!lpath) return QAT_OK;
    if ((status = qat__idx_read_regular(d->ctx, lpath, &lb)) != QAT_OK) return status;
    if (lb.ndim != 1)
        status = qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: labels of %d dimensions (want 1: [N])", lpath, sn, lb.ndim);
    else if (lb.dims[0] != st->rows)
        status = qat_ctx_fail(d->ctx, QAT_ERR_SHAPE, "%s: %s: x has %lld rows but y has %lld", lpath, sn,
                              (long long)st->rows, (long long)lb.dims[0]);
    else if (!(st->labels_owned = malloc((size_t)st->rows * sizeof *st->labels_owned)))
        status = qat_ctx_fail(d->ctx, QAT_ERR_NOMEM, "%s: no memory for the labels", lpath);
    else
        status = qat__labels_convert(d->ctx, lb.data, QAT_DT_U8, st->rows, 0, st->labels_owned, lpath, sn);
    qat_idx_free(&lb);
    if (status != QAT_OK) return status;
    st->labels = st->labels_owned;
    st->target = QAT_TARGET_CLASS;
    st->y_dtype = QAT_DT_U8;
    return QAT_OK;
}

qat_status qat__idx_dir_open(qat_dataset *d, const char *dir) {
    char **names;
    int n;
    qat_status status = qat__dir_list(d->ctx, dir, &names, &n);
    if (status != QAT_OK) return status;
    /* every file found before any is read: a missing one is named first */
    static const qat_split splits[2] = {QAT_SPLIT_TRAIN, QAT_SPLIT_TEST};
    char ipath[2][QAT__DATA_PATH], lpath[2][QAT__DATA_PATH];
    bool has_i[2] = {false, false}, has_l[2] = {false, false};
    for (int k = 0; k < 2 && status == QAT_OK; k++) {
        if (!qat__wanted(d, splits[k])) continue; /* left out by the caller */
        status = find(d, dir, names, n, splits[k], IMAGES, ipath[k], sizeof ipath[k], &has_i[k]);
        if (status == QAT_OK) status = find(d, dir, names, n, splits[k], LABELS, lpath[k], sizeof lpath[k], &has_l[k]);
        if (status == QAT_OK && !has_i[k]) {
            char list[256];
            qat__join_names(list, sizeof list, names, n);
            status = qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: no %s images (want %s-images-idx3-ubyte[.gz]; the "
                                  "directory holds: %s)", dir, qat_split_str(splits[k]),
                                  k ? "t10k" : "train", list);
        }
    }
    int64_t bytes = 0;
    for (int k = 0; k < 2 && status == QAT_OK; k++)
        if (qat__wanted(d, splits[k])) status = load_split(d, splits[k], ipath[k], has_l[k] ? lpath[k] : NULL, &bytes);
    free(names);
    return status;
}
