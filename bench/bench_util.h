/* Timing, peak memory and environment facts every benchmark reports. */
#ifndef QAT_BENCH_UTIL_H
#define QAT_BENCH_UTIL_H

#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU time (what other processes on the machine take does not count). */
static inline double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double bench_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static inline const char *bench_coretype(void) {
    const char *c = getenv("OPENBLAS_CORETYPE");
    return c && *c ? c : "(unset: OpenBLAS autodetects)";
}

#endif
