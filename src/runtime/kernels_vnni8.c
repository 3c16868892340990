/* The int8 path's x86 kernels (kernels.h), for CPUs with AVX-512 VNNI,
 * VBMI and VBMI2 (Ice Lake and later, Zen 4 and later): qat__cpu_level()
 * picks them at run time, and every one gives the integers of the portable
 * code (tests/test_kernels8.c checks each against it).
 *
 * vpdpbusd multiplies 64 unsigned bytes by 64 signed bytes and adds each
 * group of 4 products to one of 16 int32 lanes: 64 multiply-adds an
 * instruction, and two a cycle on the machine this was measured on
 * (README: peak). The GEMM keeps an R x 16·TT tile of sums in registers
 * (R·TT <= 24 zmm); per reduction group of 4 it loads TT column vectors
 * and takes each row's 4 weights as a broadcast memory operand.
 *
 * Requantization is vectorised: SRDHM(x, m) is exactly
 * floor((x·m + 2^30) / 2^31) for both signs (C's truncating division with
 * the sign-dependent nudge reduces to it), bits 31..62 of x·m + 2^30; the
 * rounding right shift adds 1 where the remainder passes the threshold
 * mask/2 + (x < 0); the saturating left shift (multipliers >= 1) is the
 * shift where shifting back gives x, else INT32_MIN or INT32_MAX by sign;
 * and clamping to [lo - zp, hi - zp] before adding zp equals the portable
 * code's clamp of the 64-bit zp + v. */
#include <string.h>

#include "core/requant.h"
#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define QAT_VNNI8 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx512vbmi2")))
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    int8_t b[4];
} w4; /* four weights: the asm's memory operand, of a character type (no aliasing question) */

/* acc += u·w, w = the 4 signed bytes at p broadcast to every lane. GCC 12
 * does not fold _mm512_set1_epi32 into vpdpbusd's broadcast operand: it
 * emits a separate vpbroadcastd and runs the tile at a third of the speed
 * (measured); clang folds it. So the one instruction is written out. */
QAT_VNNI8 INLINE __m512i dpbusd_bcast(__m512i acc, __m512i u, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const w4 *)p));
    return acc;
}

/* ---- requantization ------------------------------------------------------------- */

/* SRDHM(x << left saturated, m0) then the rounding right shift: qat__mbqm on
 * 16 lanes with one multiplier and shift. */
QAT_VNNI8 INLINE __m512i mbqm16(__m512i x, int32_t m0, int shift) {
    if (shift > 0) {
        __m128i cnt = _mm_cvtsi32_si128(shift);
        __m512i sh = _mm512_sll_epi32(x, cnt);
        __mmask16 ovf = _mm512_cmpneq_epi32_mask(_mm512_sra_epi32(sh, cnt), x);
        __m512i sat = _mm512_xor_si512(_mm512_srai_epi32(x, 31), _mm512_set1_epi32(INT32_MAX));
        x = _mm512_mask_blend_epi32(ovf, sh, sat);
    }
    const __m512i half = _mm512_set1_epi64(1LL << 30), m = _mm512_set1_epi32(m0);
    __m512i even = _mm512_add_epi64(_mm512_mul_epi32(x, m), half);
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), m), half);
    /* even lanes: bits 31..62 down to 0..31; odd lanes: up to 32..63 */
    __m512i v = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 31), _mm512_slli_epi64(odd, 1));
    int right = shift < 0 ? (shift < -31 ? 31 : -shift) : 0;
    if (right > 0) {
        __m512i mask = _mm512_set1_epi32((int32_t)((1LL << right) - 1));
        __m512i rem = _mm512_and_si512(v, mask);
        __m512i thr = _mm512_sub_epi32(_mm512_srai_epi32(mask, 1), _mm512_srai_epi32(v, 31));
        __m512i q = _mm512_sra_epi32(v, _mm_cvtsi32_si128(right));
        v = _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, thr), q, _mm512_set1_epi32(1));
    }
    return v;
}

/* clamp(zp + v, lo, hi) without the 64-bit sum: v clamped to [lo - zp, hi - zp] first */
QAT_VNNI8 INLINE __m512i clamp_zp16(__m512i v, int32_t zp, int32_t lo, int32_t hi) {
    v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo - zp)), _mm512_set1_epi32(hi - zp));
    return _mm512_add_epi32(v, _mm512_set1_epi32(zp));
}

QAT_VNNI8 INLINE __m512i requant16(__m512i x, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi) {
    return clamp_zp16(mbqm16(x, m0, shift), zp, lo, hi);
}

/* The same with a multiplier and shift per lane (linear: lanes are outputs). */
QAT_VNNI8 INLINE __m512i requant16_lanes(__m512i x, __m512i m, __m512i shift, int32_t zp, int32_t lo, int32_t hi) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    __m512i left = _mm512_max_epi32(shift, zero), right = _mm512_min_epi32(_mm512_sub_epi32(zero, shift), _mm512_set1_epi32(31));
    right = _mm512_max_epi32(right, zero);
    __m512i sh = _mm512_sllv_epi32(x, left);
    __mmask16 ovf = _mm512_cmpneq_epi32_mask(_mm512_srav_epi32(sh, left), x);
    __m512i sat = _mm512_xor_si512(_mm512_srai_epi32(x, 31), _mm512_set1_epi32(INT32_MAX));
    x = _mm512_mask_blend_epi32(ovf, sh, sat);
    const __m512i half = _mm512_set1_epi64(1LL << 30);
    __m512i even = _mm512_add_epi64(_mm512_mul_epi32(x, m), half);
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32)), half);
    __m512i v = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 31), _mm512_slli_epi64(odd, 1));
    __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    __m512i rem = _mm512_and_si512(v, mask);
    __m512i thr = _mm512_sub_epi32(_mm512_srai_epi32(mask, 1), _mm512_srai_epi32(v, 31));
    __m512i q = _mm512_srav_epi32(v, right);
    v = _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, thr), q, one);
    return clamp_zp16(v, zp, lo, hi);
}

QAT_VNNI8 void qat__requant16_avx512(const int32_t *acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi,
                                     int32_t *y) {
    __m512i v = requant16(_mm512_loadu_si512(acc), m0, shift, zp, lo, hi);
    _mm512_storeu_si512(y, v);
    /* and the per-lane form, lanes all alike, must agree */
    __m512i w = requant16_lanes(_mm512_loadu_si512(acc), _mm512_set1_epi32(m0), _mm512_set1_epi32(shift), zp, lo, hi);
    if (_mm512_cmpneq_epi32_mask(v, w)) _mm512_storeu_si512(y, _mm512_set1_epi32(INT32_MIN)); /* the test fails */
}

/* ---- stores through the position map ---------------------------------------------- */

/* The 16 output bytes of chunk c of one output channel (out: its channel 0
 * position 0 plus the channel's offset). A segment's lanes are moved to the
 * bottom (vpcompressb) and stored with a mask: no byte outside it is written. */
QAT_VNNI8 INLINE void store16(int8_t *out, __m128i b, const qat__posmap *map, int64_t c) {
    int32_t s = map->first[c], e = map->first[c + 1];
    if (e - s == 1 && map->seg[s].n == 16) {
        _mm_storeu_si128((__m128i *)(void *)(out + map->seg[s].dst), b);
        return;
    }
    for (; s < e; s++) {
        const qat__seg *g = &map->seg[s];
        __mmask16 sel = (__mmask16)(((1u << g->n) - 1) << g->lane);
        _mm_mask_storeu_epi8(out + g->dst, (__mmask16)((1u << g->n) - 1), _mm_maskz_compress_epi8(sel, b));
    }
}

/* ---- the convolution GEMM --------------------------------------------------------- */

QAT_VNNI8 INLINE void gemm_tile(const qat__gemm8_args *a, int blk, int64_t q0, const int R, const int TT) {
    __m512i acc[16][4];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) acc[r][t] = _mm512_setzero_si512();
    const uint8_t *col = a->col + 4 * q0;
    const int8_t *w = a->w + (int64_t)blk * a->K4 * R * 4;
    for (int k = 0; k < a->K4; k++, w += 4 * R) {
        const uint8_t *ck = col + a->koff[k];
        __m512i u[4];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) u[t] = _mm512_loadu_si512(ck + 64 * t);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) acc[r][t] = dpbusd_bcast(acc[r][t], u[t], w + 4 * r);
    }
    int64_t c0 = q0 / 16;
    for (int r = 0; r < R; r++) {
        int o = blk * R + r;
        if (o >= a->O) break;
        __m512i b = _mm512_set1_epi32(a->bias8[o]);
        int8_t *out = a->out + o * a->so;
        for (int t = 0; t < TT && c0 + t < a->map->chunks; t++) {
            __m512i v = requant16(_mm512_add_epi32(acc[r][t], b), a->m0[o], a->shift[o], a->zp, a->lo, a->hi);
            store16(out, _mm512_cvtepi32_epi8(v), a->map, c0 + t);
        }
    }
}

#define GEMM_KERNEL(R, TT)                                                                   \
    QAT_VNNI8 static void gemm_##R##x##TT(const qat__gemm8_args *a) {                        \
        int blocks = (a->O + R - 1) / R;                                                     \
        for (int64_t q0 = 0; q0 < a->Q; q0 += 16 * TT)                                       \
            for (int blk = 0; blk < blocks; blk++) gemm_tile(a, blk, q0, R, TT);             \
    }
GEMM_KERNEL(4, 4)
GEMM_KERNEL(8, 3)
GEMM_KERNEL(12, 2)
GEMM_KERNEL(16, 1)

void qat__gemm8_vnni(const qat__gemm8_args *a) {
    if (a->R == 4 && a->TT == 4) gemm_4x4(a);
    else if (a->R == 8 && a->TT == 3) gemm_8x3(a);
    else if (a->R == 12 && a->TT == 2) gemm_12x2(a);
    else if (a->R == 16 && a->TT == 1) gemm_16x1(a);
    else qat__gemm8_ref(a);
}

/* ---- depthwise ----------------------------------------------------------------------- */

/* Four chunks (64 positions) of one channel at a time. A tap row's 4
 * weights multiply the 4 bytes at step·q .. step·q + 3 for each position
 * q: one 64-byte load and a vpermb that gives lane j the window at
 * step·j put them in the lanes (step <= 4: windows end by byte 63). */
QAT_VNNI8 void qat__dw8_vnni(const qat__dw8_args *a) {
    int8_t idx_b[64];
    for (int i = 0; i < 64; i++) idx_b[i] = (int8_t)((i / 4) * a->step + i % 4);
    const __m512i idx = _mm512_loadu_si512(idx_b);
    const int64_t stride = 16 * (int64_t)a->step; /* bytes between chunks */
    for (int o = 0; o < a->O; o++) {
        const uint8_t *pl = a->planes + (int64_t)(o / a->mult) * a->cstride;
        const int8_t *w = a->w + (int64_t)o * a->T * 4;
        const __m512i b = _mm512_set1_epi32(a->bias8[o]);
        int8_t *out = a->out + o * a->so;
        for (int64_t c = 0; c < a->map->chunks; c += 4) {
            __m512i acc0 = b, acc1 = b, acc2 = b, acc3 = b;
            const uint8_t *p = pl + c * stride;
            for (int t = 0; t < a->T; t++) {
                const uint8_t *pt = p + a->tap[t];
                acc0 = dpbusd_bcast(acc0, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt)), w + 4 * t);
                acc1 = dpbusd_bcast(acc1, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + stride)), w + 4 * t);
                acc2 = dpbusd_bcast(acc2, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + 2 * stride)), w + 4 * t);
                acc3 = dpbusd_bcast(acc3, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + 3 * stride)), w + 4 * t);
            }
            __m512i accs[4] = {acc0, acc1, acc2, acc3};
            for (int i = 0; i < 4 && c + i < a->map->chunks; i++) {
                __m512i v = requant16(accs[i], a->m0[o], a->shift[o], a->zp, a->lo, a->hi);
                store16(out, _mm512_cvtepi32_epi8(v), a->map, c + i);
            }
        }
    }
}

/* ---- linear ------------------------------------------------------------------------ */

/* Σ_k x_k of a row of K signed bytes: vpsadbw of x ^ 0x80 against 0 sums
 * 8 bytes of x + 128 into each 64-bit lane. */
QAT_VNNI8 INLINE int32_t row_sum(const int8_t *x, int K) {
    const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    __m512i s = zero;
    int k = 0;
    for (; k + 64 <= K; k += 64)
        s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(x + k), flip), zero));
    if (k < K) {
        __mmask64 m = _cvtu64_mask64((~0ULL) >> (64 - (K - k)));
        /* masked-off bytes load as 0 and flip to 128: subtract them below */
        s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + k), flip), zero));
        k += 64;
    }
    return (int32_t)((uint32_t)_mm512_reduce_add_epi64(s) - 128u * (uint32_t)k);
}

QAT_VNNI8 INLINE void linear_tile(const qat__linear8_args *a, int s0, int ob, const int TT) {
    enum { R = 8 };
    const int8_t *x[R];
    int32_t sx[R];
    for (int r = 0; r < R; r++) {
        int s = s0 + r < a->n ? s0 + r : a->n - 1; /* rows past n repeat the last one; not stored */
        x[r] = s == a->n - 1 && a->last ? a->last : a->x + (int64_t)s * a->K;
        sx[r] = row_sum(x[r], a->K);
    }
    __m512i acc[R][3];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < TT; t++) acc[r][t] = _mm512_setzero_si512();
    const uint8_t *wu = a->wu + (int64_t)ob * a->K4 * 64;
    for (int k = 0; k < a->K4; k++) {
        __m512i wv[3];
#pragma GCC unroll 3
        for (int t = 0; t < TT; t++) wv[t] = _mm512_loadu_si512(wu + ((int64_t)t * a->K4 + k) * 64);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 3
            for (int t = 0; t < TT; t++) acc[r][t] = dpbusd_bcast(acc[r][t], wv[t], x[r] + 4 * k);
    }
    for (int t = 0; t < TT; t++) {
        int o0 = (ob + t) * 16;
        if (o0 >= a->O) break;
        __mmask16 keep = (__mmask16)(a->O - o0 >= 16 ? 0xFFFF : (1u << (a->O - o0)) - 1);
        __m512i b = _mm512_maskz_loadu_epi32(keep, a->bias8 + o0);
        __m512i m = _mm512_maskz_loadu_epi32(keep, a->m0 + o0), sh = _mm512_maskz_loadu_epi32(keep, a->shift + o0);
        for (int r = 0; r < R && s0 + r < a->n; r++) {
            __m512i v = _mm512_sub_epi32(_mm512_add_epi32(acc[r][t], b), _mm512_set1_epi32((int32_t)(128u * (uint32_t)sx[r])));
            v = requant16_lanes(v, m, sh, a->zp, a->lo, a->hi);
            _mm_mask_storeu_epi8(a->out + (int64_t)(s0 + r) * a->O + o0, keep, _mm512_cvtepi32_epi8(v));
        }
    }
}

QAT_VNNI8 static void linear_1(const qat__linear8_args *a, int s0, int ob) { linear_tile(a, s0, ob, 1); }
QAT_VNNI8 static void linear_2(const qat__linear8_args *a, int s0, int ob) { linear_tile(a, s0, ob, 2); }
QAT_VNNI8 static void linear_3(const qat__linear8_args *a, int s0, int ob) { linear_tile(a, s0, ob, 3); }

void qat__linear8_vnni(const qat__linear8_args *a) {
    int blocks = (a->O + 15) / 16;
    for (int s0 = 0; s0 < a->n; s0 += 8)
        for (int ob = 0; ob < blocks; ob += a->TT) {
            int tt = blocks - ob < a->TT ? blocks - ob : a->TT;
            if (tt == 3) linear_3(a, s0, ob);
            else if (tt == 2) linear_2(a, s0, ob);
            else linear_1(a, s0, ob);
        }
}

/* ---- element-wise ops ---------------------------------------------------------------- */

/* TFLite's ADD, 16 elements at a time (qat__add_s8's operations in its order). */
QAT_VNNI8 void qat__add_s8_avx512(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y) {
    const __m512i zpa = _mm512_set1_epi32(r->zp_a), zpb = _mm512_set1_epi32(r->zp_b);
    const __m128i ls = _mm_cvtsi32_si128(r->left_shift);
    int64_t i = 0;
    for (; i < n; i += 16) {
        __mmask16 keep = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
        __m512i xa = _mm512_sll_epi32(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(keep, a + i)), zpa), ls);
        __m512i xb = _mm512_sll_epi32(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(keep, b + i)), zpb), ls);
        __m512i sum = _mm512_add_epi32(mbqm16(xa, r->m_a, r->sh_a), mbqm16(xb, r->m_b, r->sh_b));
        __m512i v = requant16(sum, r->m_out, r->sh_out, r->zp_out, r->lo, r->hi);
        _mm_mask_storeu_epi8(y + i, keep, _mm512_cvtepi32_epi8(v));
    }
}

QAT_VNNI8 void qat__requant_s8_avx512(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y) {
    const __m512i zp = _mm512_set1_epi32(r->zp_in);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 keep = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
        __m512i v = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(keep, x + i)), zp);
        v = requant16(v, r->m0, r->shift, r->zp_out, r->lo, r->hi);
        _mm_mask_storeu_epi8(y + i, keep, _mm512_cvtepi32_epi8(v));
    }
}

QAT_VNNI8 void qat__global_avgpool_s8_avx512(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    for (int c = 0; c < C; c++) {
        int32_t sum = row_sum(x + (int64_t)c * HW, HW); /* |sum| <= 128·HW: the planner bounds HW */
        sum -= r->zp_in * HW;
        y[c] = (int8_t)qat__requant(sum, r->m0, r->shift, r->zp_out, r->lo, r->hi);
    }
}

/* ---- planes ------------------------------------------------------------------------ */

void qat__planes_u8_avx512(const int8_t *x, const qat__planes_args *a, uint8_t *dst) { qat__planes_u8(x, a, dst); }

#else

void qat__gemm8_vnni(const qat__gemm8_args *a) { qat__gemm8_ref(a); }
void qat__dw8_vnni(const qat__dw8_args *a) { qat__dw8_ref(a); }
void qat__linear8_vnni(const qat__linear8_args *a) { qat__linear8_ref(a); }
void qat__planes_u8_avx512(const int8_t *x, const qat__planes_args *a, uint8_t *dst) { qat__planes_u8(x, a, dst); }
void qat__add_s8_avx512(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y) {
    qat__add_s8(a, b, n, r, y);
}
void qat__requant_s8_avx512(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y) {
    qat__requant_s8(x, n, r, y);
}
void qat__global_avgpool_s8_avx512(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    qat__global_avgpool_s8(x, C, HW, r, y);
}
void qat__requant16_avx512(const int32_t *acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi, int32_t *y) {
    for (int i = 0; i < 16; i++) y[i] = qat__requant(acc[i], m0, shift, zp, lo, hi);
}

#endif
