/* Small HDF5 helpers shared by the training checkpoint and the quantized
 * export: a writer and a reader that carry the first error (on the
 * context, with the file's path) so a whole file is written or read
 * without a check after every call. Call them inside H5E_BEGIN_TRY so
 * HDF5 prints nothing; the message on the context says what went wrong.
 * Shared with: src/data src/export
 */
#ifndef QAT_IO_H5UTIL_H
#define QAT_IO_H5UTIL_H

#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>

#include "qat/autograd.h"
#include "qat/io.h"

typedef struct {
    qat_ctx *ctx;
    const char *path; /* the target path, for messages */
    hid_t file;
    bool ok;
} qat__h5w;

typedef struct {
    qat_ctx *ctx;
    const char *path;
    hid_t file;
    bool ok;
} qat__h5r;

/* ---- writing: each is a no-op once w->ok is false ---------------------------- */
void qat__h5w_fail(qat__h5w *w, const char *what);
hid_t qat__h5w_group(qat__h5w *w, hid_t loc, const char *name); /* close with H5Gclose if >= 0 */
void qat__h5w_floats(qat__h5w *w, hid_t loc, const char *name, int rank, const int64_t *shape,
                     const float *data);
/* int32 values written as a dataset of `type` (H5T_NATIVE_INT8, _INT16, _INT32). */
void qat__h5w_ints(qat__h5w *w, hid_t loc, const char *name, hid_t type, int rank,
                   const int64_t *shape, const int32_t *data);
/* The same two, compressed (shuffle + deflate, one chunk) when the data
 * take at least QAT__H5W_DEFLATE_MIN bytes and the library has deflate:
 * readers need nothing special (HDF5 and h5py decompress on read). */
#define QAT__H5W_DEFLATE_MIN 4096
void qat__h5w_floats_z(qat__h5w *w, hid_t loc, const char *name, int rank, const int64_t *shape,
                       const float *data);
void qat__h5w_ints_z(qat__h5w *w, hid_t loc, const char *name, hid_t type, int rank, const int64_t *shape,
                     const int32_t *data);
/* n bytes as a 1-d uint8 dataset (compressed from QAT__H5W_DEFLATE_MIN bytes
 * when deflate is true). */
void qat__h5w_u8s(qat__h5w *w, hid_t loc, const char *name, const uint8_t *data, int64_t n, bool deflate);
void qat__h5w_i64(qat__h5w *w, hid_t loc, const char *name, long long v);      /* attribute */
void qat__h5w_i64s(qat__h5w *w, hid_t loc, const char *name, const long long *v, int n);
void qat__h5w_f32(qat__h5w *w, hid_t loc, const char *name, float v);          /* attribute */
void qat__h5w_f64(qat__h5w *w, hid_t loc, const char *name, double v);         /* attribute */
void qat__h5w_str(qat__h5w *w, hid_t loc, const char *name, const char *v);    /* attribute */

/* Runs write(w, user) into an HDF5 file built in memory, then writes its
 * bytes to a temporary file beside path and renames it over path
 * (docs/saving.md): the target is the old file or the whole new one, and
 * a full disk is one clean error. */
qat_status qat__h5_write_atomic(qat_ctx *ctx, const char *path,
                                void (*write)(qat__h5w *w, void *user), void *user);
/* The same, staged in set (qat/io.h) instead of renamed; set NULL: as above. */
qat_status qat__h5_stage(qat_ctx *ctx, const char *path, void (*write)(qat__h5w *w, void *user), void *user,
                         qat_save_set *set);

/* ---- reading ----------------------------------------------------------------------
 * Files are hostile input: each reader checks the object's type class,
 * rank, element count and (strings) byte length against what the caller
 * expects and has room for, before anything lands in the caller's memory.
 * Each returns false (or a fallback value) and records the error once;
 * after a failure every later call is a no-op, so a loader reads a whole
 * file and checks r->ok once. */
#define QAT__H5R_MAX_RANK 8 /* the largest rank a dataset of ours has */

bool qat__h5r_fail(qat__h5r *r, qat_status s, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The context holds an error from a library call made on what the file
 * said (a layer it describes was refused, say): puts the path and `what`
 * in front of that message and fails the reader. */
bool qat__h5r_adopt(qat__h5r *r, const char *what);
/* Opens r->path read-only (r->file): an HDF5 file of any kind (data
 * sets). The reason an open fails (errno) is in the message. */
bool qat__h5r_open_file(qat__h5r *r);
/* Opens r->path read-only and checks its "format" attribute names `format`
 * and its "version" is in [1, max_version]; *version gets it. The reason
 * an open fails (errno) is in the message. */
bool qat__h5r_open(qat__h5r *r, const char *format, const char *what, long long max_version,
                   long long *version);
hid_t qat__h5r_group(qat__h5r *r, hid_t loc, const char *name); /* -1 + error if absent or not a group */
bool qat__h5r_has_attr(hid_t loc, const char *name);
bool qat__h5r_has_dataset(hid_t loc, const char *name);

/* Attributes (scalar or 1-d). */
/* One string (fixed or variable length) of fewer than len bytes, into buf. */
bool qat__h5r_str(qat__h5r *r, hid_t loc, const char *name, char *buf, size_t len);
/* Exactly n integers, each in [lo, hi]. */
bool qat__h5r_i64s(qat__h5r *r, hid_t loc, const char *name, long long *v, int n, long long lo, long long hi);
/* One integer in [lo, hi] (lo on failure). */
long long qat__h5r_i64(qat__h5r *r, hid_t loc, const char *name, long long lo, long long hi);
/* One float or double, any value: the caller checks it (0 on failure). */
float qat__h5r_f32(qat__h5r *r, hid_t loc, const char *name);
double qat__h5r_f64(qat__h5r *r, hid_t loc, const char *name);
/* The element count of an attribute of class cls, at most max. */
bool qat__h5r_attr_count(qat__h5r *r, hid_t loc, const char *name, H5T_class_t cls, int max, int *n);

/* Datasets. */
/* Shape of dataset `name` (rank <= max_rank). */
bool qat__h5r_shape(qat__h5r *r, hid_t loc, const char *name, int max_rank, int *rank, int64_t *shape);
/* A float / integer dataset that must have exactly `shape` (rank 0 = one
 * element). Integers must be of a type that int32 holds (signed <= 32
 * bits, unsigned < 32): HDF5 would clip wider ones silently. */
bool qat__h5r_floats(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, float *out);
bool qat__h5r_ints(qat__h5r *r, hid_t loc, const char *name, int rank, const int64_t *shape, int32_t *out);
/* Exactly n bytes from a 1-d dataset [n] of 1-byte unsigned integers
 * (no wider type: HDF5 would clip it silently). */
bool qat__h5r_u8s(qat__h5r *r, hid_t loc, const char *name, int64_t n, uint8_t *out);
/* n unsigned 64-bit integers, shape exactly [n]. */
bool qat__h5r_u64s(qat__h5r *r, hid_t loc, const char *name, int64_t n, uint64_t *out);
/* A 1-d integer dataset of at most cap elements; *n gets its length. */
bool qat__h5r_i32s_upto(qat__h5r *r, hid_t loc, const char *name, int64_t cap, int32_t *out, int64_t *n);

#endif
