/* Atomic file replacement for checkpoints and exported models: the target
 * path only ever holds a complete file, the old one or the new one.
 *
 * qat__replace_file writes the new bytes to a temporary file beside the
 * target, named
 *
 *     <dir>/.<name>.qat-tmp.<pid>.<8 hex digits>
 *
 * (<name> cut to its first 200 bytes), fsyncs it, renames it over the
 * target and syncs the directory. Details and reasons (docs/saving.md):
 *
 * - Stale temporaries. A save that is killed (SIGKILL, crash, power cut)
 *   leaves its temporary file behind. Before creating its own, a save
 *   removes the temporaries of the same target whose process is gone
 *   (kill(pid, 0) fails with ESRCH) and which no process holds a lock on
 *   (a save locks its temporary file while it writes it, which also
 *   guards a live save in another PID namespace). So however often saves
 *   are killed, at most one stale temporary per target exists at a time.
 *   The temporary of a live process is never removed.
 * - Mode. The file is created with mode 0666, so the umask applies as for
 *   any new file. When it replaces a regular file, it takes that file's
 *   permission bits (rwx for user, group, others; not set-id or sticky
 *   bits). Its owner is the user who saves.
 * - Symbolic links. A symlink at the target is replaced by a regular file
 *   (rename semantics); the file it pointed to is left untouched. Writing
 *   through the link instead would let a link planted at the target path
 *   redirect a save to any file the saving user can write.
 * - Errors. A failed write (disk full, quota, file size limit, I/O error)
 *   removes the temporary file, leaves the target as it was, and fails
 *   with QAT_ERR_IO and "<path>: cannot write: <strerror>".
 * Shared with: src/data
 */
#ifndef QAT_IO_ATOMIC_H
#define QAT_IO_ATOMIC_H

#include <stddef.h>

#include "qat/io.h"

/* Marks a temporary file name: ".<name>" QAT__TEMP_MARK "<pid>.<hex8>". */
#define QAT__TEMP_MARK ".qat-tmp."

/* Replaces the file at path with the size bytes at data, atomically. */
qat_status qat__replace_file(qat_ctx *ctx, const char *path, const void *data, size_t size);

/* Stages the bytes for path in set (qat/io.h: written to the temporary
 * beside path and flushed, renamed by qat_save_set_commit), errors on
 * ctx; with set NULL, qat__replace_file. The savers' staging forms
 * (qat_qmodel_stage, qat_onnx_stage, qat_codegen_stage) go through it. */
qat_status qat__save_set_add(qat_ctx *ctx, qat_save_set *set, const char *path, const void *data, size_t size);

#endif
