/* Saving files (src/io/atomic.c, docs/saving.md): a full disk fails with a
 * clean error and leaves the old file and no temporary file; temporaries
 * of dead saves are removed and those of live ones kept; the new file's
 * mode follows the umask or the file it replaces; a symlink at the target
 * is replaced, its target untouched. Both kinds of file are saved: the
 * training checkpoint and the quantized model. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qat/codegen.h"
#include "qat/export.h"
#include "qat/io.h"
#include "internals.h"
#include "test_util.h"

enum { IN = 12 };
static char dir[256];

/* A small prepared model whose observers have seen data, and its lowered
 * integer program: one of each kind of file to save. */
typedef struct {
    qat_ctx *ctx;
    qat_model *m;
    qat_qmodel q;
    qat_rng rng;
} fixture;

static void forward_once(fixture *f) {
    qat_tensor *x = qat_tensor_new(f->ctx, QAT_MEM_STEP, 2, (int64_t[]){8, IN}, false);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&f->rng);
    CU_ASSERT_PTR_NOT_NULL(qat_model_forward(f->m, x));
    qat_ctx_step_reset(f->ctx);
}

static void fixture_init(fixture *f) {
    memset(f, 0, sizeof *f);
    f->ctx = qat_ctx_new();
    f->m = qat_model_new(f->ctx);
    qat_rng_seed(&f->rng, 7);
    qat_model_add_linear(f->m, NULL, IN, 16, true);
    qat_model_add_relu(f->m);
    qat_model_add_linear(f->m, NULL, 16, 4, true);
    CU_ASSERT_EQUAL(qat_model_build(f->m, 3), QAT_OK);
    CU_ASSERT_EQUAL(qat_prepare(f->m, NULL), QAT_OK);
    forward_once(f);
    qat_model_train(f->m, false);
    CU_ASSERT_EQUAL(qat_qmodel_lower(f->m, 1, (int64_t[]){IN}, f->ctx, &f->q), QAT_OK);
    ASSERT_OK(f->ctx);
}

/* Changes the parameters, so that the next save writes other bytes. */
static void perturb(fixture *f) {
    for (int64_t i = 0; i < f->m->n_params; i++) f->m->params[i] += 0.25f;
    f->q.ops[0].bias[0] += 1;
}

enum { CHECKPOINT, QMODEL, CCODE };

/* CCODE: the C source, DIR/cg.h, DIR/cg.c and DIR/cg_io.c (path unused). */
static qat_status save(fixture *f, int kind, const char *path) {
    qat_ctx_clear_error(f->ctx);
    return kind == CHECKPOINT ? qat_checkpoint_save(f->m, NULL, NULL, NULL, path)
           : kind == QMODEL   ? qat_qmodel_save(f->ctx, &f->q, path)
                              : qat_codegen_c(f->ctx, &f->q, dir, "cg", NULL);
}

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* The whole file in a malloc'ed buffer (NULL if unreadable); *n its size. */
static char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)*n + 1);
    if (fread(buf, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    fclose(f);
    return buf;
}

/* Entries in the test directory whose name holds `part` (hidden ones too). */
static int count_named(const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part);
    closedir(d);
    return n;
}

static int count_entries(void) { return count_named(""); }

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("stale", f);
    fclose(f);
}

/* ---- full disk ----------------------------------------------------------------- */

/* Saves in a child process whose file size limit (RLIMIT_FSIZE) is half
 * the file's size: writes past it fail with EFBIG, as on a full disk. The
 * child exits normally, so HDF5's atexit handler runs as in a real
 * program. The status and message come back through one pipe, whatever
 * the child printed on stderr through another (non-blocking on the
 * child's side: a long dump is cut, never a deadlock). */
typedef struct {
    qat_status st;
    char msg[600], err[4096];
    int wstatus;
} child_result;

static ssize_t read_all(int fd, char *buf, size_t len) {
    ssize_t n = 0, k;
    while (n < (ssize_t)len - 1 && (k = read(fd, buf + n, len - 1 - (size_t)n)) > 0) n += k;
    buf[n] = '\0';
    return n;
}

static void save_past_size_limit(fixture *f, int kind, const char *path, rlim_t limit, child_result *r) {
    int res[2], err[2];
    CU_ASSERT_EQUAL_FATAL(pipe(res), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(err), 0);
    fflush(stdout); /* else the child's exit flushes the runner's buffered output twice */
    fflush(stderr);
    pid_t pid = fork();
    CU_ASSERT_NOT_EQUAL_FATAL(pid, -1);
    if (pid == 0) {
        close(res[0]);
        close(err[0]);
        fcntl(err[1], F_SETFL, O_NONBLOCK);
        dup2(err[1], STDERR_FILENO);
        close(err[1]);
        struct rlimit rl = {limit, limit};
        signal(SIGXFSZ, SIG_IGN);
        qat_status s = setrlimit(RLIMIT_FSIZE, &rl) == 0 ? save(f, kind, path) : QAT_ERR_STATE;
        char out[600];
        int n = snprintf(out, sizeof out, "%d %s", (int)s, qat_ctx_error(f->ctx));
        ssize_t w = write(res[1], out, (size_t)n);
        close(res[1]);
        qat_ctx_free(f->ctx);
        exit(w == n ? 0 : 3);
    }
    close(res[1]);
    close(err[1]);
    char in[600];
    read_all(res[0], in, sizeof in);
    close(res[0]);
    CU_ASSERT_EQUAL(waitpid(pid, &r->wstatus, 0), pid);
    read_all(err[0], r->err, sizeof r->err);
    close(err[0]);
    int code = 0, used = 0;
    r->st = sscanf(in, "%d %n", &code, &used) == 1 ? (qat_status)code : QAT_OK;
    snprintf(r->msg, sizeof r->msg, "%s", in + used);
}

static void check_full_disk(int kind, const char *name) {
    fixture f;
    fixture_init(&f);
    char path[512];
    path_of(path, sizeof path, name);
    CU_ASSERT_EQUAL_FATAL(save(&f, kind, path), QAT_OK);
    long old_n = 0, now_n = 0;
    char *old = slurp(path, &old_n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    int entries = count_entries();
    perturb(&f);
    child_result r;
    save_past_size_limit(&f, kind, path, (rlim_t)old_n / 2, &r);
    CU_ASSERT(WIFEXITED(r.wstatus) && WEXITSTATUS(r.wstatus) == 0); /* no crash at exit */
    CU_ASSERT_EQUAL(r.st, QAT_ERR_IO);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot write: %s", path, strerror(EFBIG));
    if (strcmp(r.msg, want)) printf("\n  got \"%s\"\n  want \"%s\"\n", r.msg, want);
    CU_ASSERT_STRING_EQUAL(r.msg, want);
    if (r.err[0]) printf("\n  the child printed:\n%.600s\n", r.err);
    CU_ASSERT_STRING_EQUAL(r.err, ""); /* the library printed nothing (no HDF5 error dump) */
    char *now = slurp(path, &now_n); /* the old file, byte for byte */
    CU_ASSERT(now && now_n == old_n && memcmp(now, old, (size_t)old_n) == 0);
    CU_ASSERT_EQUAL(count_entries(), entries); /* no temporary file left */
    /* the same save with room succeeds and replaces it */
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK);
    free(now);
    now = slurp(path, &now_n);
    CU_ASSERT(now && (now_n != old_n || memcmp(now, old, (size_t)old_n) != 0));
    CU_ASSERT_EQUAL(count_entries(), entries);
    free(now);
    free(old);
    qat_ctx_free(f.ctx);
}

static void test_full_disk_checkpoint(void) { check_full_disk(CHECKPOINT, "full.ckpt.h5"); }
static void test_full_disk_qmodel(void) { check_full_disk(QMODEL, "full.qat.h5"); }

/* ---- stale temporary files ------------------------------------------------------ */

/* The pid of a process that has exited and been reaped. */
static pid_t dead_pid(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* A child that holds a write lock on path (as a save in another PID
 * namespace would) until *release is closed. */
static pid_t lock_holder(const char *path, int *release) {
    int ready[2], hold[2];
    CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(hold), 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        int fd = open(path, O_WRONLY);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        char ok = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
        ssize_t w = write(ready[1], &ok, 1);
        char c;
        while (read(hold[0], &c, 1) > 0) continue; /* until the parent closes its end */
        _exit(w == 1 ? 0 : 1);
    }
    close(ready[1]);
    close(hold[0]);
    char ok = 'n';
    CU_ASSERT_EQUAL(read(ready[0], &ok, 1), 1);
    CU_ASSERT_EQUAL(ok, 'y');
    close(ready[0]);
    *release = hold[1];
    return pid;
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void check_stale_temps(int kind, const char *name) {
    fixture f;
    fixture_init(&f);
    char path[512], dead[512], dead2[512], live[512], locked[512], other[512], loose[512];
    path_of(path, sizeof path, name);
    pid_t gone = dead_pid(), gone2 = dead_pid();
    snprintf(dead, sizeof dead, "%s/.%s.qat-tmp.%ld.0badc0de", dir, name, (long)gone);
    snprintf(dead2, sizeof dead2, "%s/.%s.qat-tmp.%ld.12345678", dir, name, (long)gone2);
    snprintf(live, sizeof live, "%s/.%s.qat-tmp.%ld.00000001", dir, name, (long)getppid()); /* ctest */
    snprintf(locked, sizeof locked, "%s/.%s.qat-tmp.%ld.00000002", dir, name, (long)gone);
    snprintf(other, sizeof other, "%s/.other-%s.qat-tmp.%ld.0badc0de", dir, name, (long)gone); /* another target */
    snprintf(loose, sizeof loose, "%s/.%s.qat-tmp.%ld.0badc0de~", dir, name, (long)gone); /* not our pattern */
    const char *all[] = {dead, dead2, live, locked, other, loose};
    for (int i = 0; i < 6; i++) touch(all[i]);
    int release = -1;
    pid_t holder = lock_holder(locked, &release);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK);
    CU_ASSERT_FALSE(exists(dead));  /* dead process: removed */
    CU_ASSERT_FALSE(exists(dead2));
    CU_ASSERT_TRUE(exists(live));   /* live process: kept */
    CU_ASSERT_TRUE(exists(locked)); /* dead pid but a live lock: kept */
    CU_ASSERT_TRUE(exists(other));  /* another target's: left to that target's saves */
    CU_ASSERT_TRUE(exists(loose));
    close(release);
    waitpid(holder, NULL, 0);
    /* once the lock is gone, the next save removes it */
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK);
    CU_ASSERT_FALSE(exists(locked));
    CU_ASSERT_TRUE(exists(live));
    for (int i = 0; i < 6; i++) unlink(all[i]);
    qat_ctx_free(f.ctx);
}

static void test_stale_temps_checkpoint(void) { check_stale_temps(CHECKPOINT, "stale.ckpt.h5"); }
static void test_stale_temps_qmodel(void) { check_stale_temps(QMODEL, "stale.qat.h5"); }

/* ---- mode and symlinks ---------------------------------------------------------- */

static int mode_of(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static void check_modes(int kind, const char *name) {
    fixture f;
    fixture_init(&f);
    char path[512];
    path_of(path, sizeof path, name);
    mode_t old_mask = umask(022);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK); /* a new file: 0666 & ~umask */
    CU_ASSERT_EQUAL(mode_of(path), 0644);
    CU_ASSERT_EQUAL(chmod(path, 0640), 0);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK); /* a replaced file keeps its mode */
    CU_ASSERT_EQUAL(mode_of(path), 0640);
    umask(077);
    CU_ASSERT_EQUAL(chmod(path, 0664), 0);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK); /* whatever the umask */
    CU_ASSERT_EQUAL(mode_of(path), 0664);
    CU_ASSERT_EQUAL(chmod(path, 04755), 0);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK); /* permission bits only, no set-id */
    CU_ASSERT_EQUAL(mode_of(path), 0755);
    unlink(path);
    CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK);
    CU_ASSERT_EQUAL(mode_of(path), 0600);
    umask(old_mask);
    unlink(path);
    qat_ctx_free(f.ctx);
}

static void test_modes_checkpoint(void) { check_modes(CHECKPOINT, "mode.ckpt.h5"); }
static void test_modes_qmodel(void) { check_modes(QMODEL, "mode.qat.h5"); }

static void test_symlink_is_replaced(void) {
    fixture f;
    fixture_init(&f);
    char path[512], victim[512];
    path_of(path, sizeof path, "link.ckpt.h5");
    path_of(victim, sizeof victim, "victim.txt");
    touch(victim);
    CU_ASSERT_EQUAL_FATAL(symlink(victim, path), 0);
    for (int kind = CHECKPOINT; kind <= QMODEL; kind++) {
        CU_ASSERT_EQUAL(save(&f, kind, path), QAT_OK);
        struct stat st;
        CU_ASSERT(lstat(path, &st) == 0 && S_ISREG(st.st_mode)); /* a regular file now */
        long n = 0;
        char *v = slurp(victim, &n);
        CU_ASSERT(v && n == 5 && memcmp(v, "stale", 5) == 0); /* the link's target untouched */
        free(v);
        unlink(path);
        CU_ASSERT_EQUAL(symlink(victim, path), 0);
    }
    unlink(path);
    unlink(victim);
    qat_ctx_free(f.ctx);
}

/* ---- paths ---------------------------------------------------------------------- */

static void test_paths(void) {
    fixture f;
    fixture_init(&f);
    char path[600];
    int entries = count_entries();
    /* a directory at the target: refused, nothing left behind */
    path_of(path, sizeof path, "a-directory");
    CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
    CU_ASSERT_EQUAL(save(&f, CHECKPOINT, path), QAT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(f.ctx), "cannot replace"));
    CU_ASSERT_EQUAL(count_entries(), entries + 1);
    rmdir(path);
    /* no such directory: the reason is given */
    path_of(path, sizeof path, "no-such-dir/x.h5");
    CU_ASSERT_EQUAL(save(&f, QMODEL, path), QAT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(f.ctx), strerror(ENOENT)));
    /* not a file name */
    path_of(path, sizeof path, "");
    CU_ASSERT_EQUAL(save(&f, CHECKPOINT, path), QAT_ERR_ARG);
    /* a 250-byte name: the temporary's name is cut to fit NAME_MAX */
    char name[251];
    memset(name, 'n', 250);
    name[250] = '\0';
    path_of(path, sizeof path, name);
    CU_ASSERT_EQUAL(save(&f, CHECKPOINT, path), QAT_OK);
    CU_ASSERT(exists(path));
    unlink(path);
    /* a bare name, in the working directory */
    char cwd[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    CU_ASSERT_EQUAL_FATAL(chdir(dir), 0);
    CU_ASSERT_EQUAL(save(&f, QMODEL, "bare.qat.h5"), QAT_OK);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
    path_of(path, sizeof path, "bare.qat.h5");
    qat_qmodel *l = qat_ctx_alloc(f.ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL(qat_qmodel_load(f.ctx, path, l), QAT_OK);
    unlink(path);
    CU_ASSERT_EQUAL(count_entries(), entries);
    CU_ASSERT_EQUAL(count_named("qat-tmp"), 0);
    qat_ctx_free(f.ctx);
}

/* ---- several files at once ------------------------------------------------------- */

/* The C export's three files on a full disk (RLIMIT_FSIZE between the
 * size of cg.h and that of cg.c, so that cg.h would fit and cg.c not):
 * the save fails naming cg.c and the reason, and all three previous files
 * stay byte for byte (cg.h is not replaced alone), with no temporary. */
static void test_full_disk_c_export(void) {
    fixture f;
    fixture_init(&f);
    CU_ASSERT_EQUAL_FATAL(save(&f, CCODE, NULL), QAT_OK);
    static const char *const names[3] = {"cg.h", "cg.c", "cg_io.c"};
    char path[3][512], *old[3];
    long n[3];
    for (int k = 0; k < 3; k++) {
        path_of(path[k], sizeof path[k], names[k]);
        old[k] = slurp(path[k], &n[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(old[k]);
    }
    long limit = n[1] / 2;
    CU_ASSERT_FATAL(limit > n[0] && limit > n[2]); /* only cg.c is too big */
    int entries = count_entries();
    perturb(&f);
    f.q.tensors[f.q.input].q.zero_point += 1; /* cg.h changes too (its input zero point) */
    child_result r;
    save_past_size_limit(&f, CCODE, NULL, (rlim_t)limit, &r);
    CU_ASSERT(WIFEXITED(r.wstatus) && WEXITSTATUS(r.wstatus) == 0);
    CU_ASSERT_EQUAL(r.st, QAT_ERR_IO);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot write: %s", path[1], strerror(EFBIG));
    if (strcmp(r.msg, want)) printf("\n  got \"%s\"\n  want \"%s\"\n", r.msg, want);
    CU_ASSERT_STRING_EQUAL(r.msg, want);
    for (int k = 0; k < 3; k++) {
        long now_n = 0;
        char *now = slurp(path[k], &now_n);
        CU_ASSERT(now && now_n == n[k] && memcmp(now, old[k], (size_t)n[k]) == 0);
        free(now);
    }
    CU_ASSERT_EQUAL(count_entries(), entries);
    CU_ASSERT_EQUAL(count_named("qat-tmp"), 0);
    /* with room, all three are replaced */
    CU_ASSERT_EQUAL(save(&f, CCODE, NULL), QAT_OK);
    long now_n = 0;
    char *now = slurp(path[0], &now_n);
    CU_ASSERT(now && (now_n != n[0] || memcmp(now, old[0], (size_t)n[0]) != 0));
    free(now);
    for (int k = 0; k < 3; k++) free(old[k]);
    qat_ctx_free(f.ctx);
}

/* A save set: staged files leave their targets as they were (and show as
 * hidden temporaries) until the commit, which puts them all in place; a
 * set freed without a commit leaves the targets and no temporary; a
 * directory at a target and the same file staged twice (another spelling
 * of its directory) are refused when staged. */
static void test_save_set(void) {
    fixture f;
    fixture_init(&f);
    char a[512], b[512], same[600], sub[512];
    path_of(a, sizeof a, "set-a.qat.h5");
    path_of(b, sizeof b, "set-b.bin");
    path_of(sub, sizeof sub, "set-dir");
    snprintf(same, sizeof same, "%s/./set-a.qat.h5", dir);
    CU_ASSERT_EQUAL_FATAL(save(&f, QMODEL, a), QAT_OK);
    touch(b);
    long na = 0, nb = 0;
    char *olda = slurp(a, &na), *oldb = slurp(b, &nb);
    int entries = count_entries();
    perturb(&f);
    for (int commit = 0; commit < 2; commit++) {
        qat_save_set *set = qat_save_set_new(f.ctx);
        CU_ASSERT_PTR_NOT_NULL_FATAL(set);
        CU_ASSERT_EQUAL(qat_qmodel_stage(f.ctx, &f.q, a, set), QAT_OK);
        CU_ASSERT_EQUAL(qat_save_set_add(set, b, "new bytes", 9), QAT_OK);
        CU_ASSERT_EQUAL(qat_save_set_count(set), 2);
        CU_ASSERT_EQUAL(count_named("qat-tmp"), 2); /* staged beside their targets */
        long n = 0;
        char *now = slurp(a, &n);
        CU_ASSERT(now && n == na && memcmp(now, olda, (size_t)na) == 0); /* not yet replaced */
        free(now);
        CU_ASSERT_EQUAL(qat_save_set_add(set, same, "x", 1), QAT_ERR_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(f.ctx), "the same file as"));
        qat_ctx_clear_error(f.ctx);
        CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
        CU_ASSERT_EQUAL(qat_save_set_add(set, sub, "x", 1), QAT_ERR_IO);
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(f.ctx), "cannot replace"));
        qat_ctx_clear_error(f.ctx);
        rmdir(sub);
        CU_ASSERT_EQUAL(qat_save_set_count(set), 2); /* the refused ones left nothing */
        if (commit) CU_ASSERT_EQUAL(qat_save_set_commit(set), QAT_OK);
        qat_save_set_free(set);
        CU_ASSERT_EQUAL(count_named("qat-tmp"), 0);
        CU_ASSERT_EQUAL(count_entries(), entries);
        char *nowa = slurp(a, &n);
        CU_ASSERT(nowa && (commit ? n != na || memcmp(nowa, olda, (size_t)na) != 0
                                  : n == na && memcmp(nowa, olda, (size_t)na) == 0));
        free(nowa);
        char *nowb = slurp(b, &n);
        CU_ASSERT(nowb && (commit ? n == 9 && !memcmp(nowb, "new bytes", 9) : n == nb && !memcmp(nowb, oldb, (size_t)nb)));
        free(nowb);
    }
    qat_qmodel *l = qat_ctx_alloc(f.ctx, QAT_MEM_PERSIST, sizeof *l);
    CU_ASSERT_EQUAL(qat_qmodel_load(f.ctx, a, l), QAT_OK);
    free(olda), free(oldb);
    unlink(a), unlink(b);
    qat_ctx_free(f.ctx);
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "save")) return 2;
    const qat_test_case cases[] = {
        {"full disk: checkpoint save fails cleanly, old file and no temporary left", test_full_disk_checkpoint},
        {"full disk: quantized model save fails cleanly, old file and no temporary left", test_full_disk_qmodel},
        {"stale temporaries of dead saves are removed, live ones kept (checkpoint)", test_stale_temps_checkpoint},
        {"stale temporaries of dead saves are removed, live ones kept (quantized model)", test_stale_temps_qmodel},
        {"mode: umask for a new file, the old file's bits when replacing (checkpoint)", test_modes_checkpoint},
        {"mode: umask for a new file, the old file's bits when replacing (quantized model)", test_modes_qmodel},
        {"a symlink at the target is replaced; the file it points to is untouched", test_symlink_is_replaced},
        {"paths: a directory, a missing directory, a long name, a bare name", test_paths},
        {"full disk: the C export keeps all three previous files, no temporary left", test_full_disk_c_export},
        {"a save set: nothing replaced before the commit, all after, none when freed", test_save_set},
        {NULL, NULL},
    };
    int rc = qat_test_main("save", cases, argc, argv);
    if (qat_test_rmdir(dir) != 0) rc = rc ? rc : 2;
    return rc;
}
