/* The x86-64 integer kernels with requantization (kernels.h), picked at
 * run time: AVX-512 VNNI where the CPU has it, else AVX2, else the
 * portable kernel.
 *
 * A block is 4 outputs x 16 positions. Per pair of reduction rows (k,
 * k+1), the two col rows are interleaved by unpacklo/hi_epi16, and one
 * vpmaddwd with the broadcast weight pair (w[o][k], w[o][k+1]) gives 8
 * int32 partial sums c_k·w_k + c_k1·w_k1: no horizontal sums anywhere.
 * Requantization is vectorised too: SRDHM(x, m) is exactly
 * floor((x·m + 2^30) / 2^31) for both signs (the truncating division with
 * its sign-dependent nudge reduces to it), i.e. bits 31..62 of x·m + 2^30. */
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QAT_AVX2 __attribute__((target("avx2")))
#include "requant_x86.h"

static bool has_avx2(void);
static bool has_vnni(void);

/* Requantizes and stores one output's 16 positions from p0: lo holds
 * positions 0-3 and 8-11, hi 4-7 and 12-15 (the unpack order). */
QAT_AVX2 static inline void store16(const qat__gemm_args *a, int o, int p0, __m256i lo_acc, __m256i hi_acc) {
    const __m256i zp = _mm256_set1_epi32(a->zp), lo = _mm256_set1_epi32(a->lo), hi = _mm256_set1_epi32(a->hi);
    int np = a->P - p0 < QAT_PPAD ? a->P - p0 : QAT_PPAD;
    __m256i s0 = _mm256_permute2x128_si256(lo_acc, hi_acc, 0x20);
    __m256i s1 = _mm256_permute2x128_si256(lo_acc, hi_acc, 0x31);
    __m256i b = _mm256_set1_epi32(a->bias[o]);
    s0 = _mm256_add_epi32(s0, b), s1 = _mm256_add_epi32(s1, b);
    int8_t *out = a->out + o * a->so + p0 * a->sp;
    if (a->shift[o] <= 0) {
        __m256i m0 = _mm256_set1_epi32(a->m0[o]);
        __m256i r0 = requant8(s0, m0, -a->shift[o], zp, lo, hi, a->single, a->lo >= a->zp),
                r1 = requant8(s1, m0, -a->shift[o], zp, lo, hi, a->single, a->lo >= a->zp);
        if (a->sp == 1 && np == QAT_PPAD) { /* the common case: straight from registers */
            _mm_storeu_si128((__m128i *)out, pack16(r0, r1));
            return;
        }
        s0 = r0, s1 = r1;
    }
    int32_t v[QAT_PPAD];
    _mm256_storeu_si256((__m256i *)v, s0);
    _mm256_storeu_si256((__m256i *)(v + 8), s1);
    if (a->shift[o] > 0) /* a multiplier >= 1: the saturating left shift, in scalar code */
        for (int i = 0; i < np; i++) v[i] = qat_requantize_r(v[i], a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
    for (int i = 0; i < np; i++) out[i * a->sp] = (int8_t)v[i];
}

QAT_AVX2 static void gemm_avx2_kernel(const qat__gemm_args *a) {
    const int Kp = a->Kp, Pp = a->Pp;
    for (int o0 = 0; o0 < a->O; o0 += QAT_OPAD) {
        const int16_t *w = a->w + (int64_t)o0 * Kp;
        for (int p0 = 0; p0 < a->P; p0 += QAT_PPAD) {
            __m256i acc[QAT_OPAD][2];
            for (int j = 0; j < QAT_OPAD; j++) acc[j][0] = acc[j][1] = _mm256_setzero_si256();
            const int16_t *c = a->col + p0;
            for (int k = 0; k < Kp; k += 2, c += 2 * (int64_t)Pp) {
                __m256i r0 = _mm256_loadu_si256((const __m256i *)c);
                __m256i r1 = _mm256_loadu_si256((const __m256i *)(c + Pp));
                __m256i il = _mm256_unpacklo_epi16(r0, r1), ih = _mm256_unpackhi_epi16(r0, r1);
                for (int j = 0; j < QAT_OPAD; j++) {
                    int32_t pair;
                    memcpy(&pair, w + (int64_t)j * Kp + k, sizeof pair);
                    __m256i wp = _mm256_set1_epi32(pair);
                    acc[j][0] = _mm256_add_epi32(acc[j][0], _mm256_madd_epi16(il, wp));
                    acc[j][1] = _mm256_add_epi32(acc[j][1], _mm256_madd_epi16(ih, wp));
                }
            }
            for (int j = 0; j < QAT_OPAD && o0 + j < a->O; j++) store16(a, o0 + j, p0, acc[j][0], acc[j][1]);
        }
    }
}

/* The direct convolution (kernels.h): a block is R outputs x 8·V
 * consecutive positions of one output row, R·V accumulators; per weight
 * pair, V loads of 8 positions' channel pairs, R broadcasts, R·V vpmaddwd.
 * 4 x 16 for wide rows, 8 x 8 for the last 8 positions or fewer. The
 * stores requantize each output row's positions as the GEMM's do. */
/* The accumulators are named variables, not an array: GCC 12 kept an
 * array's elements in registers but copied each after every add (and
 * spilled one), a third of the loop's instructions (measured). */
/* acc += the products of x and w in the form's way (all three give the
 * exact sums of the layout: kernels.h). vpdpbusd is written out: the
 * kernels are built for AVX2, and the instruction's two encodings need
 * no target of their own in asm; which one runs is the caller's choice
 * (vex: AVX-VNNI's, else AVX-512 VNNI's EVEX form on ymm). */
QAT_AVX2 static inline __attribute__((always_inline)) __m256i dmac(__m256i acc, __m256i x, __m256i w, const int form,
                                                                   const bool vex) {
    if (form == QAT_DIRECT_PAIRS) return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
    if (form == QAT_DIRECT_BYTES)
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1)));
    if (vex) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(x), "x"(w));
    else __asm__("vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(x), "x"(w));
    return acc;
}
#define DMAC(acc, x, wp) acc = dmac(acc, x, wp, form, vex)

/* 4 outputs x 16 positions; form, vex: constants in each copy (dmac). */
QAT_AVX2 static inline __attribute__((always_inline)) void direct_4x16(const qat__direct_args *a, int o0, int oy,
                                                                       int ox0, const int form, const bool vex) {
    const int32_t *origin = (const int32_t *)a->xq + (int64_t)oy * a->ystep + ox0;
    const int32_t *w = a->w + (int64_t)(o0 / 8) * a->KG * 8 + o0 % 8;
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int kg = 0; kg < a->KG; kg++, w += 8) {
        const int32_t *p = origin + a->koff[kg];
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)p);
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 8));
        __m256i w0 = _mm256_set1_epi32(w[0]), w1 = _mm256_set1_epi32(w[1]);
        DMAC(c00, x0, w0), DMAC(c01, x1, w0), DMAC(c10, x0, w1), DMAC(c11, x1, w1);
        __m256i w2 = _mm256_set1_epi32(w[2]), w3 = _mm256_set1_epi32(w[3]);
        DMAC(c20, x0, w2), DMAC(c21, x1, w2), DMAC(c30, x0, w3), DMAC(c31, x1, w3);
    }
    int np = a->OW - ox0 < 16 ? a->OW - ox0 : 16;
    int64_t so = (int64_t)a->OH * a->OW;
    bool spill = (int64_t)oy * a->OW + ox0 + 16 <= so;
    int8_t *dst = a->out + (int64_t)o0 * so + (int64_t)oy * a->OW + ox0;
    direct_store(a, o0, dst, np, spill, c00, c01);
    if (o0 + 1 < a->O) direct_store(a, o0 + 1, dst + so, np, spill, c10, c11);
    if (o0 + 2 < a->O) direct_store(a, o0 + 2, dst + 2 * so, np, spill, c20, c21);
    if (o0 + 3 < a->O) direct_store(a, o0 + 3, dst + 3 * so, np, spill, c30, c31);
}

/* 8 outputs x 8 positions (rows of 8 or fewer, and a row's last 8 or fewer). */
QAT_AVX2 static inline __attribute__((always_inline)) void direct_8x8(const qat__direct_args *a, int o0, int oy,
                                                                      int ox0, const int form, const bool vex) {
    const int32_t *origin = (const int32_t *)a->xq + (int64_t)oy * a->ystep + ox0;
    const int32_t *w = a->w + (int64_t)(o0 / 8) * a->KG * 8;
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    for (int kg = 0; kg < a->KG; kg++, w += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(origin + a->koff[kg]));
        DMAC(c0, x, _mm256_set1_epi32(w[0])), DMAC(c1, x, _mm256_set1_epi32(w[1]));
        DMAC(c2, x, _mm256_set1_epi32(w[2])), DMAC(c3, x, _mm256_set1_epi32(w[3]));
        DMAC(c4, x, _mm256_set1_epi32(w[4])), DMAC(c5, x, _mm256_set1_epi32(w[5]));
        DMAC(c6, x, _mm256_set1_epi32(w[6])), DMAC(c7, x, _mm256_set1_epi32(w[7]));
    }
    int np = a->OW - ox0 < 8 ? a->OW - ox0 : 8;
    int64_t so = (int64_t)a->OH * a->OW;
    int8_t *dst = a->out + (int64_t)o0 * so + (int64_t)oy * a->OW + ox0;
    const __m256i z = _mm256_setzero_si256();
    __m256i c[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    bool spill = (int64_t)oy * a->OW + ox0 + 16 <= so;
    for (int j = 0; j < 8 && o0 + j < a->O; j++) direct_store(a, o0 + j, dst + j * so, np, spill, c[j], z);
}

/* One input row of two channels into the pair planes' row (kernels.h),
 * 16 pixels at a time: the bytes interleaved, widened, zp subtracted;
 * with stride 2, the pairs of even and odd input columns split to the two
 * phases (vpermd gathers each half's evens and odds). A row's last chunk
 * overlaps the one before (the same pixels written twice, the same
 * values); shorter rows (stride 1) take overlapping chunks of 8 (pairs)
 * or 4 (quads) pixels; rows shorter still, C. Nothing past the row is
 * read or written. */
/* Stores 16 pixels of 4 bytes (v0: pixels i..i+7, v1: i+8..i+15) to their
 * columns of a plane row (row: pixel 0 of the row). */
QAT_AVX2 static inline void store_px16(__m256i v0, __m256i v1, int i, int pw, int Wp, int sw, int32_t *row) {
    if (sw == 1) {
        _mm256_storeu_si256((__m256i *)(void *)(row + pw + i), v0);
        _mm256_storeu_si256((__m256i *)(void *)(row + pw + i + 8), v1);
        return;
    }
    const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    v0 = _mm256_permutevar8x32_epi32(v0, split), v1 = _mm256_permutevar8x32_epi32(v1, split);
    __m256i even = _mm256_permute2x128_si256(v0, v1, 0x20), odd = _mm256_permute2x128_si256(v0, v1, 0x31);
    _mm256_storeu_si256((__m256i *)(void *)(row + qat__direct_col(pw + i, Wp, 2)), even);
    _mm256_storeu_si256((__m256i *)(void *)(row + qat__direct_col(pw + i + 1, Wp, 2)), odd);
}

QAT_AVX2 static inline void pairs16(const int8_t *s0, const int8_t *s1, int i, int pw, int Wp, int sw, __m256i z,
                                    int16_t *row) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s0 + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s1 + i));
    __m256i v0 = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)), z); /* pixels i..i+7 */
    __m256i v1 = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)), z); /* i+8..i+15 */
    store_px16(v0, v1, i, pw, Wp, sw, (int32_t *)(void *)row);
}

/* The four channels' bytes of 16 pixels, interleaved, + 128 (the sign bit flipped). */
QAT_AVX2 static inline void quads16(const int8_t *s, int64_t cs, int i, int pw, int Wp, int sw, uint8_t *row) {
    const __m128i flip = _mm_set1_epi8((char)0x80);
    __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)(s + cs + i));
    __m128i c2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 2 * cs + i));
    __m128i c3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 3 * cs + i));
    __m128i ab0 = _mm_unpacklo_epi8(c0, c1), ab1 = _mm_unpackhi_epi8(c0, c1);
    __m128i cd0 = _mm_unpacklo_epi8(c2, c3), cd1 = _mm_unpackhi_epi8(c2, c3);
    __m128i q0 = _mm_xor_si128(_mm_unpacklo_epi16(ab0, cd0), flip);
    __m128i q1 = _mm_xor_si128(_mm_unpackhi_epi16(ab0, cd0), flip);
    __m128i q2 = _mm_xor_si128(_mm_unpacklo_epi16(ab1, cd1), flip);
    __m128i q3 = _mm_xor_si128(_mm_unpackhi_epi16(ab1, cd1), flip);
    store_px16(_mm256_set_m128i(q1, q0), _mm256_set_m128i(q3, q2), i, pw, Wp, sw, (int32_t *)(void *)row);
}

QAT_AVX2 static inline void pairs8(const int8_t *s0, const int8_t *s1, int i, int pw, __m256i z, int16_t *row) {
    __m128i a = _mm_loadl_epi64((const __m128i *)(const void *)(s0 + i));
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(s1 + i));
    __m256i v = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)), z);
    _mm256_storeu_si256((__m256i *)(void *)(row + 2 * (pw + i)), v);
}

/* The same 8 pixels split by column phase (stride 2): 4 to each. */
QAT_AVX2 static inline void pairs8_split(const int8_t *s0, const int8_t *s1, int i, int pw, int Wp, __m256i z,
                                         int16_t *out) {
    int32_t *row = (int32_t *)(void *)out;
    __m128i a = _mm_loadl_epi64((const __m128i *)(const void *)(s0 + i));
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(s1 + i));
    __m256i v = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)), z);
    v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    _mm_storeu_si128((__m128i *)(void *)(row + qat__direct_col(pw + i, Wp, 2)), _mm256_castsi256_si128(v));
    _mm_storeu_si128((__m128i *)(void *)(row + qat__direct_col(pw + i + 1, Wp, 2)), _mm256_extracti128_si256(v, 1));
}

QAT_AVX2 static void row_pairs_avx2(const int8_t *s0, const qat__pad_row *r, void *out) {
    const int8_t *s1 = s0 + r->cs;
    int W = r->W, pw = r->pw, Wp = r->Wp, sw = r->sw;
    int16_t *row = out;
    const __m256i z = _mm256_set1_epi16((int16_t)r->zp);
    if (W >= 16) {
        for (int i = 0; i + 16 <= W; i += 16) pairs16(s0, s1, i, pw, Wp, sw, z, row);
        if (W % 16) pairs16(s0, s1, W - 16, pw, Wp, sw, z, row);
    } else if (W >= 8 && sw == 1) {
        pairs8(s0, s1, 0, pw, z, row), pairs8(s0, s1, W - 8, pw, z, row);
    } else if (W >= 8) {
        pairs8_split(s0, s1, 0, pw, Wp, z, row), pairs8_split(s0, s1, W - 8, pw, Wp, z, row);
    } else {
        qat__pad_row_pairs(s0, r, out);
    }
}

/* 4 pixels of the four channels (stride 1): 4 bytes of each, interleaved. */
QAT_AVX2 static inline void quads4(const int8_t *s, int64_t cs, int i, int pw, uint8_t *row) {
    int32_t c[4];
    for (int j = 0; j < 4; j++) memcpy(&c[j], s + j * cs + i, 4);
    __m128i ab = _mm_unpacklo_epi8(_mm_cvtsi32_si128(c[0]), _mm_cvtsi32_si128(c[1]));
    __m128i cd = _mm_unpacklo_epi8(_mm_cvtsi32_si128(c[2]), _mm_cvtsi32_si128(c[3]));
    __m128i q = _mm_xor_si128(_mm_unpacklo_epi16(ab, cd), _mm_set1_epi8((char)0x80));
    _mm_storeu_si128((__m128i *)(void *)(row + 4 * (pw + i)), q);
}

QAT_AVX2 static void row_quads_avx2(const int8_t *s, const qat__pad_row *r, void *out) {
    int W = r->W, pw = r->pw, Wp = r->Wp, sw = r->sw;
    uint8_t *row = out;
    if (W >= 16) { /* the last 16 overlap the ones before */
        for (int i = 0; i + 16 <= W; i += 16) quads16(s, r->cs, i, pw, Wp, sw, row);
        if (W % 16) quads16(s, r->cs, W - 16, pw, Wp, sw, row);
    } else if (W >= 4 && sw == 1) { /* 4 pixels at a time, the last 4 overlapping */
        for (int i = 0; i + 4 <= W; i += 4) quads4(s, r->cs, i, pw, row);
        if (W % 4) quads4(s, r->cs, W - 4, pw, row);
    } else {
        qat__pad_row_quads(s, r, out);
    }
}

/* 16 and 8 int8 at p, widened, minus zp (z: zp in every int16 lane). */
QAT_AVX2 static inline __m256i widen16(const int8_t *p, __m256i z) {
    return _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p)), z);
}
QAT_AVX2 static inline __m128i widen8(const int8_t *p, __m128i z) {
    return _mm_sub_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p)), z);
}

QAT_AVX2 static void row_plain_avx2(const int8_t *s, const qat__pad_row *r, void *out) {
    int W = r->W;
    int16_t *d = (int16_t *)out + r->pw;
    const __m256i z = _mm256_set1_epi16((int16_t)r->zp);
    const __m128i z8 = _mm256_castsi256_si128(z);
    if (W >= 16) {
        for (int i = 0; i + 16 <= W; i += 16) _mm256_storeu_si256((__m256i *)(void *)(d + i), widen16(s + i, z));
        if (W % 16) _mm256_storeu_si256((__m256i *)(void *)(d + W - 16), widen16(s + W - 16, z));
    } else if (W >= 8) {
        _mm_storeu_si128((__m128i *)(void *)d, widen8(s, z8));
        _mm_storeu_si128((__m128i *)(void *)(d + W - 8), widen8(s + W - 8, z8));
    } else if (W >= 4) { /* two overlapping halves of 4 */
        int32_t v0, v1;
        memcpy(&v0, s, sizeof v0), memcpy(&v1, s + W - 4, sizeof v1);
        _mm_storel_epi64((__m128i *)(void *)d, _mm_sub_epi16(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(v0)), z8));
        _mm_storel_epi64((__m128i *)(void *)(d + W - 4), _mm_sub_epi16(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(v1)), z8));
    } else {
        qat__pad_row_plain(s, r, out);
    }
}

QAT_AVX2 static inline __attribute__((always_inline)) void direct_rows(const qat__direct_args *a, const int form,
                                                                       const bool vex) {
    for (int o0 = 0; o0 < a->O; o0 += 8)
        for (int oy = 0; oy < a->OH; oy++)
            for (int ox0 = 0; ox0 < a->OW; ox0 += 16) {
                if (a->OW - ox0 <= 8) {
                    direct_8x8(a, o0, oy, ox0, form, vex);
                    break;
                }
                direct_4x16(a, o0, oy, ox0, form, vex);
                if (o0 + 4 < a->O) direct_4x16(a, o0 + 4, oy, ox0, form, vex);
            }
}

QAT_AVX2 static void direct_pairs(const qat__direct_args *a) { direct_rows(a, QAT_DIRECT_PAIRS, false); }
QAT_AVX2 static void direct_bytes(const qat__direct_args *a) { direct_rows(a, QAT_DIRECT_BYTES, false); }
QAT_AVX2 static void direct_vnni_vex(const qat__direct_args *a) { direct_rows(a, QAT_DIRECT_BYTES_VNNI, true); }
QAT_AVX2 static void direct_vnni_evex(const qat__direct_args *a) { direct_rows(a, QAT_DIRECT_BYTES_VNNI, false); }

void qat__conv_direct(const qat__direct_args *a) {
    if (!has_avx2()) qat__conv_direct_ref(a);
    else if (a->form == QAT_DIRECT_PAIRS) direct_pairs(a);
    else if (a->form == QAT_DIRECT_BYTES) direct_bytes(a);
    else if (a->vex) direct_vnni_vex(a);
    else if (has_vnni()) direct_vnni_evex(a);
    else qat__conv_direct_ref(a);
}

bool qat__direct_vex(void) { return qat_isa_cpu_has(QAT_ISA_AVX_VNNI); }

qat__pad_row_fn qat__pad_row_simd(qat__pad_kind kind) {
    bool avx2 = has_avx2();
    return kind == QAT_PAD_QUADS ? (avx2 ? row_quads_avx2 : qat__pad_row_quads)
           : kind == QAT_PAD_PAIRS ? (avx2 ? row_pairs_avx2 : qat__pad_row_pairs)
                                   : (avx2 ? row_plain_avx2 : qat__pad_row_plain);
}

/* AVX-512 VNNI on 256-bit vectors: vpdpwssd multiplies, pairs and
 * accumulates in one instruction, and the 32 vector registers hold a block
 * of up to 8 outputs x 16 positions. R (the block's rows) is a constant in
 * each instantiation, so the loops unroll: 8 rows while they last, then a
 * 6- or 4-row block for the rest (LeNet's conv1 has 6 outputs). */
#define QAT_VNNI __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))
QAT_VNNI static inline __attribute__((always_inline)) void vnni_block(const qat__gemm_args *a, int o0, const int R) {
    const int Kp = a->Kp, Pp = a->Pp;
    const int16_t *w = a->w + (int64_t)o0 * Kp;
    for (int p0 = 0; p0 < a->P; p0 += QAT_PPAD) {
        __m256i acc[8][2];
        for (int j = 0; j < R; j++) acc[j][0] = acc[j][1] = _mm256_setzero_si256();
        const int16_t *c = a->col + p0;
        for (int k = 0; k < Kp; k += 2, c += 2 * (int64_t)Pp) {
            __m256i r0 = _mm256_loadu_si256((const __m256i *)c);
            __m256i r1 = _mm256_loadu_si256((const __m256i *)(c + Pp));
            __m256i il = _mm256_unpacklo_epi16(r0, r1), ih = _mm256_unpackhi_epi16(r0, r1);
            for (int j = 0; j < R; j++) {
                int32_t pair;
                memcpy(&pair, w + (int64_t)j * Kp + k, sizeof pair);
                __m256i wp = _mm256_set1_epi32(pair);
                acc[j][0] = _mm256_dpwssd_epi32(acc[j][0], il, wp);
                acc[j][1] = _mm256_dpwssd_epi32(acc[j][1], ih, wp);
            }
        }
        for (int j = 0; j < R && o0 + j < a->O; j++) store16(a, o0 + j, p0, acc[j][0], acc[j][1]);
    }
}

QAT_VNNI static void gemm_vnni_kernel(const qat__gemm_args *a) {
    int o0 = 0;
    for (; o0 + 8 <= a->O; o0 += 8) vnni_block(a, o0, 8);
    int rest = a->O - o0; /* w has rows up to a multiple of 8: reading past O is safe */
    if (rest > 6) vnni_block(a, o0, 8);
    else if (rest > 4) vnni_block(a, o0, 6);
    else if (rest > 0) vnni_block(a, o0, 4);
}

static bool has_vnni(void) {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

static bool has_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* The int8 path (kernels_vnni8.c) also needs VBMI (vpermb) and VBMI2
 * (vpcompressb): Ice Lake, Sapphire Rapids, Zen 4 and later have them all. */
static bool has_vnni8(void) {
    return has_vnni() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
}

/* The best level the CPU has and QAT_MAX_ISA allows (qat/core.h): the
 * int16 GEMMs on ymm with AVX-512 VNNI's vpdpwssd need the avx512_vnni
 * level, as the int8 path does; the AVX-VNNI level needs the avx_vnni
 * cap and AVX-VNNI itself (the tests run it on AVX-512 VNNI machines too,
 * by the EVEX form: qat__conv_direct); avx512 without VNNI runs the AVX2
 * level (or AVX-VNNI's). */
qat__level qat__cpu_level(void) {
    qat_isa cap;
    qat_isa_cap(&cap);
    if (cap >= QAT_ISA_AVX512_VNNI && has_vnni8()) return QAT_LEVEL_VNNI8;
    if (cap >= QAT_ISA_AVX512_VNNI && has_vnni()) return QAT_LEVEL_VNNI16;
    if (cap >= QAT_ISA_AVX_VNNI && qat_isa_cpu_has(QAT_ISA_AVX_VNNI)) return QAT_LEVEL_AVXVNNI;
    return cap >= QAT_ISA_AVX2 && has_avx2() ? QAT_LEVEL_AVX2 : QAT_LEVEL_PORTABLE;
}

const char *qat__gemm_kernel_name(void) { return qat__level_name(qat__cpu_level()); }

/* 2x2 max pooling, stride 2, even W: the vertical max of each row pair
 * into tmp (OH rows of W, contiguous), then the horizontal pairs over all
 * of tmp at once: max(v, v >> 8) puts each pair's max in the low byte of
 * a 16-bit lane, and a sign-extending pack gathers the low bytes. */
QAT_AVX2 static void maxpool2_avx2(const int8_t *x, int C, int H, int W, int8_t *y, int8_t *tmp) {
    int OH = H / 2, OW = W / 2, n = OH * W;
    for (int c = 0; c < C; c++) {
        const int8_t *xc = x + (int64_t)c * H * W;
        for (int oy = 0; oy < OH; oy++) {
            const int8_t *a = xc + 2 * oy * W, *b = a + W;
            int8_t *t = tmp + oy * W;
            int i = 0;
            for (; i + 32 <= W; i += 32)
                _mm256_storeu_si256((__m256i *)(t + i), _mm256_max_epi8(_mm256_loadu_si256((const __m256i *)(a + i)),
                                                                        _mm256_loadu_si256((const __m256i *)(b + i))));
            for (; i < W; i++) t[i] = a[i] > b[i] ? a[i] : b[i];
        }
        int8_t *yc = y + (int64_t)c * OH * OW;
        int i = 0; /* output i is the max of tmp[2i], tmp[2i + 1] */
        for (; 2 * i + 32 <= n; i += 16) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(tmp + 2 * i));
            __m256i m = _mm256_max_epi8(v, _mm256_srli_epi16(v, 8));
            m = _mm256_srai_epi16(_mm256_slli_epi16(m, 8), 8);
            __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(m, m), 0xD8);
            _mm_storeu_si128((__m128i *)(yc + i), _mm256_castsi256_si128(p));
        }
        for (; i < n / 2; i++) yc[i] = tmp[2 * i] > tmp[2 * i + 1] ? tmp[2 * i] : tmp[2 * i + 1];
    }
}

/* Depthwise convolution, 16 output positions a step (two blocks of 8), in
 * the padded plane's coordinates: with equal strides s (1 or 2), output
 * q = oy·Wp + ox reads input s·q + ky·Wp + kx, one contiguous run per tap
 * for any run of q, across rows too (small maps: 7x7 has no 8 outputs in a
 * row). A channel's grid goes into a buffer after the tap pairs in the
 * scratch, and its rows are copied out (dw_rows_out): columns ox >= OW
 * are computed and dropped. Taps go in
 * horizontal pairs (kx, kx + 1), one vpmaddwd each against the weight
 * pair (w[kx], w[kx + 1]) ((w, 0) for an odd row's last): with stride 2
 * the two inputs are adjacent in the padded plane already, an int32 lane
 * of a 16-int16 load; with stride 1 they come from the tap-pair plane
 * a->pairs, (x[i], x[i + 1]) at pair i, built once per input channel. The
 * sums are the portable kernel's exactly (int32; the planner bounds
 * them) and requant8 is its requantization. The last block runs past
 * the last output: the tap-pair plane has zero pairs after it, and with
 * stride 2 the reads stay within the padded planes' 16 elements of slack,
 * which qat__pad_planes zeroes (a step of 16 positions reads no further
 * than its two blocks of 8 would). A channel with a left shift and other
 * strides take the portable loop. */
QAT_AVX2 static void tap_pairs(const int16_t *x, int64_t n, int16_t *pairs) {
    int64_t i = 0;
    for (; i + 9 <= n; i += 8) {
        __m128i l0 = _mm_loadu_si128((const __m128i *)(const void *)(x + i));
        __m128i l1 = _mm_loadu_si128((const __m128i *)(const void *)(x + i + 1));
        _mm_storeu_si128((__m128i *)(void *)(pairs + 2 * i), _mm_unpacklo_epi16(l0, l1));
        _mm_storeu_si128((__m128i *)(void *)(pairs + 2 * i + 8), _mm_unpackhi_epi16(l0, l1));
    }
    for (; i < n; i++) pairs[2 * i] = x[i], pairs[2 * i + 1] = i + 1 < n ? x[i + 1] : 0;
    memset(pairs + 2 * n, 0, 2 * QAT_DW_PAIR_SLACK * sizeof *pairs); /* a last block's reads past the plane */
}

/* The AVX-VNNI level's quads come from the sample's int8 input, one input
 * channel at a time, through a padded byte plane in L1: u = x + 128 (the
 * sign bit flipped) at the pixels, zp_in + 128 (the real 0) in the padding
 * and in 32 bytes of slack, which depthwise_avx2 fills once (every channel
 * writes the same pixels). Rows of 8 or more bytes move in two overlapping
 * halves or in 16s, none past its row. */
QAT_AVX2 static void plane_bytes(const qat__depthwise_args *a, const int8_t *xc, uint8_t *bp) {
    const int W = a->W;
    const __m128i flip = _mm_set1_epi8((char)0x80);
    for (int y = 0; y < a->H; y++) {
        const int8_t *s = xc + (int64_t)y * W;
        uint8_t *d = bp + (int64_t)(y + a->ph) * a->Wp + a->pw;
#define FLIP16(i) \
    _mm_storeu_si128((__m128i *)(void *)(d + (i)), _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(s + (i))), flip))
#define FLIP8(i) \
    _mm_storel_epi64((__m128i *)(void *)(d + (i)), _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(const void *)(s + (i))), flip))
        if (W >= 16) {
            for (int i = 0; i + 16 <= W; i += 16) FLIP16(i);
            if (W % 16) FLIP16(W - 16);
        } else if (W >= 8) {
            FLIP8(0);
            FLIP8(W - 8);
        } else
            for (int i = 0; i < W; i++) d[i] = (uint8_t)(s[i] ^ 0x80);
#undef FLIP16
#undef FLIP8
    }
}

/* Quad i holds bytes i..i+3 of the byte plane, 8 quads at a time by one
 * byte shuffle of 11 bytes (the plane's slack covers the last reads).
 * Pixels past the plane give defined bytes that only zero weights or
 * dropped outputs meet. */
QAT_AVX2 static void tap_quads(const uint8_t *bp, int64_t n, uint8_t *quads) {
    const __m256i idx = _mm256_setr_epi8(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6, /* quads 0-3 */
                                         4, 5, 6, 7, 5, 6, 7, 8, 6, 7, 8, 9, 7, 8, 9, 10); /* quads 4-7 */
    for (int64_t i = 0; i < n; i += 8) {
        __m256i u = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(bp + i)));
        _mm256_storeu_si256((__m256i *)(void *)(quads + 4 * i), _mm256_shuffle_epi8(u, idx));
    }
}

QAT_AVX2 static inline __m256i dpbusd_ymm(__m256i acc, __m256i u, __m256i w, int vnni) {
    if (vnni == 1) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(w));
    else __asm__("vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(w));
    return acc;
}

/* One channel's grid outputs (position q at g[q]) into its [OH][OW] plane
 * yc, row by row, 16 bytes a store: a row narrower than 16 spills into
 * the next rows (or channels), which later copies overwrite, since the
 * copies go up in address. A row whose 16 bytes would pass the end of the
 * sample's output (room: the bytes from yc to it) is copied exactly. The
 * spilled bytes come from g past the channel's grid (earlier channels'
 * results, or never written): every one is overwritten. */
QAT_AVX2 static void dw_rows_out(const qat__depthwise_args *a, const int8_t *g, int8_t *yc, int64_t room) {
    int OW = a->OW;
    for (int oy = 0; oy < a->OH; oy++) {
        const int8_t *s = g + (int64_t)oy * a->Wp;
        int8_t *d = yc + (int64_t)oy * OW;
        if (OW < 16) {
            if ((int64_t)oy * OW + 16 > room) memcpy(d, s, (size_t)OW);
            else _mm_storeu_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
            continue;
        }
        int x = 0;
        for (; x + 16 <= OW; x += 16)
            _mm_storeu_si128((__m128i *)(void *)(d + x), _mm_loadu_si128((const __m128i *)(const void *)(s + x)));
        if (x < OW) /* the row's last 16, overlapping */
            _mm_storeu_si128((__m128i *)(void *)(d + OW - 16),
                             _mm_loadu_si128((const __m128i *)(const void *)(s + OW - 16)));
    }
}

/* The sums of 8 grid positions from src: n vpmaddwd of int16 tap pairs or,
 * with quads, n vpdpbusd of byte quads; tap p's 8 sources are the 32 bytes
 * at src + off[p] in both forms. */
QAT_AVX2 static inline __attribute__((always_inline)) __m256i dw_sums8(const uint8_t *src, const int32_t *off,
                                                                       const __m256i *wv, int n, bool quads, int vnni,
                                                                       __m256i acc) {
#pragma GCC unroll 12
    for (int p = 0; p < n; p++) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(src + off[p]));
        acc = quads ? dpbusd_ymm(acc, u, wv[p], vnni) : _mm256_add_epi32(acc, _mm256_madd_epi16(u, wv[p]));
    }
    return acc;
}

/* One channel's grid positions [0, q8) into g, 16 a step (two blocks of 8
 * side by side: their loads and multiplies interleave), the last 8 alone:
 * no block reads further than one of 8 from q8 - 8 would. fixed_n > 0 is n
 * as a constant (the loop unrolled, the weights in registers). */
QAT_AVX2 static inline __attribute__((always_inline)) void dw_grid(const qat__depthwise_args *a, const uint8_t *src0,
                                                                   const int32_t *off, const __m256i *wv, int n,
                                                                   const int fixed_n, bool quads, const bool of,
                                                                   int64_t q8, __m256i bias, __m256i m0, int right,
                                                                   int8_t *g) {
    const __m256i zp = _mm256_set1_epi32(a->zp), lo = _mm256_set1_epi32(a->lo), hi = _mm256_set1_epi32(a->hi);
    const int vnni = a->vnni; /* in locals: the stores to g may alias a */
    const bool single = a->single, nonneg = a->lo >= a->zp;
    /* of (a constant in each copy): the one-floor requantization, its constants out of the loop */
    const __m256i half = _mm256_set1_epi64x(of ? one_floor_half(right, single) : 0);
    const __m128i cnt = _mm_cvtsi32_si128(right - 1);
    const __m256i lo_zp = _mm256_sub_epi32(lo, zp), hi_zp = _mm256_sub_epi32(hi, zp);
#define DW_REQUANT(acc) \
    (of ? clamp_zp8(one_floor8(acc, m0, half, cnt), zp, lo_zp, hi_zp) : requant8(acc, m0, right, zp, lo, hi, single, nonneg))
    if (fixed_n) n = fixed_n;
    int64_t q0 = 0;
    for (; q0 + 16 <= q8; q0 += 16) {
        const uint8_t *src = src0 + 4 * q0; /* a position is 4 bytes in both forms */
        __m256i acc0 = dw_sums8(src, off, wv, n, quads, vnni, bias);
        __m256i acc1 = dw_sums8(src + 32, off, wv, n, quads, vnni, bias);
        _mm_storeu_si128((__m128i *)(void *)(g + q0), pack16(DW_REQUANT(acc0), DW_REQUANT(acc1)));
    }
    if (q0 < q8) {
        __m256i r = DW_REQUANT(dw_sums8(src0 + 4 * q0, off, wv, n, quads, vnni, bias));
        _mm_storel_epi64((__m128i *)(void *)(g + q0), pack16(r, r));
    }
#undef DW_REQUANT
}

QAT_AVX2 static void depthwise_avx2(const qat__depthwise_args *a) {
    int mult = a->O / a->C, taps = a->kh * a->kw, st = a->sw, np = (a->kw + 1) / 2, nq = (a->kw + 3) / 4;
    bool grid = a->pairs && a->sh == a->sw && (st == 1 || st == 2); /* pairs: the scratch */
    /* the AVX-VNNI level's bytes (a->vnni: prepare found every weight an int8 and every corrected
     * bias an int32): stride 1, rows of at most 8 taps (two quads) */
    bool quads = a->x8 != NULL; /* qat__dw_quads: the caller checked the rest */
    int64_t Q = (int64_t)(a->OH - 1) * a->Wp + a->OW; /* grid positions up to the last output */
    int32_t off[QAT_QOP_MAX_WINDOW];
    for (int t = 0; t < taps; t++) off[t] = (t / a->kw) * a->Wp + t % a->kw;
    /* source p's byte offset from a block's origin: quads (ky, j), 4 bytes a position; pairs (ky, j),
     * stride 1 in the tap-pair plane (4 bytes a position), stride 2 in the plane (2 bytes a pixel) */
    /* sources: n <= kh·kw <= QAT_QOP_MAX_WINDOW (a row's taps in groups of 2 or 4) */
    int n = quads ? a->kh * nq : a->kh * np, per = quads ? nq : np, group = quads ? 4 : 2;
    int32_t boff[QAT_QOP_MAX_WINDOW];
    int16_t tapof[QAT_QOP_MAX_WINDOW][4]; /* source p's weights: taps ky·kw + kx, -1 past the row */
    for (int p = 0; p < n; p++) {
        int ky = p / per, j = p % per;
        boff[p] = quads ? 4 * (ky * a->Wp + 4 * j) : st == 1 ? 4 * (ky * a->Wp + 2 * j) : 2 * (ky * a->Wp + 2 * j);
        for (int t = 0; t < 4; t++)
            tapof[p][t] = t < group && group * j + t < a->kw ? (int16_t)(ky * a->kw + group * j + t) : -1;
    }
    int8_t *gbuf = (int8_t *)(void *)(a->pairs + QAT_DW_PAIRS(a->Hp, a->Wp));
    int built = -1; /* the input channel whose tap pairs or quads the scratch holds */
    if (quads) memset(a->plane8, (uint8_t)(a->zp_in + 128), (size_t)((int64_t)a->Hp * a->Wp + 32));
    for (int o = 0; o < a->O; o++) {
        const int16_t *xc = quads ? NULL : a->xp + (int64_t)(o / mult) * a->Hp * a->Wp;
        const int16_t *w = a->w16 + (int64_t)o * taps;
        int8_t *yc = a->y + (int64_t)o * a->OH * a->OW;
        int64_t q8 = grid && a->shift[o] <= 0 ? (Q + 7) / 8 * 8 : 0; /* the last block runs past Q */
        if (quads && built != o / mult) { /* the byte plane, which the loop below reads too */
            plane_bytes(a, a->x8 + (int64_t)(o / mult) * a->H * a->W, a->plane8);
            tap_quads(a->plane8, (int64_t)a->Hp * a->Wp, (uint8_t *)(void *)a->pairs);
            built = o / mult;
        } else if (q8 && st == 1 && !quads && built != o / mult) { /* not by o % mult: that output may take the loop */
            tap_pairs(xc, (int64_t)a->Hp * a->Wp, a->pairs);
            built = o / mult;
        }
        if (q8) {
            __m256i wv[QAT_QOP_MAX_WINDOW];
            int64_t bias = quads ? a->bias4[o] : a->bias[o]; /* quads: corrected for the bytes' + 128 */
            for (int p = 0; p < n; p++) {
                int32_t v;
                if (quads) /* the row's 4 weights from 4j as bytes, prepared */
                    v = a->w4[(int64_t)o * n + p];
                else { /* the row's pair from 2j */
                    int16_t pair[2] = {w[tapof[p][0]], tapof[p][1] < 0 ? (int16_t)0 : w[tapof[p][1]]};
                    memcpy(&v, pair, sizeof v);
                }
                wv[p] = _mm256_set1_epi32(v);
            }
            const uint8_t *src = st == 1 ? (const uint8_t *)(const void *)a->pairs : (const uint8_t *)(const void *)xc;
            __m256i b = _mm256_set1_epi32((int32_t)bias), m0 = _mm256_set1_epi32(a->m0[o]);
            int right = -a->shift[o];
            /* six pairs or three quads: 3x3 kernels (and any other of that many sources); each with
             * the one-floor requantization apart */
            bool of = (a->single || a->lo >= a->zp) && right > 0;
            if (n == 6 && !quads && of) dw_grid(a, src, boff, wv, n, 6, false, true, q8, b, m0, right, gbuf);
            else if (n == 6 && !quads) dw_grid(a, src, boff, wv, n, 6, false, false, q8, b, m0, right, gbuf);
            else if (n == 3 && quads && of) dw_grid(a, src, boff, wv, n, 3, true, true, q8, b, m0, right, gbuf);
            else if (n == 3 && quads) dw_grid(a, src, boff, wv, n, 3, true, false, q8, b, m0, right, gbuf);
            else dw_grid(a, src, boff, wv, n, 0, quads, false, q8, b, m0, right, gbuf);
            dw_rows_out(a, gbuf, yc, (int64_t)(a->O - o) * a->OH * a->OW);
            continue;
        }
        /* output by output when the grid does not apply */
        for (int oy = 0; oy < a->OH; oy++)
            for (int ox = 0; ox < a->OW; ox++) {
                int64_t at = (int64_t)oy * a->sh * a->Wp + (int64_t)ox * a->sw;
                int32_t acc = a->bias[o];
                if (quads) /* u - (zp_in + 128) = x - zp_in */
                    for (int t = 0; t < taps; t++) acc += w[t] * (a->plane8[at + off[t]] - (a->zp_in + 128));
                else
                    for (int t = 0; t < taps; t++) acc += w[t] * xc[at + off[t]];
                yc[oy * a->OW + ox] = (int8_t)qat_requantize_r(acc, a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
            }
    }
}

void qat__depthwise_level(const qat__depthwise_args *a, qat__level level) {
    if (level >= QAT_LEVEL_AVX2 && has_avx2() && a->kh * a->kw <= QAT_QOP_MAX_WINDOW) depthwise_avx2(a);
    else qat__depthwise(a);
}

/* Σ of n int8 by vpsadbw: the bytes with their sign bits flipped (x + 128)
 * summed in 64-bit lanes against zero, 128·n taken off; the last n % 32
 * in C. */
QAT_AVX2 static int32_t row_sum_avx2(const int8_t *x, int n) {
    const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
    __m256i acc = zero;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), flip);
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(u, zero));
    }
    int64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, acc);
    int32_t sum = (int32_t)(lanes[0] + lanes[1] + lanes[2] + lanes[3]) - 128 * i;
    for (; i < n; i++) sum += x[i];
    return sum;
}

QAT_AVX2 static void global_avgpool_avx2(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    for (int c = 0; c < C; c++) y[c] = qat__global_avgpool_out(row_sum_avx2(x + (int64_t)c * HW, HW), HW, r);
}

void qat__global_avgpool_s8_level(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y,
                                  qat__level level) {
    if (level >= QAT_LEVEL_AVX2 && has_avx2()) global_avgpool_avx2(x, C, HW, r, y);
    else qat__global_avgpool_s8(x, C, HW, r, y);
}

/* One input's term of TFLite's ADD, MBQM((x - zp) << ls, m, -right), on
 * 8 lanes in 32-bit arithmetic alone. With k = 31 - ls and the multiplier
 * split as m = mh·2^k + ml (0 <= ml < 2^k), A = (x - zp)·mh and
 * B = (x - zp)·ml, the exact product is (x - zp)·m·2^ls = (A·2^k + B)·2^ls,
 * and since floor((A·2^k + C) / 2^k) = A + floor(C / 2^k) for integer A:
 *   SRDHM = floor(((x - zp)·m + 2^(k-1)) / 2^k) = A + ((B + 2^(k-1)) >> k)
 *   double: RDBP(SRDHM, r) = (v + 2^(r-1) - [v < 0]) >> r   (r >= 1; v at r = 0)
 *   single: floor((A·2^k + B + 2^(k+r-1)) / 2^(k+r)) = (A + 2^(r-1) + (B >> k)) >> r   (r >= 1)
 * Every sum fits int32 when |x - zp| <= 255, mh < 2^ls and ml < 2^k:
 * |A| < 2^28 and |B| < 2^31 need 8 <= ls <= 20 (add_split_fits), and then
 * v + 2^(r-1) < 2^28 + 2^30 for any r <= 31. TFLite's 20 gives k = 11. */
typedef struct {
    __m256i zp, mh, ml, half_k, half_r;
    __m128i k, r;
    bool single, round; /* round: r >= 1 */
} add_term;

static bool add_split_fits(const qat__add_args *r) {
    return r->left_shift >= 8 && r->left_shift <= 20 && r->sh_a <= 0 && r->sh_b <= 0 && r->sh_a >= -31 && r->sh_b >= -31;
}

QAT_AVX2 static inline add_term add_term_of(int32_t zp, int32_t m, int shift, int ls, bool single) {
    int k = 31 - ls, right = -shift;
    return (add_term){_mm256_set1_epi32(zp), _mm256_set1_epi32(m >> k), _mm256_set1_epi32(m & ((1 << k) - 1)),
                      _mm256_set1_epi32(1 << (k - 1)), _mm256_set1_epi32(right ? (int32_t)(1u << (right - 1)) : 0),
                      _mm_cvtsi32_si128(k), _mm_cvtsi32_si128(right), single, right > 0};
}

QAT_AVX2 static inline __m256i add_term8(__m128i bytes, const add_term *t) {
    __m256i d = _mm256_sub_epi32(_mm256_cvtepi8_epi32(bytes), t->zp);
    __m256i A = _mm256_mullo_epi32(d, t->mh), B = _mm256_mullo_epi32(d, t->ml);
    if (t->single && t->round) return _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(A, t->half_r), _mm256_sra_epi32(B, t->k)), t->r);
    __m256i v = _mm256_add_epi32(A, _mm256_sra_epi32(_mm256_add_epi32(B, t->half_k), t->k));
    if (!t->round) return v;
    return _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(v, t->half_r), _mm256_srai_epi32(v, 31)), t->r);
}

/* TFLite's ADD, 8 elements at a time: each input's (x - zp) << left
 * taken by its multiplier (add_term8 where the split fits, else mbqm8),
 * summed, requantized (requant8), the portable loop's integers step by
 * step; with a left shift in any of the three multipliers, and for the
 * last n % 8, the portable loop. split is a literal at each call: two
 * loops, no test inside. */
QAT_AVX2 static inline __attribute__((always_inline)) int64_t add_loop(const int8_t *a, const int8_t *b, int64_t n,
                                                                       const qat__add_args *r, int8_t *y, const bool split) {
    const __m256i za = _mm256_set1_epi32(r->zp_a), zb = _mm256_set1_epi32(r->zp_b);
    const __m256i ma = _mm256_set1_epi32(r->m_a), mb = _mm256_set1_epi32(r->m_b), mo = _mm256_set1_epi32(r->m_out);
    const __m256i zo = _mm256_set1_epi32(r->zp_out), lo = _mm256_set1_epi32(r->lo), hi = _mm256_set1_epi32(r->hi);
    const __m128i ls = _mm_cvtsi32_si128(r->left_shift);
    const bool nonneg = r->lo >= r->zp_out;
    const add_term ta = add_term_of(r->zp_a, r->m_a, r->sh_a, split ? r->left_shift : 20, r->single),
                   tb = add_term_of(r->zp_b, r->m_b, r->sh_b, split ? r->left_shift : 20, r->single);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i ba = _mm_loadl_epi64((const __m128i *)(a + i)), bb = _mm_loadl_epi64((const __m128i *)(b + i));
        __m256i sum;
        if (split) {
            sum = _mm256_add_epi32(add_term8(ba, &ta), add_term8(bb, &tb));
        } else {
            __m256i xa = _mm256_sll_epi32(_mm256_sub_epi32(_mm256_cvtepi8_epi32(ba), za), ls);
            __m256i xb = _mm256_sll_epi32(_mm256_sub_epi32(_mm256_cvtepi8_epi32(bb), zb), ls);
            sum = _mm256_add_epi32(mbqm8(xa, ma, -r->sh_a, r->single, false), mbqm8(xb, mb, -r->sh_b, r->single, false));
        }
        __m256i v = requant8(sum, mo, -r->sh_out, zo, lo, hi, r->single, nonneg);
        __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(y + i), _mm_packs_epi16(p16, p16));
    }
    return i;
}

QAT_AVX2 static void add_avx2(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y) {
    int64_t i = 0;
    if (r->sh_a <= 0 && r->sh_b <= 0 && r->sh_out <= 0)
        i = add_split_fits(r) ? add_loop(a, b, n, r, y, true) : add_loop(a, b, n, r, y, false);
    qat__add_s8(a + i, b + i, n - i, r, y + i);
}

bool qat__add_split_avx2(const qat__add_args *r) {
    return r->sh_a <= 0 && r->sh_b <= 0 && r->sh_out <= 0 && add_split_fits(r);
}

QAT_AVX2 void qat__add_terms_avx2(const int8_t *x, int32_t zp, int32_t m, int shift, int left_shift, bool single,
                                  int32_t *out) {
    const add_term t = add_term_of(zp, m, shift, left_shift, single);
    for (int i = 0; i < 256; i += 8)
        _mm256_storeu_si256((__m256i *)(void *)(out + i), add_term8(_mm_loadl_epi64((const __m128i *)(x + i)), &t));
}

void qat__add_s8_level(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y, qat__level level) {
    if (level >= QAT_LEVEL_AVX2 && has_avx2()) add_avx2(a, b, n, r, y);
    else qat__add_s8(a, b, n, r, y);
}


bool qat__maxpool2_s8_simd(const int8_t *x, int C, int H, int W, int8_t *y, int8_t *tmp) {
    if (W % 2 || !has_avx2()) return false; /* the executor calls it from level AVX2 up */
    maxpool2_avx2(x, C, H, W, y, tmp);
    return true;
}

void qat__gemm_requant(const qat__gemm_args *a) {
    if (has_vnni()) gemm_vnni_kernel(a);
    else if (has_avx2()) gemm_avx2_kernel(a);
    else qat__gemm_requant_ref(a);
}

/* The int16 GEMM of a level (the int8 path's ops use the VNNI one too). */
void qat__gemm_requant_level(const qat__gemm_args *a, qat__level level) {
    if (level >= QAT_LEVEL_VNNI16 && has_vnni()) gemm_vnni_kernel(a);
    else if (level >= QAT_LEVEL_AVX2 && has_avx2()) gemm_avx2_kernel(a);
    else qat__gemm_requant_ref(a);
}

qat__gemm_fn qat__gemm_kernel(int i, const char **name) {
    static const char *const names[] = {"portable C", "AVX2", "AVX-512 VNNI"};
    qat__gemm_fn fns[] = {qat__gemm_requant_ref, has_avx2() ? gemm_avx2_kernel : NULL,
                          has_vnni() ? gemm_vnni_kernel : NULL};
    if (i < 0 || i > 2) return NULL;
    if (name) *name = names[i];
    return fns[i];
}

#else

qat__level qat__cpu_level(void) { return QAT_LEVEL_PORTABLE; }
const char *qat__gemm_kernel_name(void) { return "portable C"; }
void qat__gemm_requant(const qat__gemm_args *a) { qat__gemm_requant_ref(a); }
void qat__conv_direct(const qat__direct_args *a) { qat__conv_direct_ref(a); }
bool qat__direct_vex(void) { return false; }
qat__pad_row_fn qat__pad_row_simd(qat__pad_kind kind) {
    return kind == QAT_PAD_QUADS ? qat__pad_row_quads : kind == QAT_PAD_PAIRS ? qat__pad_row_pairs : qat__pad_row_plain;
}
void qat__gemm_requant_level(const qat__gemm_args *a, qat__level level) {
    (void)level;
    qat__gemm_requant_ref(a);
}
qat__gemm_fn qat__gemm_kernel(int i, const char **name) {
    if (name) *name = "portable C";
    return i == 0 ? qat__gemm_requant_ref : NULL;
}
bool qat__maxpool2_s8_simd(const int8_t *x, int C, int H, int W, int8_t *y, int8_t *tmp) {
    (void)x, (void)C, (void)H, (void)W, (void)y, (void)tmp;
    return false;
}
void qat__depthwise_level(const qat__depthwise_args *a, qat__level level) {
    (void)level;
    qat__depthwise(a);
}
void qat__global_avgpool_s8_level(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y,
                                  qat__level level) {
    (void)level;
    qat__global_avgpool_s8(x, C, HW, r, y);
}
bool qat__add_split_avx2(const qat__add_args *r) { return (void)r, false; }
void qat__add_terms_avx2(const int8_t *x, int32_t zp, int32_t m, int shift, int left_shift, bool single,
                         int32_t *out) {
    for (int i = 0; i < 256; i++)
        out[i] = qat_multiply_by_quantized_multiplier_r((int32_t)((uint32_t)(x[i] - zp) << left_shift), m, shift, single);
}
void qat__add_s8_level(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y, qat__level level) {
    (void)level;
    qat__add_s8(a, b, n, r, y);
}

#endif
