/* This core's int8 multiply-add peak: vpdpbusd on zmm (64 multiply-adds
 * an instruction) over 12 independent accumulators, register operands
 * only, in thread CPU time; and the clock, from a chain of dependent
 * integer adds (one a cycle on every x86 core this runs on). Peak =
 * instructions/s x 64. Not a test. Also the two AVX2 forms an exact
 * int8 kernel can take without VNNI, on ymm with 6 accumulators:
 * vpmaddwd + vpaddd on int16 operands (16 multiply-adds) and vpmaddubsw +
 * vpmaddwd + vpaddd on bytes (32, but vpmaddubsw saturates its int16 pair
 * sums, exact only for weights of at most 7 bits).
 *   bench_vnni_peak [SECONDS]
 * Prints "peak_gmacs G clock_ghz C dpbusd_per_cycle D" ("peak unknown"
 * on a CPU without AVX-512 VNNI), then "avx2_int16_gmacs A avx2_u8s8_gmacs
 * B" on a CPU with AVX2. */
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

#define AVX2_MAC6(op)                                                                                        \
    __asm__ volatile(op(c0) op(c1) op(c2) op(c3) op(c4) op(c5)                                               \
                     : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5), \
                       [t0] "=&x"(t0), [t1] "=&x"(t1)                                                      \
                     : [a] "x"(a), [b] "x"(b), [one] "x"(one))
#define MADD(c) "vpmaddwd %[b], %[a], %[t0]\n\tvpaddd %[t0], %[" #c "], %[" #c "]\n\t"
#define UBS(c) "vpmaddubsw %[b], %[a], %[t0]\n\tvpmaddwd %[one], %[t0], %[t1]\n\tvpaddd %[t1], %[" #c "], %[" #c "]\n\t"

/* 6 accumulators x n iterations of vpmaddwd + vpaddd (ubs: vpmaddubsw first) */
__attribute__((target("avx2"), noinline)) static int64_t avx2_loop(int64_t n, int ubs) {
    __m256i a = _mm256_set1_epi32(1), b = _mm256_set1_epi32(2), one = _mm256_set1_epi16(1), t0, t1;
    __m256i c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a;
    for (int64_t i = 0; i < n; i++) {
        if (ubs) AVX2_MAC6(UBS);
        else AVX2_MAC6(MADD);
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
    s = _mm256_add_epi32(s, _mm256_add_epi32(c4, c5));
    return _mm256_extract_epi32(s, 0);
}

/* 4 dependent adds an iteration: 4 cycles */
__attribute__((noinline)) static int64_t add_chain(int64_t n) {
    int64_t x = 0;
    for (int64_t i = 0; i < n; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    return x;
}

/* The best multiply-adds/s of avx2_loop over `seconds`. */
static double avx2_peak(double seconds, int ubs) {
    double best = 0;
    int64_t n = 1 << 20, sink = 0;
    for (double spent = 0; spent < seconds;) {
        double t0 = cpu_now();
        sink += avx2_loop(n, ubs);
        double t = cpu_now() - t0, rate = 6.0 * (ubs ? 32 : 16) * (double)n / t;
        best = rate > best ? rate : best, spent += t;
    }
    return best + (sink == 42 ? 1e-9 : 0);
}

static void print_avx2(double seconds) {
    if (!__builtin_cpu_supports("avx2")) return;
    double int16 = avx2_peak(seconds / 2, 0), u8s8 = avx2_peak(seconds / 2, 1);
    printf("avx2_int16_gmacs %.1f avx2_u8s8_gmacs %.1f\n", int16 / 1e9, u8s8 / 1e9);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    if (!__builtin_cpu_supports("avx512vnni")) {
        puts("peak unknown (no AVX-512 VNNI)");
        print_avx2(seconds);
        return 0;
    }
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
    print_avx2(seconds);
    return 0;
}

#else

int main(void) { return puts("peak unknown (not x86-64)"), 0; }

#endif
