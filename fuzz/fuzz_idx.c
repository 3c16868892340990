/* libFuzzer target: any bytes as an IDX file (plain or gzip) for
 * qat_idx_read. A successful read must hold exactly the promised bytes. */
#include "fuzz_file.h"
#include "qat/data.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("idx");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    qat_ctx *ctx = qat_ctx_new();
    if (!ctx) return 0;
    qat_idx idx;
    if (qat_idx_read(ctx, path, &idx) == QAT_OK) {
        int64_t n = 1;
        for (int i = 0; i < idx.ndim; i++) n *= idx.dims[i];
        if (idx.ndim < 1 || idx.ndim > 4 || n != idx.size || idx.size > QAT_IDX_MAX_BYTES) abort();
        /* touch both ends of the payload: ASan sees a buffer shorter than size */
        volatile uint8_t first = idx.data[0], last = idx.data[idx.size - 1];
        (void)first, (void)last;
    } else if (!qat_ctx_error(ctx)[0]) {
        abort(); /* a failure without a message breaks the library's contract */
    }
    qat_idx_free(&idx);
    qat_ctx_free(ctx);
    return 0;
}
