/* IDX and MNIST loading: good files (gzip and plain), every kind of bad
 * file, and the genuine MNIST files (QAT_MNIST_DATA, set by ctest). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "qat/data.h"
#include "test_util.h"

static char dir[256];

static void put(const char *name, const uint8_t *bytes, size_t n, bool gz) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, bytes, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

/* An IDX header for ubyte data with the given dims, followed by payload. */
static size_t idx_bytes(uint8_t *buf, int ndim, const uint32_t *dims, size_t payload, uint8_t fill) {
    size_t k = 0;
    buf[k++] = 0, buf[k++] = 0, buf[k++] = 0x08, buf[k++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (uint8_t)(dims[i] >> 24), buf[k++] = (uint8_t)(dims[i] >> 16);
        buf[k++] = (uint8_t)(dims[i] >> 8), buf[k++] = (uint8_t)dims[i];
    }
    for (size_t i = 0; i < payload; i++) buf[k++] = (uint8_t)(fill + i % 7);
    return k;
}

static qat_status read_named(qat_ctx *ctx, const char *name, qat_idx *idx) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return qat_idx_read(ctx, path, idx);
}

static void expect_error(const char *name, qat_status want, const char *text) {
    qat_ctx *ctx = qat_ctx_new();
    qat_idx idx;
    qat_status st = read_named(ctx, name, &idx);
    if (st != want || !strstr(qat_ctx_error(ctx), text))
        printf("\n  %s: status %d, \"%s\"\n", name, st, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), text));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), name)); /* names the file */
    CU_ASSERT_PTR_NULL(idx.data);
    qat_ctx_free(ctx);
}

static void test_good_files(void) {
    uint8_t buf[256];
    uint32_t d3[3] = {2, 3, 4};
    size_t n = idx_bytes(buf, 3, d3, 24, 1);
    put("good.gz", buf, n, true);
    put("good", buf, n, false);
    for (int gz = 0; gz < 2; gz++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_idx idx;
        CU_ASSERT_EQUAL(read_named(ctx, gz ? "good.gz" : "good", &idx), QAT_OK);
        CU_ASSERT_EQUAL(idx.ndim, 3);
        CU_ASSERT_EQUAL(idx.dims[2], 4);
        CU_ASSERT_EQUAL(idx.size, 24);
        CU_ASSERT_EQUAL(idx.data[8], 1 + 8 % 7);
        qat_idx_free(&idx);
        qat_idx_free(NULL);
        qat_ctx_free(ctx);
    }
}

static void test_bad_files(void) {
    uint8_t buf[256];
    uint32_t d2[2] = {3, 5};
    size_t n = idx_bytes(buf, 2, d2, 15, 0);
    put("truncated.gz", buf, n - 4, true);
    expect_error("truncated.gz", QAT_ERR_FORMAT, "truncated: the header promises 15 bytes of data, the file has 11");
    put("trailing", buf, n, false);
    uint8_t more[300];
    memcpy(more, buf, n);
    more[n] = 9;
    put("trailing", more, n + 1, false);
    expect_error("trailing", QAT_ERR_FORMAT, "trailing bytes");
    uint8_t magic[8] = {0x1f, 0x00, 0x08, 0x01, 0, 0, 0, 1};
    put("magic", magic, 8, false);
    expect_error("magic", QAT_ERR_FORMAT, "bad magic number");
    uint8_t type[8] = {0, 0, 0x0d, 0x01, 0, 0, 0, 1};
    put("float", type, 8, false);
    expect_error("float", QAT_ERR_UNSUPPORTED, "type code 0x0d");
    uint8_t zero[8] = {0, 0, 0x08, 0x01, 0, 0, 0, 0};
    put("zerodim", zero, 8, false);
    expect_error("zerodim", QAT_ERR_FORMAT, "implausible dimension 0");
    put("short", buf, 2, false);
    expect_error("short", QAT_ERR_FORMAT, "truncated header");
    /* a gzip file whose compressed body is damaged */
    char path[512];
    snprintf(path, sizeof path, "%s/good.gz", dir);
    FILE *f = fopen(path, "rb");
    uint8_t gz[512];
    size_t gn = fread(gz, 1, sizeof gz, f);
    fclose(f);
    for (size_t i = 12; i < gn - 8; i++) gz[i] ^= 0x5a;
    put("damaged.gz", gz, gn, false);
    qat_ctx *ctx = qat_ctx_new();
    qat_idx idx;
    CU_ASSERT_NOT_EQUAL(read_named(ctx, "damaged.gz", &idx), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "damaged.gz"));
    qat_ctx_free(ctx);
    expect_error("missing.gz", QAT_ERR_IO, "cannot open");
}

static void test_mnist_mismatch(void) {
    uint8_t buf[512];
    uint32_t di[3] = {3, 2, 2}, dl[1] = {4};
    put("train-images-idx3-ubyte.gz", buf, idx_bytes(buf, 3, di, 12, 0), true);
    put("train-labels-idx1-ubyte.gz", buf, idx_bytes(buf, 1, dl, 4, 0), true);
    qat_ctx *ctx = qat_ctx_new();
    qat_mnist d;
    CU_ASSERT_EQUAL(qat_mnist_load(ctx, dir, "train", &d), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "has 3 images but"));
    qat_ctx_clear_error(ctx);
    uint32_t dl3[1] = {3};
    size_t n = idx_bytes(buf, 1, dl3, 3, 0);
    buf[n - 1] = 10;
    put("train-labels-idx1-ubyte.gz", buf, n, true);
    CU_ASSERT_EQUAL(qat_mnist_load(ctx, dir, "train", &d), QAT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "label 10 of sample 2 is not a digit"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_mnist_load(ctx, "/nonexistent/mnist", "train", &d), QAT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "fetch-mnist"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_mnist_load(ctx, dir, "validation", &d), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_real_mnist(void) {
    const char *data = getenv("QAT_MNIST_DATA");
    CU_ASSERT_PTR_NOT_NULL_FATAL(data); /* ctest sets it; scripts/test.sh fetches the files */
    qat_ctx *ctx = qat_ctx_new();
    qat_mnist tr, te;
    qat_status st = qat_mnist_load(ctx, data, "train", &tr);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_mnist_load(ctx, data, "test", &te), QAT_OK);
    CU_ASSERT_EQUAL(tr.n, 60000);
    CU_ASSERT_EQUAL(te.n, 10000);
    CU_ASSERT_EQUAL(tr.rows, 28);
    CU_ASSERT_EQUAL(tr.labels[0], 5); /* the well-known first labels */
    CU_ASSERT_EQUAL(te.labels[0], 7);
    int32_t idx[2] = {0, 1}, y[2];
    float x[2 * 784];
    qat_mnist_batch(&tr, idx, 2, x, y);
    CU_ASSERT_EQUAL(y[1], 0);
    ASSERT_CLOSE(x[0], -QAT_MNIST_MEAN / QAT_MNIST_STD, 1e-6); /* a black corner pixel */
    double mean = 0;
    for (int i = 0; i < 1568; i++) mean += x[i];
    CU_ASSERT(mean / 1568 > -0.2 && mean / 1568 < 0.2); /* roughly centred */
    int32_t perm[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, seen = 0;
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    qat_shuffle(perm, 10, &rng);
    for (int i = 0; i < 10; i++) seen |= 1 << perm[i];
    CU_ASSERT_EQUAL(seen, 1023); /* a permutation */
    qat_mnist_free(&tr);
    qat_mnist_free(&te);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "data")) return 2;
    const qat_test_case cases[] = {
        {"idx: gzip and plain files read the same", test_good_files},
        {"idx: bad files get errors naming file and fault", test_bad_files},
        {"mnist: mismatched or invalid files", test_mnist_mismatch},
        {"mnist: the genuine files", test_real_mnist},
        {NULL, NULL},
    };
    int rc = qat_test_main("data", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
