/* Option parsing helpers: strict numbers, clear messages. */
#define _XOPEN_SOURCE 700 /* realpath; POSIX 2008 with it */
#include "cli.h"
#include "qat/runtime.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

bool cli_parse_long(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_int(const char *prog, const char *opt, const char *text, long lo, long hi, long *out) {
    if (!cli_parse_long(text, lo, hi, out)) {
        fprintf(stderr, "%s: %s wants a whole number from %ld to %ld, got \"%s\" (%s --help lists the options)\n", prog,
                opt, lo, hi, text, prog);
        return false;
    }
    return true;
}

bool cli_float(const char *prog, const char *opt, const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "%s: %s wants a number from %g to %g, got \"%s\" (%s --help lists the options)\n", prog, opt, lo,
                hi, text, prog);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_value(const char *prog, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value (%s --help lists the options)\n", prog, argv[*i], prog);
        return NULL;
    }
    return argv[++*i];
}

double cli_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

int cli_check_output(const char *prog, bool json, const char *opt, const char *path) {
    if (!path) return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, sizeof dir, ".");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_fail(prog, json, 1, "%s %s is a directory (give a file name)", opt, path);
    if (stat(dir, &st) != 0)
        return cli_fail(prog, json, 1, "%s %s: cannot open: %s (no folder %s)", opt, path, strerror(errno), dir);
    if (!S_ISDIR(st.st_mode))
        return cli_fail(prog, json, 1, "%s %s: cannot open: %s is not a folder", opt, path, dir);
    /* a file made there and removed: what the write will do (access() says yes to root on a read-only
     * mount, and to /proc and /sys, where no file can be made) */
    char probe[4200];
    if (snprintf(probe, sizeof probe, "%s/.qat-probe-XXXXXX", dir) >= (int)sizeof probe)
        return cli_fail(prog, json, 1, "%s %s: cannot open: the path is too long", opt, path);
    int fd = mkstemp(probe);
    if (fd < 0) return cli_fail(prog, json, 1, "%s %s: cannot create a file in the folder %s: %s", opt, path, dir,
                                strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* The directory part of path into buf ("." for a bare name); its last
 * name is what follows (the returned pointer). */
static const char *parent_of(const char *path, char *buf, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, len, ".");
    else snprintf(buf, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

/* A path not there yet as its directory resolved (links, "." and "..")
 * and its last name: "/abs/dir/name" into buf; false if the directory
 * cannot be resolved. */
static bool resolved(const char *path, char *buf, size_t len) {
    char dir[4096];
    const char *name = parent_of(path, dir, sizeof dir);
    char *real = realpath(dir, NULL);
    if (!real) return false;
    int n = snprintf(buf, len, "%s/%s", real, name);
    free(real);
    return n > 0 && (size_t)n < len;
}

bool cli_same_file(const char *a, const char *b) {
    if (!a || !b) return false;
    if (!strcmp(a, b)) return true;
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return false; /* one is there, the other not: two files */
    char ra[8400], rb[8400]; /* neither there yet ("a.h5" and "./a.h5"): the same place? */
    return resolved(a, ra, sizeof ra) && resolved(b, rb, sizeof rb) && !strcmp(ra, rb);
}

/* Whether path's directory is the directory of stat d. */
static bool parent_is(const char *path, const struct stat *d) {
    char parent[4096];
    struct stat sp;
    parent_of(path, parent, sizeof parent);
    return stat(parent, &sp) == 0 && sp.st_dev == d->st_dev && sp.st_ino == d->st_ino;
}

bool cli_in_data(const char *path, const char *data) {
    if (!path || !data) return false;
    if (cli_same_file(path, data)) return true;
    struct stat sd;
    if (stat(data, &sd) != 0 || !S_ISDIR(sd.st_mode)) return false;
    /* the file a write reaches: path, or where its symbolic links lead (fopen follows them) */
    char cur[4096], to[4096];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops < 16; hops++) {
        if (parent_is(cur, &sd)) return true;
        ssize_t n = readlink(cur, to, sizeof to - 1);
        if (n < 0) return false; /* not a link (or none yet) */
        to[n] = '\0';
        char dir[4096], next[8200];
        parent_of(cur, dir, sizeof dir);
        if (to[0] == '/') snprintf(next, sizeof next, "%s", to);
        else snprintf(next, sizeof next, "%s/%s", dir, to); /* relative to the link's directory */
        if (strlen(next) >= sizeof cur) return true; /* a path that long: refuse rather than guess */
        memcpy(cur, next, sizeof cur);
    }
    return true; /* a chain of links that long: refuse rather than guess */
}

int cli_status_of(qat_status st) {
    return st == QAT_ERR_ARG || st == QAT_ERR_SHAPE || st == QAT_ERR_FORMAT || st == QAT_ERR_UNSUPPORTED ? EXIT_USAGE : 1;
}

void cli_json_error(const char *message, int status) {
    printf("{\"error\": ");
    cli_json_str(message);
    printf(", \"status\": %d}\n", status);
}

/* The shared body of cli_fail and cli_usage_fail. */
static void report(const char *prog, bool json, int status, const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s: %s\n", prog, msg);
    if (json) cli_json_error(msg, status);
}

int cli_fail(const char *prog, bool json, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(prog, json, status, fmt, ap);
    va_end(ap);
    return status;
}

int cli_usage_fail(const char *prog, bool json, const char *usage, const char *fmt, ...) {
    (void)usage; /* one line and where the options are listed, not the whole usage */
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (%s --help lists the options)\n", prog, msg, prog);
    if (json) cli_json_error(msg, EXIT_USAGE);
    return EXIT_USAGE;
}

int cli_choice(const char *value, const char *const *allowed) {
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(value, allowed[i])) return i;
    return -1;
}

const char *cli_choice_list(const char *const *allowed, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; allowed[i] && used < len; i++) {
        const char *sep = i == 0 ? "" : allowed[i + 1] ? ", " : " or ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, allowed[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

const char *cli_blas_better_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (strcmp(qat_blas_core(), "Prescott") != 0) return NULL;
    if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
    if (__builtin_cpu_supports("avx2")) return "Haswell";
#endif
    return NULL;
}

void cli_blas_note(void) {
    const char *better = cli_blas_better_core();
    if (better)
        fprintf(stderr, "qat: note: OpenBLAS does not know this CPU and runs its generic Prescott (SSE3) "
                        "kernels; the CPU has %s: export OPENBLAS_CORETYPE=%s for about twice the float speed\n",
                strcmp(better, "SkylakeX") ? "AVX2" : "AVX-512", better);
}

static const char *const info_usage =
    "usage: qat info [--better-coretype]\n"
    "\n"
    "Prints the instruction-set levels this CPU has, the cap QAT_MAX_ISA sets\n"
    "(portable, avx2, avx_vnni, avx512, avx512_vnni: qat's fast paths run at the\n"
    "highest level the CPU has at or below it), the integer engine's kernels, the\n"
    "kernel family OpenBLAS chose on this machine and the OPENBLAS_CORETYPE\n"
    "environment it saw. With --better-coretype, prints only the OPENBLAS_CORETYPE to\n"
    "export when OpenBLAS fell back to its generic Prescott kernels on a CPU with AVX2\n"
    "or AVX-512 (an empty line when there is nothing better), for scripts.\n";

int cmd_info(int argc, char **argv) {
    bool better_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(info_usage, stdout), 0;
        if (!strcmp(argv[i], "--better-coretype")) better_only = true;
        else return fprintf(stderr, "qat info: unknown option \"%s\" (qat info --help lists the options)\n", argv[i]),
                    EXIT_USAGE;
    }
    const char *better = cli_blas_better_core(), *env = getenv("OPENBLAS_CORETYPE");
    if (better_only) return printf("%s\n", better ? better : ""), 0;
    printf("CPU levels:");
    for (int i = 0; i < QAT_ISA_COUNT; i++)
        if (qat_isa_cpu_has((qat_isa)i)) printf(" %s", qat_isa_str((qat_isa)i));
    const char *cap = getenv("QAT_MAX_ISA");
    printf("\nQAT_MAX_ISA: %s\nactive level: %s\n", cap && *cap ? cap : "(unset)", qat_isa_str(qat_isa_active()));
    printf("integer engine: %s\n", qat_runtime_kernel());
    printf("OpenBLAS core: %s\n", qat_blas_core());
    printf("OPENBLAS_CORETYPE: %s\n", env ? (*env ? env : "(set, empty)") : "(unset)");
    if (better) printf("suggestion: export OPENBLAS_CORETYPE=%s (OpenBLAS fell back to Prescott)\n", better);
    return 0;
}

int cli_limit_option(const char *prog, int argc, char **argv, int *i, qat_model_limits *l) {
    static const char *const opts[3] = {"--max-params", "--max-activation-bytes", "--max-layers"};
    int k = 0;
    while (k < 3 && strcmp(argv[*i], opts[k])) k++;
    if (k == 3) return 0;
    const char *v = cli_value(prog, argc, argv, i);
    long n = 0;
    if (!v || !cli_int(prog, opts[k], v, 1, k == 2 ? 1L << 30 : 1L << 50, &n)) return -1;
    int64_t *field[3] = {&l->max_params, &l->max_activation_bytes, &l->max_layers};
    *field[k] = n;
    return 1;
}
