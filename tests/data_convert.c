/* qat_data_convert: reads any data set through qat/data.h and writes it
 * as an HDF5 file or a directory of .npy files (docs/data-format.md), or
 * only reads it and prints what it holds. The tests convert MNIST with it
 * (the same floats and labels from IDX, HDF5 and .npy); a set too big for
 * memory converts batch by batch.
 *
 *   qat_data_convert [options] IN OUT
 *     IN   an HDF5 file, a directory of .npy files or of IDX files
 *     OUT  FILE.h5 / FILE.hdf5: HDF5; -: read every split and print a
 *          summary (counts, shapes, a checksum of the raw bytes and of
 *          the floats); anything else: a directory of .npy files (made)
 *   --memory-cap BYTES   --channels-last   --allow-nonfinite
 *   --val FRACTION --val-seed N   the val split carved from train (written too)
 *   --batch N            samples per read (default 1024)
 *   --chunk-rows N       HDF5 output in chunks of N rows (default: contiguous)
 *
 * x keeps its stored type (channels first); class labels are written as
 * uint8 when the largest fits, int32 otherwise; float targets as float32;
 * anomaly flags as uint8. Exit status: 0, 1 on an error (one line), 2 on
 * a bad command line. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qat/data.h"

typedef struct {
    const char *in, *out;
    qat_dataset_options opt;
    int64_t batch, chunk_rows;
} args;

static int usage(const char *why) {
    fprintf(stderr, "qat_data_convert: %s\nusage: qat_data_convert [--memory-cap BYTES] [--channels-last] "
            "[--allow-nonfinite] [--val FRACTION] [--val-seed N] [--batch N] [--chunk-rows N] IN OUT.h5|OUT_DIR|-\n",
            why);
    return 2;
}

static bool number(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return s[0] && !*end && !errno;
}

static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->opt = qat_dataset_defaults();
    a->batch = 1024;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        double v;
        if (!strcmp(s, "--channels-last")) a->opt.channels_last = true;
        else if (!strcmp(s, "--allow-nonfinite")) a->opt.allow_nonfinite = true;
        else if (s[0] == '-' && s[1] == '-') {
            if (i + 1 >= argc || !number(argv[i + 1], &v)) return usage("an option without its number");
            i++;
            if (!strcmp(s, "--memory-cap")) a->opt.memory_cap = (int64_t)v;
            else if (!strcmp(s, "--val")) a->opt.val_fraction = v;
            else if (!strcmp(s, "--val-seed")) a->opt.val_seed = (uint64_t)v;
            else if (!strcmp(s, "--batch") && v >= 1) a->batch = (int64_t)v;
            else if (!strcmp(s, "--chunk-rows") && v >= 1) a->chunk_rows = (int64_t)v;
            else return usage("unknown option or bad value");
        } else if (pos == 0) a->in = s, pos++;
        else if (pos == 1) a->out = s, pos++;
        else return usage("too many arguments");
    }
    return pos == 2 ? 0 : usage("want IN and OUT");
}

/* ---- the per-split output: one writer per format ----------------------------------------- */

enum { X, Y, ANOMALY, N_PARTS };

typedef struct {
    qat_dtype dtype;       /* as written */
    int rank;              /* per sample */
    int64_t shape[QAT_DATA_MAX_RANK];
    bool present;
} part;

/* The parts of a split as written. */
static void parts_of(const qat_split_info *in, part *p) {
    memset(p, 0, N_PARTS * sizeof *p);
    p[X] = (part){in->x_dtype, in->x_rank, {0}, true};
    memcpy(p[X].shape, in->x_shape, sizeof in->x_shape);
    if (in->target == QAT_TARGET_CLASS) p[Y] = (part){in->label_max <= 255 ? QAT_DT_U8 : QAT_DT_I32, 0, {0}, true};
    if (in->target == QAT_TARGET_VALUES) {
        p[Y] = (part){QAT_DT_F32, in->y_rank, {0}, true};
        memcpy(p[Y].shape, in->y_shape, sizeof in->y_shape);
    }
    if (in->has_anomaly) p[ANOMALY] = (part){QAT_DT_U8, 0, {0}, true};
}

static hid_t h5_file_type(qat_dtype t) {
    switch (t) {
    case QAT_DT_U8: return H5T_STD_U8LE;
    case QAT_DT_I8: return H5T_STD_I8LE;
    case QAT_DT_I32: return H5T_STD_I32LE;
    case QAT_DT_F32: return H5T_IEEE_F32LE;
    default: return H5T_IEEE_F64LE;
    }
}

static hid_t h5_mem_type(qat_dtype t) {
    switch (t) {
    case QAT_DT_U8: return H5T_NATIVE_UINT8;
    case QAT_DT_I8: return H5T_NATIVE_INT8;
    case QAT_DT_I32: return H5T_NATIVE_INT32;
    case QAT_DT_F32: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
    }
}

typedef struct {
    bool hdf5;
    hid_t file, sets[N_PARTS];
    FILE *npy[N_PARTS];
} writer;

static const char *const part_names[N_PARTS] = {"x", "y", "anomaly"};

/* The .npy header for n rows of p (the library's writer's). */
static bool npy_header(FILE *f, const part *p, int64_t n) {
    int64_t shape[QAT_DATA_MAX_RANK + 1] = {n};
    for (int i = 0; i < p->rank; i++) shape[i + 1] = p->shape[i];
    char head[640];
    size_t len = qat_npy_header(head, sizeof head, p->dtype, p->rank + 1, shape);
    return len && fwrite(head, 1, len, f) == len;
}

static bool open_split(writer *w, const args *a, qat_split s, const part *p, int64_t n) {
    const char *sn = qat_split_str(s);
    for (int k = 0; k < N_PARTS; k++) w->sets[k] = -1, w->npy[k] = NULL;
    if (!w->hdf5) {
        for (int k = 0; k < N_PARTS; k++) {
            if (!p[k].present) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s_%s.npy", a->out, sn, part_names[k]);
            if (!(w->npy[k] = fopen(path, "wb")) || !npy_header(w->npy[k], &p[k], n)) {
                fprintf(stderr, "qat_data_convert: %s: cannot write: %s\n", path, strerror(errno));
                return false;
            }
        }
        return true;
    }
    hid_t g = H5Gcreate2(w->file, sn, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (int k = 0; k < N_PARTS && g >= 0; k++) {
        if (!p[k].present) continue;
        hsize_t dims[QAT_DATA_MAX_RANK + 1] = {(hsize_t)n}, chunk[QAT_DATA_MAX_RANK + 1];
        for (int i = 0; i < p[k].rank; i++) dims[i + 1] = (hsize_t)p[k].shape[i];
        hid_t sp = H5Screate_simple(1 + p[k].rank, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
        if (k == X && a->chunk_rows) {
            memcpy(chunk, dims, sizeof dims);
            chunk[0] = (hsize_t)(a->chunk_rows < n ? a->chunk_rows : n);
            H5Pset_chunk(dcpl, 1 + p[k].rank, chunk);
        }
        w->sets[k] = H5Dcreate2(g, part_names[k], h5_file_type(p[k].dtype), sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Pclose(dcpl), H5Sclose(sp);
        if (w->sets[k] < 0) break;
    }
    if (g >= 0) H5Gclose(g);
    for (int k = 0; k < N_PARTS; k++)
        if (p[k].present && w->sets[k] < 0) {
            fprintf(stderr, "qat_data_convert: %s: cannot create %s/%s\n", a->out, sn, part_names[k]);
            return false;
        }
    return true;
}

/* rows [r0, r0 + count) of part k from buf */
static bool write_rows(writer *w, int k, const part *p, int64_t r0, int64_t count, const void *buf) {
    int64_t row = 1;
    for (int i = 0; i < p->rank; i++) row *= p->shape[i];
    if (!w->hdf5) {
        size_t bytes = (size_t)(count * row) * qat_dtype_size(p->dtype);
        return fwrite(buf, 1, bytes, w->npy[k]) == bytes;
    }
    hsize_t start[QAT_DATA_MAX_RANK + 1] = {(hsize_t)r0}, cnt[QAT_DATA_MAX_RANK + 1] = {(hsize_t)count};
    for (int i = 0; i < p->rank; i++) cnt[i + 1] = (hsize_t)p->shape[i];
    hsize_t elems = (hsize_t)(count * row);
    hid_t fs = H5Dget_space(w->sets[k]), ms = H5Screate_simple(1, &elems, NULL);
    bool ok = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL) >= 0 &&
              H5Dwrite(w->sets[k], h5_mem_type(p->dtype), ms, fs, H5P_DEFAULT, buf) >= 0;
    H5Sclose(ms), H5Sclose(fs);
    return ok;
}

static bool close_split(writer *w) {
    bool ok = true;
    for (int k = 0; k < N_PARTS; k++) {
        if (w->sets[k] >= 0) ok &= H5Dclose(w->sets[k]) >= 0;
        if (w->npy[k]) ok &= fclose(w->npy[k]) == 0;
        w->sets[k] = -1, w->npy[k] = NULL;
    }
    return ok;
}

/* FNV-1a over bytes: the summary's checksums */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- the split, batch by batch ------------------------------------------------------------- */

static int convert_split(qat_ctx *ctx, qat_dataset *d, qat_split s, const args *a, writer *w) {
    const qat_split_info *in = qat_dataset_info(d, s);
    part p[N_PARTS];
    parts_of(in, p);
    bool summary = !strcmp(a->out, "-");
    if (!summary && !open_split(w, a, s, p, in->n)) return 1;
    int64_t b = a->batch < in->n ? a->batch : in->n;
    size_t xs = qat_dtype_size(in->x_dtype);
    int32_t *idx = malloc((size_t)b * sizeof *idx), *labels = malloc((size_t)b * sizeof *labels);
    void *raw = malloc((size_t)(b * in->x_numel) * xs);
    float *xf = summary ? malloc((size_t)(b * in->x_numel) * sizeof *xf) : NULL;
    float *targets = in->target == QAT_TARGET_VALUES ? malloc((size_t)(b * in->y_numel) * sizeof *targets) : NULL;
    uint8_t *anomaly = malloc((size_t)b), *y8 = malloc((size_t)b);
    int rc = !idx || !labels || !raw || (summary && !xf) || (in->target == QAT_TARGET_VALUES && !targets) || !anomaly ||
             !y8;
    if (rc) fprintf(stderr, "qat_data_convert: no memory for a batch of %lld samples\n", (long long)b);
    uint64_t hraw = 1469598103934665603ull, hfloat = hraw, hy = hraw;
    for (int64_t r0 = 0; r0 < in->n && !rc; r0 += b) {
        int64_t cnt = in->n - r0 < b ? in->n - r0 : b;
        for (int64_t i = 0; i < cnt; i++) idx[i] = (int32_t)(r0 + i);
        qat_status st = qat_dataset_read_raw(d, s, idx, cnt, raw);
        if (st == QAT_OK)
            st = qat_dataset_read(d, s, idx, cnt, xf, in->target == QAT_TARGET_CLASS ? labels : NULL, targets,
                                  in->has_anomaly ? anomaly : NULL);
        if (st != QAT_OK) {
            fprintf(stderr, "qat_data_convert: %s\n", qat_ctx_error(ctx));
            rc = 1;
            break;
        }
        const void *y = targets;
        if (in->target == QAT_TARGET_CLASS && p[Y].dtype == QAT_DT_U8) {
            for (int64_t i = 0; i < cnt; i++) y8[i] = (uint8_t)labels[i];
            y = y8;
        } else if (in->target == QAT_TARGET_CLASS) {
            y = labels;
        }
        if (summary) {
            hraw = fnv(hraw, raw, (size_t)(cnt * in->x_numel) * xs);
            hfloat = fnv(hfloat, xf, (size_t)(cnt * in->x_numel) * sizeof *xf);
            if (in->target == QAT_TARGET_CLASS) hy = fnv(hy, labels, (size_t)cnt * sizeof *labels);
            if (in->target == QAT_TARGET_VALUES) hy = fnv(hy, targets, (size_t)(cnt * in->y_numel) * sizeof *targets);
            continue;
        }
        bool ok = write_rows(w, X, &p[X], r0, cnt, raw);
        if (ok && p[Y].present) ok = write_rows(w, Y, &p[Y], r0, cnt, y);
        if (ok && p[ANOMALY].present) ok = write_rows(w, ANOMALY, &p[ANOMALY], r0, cnt, anomaly);
        if (!ok) {
            fprintf(stderr, "qat_data_convert: %s: cannot write %s rows %lld..\n", a->out, qat_split_str(s),
                    (long long)r0);
            rc = 1;
        }
    }
    if (!summary && !close_split(w) && !rc) {
        fprintf(stderr, "qat_data_convert: %s: cannot finish %s\n", a->out, qat_split_str(s));
        rc = 1;
    }
    if (summary && !rc) {
        char sh[128];
        int k = snprintf(sh, sizeof sh, "[");
        for (int i = 0; i < in->x_rank; i++) k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", i ? ", " : "",
                                                           (long long)in->x_shape[i]);
        snprintf(sh + k, sizeof sh - (size_t)k, "]");
        printf("%s: n %lld x %s %s y %s label_max %lld streaming %d skipped %lld raw %016llx float %016llx y "
               "%016llx\n", qat_split_str(s), (long long)in->n, qat_dtype_str(in->x_dtype), sh,
               in->target == QAT_TARGET_CLASS ? "class" : in->target == QAT_TARGET_VALUES ? "values" : "none",
               (long long)in->label_max, in->streaming, (long long)in->skipped, (unsigned long long)hraw,
               (unsigned long long)hfloat, (unsigned long long)hy);
    }
    free(idx), free(labels), free(raw), free(xf), free(targets), free(anomaly), free(y8);
    return rc;
}

int main(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = NULL;
    if (!ctx) return 1;
    if (qat_dataset_open(ctx, a.in, &a.opt, &d) != QAT_OK) {
        fprintf(stderr, "qat_data_convert: %s\n", qat_ctx_error(ctx));
        qat_ctx_free(ctx);
        return 1;
    }
    size_t n = strlen(a.out);
    writer w;
    memset(&w, 0, sizeof w);
    w.file = -1;
    w.hdf5 = (n > 3 && !strcmp(a.out + n - 3, ".h5")) || (n > 5 && !strcmp(a.out + n - 5, ".hdf5"));
    if (w.hdf5) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        if ((w.file = H5Fcreate(a.out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) < 0) {
            fprintf(stderr, "qat_data_convert: %s: cannot create the HDF5 file\n", a.out);
            rc = 1;
        }
    } else if (strcmp(a.out, "-") && mkdir(a.out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qat_data_convert: %s: cannot make the directory: %s\n", a.out, strerror(errno));
        rc = 1;
    }
    for (int s = 0; s < QAT_SPLIT_COUNT && !rc; s++)
        if (qat_dataset_info(d, (qat_split)s)) rc = convert_split(ctx, d, (qat_split)s, &a, &w);
    if (w.file >= 0 && H5Fclose(w.file) < 0 && !rc) {
        fprintf(stderr, "qat_data_convert: %s: cannot finish the HDF5 file\n", a.out);
        rc = 1;
    }
    if (!rc && strcmp(a.out, "-"))
        fprintf(stderr, "qat_data_convert: %s (%s) -> %s\n", a.in, qat_dataset_format(d), a.out);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
    return rc;
}
