/* What the data-set files share (qat/data.h is the public side): the
 * data set's layout in memory, and the hooks through which the format
 * readers (hdf5_set.c, npy.c, idx_set.c) fill it and dataset.c checks,
 * carves and reads it.
 *
 * A reader fills one store per split the source holds: x (and float
 * targets) in memory in the stored type and layout, or, for a streamed
 * HDF5 split, an open dataset that is read row by row; class labels
 * converted to int32 (checked >= 0 on the way), anomaly flags as bytes
 * (checked 0/1). dataset.c then does every check that does not depend on
 * the format (sample shapes, targets, NaN and infinity, sizes), builds
 * the splits (row maps for skipped rows and the carved val split) and
 * their descriptions. */
#ifndef QAT_DATA_DATASET_INTERNAL_H
#define QAT_DATA_DATASET_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "qat/data.h"

/* path opened for reading when it is a regular file; NULL otherwise, with
 * the reason on ctx (when not NULL): a FIFO or a device is refused without
 * blocking. */
FILE *qat__fopen_regular(qat_ctx *ctx, const char *path);
/* qat_idx_read of a regular file only: a FIFO or a device is refused
 * without blocking (a data set's folder; qat_idx_read itself takes a
 * pipe). */
qat_status qat__idx_read_regular(qat_ctx *ctx, const char *path, qat_idx *out);

#define QAT__DATA_DEFAULT_CAP ((int64_t)1 << 30) /* memory_cap 0: 1 GiB */
#define QAT__DATA_NAME 48                        /* "x", "train/x" */
#define QAT__DATA_PATH 512                       /* a file's path, for messages (longer ones are cut) */

/* x or float targets of one store: rows × row_elems elements of dtype. */
typedef struct {
    qat_dtype dtype;
    int rank;                            /* per row, as stored */
    int64_t shape[QAT_DATA_MAX_RANK];    /* per row, as stored ([H, W, C] when channels last) */
    int64_t row_elems;                   /* product of shape */
    const void *mem;                     /* in memory: [rows, row_elems]; NULL when streamed */
    void *owned;                         /* what the store frees (mem, or NULL when borrowed) */
    int64_t h5set;                       /* streamed: the open HDF5 dataset (hid_t), else -1 */
    int64_t h5space;                     /* its file dataspace (hid_t), else -1 */
    int64_t h5memtype;                   /* h5py's bool: the enum's native type to read with (hid_t), else -1 */
    int h5rank;                          /* its rank in the file (1 + rank, or 1 for float y [N]) */
    char file[QAT__DATA_PATH];           /* for messages: the file it came from ("" in memory) */
    char name[QAT__DATA_NAME];           /* for messages: "x", "y" */
} qat__array;

/* One split as the source holds it. */
typedef struct {
    bool present;
    int64_t rows;                        /* N of x, y and anomaly */
    qat__array x;
    qat_target_kind target;
    qat_dtype y_dtype;                   /* as stored (CLASS, VALUES) */
    qat__array targets;                  /* VALUES */
    const int32_t *labels;               /* CLASS: [rows], each >= 0 */
    int32_t *labels_owned;
    const uint8_t *anomaly;              /* [rows] of 0/1, or NULL */
    uint8_t *anomaly_owned;
} qat__store;

typedef struct {
    bool present;
    qat_split_info info;
    qat__store *store;
    int32_t *rows;                       /* [info.n] rows of the store, or NULL: row i is row i */
} qat__split;

struct qat_dataset {
    qat_ctx *ctx;
    const char *format;                  /* "hdf5", "npy", "idx", "memory" */
    char *path;                          /* as given ("arrays" for arrays: messages name it) */
    qat_dataset_options opt;
    qat__store stores[QAT_SPLIT_COUNT];  /* by the split they came as */
    qat__split splits[QAT_SPLIT_COUNT];
    int64_t h5file;                      /* hid_t of the open HDF5 file, or -1 */
    int h5fd;                            /* its descriptor (HDF5's sec2 driver), or -1 */
    int64_t h5size;                      /* its size when opened: a file cut since is refused */
    /* scratch of streamed reads, kept between calls (no malloc per batch) */
    void *stage;
    size_t stage_cap;
    int64_t *order;                      /* [2·n] (row, position) pairs */
    int64_t *runs;                       /* [2·n] (first row, count) runs of a batch */
    size_t order_cap;                    /* n that order and runs have room for */
};

/* ---- the format readers (each fills d->stores; dataset.c finishes) ---------------- */

/* Does the caller want split s read (qat_dataset_options.splits)? A
 * reader skips the others as if the source had none. */
bool qat__wanted(const qat_dataset *d, qat_split s);
qat_status qat__hdf5_open(qat_dataset *d, const char *path);
qat_status qat__npy_dir_open(qat_dataset *d, const char *dir);
qat_status qat__idx_dir_open(qat_dataset *d, const char *dir);
/* true when path starts with the HDF5 signature (also at 512, 1024, ...:
 * H5Fis_hdf5), or the .npy magic */
bool qat__is_hdf5(const char *path);
bool qat__is_npy(const char *path);

/* count rows from row0 of a streamed array, in its stored type, into buf */
qat_status qat__hdf5_rows(qat_dataset *d, const qat__array *a, int64_t row0, int64_t count, void *buf);
/* n runs of rows (runs[2i] the first, runs[2i + 1] how many; ascending and
 * apart), packed into buf in order: one read */
qat_status qat__hdf5_runs(qat_dataset *d, const qat__array *a, const int64_t *runs, int64_t n, void *buf);
void qat__hdf5_close(qat_dataset *d);

/* ---- .npy files (npy.c) --------------------------------------------------------- */
typedef struct {
    qat_dtype dtype;
    int rank;
    int64_t shape[QAT_DATA_MAX_RANK + 1];
    int64_t count;        /* product of shape */
    int64_t data_offset;  /* bytes before the payload */
    int major, minor;     /* the format version */
} qat__npy_header;

/* Reads and checks the header of the .npy file at path (any of the
 * dtypes above, rank 0..QAT_DATA_MAX_RANK + 1), and that the file holds
 * exactly the payload the shape needs. */
qat_status qat__npy_header_read(qat_ctx *ctx, const char *path, qat__npy_header *h);
/* The payload of a checked file into buf (count · dtype size bytes). */
qat_status qat__npy_payload_read(qat_ctx *ctx, const char *path, const qat__npy_header *h, void *buf);

/* ---- helpers the readers share (dataset.c) ------------------------------------------ */
/* Labels src[0..n) of type t (rows row0.. of the file) into dst as int32:
 * each must be in [0, INT32_MAX]. The error names file, split, row, value. */
qat_status qat__labels_convert(qat_ctx *ctx, const void *src, qat_dtype t, int64_t n, int64_t row0, int32_t *dst,
                               const char *file, const char *split);
/* Anomaly flags: each 0 or 1. */
qat_status qat__anomaly_convert(qat_ctx *ctx, const void *src, qat_dtype t, int64_t n, int64_t row0, uint8_t *dst,
                                const char *file, const char *split);
/* Checks a per-row shape (rank 1..QAT_DATA_MAX_RANK, each dimension > 0,
 * product <= QAT_DATA_MAX_SAMPLE) and N (1..QAT_DATA_MAX_SAMPLES); what
 * names the array in messages ("x", "y"). *numel gets the product. */
qat_status qat__check_shape(qat_ctx *ctx, const char *file, const char *split, const char *what, int64_t n,
                            int rank, const int64_t *shape, int64_t *numel);
/* What a store holds a sample beside x and float y, counted against the
 * memory cap: labels (4 bytes), the anomaly flag (1), a row map entry
 * (4: skipped rows or a carved val split may need one). */
int64_t qat__table_bytes(const qat__store *st, bool anomaly);
/* The dataset's memory cap (the option, or the default). */
int64_t qat__data_cap(const qat_dataset *d);
/* "a, b, c" of the names, cut with "..." to fit len bytes; "none" for n = 0 */
void qat__join_names(char *buf, size_t len, char *const *names, int n);
/* The names in a directory, sorted (no "." or ".."; at most
 * QAT__DIR_MAX): *names is one malloc'd block (free it). */
#define QAT__DIR_MAX 4096
qat_status qat__dir_list(qat_ctx *ctx, const char *dir, char ***names, int *n);
/* "[1, 28, 28]" */
char *qat__shape_str(char *buf, size_t len, int rank, const int64_t *shape);

/* ---- rows (rows.c) ---------------------------------------------------------------------------- */

static inline bool qat__dtype_is_int(qat_dtype t) { return t <= QAT_DT_I64; }
static inline bool qat__dtype_is_float(qat_dtype t) { return t == QAT_DT_F32 || t == QAT_DT_F64; }
#define QAT__STAGE_BYTES ((int64_t)4 << 20) /* a streamed read's staging buffer holds at most this (or one row) */
static inline const char *qat__target_str(qat_target_kind k) {
    return k == QAT_TARGET_CLASS ? "class labels" : k == QAT_TARGET_VALUES ? "float targets" : "no y";
}
#define QAT__SCAN_BYTES ((int64_t)4 << 20) /* rows read at a time when a streamed array is scanned */
/* Bytes of one stored row of a. */
size_t qat__row_bytes(const qat__array *a);
/* Is this array x stored channels last (and so transposed on the way out)? */
bool qat__hwc_of(const qat_dataset *d, const qat__store *st, const qat__array *a);
/* One stored row of a into dst: floats ([C, H, W] when hwc) or the stored
 * type in the same layout. */
void qat__put_row(const qat__array *a, bool hwc, const void *src, void *dst, bool as_float);
/* The stored row of a split's row i (the split's row map, if it has one). */
int64_t qat__store_row(const qat__split *sp, int64_t i);
/* Rows [row0, row0 + count) of a: a pointer into memory (*out), or read into buf. */
qat_status qat__rows_at(qat_dataset *d, const qat__array *a, int64_t row0, int64_t count, void *buf,
                        const void **out);
/* Grows d->stage to at least bytes (kept between reads). */
qat_status qat__stage_reserve(qat_dataset *d, size_t bytes);
/* Scans every row of a float array of store st: the first bad row is an
 * error, or (allow_nonfinite) every bad row is marked in *bad (a bitmap of
 * st->rows bits, made on the first). */
qat_status qat__scan_nonfinite(qat_dataset *d, qat_split s, qat__store *st, qat__array *a, int64_t budget,
                               uint8_t **bad);

#endif
