/* The memory ceiling of fake quantization's forward + backward on this
 * machine: the same traffic as the op over 4 M floats (read x, write y and
 * the STE mask; then rewrite dy in place under the mask) with no
 * arithmetic to speak of (a clamp stands in for the quantization), in
 * AVX-512, with a byte mask (qat's layout) and with a bit mask. Whatever
 * the op does, it cannot beat these figures. One thread, best of 30.
 * Needs AVX-512 (F, BW); says so and exits 0 without it. */
#include "bench_util.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw")))

AVX512 static void fwd_bytes(const float *x, float *y, uint8_t *m, size_t n) {
    const __m512 lo = _mm512_set1_ps(-1.0f), hi = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 k = _mm512_cmp_ps_mask(v, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(v, hi, _CMP_LE_OQ);
        _mm512_storeu_ps(y + i, _mm512_min_ps(_mm512_max_ps(v, lo), hi));
        _mm_storeu_si128((__m128i *)(void *)(m + i), _mm512_cvtepi32_epi8(_mm512_maskz_set1_epi32(k, 1)));
    }
}

AVX512 static void bwd_bytes(float *g, const uint8_t *m, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __m512i k = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(m + i)));
        _mm512_storeu_ps(g + i, _mm512_maskz_mov_ps(_mm512_test_epi32_mask(k, k), _mm512_loadu_ps(g + i)));
    }
}

AVX512 static void fwd_bits(const float *x, float *y, uint16_t *m, size_t n) {
    const __m512 lo = _mm512_set1_ps(-1.0f), hi = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        m[i / 16] = _mm512_cmp_ps_mask(v, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(v, hi, _CMP_LE_OQ);
        _mm512_storeu_ps(y + i, _mm512_min_ps(_mm512_max_ps(v, lo), hi));
    }
}

AVX512 static void bwd_bits(float *g, const uint16_t *m, size_t n) {
    for (size_t i = 0; i < n; i += 16) _mm512_storeu_ps(g + i, _mm512_maskz_mov_ps(m[i / 16], _mm512_loadu_ps(g + i)));
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("usage: %s\n", argv[0]);
        return strcmp(argv[1], "--help") ? 2 : 0;
    }
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) {
        printf("bench_fq_ceiling: this CPU has no AVX-512 (F, BW): nothing measured\n");
        return 0;
    }
    size_t n = (size_t)4 << 20;
    float *x = aligned_alloc(64, n * sizeof(float)), *y = aligned_alloc(64, n * sizeof(float));
    float *g = aligned_alloc(64, n * sizeof(float));
    uint8_t *mb = aligned_alloc(64, n);
    uint16_t *mbit = aligned_alloc(64, n / 8);
    if (!x || !y || !g || !mb || !mbit) return fprintf(stderr, "bench_fq_ceiling: out of memory\n"), 1;
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) / 250.0f - 2.0f, g[i] = 1.0f;
    double t[4] = {1e30, 1e30, 1e30, 1e30};
    for (int it = 0; it < 30; it++) {
        double t0 = bench_now();
        fwd_bytes(x, y, mb, n);
        double t1 = bench_now();
        bwd_bytes(g, mb, n);
        double t2 = bench_now();
        fwd_bits(x, y, mbit, n);
        double t3 = bench_now();
        bwd_bits(g, mbit, n);
        double t4 = bench_now(), d[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
        for (int k = 0; k < 4; k++) t[k] = d[k] < t[k] ? d[k] : t[k];
    }
    double e = (double)n / 1e9;
    printf("fake-quant memory ceiling over 4 M floats, 1 thread (G elements/s)\n");
    printf("  byte mask: forward %.2f, backward in place %.2f, forward+backward %.2f\n", e / t[0], e / t[1],
           e / (t[0] + t[1]));
    printf("  bit mask:  forward %.2f, backward in place %.2f, forward+backward %.2f\n", e / t[2], e / t[3],
           e / (t[2] + t[3]));
    free(x), free(y), free(g), free(mb), free(mbit);
    return 0;
}
#else
int main(void) {
    printf("bench_fq_ceiling: x86-64 with GCC or clang only: nothing measured\n");
    return 0;
}
#endif
