/* The int8 path's x86 kernels (kernels.h), for CPUs with AVX-512 VNNI,
 * VBMI and VBMI2 (Ice Lake and later, Zen 4 and later): qat__cpu_level()
 * picks them at run time, and every one gives the integers of the portable
 * code (tests/test_kernels8.c checks each against it).
 *
 * vpdpbusd multiplies 64 unsigned bytes by 64 signed bytes and adds each
 * group of 4 products to one of 16 int32 lanes: 64 multiply-adds an
 * instruction, and two a cycle on the machine this was measured on
 * (README: peak). The GEMM keeps an R x 16·TT tile of sums in 16 zmm
 * registers; per reduction group of 4 it loads TT column vectors and
 * broadcasts each row's 4 weights.
 *
 * Requantization is vectorised, exactly the portable arithmetic: the
 * epilogues take SRDHM and the rounding right shift as one 64-bit floor
 * (mbqm16 gives the proof; qat__rq holds its constants per channel); the
 * linear layers' per-lane form (requant16_lanes) keeps the two roundings:
 * SRDHM(x, m) is floor((x·m + 2^30) / 2^31) for both signs (C's truncating
 * division with the sign-dependent nudge reduces to it), and the rounding
 * right shift adds 1 where the remainder passes mask/2 + (x < 0). The
 * saturating left shift (multipliers >= 1) is the shift where shifting
 * back gives x, else INT32_MIN or INT32_MAX by sign; clamping to
 * [lo - zp, hi - zp] before adding zp equals the portable code's clamp of
 * the 64-bit zp + v. */
#include <string.h>

#include "kernels.h"
#include "qk.h"

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

/* The 4 weights at p in every lane, for several vpdpbusd (a tile with more
 * than one column vector: measured faster than a broadcast operand in each). */
QAT_VNNI8 INLINE __m512i bcast4(const void *p) {
    __m512i r;
    __asm__("vpbroadcastd %1, %0" : "=v"(r) : "m"(*(const w4 *)p));
    return r;
}

QAT_VNNI8 INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(w));
    return acc;
}

/* ---- requantization ------------------------------------------------------------- */

/* qat_multiply_by_quantized_multiplier on 16 lanes with one multiplier m0 and shift: SRDHM(x << left
 * saturated, m0), then the rounding right shift by r = -shift, as one
 * floor. With P = x·m0 (exact in 64 bits) and v = SRDHM = floor((P + 2^30) / 2^31),
 * RoundingDivideByPOT(v, r) = floor((v + 2^(r-1) - [v < 0]) / 2^r) for r >= 1
 * (half up for v >= 0, half away from zero below), and since
 * floor((floor(A / B) + C) / D) = floor((A + C·B) / (B·D)) for integers,
 *     result = (P + 2^30 + 2^(30+r) - [v < 0]·2^31) >> (31 + r)    (r >= 1)
 *     result = (P + 2^30) >> 31                                      (r = 0)
 * in 64-bit arithmetic (|P| < 2^62: no overflow). [v < 0] is [P < -2^30];
 * taking [P < 0] instead changes nothing: the two differ only for
 * -2^30 <= P < 0, where both sums lie in [0, 2^(31+r)) and shift to 0.
 * Even lanes come out in the low half of each 64-bit lane; the odd lanes'
 * result is the high half of P' >> (r - 1) (floor of a floor). m0 < 2^31:
 * SRDHM's one overflow (INT32_MIN·INT32_MIN) cannot happen. */
QAT_VNNI8 INLINE __m512i mbqm16(__m512i x, int32_t m0, int shift) {
    if (shift > 0) {
        __m128i cnt = _mm_cvtsi32_si128(shift);
        __m512i sh = _mm512_sll_epi32(x, cnt);
        __mmask16 ovf = _mm512_cmpneq_epi32_mask(_mm512_sra_epi32(sh, cnt), x);
        __m512i sat = _mm512_xor_si512(_mm512_srai_epi32(x, 31), _mm512_set1_epi32(INT32_MAX));
        x = _mm512_mask_blend_epi32(ovf, sh, sat);
    }
    const __m512i m = _mm512_set1_epi64(m0);
    __m512i pe = _mm512_mul_epi32(x, m), po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), m);
    int right = shift < 0 ? (shift < -31 ? 31 : -shift) : 0;
    if (right == 0) {
        const __m512i n = _mm512_set1_epi64(1LL << 30);
        pe = _mm512_add_epi64(pe, n), po = _mm512_add_epi64(po, n);
        return _mm512_mask_blend_epi32(0xAAAA, _mm512_srai_epi64(pe, 31), _mm512_slli_epi64(po, 1));
    }
    const __m512i n = _mm512_set1_epi64((1LL << 30) + (1LL << (30 + right))), c = _mm512_set1_epi64(1LL << 31);
    __m512i te = _mm512_add_epi64(pe, n), to = _mm512_add_epi64(po, n);
    te = _mm512_mask_sub_epi64(te, _mm512_movepi64_mask(pe), te, c);
    to = _mm512_mask_sub_epi64(to, _mm512_movepi64_mask(po), to, c);
    __m512i even = _mm512_sra_epi64(te, _mm_cvtsi32_si128(31 + right));
    __m512i odd = _mm512_sra_epi64(to, _mm_cvtsi32_si128(right - 1));
    return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

/* clamp(zp + v, lo, hi) without the 64-bit sum: v clamped to [lo - zp, hi - zp] first */
QAT_VNNI8 INLINE __m512i clamp_zp16(__m512i v, int32_t zp, int32_t lo, int32_t hi) {
    v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo - zp)), _mm512_set1_epi32(hi - zp));
    return _mm512_add_epi32(v, _mm512_set1_epi32(zp));
}

/* The even lanes' and the odd lanes' 64-bit results, saturated to int32,
 * back in lane order. */
QAT_VNNI8 INLINE __m512i sat_pairs16(__m512i even, __m512i odd) {
    const __m512i lo = _mm512_set1_epi64(INT32_MIN), hi = _mm512_set1_epi64(INT32_MAX);
    even = _mm512_min_epi64(_mm512_max_epi64(even, lo), hi), odd = _mm512_min_epi64(_mm512_max_epi64(odd, lo), hi);
    return _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

/* qat_multiply_by_quantized_multiplier_single on 16 lanes: the exact
 * products x·m0 (even and odd lanes apart), plus 2^(s-1), shifted right by
 * s = 31 - shift (1..62) arithmetically, saturated to int32. */
QAT_VNNI8 INLINE __m512i mbqm16_single(__m512i x, int32_t m0, int shift) {
    int s = 31 - (shift < -31 ? -31 : shift > 30 ? 30 : shift);
    const __m512i m = _mm512_set1_epi64(m0), n = _mm512_set1_epi64(1LL << (s - 1));
    const __m128i cnt = _mm_cvtsi32_si128(s);
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(x, m), n);
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), m), n);
    return sat_pairs16(_mm512_sra_epi64(pe, cnt), _mm512_sra_epi64(po, cnt));
}

QAT_VNNI8 INLINE __m512i requant16(__m512i x, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi, bool single) {
    return clamp_zp16(single ? mbqm16_single(x, m0, shift) : mbqm16(x, m0, shift), zp, lo, hi);
}

/* The single rounding with a multiplier and shift per lane. */
QAT_VNNI8 INLINE __m512i requant16_lanes_single(__m512i x, __m512i m, __m512i shift, int32_t zp, int32_t lo,
                                                int32_t hi) {
    __m512i s = _mm512_sub_epi32(_mm512_set1_epi32(31),
                                 _mm512_max_epi32(_mm512_min_epi32(shift, _mm512_set1_epi32(30)), _mm512_set1_epi32(-31)));
    const __m512i low = _mm512_set1_epi64(0xFFFFFFFFLL), one = _mm512_set1_epi64(1);
    __m512i se = _mm512_and_si512(s, low), so = _mm512_srli_epi64(s, 32);
    __m512i ne = _mm512_sllv_epi64(one, _mm512_sub_epi64(se, one)), no = _mm512_sllv_epi64(one, _mm512_sub_epi64(so, one));
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(x, m), ne);
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32)), no);
    return clamp_zp16(sat_pairs16(_mm512_srav_epi64(pe, se), _mm512_srav_epi64(po, so)), zp, lo, hi);
}

/* The same with a multiplier and shift per lane (linear: lanes are outputs). */
QAT_VNNI8 INLINE __m512i requant16_lanes(__m512i x, __m512i m, __m512i shift, int32_t zp, int32_t lo, int32_t hi,
                                         bool single) {
    if (single) return requant16_lanes_single(x, m, shift, zp, lo, hi);
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

/* ---- stores through the position map ---------------------------------------------- */

/* One chunk's segments, read once per tile: the stores go through int8_t
 * pointers, which may alias anything, so the compiler would reload the
 * map (and every argument) after each store. */
typedef struct {
    const qat__seg *seg;
    int n;              /* segments; 0: nothing stored (a chunk of dropped positions, or past the end) */
    __mmask16 sel, put; /* the first segment's lanes, and as many bytes from the bottom */
    int64_t dst;        /* its destination */
} chunk_segs;

QAT_VNNI8 INLINE chunk_segs chunk_of(const qat__posmap *map, int64_t c) {
    chunk_segs r = {0};
    if (c >= map->chunks) return r;
    int32_t s = map->first[c];
    r.seg = map->seg + s, r.n = map->first[c + 1] - s;
    if (r.n) {
        r.sel = (__mmask16)r.seg[0].mask, r.put = (__mmask16)((1u << __builtin_popcount(r.seg[0].mask)) - 1);
        r.dst = r.seg[0].dst;
    }
    return r;
}

/* The 16 output bytes of a chunk of one output channel (out: the channel's
 * position 0). A segment's lanes are packed to the bottom (vpcompressb)
 * and stored with a mask: no byte outside it is written. A whole chunk is
 * a segment of all 16 lanes (a branch here cost more than the compress). */
QAT_VNNI8 INLINE void store16(int8_t *out, __m128i b, const chunk_segs *c) {
    _mm_mask_storeu_epi8(out + c->dst, c->put, _mm_maskz_compress_epi8(c->sel, b));
    for (int s = 1; __builtin_expect(s < c->n, 0); s++) { /* the next sample's positions */
        const qat__seg *g = &c->seg[s];
        _mm_mask_storeu_epi8(out + g->dst, (__mmask16)((1u << __builtin_popcount(g->mask)) - 1),
                             _mm_maskz_compress_epi8((__mmask16)g->mask, b));
    }
}

/* The clamps and zp of an op, as the epilogues use them. */
typedef struct {
    __m512i lo_zp, hi_zp, zp, even_odd;
    __m128i lo8, hi8;
} clamp16;

QAT_VNNI8 INLINE clamp16 clamp_of(int32_t zp, int32_t lo, int32_t hi) {
    int32_t idx[16]; /* dword i: the low half of 64-bit lane i/2 of the even (i even) or odd (i odd) results */
    for (int i = 0; i < 16; i++) idx[i] = i % 2 ? 16 + i - 1 : i;
    return (clamp16){_mm512_set1_epi32(lo - zp), _mm512_set1_epi32(hi - zp), _mm512_set1_epi32(zp),
                     _mm512_loadu_si512(idx), _mm_set1_epi8((char)lo), _mm_set1_epi8((char)hi)};
}

/* clamp(zp + mbqm(x)) as bytes, x the sum that started at the bias, from
 * a prepared qat__rq: mbqm16's formula with its constants precomputed and
 * zp inside n (fold), so the two halves' 64-bit results are the output
 * integers before the clamp: vpmovsqb saturates them to int8 (exactly the
 * clamp to [-128, 127]), the bytes interleave back into lane order, and
 * [lo, hi] is a byte max and min. Without fold (s > 53: multipliers below
 * 2^-22), the 32-bit path of mbqm16. */
QAT_VNNI8 INLINE __m128i requant_rq(__m512i x, const qat__rq *q, const clamp16 *k) {
    if (__builtin_expect(q->left != 0, 0)) {
        __m128i cnt = _mm_cvtsi32_si128(q->left);
        __m512i sh = _mm512_sll_epi32(x, cnt);
        __mmask16 ovf = _mm512_cmpneq_epi32_mask(_mm512_sra_epi32(sh, cnt), x);
        __m512i sat = _mm512_xor_si512(_mm512_srai_epi32(x, 31), _mm512_set1_epi32(INT32_MAX));
        x = _mm512_mask_blend_epi32(ovf, sh, sat);
    }
    const __m512i m = _mm512_set1_epi64(q->m0), n = _mm512_set1_epi64(q->n), c = _mm512_set1_epi64(q->c),
                  s = _mm512_set1_epi64(q->s);
    __m512i pe = _mm512_mul_epi32(x, m), po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), m);
    __m512i te = _mm512_add_epi64(pe, n), to = _mm512_add_epi64(po, n);
    /* the correction c where P < 0 from P's sign by shifts (all ones, and c):
     * measured faster than a mask register next to the vpdpbusd of the sums;
     * none under a clamp at or above zp (qat__rq_make) */
    if (q->c) {
        te = _mm512_sub_epi64(te, _mm512_and_si512(_mm512_srai_epi64(pe, 63), c));
        to = _mm512_sub_epi64(to, _mm512_and_si512(_mm512_srai_epi64(po, 63), c));
    }
    te = _mm512_srav_epi64(te, s), to = _mm512_srav_epi64(to, s);
    if (__builtin_expect(q->fold != 0, 1)) {
        __m128i b = _mm_unpacklo_epi8(_mm512_cvtsepi64_epi8(te), _mm512_cvtsepi64_epi8(to));
        return _mm_min_epi8(_mm_max_epi8(b, k->lo8), k->hi8);
    }
    __m512i v = _mm512_permutex2var_epi32(te, k->even_odd, to);
    v = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(v, k->lo_zp), k->hi_zp), k->zp);
    return _mm512_cvtepi32_epi8(v);
}

QAT_VNNI8 void qat__requant16_avx512(const int32_t *acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi,
                                     bool single, int32_t *y) {
    __m512i v = requant16(_mm512_loadu_si512(acc), m0, shift, zp, lo, hi, single);
    _mm512_storeu_si512(y, v);
    /* and the prepared record's form, and the per-lane form, lanes all alike, must agree */
    const clamp16 k = clamp_of(zp, lo, hi);
    qat__rq q = qat__rq_make(0, m0, shift, zp, lo, single);
    if (_mm512_cmpneq_epi32_mask(v, _mm512_cvtepi8_epi32(requant_rq(_mm512_loadu_si512(acc), &q, &k))))
        _mm512_storeu_si512(y, _mm512_set1_epi32(INT32_MIN)); /* the test fails */
    __m512i w = requant16_lanes(_mm512_loadu_si512(acc), _mm512_set1_epi32(m0), _mm512_set1_epi32(shift), zp, lo, hi,
                                single);
    if (_mm512_cmpneq_epi32_mask(v, w)) _mm512_storeu_si512(y, _mm512_set1_epi32(INT32_MIN)); /* the test fails */
}

/* ---- the convolution GEMM --------------------------------------------------------- */

/* The tile whose requantization is pending: its sums (in memory), where
 * they go, and which rows are left. */
typedef struct {
    int rows;
    int8_t *out;
    const qat__rq *rq;
    chunk_segs ch[4];
} pending;

/* Requantizes and stores row r of the pending tile. */
QAT_VNNI8 INLINE void pending_row(const pending *p, const __m512i *sums, int r, const int TT, int64_t so,
                                  const clamp16 *k) {
#pragma GCC unroll 4
    for (int t = 0; t < TT; t++)
        if (p->ch[t].n) store16(p->out + r * so, requant_rq(sums[r * TT + t], p->rq + r, k), &p->ch[t]);
}

/* One tile's sums, R rows x 16·TT positions from q0, 16 accumulators.
 * While they add up, the previous tile's rows are requantized and stored,
 * one per k (the rest after the loop): the requantization's multiplies
 * share two pipes with vpdpbusd, its other operations do not, and done
 * after the sums they ran one tile after another (measured: a third of
 * the time of a 1x1 convolution). */
QAT_VNNI8 INLINE void gemm_tile(const qat__gemm8_args *a, int blk, int64_t q0, const int R, const int TT,
                                pending *p, __m512i *sums, const clamp16 *k) {
    __m512i acc[16][4];
    const qat__rq *rq = a->rq + blk * R;
    int rows = a->O - blk * R < R ? a->O - blk * R : R;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        __m512i b = _mm512_set1_epi32(r < rows ? rq[r].bias : 0); /* the sums start at the bias */
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) acc[r][t] = b;
    }
    const uint8_t *col = a->col + 4 * q0;
    const int8_t *w = a->w + (int64_t)blk * a->K4 * R * 4;
    const int32_t *koff = a->koff;
    const int64_t so = a->so;
    const int K4 = a->K4, left = p->rows;
    for (int kk = 0; kk < K4; kk++, w += 4 * R) {
        const uint8_t *ck = col + koff[kk];
        __m512i u[4];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) u[t] = _mm512_loadu_si512(ck + 64 * t);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            if (TT == 1) {
                acc[r][0] = dpbusd_bcast(acc[r][0], u[0], w + 4 * r);
                continue;
            }
            __m512i wr = bcast4(w + 4 * r);
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) acc[r][t] = dpbusd(acc[r][t], u[t], wr);
        }
        if (kk < left) pending_row(p, sums, kk, TT, so, k);
    }
    for (int r = K4; r < left; r++) pending_row(p, sums, r, TT, so, k);
    /* this tile becomes the pending one: everything the stores could alias, read first */
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) sums[r * TT + t] = acc[r][t];
    p->rows = rows, p->out = a->out + blk * R * so, p->rq = rq;
#pragma GCC unroll 4
    for (int t = 0; t < TT; t++) p->ch[t] = chunk_of(a->map, q0 / 16 + t);
}

#define GEMM_KERNEL(R, TT)                                                                   \
    QAT_VNNI8 static void gemm_##R##x##TT(const qat__gemm8_args *a) {                        \
        __m512i sums[16];                                                                    \
        pending p = {0};                                                                     \
        const clamp16 k = clamp_of(a->zp, a->lo, a->hi);                                     \
        int blocks = (a->O + R - 1) / R;                                                     \
        for (int64_t q0 = 0; q0 < a->Q; q0 += 16 * TT)                                       \
            for (int blk = 0; blk < blocks; blk++) gemm_tile(a, blk, q0, R, TT, &p, sums, &k); \
        for (int r = 0; r < p.rows; r++) pending_row(&p, sums, r, TT, a->so, &k);           \
    }
GEMM_KERNEL(4, 4)
GEMM_KERNEL(8, 2)
GEMM_KERNEL(16, 1)

void qat__gemm8_vnni(const qat__gemm8_args *a) {
    if (a->R == 4 && a->TT == 4) gemm_4x4(a);
    else if (a->R == 8 && a->TT == 2) gemm_8x2(a);
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
    const int64_t stride = 16 * (int64_t)a->step, chunks = a->map->chunks, so = a->so; /* bytes between chunks */
    const int T = a->T, O = a->O, mult = a->mult;
    const int32_t *tap = a->tap;
    const clamp16 k = clamp_of(a->zp, a->lo, a->hi);
    const uint8_t *planes = a->planes;
    int8_t *out0 = a->out;
    enum { BLOCK = 64 }; /* chunks: each channel's stacks are read in runs of 64·16 positions */
    chunk_segs ch[BLOCK];
    for (int64_t c0 = 0; c0 < chunks; c0 += BLOCK) {
        int64_t nb = chunks - c0 < BLOCK ? chunks - c0 : BLOCK;
        for (int i = 0; i < BLOCK; i++) ch[i] = chunk_of(a->map, c0 + i);
        for (int o = 0; o < O; o++) {
            const uint8_t *p0 = planes + (int64_t)(o / mult) * a->cstride + c0 * stride;
            const int8_t *w = a->w + (int64_t)o * T * 4;
            const qat__rq *q = a->rq + o;
            int8_t *out = out0 + o * so;
            for (int64_t c = 0; c < nb; c += 4) {
                const uint8_t *p = p0 + c * stride;
                __m512i acc0 = _mm512_set1_epi32(q->bias), acc1 = acc0, acc2 = acc0, acc3 = acc0;
                for (int t = 0; t < T; t++) {
                    const uint8_t *pt = p + tap[t];
                    acc0 = dpbusd_bcast(acc0, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt)), w + 4 * t);
                    acc1 = dpbusd_bcast(acc1, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + stride)), w + 4 * t);
                    acc2 = dpbusd_bcast(acc2, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + 2 * stride)), w + 4 * t);
                    acc3 = dpbusd_bcast(acc3, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(pt + 3 * stride)), w + 4 * t);
                }
                if (ch[c].n) store16(out, requant_rq(acc0, q, &k), &ch[c]);
                if (ch[c + 1].n) store16(out, requant_rq(acc1, q, &k), &ch[c + 1]);
                if (ch[c + 2].n) store16(out, requant_rq(acc2, q, &k), &ch[c + 2]);
                if (ch[c + 3].n) store16(out, requant_rq(acc3, q, &k), &ch[c + 3]);
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
            v = requant16_lanes(v, m, sh, a->zp, a->lo, a->hi, a->single);
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

QAT_VNNI8 void qat__requant_s8_avx512(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y) {
    const __m512i zp = _mm512_set1_epi32(r->zp_in);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 keep = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
        __m512i v = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(keep, x + i)), zp);
        v = requant16(v, r->m0, r->shift, r->zp_out, r->lo, r->hi, r->single);
        _mm_mask_storeu_epi8(y + i, keep, _mm512_cvtepi32_epi8(v));
    }
}

QAT_VNNI8 void qat__global_avgpool_s8_avx512(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    for (int c = 0; c < C; c++) /* |sum| <= 128·HW: the planner bounds HW */
        y[c] = qat__global_avgpool_out(row_sum(x + (int64_t)c * HW, HW), HW, r);
}

/* ---- planes and columns -------------------------------------------------------------- */

QAT_VNNI8 INLINE __mmask64 first_bytes(int64_t n) { return _cvtu64_mask64(n >= 64 ? ~0ULL : (1ULL << n) - 1); }

QAT_VNNI8 INLINE void fill(uint8_t *d, int64_t n, __m512i v) {
    for (; n >= 64; n -= 64, d += 64) _mm512_storeu_si512(d, v);
    if (n > 0) _mm512_mask_storeu_epi8(d, first_bytes(n), v);
}

/* byte 4p + j of the result is byte 16j + p of the source: 4 rows of 16
 * bytes (one per 128-bit lane) interleaved into 16 pixels of 4 */
QAT_VNNI8 INLINE __m512i interleave_index(void) {
    int8_t il[64];
    for (int i = 0; i < 64; i++) il[i] = (int8_t)(16 * (i % 4) + i / 4);
    return _mm512_loadu_si512(il);
}

QAT_VNNI8 INLINE __m512i four_lanes(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
    __m512i z = _mm512_inserti32x4(_mm512_castsi128_si512(v0), v1, 1);
    return _mm512_inserti32x4(_mm512_inserti32x4(z, v2, 2), v3, 3);
}

static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* One input row of W pixels (pix 1: bytes of one channel; 4: 4 channels
 * cs bytes apart, interleaved) as u = x ^ 0x80 at d. */
QAT_VNNI8 INLINE void row_u8(uint8_t *d, const int8_t *src, int W, int pix, int64_t cs, __m512i ilv, __m512i flip) {
    if (pix == 1) {
        for (int q = 0; q < W; q += 64) {
            __mmask64 k = first_bytes(W - q);
            _mm512_mask_storeu_epi8(d + q, k, _mm512_xor_si512(_mm512_maskz_loadu_epi8(k, src + q), flip));
        }
        return;
    }
    for (int q = 0; q < W; q += 16) {
        int cnt = W - q < 16 ? W - q : 16;
        __mmask16 k = (__mmask16)((1u << cnt) - 1);
        __m512i z = four_lanes(_mm_maskz_loadu_epi8(k, src + q), _mm_maskz_loadu_epi8(k, src + cs + q),
                               _mm_maskz_loadu_epi8(k, src + 2 * cs + q), _mm_maskz_loadu_epi8(k, src + 3 * cs + q));
        _mm512_mask_storeu_epi8(d + 4 * q, first_bytes(4 * cnt), _mm512_xor_si512(_mm512_permutexvar_epi8(ilv, z), flip));
    }
}

/* The packed layout (qat__planes_u8), one sample's region (its H rows,
 * each with its padding pixels, then ph padding rows) at a time: the
 * region's data pixels are the sample's channel plane(s), contiguous in
 * the input, so each 64-byte piece of the region is the next run of
 * input pixels spread over the piece's data positions (vpexpandb, or
 * vpexpandd for pixels of 4 channels) over a vector of padding. The
 * pieces' data masks are the same for every region: computed once. */
enum { PACKED_MAX_PIECES = 512 };

QAT_VNNI8 static void planes_packed(const int8_t *x, const qat__planes_args *a, uint8_t *dst) {
    const __m512i pad = _mm512_set1_epi8((char)(uint8_t)(a->zp + 128)), flip = _mm512_set1_epi8((char)0x80);
    const __m512i ilv = interleave_index();
    const int64_t rowb = (int64_t)a->Wq * a->pix, data = (int64_t)a->W * a->pix, cs = (int64_t)a->H * a->W;
    const int64_t region = (int64_t)a->Hq * a->Wq, per = 64 / a->pix; /* pixels, and pixels a piece */
    const int64_t pieces = (region + per - 1) / per, used = a->front + rowb * (a->ph + (int64_t)a->m * a->Hq);
    uint64_t mask[PACKED_MAX_PIECES];
    int cnt[PACKED_MAX_PIECES];
    bool expand = pieces <= PACKED_MAX_PIECES;
    for (int64_t j = 0; expand && j < pieces; j++) {
        mask[j] = 0;
        for (int64_t p = j * per; p < (j + 1) * per && p < region; p++)
            if (p / a->Wq < a->H && p % a->Wq < a->W) mask[j] |= 1ULL << (p - j * per);
        cnt[j] = __builtin_popcountll(mask[j]);
    }
    for (int cg = 0; cg < a->C / a->pix; cg++) {
        uint8_t *st = dst + cg * a->plane;
        fill(st, a->front + a->ph * rowb, pad);
        for (int s = 0; s < a->m; s++) {
            uint8_t *rows = st + a->front + (a->ph + (int64_t)s * a->Hq) * rowb;
            const int8_t *src = x + s * a->in_n + (int64_t)cg * a->pix * cs;
            if (!expand) { /* a large plane: row by row */
                for (int iy = 0; iy < a->H; iy++) {
                    row_u8(rows + iy * rowb, src + (int64_t)iy * a->W, a->W, a->pix, cs, ilv, flip);
                    fill(rows + iy * rowb + data, rowb - data, pad);
                }
                fill(rows + a->H * rowb, (int64_t)(a->Hq - a->H) * rowb, pad);
                continue;
            }
            /* pieces end past the region only at the last one; the next
             * region (or the slack) is written after it */
            for (int64_t j = 0; j < pieces; j++, rows += 64) {
                int n = cnt[j];
                __m512i v;
                if (a->pix == 1) {
                    v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(first_bytes(n), src), flip);
                    v = _mm512_mask_expand_epi8(pad, _cvtu64_mask64(mask[j]), v);
                } else {
                    __mmask16 k = (__mmask16)((1u << n) - 1);
                    v = four_lanes(_mm_maskz_loadu_epi8(k, src), _mm_maskz_loadu_epi8(k, src + cs),
                                   _mm_maskz_loadu_epi8(k, src + 2 * cs), _mm_maskz_loadu_epi8(k, src + 3 * cs));
                    v = _mm512_xor_si512(_mm512_permutexvar_epi8(ilv, v), flip);
                    v = _mm512_mask_expand_epi32(pad, (__mmask16)mask[j], v);
                }
                _mm512_storeu_si512(rows, v);
                src += n;
            }
        }
        fill(st + used, a->plane - used, _mm512_setzero_si512());
    }
}

/* One-channel phase planes (strided depthwise convolutions) of small
 * inputs, 64 bytes at a time: every 64-byte piece of a phase's region
 * (its Hq rows of Wq bytes, one sample) takes its input bytes from a
 * window of 128 bytes of the channel's plane, so one vpermi2b gathers them
 * and a mask puts the padding in. The pieces are the same for every
 * channel and sample: worked out once. false when a piece's bytes span
 * more than 128 (rows too long: the row by row path is good there). */
enum { PIECES_MAX = 64 };
typedef struct {
    int32_t start;
    uint64_t pad;
    int8_t idx[64];
} piece;

static bool phase_pieces(const qat__planes_args *a, int py, piece *pc, int *n) {
    int64_t region = (int64_t)a->Hq * a->Wq;
    *n = (int)((region + 63) / 64);
    if (*n > PIECES_MAX) return false;
    for (int j = 0; j < *n; j++) {
        int32_t src[64], lo = INT32_MAX, hi = -1;
        for (int b = 0; b < 64; b++) {
            int64_t p = (int64_t)j * 64 + b;
            int qy = (int)(p / a->Wq), qx = (int)(p % a->Wq);
            int iy = qy * a->sh + py - a->ph, ix = qx - a->pw;
            bool in = p < region && iy >= 0 && iy < a->H && ix >= 0 && ix < a->W;
            src[b] = in ? iy * a->W + ix : -1;
            if (in) lo = src[b] < lo ? src[b] : lo, hi = src[b] > hi ? src[b] : hi;
        }
        if (hi >= 0 && hi - lo >= 128) return false;
        pc[j].start = hi >= 0 ? lo : 0, pc[j].pad = 0;
        for (int b = 0; b < 64; b++) {
            pc[j].idx[b] = (int8_t)(src[b] >= 0 ? src[b] - pc[j].start : 0);
            if (src[b] < 0) pc[j].pad |= 1ULL << b;
        }
    }
    return true;
}

QAT_VNNI8 static bool planes_pieces(const int8_t *x, const qat__planes_args *a, uint8_t *dst) {
    piece pc[PIECES_MAX];
    int n[8];
    for (int py = 0; py < a->phy && py < a->kh; py++) /* every phase fits, or none is built this way */
        if (py >= 8 || !phase_pieces(a, py, pc, &n[py])) return false;
    const __m512i pad = _mm512_set1_epi8((char)(uint8_t)(a->zp + 128)), flip = _mm512_set1_epi8((char)0x80);
    const int64_t hw = (int64_t)a->H * a->W, region = (int64_t)a->Hq * a->Wq, used = region * a->m;
    for (int py = 0; py < a->phy && py < a->kh; py++) {
        phase_pieces(a, py, pc, &n[py]);
        for (int c = 0; c < a->C; c++) {
            uint8_t *st = dst + ((int64_t)c * a->phy + py) * a->plane;
            for (int s = 0; s < a->m; s++) {
                const int8_t *plane = x + s * a->in_n + c * hw;
                uint8_t *d = st + s * region;
                for (int j = 0; j < n[py]; j++, d += 64) { /* the last piece runs into the next region or the slack */
                    int64_t start = pc[j].start, k0 = hw - start, k1 = hw - start - 64;
                    __m512i lo = _mm512_maskz_loadu_epi8(first_bytes(k0 > 0 ? k0 : 0), plane + start);
                    __m512i hi = _mm512_maskz_loadu_epi8(first_bytes(k1 > 0 ? k1 : 0), plane + start + 64);
                    __m512i v = _mm512_xor_si512(_mm512_permutex2var_epi8(lo, _mm512_loadu_si512(pc[j].idx), hi), flip);
                    _mm512_storeu_si512(d, _mm512_mask_mov_epi8(v, _cvtu64_mask64(pc[j].pad), pad));
                }
            }
            fill(st + used, a->plane - used, _mm512_setzero_si512());
        }
    }
    return true;
}

/* qat__planes_u8's bytes: rows of 64 bytes (one channel) or 16 pixels of
 * 4 channels (four 16-byte loads, one vpermb) at a time, the padding
 * stored whole; strided phases gather every sx-th byte with a vpermb. */
QAT_VNNI8 void qat__planes_u8_avx512(const int8_t *x, const qat__planes_args *a, uint8_t *dst) {
    if (a->packed) {
        planes_packed(x, a, dst);
        return;
    }
    if (a->pix == 1 && a->phx == 1 && planes_pieces(x, a, dst)) return;
    int sx = a->phx > 1 ? a->sw : 1;
    if ((a->pix == 1 && sx > 2) || sx > 4) { /* wide strides: the portable loop */
        qat__planes_u8(x, a, dst);
        return;
    }
    const __m512i pad = _mm512_set1_epi8((char)(uint8_t)(a->zp + 128)), flip = _mm512_set1_epi8((char)0x80);
    const __m512i ilv = interleave_index();
    int8_t gs[64];
    for (int i = 0; i < 64; i++) gs[i] = (int8_t)((i * sx) & 63);
    const __m512i gidx = _mm512_loadu_si512(gs);
    for (int i = 0; i < 64; i++) gs[i] = (int8_t)(2 * i); /* bytes 0, 2, .., 126 of two vectors */
    const __m512i gidx2 = _mm512_loadu_si512(gs);
    for (int i = 0; i < 64; i++) gs[i] = (int8_t)(32 * (i % 4) + 2 * (i / 4)); /* pixel i/4 of channel i%4, stride 2 */
    const __m512i gil2 = _mm512_loadu_si512(gs);
    const int64_t rowb = (int64_t)a->Wq * a->pix, used = rowb * a->m * a->Hq, cs = (int64_t)a->H * a->W;
    for (int cg = 0; cg < a->C / a->pix; cg++)
        for (int py = 0; py < a->phy && py < a->kh; py++)
            for (int px = 0; px < a->phx && px < a->kw; px++) {
                uint8_t *st = dst + (((int64_t)cg * a->phy + py) * a->phx + px) * a->plane;
                /* columns qx with ix = qx·sx + px - pw inside [0, W) */
                int qa = a->pw - px > 0 ? (a->pw - px + sx - 1) / sx : 0;
                int qb = floor_div(a->W - 1 + a->pw - px, sx) + 1;
                qb = qb > a->Wq ? a->Wq : qb;
                for (int s = 0; s < a->m; s++)
                    for (int qy = 0; qy < a->Hq; qy++) {
                        uint8_t *row = st + ((int64_t)s * a->Hq + qy) * rowb;
                        int iy = qy * a->sh + py - a->ph;
                        if (iy < 0 || iy >= a->H || qa >= qb) {
                            fill(row, rowb, pad);
                            continue;
                        }
                        fill(row, (int64_t)qa * a->pix, pad);
                        fill(row + (int64_t)qb * a->pix, (int64_t)(a->Wq - qb) * a->pix, pad);
                        const int8_t *src = x + s * a->in_n + ((int64_t)cg * a->pix * a->H + iy) * a->W;
                        if (a->pix == 1) { /* 64 bytes at a time, every sx-th (sx <= 2: from 128) */
                            for (int q = qa; q < qb; q += 64) {
                                int cnt = qb - q < 64 ? qb - q : 64;
                                const int8_t *sp = src + (int64_t)q * sx + px - a->pw;
                                int64_t nb = (int64_t)(cnt - 1) * sx + 1;
                                __m512i v = _mm512_maskz_loadu_epi8(first_bytes(nb), sp);
                                if (sx == 2)
                                    v = _mm512_permutex2var_epi8(v, gidx2, _mm512_maskz_loadu_epi8(first_bytes(nb - 64 > 0 ? nb - 64 : 0), sp + 64));
                                _mm512_mask_storeu_epi8(row + q, first_bytes(cnt), _mm512_xor_si512(v, flip));
                            }
                            continue;
                        }
                        for (int q = qa; q < qb; q += 16) {
                            int cnt = qb - q < 16 ? qb - q : 16, ix = q * sx + px - a->pw;
                            __m128i v[4];
                            if (sx == 1) {
                                __mmask16 k = (__mmask16)((1u << cnt) - 1);
                                for (int j = 0; j < 4; j++) v[j] = _mm_maskz_loadu_epi8(k, src + j * cs + ix);
                            } else if (sx == 2) { /* 32 bytes of each channel row, one vpermt2b gathers and interleaves */
                                __mmask32 k = (__mmask32)(((1ULL << (2 * cnt - 1)) - 1));
                                __m512i z0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(k, src + ix)),
                                                                _mm256_maskz_loadu_epi8(k, src + cs + ix), 1);
                                __m512i z1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(k, src + 2 * cs + ix)),
                                                                _mm256_maskz_loadu_epi8(k, src + 3 * cs + ix), 1);
                                __m512i z = _mm512_permutex2var_epi8(z0, gil2, z1);
                                _mm512_mask_storeu_epi8(row + 4 * q, first_bytes(4 * cnt), _mm512_xor_si512(z, flip));
                                continue;
                            } else {
                                __mmask64 k = first_bytes((int64_t)(cnt - 1) * sx + 1);
                                for (int j = 0; j < 4; j++)
                                    v[j] = _mm512_castsi512_si128(
                                        _mm512_permutexvar_epi8(gidx, _mm512_maskz_loadu_epi8(k, src + j * cs + ix)));
                            }
                            __m512i z = _mm512_permutexvar_epi8(ilv, four_lanes(v[0], v[1], v[2], v[3]));
                            _mm512_mask_storeu_epi8(row + 4 * q, first_bytes(4 * cnt), _mm512_xor_si512(z, flip));
                        }
                    }
                fill(st + used, a->plane - used, _mm512_setzero_si512());
            }
}

/* qat__columns_u8's bytes: dense4 rows copied 64 bytes at a time with
 * masks (rows of 7 pixels are 28 bytes: memcpy's call costs more than the
 * copy); generic rows of 4 taps interleaved 16 positions at a time. */
QAT_VNNI8 void qat__columns_u8_avx512(const uint8_t *planes, const int32_t *ksrc, const qat__columns_args *a,
                                      uint8_t *col) {
    const int64_t P = (int64_t)a->OH * a->OW, used = 4 * a->m * P, end = 4 * qat__round_up(a->m * P, 64);
    const __m512i ilv = interleave_index();
    for (int k4 = 0; k4 < a->K4; k4++) {
        uint8_t *row = col + k4 * a->colpitch;
        for (int s = 0; s < a->m; s++)
            for (int oy = 0; oy < a->OH; oy++) {
                uint8_t *d = row + 4 * (s * P + (int64_t)oy * a->OW);
                int64_t at = ((int64_t)s * a->Hq + oy) * a->Wq;
                if (a->dense4) {
                    const uint8_t *src = planes + ksrc[k4] + 4 * at;
                    for (int64_t b = 0; b < 4 * (int64_t)a->OW; b += 64) {
                        __mmask64 k = first_bytes(4 * (int64_t)a->OW - b);
                        _mm512_mask_storeu_epi8(d + b, k, _mm512_maskz_loadu_epi8(k, src + b));
                    }
                    continue;
                }
                for (int ox = 0; ox < a->OW; ox += 16) {
                    int cnt = a->OW - ox < 16 ? a->OW - ox : 16;
                    __mmask16 k = (__mmask16)((1u << cnt) - 1);
                    __m128i v[4];
                    for (int j = 0; j < 4; j++) {
                        int kk = 4 * k4 + j;
                        v[j] = kk < a->K ? _mm_maskz_loadu_epi8(k, planes + ksrc[kk] + at + ox) : _mm_setzero_si128();
                    }
                    __m512i z = _mm512_permutexvar_epi8(ilv, four_lanes(v[0], v[1], v[2], v[3]));
                    _mm512_mask_storeu_epi8(d + 4 * ox, first_bytes(4 * cnt), z);
                }
            }
        fill(row + used, end - used, _mm512_setzero_si512());
    }
}

/* ---- the residual add, from tables --------------------------------------------------- */

/* 64 bytes of one byte plane of a 256-entry table, indexed by i (bytes):
 * two vpermi2b over the table's halves, the index's bit 7 picks. */
QAT_VNNI8 INLINE __m512i plane_lookup(const uint8_t *plane, __m512i i, __mmask64 upper) {
    __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512(plane), i, _mm512_loadu_si512(plane + 64));
    __m512i hi = _mm512_permutex2var_epi8(_mm512_loadu_si512(plane + 128), i, _mm512_loadu_si512(plane + 192));
    return _mm512_mask_blend_epi8(upper, lo, hi);
}

/* The int32 table entries of 64 indices, from the 4 byte planes: element
 * 16·L + 4·j + e (128-bit lane L) lands in lane 4·L + e of d[j] (unpacking
 * works within 128-bit lanes). */
QAT_VNNI8 INLINE void table_lookup(const uint8_t *planes, __m512i i, __mmask64 upper, __m512i d[4]) {
    __m512i p0 = plane_lookup(planes, i, upper), p1 = plane_lookup(planes + 256, i, upper);
    __m512i p2 = plane_lookup(planes + 512, i, upper), p3 = plane_lookup(planes + 768, i, upper);
    __m512i l01 = _mm512_unpacklo_epi8(p0, p1), h01 = _mm512_unpackhi_epi8(p0, p1);
    __m512i l23 = _mm512_unpacklo_epi8(p2, p3), h23 = _mm512_unpackhi_epi8(p2, p3);
    d[0] = _mm512_unpacklo_epi16(l01, l23), d[1] = _mm512_unpackhi_epi16(l01, l23);
    d[2] = _mm512_unpacklo_epi16(h01, h23), d[3] = _mm512_unpackhi_epi16(h01, h23);
}

/* TFLite's ADD, 64 elements at a time, the inputs' terms from their tables
 * (qat__add_tables: the portable code's terms, entry by entry), their
 * int32 sum (wrapping as the portable sum would, where that is defined)
 * requantized as the convolutions' outputs are. */
QAT_VNNI8 void qat__add_s8_tab_avx512(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r,
                                      const uint8_t *tables, int8_t *y) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const clamp16 k = clamp_of(r->zp_out, r->lo, r->hi);
    const qat__rq q = qat__rq_make(0, r->m_out, r->sh_out, r->zp_out, r->lo, r->single);
    int8_t back[64]; /* output byte 16·L + 4·j + e is byte 16·j + 4·L + e of the four results in order */
    for (int i = 0; i < 64; i++) back[i] = (int8_t)(16 * (i % 16 / 4) + 4 * (i / 16) + i % 4);
    const __m512i order = _mm512_loadu_si512(back);
    for (int64_t at = 0; at < n; at += 64) {
        __mmask64 keep = first_bytes(n - at);
        __m512i ia = _mm512_xor_si512(_mm512_maskz_loadu_epi8(keep, a + at), flip); /* x + 128 */
        __m512i ib = _mm512_xor_si512(_mm512_maskz_loadu_epi8(keep, b + at), flip);
        __m512i ta[4], tb[4];
        table_lookup(tables, ia, _mm512_movepi8_mask(ia), ta);
        table_lookup(tables + 1024, ib, _mm512_movepi8_mask(ib), tb);
        __m128i o[4];
        for (int j = 0; j < 4; j++) o[j] = requant_rq(_mm512_add_epi32(ta[j], tb[j]), &q, &k);
        __m512i v = _mm512_permutexvar_epi8(order, four_lanes(o[0], o[1], o[2], o[3]));
        _mm512_mask_storeu_epi8(y + at, keep, v);
    }
}

#else

void qat__gemm8_vnni(const qat__gemm8_args *a) { qat__gemm8_ref(a); }
void qat__dw8_vnni(const qat__dw8_args *a) { qat__dw8_ref(a); }
void qat__linear8_vnni(const qat__linear8_args *a) { qat__linear8_ref(a); }
void qat__planes_u8_avx512(const int8_t *x, const qat__planes_args *a, uint8_t *dst) { qat__planes_u8(x, a, dst); }
void qat__columns_u8_avx512(const uint8_t *planes, const int32_t *ksrc, const qat__columns_args *a, uint8_t *col) {
    qat__columns_u8(planes, ksrc, a, col);
}
void qat__add_s8_tab_avx512(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, const uint8_t *tables,
                            int8_t *y) {
    (void)tables;
    qat__add_s8(a, b, n, r, y);
}
void qat__requant_s8_avx512(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y) {
    qat__requant_s8(x, n, r, y);
}
void qat__global_avgpool_s8_avx512(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    qat__global_avgpool_s8(x, C, HW, r, y);
}
void qat__requant16_avx512(const int32_t *acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi, bool single,
                           int32_t *y) {
    for (int i = 0; i < 16; i++) y[i] = qat_requantize_r(acc[i], m0, shift, zp, lo, hi, single);
}

#endif
