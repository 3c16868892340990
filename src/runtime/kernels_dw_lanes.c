/* Depthwise convolution of small maps with the channels in the lanes
 * (kernels.h, "depthwise convolution of small maps"). A MobileNet's last
 * depthwise layers have hundreds of channels of 4x4, 2x2 or 1x1 outputs:
 * the plane-by-plane kernel (kernels_x86.c) sets up each channel (its tap
 * pairs, its weights, a grid of 8-position blocks) for 1 to 16 outputs,
 * and ran them at 1.4-6 GMAC/s. Here the sample is laid out position by
 * position, 16 channels to a 32-byte row, so one output position of 16
 * channels is 8 int16 pair products a tap pair, and the channel's own
 * multiplier, shift and bias are lanes of vectors loaded once per block.
 *
 * The sums are the portable kernel's (int32, bounded by the planner) and
 * the requantization is qat_requantize_r lane by lane: the tests compare
 * every level's bytes with the portable level's. */
#include <string.h>

#include "kernels.h"

#define LANES 16 /* channels a block */

bool qat__dw_lanes_fits(const qat_qop *op, const qat__op_geom *g) {
    return op->kind == QAT_QOP_CONV2D && g->depthwise && g->O == g->C &&
           (int64_t)g->OH * g->OW <= QAT_DW_LANES_MAX_POSITIONS && g->kk <= QAT_QOP_MAX_WINDOW;
}

static int64_t blocks(const qat__op_geom *g) { return (g->C + LANES - 1) / LANES; }
static int pairs(const qat__op_geom *g) { return (g->kk + 1) / 2; }

/* The requantization constants of 8 channels of a block (lane l: channel l of its half), for both
 * roundings (multiply_lanes, below, says how each is used). */
typedef struct {
    int32_t m0[8], bias[8], right[8];
    int32_t mask[8], half_mask[8]; /* double: (1 << right) - 1 and its half */
    int32_t excess[8];             /* single: 2^(31 - right) (2^31 wraps to INT32_MIN, as the sum does) */
    int64_t add_even[4], add_odd[4]; /* single: 2^(30 + right) + 2^62, the even and the odd lanes */
    int64_t cnt_even[4], cnt_odd[4]; /* single: 31 + right, the same lanes */
} lane_requant;

/* A block's constants: its tap pairs' weights, each 16 int32 lanes of (w[c][2j], w[c][2j + 1]) as two
 * int16 (0 past the window or past C) in the order the kernel's unpacks make (channels 0-3 and 8-11,
 * then 4-7 and 12-15); the two halves' lane_requant; whether both requantize in lanes (every shift
 * in [-31, 0]: a left shift, or a right shift past the 31 qat_requantize_r clamps it to, takes the
 * scalar loop). */
typedef struct {
    const int32_t *w;
    const lane_requant *r;
    const int32_t *vector;
} block_consts;

static int64_t block_bytes(const qat__op_geom *g) {
    return pairs(g) * LANES * (int64_t)sizeof(int32_t) + 2 * (int64_t)sizeof(lane_requant) + 32;
}

static block_consts block_at(const qat__op_geom *g, const uint8_t *c, int64_t b) {
    const uint8_t *at = c + b * block_bytes(g);
    const uint8_t *r = at + pairs(g) * LANES * (int64_t)sizeof(int32_t);
    return (block_consts){.w = (const int32_t *)(const void *)at, .r = (const lane_requant *)(const void *)r,
                          .vector = (const int32_t *)(const void *)(r + 2 * sizeof(lane_requant))};
}

int64_t qat__dw_lanes_const_bytes(const qat__op_geom *g) { return qat__round_up(blocks(g) * block_bytes(g), 64); }

/* the position-major sample, its rows of C rounded up to 16 */
int64_t qat__dw_lanes_scratch_bytes(const qat__op_geom *g) {
    return qat__round_up((int64_t)g->Hp * g->Wp * blocks(g) * LANES * (int64_t)sizeof(int16_t), 64);
}

static const int lane_channel[LANES] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

/* Channels [c0, c0 + 8): their constants; false if one of them needs the scalar loop. Channels
 * past C get a multiplier of 0. */
static bool half_constants(const qat_qop *op, const qat__op_geom *g, int64_t c0, lane_requant *r) {
    bool vector = true;
    memset(r, 0, sizeof *r);
    for (int l = 0; l < 8; l++) {
        int64_t c = c0 + l;
        int shift = c < g->C ? op->shift[c] : 0;
        if (shift > 0 || shift < -31) vector = false, shift = 0;
        r->m0[l] = c < g->C ? op->multiplier[c] : 0, r->bias[l] = c < g->C ? op->bias[c] : 0, r->right[l] = -shift;
        r->mask[l] = (int32_t)((1LL << -shift) - 1), r->half_mask[l] = r->mask[l] >> 1;
        r->excess[l] = (int32_t)(uint32_t)(1ULL << (31 + shift));
        int64_t add = (1LL << (30 - shift)) + (1LL << 62), cnt = 31 - shift;
        if (l % 2) r->add_odd[l / 2] = add, r->cnt_odd[l / 2] = cnt;
        else r->add_even[l / 2] = add, r->cnt_even[l / 2] = cnt;
    }
    return vector;
}

void qat__dw_lanes_prepare(const qat_qop *op, const qat__op_geom *g, uint8_t *c) {
    const qat_qtype *wq = &op->wq;
    memset(c, 0, (size_t)qat__dw_lanes_const_bytes(g));
    for (int64_t b = 0; b < blocks(g); b++) {
        block_consts k = block_at(g, c, b);
        int32_t *w = (int32_t *)(uintptr_t)k.w;
        for (int j = 0; j < pairs(g); j++)
            for (int l = 0; l < LANES; l++) {
                int64_t ch = b * LANES + lane_channel[l];
                int16_t pair[2] = {0, 0};
                for (int t = 0; t < 2 && ch < g->C && 2 * j + t < g->kk; t++) {
                    int64_t i = ch * g->kk + 2 * j + t;
                    pair[t] = (int16_t)(op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)]);
                }
                memcpy(&w[j * LANES + l], pair, sizeof pair);
            }
        lane_requant *r = (lane_requant *)(uintptr_t)k.r;
        bool v0 = half_constants(op, g, b * LANES, &r[0]), v1 = half_constants(op, g, b * LANES + 8, &r[1]);
        *(int32_t *)(uintptr_t)k.vector = v0 && v1;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QAT_AVX2 __attribute__((target("avx2")))

#define LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* qat_multiply_by_quantized_multiplier_r of 8 sums, lane by lane. Double: SRDHM is floor((x·m0 +
 * 2^30) / 2^31) (kernels_x86.c's mbqm8), then the rounding division by 2^right with its
 * sign-dependent threshold, by variable shifts. Single: floor((x·m0 + 2^(30+r)) / 2^(31+r)); AVX2 has
 * no 64-bit arithmetic shift, so 2^62 is added first (|x·m0| < 2^62: the sum is in [0, 2^64) and
 * 2^(31+r) divides 2^62), shifted logically, and 2^(31-r) taken off the low word, which holds the
 * int32 result. */
QAT_AVX2 static inline __m256i multiply_lanes(__m256i x, const lane_requant *r, bool single) {
    __m256i m0 = LOAD(r->m0);
    __m256i even = _mm256_mul_epi32(x, m0), odd = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m0, 32));
    if (single) {
        even = _mm256_srlv_epi64(_mm256_add_epi64(even, LOAD(r->add_even)), LOAD(r->cnt_even));
        odd = _mm256_srlv_epi64(_mm256_add_epi64(odd, LOAD(r->add_odd)), LOAD(r->cnt_odd));
        return _mm256_sub_epi32(_mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA), LOAD(r->excess));
    }
    const __m256i half = _mm256_set1_epi64x(1LL << 30);
    even = _mm256_srli_epi64(_mm256_add_epi64(even, half), 31);
    odd = _mm256_slli_epi64(_mm256_srli_epi64(_mm256_add_epi64(odd, half), 31), 32);
    __m256i v = _mm256_blend_epi32(even, odd, 0xAA);
    __m256i rem = _mm256_and_si256(v, LOAD(r->mask));
    __m256i thr = _mm256_sub_epi32(LOAD(r->half_mask), _mm256_srai_epi32(v, 31));
    return _mm256_sub_epi32(_mm256_srav_epi32(v, LOAD(r->right)), _mm256_cmpgt_epi32(rem, thr));
}

/* zp + v clamped to [lo, hi], v first clamped to [lo - zp, hi - zp] (zp + v may not fit 32 bits). */
QAT_AVX2 static inline __m256i clamp_lanes(__m256i v, const qat__dw_lanes_args *a) {
    v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(a->lo - a->zp)), _mm256_set1_epi32(a->hi - a->zp));
    return _mm256_add_epi32(v, _mm256_set1_epi32(a->zp));
}

/* The 16 output bytes of one position of block c0 from its sums (channel order). */
QAT_AVX2 static inline __m128i requantize16(const qat__dw_lanes_args *a, __m256i s0, __m256i s1, block_consts k,
                                            int c0) {
    if (*k.vector) {
        __m256i v0 = clamp_lanes(multiply_lanes(_mm256_add_epi32(s0, LOAD(k.r[0].bias)), &k.r[0], a->single), a);
        __m256i v1 = clamp_lanes(multiply_lanes(_mm256_add_epi32(s1, LOAD(k.r[1].bias)), &k.r[1], a->single), a);
        __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8);
        return _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    }
    int32_t v[LANES];
    int8_t out[LANES] = {0};
    _mm256_storeu_si256((__m256i *)(void *)v, s0);
    _mm256_storeu_si256((__m256i *)(void *)(v + 8), s1);
    for (int l = 0; l < LANES && c0 + l < a->g.C; l++) {
        int c = c0 + l;
        out[l] = (int8_t)qat_requantize_r(v[l] + a->bias[c], a->m0[c], a->shift[c], a->zp, a->lo, a->hi, a->single);
    }
    return _mm_loadu_si128((const __m128i *)(const void *)out);
}

/* 16 rows of 16 bytes transposed in place (r[j] byte i <- r[i] byte j): unpacks of bytes, words,
 * dwords and qwords, each round interleaving twice as many rows. */
QAT_AVX2 static inline void transpose16(__m128i r[16]) {
    __m128i a[16], b[16];
    for (int p = 0; p < 8; p++) /* rows 2p, 2p + 1: columns 0-7, 8-15 */
        a[2 * p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]), a[2 * p + 1] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
    for (int q = 0; q < 4; q++) /* rows 4q..4q+3: columns 4m..4m+3 in b[4q + m] */
        for (int h = 0; h < 2; h++) {
            b[4 * q + 2 * h] = _mm_unpacklo_epi16(a[4 * q + h], a[4 * q + 2 + h]);
            b[4 * q + 2 * h + 1] = _mm_unpackhi_epi16(a[4 * q + h], a[4 * q + 2 + h]);
        }
    for (int g = 0; g < 2; g++) /* rows 8g..8g+7: columns 2c, 2c + 1 in a[8g + c] */
        for (int m = 0; m < 4; m++) {
            a[8 * g + 2 * m] = _mm_unpacklo_epi32(b[8 * g + m], b[8 * g + 4 + m]);
            a[8 * g + 2 * m + 1] = _mm_unpackhi_epi32(b[8 * g + m], b[8 * g + 4 + m]);
        }
    for (int c = 0; c < 8; c++)
        r[2 * c] = _mm_unpacklo_epi64(a[c], a[8 + c]), r[2 * c + 1] = _mm_unpackhi_epi64(a[c], a[8 + c]);
}

/* The sample position-major: t[p][c] = x[c][p] - zp_in at the input's pixels (the padding and the
 * channels past C hold the caller's zeros). By whole vectors: a full block's 16 channels of one pixel (maps of 1 pixel), of 4 pixels
 * (their 64 bytes: each 16-byte quarter to pixel-major by a byte shuffle, then the quarters' pixel
 * dwords by unpacks), or of 16 pixels at a time (transpose16); the rest (the last, partial block,
 * pixels after the last 16) one by one. */
QAT_AVX2 static void lay_out_avx2(const qat__dw_lanes_args *a, int16_t *t) {
    const qat__op_geom *g = &a->g;
    int HW = g->H * g->W, Cp = (int)(blocks(g) * LANES), full = g->C / LANES;
    const __m256i zp = _mm256_set1_epi16((int16_t)a->zp_in);
#define ROW(i) (t + ((int64_t)((i) / g->W + a->ph) * g->Wp + (i) % g->W + a->pw) * Cp)
#define PUT(i, bytes) \
    _mm256_storeu_si256((__m256i *)(void *)(ROW(i) + c0), _mm256_sub_epi16(_mm256_cvtepi8_epi16(bytes), zp))
    int done = 0; /* pixels laid out for the full blocks */
    if (HW == 1) {
        for (int c0 = 0; c0 < full * LANES; c0 += LANES)
            PUT(0, _mm_loadu_si128((const __m128i *)(const void *)(a->x + c0)));
        done = 1;
    } else if (HW == 4) {
        const __m128i by_pixel = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        for (int c0 = 0; c0 < full * LANES; c0 += LANES) {
            __m128i q[4];
            for (int j = 0; j < 4; j++) {
                const int8_t *quarter = a->x + 4 * (c0 + 4 * j); /* channels c0 + 4j .. + 3 */
                q[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)quarter), by_pixel);
            }
            __m128i lo01 = _mm_unpacklo_epi32(q[0], q[1]), lo23 = _mm_unpacklo_epi32(q[2], q[3]);
            __m128i hi01 = _mm_unpackhi_epi32(q[0], q[1]), hi23 = _mm_unpackhi_epi32(q[2], q[3]);
            PUT(0, _mm_unpacklo_epi64(lo01, lo23));
            PUT(1, _mm_unpackhi_epi64(lo01, lo23));
            PUT(2, _mm_unpacklo_epi64(hi01, hi23));
            PUT(3, _mm_unpackhi_epi64(hi01, hi23));
        }
        done = 4;
    } else {
        done = HW / 16 * 16;
        for (int c0 = 0; c0 < full * LANES; c0 += LANES)
            for (int i0 = 0; i0 < done; i0 += 16) {
                __m128i r[16];
                for (int l = 0; l < 16; l++)
                    r[l] = _mm_loadu_si128((const __m128i *)(const void *)(a->x + (int64_t)(c0 + l) * HW + i0));
                transpose16(r);
                for (int j = 0; j < 16; j++) PUT(i0 + j, r[j]);
            }
    }
    for (int c = 0; c < g->C; c++)
        for (int i = c < full * LANES ? done : 0; i < HW; i++)
            ROW(i)[c] = (int16_t)(a->x[(int64_t)c * HW + i] - a->zp_in);
#undef PUT
#undef ROW
}

/* A block's output bytes o[p] (16 channels of position p) into y [C][P], whose 16 channels' bytes
 * are contiguous: with P = 1 one row; with P = 4 transposed back by byte and word unpacks; with
 * P = 16 by transpose16; else (and for a partial block) byte by byte. */
QAT_AVX2 static inline void store_block(const qat__dw_lanes_args *a, __m128i *o, int c0, int P) {
    int8_t *y = a->y + (int64_t)c0 * P;
    bool whole = c0 + LANES <= a->g.C;
    if (whole && P == 1) {
        _mm_storeu_si128((__m128i *)(void *)y, o[0]);
        return;
    }
    if (whole && P == 4) {
        __m128i lo01 = _mm_unpacklo_epi8(o[0], o[1]), lo23 = _mm_unpacklo_epi8(o[2], o[3]); /* channels 0-7 */
        __m128i hi01 = _mm_unpackhi_epi8(o[0], o[1]), hi23 = _mm_unpackhi_epi8(o[2], o[3]); /* channels 8-15 */
        _mm_storeu_si128((__m128i *)(void *)y, _mm_unpacklo_epi16(lo01, lo23));
        _mm_storeu_si128((__m128i *)(void *)(y + 16), _mm_unpackhi_epi16(lo01, lo23));
        _mm_storeu_si128((__m128i *)(void *)(y + 32), _mm_unpacklo_epi16(hi01, hi23));
        _mm_storeu_si128((__m128i *)(void *)(y + 48), _mm_unpackhi_epi16(hi01, hi23));
        return;
    }
    if (whole && P == 16) {
        transpose16(o);
        for (int l = 0; l < LANES; l++) _mm_storeu_si128((__m128i *)(void *)(y + 16 * l), o[l]);
        return;
    }
    for (int p = 0; p < P; p++) {
        int8_t b[LANES];
        _mm_storeu_si128((__m128i *)(void *)b, o[p]);
        for (int l = 0; l < LANES && c0 + l < a->g.C; l++) y[(int64_t)l * P + p] = b[l];
    }
}

/* Every output position of block b: np tap pairs (fixed_np > 0: np as a constant, the weights
 * in registers), the pair's two rows unpacked into channels 0-3, 8-11 (lo) and 4-7, 12-15 (hi). */
QAT_AVX2 static inline __attribute__((always_inline)) void block(const qat__dw_lanes_args *a, const int16_t *t,
                                                                 int64_t b, const int32_t *off, int np,
                                                                 const int fixed_np) {
    const qat__op_geom *g = &a->g;
    if (fixed_np) np = fixed_np;
    int Cp = (int)(blocks(g) * LANES), c0 = (int)b * LANES, P = g->OH * g->OW;
    block_consts k = block_at(g, a->consts, b);
    __m256i wlo[QAT_QOP_MAX_WINDOW / 2], whi[QAT_QOP_MAX_WINDOW / 2];
    for (int j = 0; j < np; j++) wlo[j] = LOAD(k.w + j * LANES), whi[j] = LOAD(k.w + j * LANES + 8);
    __m128i o[QAT_DW_LANES_MAX_POSITIONS];
    for (int oy = 0; oy < g->OH; oy++)
        for (int ox = 0; ox < g->OW; ox++) {
            const int16_t *src = t + ((int64_t)oy * a->sh * g->Wp + (int64_t)ox * a->sw) * Cp + c0;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int j = 0; j < np; j++) {
                __m256i u = LOAD(src + off[2 * j]), v = LOAD(src + off[2 * j + 1]);
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(u, v), wlo[j]));
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(u, v), whi[j]));
            }
            o[oy * g->OW + ox] = requantize16(a, _mm256_permute2x128_si256(lo, hi, 0x20),
                                              _mm256_permute2x128_si256(lo, hi, 0x31), k, c0);
        }
    store_block(a, o, c0, P);
}

QAT_AVX2 static void dw_lanes_avx2(const qat__dw_lanes_args *a) {
    const qat__op_geom *g = &a->g;
    int16_t *t = a->scratch;
    lay_out_avx2(a, t);
    int Cp = (int)(blocks(g) * LANES), np = pairs(g);
    /* tap k's row offset; a lone last tap pairs with itself against a zero weight */
    int32_t off[QAT_QOP_MAX_WINDOW + 1] = {0};
    for (int k = 0; k < g->kk; k++) off[k] = ((k / a->kw) * g->Wp + k % a->kw) * Cp;
    off[g->kk] = off[g->kk - 1];
    for (int64_t b = 0; b < blocks(g); b++) {
        if (np == 5) block(a, t, b, off, np, 5); /* 3x3 (or any window of 9 or 10 taps) */
        else block(a, t, b, off, np, 0);
    }
}

#endif

/* The sample position-major: t[p][c] = x[c][p] - zp_in at the input's pixels (the padding and the
 * channels past C hold the caller's zeros). */
static void lay_out(const qat__dw_lanes_args *a, int16_t *t) {
    int Cp = (int)(blocks(&a->g) * LANES);
    const qat__op_geom *g = &a->g;
    for (int c = 0; c < g->C; c++) {
        const int8_t *xc = a->x + (int64_t)c * g->H * g->W;
        for (int iy = 0; iy < g->H; iy++) {
            int16_t *row = t + ((int64_t)(iy + a->ph) * g->Wp + a->pw) * Cp + c;
            for (int ix = 0; ix < g->W; ix++) row[(int64_t)ix * Cp] = (int16_t)(xc[iy * g->W + ix] - a->zp_in);
        }
    }
}

/* The same sums in C, for a CPU without AVX2 (the levels never choose this kernel there). */
static void dw_lanes_ref(const qat__dw_lanes_args *a) {
    const qat__op_geom *g = &a->g;
    int16_t *t = a->scratch;
    lay_out(a, t);
    int Cp = (int)(blocks(g) * LANES);
    for (int c = 0; c < g->C; c++) {
        const int32_t *w = block_at(g, a->consts, c / LANES).w;
        int lane = 0;
        while (lane_channel[lane] != c % LANES) lane++;
        for (int p = 0; p < g->OH * g->OW; p++) {
            int oy = p / g->OW, ox = p % g->OW;
            int32_t acc = 0;
            for (int k = 0; k < g->kk; k++) {
                int16_t pair[2];
                memcpy(pair, &w[(k / 2) * LANES + lane], sizeof pair);
                int64_t at = ((int64_t)(oy * a->sh + k / a->kw) * g->Wp + ox * a->sw + k % a->kw) * Cp + c;
                acc += pair[k % 2] * t[at];
            }
            int32_t v = qat_requantize_r(acc + a->bias[c], a->m0[c], a->shift[c], a->zp, a->lo, a->hi, a->single);
            a->y[(int64_t)c * g->OH * g->OW + p] = (int8_t)v;
        }
    }
}

void qat__dw_lanes(const qat__dw_lanes_args *a) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        dw_lanes_avx2(a);
        return;
    }
#endif
    dw_lanes_ref(a);
}

