/* Opening a data file for reading: only a regular file. fopen of a FIFO
 * blocks until a writer comes, and a device can be endless, so the file
 * is opened without blocking, checked with fstat, and only then handed to
 * stdio (the same test as model files and HDF5 files). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset_internal.h"

FILE *qat__fopen_regular(qat_ctx *ctx, const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (ctx) qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    bool ok = fstat(fd, &st) == 0;
    if (!ok || !S_ISREG(st.st_mode)) {
        if (ctx)
            qat_ctx_fail(ctx, QAT_ERR_IO, "%s: not a regular file (%s)", path,
                         !ok ? "cannot stat it" : S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not a file");
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK); /* a regular file's reads never block anyway */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        if (ctx) qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

bool qat__regular_file(qat_ctx *ctx, const char *path) {
    FILE *f = qat__fopen_regular(ctx, path);
    if (f) fclose(f);
    return f != NULL;
}
