/* Shared by the fuzz targets: the loaders take a path, so each input is
 * written to one temporary file per process, named once (in memory-backed
 * /dev/shm when it exists, else $TMPDIR or /tmp) and rewritten for every
 * input. The file is removed at exit. Harness state may be static: it is
 * not the library's. */
#ifndef QAT_FUZZ_FILE_H
#define QAT_FUZZ_FILE_H

#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_path[512];

static void fuzz_file_remove(void) {
    if (fuzz_path[0]) unlink(fuzz_path);
}

/* Picks the path: <dir>/qat-fuzz-<tag>-<pid> (several fuzzing processes
 * may run at once, -jobs or -fork). */
static void fuzz_file_init(const char *tag) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    snprintf(fuzz_path, sizeof fuzz_path, "%s/qat-fuzz-%s-%ld", dir, tag, (long)getpid());
    atexit(fuzz_file_remove);
}

/* The input as the file's whole content. A harness that cannot write its
 * file tests nothing: stop loudly rather than report clean runs. */
static const char *fuzz_file_write(const uint8_t *data, size_t size) {
    FILE *f = fopen(fuzz_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(fuzz_path);
        abort();
    }
    return fuzz_path;
}

#endif
