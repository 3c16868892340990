/* Data sets (qat/data.h): every format read back against the arrays it
 * was written from (HDF5 through the C API, .npy bytes by hand, IDX
 * gzipped through zlib, arrays in memory); every bad input refused by its
 * message; the val split carved deterministically and disjoint; a
 * streamed split equal bit for bit to the same split in memory, within
 * its memory bound; channels_last; the channel statistics against a hand
 * computation; reads over 1 and 2 threads; MNIST the same from IDX, HDF5
 * and .npy (QAT_MNIST_DATA and QAT_DATA_CONVERT, set by ctest). */
#define _POSIX_C_SOURCE 200809L
#include <hdf5.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "qat/data.h"
#include "qat/parallel.h"
#include "test_util.h"

static char dir[256];
static char convert_beside[600]; /* qat_data_convert in this suite's directory */

/* ---- the library's live bytes ----------------------------------------------------------------
 * tests/CMakeLists.txt links this suite with --wrap for malloc, calloc,
 * realloc and free: every allocation of the library (a static archive)
 * and of this file comes here, so the suite sees the bytes held at any
 * moment and their peak. HDF5's allocations (a shared library) are not
 * seen: what is bounded here is qat's own memory. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t k);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
static _Atomic long long live_bytes, peak_bytes;

static void note(long long delta) {
    long long now = atomic_fetch_add(&live_bytes, delta) + delta, peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
}
void *__wrap_malloc(size_t n) {
    void *p = __real_malloc(n);
    if (p) note((long long)malloc_usable_size(p));
    return p;
}
void *__wrap_calloc(size_t n, size_t k) {
    void *p = __real_calloc(n, k);
    if (p) note((long long)malloc_usable_size(p));
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    long long old = p ? (long long)malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, n);
    if (q) note((long long)malloc_usable_size(q) - old);
    return q;
}
void __wrap_free(void *p) {
    if (p) note(-(long long)malloc_usable_size(p));
    __real_free(p);
}
static void peak_reset(void) { atomic_store(&peak_bytes, atomic_load(&live_bytes)); }

/* ---- writing test files ---------------------------------------------------------------------- */

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void put_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void fresh_dir(const char *name, char *out, size_t len) {
    path_of(out, len, name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(out, 0700), 0);
}

static hid_t h5_type(qat_dtype t) {
    static const hid_t *types[QAT_DT_COUNT] = {&H5T_NATIVE_UINT8_g, &H5T_NATIVE_INT8_g, &H5T_NATIVE_UINT16_g,
                                               &H5T_NATIVE_INT16_g, &H5T_NATIVE_UINT32_g, &H5T_NATIVE_INT32_g,
                                               &H5T_NATIVE_UINT64_g, &H5T_NATIVE_INT64_g, &H5T_NATIVE_FLOAT_g,
                                               &H5T_NATIVE_DOUBLE_g};
    H5open();
    return *types[t];
}

/* dataset `name` ("train/x"; groups made on the way) of shape dims. */
static void h5_put(hid_t f, const char *name, qat_dtype t, int rank, const int64_t *dims, const void *data,
                   int64_t chunk_rows) {
    hsize_t d[8], c[8];
    for (int i = 0; i < rank; i++) d[i] = c[i] = (hsize_t)dims[i];
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (chunk_rows) c[0] = (hsize_t)chunk_rows, H5Pset_chunk(dcpl, rank, c);
    hid_t sp = H5Screate_simple(rank, d, NULL);
    hid_t set = H5Dcreate2(f, name, h5_type(t), sp, lcpl, dcpl, H5P_DEFAULT);
    CU_ASSERT_FATAL(set >= 0);
    CU_ASSERT(H5Dwrite(set, h5_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(set), H5Sclose(sp), H5Pclose(lcpl), H5Pclose(dcpl);
}

/* A .npy file: magic, version, the dict padded to 64 bytes with '\n' last,
 * the payload. */
static void npy_write(const char *path, int major, const char *descr, bool fortran, int rank, const int64_t *shape,
                      const void *data, size_t bytes) {
    char dict[512], sh[200];
    int k = snprintf(sh, sizeof sh, "(");
    for (int i = 0; i < rank; i++) k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(sh + k, sizeof sh - (size_t)k, "%s)", rank == 1 ? "," : "");
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
                       fortran ? "True" : "False", sh);
    int pre = major == 1 ? 10 : 12, pad = (64 - (pre + len + 1) % 64) % 64;
    size_t hlen = (size_t)(len + pad + 1), total = (size_t)pre + hlen + bytes;
    uint8_t *buf = malloc(total);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major, buf[7] = 0;
    for (int i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + pre, dict, (size_t)len);
    memset(buf + pre + len, ' ', (size_t)pad);
    buf[pre + len + pad] = '\n';
    if (bytes) memcpy(buf + pre + hlen, data, bytes);
    put_file(path, buf, total);
    free(buf);
}

/* A .npy file with the header text given whole (after the length). */
static void npy_raw(const char *path, int major, int minor, const char *header, const void *data, size_t bytes) {
    size_t hlen = strlen(header), pre = major == 1 ? 10 : 12;
    uint8_t *buf = malloc(pre + hlen + bytes + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major, buf[7] = (uint8_t)minor;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + pre, header, hlen);
    if (bytes) memcpy(buf + pre + hlen, data, bytes);
    put_file(path, buf, pre + hlen + bytes);
    free(buf);
}

/* An IDX file of bytes, gzipped through zlib. */
static void idx_gz(const char *path, int ndim, const uint32_t *dims, const uint8_t *data, size_t n) {
    uint8_t head[4 + 16] = {0, 0, 8, (uint8_t)ndim};
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++) head[4 + 4 * i + b] = (uint8_t)(dims[i] >> (24 - 8 * b));
    gzFile f = gzopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    gzwrite(f, head, (unsigned)(4 + 4 * ndim));
    gzwrite(f, data, (unsigned)n);
    gzclose(f);
}

/* ---- the known arrays ------------------------------------------------------------------------ */

enum { NTR = 37, NTE = 11, C = 3, H = 4, W = 5, PX = C * H * W };

typedef struct {
    uint8_t xtr[NTR * PX], xte[NTE * PX];
    uint8_t ytr[NTR], yte[NTE], ate[NTE];
} small_set;

static void make_small(small_set *s, uint64_t seed) {
    qat_rng rng;
    qat_rng_seed(&rng, seed);
    for (int i = 0; i < NTR * PX; i++) s->xtr[i] = (uint8_t)qat_rng_below(&rng, 256);
    for (int i = 0; i < NTE * PX; i++) s->xte[i] = (uint8_t)qat_rng_below(&rng, 256);
    for (int i = 0; i < NTR; i++) s->ytr[i] = (uint8_t)qat_rng_below(&rng, 10);
    for (int i = 0; i < NTE; i++) s->yte[i] = (uint8_t)qat_rng_below(&rng, 10), s->ate[i] = (uint8_t)(i % 3 == 0);
    s->ytr[20] = 12; /* the largest label, once */
}

static void write_small_h5(const char *path, const small_set *s) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    int64_t dtr[4] = {NTR, C, H, W}, dte[4] = {NTE, C, H, W}, ntr = NTR, nte = NTE;
    h5_put(f, "train/x", QAT_DT_U8, 4, dtr, s->xtr, 0);
    int64_t y64[NTR];
    for (int i = 0; i < NTR; i++) y64[i] = s->ytr[i];
    h5_put(f, "train/y", QAT_DT_I64, 1, &ntr, y64, 0); /* any integer type */
    h5_put(f, "test/x", QAT_DT_U8, 4, dte, s->xte, 3);  /* chunked */
    h5_put(f, "test/y", QAT_DT_U8, 1, &nte, s->yte, 0);
    h5_put(f, "test/anomaly", QAT_DT_U8, 1, &nte, s->ate, 0);
    H5Fclose(f);
}

static void write_small_npy(const char *d, const small_set *s, int major) {
    char p[400];
    int64_t dtr[4] = {NTR, C, H, W}, dte[4] = {NTE, C, H, W}, ntr = NTR, nte = NTE;
    snprintf(p, sizeof p, "%s/train_x.npy", d);
    npy_write(p, major, "|u1", false, 4, dtr, s->xtr, sizeof s->xtr);
    int16_t y16[NTR];
    for (int i = 0; i < NTR; i++) y16[i] = s->ytr[i];
    snprintf(p, sizeof p, "%s/train_y.npy", d);
    npy_write(p, major, "<i2", false, 1, &ntr, y16, sizeof y16);
    snprintf(p, sizeof p, "%s/test_x.npy", d);
    npy_write(p, major, "<u1", false, 4, dte, s->xte, sizeof s->xte); /* '<' for a byte: accepted */
    snprintf(p, sizeof p, "%s/test_y.npy", d);
    npy_write(p, major, "|u1", false, 1, &nte, s->yte, sizeof s->yte);
    snprintf(p, sizeof p, "%s/test_anomaly.npy", d);
    npy_write(p, major, "|u1", false, 1, &nte, s->ate, sizeof s->ate);
}

/* IDX has no channel axis: [N, C·H, W] images, which read as [1, C·H, W]. */
static void write_small_idx(const char *d, const small_set *s) {
    char p[400];
    uint32_t dtr[3] = {NTR, C * H, W}, dte[3] = {NTE, C * H, W}, ntr = NTR, nte = NTE;
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", d);
    idx_gz(p, 3, dtr, s->xtr, sizeof s->xtr);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", d);
    idx_gz(p, 1, &ntr, s->ytr, sizeof s->ytr);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", d);
    idx_gz(p, 3, dte, s->xte, sizeof s->xte);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", d);
    idx_gz(p, 1, &nte, s->yte, sizeof s->yte);
}

static qat_dataset *open_ok(qat_ctx *ctx, const char *path, const qat_dataset_options *o) {
    qat_dataset *d = NULL;
    qat_status st = qat_dataset_open(ctx, path, o, &d);
    if (st != QAT_OK) printf("\n  %s: %s\n", path, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    return d;
}

/* Every sample of split s, in a shuffled order with repeats, against the
 * known bytes x [n, px] and labels. */
static void check_split(qat_dataset *d, qat_split s, const uint8_t *x, const uint8_t *y, const uint8_t *anomaly,
                        int64_t n, int64_t px) {
    const qat_split_info *in = qat_dataset_info(d, s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    CU_ASSERT_EQUAL(in->n, n);
    CU_ASSERT_EQUAL(in->x_numel, px);
    CU_ASSERT_EQUAL(in->x_dtype, QAT_DT_U8);
    int64_t m = n + 5;
    int32_t *idx = malloc((size_t)m * sizeof *idx), *lab = malloc((size_t)m * sizeof *lab);
    float *xf = malloc((size_t)(m * px) * sizeof *xf);
    uint8_t *raw = malloc((size_t)(m * px)), *an = malloc((size_t)m);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    for (int64_t i = 0; i < m; i++) idx[i] = (int32_t)(i < n ? i : qat_rng_below(&rng, (uint32_t)n));
    qat_shuffle(idx, m, &rng);
    CU_ASSERT_EQUAL(qat_dataset_read(d, s, idx, m, xf, y ? lab : NULL, NULL, anomaly ? an : NULL), QAT_OK);
    CU_ASSERT_EQUAL(qat_dataset_read_raw(d, s, idx, m, raw), QAT_OK);
    int bad = 0;
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *want = x + (int64_t)idx[i] * px;
        bad += memcmp(raw + i * px, want, (size_t)px) != 0;
        for (int64_t e = 0; e < px; e++) bad += xf[i * px + e] != (float)want[e];
        if (y) bad += lab[i] != y[idx[i]];
        if (anomaly) bad += an[i] != anomaly[idx[i]];
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(idx), free(lab), free(xf), free(raw), free(an);
}

static void test_formats(void) {
    small_set s;
    make_small(&s, 11);
    char h5[300], npy1[300], npy2[300], npy3[300], idx[300];
    path_of(h5, sizeof h5, "small.h5");
    write_small_h5(h5, &s);
    fresh_dir("npy1", npy1, sizeof npy1);
    write_small_npy(npy1, &s, 1);
    fresh_dir("npy2", npy2, sizeof npy2);
    write_small_npy(npy2, &s, 2);
    fresh_dir("npy3", npy3, sizeof npy3);
    write_small_npy(npy3, &s, 3);
    fresh_dir("idx", idx, sizeof idx);
    write_small_idx(idx, &s);
    const char *paths[5] = {h5, npy1, npy2, npy3, idx}, *formats[5] = {"hdf5", "npy", "npy", "npy", "idx"};
    for (int k = 0; k < 5; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset *d = open_ok(ctx, paths[k], NULL);
        if (!d) {
            qat_ctx_free(ctx);
            continue;
        }
        CU_ASSERT_STRING_EQUAL(qat_dataset_format(d), formats[k]);
        const qat_split_info *tr = qat_dataset_info(d, QAT_SPLIT_TRAIN);
        CU_ASSERT_PTR_NULL(qat_dataset_info(d, QAT_SPLIT_VAL));
        CU_ASSERT_EQUAL(tr->target, QAT_TARGET_CLASS);
        CU_ASSERT_EQUAL(tr->label_max, 12);
        CU_ASSERT_EQUAL(tr->label_max_row, 20);
        CU_ASSERT_EQUAL(tr->x_rank, 3);
        CU_ASSERT_EQUAL(tr->x_shape[0], k == 4 ? 1 : C);
        CU_ASSERT_EQUAL(tr->x_shape[1], k == 4 ? C * H : H);
        CU_ASSERT(!tr->streaming);
        CU_ASSERT_EQUAL(tr->y_dtype, k == 0 ? QAT_DT_I64 : k == 4 ? QAT_DT_U8 : QAT_DT_I16);
        check_split(d, QAT_SPLIT_TRAIN, s.xtr, s.ytr, NULL, NTR, PX);
        check_split(d, QAT_SPLIT_TEST, s.xte, s.yte, k == 4 ? NULL : s.ate, NTE, PX);
        CU_ASSERT_EQUAL(qat_dataset_info(d, QAT_SPLIT_TEST)->has_anomaly, k != 4);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
}

/* float x, float targets, int8 x, float64 x: HDF5, .npy and arrays agree. */
static void test_float_targets(void) {
    enum { N = 9, F = 6, T = 2 };
    float x[N * F], y[N * T];
    double x64[N * F];
    int8_t x8[N * F];
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < N * F; i++) x[i] = qat_rng_normal(&rng), x64[i] = 0.1 * i + 1e-9, x8[i] = (int8_t)(i - 27);
    for (int i = 0; i < N * T; i++) y[i] = qat_rng_uniform(&rng);
    char h5[300], nd[300], p[400];
    path_of(h5, sizeof h5, "floats.h5");
    hid_t f = H5Fcreate(h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int64_t dx[2] = {N, F}, dy[2] = {N, T};
    h5_put(f, "train/x", QAT_DT_F32, 2, dx, x, 0);
    h5_put(f, "train/y", QAT_DT_F32, 2, dy, y, 0);
    h5_put(f, "test/x", QAT_DT_F32, 2, dx, x, 0);
    h5_put(f, "test/y", QAT_DT_F32, 2, dy, y, 0);
    h5_put(f, "val/x", QAT_DT_F32, 2, dx, x, 0);
    h5_put(f, "val/y", QAT_DT_F32, 2, dy, y, 0);
    H5Fclose(f);
    fresh_dir("floats", nd, sizeof nd);
    const char *names[4] = {"train_x", "train_y", "test_x", "test_y"};
    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/%s.npy", nd, names[k]);
        npy_write(p, 1, "<f4", false, 2, k % 2 ? dy : dx, k % 2 ? (void *)y : (void *)x, k % 2 ? sizeof y : sizeof x);
    }
    qat_array_split tr = {.n = N, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {F}, .x = x, .y_dtype = QAT_DT_F32,
                          .y_rank = 1, .y_shape = {T}, .y = y};
    for (int k = 0; k < 3; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset *d = NULL;
        if (k < 2) d = open_ok(ctx, k ? nd : h5, NULL);
        else CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &tr, NULL, &tr, NULL, &d), QAT_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        CU_ASSERT_EQUAL(qat_dataset_info(d, QAT_SPLIT_VAL) != NULL, k == 0);
        const qat_split_info *in = qat_dataset_info(d, QAT_SPLIT_TEST);
        CU_ASSERT_EQUAL(in->target, QAT_TARGET_VALUES);
        CU_ASSERT_EQUAL(in->y_rank, 1);
        CU_ASSERT_EQUAL(in->y_numel, T);
        CU_ASSERT_EQUAL(in->label_max, -1);
        int32_t idx[N] = {8, 0, 3, 3, 1, 2, 4, 5, 7};
        float gx[N * F], gy[N * T];
        int32_t lab[N];
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TEST, idx, N, gx, NULL, gy, NULL), QAT_OK);
        for (int i = 0; i < N; i++) {
            CU_ASSERT(!memcmp(gx + i * F, x + idx[i] * F, sizeof(float) * F));
            CU_ASSERT(!memcmp(gy + i * T, y + idx[i] * T, sizeof(float) * T));
        }
        /* labels from a split of float targets: a clear error */
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TEST, idx, N, NULL, lab, NULL, NULL), QAT_ERR_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "has no class labels"));
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
    /* int8 and float64 x from arrays: exact, and float64 rounded to nearest */
    int32_t lab[N];
    for (int i = 0; i < N; i++) lab[i] = i % 4;
    qat_array_split a8 = {.n = N, .x_dtype = QAT_DT_I8, .x_rank = 1, .x_shape = {F}, .x = x8, .y_dtype = QAT_DT_I32,
                          .y = lab};
    qat_array_split a64 = {.n = N, .x_dtype = QAT_DT_F64, .x_rank = 2, .x_shape = {2, 3}, .x = x64,
                           .y_dtype = QAT_DT_I32, .y = lab};
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d8 = NULL, *d64 = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a8, NULL, &a8, NULL, &d8), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a64, NULL, &a64, NULL, &d64), QAT_OK);
    CU_ASSERT_STRING_EQUAL(qat_dataset_format(d8), "memory");
    int32_t idx[2] = {4, 1};
    float g[2 * F];
    int8_t r8[2 * F];
    double r64[2 * F];
    CU_ASSERT_EQUAL(qat_dataset_read(d8, QAT_SPLIT_TRAIN, idx, 2, g, NULL, NULL, NULL), QAT_OK);
    CU_ASSERT_EQUAL(qat_dataset_read_raw(d8, QAT_SPLIT_TRAIN, idx, 2, r8), QAT_OK);
    for (int e = 0; e < F; e++) {
        CU_ASSERT_EQUAL(g[e], (float)x8[4 * F + e]);
        CU_ASSERT_EQUAL(r8[F + e], x8[F + e]);
    }
    CU_ASSERT_EQUAL(qat_dataset_read(d64, QAT_SPLIT_TEST, idx, 2, g, NULL, NULL, NULL), QAT_OK);
    CU_ASSERT_EQUAL(qat_dataset_read_raw(d64, QAT_SPLIT_TEST, idx, 2, r64), QAT_OK);
    for (int e = 0; e < F; e++) {
        CU_ASSERT_EQUAL(g[F + e], (float)x64[F + e]);
        CU_ASSERT_EQUAL(r64[e], x64[4 * F + e]);
    }
    CU_ASSERT_EQUAL(qat_dataset_info(d64, QAT_SPLIT_TRAIN)->x_rank, 2);
    qat_dataset_free(d8);
    qat_dataset_free(d64);
    qat_dataset_free(NULL);
    qat_ctx_free(ctx);
}

/* h5py writes bool arrays as an enum of int8 {FALSE: 0, TRUE: 1}: an
 * anomaly flag or a 0/1 label written as bool reads as uint8. */
static void put_bool(hid_t f, const char *name, const uint8_t *v, hsize_t n) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t v0 = 0, v1 = 1;
    H5Tenum_insert(t, "FALSE", &v0), H5Tenum_insert(t, "TRUE", &v1);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(1, &n, NULL), set = H5Dcreate2(f, name, t, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(H5Dwrite(set, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(set), H5Sclose(sp), H5Tclose(t), H5Pclose(lcpl);
}

static void test_h5py_bool(void) {
    char p[300];
    path_of(p, sizeof p, "bool.h5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    float x[10 * 3];
    for (int i = 0; i < 30; i++) x[i] = (float)i;
    uint8_t flags[10] = {0, 1, 1, 0, 0, 0, 1, 0, 1, 1};
    int64_t d[2] = {10, 3};
    h5_put(f, "train/x", QAT_DT_F32, 2, d, x, 0);
    put_bool(f, "train/y", flags, 10);
    h5_put(f, "test/x", QAT_DT_F32, 2, d, x, 0);
    put_bool(f, "test/y", flags, 10);
    put_bool(f, "test/anomaly", flags, 10);
    H5Fclose(f);
    for (int cap = 0; cap < 2; cap++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset_options o = qat_dataset_defaults();
        o.memory_cap = cap ? 200 : 0;
        qat_dataset *ds = open_ok(ctx, p, &o);
        if (ds) {
            const qat_split_info *in = qat_dataset_info(ds, QAT_SPLIT_TEST);
            CU_ASSERT(in->has_anomaly && in->target == QAT_TARGET_CLASS && in->y_dtype == QAT_DT_U8);
            CU_ASSERT_EQUAL(in->label_max, 1);
            int32_t idx[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, lab[10];
            uint8_t an[10];
            CU_ASSERT_EQUAL(qat_dataset_read(ds, QAT_SPLIT_TEST, idx, 10, NULL, lab, NULL, an), QAT_OK);
            for (int i = 0; i < 10; i++) CU_ASSERT(lab[i] == flags[9 - i] && an[i] == flags[9 - i]);
        }
        qat_dataset_free(ds);
        qat_ctx_free(ctx);
    }
}

/* ---- bad input --------------------------------------------------------------------------------- */

/* path must be refused with a message holding every fragment (NULL ends). */
static void refused_opt(const char *path, const qat_dataset_options *o, const char *f1, const char *f2) {
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = (qat_dataset *)1;
    qat_status st = qat_dataset_open(ctx, path, o, &d);
    const char *msg = qat_ctx_error(ctx);
    bool ok = st != QAT_OK && d == NULL && strstr(msg, f1) && (!f2 || strstr(msg, f2)) && !strchr(msg, '\n');
    if (!ok) printf("\n  %s: status %d, \"%s\" (want \"%s\"%s%s)\n", path, st, msg, f1, f2 ? " and " : "", f2 ? f2 : "");
    CU_ASSERT(ok);
    if (st == QAT_OK) qat_dataset_free(d);
    qat_ctx_free(ctx);
}
static void refused(const char *path, const char *f1, const char *f2) { refused_opt(path, NULL, f1, f2); }

/* A small valid HDF5 set, then one change (a callback on the open file). */
static void h5_case(const char *name, void (*change)(hid_t f), const char *f1, const char *f2) {
    char p[300];
    path_of(p, sizeof p, name);
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    change(f);
    H5Fclose(f);
    refused(p, f1, f2);
}

static const uint8_t U8[64] = {1, 2, 3};
static const int64_t D10x2[2] = {10, 2}, D10[1] = {10}, D9[1] = {9};

static void good_train(hid_t f) {
    h5_put(f, "train/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "train/y", QAT_DT_U8, 1, D10, U8, 0);
}
static void no_test(hid_t f) {
    good_train(f);
    h5_put(f, "validation/x", QAT_DT_U8, 2, D10x2, U8, 0);
}
static void x_int16(hid_t f) {
    int16_t v[20] = {0};
    h5_put(f, "train/x", QAT_DT_I16, 2, D10x2, v, 0);
    h5_put(f, "test/x", QAT_DT_I16, 2, D10x2, v, 0);
}
static void y_short(hid_t f) {
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "test/y", QAT_DT_U8, 1, D9, U8, 0);
}
static void anomaly_short(hid_t f) {
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "test/anomaly", QAT_DT_U8, 1, D9, U8, 0);
}
static void negative_label(hid_t f) {
    int32_t y[10] = {0, 1, 2, -1, 4};
    h5_put(f, "train/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "train/y", QAT_DT_I32, 1, D10, y, 0);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
}
static void anomaly_two(hid_t f) {
    uint8_t a[10] = {0, 1, 0, 0, 2};
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "test/y", QAT_DT_U8, 1, D10, U8, 0);
    h5_put(f, "test/anomaly", QAT_DT_U8, 1, D10, a, 0);
}
static void other_shape(hid_t f) {
    int64_t d[3] = {10, 1, 2};
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 3, d, U8, 0);
}
static void nan_x(hid_t f) {
    float x[20] = {0};
    x[11] = NAN;
    h5_put(f, "train/x", QAT_DT_F32, 2, D10x2, x, 0);
    h5_put(f, "test/x", QAT_DT_F32, 2, D10x2, x, 0);
}
static void big_f64(hid_t f) {
    double x[20] = {0};
    x[7] = 1e300;
    h5_put(f, "train/x", QAT_DT_F64, 2, D10x2, x, 0);
    h5_put(f, "test/x", QAT_DT_F64, 2, D10x2, x, 0);
}
static void inf_y(hid_t f) {
    float y[20] = {0};
    y[19] = -INFINITY;
    h5_put(f, "train/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "train/y", QAT_DT_F32, 2, D10x2, y, 0);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "test/y", QAT_DT_F32, 2, D10x2, y, 0);
}
static void kinds_differ(hid_t f) {
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
}
static void y_int_2d(hid_t f) {
    h5_put(f, "train/x", QAT_DT_U8, 2, D10x2, U8, 0);
    h5_put(f, "train/y", QAT_DT_U8, 2, D10x2, U8, 0);
}
static void rank_6(hid_t f) {
    int64_t d[6] = {10, 1, 1, 1, 1, 2};
    h5_put(f, "train/x", QAT_DT_U8, 6, d, U8, 0);
}
static void x_1d(hid_t f) { h5_put(f, "train/x", QAT_DT_U8, 1, D10, U8, 0); }
static void train_dataset(hid_t f) { h5_put(f, "train", QAT_DT_U8, 2, D10x2, U8, 0); }
static void external_y(hid_t f) {
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    H5Lcreate_external("/etc/elsewhere.h5", "/labels", f, "test/y", H5P_DEFAULT, H5P_DEFAULT);
}
static void dangling_y(hid_t f) {
    good_train(f);
    h5_put(f, "test/x", QAT_DT_U8, 2, D10x2, U8, 0);
    H5Lcreate_soft("/nowhere", f, "test/y", H5P_DEFAULT, H5P_DEFAULT);
}
static void no_x(hid_t f) { h5_put(f, "train/images", QAT_DT_U8, 2, D10x2, U8, 0); }
static void x_group(hid_t f) { h5_put(f, "train/x/images", QAT_DT_U8, 2, D10x2, U8, 0); }
static void three_enum(hid_t f) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t v0 = 0, v1 = 1, v2 = 2;
    H5Tenum_insert(t, "RED", &v0), H5Tenum_insert(t, "GREEN", &v1), H5Tenum_insert(t, "BLUE", &v2);
    hsize_t d[2] = {10, 2};
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(2, d, NULL), set = H5Dcreate2(f, "train/x", t, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(set), H5Sclose(sp), H5Tclose(t), H5Pclose(lcpl);
}
static void huge_sample(hid_t f) {
    int64_t d[2] = {1, (int64_t)1 << 25};
    hsize_t hd[2] = {1, (hsize_t)1 << 25};
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(2, hd, NULL), set = H5Dcreate2(f, "train/x", H5T_NATIVE_UINT8, sp, lcpl, H5P_DEFAULT,
                                                               H5P_DEFAULT);
    (void)d;
    H5Dclose(set), H5Sclose(sp), H5Pclose(lcpl);
}

static void test_bad_hdf5(void) {
    h5_case("no-test.h5", no_test, "no group \"test\" (groups found: train, validation)", NULL);
    h5_case("int16.h5", x_int16, "train: x is int16 (want uint8, int8, float32 or float64)", NULL);
    h5_case("y-short.h5", y_short, "test: x has 10 rows but y has 9", NULL);
    h5_case("anomaly-short.h5", anomaly_short, "test: x has 10 rows but anomaly has 9", NULL);
    h5_case("negative.h5", negative_label, "train: y row 3: label -1 is negative", NULL);
    h5_case("anomaly2.h5", anomaly_two, "test: anomaly row 4 is 2 (want 0 or 1)", NULL);
    h5_case("shape.h5", other_shape, "test: x samples are [1, 2] but train's are [2]", NULL);
    h5_case("nan.h5", nan_x, "train: train/x row 5 holds NaN at element 1", "allow-nonfinite");
    h5_case("f64.h5", big_f64, "train: train/x row 3 holds a value beyond float32's range (1e+300) at element 1", NULL);
    h5_case("inf.h5", inf_y, "train: train/y row 9 holds infinity at element 1", NULL);
    h5_case("kinds.h5", kinds_differ, "test has no y but train has class labels in y (", NULL);
    h5_case("y2d.h5", y_int_2d, "train: y holds integers of shape [N] + [2]: class labels are [N]", NULL);
    h5_case("rank6.h5", rank_6, "train/x has rank 6 (at most 5)", NULL);
    h5_case("x1d.h5", x_1d, "train/x has rank 1: want [N, ...]", NULL);
    h5_case("train-dataset.h5", train_dataset, "\"train\" is not a group", NULL);
    h5_case("external.h5", external_y, "test/y is a link to another file: not followed", NULL);
    h5_case("dangling.h5", dangling_y, "test/y is a link to nothing", NULL);
    h5_case("no-x.h5", no_x, "group train has no dataset x (it holds: images)", NULL);
    h5_case("x-group.h5", x_group, "train/x is a group, not a dataset", NULL);
    h5_case("enum.h5", three_enum, "train/x holds an enum, which no array of a data set may hold", NULL);
    h5_case("unwritten.h5", huge_sample, "train/x stores 0 bytes of its 33554432 (created but never written", NULL);
    char p[300];
    path_of(p, sizeof p, "not-hdf5.h5");
    put_file(p, "this is not HDF5 at all, just text\n", 35);
    refused(p, "not-hdf5.h5: not an HDF5 file", NULL);
    path_of(p, sizeof p, "does-not-exist.h5");
    refused(p, "does-not-exist.h5: cannot open: No such file or directory", NULL);
    /* NaN with allow_nonfinite: the row is skipped and counted */
    path_of(p, sizeof p, "nan.h5");
    qat_dataset_options o = qat_dataset_defaults();
    o.allow_nonfinite = true;
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = open_ok(ctx, p, &o);
    if (d) {
        CU_ASSERT_EQUAL(qat_dataset_info(d, QAT_SPLIT_TRAIN)->n, 9);
        CU_ASSERT_EQUAL(qat_dataset_info(d, QAT_SPLIT_TRAIN)->skipped, 1);
        int32_t idx[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
        float x[18];
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TEST, idx, 9, x, NULL, NULL, NULL), QAT_OK);
        for (int i = 0; i < 18; i++) CU_ASSERT(isfinite(x[i]));
        /* reads refuse what is not there */
        idx[0] = 9;
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TEST, idx, 1, x, NULL, NULL, NULL), QAT_ERR_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "index 0 is 9, outside test's [0, 9)"));
        qat_ctx_clear_error(ctx);
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_VAL, idx, 1, x, NULL, NULL, NULL), QAT_ERR_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "the set has no val split"));
        qat_dataset_free(d);
    }
    qat_ctx_free(ctx);
}

/* .npy: the directory's files, then the header byte by byte. */
static void npy_case(const char *name, const char *header, size_t payload, const char *f1, const char *f2) {
    char d[300], p[400];
    fresh_dir(name, d, sizeof d);
    static uint8_t zeros[256];
    int64_t sh[2] = {4, 2}, n4 = 4;
    snprintf(p, sizeof p, "%s/train_y.npy", d);
    npy_write(p, 1, "|u1", false, 1, &n4, zeros, 4);
    snprintf(p, sizeof p, "%s/test_x.npy", d);
    npy_write(p, 1, "|u1", false, 2, sh, zeros, 8);
    snprintf(p, sizeof p, "%s/train_x.npy", d);
    npy_raw(p, header[0] == '#' ? header[1] - '0' : 1, 0, header[0] == '#' ? header + 2 : header, zeros, payload);
    refused(d, f1, f2 ? f2 : "train_x.npy");
}

static void test_bad_npy(void) {
    /* well-formed but refused */
    npy_case("be", "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 2), }\n", 32, "'>f4' is big-endian", NULL);
    npy_case("fortran", "{'descr': '|u1', 'fortran_order': True, 'shape': (4, 2), }\n", 8, "Fortran order",
             "np.ascontiguousarray");
    npy_case("short", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }\n", 7,
             "payload is 7 bytes but shape [4, 2] of uint8 needs 8 (truncated)", NULL);
    npy_case("long", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }\n", 9,
             "payload is 9 bytes but shape [4, 2] of uint8 needs 8 (trailing bytes)", NULL);
    npy_case("int16", "{'descr': '<i2', 'fortran_order': False, 'shape': (4, 2), }\n", 16,
             "train: x is int16 (want uint8, int8, float32 or float64)", NULL);
    npy_case("half", "{'descr': '<f2', 'fortran_order': False, 'shape': (4, 2), }\n", 16, "(float16)", NULL);
    npy_case("pipe4", "{'descr': '|f4', 'fortran_order': False, 'shape': (4, 2), }\n", 32, "does not say its byte order",
             NULL);
    npy_case("complex", "{'descr': '<c8', 'fortran_order': False, 'shape': (4, 2), }\n", 64,
             "dtype '<c8' is not supported", NULL);
    npy_case("struct", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 2), }\n", 32, "structured", NULL);
    npy_case("rows", "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 2), }\n", 10,
             "x has 5 rows but y has 4", "train_y.npy");
    npy_case("rank1", "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }\n", 4,
             "x has shape [4]: want [N, ...]", NULL);
    npy_case("rank6", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1, 1, 1, 1, 2), }\n", 8,
             "more than 5 dimensions", NULL);
    npy_case("huge", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 100000000), }\n", 0,
             "payload is 0 bytes but shape [4, 100000000] of uint8 needs 400000000", NULL);
    npy_case("hugedim", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 99999999999999999999), }\n", 0,
             "'shape' is not a tuple", NULL);
    /* the grammar */
    npy_case("paren", "{'descr': '|u1', 'fortran_order': False, 'shape': (8), }\n", 8, "'shape' is not a tuple", NULL);
    npy_case("sign", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, -2), }\n", 8, "'shape' is not a tuple", NULL);
    npy_case("zeros", "{'descr': '|u1', 'fortran_order': False, 'shape': (04, 2), }\n", 8, "'shape' is not a tuple", NULL);
    npy_case("key", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), 'extra': 1}\n", 8,
             "unknown key 'extra'", NULL);
    npy_case("twice", "{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (4, 2)}\n", 8,
             "'descr' twice", NULL);
    npy_case("nokey", "{'descr': '|u1', 'shape': (4, 2)}\n", 8, "no 'fortran_order' key", NULL);
    npy_case("falsey", "{'descr': '|u1', 'fortran_order': Falsey, 'shape': (4, 2)}\n", 8, "neither True nor False",
             NULL);
    npy_case("nonl", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }   ", 8,
             "not followed by spaces and a final '\\n'", NULL);
    npy_case("after", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), } x\n", 8,
             "not followed by spaces and a final '\\n'", NULL);
    npy_case("binary", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }\x01\n", 8, "is ASCII text", NULL);
    npy_case("brace", "'descr': '|u1'}\n", 8, "does not start with '{'", NULL);
    npy_case("escape", "{'de\\scr': '|u1'}\n", 8, "a key is not a short quoted string", NULL);
    npy_case("v4", "#4{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }\n", 8, "format version 4.0", NULL);
    /* well-formed variants numpy and others write: accepted */
    const char *good[] = {"{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (4, 2)}\n",
                          "{'shape': (4,2), 'fortran_order': False, 'descr': '<u1'}          \n",
                          "#2{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2,), }\n",
                          "#3{\t'descr':'|u1','fortran_order':False,'shape':(4,2)}\n",
                          "{'descr': '|b1', 'fortran_order': False, 'shape': (4, 2), }\n"}; /* bool: uint8 */
    for (int i = 0; i < 5; i++) {
        char d[300], p[400], name[16];
        snprintf(name, sizeof name, "good%d", i);
        fresh_dir(name, d, sizeof d);
        static uint8_t zeros[8];
        int64_t sh[2] = {4, 2};
        snprintf(p, sizeof p, "%s/test_x.npy", d);
        npy_write(p, 1, "|u1", false, 2, sh, zeros, 8);
        snprintf(p, sizeof p, "%s/train_x.npy", d);
        const char *h = good[i];
        npy_raw(p, h[0] == '#' ? h[1] - '0' : 1, 0, h[0] == '#' ? h + 2 : h, zeros, 8);
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset *ds = open_ok(ctx, d, NULL);
        if (ds) CU_ASSERT_EQUAL(qat_dataset_info(ds, QAT_SPLIT_TRAIN)->target, QAT_TARGET_NONE);
        qat_dataset_free(ds);
        qat_ctx_free(ctx);
    }
    /* bytes before the header: magic, version 1.1, header length 0 and 20000 */
    char d[300], p[400];
    fresh_dir("npyhead", d, sizeof d);
    {
        static uint8_t z[8];
        int64_t s2[2] = {4, 2};
        snprintf(p, sizeof p, "%s/test_x.npy", d);
        npy_write(p, 1, "|u1", false, 2, s2, z, 8);
    }
    snprintf(p, sizeof p, "%s/train_x.npy", d);
    put_file(p, "\x93NUMPZ\x01\x00\x10\x00", 10);
    refused(d, "train_x.npy: not a .npy file (no \\x93NUMPY magic)", NULL);
    npy_raw(p, 1, 1, "{}\n", NULL, 0);
    refused(d, "train_x.npy: .npy format version 1.1", NULL);
    put_file(p, "\x93NUMPY\x01\x00\x00\x00", 10);
    refused(d, "train_x.npy: .npy header length 0 (want 1 to 10000)", NULL);
    put_file(p, "\x93NUMPY\x02\x00\x20\x4e\x00\x00{", 13);
    refused(d, "train_x.npy: .npy header length 20000 (want 1 to 10000)", NULL);
    put_file(p, "\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
    refused(d, "train_x.npy: truncated .npy header (the file ends inside it)", NULL);
    put_file(p, "\x93NUMPY", 6);
    refused(d, "train_x.npy: truncated .npy header", NULL);
    /* the directory */
    fresh_dir("npydir", d, sizeof d);
    static uint8_t zeros[8];
    int64_t sh[2] = {4, 2};
    snprintf(p, sizeof p, "%s/train_x.npy", d);
    npy_write(p, 1, "|u1", false, 2, sh, zeros, 8);
    snprintf(p, sizeof p, "%s/train_labels.npy", d);
    npy_write(p, 1, "|u1", false, 1, sh, zeros, 4);
    refused(d, "unknown .npy file train_labels.npy", NULL);
    unlink(p);
    refused(d, "npydir: no test_x.npy (the .npy files found: train_x.npy)", NULL);
    refused(p, "cannot open", NULL);
    snprintf(p, sizeof p, "%s/train_x.npy", d);
    refused(p, "a single .npy file: give the directory", NULL);
    /* over the memory cap: .npy sets are read whole */
    snprintf(p, sizeof p, "%s/test_x.npy", d);
    npy_write(p, 1, "|u1", false, 2, sh, zeros, 8);
    qat_dataset_options o = qat_dataset_defaults();
    o.memory_cap = 47;
    refused_opt(d, &o, "the .npy arrays take 48 bytes (with the labels and row maps), over the memory cap of 47",
                "convert the set to HDF5");
    fresh_dir("empty", d, sizeof d);
    refused(d, "a directory with neither .npy files", "it holds: none");
}

static void test_bad_idx(void) {
    char d[300], p[400];
    fresh_dir("badidx", d, sizeof d);
    uint8_t img[6 * 4] = {0}, lab[6] = {0};
    uint32_t di[3] = {6, 2, 2}, dl = 5;
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", d);
    idx_gz(p, 3, di, img, sizeof img);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", d);
    idx_gz(p, 1, &dl, lab, 5);
    refused(d, "no test images (want t10k-images-idx3-ubyte[.gz]", "train-images-idx3-ubyte.gz");
    snprintf(p, sizeof p, "%s/emnist-letters-test-images-idx3-ubyte.gz", d);
    idx_gz(p, 3, di, img, sizeof img);
    refused(d, "train-labels-idx1-ubyte.gz: train: x has 6 rows but y has 5", NULL);
    snprintf(p, sizeof p, "%s/emnist-digits-test-images-idx3-ubyte", d);
    idx_gz(p, 3, di, img, sizeof img);
    refused(d, "two IDX files for the test images", NULL);
    unlink(p);
    dl = 6;
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", d);
    idx_gz(p, 1, &dl, lab, 6);
    /* the test split without labels: the kinds differ */
    refused(d, ": test has no y but train has class labels in y (uint8)", NULL);
}

/* A FIFO where a data file should be: refused at once, never a blocked
 * open (the alarm turns a hang into a failure). */
static void test_fifo_refused(void) {
    char d[300], p[400];
    alarm(60);
    fresh_dir("fifo-npy", d, sizeof d);
    const char *names[] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        CU_ASSERT_EQUAL_FATAL(mkfifo(p, 0600), 0);
    }
    refused(d, "_x.npy: not a regular file (a FIFO)", NULL);
    /* IDX: qat_idx_read takes a pipe (test_data), a data set's folder only files */
    fresh_dir("fifo-idx", d, sizeof d);
    const char *idx[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                         "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", d, idx[i]);
        CU_ASSERT_EQUAL_FATAL(mkfifo(p, 0600), 0);
    }
    refused(d, "-ubyte: not a regular file (a FIFO)", NULL);
    alarm(0);
}

static void test_bad_options(void) {
    small_set s;
    make_small(&s, 2);
    char h5[300];
    path_of(h5, sizeof h5, "opts.h5");
    write_small_h5(h5, &s);
    qat_dataset_options o = qat_dataset_defaults();
    o.val_fraction = 0.001;
    refused_opt(h5, &o, "a val fraction of 0.001 of train's 37 samples is 0 samples", NULL);
    o.val_fraction = 1.5;
    refused_opt(h5, &o, "val fraction 1.5 (want 0 <= fraction < 1)", NULL);
    o.val_fraction = 0;
    o.memory_cap = -1;
    refused_opt(h5, &o, "memory_cap -1 is negative", NULL);
    o = qat_dataset_defaults();
    o.channels_last = true;
    qat_array_split a = {.n = 4, .x_dtype = QAT_DT_U8, .x_rank = 2, .x_shape = {2, 2}, .x = U8};
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = NULL;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &a, NULL, &a, &o, &d), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "channels_last needs x of rank 4 ([N, H, W, C]); its samples are [2, 2]"));
    qat_ctx_clear_error(ctx);
    o = qat_dataset_defaults();
    o.val_fraction = 0.5;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &a, &a, &a, &o, &d), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "a val split is given"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &a, NULL, NULL, NULL, &d), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "the test split is missing"));
    qat_ctx_clear_error(ctx);
    qat_array_split big = a;
    big.x_shape[0] = 4096, big.x_shape[1] = 4097;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &big, NULL, &a, NULL, &d), QAT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "train: x samples of shape [4096, 4097] have more than 16777216 "
                                  "elements"));
    qat_ctx_clear_error(ctx);
    big = a;
    big.n = QAT_DATA_MAX_SAMPLES + 1;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &big, NULL, &a, NULL, &d), QAT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "train: x has 2147483649 rows (at most 2147483648)"));
    qat_ctx_clear_error(ctx);
    qat_array_split e = a;
    e.n = 0;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &a, NULL, &e, NULL, &d), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "test: x has no rows"));
    qat_ctx_clear_error(ctx);
    qat_array_split neg = a;
    neg.x_shape[1] = -8;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &neg, NULL, &a, NULL, &d), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "samples of shape [2, -8] have a negative dimension"));
    qat_ctx_clear_error(ctx);
    /* messages of an in-memory set name "arrays" where a file's name would be */
    static const int32_t labels[4] = {0, 1, 0, 1};
    qat_array_split la = a;
    la.y_dtype = QAT_DT_I32, la.y = labels;
    CU_ASSERT_EQUAL(qat_dataset_from_arrays(ctx, &la, NULL, &a, NULL, &d), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "arrays: test has no y but train has class labels"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &la, NULL, &la, NULL, &d), QAT_OK);
    float xs[4];
    CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TEST, (int32_t[]){7}, 1, xs, NULL, NULL, NULL), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(strncmp(qat_ctx_error(ctx), "arrays: ", 8), 0);
    qat_dataset_free(d);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_npy_save(ctx, "never.npy", QAT_DT_U8, 1, (int64_t[]){1}, NULL), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "NULL data"));
    CU_ASSERT_EQUAL(access("never.npy", F_OK), -1);
    qat_ctx_free(ctx);
    /* the val split of the file with a val fraction as well */
    path_of(h5, sizeof h5, "floats.h5");
    o = qat_dataset_defaults();
    o.val_fraction = 0.2;
    refused_opt(h5, &o, "the set has a val split: a val fraction would make a second one", NULL);
}

/* ---- val carving ------------------------------------------------------------------------------ */

/* x[r] = r: a sample says which row it is. */
static void rows_of(qat_dataset *d, qat_split s, int32_t *out) {
    const qat_split_info *in = qat_dataset_info(d, s);
    int32_t *idx = malloc((size_t)in->n * sizeof *idx);
    float *x = malloc((size_t)in->n * sizeof *x);
    for (int64_t i = 0; i < in->n; i++) idx[i] = (int32_t)i;
    CU_ASSERT_EQUAL(qat_dataset_read(d, s, idx, in->n, x, NULL, NULL, NULL), QAT_OK);
    for (int64_t i = 0; i < in->n; i++) out[i] = (int32_t)x[i];
    free(idx), free(x);
}

static void test_val_carving(void) {
    enum { N = 1000 };
    static float x[N];
    static int32_t y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = i % 7;
    x[123] = NAN; /* skipped first: val is drawn from the rows left */
    qat_array_split a = {.n = N, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {1}, .x = x, .y_dtype = QAT_DT_I32,
                         .y = y};
    qat_array_split t = a;
    t.n = 10;
    static int32_t va[3][N], tr[3][N];
    uint64_t seeds[3] = {7, 7, 8};
    qat_ctx *ctx = qat_ctx_new();
    for (int k = 0; k < 3; k++) {
        qat_dataset_options o = qat_dataset_defaults();
        o.val_fraction = 0.1;
        o.val_seed = seeds[k];
        o.allow_nonfinite = true;
        qat_dataset *d = NULL;
        CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a, NULL, &t, &o, &d), QAT_OK);
        const qat_split_info *iv = qat_dataset_info(d, QAT_SPLIT_VAL), *it = qat_dataset_info(d, QAT_SPLIT_TRAIN);
        CU_ASSERT_EQUAL(iv->n, 100); /* round(0.1 · 999) */
        CU_ASSERT_EQUAL(it->n, 899);
        CU_ASSERT_EQUAL(it->skipped, 1);
        CU_ASSERT_EQUAL(iv->target, QAT_TARGET_CLASS);
        rows_of(d, QAT_SPLIT_VAL, va[k]);
        rows_of(d, QAT_SPLIT_TRAIN, tr[k]);
        /* disjoint, together every row but the skipped one, each in ascending order */
        static uint8_t seen[N];
        memset(seen, 0, sizeof seen);
        int bad = 0;
        for (int i = 0; i < 100; i++) seen[va[k][i]]++, bad += i && va[k][i] <= va[k][i - 1];
        for (int i = 0; i < 899; i++) seen[tr[k][i]]++, bad += i && tr[k][i] <= tr[k][i - 1];
        for (int r = 0; r < N; r++) bad += seen[r] != (r != 123);
        CU_ASSERT_EQUAL(bad, 0);
        /* labels follow their rows */
        int32_t idx[3] = {0, 50, 99}, lab[3];
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_VAL, idx, 3, NULL, lab, NULL, NULL), QAT_OK);
        for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(lab[i], va[k][idx[i]] % 7);
        qat_dataset_free(d);
    }
    CU_ASSERT(!memcmp(va[0], va[1], 100 * sizeof **va)); /* the same seed, the same split */
    CU_ASSERT(memcmp(va[0], va[2], 100 * sizeof **va));  /* another seed, another */
    qat_ctx_free(ctx);
}

/* ---- streaming ----------------------------------------------------------------------------------- */

/* N samples [1, 16, 16] of uint8 (row r filled from r), float targets [2],
 * a few NaN rows when nan: one HDF5 file, x chunked or not. */
enum { SN = 3000, SPX = 256 };
static void write_stream_set(const char *path, bool floats, int64_t chunk_rows) {
    uint8_t *x8 = malloc(SN * SPX);
    float *xf = malloc(SN * SPX * sizeof *xf), *t = malloc(SN * 2 * sizeof *t);
    int32_t *y = malloc(SN * sizeof *y);
    qat_rng rng;
    qat_rng_seed(&rng, 21);
    for (int i = 0; i < SN * SPX; i++) x8[i] = (uint8_t)qat_rng_below(&rng, 256), xf[i] = qat_rng_normal(&rng);
    for (int i = 0; i < SN; i++) y[i] = (int32_t)qat_rng_below(&rng, 12), t[2 * i] = (float)i, t[2 * i + 1] = -1.0f;
    if (floats) xf[17 * SPX + 5] = NAN, xf[2999 * SPX] = INFINITY, t[2 * 1500 + 1] = NAN;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int64_t dx[4] = {SN, 1, 16, 16}, dt[2] = {SN, 2}, dy = SN, dte[4] = {100, 1, 16, 16}, nte = 100, dte2[2] = {100, 2};
    if (floats) {
        h5_put(f, "train/x", QAT_DT_F32, 4, dx, xf, chunk_rows);
        h5_put(f, "train/y", QAT_DT_F32, 2, dt, t, 0);
        h5_put(f, "test/x", QAT_DT_F32, 4, dte, xf + SPX * 100, 0);
        h5_put(f, "test/y", QAT_DT_F32, 2, dte2, t, 0);
    } else {
        h5_put(f, "train/x", QAT_DT_U8, 4, dx, x8, chunk_rows);
        h5_put(f, "train/y", QAT_DT_I32, 1, &dy, y, 0);
        h5_put(f, "test/x", QAT_DT_U8, 4, dte, x8, 0);
        h5_put(f, "test/y", QAT_DT_I32, 1, &nte, y, 0);
    }
    H5Fclose(f);
    free(x8), free(xf), free(t), free(y);
    (void)nte;
}

/* The same reads from a streamed and an in-memory opening: the same bits. */
static void compare_streamed(const char *path, bool floats, int64_t cap) {
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset_options o = qat_dataset_defaults();
    o.allow_nonfinite = floats;
    qat_dataset *mem = open_ok(ctx, path, &o);
    enum { B = 128 };
    int32_t idx[B], l1[B], l2[B];
    size_t xb = (size_t)B * SPX;
    float *x1 = malloc(xb * 4), *x2 = malloc(xb * 4), t1[2 * B], t2[2 * B];
    uint8_t *r1 = malloc(xb * 4), *r2 = malloc(xb * 4);
    o.memory_cap = cap;
    /* from here, only the library allocates */
    long long base = atomic_load(&live_bytes);
    peak_reset();
    qat_dataset *st = open_ok(ctx, path, &o);
    CU_ASSERT_FATAL(mem && st);
    const qat_split_info *im = qat_dataset_info(mem, QAT_SPLIT_TRAIN), *is = qat_dataset_info(st, QAT_SPLIT_TRAIN);
    CU_ASSERT(!im->streaming);
    CU_ASSERT(is->streaming);
    CU_ASSERT(!qat_dataset_info(st, QAT_SPLIT_TEST)->streaming); /* the test split fits what is left */
    CU_ASSERT_EQUAL(im->n, is->n);
    CU_ASSERT_EQUAL(is->skipped, floats ? 3 : 0);
    CU_ASSERT_EQUAL(im->label_max, is->label_max);
    CU_ASSERT_EQUAL(im->label_max_row, is->label_max_row);
    qat_rng rng;
    qat_rng_seed(&rng, 4);
    int bad = 0;
    for (int b = 0; b < 40; b++) {
        for (int i = 0; i < B; i++) /* random, with repeats and runs of neighbours */
            idx[i] = i && i % 5 ? (idx[i - 1] + 1) % (int32_t)is->n : (int32_t)qat_rng_below(&rng, (uint32_t)is->n);
        if (b == 0) idx[3] = idx[4] = idx[9];
        CU_ASSERT_EQUAL(qat_dataset_read(mem, QAT_SPLIT_TRAIN, idx, B, x1, floats ? NULL : l1, floats ? t1 : NULL, NULL),
                        QAT_OK);
        CU_ASSERT_EQUAL(qat_dataset_read(st, QAT_SPLIT_TRAIN, idx, B, x2, floats ? NULL : l2, floats ? t2 : NULL, NULL),
                        QAT_OK);
        CU_ASSERT_EQUAL(qat_dataset_read_raw(mem, QAT_SPLIT_TRAIN, idx, B, r1), QAT_OK);
        CU_ASSERT_EQUAL(qat_dataset_read_raw(st, QAT_SPLIT_TRAIN, idx, B, r2), QAT_OK);
        bad += memcmp(x1, x2, xb * 4) != 0;
        bad += memcmp(r1, r2, xb * (floats ? 4 : 1)) != 0;
        bad += floats ? memcmp(t1, t2, sizeof t1) != 0 : memcmp(l1, l2, sizeof l1) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    double m1[1], s1[1], m2[1], s2[1];
    CU_ASSERT_EQUAL(qat_dataset_channel_stats(mem, QAT_SPLIT_TRAIN, 0, 255, m1, s1), QAT_OK);
    CU_ASSERT_EQUAL(qat_dataset_channel_stats(st, QAT_SPLIT_TRAIN, 0, 255, m2, s2), QAT_OK);
    CU_ASSERT(m1[0] == m2[0] && s1[0] == s2[0]);
    /* the bound: the cap (which counts the labels and row maps too), plus
     * the batch's staging (B stored rows) and its sort pairs (16 bytes a
     * sample), plus 64 KiB for the small blocks (the data set, names) */
    long long peak = atomic_load(&peak_bytes) - base;
    long long row = SPX * (floats ? 4 : 1), x_bytes = (long long)SN * row;
    long long bound = cap + B * row + 16 * B + (64 << 10);
    printf("\n  streamed %s, x %lld bytes, cap %lld: peak %lld bytes of qat's memory (bound %lld) ",
           floats ? "float32" : "uint8", x_bytes, (long long)cap, peak, bound);
    CU_ASSERT(x_bytes >= 2 * cap); /* the split really is over the cap */
    CU_ASSERT(peak <= bound);
    qat_dataset_free(mem);
    qat_dataset_free(st);
    free(x1), free(x2), free(r1), free(r2);
    qat_ctx_free(ctx);
}

static void test_streaming(void) {
    char p[300];
    path_of(p, sizeof p, "stream.h5");
    write_stream_set(p, false, 0);
    compare_streamed(p, false, 256 << 10);
    path_of(p, sizeof p, "stream-chunked.h5");
    write_stream_set(p, false, 100);
    compare_streamed(p, false, 256 << 10);
    path_of(p, sizeof p, "stream-float.h5");
    write_stream_set(p, true, 64);
    compare_streamed(p, true, 1 << 20);
    /* a streamed split holding NaN: the error names the row, as in memory */
    qat_dataset_options o = qat_dataset_defaults();
    o.memory_cap = 1 << 20;
    refused_opt(p, &o, "train: train/x row 17 holds NaN at element 5", NULL);
    /* chunks larger than the cap cannot stream within it */
    path_of(p, sizeof p, "stream-bigchunk.h5");
    write_stream_set(p, false, 3000);
    o.memory_cap = 64 << 10;
    refused_opt(p, &o, "train/x is streamed", "stored in chunks of 768000 bytes, over the cap of 65536");
    /* the file cut after opening: the read fails with file and rows named */
    path_of(p, sizeof p, "stream.h5");
    char cut[300];
    path_of(cut, sizeof cut, "stream-cut.h5");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p, cut);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = open_ok(ctx, cut, &o);
    CU_ASSERT_FATAL(d != NULL);
    CU_ASSERT_EQUAL(truncate(cut, 100000), 0);
    int32_t idx[2] = {2990, 2991};
    float x[2 * SPX];
    CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TRAIN, idx, 2, x, NULL, NULL, NULL), QAT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "stream-cut.h5: train/x: cannot read rows 2990 to 2991"));
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

/* ---- channels_last, statistics, threads ------------------------------------------------------------- */

static void test_channels_last(void) {
    enum { N = 7, HH = 3, WW = 5, CC = 4, P = HH * WW * CC };
    static uint8_t hwc[N * P];
    for (int i = 0; i < N * P; i++) hwc[i] = (uint8_t)(i * 7 + i / 13);
    char p[300];
    path_of(p, sizeof p, "hwc.h5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int64_t dims[4] = {N, HH, WW, CC}, n = N;
    int32_t y[N] = {0};
    h5_put(f, "train/x", QAT_DT_U8, 4, dims, hwc, 0);
    h5_put(f, "train/y", QAT_DT_I32, 1, &n, y, 0);
    h5_put(f, "test/x", QAT_DT_U8, 4, dims, hwc, 0);
    h5_put(f, "test/y", QAT_DT_I32, 1, &n, y, 0);
    H5Fclose(f);
    for (int cap = 0; cap < 2; cap++) { /* in memory, then streamed */
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset_options o = qat_dataset_defaults();
        o.channels_last = true;
        o.memory_cap = cap ? 200 : 0; /* 112 bytes of labels and row maps, then no room for x */
        qat_dataset *d = open_ok(ctx, p, &o);
        CU_ASSERT_FATAL(d != NULL);
        const qat_split_info *in = qat_dataset_info(d, QAT_SPLIT_TRAIN);
        CU_ASSERT_EQUAL(in->streaming, cap == 1);
        CU_ASSERT(in->x_rank == 3 && in->x_shape[0] == CC && in->x_shape[1] == HH && in->x_shape[2] == WW);
        int32_t idx[3] = {6, 0, 3};
        float x[3 * P];
        uint8_t raw[3 * P];
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TRAIN, idx, 3, x, NULL, NULL, NULL), QAT_OK);
        CU_ASSERT_EQUAL(qat_dataset_read_raw(d, QAT_SPLIT_TRAIN, idx, 3, raw), QAT_OK);
        int bad = 0;
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < CC; c++)
                for (int h = 0; h < HH; h++)
                    for (int w = 0; w < WW; w++) {
                        uint8_t want = hwc[idx[i] * P + (h * WW + w) * CC + c];
                        int at = i * P + (c * HH + h) * WW + w;
                        bad += x[at] != (float)want || raw[at] != want;
                    }
        CU_ASSERT_EQUAL(bad, 0);
        /* per-channel statistics over the channel axis, by hand */
        double mean[CC], sd[CC];
        CU_ASSERT_EQUAL(qat_dataset_channel_stats(d, QAT_SPLIT_TRAIN, 0, 255.0, mean, sd), QAT_OK);
        for (int c = 0; c < CC; c++) {
            double s = 0, q = 0;
            for (int i = 0; i < N * HH * WW; i++) s += hwc[i * CC + c] / 255.0;
            double m = s / (N * HH * WW);
            for (int i = 0; i < N * HH * WW; i++) q += (hwc[i * CC + c] / 255.0 - m) * (hwc[i * CC + c] / 255.0 - m);
            ASSERT_CLOSE(mean[c], m, 1e-12);
            ASSERT_CLOSE(sd[c], sqrt(q / (N * HH * WW)), 1e-12);
        }
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
}

static void test_channel_stats(void) {
    enum { N = 600, CC = 3, HW = 20 };
    static float x[N * CC * HW];
    qat_rng rng;
    qat_rng_seed(&rng, 8);
    for (int i = 0; i < N * CC * HW; i++) x[i] = 100.0f + (float)(i / HW % CC) + qat_rng_normal(&rng) * (1.0f + (float)(i / HW % CC));
    qat_array_split a = {.n = N, .x_dtype = QAT_DT_F32, .x_rank = 3, .x_shape = {CC, 4, 5}, .x = x};
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a, NULL, &a, NULL, &d), QAT_OK);
    for (int lim = 0; lim < 2; lim++) {
        int64_t n = lim ? 257 : N;
        double mean[CC], sd[CC];
        CU_ASSERT_EQUAL(qat_dataset_channel_stats(d, QAT_SPLIT_TEST, lim ? 257 : 0, 2.0, mean, sd), QAT_OK);
        for (int c = 0; c < CC; c++) {
            double s = 0, q = 0;
            for (int64_t i = 0; i < n; i++)
                for (int k = 0; k < HW; k++) s += x[(i * CC + c) * HW + k] / 2.0;
            double m = s / (double)(n * HW);
            for (int64_t i = 0; i < n; i++)
                for (int k = 0; k < HW; k++) q += pow(x[(i * CC + c) * HW + k] / 2.0 - m, 2);
            ASSERT_CLOSE(mean[c], m, 1e-9);
            ASSERT_CLOSE(sd[c], sqrt(q / (double)(n * HW)), 1e-9);
        }
        CU_ASSERT(sd[2] > 1.2 * sd[0]); /* the channels really differ */
    }
    /* a rank-1 sample is one channel; bad arguments are refused */
    qat_array_split b = {.n = N, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {CC * HW}, .x = x};
    qat_dataset *d1 = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &b, NULL, &b, NULL, &d1), QAT_OK);
    double m1, s1;
    CU_ASSERT_EQUAL(qat_dataset_channel_stats(d1, QAT_SPLIT_TRAIN, 0, 1.0, &m1, &s1), QAT_OK);
    ASSERT_CLOSE(m1, 101.0, 0.05);
    CU_ASSERT_EQUAL(qat_dataset_channel_stats(d1, QAT_SPLIT_TRAIN, 0, 0.0, &m1, &s1), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "divisor 0 (want > 0)"));
    qat_dataset_free(d1);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

static void test_threads(void) {
    enum { N = 5000, P = 300 };
    uint8_t *x = malloc(N * P);
    int32_t *y = malloc(N * sizeof *y), *idx = malloc(N * sizeof *idx);
    qat_rng rng;
    qat_rng_seed(&rng, 13);
    for (int i = 0; i < N * P; i++) x[i] = (uint8_t)qat_rng_below(&rng, 256);
    for (int i = 0; i < N; i++) y[i] = i % 10, idx[i] = (int32_t)qat_rng_below(&rng, N);
    qat_array_split a = {.n = N, .x_dtype = QAT_DT_U8, .x_rank = 3, .x_shape = {3, 10, 10}, .x = x,
                         .y_dtype = QAT_DT_I32, .y = y};
    float *out[2];
    double mean[2][3], sd[2][3];
    for (int t = 0; t < 2; t++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_pool *pool = qat_pool_new(t + 1, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
        qat_ctx_set_pool(ctx, pool);
        qat_dataset *d = NULL;
        CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a, NULL, &a, NULL, &d), QAT_OK);
        out[t] = malloc((size_t)N * P * sizeof(float));
        CU_ASSERT_EQUAL(qat_dataset_read(d, QAT_SPLIT_TRAIN, idx, N, out[t], NULL, NULL, NULL), QAT_OK);
        CU_ASSERT_EQUAL(qat_dataset_channel_stats(d, QAT_SPLIT_TRAIN, 0, 255, mean[t], sd[t]), QAT_OK);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
        qat_pool_free(pool);
    }
    CU_ASSERT(!memcmp(out[0], out[1], (size_t)N * P * sizeof(float)));
    CU_ASSERT(!memcmp(mean[0], mean[1], sizeof mean[0]) && !memcmp(sd[0], sd[1], sizeof sd[0]));
    CU_ASSERT_EQUAL(out[0][7 * P + 5], (float)x[idx[7] * P + 5]);
    free(out[0]), free(out[1]), free(x), free(y), free(idx);
}

/* ---- .npy files numpy wrote ---------------------------------------------------------------------- */

/* numpy writes the sets (np.save, and format.write_array for versions 2.0
 * and 3.0) and the bytes qat must read back (expect_*.bin). */
static const char numpy_script[] =
    "import sys, numpy as np\n"
    "from numpy.lib import format as F\n"
    "d = sys.argv[1]\n"
    "rng = np.random.default_rng(5)\n"
    "x = rng.integers(0, 256, (40, 3, 5, 5), dtype=np.uint8)\n"
    "y = rng.integers(0, 10, 40)\n"
    "np.save(d + '/a/train_x.npy', x); np.save(d + '/a/train_y.npy', y)\n"
    "with open(d + '/a/test_x.npy', 'wb') as f: F.write_array(f, x[:7], version=(2, 0))\n"
    "with open(d + '/a/test_y.npy', 'wb') as f: F.write_array(f, y[:7].astype(np.uint16), version=(3, 0))\n"
    "np.save(d + '/a/test_anomaly.npy', (y[:7] % 2).astype(np.uint8))\n"
    "x.tofile(d + '/expect_a_x.bin'); y.astype(np.int32).tofile(d + '/expect_a_y.bin')\n"
    "h = rng.standard_normal((9, 5, 6, 3)).astype(np.float32)\n"
    "t = rng.standard_normal((9, 2))\n"
    "for s in ('train', 'test'): np.save(d + '/b/%s_x.npy' % s, h); np.save(d + '/b/%s_y.npy' % s, t)\n"
    "np.ascontiguousarray(h.transpose(0, 3, 1, 2)).tofile(d + '/expect_b_x.bin')\n"
    "t.astype(np.float32).tofile(d + '/expect_b_t.bin')\n"
    "np.save(d + '/c/train_x.npy', np.asfortranarray(h[:, :, :, 0])); np.save(d + '/c/test_x.npy', h)\n"
    "np.save(d + '/e/train_x.npy', h.astype('>f4')); np.save(d + '/e/test_x.npy', h)\n";

static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

static void test_numpy_files(void) {
    const char *py = getenv("QAT_PYTHON");
    if (!py) QAT_TEST_SKIP("QAT_PYTHON is not set (ctest sets it): no numpy to write the files");
    char d[300], sub[400], script[400], cmd[1200];
    fresh_dir("numpy", d, sizeof d);
    const char *subs[4] = {"a", "b", "c", "e"};
    for (int i = 0; i < 4; i++) {
        snprintf(sub, sizeof sub, "%s/%s", d, subs[i]);
        CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    }
    snprintf(script, sizeof script, "%s/write.py", d);
    put_file(script, numpy_script, strlen(numpy_script));
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", py, script, d);
    int rc = system(cmd);
    if (rc != 0) printf("\n  %s failed: run scripts/setup-python.sh (numpy in .venv/)\n", cmd);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    qat_ctx *ctx = qat_ctx_new();
    size_t nx = 0, ny = 0;
    snprintf(sub, sizeof sub, "%s/expect_a_x.bin", d);
    uint8_t *ex = slurp(sub, &nx);
    snprintf(sub, sizeof sub, "%s/expect_a_y.bin", d);
    int32_t *ey = slurp(sub, &ny);
    CU_ASSERT_FATAL(ex && ey && nx == 40 * 75 && ny == 40 * 4);
    uint8_t an[7];
    for (int i = 0; i < 7; i++) an[i] = (uint8_t)(ey[i] % 2);
    uint8_t ey8[40];
    for (int i = 0; i < 40; i++) ey8[i] = (uint8_t)ey[i];
    snprintf(sub, sizeof sub, "%s/a", d);
    qat_dataset *da = open_ok(ctx, sub, NULL);
    if (da) {
        CU_ASSERT_EQUAL(qat_dataset_info(da, QAT_SPLIT_TRAIN)->y_dtype, QAT_DT_I64);
        CU_ASSERT_EQUAL(qat_dataset_info(da, QAT_SPLIT_TEST)->y_dtype, QAT_DT_U16);
        check_split(da, QAT_SPLIT_TRAIN, ex, ey8, NULL, 40, 75);
        check_split(da, QAT_SPLIT_TEST, ex, ey8, an, 7, 75);
    }
    qat_dataset_free(da);
    /* channels last, float targets from float64 */
    size_t nbx = 0, nbt = 0;
    snprintf(sub, sizeof sub, "%s/expect_b_x.bin", d);
    float *bx = slurp(sub, &nbx);
    snprintf(sub, sizeof sub, "%s/expect_b_t.bin", d);
    float *bt = slurp(sub, &nbt);
    CU_ASSERT_FATAL(bx && bt && nbx == 9 * 90 * 4 && nbt == 9 * 2 * 4);
    qat_dataset_options o = qat_dataset_defaults();
    o.channels_last = true;
    snprintf(sub, sizeof sub, "%s/b", d);
    qat_dataset *db = open_ok(ctx, sub, &o);
    if (db) {
        const qat_split_info *in = qat_dataset_info(db, QAT_SPLIT_TEST);
        CU_ASSERT(in->x_shape[0] == 3 && in->x_shape[1] == 5 && in->x_shape[2] == 6);
        CU_ASSERT_EQUAL(in->y_dtype, QAT_DT_F64);
        int32_t idx[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
        float x[9 * 90], t[18];
        CU_ASSERT_EQUAL(qat_dataset_read(db, QAT_SPLIT_TEST, idx, 9, x, NULL, t, NULL), QAT_OK);
        CU_ASSERT(!memcmp(x, bx, sizeof x));
        CU_ASSERT(!memcmp(t, bt, sizeof t));
    }
    qat_dataset_free(db);
    snprintf(sub, sizeof sub, "%s/c", d);
    refused(sub, "train_x.npy: the .npy array is in Fortran order", NULL);
    snprintf(sub, sizeof sub, "%s/e", d);
    refused(sub, "train_x.npy: .npy dtype '>f4' is big-endian", NULL);
    free(ex), free(ey), free(bx), free(bt);
    qat_ctx_free(ctx);
}

/* ---- MNIST three ways ---------------------------------------------------------------------------- */

static void test_mnist_three_ways(void) {
    const char *data = getenv("QAT_MNIST_DATA"), *conv = getenv("QAT_DATA_CONVERT");
    CU_ASSERT_PTR_NOT_NULL_FATAL(data); /* ctest sets it; scripts/test.sh fetches MNIST */
    if (!conv) conv = convert_beside; /* the program built beside this suite */
    char h5[300], npy[300], cmd[2600];
    path_of(h5, sizeof h5, "mnist.h5");
    path_of(npy, sizeof npy, "mnist-npy");
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>/dev/null && '%s' '%s' '%s' 2>/dev/null", conv, data, h5, conv, data, npy);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d[3] = {open_ok(ctx, data, NULL), open_ok(ctx, h5, NULL), open_ok(ctx, npy, NULL)};
    CU_ASSERT_FATAL(d[0] && d[1] && d[2]);
    qat_mnist ref;
    CU_ASSERT_EQUAL_FATAL(qat_mnist_load(ctx, data, "train", &ref), QAT_OK);
    for (int s = QAT_SPLIT_TRAIN; s <= QAT_SPLIT_TEST; s += 2) {
        const qat_split_info *in = qat_dataset_info(d[0], (qat_split)s);
        CU_ASSERT_EQUAL(in->n, s ? 10000 : 60000);
        CU_ASSERT(in->x_rank == 3 && in->x_shape[0] == 1 && in->x_shape[1] == 28 && in->x_shape[2] == 28);
        CU_ASSERT_EQUAL(in->label_max, 9);
        int32_t *idx = malloc((size_t)in->n * sizeof *idx), *lab[3];
        float *x[3];
        for (int64_t i = 0; i < in->n; i++) idx[i] = (int32_t)i;
        for (int k = 0; k < 3; k++) {
            const qat_split_info *ik = qat_dataset_info(d[k], (qat_split)s);
            CU_ASSERT(ik->n == in->n && ik->x_rank == 3 && !memcmp(ik->x_shape, in->x_shape, sizeof in->x_shape));
            CU_ASSERT_EQUAL(ik->label_max_row, in->label_max_row);
            x[k] = malloc((size_t)in->n * 784 * sizeof *x[k]);
            lab[k] = malloc((size_t)in->n * sizeof *lab[k]);
            CU_ASSERT_EQUAL(qat_dataset_read(d[k], (qat_split)s, idx, in->n, x[k], lab[k], NULL, NULL), QAT_OK);
        }
        for (int k = 1; k < 3; k++) {
            CU_ASSERT(!memcmp(x[0], x[k], (size_t)in->n * 784 * sizeof *x[0]));
            CU_ASSERT(!memcmp(lab[0], lab[k], (size_t)in->n * sizeof *lab[0]));
        }
        if (s == QAT_SPLIT_TRAIN) { /* and the same as qat_mnist_load's bytes */
            int bad = 0;
            for (int64_t i = 0; i < in->n * 784; i++) bad += x[0][i] != (float)ref.images[i];
            for (int64_t i = 0; i < in->n; i++) bad += lab[0][i] != ref.labels[i];
            CU_ASSERT_EQUAL(bad, 0);
        }
        for (int k = 0; k < 3; k++) free(x[k]), free(lab[k]);
        free(idx);
    }
    /* MNIST's statistics, the well-known constants */
    double mean, sd;
    CU_ASSERT_EQUAL(qat_dataset_channel_stats(d[1], QAT_SPLIT_TRAIN, 0, 255, &mean, &sd), QAT_OK);
    ASSERT_CLOSE(mean, QAT_MNIST_MEAN, 1e-4);
    ASSERT_CLOSE(sd, QAT_MNIST_STD, 1e-4);
    qat_mnist_free(&ref);
    for (int k = 0; k < 3; k++) qat_dataset_free(d[k]);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "dataset")) return 2;
    const char *slash = strrchr(argv[0], '/');
    snprintf(convert_beside, sizeof convert_beside, "%.*sqat_data_convert", slash ? (int)(slash - argv[0] + 1) : 0,
             argv[0]);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const qat_test_case cases[] = {
        {"formats: HDF5, .npy 1.0/2.0/3.0 and IDX read back the arrays written", test_formats},
        {"float x and targets, int8 and float64 x: HDF5, .npy and arrays", test_float_targets},
        {"h5py's bool (an enum): anomaly flags and 0/1 labels", test_h5py_bool},
        {"bad HDF5 sets: one line naming file, split, row and value", test_bad_hdf5},
        {"bad .npy files: every header fault refused by name", test_bad_npy},
        {"bad IDX sets", test_bad_idx},
        {"a FIFO for a data file: refused, not waited on", test_fifo_refused},
        {"bad options", test_bad_options},
        {"val carved from train: seeded, disjoint, ordered", test_val_carving},
        {"streamed splits: the same bits as in memory, memory within the cap", test_streaming},
        {"channels_last: [N, H, W, C] read as [C, H, W]", test_channels_last},
        {"channel statistics against a hand computation", test_channel_stats},
        {"reads and statistics: 1 and 2 threads give the same bits", test_threads},
        {".npy files numpy wrote: versions 1.0-3.0, channels last; Fortran and big-endian refused", test_numpy_files},
        {"MNIST from IDX, HDF5 and .npy: the same floats and labels", test_mnist_three_ways},
        {NULL, NULL},
    };
    int rc = qat_test_main("dataset", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
