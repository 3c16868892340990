/* qat__open_regular: core/regular.h. */
#define _POSIX_C_SOURCE 200809L
#include "core/regular.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(const struct stat *st) {
    return S_ISDIR(st->st_mode) ? "a directory" : S_ISFIFO(st->st_mode) ? "a FIFO"
           : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device" : S_ISSOCK(st->st_mode) ? "a socket"
                                                                                               : "not a file";
}

qat_status qat__open_regular(const char *path, int *fd, int64_t *size, char *why, size_t len) {
    *fd = -1;
    int d = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (d < 0) {
        snprintf(why, len, "cannot open: %s", strerror(errno));
        return QAT_ERR_IO;
    }
    struct stat st;
    if (fstat(d, &st) != 0) {
        snprintf(why, len, "cannot stat: %s", strerror(errno));
        close(d);
        return QAT_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "not a regular file (%s)", kind_of(&st));
        close(d);
        return QAT_ERR_FORMAT;
    }
    int flags = fcntl(d, F_GETFL);
    if (flags >= 0) fcntl(d, F_SETFL, flags & ~O_NONBLOCK); /* a regular file's reads never block anyway */
    if (size) *size = (int64_t)st.st_size;
    *fd = d;
    return QAT_OK;
}
