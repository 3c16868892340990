/* libFuzzer target: the .npy reader, inside a data-set directory. The
 * first byte picks which file of a valid set the rest replaces
 * (train_x.npy, train_y.npy, test_x.npy, test_y.npy, test_anomaly.npy),
 * so the header parser, the payload checks and the checks between files
 * (rows, shapes, dtypes, labels, flags, NaN) all meet fuzzed bytes. The
 * file's header is also read alone (qat__npy_header_read): a header that
 * passes must promise exactly the file's payload. */
#include "fuzz_file.h"

#include "internals.h"
#include "fuzz_dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_FILES = 5 };
static const char *const names[N_FILES] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy",
                                           "test_anomaly.npy"};
static uint8_t valid[N_FILES][256];
static size_t valid_len[N_FILES];
static char paths[N_FILES][600];

/* a version 1.0 file: the dict padded to 64 bytes, then the payload */
static size_t npy(uint8_t *out, const char *descr, const char *shape, const void *payload, size_t bytes) {
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    int pad = (64 - (10 + len + 1) % 64) % 64, hlen = len + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)hlen, out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)len);
    memset(out + 10 + len, ' ', (size_t)pad);
    out[10 + len + pad] = '\n';
    memcpy(out + 10 + hlen, payload, bytes);
    return (size_t)(10 + hlen) + bytes;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = fuzz_dir_init("npy");
    uint8_t x[6 * 12], y[6] = {0, 1, 2, 1, 0, 3}, a[4] = {0, 1, 1, 0};
    int64_t y8[4] = {3, 2, 1, 0};
    for (int i = 0; i < 72; i++) x[i] = (uint8_t)(i * 37);
    valid_len[0] = npy(valid[0], "|u1", "(6, 2, 2, 3)", x, 72);
    valid_len[1] = npy(valid[1], "|u1", "(6,)", y, 6);
    valid_len[2] = npy(valid[2], "|u1", "(4, 2, 2, 3)", x, 48);
    valid_len[3] = npy(valid[3], "<i8", "(4,)", y8, 32);
    valid_len[4] = npy(valid[4], "|u1", "(4,)", a, 4);
    for (int i = 0; i < N_FILES; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
        fuzz_put(paths[i], valid[i], valid_len[i]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % N_FILES;
    fuzz_put(paths[which], data + 1, size - 1);
    qat_ctx *ctx = qat_ctx_new();
    qat__npy_header h;
    if (ctx && qat__npy_header_read(ctx, paths[which], &h) == QAT_OK) {
        /* the header's promise is exactly the file */
        if (h.data_offset + h.count * (int64_t)qat_dtype_size(h.dtype) != (int64_t)(size - 1)) abort();
        void *buf = malloc((size_t)(h.count * (int64_t)qat_dtype_size(h.dtype)) + 1);
        if (!buf || qat__npy_payload_read(ctx, paths[which], &h, buf) != QAT_OK) abort();
        free(buf);
    } else if (ctx && !qat_ctx_error(ctx)[0]) {
        abort();
    }
    qat_ctx_free(ctx);
    fuzz_open_both(fuzz_dir, 256);
    fuzz_put(paths[which], valid[which], valid_len[which]);
    return 0;
}
