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
#include <stdlib.h>
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

/* Writes, sets the mode and flushes to disk; -1 with errno set on the
 * first failure. The mode is set before the fsync so that it is as
 * durable as the contents. The file stays open (and locked) for the
 * rename: fsync reports the write errors a close would defer (NFS). */
static int fill_temp(int fd, const void *data, size_t size, int mode) {
    int rc = write_all(fd, data, size);
    if (rc == 0 && mode >= 0) rc = fchmod(fd, (mode_t)mode);
    if (rc == 0) do rc = fsync(fd); while (rc != 0 && errno == EINTR);
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

/* ---- staging: the temporary written in full, the rename later --------------------- */

/* A file written to its temporary and flushed, not yet renamed. The
 * temporary stays open, and so locked, until it is renamed or removed. */
typedef struct {
    char path[4096];      /* the target */
    char tmp[4096 + 320]; /* its temporary */
    char dir[4096];       /* for the directory sync */
    int fd;
    dev_t dir_dev;        /* the target directory and the file name in it: */
    ino_t dir_ino;        /* two stagings of one file are refused */
    char name[256];
} staged;

/* Is the target a directory (rename would fail only after every other
 * file of a set is written)? Refused before anything is written. */
static qat_status check_target(qat_ctx *ctx, const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot replace: %s", path, strerror(EISDIR));
    return QAT_OK;
}

/* Writes data to a temporary beside path, flushed to disk; the target is
 * not touched. On failure nothing is left behind. */
static qat_status stage(qat_ctx *ctx, const char *path, const void *data, size_t size, staged *s) {
    target t;
    qat_status st = split_target(ctx, path, &t);
    if (st == QAT_OK) st = check_target(ctx, path);
    if (st != QAT_OK) return st;
    if (strlen(path) >= sizeof s->path) return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: path too long", path);
    remove_stale_temps(&t);
    int mode = mode_to_keep(path);
    int fd = create_temp(&t, s->tmp, sizeof s->tmp);
    if (fd < 0) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
    lock_temp(fd);
    if (fill_temp(fd, data, size, mode) != 0) {
        int e = errno;
        close(fd);
        unlink(s->tmp);
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    struct stat ds;
    if (stat(t.dir, &ds) != 0) ds.st_dev = 0, ds.st_ino = 0;
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->dir, sizeof s->dir, "%s", t.dir);
    snprintf(s->name, sizeof s->name, "%s", path + strlen(t.head));
    s->fd = fd, s->dir_dev = ds.st_dev, s->dir_ino = ds.st_ino;
    return QAT_OK;
}

/* Renames the temporary over the target. The directory sync and the
 * close come after (finish): in a set, all renames first, so that the
 * moment between the first and the last rename is a few system calls,
 * not a few fsyncs. */
static qat_status commit(qat_ctx *ctx, staged *s) {
    if (rename(s->tmp, s->path) != 0) {
        int e = errno;
        unlink(s->tmp);
        close(s->fd);
        s->fd = -1;
        return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot replace: %s", s->path, strerror(e));
    }
    return QAT_OK;
}

/* After the rename: the lock guarded the temporary until it had its final
 * name; the directory sync makes the rename durable. */
static void finish(staged *s, bool sync) {
    close(s->fd);
    s->fd = -1;
    if (sync) sync_dir(s->dir);
}

static void discard(staged *s) {
    if (s->fd < 0) return;
    unlink(s->tmp);
    close(s->fd);
    s->fd = -1;
}

qat_status qat__replace_file(qat_ctx *ctx, const char *path, const void *data, size_t size) {
    staged *s = malloc(sizeof *s); /* 12 KB of paths: not on the stack */
    if (!s) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory", path);
    qat_status st = stage(ctx, path, data, size, s);
    if (st == QAT_OK && (st = commit(ctx, s)) == QAT_OK) finish(s, true);
    free(s);
    return st;
}

/* ---- save sets (qat/io.h) --------------------------------------------------------- */

struct qat_save_set {
    qat_ctx *ctx;
    staged **files;
    int n, cap;
    bool committed;
};

qat_save_set *qat_save_set_new(qat_ctx *ctx) {
    if (!ctx) return NULL;
    qat_save_set *s = calloc(1, sizeof *s);
    if (!s) qat_ctx_fail(ctx, QAT_ERR_NOMEM, "save set: out of memory");
    else s->ctx = ctx;
    return s;
}

qat_status qat__save_set_add(qat_ctx *ctx, qat_save_set *set, const char *path, const void *data, size_t size) {
    if (!set) return qat__replace_file(ctx, path, data, size);
    if (set->committed) return qat_ctx_fail(ctx, QAT_ERR_STATE, "%s: the save set was committed already", path);
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 4;
        staged **f = realloc(set->files, (size_t)cap * sizeof *f);
        if (!f) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory", path);
        set->files = f, set->cap = cap;
    }
    staged *s = malloc(sizeof *s);
    if (!s) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory", path);
    qat_status st = stage(ctx, path, data, size, s);
    for (int i = 0; st == QAT_OK && i < set->n; i++) { /* the same file twice: the second rename would win */
        const staged *o = set->files[i];
        if (o->dir_dev == s->dir_dev && o->dir_ino == s->dir_ino && !strcmp(o->name, s->name)) {
            discard(s);
            st = qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: the same file as %s, written earlier in the same save", path, o->path);
        }
    }
    if (st != QAT_OK) return free(s), st;
    set->files[set->n++] = s;
    return QAT_OK;
}

qat_status qat_save_set_add(qat_save_set *set, const char *path, const void *data, size_t size) {
    if (!set) return QAT_ERR_ARG;
    if (!path || (!data && size)) return qat_ctx_fail(set->ctx, QAT_ERR_ARG, "save set: NULL path or data");
    return qat__save_set_add(set->ctx, set, path, data, size);
}

int qat_save_set_count(const qat_save_set *set) { return set && !set->committed ? set->n : 0; }

qat_status qat_save_set_commit(qat_save_set *set) {
    if (!set) return QAT_ERR_ARG;
    if (set->committed) return qat_ctx_fail(set->ctx, QAT_ERR_STATE, "save set: committed already");
    set->committed = true;
    qat_status st = QAT_OK;
    int done = 0;
    for (int i = 0; i < set->n; i++) {
        if (st == QAT_OK) {
            st = commit(set->ctx, set->files[i]);
            done += st == QAT_OK;
            /* targets before this one hold their new files, the rest their old ones */
            if (st != QAT_OK && i > 0)
                qat_ctx_error_prefix(set->ctx, "after %d of %d files were replaced: ", i, set->n);
        } else {
            discard(set->files[i]);
        }
    }
    for (int i = 0; i < done; i++) { /* then the closes, and one sync per directory */
        bool first = true;
        for (int j = 0; j < i && first; j++) first = strcmp(set->files[j]->dir, set->files[i]->dir) != 0;
        finish(set->files[i], first);
    }
    return st;
}

void qat_save_set_free(qat_save_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        discard(set->files[i]);
        free(set->files[i]);
    }
    free(set->files);
    free(set);
}
