/* The x86-64 sub-channel kernels (subchannel.h), picked at run time:
 * AVX-512 VNNI where the CPU has it, else AVX2, else the portable kernel.
 * They compute the portable kernel's integers exactly (a test compares
 * them on random and extreme data).
 *
 * A kernel block is QAT_SC_ROWS outputs × 16 positions. Within a weight
 * block, pairs of positions (t, t+1) load their two im2col rows,
 * interleave them (unpacklo/hi_epi16) and multiply-add them with the
 * broadcast weight pair: one vpmaddwd (AVX2) or vpdpwssd (VNNI) per 8
 * int32 partial sums. At the end of the block each partial sum is
 * converted by the block's fixed-point multiplier, vectorised: a left
 * shift (the bounds of docs/subchannel.md guarantee it does not
 * saturate, so no saturation is needed to equal the portable MBQM),
 * SRDHM as floor((x·m + 2^30) / 2^31) from two 32×32→64 products per 8
 * lanes, and the rounding right shift; the converted sums add to the
 * row's totals. The final requantization goes through the portable
 * function, one row of 16 at a time. */
#include <string.h>

#include "core/requant.h"
#include "subchannel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define SC_AVX2 __attribute__((target("avx2")))
#define SC_VNNI __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))

/* MBQM(x, m, shift) on 8 lanes, for shift in [-31, 30] and x << max(shift,
 * 0) within int32 (no saturation). */
#define SC_MBQM8(ATTR, NAME)                                                                        \
    ATTR static inline __m256i NAME(__m256i x, __m256i m, int shift) {                               \
        int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;                            \
        x = _mm256_sll_epi32(x, _mm_cvtsi32_si128(left));                                           \
        const __m256i half = _mm256_set1_epi64x(1LL << 30);                                          \
        __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, m), half);                               \
        __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m), half);         \
        even = _mm256_srli_epi64(even, 31);                                                          \
        odd = _mm256_slli_epi64(_mm256_srli_epi64(odd, 31), 32);                                     \
        __m256i v = _mm256_blend_epi32(even, odd, 0xAA);                                             \
        if (right > 0) {                                                                             \
            __m256i mask = _mm256_set1_epi32((int32_t)((1LL << right) - 1));                         \
            __m256i rem = _mm256_and_si256(v, mask);                                                 \
            __m256i thr = _mm256_sub_epi32(_mm256_srai_epi32(mask, 1), _mm256_srai_epi32(v, 31));    \
            v = _mm256_sub_epi32(_mm256_sra_epi32(v, _mm_cvtsi32_si128(right)), _mm256_cmpgt_epi32(rem, thr)); \
        }                                                                                            \
        return v;                                                                                    \
    }

SC_MBQM8(SC_AVX2, mbqm8_avx2)
SC_MBQM8(SC_VNNI, mbqm8_vnni)

/* The parts of the constants, as subchannel.c lays them out. */
static void sc_parts(const qat__sc_shape *s, const void *consts, const int16_t **w16, const int32_t **row,
                     const int32_t **seg) {
    const uint8_t *c = consts;
    int64_t wbytes = qat__round_up(qat__sc_rows(s->O) * s->Ks * (int64_t)sizeof(int16_t), 64);
    int64_t rbytes = qat__round_up(s->Ks * (int64_t)sizeof(int32_t), 64);
    *w16 = (const int16_t *)(const void *)c;
    *row = (const int32_t *)(const void *)(c + wbytes);
    *seg = (const int32_t *)(const void *)(c + wbytes + rbytes);
}

/* Stores row r's 16 totals (lo: positions 0-3, 8-11; hi: 4-7, 12-15, the
 * unpack order) through the portable final requantization. */
#define SC_STORE(ATTR, NAME)                                                                        \
    ATTR static inline void NAME(const qat__sc_args *a, int r, int p0, __m256i lo, __m256i hi) {     \
        int32_t v[16];                                                                               \
        _mm256_storeu_si256((__m256i *)v, _mm256_permute2x128_si256(lo, hi, 0x20));                  \
        _mm256_storeu_si256((__m256i *)(v + 8), _mm256_permute2x128_si256(lo, hi, 0x31));            \
        int64_t o = a->o0 + r;                                                                       \
        int np = a->P - p0 < 16 ? a->P - p0 : 16;                                                     \
        int8_t *out = a->out + r * a->so + p0 * a->sp;                                               \
        for (int l = 0; l < np; l++)                                                                 \
            out[l * a->sp] = (int8_t)qat__requant(v[l], a->op->multiplier[o], a->op->shift[o], a->zp, a->lo, a->hi); \
    }

SC_STORE(SC_AVX2, store_avx2)
SC_STORE(SC_VNNI, store_vnni)

/* The kernel over rows [0, a->O) of the call, QAT_SC_ROWS at a time (the
 * prepared weights have rows up to a multiple of it; a row past the op's
 * last takes the last row's multipliers, and is not stored). */
#define SC_KERNEL(ATTR, NAME, MBQM8, STORE, DOT)                                                    \
    ATTR static void NAME(const qat__sc_args *a) {                                                   \
        const qat_qop *op = a->op;                                                                   \
        qat__sc_shape s;                                                                             \
        qat__sc_shape_of(op, &s);                                                                    \
        const int16_t *w16;                                                                          \
        const int32_t *row, *seg;                                                                    \
        sc_parts(&s, a->consts, &w16, &row, &seg);                                                   \
        const int64_t Pp = a->Pp;                                                                    \
        for (int r0 = 0; r0 < a->O; r0 += QAT_SC_ROWS) {                                             \
            int64_t base[QAT_SC_ROWS];                                                               \
            const int16_t *w[QAT_SC_ROWS];                                                           \
            for (int i = 0; i < QAT_SC_ROWS; i++) {                                                  \
                int64_t o = a->o0 + r0 + i, oc = o < s.O ? o : s.O - 1;                              \
                base[i] = oc / s.rows_per_param * s.J;                                               \
                w[i] = w16 + o * s.Ks;                                                               \
            }                                                                                        \
            for (int p0 = 0; p0 < a->P; p0 += 16) {                                                  \
                __m256i tot[QAT_SC_ROWS][2];                                                         \
                for (int i = 0; i < QAT_SC_ROWS; i++) {                                              \
                    int64_t o = a->o0 + r0 + i;                                                      \
                    tot[i][0] = tot[i][1] = _mm256_set1_epi32(o < s.O ? op->bias[o] : 0);            \
                }                                                                                    \
                for (int64_t j = 0; j < s.J; j++) {                                                  \
                    __m256i acc[QAT_SC_ROWS][2];                                                     \
                    for (int i = 0; i < QAT_SC_ROWS; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256(); \
                    for (int32_t t = seg[j]; t < seg[j + 1]; t += 2) {                               \
                        __m256i r0v = _mm256_loadu_si256((const __m256i *)(a->col + row[t] * Pp + p0));      \
                        __m256i r1v = _mm256_loadu_si256((const __m256i *)(a->col + row[t + 1] * Pp + p0));  \
                        __m256i il = _mm256_unpacklo_epi16(r0v, r1v), ih = _mm256_unpackhi_epi16(r0v, r1v);  \
                        for (int i = 0; i < QAT_SC_ROWS; i++) {                                      \
                            int32_t pair;                                                            \
                            memcpy(&pair, w[i] + t, sizeof pair);                                    \
                            __m256i wp = _mm256_set1_epi32(pair);                                    \
                            acc[i][0] = DOT(acc[i][0], il, wp);                                      \
                            acc[i][1] = DOT(acc[i][1], ih, wp);                                      \
                        }                                                                            \
                    }                                                                                \
                    for (int i = 0; i < QAT_SC_ROWS; i++) {                                          \
                        __m256i m = _mm256_set1_epi32(op->block_multiplier[base[i] + j]);            \
                        int sh = op->block_shift[base[i] + j];                                       \
                        tot[i][0] = _mm256_add_epi32(tot[i][0], MBQM8(acc[i][0], m, sh));            \
                        tot[i][1] = _mm256_add_epi32(tot[i][1], MBQM8(acc[i][1], m, sh));            \
                    }                                                                                \
                }                                                                                    \
                for (int i = 0; i < QAT_SC_ROWS && r0 + i < a->O; i++) STORE(a, r0 + i, p0, tot[i][0], tot[i][1]); \
            }                                                                                        \
        }                                                                                            \
    }

#define DOT_AVX2(acc, x, w) _mm256_add_epi32((acc), _mm256_madd_epi16((x), (w)))
#define DOT_VNNI(acc, x, w) _mm256_dpwssd_epi32((acc), (x), (w))
SC_KERNEL(SC_AVX2, sc_avx2, mbqm8_avx2, store_avx2, DOT_AVX2)
SC_KERNEL(SC_VNNI, sc_vnni, mbqm8_vnni, store_vnni, DOT_VNNI)

static bool has_vnni(void) { return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl"); }
static bool has_avx2(void) { return __builtin_cpu_supports("avx2"); }

void qat__sc_gemm(const qat__sc_args *a) {
    if (has_vnni()) sc_vnni(a);
    else if (has_avx2()) sc_avx2(a);
    else qat__sc_gemm_ref(a);
}

qat__sc_fn qat__sc_kernel(int i, const char **name) {
    static const char *const names[] = {"portable C", "AVX2", "AVX-512 VNNI"};
    qat__sc_fn fns[] = {qat__sc_gemm_ref, has_avx2() ? sc_avx2 : NULL, has_vnni() ? sc_vnni : NULL};
    if (i < 0 || i > 2) return NULL;
    if (name) *name = names[i];
    return fns[i];
}

#else

void qat__sc_gemm(const qat__sc_args *a) { qat__sc_gemm_ref(a); }
qat__sc_fn qat__sc_kernel(int i, const char **name) {
    if (name) *name = "portable C";
    return i == 0 ? qat__sc_gemm_ref : NULL;
}

#endif
