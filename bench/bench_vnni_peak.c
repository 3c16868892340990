/* This core's int8 multiply-add peak: vpdpbusd on zmm (64 multiply-adds
 * an instruction) over 12 independent accumulators, register operands
 * only, in thread CPU time; and the clock, from a chain of dependent
 * integer adds (one a cycle on every x86 core this runs on). Peak =
 * instructions/s x 64. Not a test.
 *   bench_vnni_peak [SECONDS]
 * Prints "peak_gmacs G clock_ghz C dpbusd_per_cycle D", or "peak unknown"
 * on a CPU without AVX-512 VNNI. */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <stdint.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 12 accumulators x n iterations; asm so that the compiler keeps the
 * instructions and their registers as written */
__attribute__((target("avx512f,avx512vnni"), noinline)) static int64_t dpbusd_loop(int64_t n) {
    __m512i a = _mm512_set1_epi32(1), b = _mm512_set1_epi32(2);
    __m512i c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
    for (int64_t i = 0; i < n; i++)
        __asm__ volatile("vpdpbusd %[b], %[a], %[c0]\n\tvpdpbusd %[b], %[a], %[c1]\n\tvpdpbusd %[b], %[a], %[c2]\n\t"
                         "vpdpbusd %[b], %[a], %[c3]\n\tvpdpbusd %[b], %[a], %[c4]\n\tvpdpbusd %[b], %[a], %[c5]\n\t"
                         "vpdpbusd %[b], %[a], %[c6]\n\tvpdpbusd %[b], %[a], %[c7]\n\tvpdpbusd %[b], %[a], %[c8]\n\t"
                         "vpdpbusd %[b], %[a], %[c9]\n\tvpdpbusd %[b], %[a], %[c10]\n\tvpdpbusd %[b], %[a], %[c11]"
                         : [c0] "+v"(c0), [c1] "+v"(c1), [c2] "+v"(c2), [c3] "+v"(c3), [c4] "+v"(c4), [c5] "+v"(c5),
                           [c6] "+v"(c6), [c7] "+v"(c7), [c8] "+v"(c8), [c9] "+v"(c9), [c10] "+v"(c10), [c11] "+v"(c11)
                         : [a] "v"(a), [b] "v"(b));
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                 _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    return _mm512_reduce_add_epi32(s);
}

/* 4 dependent adds an iteration: 4 cycles */
__attribute__((noinline)) static int64_t add_chain(int64_t n) {
    int64_t x = 0;
    for (int64_t i = 0; i < n; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    return x;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    if (!__builtin_cpu_supports("avx512vnni")) return puts("peak unknown (no AVX-512 VNNI)"), 0;
    double best_rate = 0, best_clock = 0;
    int64_t n = 1 << 20, sink = 0;
    for (double spent = 0; spent < seconds;) { /* the best of repeated short runs: the VM's neighbours come and go */
        double t0 = cpu_now();
        sink += dpbusd_loop(n);
        double t1 = cpu_now();
        sink += add_chain(n);
        double t2 = cpu_now();
        double rate = 12.0 * (double)n / (t1 - t0), clock = 4.0 * (double)n / (t2 - t1);
        best_rate = rate > best_rate ? rate : best_rate, best_clock = clock > best_clock ? clock : best_clock;
        spent += t2 - t0;
    }
    printf("peak_gmacs %.1f clock_ghz %.2f dpbusd_per_cycle %.2f%s\n", 64 * best_rate / 1e9, best_clock / 1e9,
           best_rate / best_clock, sink == 42 ? " " : "");
    return 0;
}

#else

int main(void) { return puts("peak unknown (not x86-64)"), 0; }

#endif
