/* Atomic file replacement: temporary file beside the target, write, fsync,
 * rename, directory sync; stale temporaries of dead saves are removed.
 * The rules and their reasons are in atomic.h and docs/saving.md. */
#define _POSIX_C_SOURCE 200809L
#include "atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A name longer than this is cut in temporary names, so that the
 * temporary's name (name + 29 bytes) stays under NAME_MAX (255). Two
 * targets that share their first 200 bytes then share temporary names'
 * prefix: harmless, since only temporaries of dead processes are removed. */
#define NAME_KEEP 200

/* The target path, split for the temporary file and the directory. */
typedef struct {
    char dir[4096];   /* for opendir and the directory sync: "." when path has no '/' */
    char head[4096];  /* path up to and including its last '/' ("" when none) */
    char prefix[256]; /* ".<name>.qat-tmp." */
} target;

static qat_status split_target(qat_ctx *ctx, const char *path, target *t) {
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t head = (size_t)(name - path);
    if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: not a file name", path);
    if (head >= sizeof t->head) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: path too long", path);
    memcpy(t->head, path, head);
    t->head[head] = '\0';
    if (!slash) snprintf(t->dir, sizeof t->dir, ".");
    else if (slash == path) snprintf(t->dir, sizeof t->dir, "/");
    else snprintf(t->dir, sizeof t->dir, "%.*s", (int)(slash - path), path);
    snprintf(t->prefix, sizeof t->prefix, ".%.*s" QAT__TEMP_MARK, NAME_KEEP, name);
    return QAT_OK;
}

/* The pid in a temporary file name of this target: "<prefix><pid>.<hex8>"
 * exactly, nothing looser, so that no other file can ever match; 0 if
 * the name is not one. */
static pid_t temp_pid(const char *name, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n)) return 0;
    const char *p = name + n;
    long long pid = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) pid = pid * 10 + (*p - '0');
    if (digits == 0 || pid < 1 || pid > INT32_MAX || *p++ != '.') return 0;
    for (int i = 0; i < 8; i++, p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return *p ? 0 : (pid_t)pid;
}

/* A temporary file that may be removed: a regular file (not a link, a
 * directory or a FIFO that happens to carry the name) that no process
 * holds a lock on. Where locks do not work (F_GETLK fails, e.g. NFS
 * without a lock manager), the caller's pid test alone decides. */
static bool is_abandoned(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false; /* never open a device */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    bool locked = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return regular && !locked;
}

/* Removes the temporary files that saves of this target left when their
 * process died. kill(pid, 0) failing with ESRCH says the process is gone;
 * EPERM says it lives (under another user), so its file stays. Our own
 * pid is skipped: a live save of this process. Best effort: a directory
 * that cannot be listed does not stop the save. It costs one directory
 * listing per save, little beside the save itself. */
static void remove_stale_temps(const target *t) {
    DIR *d = opendir(t->dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = temp_pid(e->d_name, t->prefix);
        if (pid == 0 || pid == getpid()) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        char p[sizeof t->head + sizeof e->d_name];
        snprintf(p, sizeof p, "%s%s", t->head, e->d_name);
        if (is_abandoned(p)) unlink(p);
    }
    closedir(d);
}

/* Creates the temporary file, mode 0666 so that the umask applies (as for
 * any new file; mkstemp would force 0600). O_EXCL makes it ours alone;
 * the random part only avoids a clash with a stale file of a reused pid. */
static int create_temp(const target *t, char *tmp, size_t len) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t x = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ ((uint64_t)getpid() << 40);
    for (int attempt = 0; attempt < 100; attempt++) {
        x += 0x9E3779B97F4A7C15u; /* splitmix64 */
        uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        if ((size_t)snprintf(tmp, len, "%s%s%ld.%08x", t->head, t->prefix, (long)getpid(),
                             (unsigned)((z ^ (z >> 31)) >> 32)) >= len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1; /* errno: EEXIST */
}

/* Holds a write lock on the temporary file while it is written, so that a
 * save in another PID namespace (where our pid means nothing) leaves it
 * alone. Best effort: the pid rule still protects it where locks fail. */
static void lock_temp(int fd) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    (void)fcntl(fd, F_SETLK, &fl);
}

/* The permission bits the new file takes: those of the regular file it
 * replaces, or -1 (a new file, or a symlink that will be replaced: keep
 * what 0666 & ~umask gave). Set-id and sticky bits are not carried over. */
static int mode_to_keep(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int)(st.st_mode & 0777) : -1;
}

/* write() until done: it may write less than asked (a signal, a size
 * limit reached part way), and is retried after EINTR. */
static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n < (1u << 30) ? n : (1u << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) { /* a regular file never does this; do not spin */
            errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* Writes, sets the mode, flushes to disk and closes; -1 with errno set on
 * the first failure (fd is closed either way). The mode is set before the
 * fsync so that it is as durable as the contents. */
static int fill_temp(int fd, const void *data, size_t size, int mode) {
    int rc = write_all(fd, data, size);
    if (rc == 0 && mode >= 0) rc = fchmod(fd, (mode_t)mode);
    if (rc == 0) do rc = fsync(fd); while (rc != 0 && errno == EINTR);
    int e = errno;
    /* close can report a deferred write error (NFS); after EINTR the fd is gone on Linux */
    if (close(fd) != 0 && rc == 0 && errno != EINTR) return -1;
    errno = e;
    return rc;
}

/* Makes the rename durable. Failure is not reported: the new file is
 * already in place, and some filesystems refuse fsync on a directory. */
static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

qat_status qat__replace_file(qat_ctx *ctx, const char *path, const void *data, size_t size) {
    target t;
    qat_status st = split_target(ctx, path, &t);
    if (st != QAT_OK) return st;
    remove_stale_temps(&t);
    int mode = mode_to_keep(path);
    char tmp[sizeof t.head + sizeof t.prefix + 32];
    int fd = create_temp(&t, tmp, sizeof tmp);
    if (fd < 0) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
    lock_temp(fd);
    if (fill_temp(fd, data, size, mode) != 0) {
        int e = errno;
        unlink(tmp);
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot replace: %s", path, strerror(e));
    }
    sync_dir(t.dir);
    return QAT_OK;
}
