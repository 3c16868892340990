/* The x86-64 sub-channel kernels (subchannel.h), picked at run time:
 * AVX-512 VNNI where the CPU has it, else AVX2, else the portable kernel.
 * They compute the portable kernel's integers exactly (a test compares
 * them on random and extreme data).
 *
 * A kernel block is R output rows × 16 positions (VNNI: R = 8 while the
 * rows last, then 8, 6 or 4 for the rest, as the per-channel kernel; its
 * 32 vector registers hold 8 rows' partial sums; AVX2: R = 4). Within a weight block, pairs of positions (t, t+1) load their two
 * im2col rows, interleave them (unpacklo/hi_epi16) and multiply-add them
 * with the broadcast weight pair: one vpmaddwd (AVX2) or vpdpwssd (VNNI)
 * per 8 int32 partial sums. At the end of the block each partial sum is
 * converted by the block's fixed-point multiplier (with compact block
 * scales the prepared weights carry the sub-scale, and the conversion is
 * the identity), vectorised: a left
 * shift (the bounds of docs/subchannel.md guarantee it does not
 * saturate, so no saturation is needed to equal the portable MBQM),
 * SRDHM as floor((x·m + 2^30) / 2^31) from two 32×32→64 products per 8
 * lanes, and the rounding right shift; the converted sums add to the
 * row's totals. The totals are requantized the same way (a multiplier
 * below 1, as lowering makes them; a larger one goes through the
 * portable function), clamped, packed to bytes and stored. */
#include <string.h>

#include "subchannel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define SC_AVX2 __attribute__((target("avx2")))
#define SC_VNNI __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))
#define SC_INLINE static inline __attribute__((always_inline))

/* MBQM(x, m, shift) on 8 lanes, for shift in [-31, 30] and x << max(shift,
 * 0) within int32 (no saturation). There the two roundings differ only for
 * shift < 0, where the single one is the high word of x·m + 2^(30-shift)
 * shifted right by -shift - 1 (kernels_x86.c's mbqm8 gives the proof). */
#define SC_MBQM8(ATTR, NAME)                                                                        \
    ATTR SC_INLINE __m256i NAME(__m256i x, __m256i m, int shift, bool single) {                      \
        if (shift > 0) x = _mm256_sll_epi32(x, _mm_cvtsi32_si128(shift));                            \
        const __m256i half = _mm256_set1_epi64x(single && shift < 0 ? 1LL << (30 - shift) : 1LL << 30); \
        __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, m), half);                               \
        __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m), half);         \
        if (single && shift < 0)                                                                     \
            return _mm256_sra_epi32(_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA),      \
                                    _mm_cvtsi32_si128(-shift - 1));                                  \
        even = _mm256_srli_epi64(even, 31);                                                          \
        odd = _mm256_slli_epi64(_mm256_srli_epi64(odd, 31), 32);                                     \
        __m256i v = _mm256_blend_epi32(even, odd, 0xAA);                                             \
        if (shift < 0) {                                                                             \
            int right = -shift;                                                                      \
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

/* Row r's 16 totals (t0: positions 0-3, 8-11; t1: 4-7, 12-15, the unpack
 * order) requantized, clamped and stored. */
#define SC_STORE(ATTR, NAME, MBQM8)                                                                 \
    ATTR SC_INLINE void NAME(const qat__sc_args *a, int r, int p0, __m256i t0, __m256i t1) {         \
        int64_t o = a->o0 + r;                                                                       \
        int np = a->P - p0 < 16 ? a->P - p0 : 16;                                                     \
        int8_t *out = a->out + r * a->so + p0 * a->sp;                                               \
        __m256i s0 = _mm256_permute2x128_si256(t0, t1, 0x20), s1 = _mm256_permute2x128_si256(t0, t1, 0x31); \
        int32_t m = a->op->multiplier[o];                                                            \
        int sh = a->op->shift[o];                                                                    \
        int32_t v[16];                                                                               \
        if (sh > 0) { /* a multiplier of 1 or more: the saturating left shift, in scalar code */     \
            _mm256_storeu_si256((__m256i *)v, s0), _mm256_storeu_si256((__m256i *)(v + 8), s1);     \
            for (int l = 0; l < np; l++) out[l * a->sp] = (int8_t)qat_requantize_r(v[l], m, sh, a->zp, a->lo, a->hi, a->single); \
            return;                                                                                  \
        }                                                                                            \
        /* v clamped to [-256, 255] first: no output changes (lo - zp >= -255, hi - zp <= 255), and   \
         * v + zp cannot wrap where the portable code adds in 64 bits */                              \
        const __m256i zp = _mm256_set1_epi32(a->zp), lo = _mm256_set1_epi32(a->lo), hi = _mm256_set1_epi32(a->hi); \
        const __m256i vlo = _mm256_set1_epi32(-256), vhi = _mm256_set1_epi32(255);                   \
        __m256i mv = _mm256_set1_epi32(m);                                                           \
        __m256i v0 = _mm256_min_epi32(_mm256_max_epi32(MBQM8(s0, mv, sh, a->single), vlo), vhi);                \
        __m256i v1 = _mm256_min_epi32(_mm256_max_epi32(MBQM8(s1, mv, sh, a->single), vlo), vhi);                \
        __m256i r0 = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(v0, zp), lo), hi);           \
        __m256i r1 = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(v1, zp), lo), hi);           \
        if (a->sp == 1 && np == 16) { /* clamped to 8 bits: the packs never saturate */              \
            __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);                \
            _mm_storeu_si128((__m128i *)out,                                                         \
                             _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1))); \
            return;                                                                                  \
        }                                                                                            \
        _mm256_storeu_si256((__m256i *)v, r0), _mm256_storeu_si256((__m256i *)(v + 8), r1);         \
        for (int l = 0; l < np; l++) out[l * a->sp] = (int8_t)v[l];                                  \
    }

SC_STORE(SC_AVX2, store_avx2, mbqm8_avx2)
SC_STORE(SC_VNNI, store_vnni, mbqm8_vnni)

/* R rows from row r0 of the call (the prepared weights have rows past the
 * op's last: a block may run past a group's or the op's last row, whose
 * results are not stored; such a row takes the last row's multipliers). */
#define SC_BLOCK(ATTR, NAME, MBQM8, STORE, DOT)                                                     \
    ATTR SC_INLINE void NAME(const qat__sc_args *a, const qat__sc_shape *s, const int16_t *w16,      \
                             const int32_t *row, const int32_t *seg, int r0, const int R) {          \
        const qat_qop *op = a->op;                                                                   \
        const int64_t Pp = a->Pp;                                                                    \
        int64_t base[8];                                                                             \
        const int16_t *w[8];                                                                         \
        for (int i = 0; i < R; i++) {                                                                \
            int64_t o = a->o0 + r0 + i, oc = o < s->O ? o : s->O - 1;                                \
            base[i] = oc / s->rows_per_param * s->J;                                                 \
            w[i] = w16 + o * s->Ks;                                                                  \
        }                                                                                            \
        for (int p0 = 0; p0 < a->P; p0 += 16) {                                                      \
            __m256i tot[8][2];                                                                       \
            for (int i = 0; i < R; i++) {                                                            \
                int64_t o = a->o0 + r0 + i;                                                          \
                tot[i][0] = tot[i][1] = _mm256_set1_epi32(o < s->O ? op->bias[o] : 0);               \
            }                                                                                        \
            const int16_t *cp = a->col + p0;                                                         \
            for (int64_t j = 0; j < s->J; j++) {                                                     \
                __m256i acc[8][2];                                                                   \
                for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();          \
                for (int32_t t = seg[j]; t < seg[j + 1]; t += 2) {                                   \
                    __m256i x0 = _mm256_loadu_si256((const __m256i *)(cp + row[t] * Pp));            \
                    __m256i x1 = _mm256_loadu_si256((const __m256i *)(cp + row[t + 1] * Pp));        \
                    __m256i il = _mm256_unpacklo_epi16(x0, x1), ih = _mm256_unpackhi_epi16(x0, x1);  \
                    for (int i = 0; i < R; i++) {                                                    \
                        int32_t pair;                                                                \
                        memcpy(&pair, w[i] + t, sizeof pair);                                        \
                        __m256i wp = _mm256_set1_epi32(pair);                                        \
                        acc[i][0] = DOT(acc[i][0], il, wp);                                          \
                        acc[i][1] = DOT(acc[i][1], ih, wp);                                          \
                    }                                                                                \
                }                                                                                    \
                if (op->subscale) { /* compact scales: acc is P_j·q_j, the conversion the identity */  \
                    for (int i = 0; i < R; i++) {                                                    \
                        tot[i][0] = _mm256_add_epi32(tot[i][0], acc[i][0]);                          \
                        tot[i][1] = _mm256_add_epi32(tot[i][1], acc[i][1]);                          \
                    }                                                                                \
                    continue;                                                                        \
                }                                                                                    \
                for (int i = 0; i < R; i++) {                                                        \
                    __m256i m = _mm256_set1_epi32(op->block_multiplier[base[i] + j]);                \
                    int sh = op->block_shift[base[i] + j];                                           \
                    tot[i][0] = _mm256_add_epi32(tot[i][0], MBQM8(acc[i][0], m, sh, a->single));                \
                    tot[i][1] = _mm256_add_epi32(tot[i][1], MBQM8(acc[i][1], m, sh, a->single));                \
                }                                                                                    \
            }                                                                                        \
            for (int i = 0; i < R && r0 + i < a->O; i++) STORE(a, r0 + i, p0, tot[i][0], tot[i][1]); \
        }                                                                                            \
    }

#define DOT_AVX2(acc, x, w) _mm256_add_epi32((acc), _mm256_madd_epi16((x), (w)))
#define DOT_VNNI(acc, x, w) _mm256_dpwssd_epi32((acc), (x), (w))
SC_BLOCK(SC_AVX2, block_avx2, mbqm8_avx2, store_avx2, DOT_AVX2)
SC_BLOCK(SC_VNNI, block_vnni, mbqm8_vnni, store_vnni, DOT_VNNI)

SC_AVX2 static void sc_avx2(const qat__sc_args *a) {
    qat__sc_shape s;
    qat__sc_shape_of(a->op, &s);
    const int16_t *w16;
    const int32_t *row, *seg;
    sc_parts(&s, a->consts, &w16, &row, &seg);
    for (int r0 = 0; r0 < a->O; r0 += 4) block_avx2(a, &s, w16, row, seg, r0, 4);
}

SC_VNNI static void sc_vnni(const qat__sc_args *a) {
    qat__sc_shape s;
    qat__sc_shape_of(a->op, &s);
    const int16_t *w16;
    const int32_t *row, *seg;
    sc_parts(&s, a->consts, &w16, &row, &seg);
    int r0 = 0;
    for (; r0 + 8 <= a->O; r0 += 8) block_vnni(a, &s, w16, row, seg, r0, 8);
    int rest = a->O - r0; /* as the per-channel kernel: 8 while they last, then 6 or 4 (LeNet's conv1 has 6) */
    if (rest > 6) block_vnni(a, &s, w16, row, seg, r0, 8);
    else if (rest > 4) block_vnni(a, &s, w16, row, seg, r0, 6);
    else if (rest > 0) block_vnni(a, &s, w16, row, seg, r0, 4);
}

static bool has_vnni(void) { return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl"); }
static bool has_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* The CPU's best kernel at or below QAT_MAX_ISA (qat/core.h). */
void qat__sc_gemm(const qat__sc_args *a) {
    qat_isa cap;
    qat_isa_cap(&cap);
    if (cap >= QAT_ISA_AVX512_VNNI && has_vnni()) sc_vnni(a);
    else if (cap >= QAT_ISA_AVX2 && has_avx2()) sc_avx2(a);
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
