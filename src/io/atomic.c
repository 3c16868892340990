/* Temporary file, fsync, rename: the target path only ever holds a
 * complete file (the old one or the new one). */
#define _POSIX_C_SOURCE 200809L
#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

qat_status qat__temp_beside(qat_ctx *ctx, const char *path, char *tmp, size_t len) {
    if ((size_t)snprintf(tmp, len, "%s.tmp-XXXXXX", path) >= len)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
    close(fd);
    return QAT_OK;
}

static int sync_path(const char *p, int flags) {
    int fd = open(p, flags);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

qat_status qat__commit_file(qat_ctx *ctx, const char *tmp, const char *path) {
    if (sync_path(tmp, O_RDONLY) != 0) {
        qat__abandon_file(tmp);
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot flush to disk: %s", path, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        qat__abandon_file(tmp);
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot replace: %s", path, strerror(e));
    }
    /* make the rename itself durable */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    sync_path(dir, O_RDONLY | O_DIRECTORY);
    return QAT_OK;
}

void qat__abandon_file(const char *tmp) { unlink(tmp); }
