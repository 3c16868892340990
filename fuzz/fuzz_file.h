/* Shared by the fuzz targets: the loaders take a path, so each input is
 * written to one temporary file per process, named once (in memory-backed
 * /dev/shm when it exists, else $TMPDIR or /tmp) and rewritten for every
 * input. The file is removed at exit; a process a sanitizer or libFuzzer
 * stops leaves its file (the sanitizers' one death callback is
 * libFuzzer's: it writes the reproducer), and the next fuzzing process of
 * the same target removes it. Harness state may be static: it is not the
 * library's. */
#ifndef QAT_FUZZ_FILE_H
#define QAT_FUZZ_FILE_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_path[512];
static char fuzz_dir[512]; /* fuzz_dir_init's directory, or "" */

/* path, a file or a directory of files (one level: what fuzz_dir holds) */
static inline void fuzz_remove(const char *path) {
    if (unlink(path) == 0 || (errno != EISDIR && errno != EPERM)) return;
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        unlink(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

static inline void fuzz_file_remove(void) {
    if (fuzz_path[0]) unlink(fuzz_path);
    if (fuzz_dir[0]) fuzz_remove(fuzz_dir);
}

/* Removes dir/qat-fuzz-<tag>-<pid> files whose process is gone: checkpoint
 * inputs are up to 1 MiB each, and /dev/shm is memory. */
static inline void fuzz_file_sweep(const char *dir, const char *tag) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "qat-fuzz-%s-", tag);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        long pid = strtol(e->d_name + strlen(prefix), NULL, 10);
        if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            fuzz_remove(path);
        }
    }
    if (d) closedir(d);
}

/* Picks the path: <dir>/qat-fuzz-<tag>-<pid> (several fuzzing processes
 * may run at once, -jobs or -fork). */
static inline void fuzz_file_init(const char *tag) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    fuzz_file_sweep(dir, tag);
    snprintf(fuzz_path, sizeof fuzz_path, "%s/qat-fuzz-%s-%ld", dir, tag, (long)getpid());
    atexit(fuzz_file_remove);
}

/* For targets whose input is one file among several (a data set's
 * directory): the directory <dir>/qat-fuzz-<tag>-<pid>, made empty; the
 * harness writes its files there. Removed at exit, swept as the files. */
static inline const char *fuzz_dir_init(const char *tag) {
    fuzz_file_init(tag);
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s.d", fuzz_path);
    fuzz_remove(fuzz_dir);
    if (mkdir(fuzz_dir, 0700) != 0) {
        perror(fuzz_dir);
        abort();
    }
    return fuzz_dir;
}

/* bytes as the whole content of path (a harness that cannot write its
 * files tests nothing: stop loudly) */
static inline void fuzz_put(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* The input as the file's whole content. A harness that cannot write its
 * file tests nothing: stop loudly rather than report clean runs. */
static inline const char *fuzz_file_write(const uint8_t *data, size_t size) {
    FILE *f = fopen(fuzz_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(fuzz_path);
        abort();
    }
    return fuzz_path;
}

#endif
