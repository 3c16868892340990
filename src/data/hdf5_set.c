/* HDF5 data sets: groups "train", "test" and optionally "val", each with
 * dataset "x" [N, ...] and optionally "y" and "anomaly" [N]. Read through
 * the HDF5 C API with the checked helpers of src/io/h5util.c; a split
 * whose x (and float targets) do not fit what is left of the memory cap
 * stays in the file and is read by hyperslabs of rows, batch by batch.
 *
 * Every HDF5 call runs inside H5E_BEGIN_TRY: HDF5 prints nothing, and the
 * message on the context names the file, the dataset and the fault. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset_internal.h"
#include "io/h5util.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is kept in an int64_t");

#define LIST_MAX 32               /* root names listed in a message (at most) */
#define BLOCK_ROWS ((int64_t)1 << 16) /* labels and anomaly flags are read this many at a time */

bool qat__is_hdf5(const char *path) {
    htri_t is = -1;
    H5E_BEGIN_TRY { is = H5Fis_hdf5(path); }
    H5E_END_TRY;
    return is > 0;
}

static hid_t mem_type(qat_dtype t) {
    switch (t) {
    case QAT_DT_U8: return H5T_NATIVE_UINT8;
    case QAT_DT_I8: return H5T_NATIVE_INT8;
    case QAT_DT_U16: return H5T_NATIVE_UINT16;
    case QAT_DT_I16: return H5T_NATIVE_INT16;
    case QAT_DT_U32: return H5T_NATIVE_UINT32;
    case QAT_DT_I32: return H5T_NATIVE_INT32;
    case QAT_DT_U64: return H5T_NATIVE_UINT64;
    case QAT_DT_I64: return H5T_NATIVE_INT64;
    case QAT_DT_F32: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
    }
}

/* h5py's bool: an enum over a 1-byte integer with the two members 0 and 1. */
static bool is_h5py_bool(hid_t ft) {
    hid_t base = H5Tget_super(ft);
    bool ok = base >= 0 && H5Tget_class(base) == H5T_INTEGER && H5Tget_size(base) == 1 && H5Tget_nmembers(ft) == 2;
    for (unsigned i = 0; ok && i < 2; i++) {
        uint8_t v = 9;
        ok = H5Tget_member_value(ft, i, &v) >= 0 && v == i;
    }
    if (base >= 0) H5Tclose(base);
    return ok;
}

/* The qat_dtype of a dataset's file type (h5py's bool reads as uint8 0/1,
 * *is_bool set); false (and the type's name in what) for the types no
 * array of a data set may hold. */
static bool dtype_of(hid_t set, qat_dtype *t, bool *is_bool, char *what, size_t len) {
    hid_t ft = H5Dget_type(set);
    H5T_class_t cls = ft < 0 ? H5T_NO_CLASS : H5Tget_class(ft);
    size_t size = ft < 0 ? 0 : H5Tget_size(ft);
    H5T_sign_t sign = cls == H5T_INTEGER ? H5Tget_sign(ft) : H5T_SGN_NONE;
    *is_bool = cls == H5T_ENUM && is_h5py_bool(ft);
    if (ft >= 0) H5Tclose(ft);
    if (*is_bool) {
        *t = QAT_DT_U8;
        return true;
    }
    if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8) && sign != H5T_SGN_ERROR) {
        int k = size == 1 ? 0 : size == 2 ? 2 : size == 4 ? 4 : 6;
        *t = (qat_dtype)(k + (sign == H5T_SGN_2)); /* U8, I8, U16, I16, ... */
        return true;
    }
    if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
        *t = size == 4 ? QAT_DT_F32 : QAT_DT_F64;
        return true;
    }
    const char *name = cls == H5T_STRING ? "strings" : cls == H5T_ENUM ? "an enum" : cls == H5T_COMPOUND ?
                       "a compound type" : cls == H5T_BITFIELD ? "a bitfield" : cls == H5T_OPAQUE ? "an opaque type" :
                       cls == H5T_ARRAY ? "an array type" : cls == H5T_VLEN ? "variable-length sequences" :
                       cls == H5T_REFERENCE ? "references" : "an unreadable type";
    if (cls == H5T_INTEGER) snprintf(what, len, "%zu-byte integers", size);
    else if (cls == H5T_FLOAT) snprintf(what, len, "%zu-byte floats%s", size, size == 2 ? " (float16)" : "");
    else snprintf(what, len, "%s", name);
    return false;
}

/* ---- the root: which splits are there -------------------------------------------------- */

typedef struct {
    char names[LIST_MAX][64];
    int n;
    bool more;
} root_list;

static herr_t on_link(hid_t loc, const char *name, const H5L_info_t *info, void *user) {
    (void)loc, (void)info;
    root_list *l = user;
    if (l->n == LIST_MAX) {
        l->more = true;
        return 1; /* stop: enough for a message */
    }
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return 0;
}

static void list_root(hid_t file, char *buf, size_t len) {
    root_list l;
    memset(&l, 0, sizeof l);
    hsize_t idx = 0;
    H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, &idx, on_link, &l);
    char *ptrs[LIST_MAX + 1];
    for (int i = 0; i < l.n; i++) ptrs[i] = l.names[i];
    char dots[] = "...";
    if (l.more) ptrs[l.n++] = dots;
    qat__join_names(buf, len, ptrs, l.n);
}

/* The object at name (under the file's root): false when there is none
 * (*type H5O_TYPE_UNKNOWN) or it cannot be followed (r fails: a link to
 * another file, whose data would come from wherever it points, or a
 * link to nothing, which must not pass for an absent y). */
static bool member(qat__h5r *r, const char *name, H5O_type_t *type) {
    *type = H5O_TYPE_UNKNOWN;
    if (!r->ok) return false;
    htri_t exists = H5Lexists(r->file, name, H5P_DEFAULT);
    if (exists == 0) return false;
    H5L_info_t link;
    if (exists < 0 || H5Lget_info(r->file, name, &link, H5P_DEFAULT) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot look up %s (damaged?)", name);
    if (link.type != H5L_TYPE_HARD && link.type != H5L_TYPE_SOFT)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s is a link to another file: not followed; copy the data "
                             "into this file", name);
    H5O_info_t info;
    if (H5Oget_info_by_name(r->file, name, &info, H5P_DEFAULT) < 0)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s is a link to nothing", name);
    *type = info.type;
    return true;
}

/* ---- one array ------------------------------------------------------------------------- */

/* Opens path ("train/x") as an array of rows: its shape [N, ...], its
 * type, where its data are. rank1_rows: a 1-d dataset [N] is N rows of
 * one element (float y) rather than refused. */
static bool open_array(qat__h5r *r, const char *path, bool rank1_rows, int64_t *n, qat__array *a) {
    int rank = 0;
    int64_t dims[QAT_DATA_MAX_RANK + 1];
    if (!qat__h5r_shape(r, r->file, path, QAT_DATA_MAX_RANK + 1, &rank, dims)) return false;
    if (rank < 1 || (rank < 2 && !rank1_rows))
        return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has rank %d: want [N, ...] (one row per sample)", path, rank);
    hid_t set = H5Dopen2(r->file, path, H5P_DEFAULT);
    if (set < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot open %s", path);
    a->h5set = set;
    char what[64];
    bool is_bool = false;
    if (!dtype_of(set, &a->dtype, &is_bool, what, sizeof what))
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s holds %s, which no array of a data set may hold (x: uint8, "
                             "int8, float32 or float64; y: integers, float32 or float64)", path, what);
    if (is_bool) { /* read through the enum's own native type: HDF5 converts no enum to integers */
        hid_t ft = H5Dget_type(set);
        a->h5memtype = ft < 0 ? -1 : H5Tget_native_type(ft, H5T_DIR_ASCEND);
        if (ft >= 0) H5Tclose(ft);
        if (a->h5memtype < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read the type of %s", path);
    }
    /* data that live elsewhere are not read: another file's bytes could
     * end up in training (external storage), or a mapping (virtual) */
    hid_t dcpl = H5Dget_create_plist(set);
    H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    int external = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (layout == H5D_VIRTUAL)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s is a virtual dataset (its data live in other datasets or "
                             "files): not read; copy it into a plain dataset", path);
    if (layout == H5D_LAYOUT_ERROR || external != 0)
        return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s %s", path, external > 0 ? "keeps its data in external "
                             "files: not read; copy it into a plain dataset" : "has an unreadable storage layout");
    /* data declared but never written (h5py's create_dataset(shape=...)
     * without data: reads give the fill value) are refused: no deflate
     * stream expands more than about 1032 times, so storage below 1/4096
     * of the declared bytes is chunks that were never written. This also
     * bounds the time a scan of a small hostile file can take. */
    double declared = (double)qat_dtype_size(a->dtype);
    for (int i = 0; i < rank; i++) declared *= (double)dims[i];
    double stored = (double)H5Dget_storage_size(set);
    if (declared > 0 && stored * 4096.0 < declared)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s stores %.0f bytes of its %.0f (created but never written, or "
                             "chunks left unwritten?)", path, stored, declared);
    *n = dims[0];
    a->h5rank = rank;
    a->rank = rank - 1;
    memcpy(a->shape, dims + 1, (size_t)a->rank * sizeof *dims);
    if (rank == 1) a->rank = 1, a->shape[0] = 1;
    if ((a->h5space = H5Dget_space(set)) < 0) return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read the shape of %s", path);
    snprintf(a->file, sizeof a->file, "%s", r->path);
    return true;
}

/* The bytes of one chunk of a chunked dataset (0 when contiguous). */
static int64_t chunk_bytes(const qat__array *a) {
    hid_t dcpl = H5Dget_create_plist((hid_t)a->h5set);
    int64_t bytes = 0;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t cd[QAT_DATA_MAX_RANK + 1];
        int rk = H5Pget_chunk(dcpl, QAT_DATA_MAX_RANK + 1, cd);
        bytes = rk > 0 ? (int64_t)qat_dtype_size(a->dtype) : 0;
        for (int i = 0; i < rk && bytes < INT64_MAX / 2; i++)
            bytes = (int64_t)cd[i] > INT64_MAX / 2 / bytes ? INT64_MAX / 2 : bytes * (int64_t)cd[i];
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    return bytes;
}

static void close_array(qat__array *a) {
    if (a->h5space >= 0) H5Sclose((hid_t)a->h5space);
    if (a->h5set >= 0) H5Dclose((hid_t)a->h5set);
    if (a->h5memtype >= 0) H5Tclose((hid_t)a->h5memtype);
    a->h5space = a->h5set = a->h5memtype = -1;
}

/* The memory type rows of a are read as: the stored type's native
 * spelling (or, for h5py's bool, the enum's). */
static hid_t rows_type(const qat__array *a) { return a->h5memtype >= 0 ? (hid_t)a->h5memtype : mem_type(a->dtype); }

/* Runs of rows (runs[2i] the first row, runs[2i + 1] how many; ascending,
 * apart) of the open dataset, converted to mt, packed into buf in order:
 * one selection (the union of the runs' hyperslabs), one H5Dread. A batch
 * of 256 random rows of 4 KiB takes 2.6 ms so, 5.7 ms as 256 reads
 * (docs/data-format.md). */
static bool read_runs(const qat__array *a, hid_t mt, const int64_t *runs, int64_t n, void *buf) {
    hsize_t start[QAT_DATA_MAX_RANK + 1] = {0}, cnt[QAT_DATA_MAX_RANK + 1];
    for (int i = 1; i < a->h5rank; i++) cnt[i] = (hsize_t)a->shape[i - 1];
    hid_t fs = (hid_t)a->h5space;
    hsize_t rows = 0;
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        start[0] = (hsize_t)runs[2 * i], cnt[0] = (hsize_t)runs[2 * i + 1];
        rows += cnt[0];
        ok = H5Sselect_hyperslab(fs, i ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL, cnt, NULL) >= 0;
    }
    hsize_t elems = rows * (hsize_t)(a->h5rank == 1 ? 1 : a->row_elems);
    hid_t ms = ok ? H5Screate_simple(1, &elems, NULL) : -1;
    ok = ms >= 0 && H5Dread((hid_t)a->h5set, mt, ms, fs, H5P_DEFAULT, buf) >= 0;
    if (ms >= 0) H5Sclose(ms);
    return ok;
}

static bool read_rows(const qat__array *a, hid_t mt, int64_t row0, int64_t count, void *buf) {
    int64_t run[2] = {row0, count};
    return read_runs(a, mt, run, 1, buf);
}

/* The file's size now, or -1 when unknown. */
static int64_t file_size(const qat_dataset *d) {
    struct stat sb;
    return d->h5fd >= 0 && fstat(d->h5fd, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* HDF5's sec2 driver reads zeros past the end of a file cut after it
 * was opened: the descriptor is watched instead (one fstat a read). */
static void watch_size(qat_dataset *d) {
    hid_t fapl = H5Fget_access_plist((hid_t)d->h5file);
    void *handle = NULL;
    if (fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle((hid_t)d->h5file, fapl, &handle) >= 0 &&
        handle)
        d->h5fd = *(int *)handle;
    if (fapl >= 0) H5Pclose(fapl);
    d->h5size = file_size(d);
}

qat_status qat__hdf5_runs(qat_dataset *d, const qat__array *a, const int64_t *runs, int64_t n, void *buf) {
    int64_t first = runs[0], last = runs[2 * n - 2] + runs[2 * n - 1] - 1;
    int64_t now = file_size(d);
    if (now >= 0 && now < d->h5size)
        return qat_ctx_fail(d->ctx, QAT_ERR_IO, "%s: %s: cannot read rows %lld to %lld: the file was cut from %lld to "
                            "%lld bytes since it was opened", a->file, a->name, (long long)first, (long long)last,
                            (long long)d->h5size, (long long)now);
    bool ok = false;
    H5E_BEGIN_TRY { ok = a->h5set >= 0 && read_runs(a, rows_type(a), runs, n, buf); }
    H5E_END_TRY;
    if (ok) return QAT_OK;
    return qat_ctx_fail(d->ctx, QAT_ERR_IO, "%s: %s: cannot read rows %lld to %lld (the file changed or was "
                        "truncated since it was opened, or its data are damaged)", a->file, a->name, (long long)first,
                        (long long)last);
}

qat_status qat__hdf5_rows(qat_dataset *d, const qat__array *a, int64_t row0, int64_t count, void *buf) {
    int64_t run[2] = {row0, count};
    return qat__hdf5_runs(d, a, run, 1, buf);
}

/* Integers of an [N] dataset (labels or anomaly flags), block by block, as
 * int64 (uint64 for unsigned 8-byte ones, which int64 cannot hold), each
 * block handed to the check-and-convert function. */
static bool read_ints(qat__h5r *r, qat__array *a, int64_t n, const char *split, bool labels, void *dst) {
    bool u64 = a->dtype == QAT_DT_U64, byte = a->h5memtype >= 0; /* h5py's bool: bytes 0/1 */
    int64_t block = n < BLOCK_ROWS ? n : BLOCK_ROWS;
    void *buf = malloc((size_t)block * 8);
    if (!buf) return qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory to read %s/%s", split, a->name);
    bool ok = true;
    for (int64_t r0 = 0; r0 < n && ok; r0 += block) {
        int64_t cnt = n - r0 < block ? n - r0 : block;
        if (!read_rows(a, byte ? (hid_t)a->h5memtype : u64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, r0, cnt, buf)) {
            ok = qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s/%s (damaged?)", split, a->name);
            break;
        }
        qat_dtype t = byte ? QAT_DT_U8 : u64 ? QAT_DT_U64 : QAT_DT_I64;
        qat_status st = labels ? qat__labels_convert(r->ctx, buf, t, cnt, r0, (int32_t *)dst + r0, r->path, split)
                               : qat__anomaly_convert(r->ctx, buf, t, cnt, r0, (uint8_t *)dst + r0, r->path, split);
        if (st != QAT_OK) ok = false, r->ok = false;
    }
    free(buf);
    return ok;
}

/* ---- a split ------------------------------------------------------------------------------ */

/* Opens group `split`: x, y, anomaly; their shapes and types (nothing read yet). */
static bool open_split(qat__h5r *r, qat_dataset *d, qat_split s, qat__array *anomaly) {
    qat__store *st = &d->stores[s];
    const char *sn = qat_split_str(s);
    char path[QAT__DATA_NAME - 8], list[256]; /* split names are short: path fits a name */
    H5O_type_t type;
    if (!qat__wanted(d, s)) return true; /* left out by the caller: as if absent */
    if (!member(r, sn, &type)) {
        if (!r->ok || s == QAT_SPLIT_VAL) return r->ok;
        list_root(r->file, list, sizeof list);
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "the file has no group \"%s\" (groups found: %s)", sn, list);
    }
    if (type != H5O_TYPE_GROUP)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "\"%s\" is not a group (want groups train, test and optionally val, "
                             "each holding x and y)", sn);
    snprintf(path, sizeof path, "%s/x", sn);
    bool there = member(r, path, &type);
    if (!there || type != H5O_TYPE_DATASET) {
        if (!r->ok) return false;
        if (there)
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s is a %s, not a dataset (want x an array of the samples)", path,
                                 type == H5O_TYPE_GROUP ? "group" : "named datatype");
        hid_t g = H5Gopen2(r->file, sn, H5P_DEFAULT);
        list[0] = '\0';
        if (g >= 0) list_root(g, list, sizeof list), H5Gclose(g);
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "group %s has no dataset x (it holds: %s)", sn, list);
    }
    int64_t n = 0;
    snprintf(st->x.name, sizeof st->x.name, "%s", path);
    if (!open_array(r, path, false, &n, &st->x)) return false;
    if (qat__check_shape(r->ctx, r->path, sn, "x", n, st->x.rank, st->x.shape, &st->x.row_elems) != QAT_OK)
        return r->ok = false;
    st->present = true;
    st->rows = n;
    snprintf(path, sizeof path, "%s/y", sn);
    if (member(r, path, &type)) {
        qat__array *y = &st->targets;
        int64_t ny = 0;
        snprintf(y->name, sizeof y->name, "%s", path);
        if (!open_array(r, path, true, &ny, y)) return false;
        st->y_dtype = y->dtype;
        if (ny != n)
            return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: x has %lld rows but y has %lld", sn, (long long)n, (long long)ny);
        if (y->dtype <= QAT_DT_I64) {
            if (y->h5rank != 1) {
                char sh[160];
                return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: y holds integers of shape [N] + %s: class labels are "
                                     "[N] (float targets are float32 or float64)", sn,
                                     qat__shape_str(sh, sizeof sh, y->rank, y->shape));
            }
            st->target = QAT_TARGET_CLASS;
        } else {
            st->target = QAT_TARGET_VALUES;
            if (qat__check_shape(r->ctx, r->path, sn, "y", n, y->rank, y->shape, &y->row_elems) != QAT_OK)
                return r->ok = false;
        }
    }
    snprintf(path, sizeof path, "%s/anomaly", sn);
    if (member(r, path, &type)) {
        int64_t na = 0;
        snprintf(anomaly->name, sizeof anomaly->name, "%s", path);
        if (!open_array(r, path, true, &na, anomaly)) return false;
        if (anomaly->h5rank != 1 || anomaly->dtype > QAT_DT_I64)
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: anomaly must be [N] integers 0 and 1", sn);
        if (na != n)
            return qat__h5r_fail(r, QAT_ERR_SHAPE, "%s: x has %lld rows but anomaly has %lld", sn, (long long)n,
                                 (long long)na);
    }
    return r->ok;
}

/* Into memory, or left in the file (streamed): the cap is shared by the
 * splits, in the order train, val, test. */
static bool load_split(qat__h5r *r, qat_dataset *d, qat_split s, qat__array *anomaly, int64_t *budget) {
    qat__store *st = &d->stores[s];
    const char *sn = qat_split_str(s);
    qat__array *arrays[2] = {&st->x, st->target == QAT_TARGET_VALUES ? &st->targets : NULL};
    int64_t bytes = 0;
    for (int i = 0; i < 2; i++)
        if (arrays[i]) bytes += st->rows * arrays[i]->row_elems * (int64_t)qat_dtype_size(arrays[i]->dtype);
    bool stream = bytes > *budget;
    if (!stream) *budget -= bytes;
    for (int i = 0; i < 2 && r->ok; i++) {
        qat__array *a = arrays[i];
        if (!a) continue;
        if (stream) {
            int64_t chunk = chunk_bytes(a);
            if (chunk > qat__data_cap(d))
                return qat__h5r_fail(r, QAT_ERR_UNSUPPORTED, "%s is streamed (the split is over the memory cap) but "
                                     "stored in chunks of %lld bytes, over the cap of %lld: rewrite it with smaller "
                                     "chunks (h5py: chunks=True) or raise the cap", a->name, (long long)chunk,
                                     (long long)qat__data_cap(d));
            continue;
        }
        size_t size = (size_t)st->rows * (size_t)a->row_elems * qat_dtype_size(a->dtype);
        if (!(a->owned = malloc(size ? size : 1)))
            return qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory for %s (%zu bytes)", a->name, size);
        if (!read_rows(a, rows_type(a), 0, st->rows, a->owned))
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot read %s (damaged, or compressed with a filter this HDF5 "
                                 "lacks?)", a->name);
        a->mem = a->owned;
        close_array(a);
    }
    if (st->target == QAT_TARGET_CLASS) {
        if (!(st->labels_owned = malloc((size_t)st->rows * sizeof *st->labels_owned)))
            return qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory for %s/y", sn);
        if (!read_ints(r, &st->targets, st->rows, sn, true, st->labels_owned)) return false;
        st->labels = st->labels_owned;
        close_array(&st->targets);
    }
    if (anomaly->h5set >= 0) {
        if (!(st->anomaly_owned = malloc((size_t)st->rows)))
            return qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory for %s/anomaly", sn);
        if (!read_ints(r, anomaly, st->rows, sn, false, st->anomaly_owned)) return false;
        st->anomaly = st->anomaly_owned;
        close_array(anomaly);
    }
    return true;
}

qat_status qat__hdf5_open(qat_dataset *d, const char *path) {
    qat__h5r r = {d->ctx, path, -1, true};
    qat__array anomaly[QAT_SPLIT_COUNT];
    memset(anomaly, 0, sizeof anomaly);
    for (int s = 0; s < QAT_SPLIT_COUNT; s++) anomaly[s].h5set = anomaly[s].h5space = anomaly[s].h5memtype = -1;
    H5E_BEGIN_TRY {
        if (qat__h5r_open_file(&r)) {
            d->h5file = r.file;
            watch_size(d);
            static const qat_split order[QAT_SPLIT_COUNT] = {QAT_SPLIT_TRAIN, QAT_SPLIT_TEST, QAT_SPLIT_VAL};
            for (int i = 0; i < QAT_SPLIT_COUNT && r.ok; i++) open_split(&r, d, order[i], &anomaly[order[i]]);
            int64_t budget = qat__data_cap(d);
            for (int s = 0; s < QAT_SPLIT_COUNT && r.ok; s++)
                if (d->stores[s].present) budget -= qat__table_bytes(&d->stores[s], anomaly[s].h5set >= 0);
            if (r.ok && budget < 0)
                qat__h5r_fail(&r, QAT_ERR_UNSUPPORTED, "the labels and row maps of the set's samples take %lld "
                              "bytes, over the memory cap of %lld", (long long)(qat__data_cap(d) - budget),
                              (long long)qat__data_cap(d));
            for (int s = 0; s < QAT_SPLIT_COUNT && r.ok; s++)
                if (d->stores[s].present) load_split(&r, d, (qat_split)s, &anomaly[s], &budget);
        }
        for (int s = 0; s < QAT_SPLIT_COUNT; s++) close_array(&anomaly[s]);
    }
    H5E_END_TRY;
    if (!r.ok) {
        if (qat_ctx_status(d->ctx) == QAT_OK) return qat_ctx_fail(d->ctx, QAT_ERR_FORMAT, "%s: cannot read", path);
        return qat_ctx_status(d->ctx);
    }
    return QAT_OK;
}

void qat__hdf5_close(qat_dataset *d) {
    H5E_BEGIN_TRY {
        for (int s = 0; s < QAT_SPLIT_COUNT; s++) {
            close_array(&d->stores[s].x);
            close_array(&d->stores[s].targets);
        }
        if (d->h5file >= 0) H5Fclose((hid_t)d->h5file);
        d->h5file = -1, d->h5fd = -1;
    }
    H5E_END_TRY;
}
