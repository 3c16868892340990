/* Atomic file replacement for checkpoints: write a temporary file beside
 * the target, then qat__commit_file flushes it to disk and renames it over
 * the target; qat__abandon_file removes it. */
#ifndef QAT_IO_ATOMIC_H
#define QAT_IO_ATOMIC_H

#include <stddef.h>

#include "qat/autograd.h"

/* Fills tmp with a fresh, unique name next to path (and creates it empty). */
qat_status qat__temp_beside(qat_ctx *ctx, const char *path, char *tmp, size_t len);
qat_status qat__commit_file(qat_ctx *ctx, const char *tmp, const char *path);
void qat__abandon_file(const char *tmp);

#endif
