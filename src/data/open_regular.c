/* A data file opened for reading as a stdio stream: a regular file only,
 * refused without blocking otherwise (core/regular.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/regular.h"
#include "data/dataset_internal.h"

FILE *qat__fopen_regular(qat_ctx *ctx, const char *path) {
    char why[160];
    int fd;
    qat_status st = qat__open_regular(path, &fd, NULL, why, sizeof why);
    FILE *f = st == QAT_OK ? fdopen(fd, "rb") : NULL;
    if (st == QAT_OK && !f) {
        snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
        close(fd);
        st = QAT_ERR_IO;
    }
    if (!f && ctx) qat_ctx_fail(ctx, st, "%s: %s", path, why);
    return f;
}
