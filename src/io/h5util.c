/* HDF5 helpers shared by checkpoints and the quantized export. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include "h5util.h"

#include <hdf5_hl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "core/regular.h"

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

/* A dataset creation property list: one chunk of the whole shape, shuffled
 * and deflated, when the data are big enough and deflate is there; else
 * the default (contiguous). Close it if it is not H5P_DEFAULT. */
static hid_t dcpl_for(int rank, const hsize_t *dims, size_t elem, bool deflate) {
    hsize_t n = 1;
    for (int d = 0; d < rank; d++) n *= dims[d];
    if (!deflate || n * elem < QAT__H5W_DEFLATE_MIN || n * elem > ((hsize_t)1 << 31) ||
        H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0 || H5Zfilter_avail(H5Z_FILTER_SHUFFLE) <= 0)
        return H5P_DEFAULT;
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    if (p < 0) return H5P_DEFAULT;
    if (H5Pset_chunk(p, rank, dims) < 0 || H5Pset_shuffle(p) < 0 || H5Pset_deflate(p, 6) < 0) {
        H5Pclose(p);
        return H5P_DEFAULT;
    }
    return p;
}

/* data (mem_type) as a dataset of file_type and shape, compressed if asked. */
static void write_set(qat__h5w *w, hid_t loc, const char *name, hid_t file_type, hid_t mem_type, size_t elem, int rank,
                      const int64_t *shape, const void *data, bool deflate) {
    if (!w->ok) return;
    hsize_t dims[8];
    dims_of(rank, shape, dims);
    int rk = rank ? rank : 1;
    hid_t space = H5Screate_simple(rk, dims, NULL), dcpl = dcpl_for(rk, dims, elem, deflate);
    hid_t set = space < 0 ? -1 : H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (set < 0 || H5Dwrite(set, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) qat__h5w_fail(w, name);
    if (set >= 0) H5Dclose(set);
    if (dcpl != H5P_DEFAULT) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
}

void qat__h5w_floats_z(qat__h5w *w, hid_t loc, const char *name, int rank, const int64_t *shape, const float *data) {
    write_set(w, loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, rank, shape, data, true);
}

void qat__h5w_ints_z(qat__h5w *w, hid_t loc, const char *name, hid_t type, int rank, const int64_t *shape,
                     const int32_t *data) {
    write_set(w, loc, name, type, H5T_NATIVE_INT32, H5Tget_size(type), rank, shape, data, true);
}

void qat__h5w_u8s(qat__h5w *w, hid_t loc, const char *name, const uint8_t *data, int64_t n, bool deflate) {
    write_set(w, loc, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, 1, &n, data, deflate);
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

void qat__h5w_f64(qat__h5w *w, hid_t loc, const char *name, double v) {
    if (w->ok && H5LTset_attribute_double(loc, ".", name, &v, 1) < 0) qat__h5w_fail(w, name);
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

qat_status qat__h5_stage(qat_ctx *ctx, const char *path, void (*write)(qat__h5w *w, void *user), void *user,
                         qat_save_set *set) {
    void *image = NULL;
    size_t size = 0;
    qat_status st = build_image(ctx, path, write, user, &image, &size);
    if (st == QAT_OK) st = qat__save_set_add(ctx, set, path, image, size);
    free(image);
    return st;
}

qat_status qat__h5_write_atomic(qat_ctx *ctx, const char *path, void (*write)(qat__h5w *w, void *user),
                                void *user) {
    return qat__h5_stage(ctx, path, write, user, NULL);
}

/* ---- reading ----------------------------------------------------------------------
 *
 * Files are hostile input. Every reader below checks what the file says
 * about an object (type class, rank, element count, byte length) against
 * what the caller expects and has room for, before a single byte lands in
 * the caller's memory. Errors are recorded once, with the file's path. */

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

bool qat__h5r_adopt(qat__h5r *r, const char *what) {
    if (r->ok) qat_ctx_error_prefix(r->ctx, "%s: %s", r->path, what);
    r->ok = false;
    return false;
}

bool qat__h5r_has_attr(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

bool qat__h5r_has_dataset(hid_t loc, const char *name) {
    H5O_info_t info;
    return H5Lexists(loc, name, H5P_DEFAULT) > 0 && H5Oget_info_by_name(loc, name, &info, H5P_DEFAULT) >= 0 &&
           info.type == H5O_TYPE_DATASET;
}

static const char *class_name(H5T_class_t c) {
    return c == H5T_INTEGER ? "integer" : c == H5T_FLOAT ? "float" : c == H5T_STRING ? "string" : "other";
}

/* Number of elements of a simple or scalar dataspace of rank <= max_rank
 * (-1 if the space is null, has a higher rank, or cannot be read). */
static hssize_t space_count(hid_t space, int max_rank, int *rank) {
    if (space < 0) return -1;
    H5S_class_t sc = H5Sget_simple_extent_type(space);
    int rk = sc == H5S_SCALAR ? 0 : sc == H5S_SIMPLE ? H5Sget_simple_extent_ndims(space) : -1;
    if (rk < 0 || rk > max_rank) return -1;
    if (rank) *rank = rk;
    return H5Sget_simple_extent_npoints(space);
}

/* Opens attribute `name` and checks its class and that it holds exactly n
 * elements in a scalar or rank-1 space. Returns the attribute (close it)
 * and its file type in *type (close it), or -1 with the error recorded. */
static hid_t attr_open(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, hssize_t n, hid_t *type) {
    *type = -1;
    if (!r->ok) return -1;
    if (!qat__h5r_has_attr(loc, name)) return qat__h5r_fail(r, QAT_ERR_FORMAT, "missing attribute %s", name), -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a), space = a < 0 ? -1 : H5Aget_space(a);
    H5T_class_t have = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    hssize_t count = space_count(space, 1, NULL);
    if (space >= 0) H5Sclose(space);
    if (have == cls && count == n) {
        *type = t;
        return a;
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (have != cls)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: want %s, the file has %s", name, class_name(cls),
                             class_name(have)), -1;
    return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: want %lld element(s) in a scalar or 1-d array, the "
                         "file has %lld", name, (long long)n, (long long)count), -1;
}

bool qat__h5r_str(qat__h5r *r, hid_t loc, const char *name, char *buf, size_t len) {
    hid_t t, a = attr_open(r, loc, name, H5T_STRING, 1, &t);
    if (a < 0) return false;
    htri_t vlen = H5Tis_variable_str(t);
    size_t size = H5Tget_size(t);
    bool ok = false;
    if (vlen > 0) { /* h5py writes these: HDF5 allocates the text, we copy it with a bound */
        hid_t mt = H5Tcopy(H5T_C_S1);
        char *text = NULL;
        if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Aread(a, mt, &text) >= 0 && text) {
            size = strlen(text);
            if (size < len) memcpy(buf, text, size + 1), ok = true;
            H5free_memory(text);
        }
        if (mt >= 0) H5Tclose(mt);
        if (!ok && size >= len && text) goto too_long;
    } else if (vlen == 0 && size > 0 && size <= len) {
        /* a fixed-length string of `size` bytes, NUL-terminated or padded.
         * H5LTset_attribute_string stores the NUL too: a text of len - 1
         * bytes comes as len bytes. Read into size + 1 bytes, then the
         * text itself (up to its first NUL) must fit buf. */
        hid_t mt = H5Tcopy(H5T_C_S1);
        char *text = malloc(size + 1);
        if (text && mt >= 0 && H5Tset_size(mt, size + 1) >= 0 && H5Tset_strpad(mt, H5T_STR_NULLTERM) >= 0 &&
            H5Aread(a, mt, text) >= 0) {
            text[size] = '\0';
            size = strlen(text);
            if (size < len) memcpy(buf, text, size + 1), ok = true;
        }
        free(text);
        if (mt >= 0) H5Tclose(mt);
        if (!ok && size >= len) goto too_long;
    } else if (vlen == 0 && size > len) {
        goto too_long;
    }
    H5Tclose(t);
    H5Aclose(a);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read attribute %s as a string", name);
    return true;
too_long:
    H5Tclose(t);
    H5Aclose(a);
    return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s is too long (%zu bytes; at most %zu)", name, size,
                         len - 1);
}

bool qat__h5r_i64s(qat__h5r *r, hid_t loc, const char *name, long long *v, int n, long long lo, long long hi) {
    hid_t t, a = attr_open(r, loc, name, H5T_INTEGER, n, &t);
    if (a < 0) return false;
    /* HDF5 converts any integer width; values beyond long long clip to its
     * ends, which the range check below then refuses. */
    bool ok = H5Aread(a, H5T_NATIVE_LLONG, v) >= 0;
    H5Tclose(t);
    H5Aclose(a);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read attribute %s", name);
    for (int i = 0; i < n; i++)
        if (v[i] < lo || v[i] > hi)
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: %lld is outside [%lld, %lld]", name, v[i], lo, hi);
    return true;
}

long long qat__h5r_i64(qat__h5r *r, hid_t loc, const char *name, long long lo, long long hi) {
    long long v = 0;
    return qat__h5r_i64s(r, loc, name, &v, 1, lo, hi) ? v : lo;
}

bool qat__h5r_attr_count(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, int max, int *n) {
    if (!r->ok) return false;
    if (!qat__h5r_has_attr(loc, name)) return qat__h5r_fail(r, QAT_ERR_FORMAT, "missing attribute %s", name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a), space = a < 0 ? -1 : H5Aget_space(a);
    H5T_class_t have = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    hssize_t count = space_count(space, 1, NULL);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (have != cls)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: want %s, the file has %s", name, class_name(cls),
                             class_name(have));
    if (count < 0 || count > max)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "attribute %s: %lld elements (at most %d in a 1-d array)", name,
                             (long long)count, max);
    *n = (int)count;
    return true;
}

/* One float attribute of any float type, converted by HDF5 to native (float or double). */
static bool read_float(qat__h5r *r, hid_t loc, const char *name, hid_t native, void *v) {
    hid_t t, a = attr_open(r, loc, name, H5T_FLOAT, 1, &t);
    if (a < 0) return false;
    bool ok = H5Aread(a, native, v) >= 0;
    H5Tclose(t);
    H5Aclose(a);
    if (!ok) qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read attribute %s", name);
    return ok;
}

float qat__h5r_f32(qat__h5r *r, hid_t loc, const char *name) {
    float v = 0;
    return read_float(r, loc, name, H5T_NATIVE_FLOAT, &v) ? v : 0;
}

double qat__h5r_f64(qat__h5r *r, hid_t loc, const char *name) {
    double v = 0;
    return read_float(r, loc, name, H5T_NATIVE_DOUBLE, &v) ? v : 0;
}

/* Only a regular file is opened (core/regular.h): HDF5's open of a FIFO
 * would block until a writer came, a directory or a device is no model. */
static bool regular_file(qat__h5r *r) {
    char why[160];
    int fd;
    qat_status st = qat__open_regular(r->path, &fd, NULL, why, sizeof why);
    if (st != QAT_OK) return qat__h5r_fail(r, st, "%s", why);
    close(fd);
    return true;
}

bool qat__h5r_open_file(qat__h5r *r) {
    if (!regular_file(r)) return false;
    if (H5Fis_hdf5(r->path) <= 0) { /* H5Fis_hdf5: HDF5 1.10 (Debian 12) */
        FILE *f = fopen(r->path, "rb");
        int err = errno;
        if (f) fclose(f);
        return f ? qat__h5r_fail(r, QAT_ERR_FORMAT, "not an HDF5 file (damaged or truncated?)")
                 : qat__h5r_fail(r, QAT_ERR_IO, "cannot open: %s", strerror(err));
    }
    /* A small sieve buffer: HDF5 reads a partial selection of a contiguous
     * dataset through it, 64 KiB at a time by default, so a streamed data
     * set's random rows (a few KiB each) cost 64 KiB reads. Whole-dataset
     * reads go around it either way. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) H5Pset_sieve_buf_size(fapl, 4096);
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0) H5Pclose(fapl);
    if (r->file < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot open as HDF5 (damaged or truncated?)");
    return true;
}

bool qat__h5r_open(qat__h5r *r, const char *format, const char *what, long long max_version,
                   long long *version) {
    if (!qat__h5r_open_file(r)) return false;
    char have[64] = "";
    if (!qat__h5r_has_attr(r->file, "format"))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "not a %s (no format attribute)", what);
    if (!qat__h5r_str(r, r->file, "format", have, sizeof have)) {
        qat_ctx_clear_error(r->ctx); /* say what the file is not, rather than how its attribute is wrong */
        r->ok = true;
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "not a %s (its format attribute is not a short string)", what);
    }
    bool printable = true; /* the file's text is shown only if it is printable ASCII (one line, no escapes) */
    for (const char *c = have; *c; c++) printable = printable && *c >= 0x20 && *c < 0x7f;
    if (strcmp(have, format))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "not a %s (format \"%s\", want \"%s\")", what, printable ? have : "?",
                             format);
    long long v = 0;
    if (!qat__h5r_i64s(r, r->file, "version", &v, 1, LLONG_MIN, LLONG_MAX)) return false;
    if (v < 1 || v > max_version)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s version %lld; this build reads versions 1 to %lld",
                             what, v, max_version);
    if (version) *version = v;
    return true;
}

hid_t qat__h5r_group(qat__h5r *r, hid_t loc, const char *name) {
    if (!r->ok) return -1;
    H5O_info_t info;
    bool is_group = H5Lexists(loc, name, H5P_DEFAULT) > 0 && H5Oget_info_by_name(loc, name, &info, H5P_DEFAULT) >= 0 &&
                    info.type == H5O_TYPE_GROUP;
    hid_t g = is_group ? H5Gopen2(loc, name, H5P_DEFAULT) : -1;
    if (g < 0) qat__h5r_fail(r, QAT_ERR_FORMAT, "no group %s", name);
    return g;
}

/* Opens dataset `name`, checks its class and rank <= max_rank, and gives
 * its shape. Returns the dataset (close it) or -1 with the error. */
static hid_t dataset_open(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, int max_rank, int *rank,
                          int64_t *shape) {
    if (!r->ok) return -1;
    if (!qat__h5r_has_dataset(loc, name))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "no dataset %s (a different model?)", name), -1;
    hid_t set = H5Dopen2(loc, name, H5P_DEFAULT);
    hid_t t = set < 0 ? -1 : H5Dget_type(set), space = set < 0 ? -1 : H5Dget_space(set);
    H5T_class_t have = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    size_t size = t < 0 ? 0 : H5Tget_size(t);
    int rk = -1;
    hssize_t count = space_count(space, 32, &rk);
    hsize_t dims[32] = {0};
    if (count >= 0 && rk > 0) H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    const char *why = NULL;
    if (set < 0 || count < 0) why = "cannot read its shape";
    else if (have != cls) why = cls == H5T_FLOAT ? "is not a float dataset" : "is not an integer dataset";
    else if (size > 8) why = "has elements wider than 8 bytes";
    else if (rk > max_rank) why = "has too many dimensions";
    if (why) {
        if (set >= 0) H5Dclose(set);
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "dataset %s %s", name, why), -1;
    }
    for (int d = 0; d < rk; d++) shape[d] = (int64_t)dims[d];
    *rank = rk;
    return set;
}

bool qat__h5r_shape(qat__h5r *r, hid_t loc, const char *name, int max_rank, int *rank, int64_t *shape) {
    if (!r->ok) return false;
    if (!qat__h5r_has_dataset(loc, name))
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "no dataset %s (a different model?)", name);
    hid_t set = H5Dopen2(loc, name, H5P_DEFAULT), space = set < 0 ? -1 : H5Dget_space(set);
    int rk = -1;
    hssize_t count = space_count(space, 32, &rk);
    hsize_t dims[32] = {0};
    if (count >= 0 && rk > 0) H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0) H5Sclose(space);
    if (set >= 0) H5Dclose(set);
    if (count < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read the shape of %s", name);
    if (rk > max_rank) return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has rank %d (at most %d)", name, rk, max_rank);
    for (int d = 0; d < rk; d++) shape[d] = (int64_t)dims[d];
    *rank = rk;
    return true;
}

/* Opens dataset `name` of class cls that must have exactly `shape` (rank 0:
 * one element, stored as scalar or [1]). */
static hid_t dataset_exact(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, int rank,
                           const int64_t *shape) {
    int have = 0;
    int64_t dims[QAT__H5R_MAX_RANK];
    hid_t set = dataset_open(r, loc, name, cls, QAT__H5R_MAX_RANK, &have, dims);
    if (set < 0) return -1;
    bool same = rank == 0 ? have == 0 || (have == 1 && dims[0] == 1) : have == rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == shape[d];
    if (!same) {
        H5Dclose(set);
        return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has another shape than expected (a different model?)", name), -1;
    }
    return set;
}

/* Integers go into int32 only from types that always fit it: signed of at
 * most 32 bits, unsigned of fewer. HDF5 would clip the rest silently. */
static bool fits_int32(qat__h5r *r, hid_t set, const char *name) {
    hid_t t = H5Dget_type(set);
    size_t size = t < 0 ? 0 : H5Tget_size(t);
    H5T_sign_t sign = t < 0 ? H5T_SGN_ERROR : H5Tget_sign(t);
    if (t >= 0) H5Tclose(t);
    if (size >= 1 && (size < 4 || (size == 4 && sign == H5T_SGN_2))) return true;
    return qat__h5r_fail(r, QAT_ERR_FORMAT, "dataset %s: want integers of at most 32 bits (signed), the file has "
                         "%zu-byte %s ones", name, size, sign == H5T_SGN_2 ? "signed" : "unsigned");
}

static bool read_exact(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, hid_t mem, int rank,
                       const int64_t *shape, void *out) {
    hid_t set = dataset_exact(r, loc, name, cls, rank, shape);
    if (set < 0) return false;
    if (mem == H5T_NATIVE_INT32 && !fits_int32(r, set, name)) return H5Dclose(set), false;
    bool ok = H5Dread(set, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(set);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s (damaged, or values out of range?)", name);
    return true;
}

bool qat__h5r_floats(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, float *out) {
    return read_exact(r, loc, name, H5T_FLOAT, H5T_NATIVE_FLOAT, rank, shape, out);
}

bool qat__h5r_ints(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, int32_t *out) {
    return read_exact(r, loc, name, H5T_INTEGER, H5T_NATIVE_INT32, rank, shape, out);
}

bool qat__h5r_u8s(qat__h5r *r, hid_t loc, const char *name, int64_t n, uint8_t *out) {
    hid_t set = dataset_exact(r, loc, name, H5T_INTEGER, 1, &n);
    if (set < 0) return false;
    hid_t t = H5Dget_type(set);
    bool byte = t >= 0 && H5Tget_size(t) == 1 && H5Tget_sign(t) == H5T_SGN_NONE;
    if (t >= 0) H5Tclose(t);
    bool ok = byte && H5Dread(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(set);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "dataset %s: want %lld unsigned bytes", name, (long long)n);
    return true;
}

bool qat__h5r_u64s(qat__h5r *r, hid_t loc, const char *name, int64_t n, uint64_t *out) {
    hid_t set = dataset_exact(r, loc, name, H5T_INTEGER, 1, &n);
    if (set < 0) return false;
    hid_t t = H5Dget_type(set);
    bool wide = t >= 0 && H5Tget_size(t) == 8;
    if (t >= 0) H5Tclose(t);
    bool ok = wide && H5Dread(set, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(set);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "dataset %s: want %lld 64-bit integers", name, (long long)n);
    return true;
}

bool qat__h5r_i32s_upto(qat__h5r *r, hid_t loc, const char *name, int64_t cap, int32_t *out, int64_t *n) {
    int rank = 0;
    int64_t dims[1] = {0};
    hid_t set = dataset_open(r, loc, name, H5T_INTEGER, 1, &rank, dims);
    if (set < 0) return false;
    int64_t count = rank == 0 ? 1 : dims[0];
    if (count > cap || !fits_int32(r, set, name)) {
        H5Dclose(set);
        if (!r->ok) return false;
        return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has %lld elements, more than the %lld there is room for", name,
                             (long long)count, (long long)cap);
    }
    bool ok = H5Dread(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(set);
    if (!ok) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s", name);
    *n = count;
    return true;
}
