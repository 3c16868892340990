/* IDX and MNIST loading: good files (gzip and plain), every kind of bad
 * file, hostile headers and gzip streams, and the genuine MNIST files
 * (QAT_MNIST_DATA, set by ctest). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "qat/data.h"
#include "test_util.h"

static char dir[256];

/* tests/CMakeLists.txt links this suite with -Wl,--wrap=malloc,--wrap=realloc,
 * so every malloc and realloc of the library (a static archive) comes here
 * first: the suite can then see the largest block the reader asked for,
 * which no result or message shows. Requests over REFUSE fail as on a
 * machine without the memory, so a reader that trusts a header never
 * really gets gigabytes here. */
#define REFUSE ((size_t)256 << 20)
void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
static size_t biggest_request;
void *__wrap_malloc(size_t n) {
    if (n > biggest_request) biggest_request = n;
    return n > REFUSE ? NULL : __real_malloc(n);
}
void *__wrap_realloc(void *p, size_t n) {
    if (n > biggest_request) biggest_request = n;
    return n > REFUSE ? NULL : __real_realloc(p, n);
}

/* bytes as one gzip member, in memory (deflate with the gzip wrapper) */
static size_t gzip_mem(const uint8_t *bytes, size_t n, uint8_t *out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    z.next_in = (Bytef *)bytes, z.avail_in = (uInt)n;
    z.next_out = out, z.avail_out = (uInt)cap;
    int ret = deflate(&z, Z_FINISH);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    return ret == Z_STREAM_END ? len : 0;
}

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

/* The old reader multiplied the running size by a dimension it had just
 * refused: 2^28 · 64 · (2^32 - 1) overflowed int64 (UBSan stops there).
 * The product is checked before each multiplication now. */
static void test_huge_dimensions(void) {
    uint8_t buf[64];
    uint32_t d3[3] = {1u << 28, 64, 0xffffffffu};
    put("overflow", buf, idx_bytes(buf, 3, d3, 0, 0), false);
    expect_error("overflow", QAT_ERR_FORMAT, "dimension 64 at axis 1 takes the payload past 4294967296 bytes");
    uint32_t d4[4] = {1u << 28, 1u << 28, 1u << 28, 1u << 28};
    put("overflow4", buf, idx_bytes(buf, 4, d4, 0, 0), false);
    expect_error("overflow4", QAT_ERR_FORMAT, "dimension 268435456 at axis 1 takes the payload past");
    uint32_t big[1] = {(1u << 28) + 1};
    put("bigdim", buf, idx_bytes(buf, 1, big, 0, 0), false);
    expect_error("bigdim", QAT_ERR_FORMAT, "implausible dimension 268435457 at axis 0");
}

/* A header that promises 2 GiB (within the limits) over a file that holds
 * almost nothing: the reader must fail with the truncation, having asked
 * for memory in proportion to what arrived, not for the 2 GiB (the old
 * reader malloc'd the promise before reading a byte). */
static void test_huge_promise(void) {
    uint8_t buf[256], gz[512];
    uint32_t d3[3] = {1u << 14, 1u << 14, 8}; /* 2^31 bytes */
    size_t n = idx_bytes(buf, 3, d3, 0, 0);
    CU_ASSERT_EQUAL(n, 16);
    put("promise16", buf, n, false); /* the header alone: 16 bytes */
    n = idx_bytes(buf, 3, d3, 100, 3);
    put("promise.gz", gz, gzip_mem(buf, n, gz, sizeof gz), false);
    put("promise", buf, n, false);
    biggest_request = 0;
    expect_error("promise16", QAT_ERR_FORMAT, "truncated: the header promises 2147483648 bytes of data, the file has 0");
    expect_error("promise.gz", QAT_ERR_FORMAT, "truncated: the header promises 2147483648 bytes of data, the file has 100");
    expect_error("promise", QAT_ERR_FORMAT, "the file has 100");
    if (biggest_request > ((size_t)4 << 20)) printf("\n  largest request: %zu bytes\n", biggest_request);
    CU_ASSERT(biggest_request <= ((size_t)4 << 20));
}

/* A payload of several MiB (the buffer doubles a few times on the way),
 * gzip, plain, and through a pipe (no seeking back after the magic is
 * sniffed). */
static void test_large_and_piped(void) {
    uint32_t d3[3] = {3, 1000, 1049}; /* 3 147 000 bytes: not a power of two */
    size_t cap = 3200000, gcap = 3300000;
    uint8_t *buf = malloc(cap), *gz = malloc(gcap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
    size_t n = idx_bytes(buf, 3, d3, 3147000, 5);
    size_t gn = gzip_mem(buf, n, gz, gcap);
    CU_ASSERT_FATAL(gn > 0);
    put("large", buf, n, false);
    put("large.gz", gz, gn, false);
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    for (int kind = 0; kind < 4; kind++) { /* plain, gzip, pipe of plain, pipe of gzip */
        pid_t child = -1;
        if (kind >= 2) {
            child = fork();
            if (child == 0) { /* the writer: the whole file into the pipe */
                FILE *f = fopen(fifo, "wb");
                size_t w = f ? fwrite(kind == 2 ? buf : gz, 1, kind == 2 ? n : gn, f) : 0;
                _exit(f && fclose(f) == 0 && w == (kind == 2 ? n : gn) ? 0 : 1);
            }
        }
        qat_ctx *ctx = qat_ctx_new();
        qat_idx idx;
        qat_status st = kind >= 2 ? qat_idx_read(ctx, fifo, &idx) : read_named(ctx, kind ? "large.gz" : "large", &idx);
        if (st) printf("\n  kind %d: %s\n", kind, qat_ctx_error(ctx));
        CU_ASSERT_EQUAL(st, QAT_OK);
        CU_ASSERT_EQUAL(idx.size, 3147000);
        CU_ASSERT(idx.data && memcmp(idx.data, buf + 16, 3147000) == 0);
        qat_idx_free(&idx);
        qat_ctx_free(ctx);
        if (child > 0) {
            int ws = 0;
            CU_ASSERT_EQUAL(waitpid(child, &ws, 0), child);
            CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        }
    }
    free(buf);
    free(gz);
}

/* gzip members: several in a row are one file (gzip says so); anything
 * else after the last one is an error (gzread ignored it). */
static void test_gzip_members(void) {
    uint8_t buf[256], gz[1024], more[1024];
    uint32_t d2[2] = {4, 6};
    size_t n = idx_bytes(buf, 2, d2, 24, 2);
    size_t g1 = gzip_mem(buf, 10, gz, sizeof gz); /* the first 10 bytes ... */
    size_t g2 = gzip_mem(buf + 10, n - 10, gz + g1, sizeof gz - g1); /* ... then the rest */
    size_t g3 = gzip_mem(buf, 0, gz + g1 + g2, sizeof gz - g1 - g2); /* and an empty member */
    CU_ASSERT_FATAL(g1 && g2 && g3);
    put("members.gz", gz, g1 + g2 + g3, false);
    qat_ctx *ctx = qat_ctx_new();
    qat_idx idx;
    CU_ASSERT_EQUAL(read_named(ctx, "members.gz", &idx), QAT_OK);
    CU_ASSERT_EQUAL(idx.size, 24);
    CU_ASSERT(idx.data && memcmp(idx.data, buf + 12, 24) == 0);
    qat_idx_free(&idx);
    qat_ctx_free(ctx);

    size_t gn = gzip_mem(buf, n, gz, sizeof gz);
    const char *tails[] = {"garbage", "\x1f", "\x1f\x8bgarbage", "\0\0\0\0"};
    const char *want[] = {"trailing bytes after the gzip stream", "trailing bytes after the gzip stream",
                          "damaged gzip stream", "trailing bytes after the gzip stream"};
    size_t tlen[] = {7, 1, 9, 4}; /* the third: a gzip magic, then no gzip */
    for (int t = 0; t < 4; t++) {
        memcpy(more, gz, gn);
        memcpy(more + gn, tails[t], tlen[t]);
        char name[32];
        snprintf(name, sizeof name, "tail%d.gz", t);
        put(name, more, gn + tlen[t], false);
        expect_error(name, QAT_ERR_FORMAT, want[t]);
    }
    /* a tail far beyond the read buffer is still seen */
    memcpy(more, gz, gn);
    put("junk.gz", more, gn, false);
    char path[512];
    snprintf(path, sizeof path, "%s/junk.gz", dir);
    FILE *f = fopen(path, "ab");
    for (int i = 0; i < 200000; i++) fputc('x', f);
    fclose(f);
    expect_error("junk.gz", QAT_ERR_FORMAT, "trailing bytes after the gzip stream");

    /* cut inside the compressed data, and inside the CRC-32 trailer */
    put("cut.gz", gz, gn / 2, false);
    expect_error("cut.gz", QAT_ERR_FORMAT, "truncated gzip stream");
    put("cut-trailer.gz", gz, gn - 3, false);
    expect_error("cut-trailer.gz", QAT_ERR_FORMAT, "truncated gzip stream");
    put("magic-only.gz", gz, 2, false);
    expect_error("magic-only.gz", QAT_ERR_FORMAT, "truncated gzip stream");
    memcpy(more, gz, gn);
    more[gn - 6] ^= 1; /* the CRC-32 */
    put("crc.gz", more, gn, false);
    expect_error("crc.gz", QAT_ERR_FORMAT, "damaged gzip stream: incorrect data check");
}

/* Open and read failures carry the system's reason. */
static void test_os_errors(void) {
    char want[256];
    snprintf(want, sizeof want, "missing.gz: cannot open: %s", strerror(ENOENT));
    expect_error("missing.gz", QAT_ERR_IO, want);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    snprintf(want, sizeof want, "adir: read error: %s", strerror(EISDIR));
    expect_error("adir", QAT_ERR_IO, want);
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
        {"idx: dimensions are checked before they are multiplied", test_huge_dimensions},
        {"idx: a header's promise costs no memory until the data arrives", test_huge_promise},
        {"idx: several-MiB files, gzip and plain, from a file and a pipe", test_large_and_piped},
        {"idx: gzip members in a row are read, trailing bytes and cut streams refused", test_gzip_members},
        {"idx: open and read errors give the system's reason", test_os_errors},
        {"mnist: mismatched or invalid files", test_mnist_mismatch},
        {"mnist: the genuine files", test_real_mnist},
        {NULL, NULL},
    };
    int rc = qat_test_main("data", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
