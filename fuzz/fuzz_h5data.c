/* libFuzzer target: any bytes as an HDF5 data set for qat_dataset_open,
 * opened twice (the defaults, in memory; then a 4 KiB memory cap, which
 * streams what does not fit, with val carved, channels last and
 * non-finite rows skipped), and every set that opens is read. */
#include "fuzz_file.h"

#include "fuzz_dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_init("h5data");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_write(data, size);
    fuzz_open_both(path, 4096);
    return 0;
}
