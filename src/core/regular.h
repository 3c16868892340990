/* Opening a file that is read as input: only a regular file. A plain open
 * of a FIFO blocks until a writer comes, a directory reads as empty and a
 * device can be endless, so the file is opened without blocking, checked
 * with fstat, and only then read. The one test of every reader of files
 * (model files, HDF5 files, data files).
 * Shared with: src/data, src/io, src/layers */
#ifndef QAT_CORE_REGULAR_H
#define QAT_CORE_REGULAR_H

#include <stddef.h>
#include <stdint.h>

#include "qat/core.h"

/* path opened read-only, in blocking mode, when it is a regular file: its
 * descriptor in *fd (the caller closes it) and its size in *size (NULL:
 * not wanted). Otherwise *fd = -1 and why holds the reason, without the
 * path: "cannot open: ..." (QAT_ERR_IO) or "not a regular file (a FIFO)"
 * (QAT_ERR_FORMAT). */
qat_status qat__open_regular(const char *path, int *fd, int64_t *size, char *why, size_t len);

#endif
