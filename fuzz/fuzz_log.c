/* libFuzzer target: any bytes as a training metrics log (train --log) for
 * qat plot's reader, metrics_log_read. A successful read must hold the
 * layout it promises: every point named, every row of n_cols cells. */
#include "fuzz_file.h"
#include "metrics_log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("log");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    metrics_log_data d;
    char err[600] = "";
    if (metrics_log_read(path, &d, err, sizeof err) == 0) {
        if (d.n_cols != C_FIXED + 3 * d.n_points || d.file_cols > d.n_cols || d.n_rows < 1) abort();
        volatile double sum = 0; /* every cell and name: ASan sees a buffer shorter than promised */
        for (int r = 0; r < d.n_rows; r++)
            for (int c = 0; c < d.n_cols; c++) sum += *metrics_log_cell(&d, r, c);
        for (int p = 0; p < d.n_points; p++) sum += (double)strlen(d.names[p]);
        (void)sum;
    } else if (!err[0]) {
        abort(); /* a failure without a message */
    }
    metrics_log_free(&d);
    return 0;
}
