/* Option parsing helpers: strict numbers, clear messages. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

bool cli_int(const char *prog, const char *opt, const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s wants a whole number from %ld to %ld, got \"%s\"\n", prog, opt, lo,
                hi, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *prog, const char *opt, const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "%s: %s wants a number from %g to %g, got \"%s\"\n", prog, opt, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_value(const char *prog, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", prog, argv[*i]);
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

void cli_blas_note(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (strcmp(qat_blas_core(), "Prescott") != 0) return;
    const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
    if (better)
        fprintf(stderr, "qat-mnist: note: OpenBLAS does not know this CPU and runs its generic Prescott (SSE3) "
                        "kernels; the CPU has %s: export OPENBLAS_CORETYPE=%s for about twice the float speed\n",
                strcmp(better, "SkylakeX") ? "AVX2" : "AVX-512", better);
#endif
}
