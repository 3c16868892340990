/* HDF5 helpers shared by checkpoints and the quantized export. */
#include "h5util.h"

#include <hdf5_hl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"

/* ---- writing ---------------------------------------------------------------------- */

void qat__h5w_fail(qat__h5w *w, const char *what) {
    if (w->ok) qat_ctx_fail(w->ctx, QAT_ERR_IO, "%s: cannot write %s", w->path, what);
    w->ok = false;
}

hid_t qat__h5w_group(qat__h5w *w, hid_t loc, const char *name) {
    hid_t g = w->ok ? H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (w->ok && g < 0) qat__h5w_fail(w, name);
    return g;
}

static void dims_of(int rank, const int64_t *shape, hsize_t *dims) {
    dims[0] = 1;
    for (int d = 0; d < rank; d++) dims[d] = (hsize_t)shape[d];
}

void qat__h5w_floats(qat__h5w *w, hid_t loc, const char *name, int rank, const int64_t *shape,
                     const float *data) {
    hsize_t dims[8];
    dims_of(rank, shape, dims);
    if (w->ok && H5LTmake_dataset_float(loc, name, rank ? rank : 1, dims, data) < 0) qat__h5w_fail(w, name);
}

void qat__h5w_ints(qat__h5w *w, hid_t loc, const char *name, hid_t type, int rank,
                   const int64_t *shape, const int32_t *data) {
    if (!w->ok) return;
    hsize_t dims[8];
    dims_of(rank, shape, dims);
    /* HDF5 converts int32 in memory to the file type; every value was
     * checked to fit the storage range before it gets here. */
    hid_t space = H5Screate_simple(rank ? rank : 1, dims, NULL);
    hid_t set = space < 0 ? -1 : H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (set < 0 || H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        qat__h5w_fail(w, name);
    if (set >= 0) H5Dclose(set);
    if (space >= 0) H5Sclose(space);
}

void qat__h5w_i64(qat__h5w *w, hid_t loc, const char *name, long long v) {
    qat__h5w_i64s(w, loc, name, &v, 1);
}

void qat__h5w_i64s(qat__h5w *w, hid_t loc, const char *name, const long long *v, int n) {
    if (w->ok && H5LTset_attribute_long_long(loc, ".", name, v, (size_t)n) < 0) qat__h5w_fail(w, name);
}

void qat__h5w_f32(qat__h5w *w, hid_t loc, const char *name, float v) {
    if (w->ok && H5LTset_attribute_float(loc, ".", name, &v, 1) < 0) qat__h5w_fail(w, name);
}

void qat__h5w_str(qat__h5w *w, hid_t loc, const char *name, const char *v) {
    if (w->ok && H5LTset_attribute_string(loc, ".", name, v) < 0) qat__h5w_fail(w, name);
}

/* The file is built in memory (HDF5's core driver, no backing store) and
 * only its finished bytes go to disk, through qat__replace_file's own
 * write() calls. Why: HDF5 writes from many places, H5Fclose included.
 * A write that failed there (disk full) printed HDF5's whole error stack
 * outside any H5E_BEGIN_TRY, and left a half-closed file that the
 * library's atexit handler tried to flush again, crashing the program at
 * exit. In memory, no HDF5 call touches the disk; every HDF5 call here is
 * silenced, and a full disk is one error from our code with errno's
 * reason. The cost is memory: HDF5's buffer and our copy of the image
 * coexist for a moment (about twice the file size, 0.1-3 MB for the
 * checkpoints here), then the copy alone while it is written. */
#define CORE_INCREMENT ((size_t)1 << 20) /* the in-memory file grows 1 MiB at a time */

/* Runs write(w, user) into an in-memory HDF5 file and returns its bytes
 * in *image (malloc'ed; the caller frees) and *size. The file is labelled
 * with the target path (HDF5 never opens it with no backing store). */
static qat_status build_image(qat_ctx *ctx, const char *path, void (*write)(qat__h5w *w, void *user),
                              void *user, void **image, size_t *size) {
    qat__h5w w = {ctx, path, -1, true};
    void *buf = NULL;
    ssize_t n = -1;
    bool closed = true;
    H5E_BEGIN_TRY {
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        if (fapl >= 0 && H5Pset_fapl_core(fapl, CORE_INCREMENT, 0) >= 0)
            w.file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        if (fapl >= 0) H5Pclose(fapl);
        if (w.file >= 0) {
            write(&w, user);
            /* H5Fget_file_image (1.10.8) does not flush the metadata cache:
             * without this flush the image's object headers are stale */
            if (w.ok && H5Fflush(w.file, H5F_SCOPE_LOCAL) >= 0) n = H5Fget_file_image(w.file, NULL, 0);
            if (n > 0 && !(buf = malloc((size_t)n))) n = -2;
            if (buf && H5Fget_file_image(w.file, buf, (size_t)n) != n) n = -1;
            closed = H5Fclose(w.file) >= 0;
        }
    }
    H5E_END_TRY;
    qat_status st = QAT_OK;
    if (w.file < 0) st = qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot create an HDF5 file in memory", path);
    else if (!w.ok) st = qat_ctx_status(ctx);
    else if (n == -2) st = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: no memory for the file's image", path);
    else if (n <= 0 || !closed) st = qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot finish the HDF5 file", path);
    if (st != QAT_OK) {
        free(buf);
        return st;
    }
    *image = buf, *size = (size_t)n;
    return QAT_OK;
}

qat_status qat__h5_write_atomic(qat_ctx *ctx, const char *path, void (*write)(qat__h5w *w, void *user),
                                void *user) {
    void *image = NULL;
    size_t size = 0;
    qat_status st = build_image(ctx, path, write, user, &image, &size);
    if (st == QAT_OK) st = qat__replace_file(ctx, path, image, size);
    free(image);
    return st;
}

/* ---- reading ---------------------------------------------------------------------- */

bool qat__h5r_fail(qat__h5r *r, qat_status s, const char *fmt, ...) {
    if (r->ok) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        qat_ctx_fail(r->ctx, s, "%s: %s", r->path, msg);
    }
    r->ok = false;
    return false;
}

bool qat__h5r_has_attr(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

bool qat__h5r_str(qat__h5r *r, hid_t loc, const char *name, char *buf, size_t len) {
    if (!r->ok) return false;
    if (!qat__h5r_has_attr(loc, name)) return qat__h5r_fail(r, QAT_ERR_FORMAT, "missing attribute %s", name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = a < 0 ? -1 : H5Aget_type(a);
    size_t size = t < 0 ? 0 : H5Tget_size(t);
    bool is_str = t >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) <= 0;
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (!is_str || size == 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s is not a string", name);
    if (size >= len) return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s is too long (%zu bytes)", name, size);
    if (H5LTget_attribute_string(loc, ".", name, buf) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read attribute %s", name);
    buf[size] = '\0';
    return true;
}

bool qat__h5r_open(qat__h5r *r, const char *format, const char *what, long long max_version,
                   long long *version) {
    if (H5Fis_hdf5(r->path) <= 0) { /* H5Fis_hdf5: HDF5 1.10 (Debian 12) */
        FILE *f = fopen(r->path, "rb");
        if (f) fclose(f);
        return qat__h5r_fail(r, f ? QAT_ERR_FORMAT : QAT_ERR_IO, "%s",
                             f ? "not an HDF5 file (damaged or truncated?)" : "cannot open");
    }
    if ((r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot open as HDF5 (damaged or truncated?)");
    char have[64] = "";
    if (!qat__h5r_has_attr(r->file, "format") ||
        H5LTget_attribute_string(r->file, ".", "format", have) < 0 || strcmp(have, format))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "not a %s (format \"%s\", want \"%s\")", what, have, format);
    long long v = qat__h5r_i64(r, r->file, "version");
    if (r->ok && (v < 1 || v > max_version))
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s version %lld; this build reads versions 1 to %lld",
                             what, v, max_version);
    if (version) *version = v;
    return r->ok;
}

hid_t qat__h5r_group(qat__h5r *r, hid_t loc, const char *name) {
    if (!r->ok) return -1;
    hid_t g = H5Lexists(loc, name, H5P_DEFAULT) > 0 ? H5Gopen2(loc, name, H5P_DEFAULT) : -1;
    if (g < 0) qat__h5r_fail(r, QAT_ERR_FORMAT, "no group %s", name);
    return g;
}

bool qat__h5r_shape(qat__h5r *r, hid_t loc, const char *name, int max_rank, int *rank, int64_t *shape) {
    if (!r->ok) return false;
    if (H5LTfind_dataset(loc, name) <= 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "no dataset %s (a different model?)", name);
    int rk = 0;
    hsize_t dims[32];
    if (H5LTget_dataset_ndims(loc, name, &rk) < 0 || rk > 32 ||
        H5LTget_dataset_info(loc, name, dims, NULL, NULL) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s", name);
    if (rk > max_rank) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has rank %d (at most %d)", name, rk, max_rank);
    for (int d = 0; d < rk; d++) shape[d] = (int64_t)dims[d];
    *rank = rk;
    return true;
}

/* Checks that dataset `name` has exactly `shape`. */
static bool check_shape(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape) {
    int have = 0;
    int64_t dims[8];
    if (!qat__h5r_shape(r, loc, name, 8, &have, dims)) return false;
    int want = rank ? rank : 1;
    bool same = have == want;
    for (int d = 0; same && d < want; d++) same = dims[d] == (rank ? shape[d] : 1);
    if (!same) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has another shape than expected (a different model?)", name);
    return true;
}

bool qat__h5r_floats(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, float *out) {
    if (!check_shape(r, loc, name, rank, shape)) return false;
    if (H5LTread_dataset_float(loc, name, out) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s (damaged?)", name);
    return true;
}

bool qat__h5r_ints(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, int32_t *out) {
    if (!check_shape(r, loc, name, rank, shape)) return false;
    hid_t set = H5Dopen2(loc, name, H5P_DEFAULT), type = set < 0 ? -1 : H5Dget_type(set);
    bool is_int = type >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) <= 4;
    bool ok = is_int && H5Dread(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (type >= 0) H5Tclose(type);
    if (set >= 0) H5Dclose(set);
    if (!is_int) return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s is not an integer dataset of at most 32 bits", name);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s (damaged?)", name);
    return true;
}

long long qat__h5r_i64(qat__h5r *r, hid_t loc, const char *name) {
    long long v = 0;
    qat__h5r_i64s(r, loc, name, &v, 1);
    return v;
}

bool qat__h5r_i64s(qat__h5r *r, hid_t loc, const char *name, long long *v, int n) {
    if (!r->ok) return false;
    hsize_t dims = 0;
    H5T_class_t cls;
    size_t size;
    int rank = 0;
    if (!qat__h5r_has_attr(loc, name) || H5LTget_attribute_ndims(loc, ".", name, &rank) < 0 || rank > 1 ||
        H5LTget_attribute_info(loc, ".", name, &dims, &cls, &size) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "missing attribute %s", name);
    if (rank == 0) dims = 1;
    if (cls != H5T_INTEGER || dims != (hsize_t)n)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: want %d integer(s)", name, n);
    if (H5LTget_attribute_long_long(loc, ".", name, v) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read attribute %s", name);
    return true;
}

float qat__h5r_f32(qat__h5r *r, hid_t loc, const char *name) {
    float v = 0;
    if (r->ok && (!qat__h5r_has_attr(loc, name) || H5LTget_attribute_float(loc, ".", name, &v) < 0))
        qat__h5r_fail(r, QAT_ERR_FORMAT, "missing attribute %s", name);
    return v;
}
