/* MNIST: the four IDX files, checked against each other; batching. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qat/data.h"

/* dir/stem-idxN-ubyte.gz, or the plain file when only that exists. */
static void find_file(char *buf, size_t len, const char *dir, const char *stem) {
    snprintf(buf, len, "%s/%s.gz", dir, stem);
    if (access(buf, R_OK) == 0) return;
    snprintf(buf, len, "%s/%s", dir, stem);
    if (access(buf, R_OK) == 0) return;
    snprintf(buf, len, "%s/%s.gz", dir, stem); /* report the usual name */
}

void qat_mnist_free(qat_mnist *d) {
    if (!d) return;
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

qat_status qat_mnist_load(qat_ctx *ctx, const char *dir, const char *split, qat_mnist *out) {
    if (!ctx) return QAT_ERR_ARG;
    if (!dir || !split || !out) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_mnist_load: NULL argument");
    memset(out, 0, sizeof *out);
    const char *prefix;
    if (!strcmp(split, "train")) prefix = "train";
    else if (!strcmp(split, "test")) prefix = "t10k";
    else return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_mnist_load: split \"%s\" (want train or test)", split);
    if (access(dir, R_OK) != 0) /* the OS's reason: missing and unreadable need different fixes */
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot read the MNIST directory: %s (scripts/fetch-mnist.sh "
                            "DIR fetches it; with QAT_MNIST_DIR naming a local copy, it copies from there)", dir,
                            strerror(errno));
    char ipath[4096], lpath[4096], stem[64];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", prefix);
    find_file(ipath, sizeof ipath, dir, stem);
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", prefix);
    find_file(lpath, sizeof lpath, dir, stem);
    qat_idx im, lb;
    qat_status st = qat_idx_read(ctx, ipath, &im);
    if (st != QAT_OK) return st;
    st = qat_idx_read(ctx, lpath, &lb);
    if (st != QAT_OK) {
        qat_idx_free(&im);
        return st;
    }
    if (im.ndim != 3) st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: images need 3 dimensions, file has %d", ipath, im.ndim);
    else if (lb.ndim != 1) st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: labels need 1 dimension, file has %d", lpath, lb.ndim);
    else if (im.dims[0] != lb.dims[0])
        st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s has %lld images but %s has %lld labels", ipath,
                          (long long)im.dims[0], lpath, (long long)lb.dims[0]);
    for (int64_t i = 0; st == QAT_OK && i < lb.size; i++)
        if (lb.data[i] > 9)
            st = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: label %d of sample %lld is not a digit", lpath,
                              lb.data[i], (long long)i);
    if (st != QAT_OK) {
        qat_idx_free(&im);
        qat_idx_free(&lb);
        return st;
    }
    out->n = im.dims[0];
    out->rows = (int)im.dims[1];
    out->cols = (int)im.dims[2];
    out->images = im.data;
    out->labels = lb.data;
    return QAT_OK;
}

void qat_mnist_batch(const qat_mnist *d, const int32_t *idx, int64_t n, float *x, int32_t *y) {
    if (!d || !idx || !x || !y) return;
    int64_t px = (int64_t)d->rows * d->cols;
    /* (p/255 - mean)/std as one multiply-add per pixel, from a 256-entry table */
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - QAT_MNIST_MEAN) / QAT_MNIST_STD;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *src = d->images + (int64_t)idx[i] * px;
        float *dst = x + i * px;
        for (int64_t p = 0; p < px; p++) dst[p] = lut[src[p]];
        if (y) y[i] = d->labels[idx[i]];
    }
}

void qat_shuffle(int32_t *perm, int64_t n, qat_rng *rng) {
    if (!perm || !rng) return;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = qat_rng_below(rng, (uint32_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
