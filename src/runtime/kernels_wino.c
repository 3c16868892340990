/* The AVX2 level's 3x3 convolutions of stride 1 as Winograd F(2x2, 3x3)
 * in integers (kernels.h, "Winograd"): 16 multiplies for 4 outputs where
 * the direct convolution takes 36. On a core with one vector multiply
 * pipe (an AVX2-only Zen: vpmaddwd at half a ymm a cycle) the multiplies
 * are the convolution's time; the transforms are adds, which other pipes
 * take. The sums are the direct convolution's exactly: every transform is
 * an integer identity, and kernels.h bounds what each step holds.
 *
 * Three passes over one sample: the input tiles transformed into V (the
 * channel pairs' int16 lanes, 8 tiles a vector), the 16 products' GEMMs
 * V·U into M (vpmaddwd over the channel pairs, 4 outputs x 16 tiles a
 * block, as the direct convolution's blocks), and the output transform,
 * which places each tile's 2x2 outputs and requantizes them as the direct
 * convolution does. */
#include <string.h>

#include "kernels.h"

static int32_t weight_at(const qat_qop *op, int64_t i) {
    return op->weight[i] - op->wq.zero_point[qat_qtype_param_index(&op->wq, i)];
}

bool qat__wino_fits(const qat_qop *op, const qat__op_geom *g) {
#if defined(__x86_64__) && defined(__GNUC__)
    return op->kind == QAT_QOP_CONV2D && g->groups == 1 && op->kh == 3 && op->kw == 3 && op->stride_h == 1 &&
           op->stride_w == 1 && g->C % 2 == 0 && g->C >= QAT_WINO_MIN_CHANNELS;
#else
    (void)op, (void)g;
    return false; /* the kernel is AVX2's */
#endif
}

bool qat__wino_bounds_fit(int32_t zp_in, const qat_qop *op, const qat__op_geom *g) {
    /* any int8 byte, not just the tensor's range: the program's own input bytes are the caller's */
    int64_t gmax = 0, lo = INT8_MIN - (int64_t)zp_in, hi = INT8_MAX - (int64_t)zp_in;
    int64_t dmax = hi > -lo ? hi : -lo;
    for (int64_t i = 0; i < (int64_t)g->O * g->K; i++) {
        int64_t v = weight_at(op, i);
        if (v < 0) v = -v;
        if (v > gmax) gmax = v;
    }
    /* V and U within int16; 4·|y| <= 4·9·C·dmax·gmax below 2^31 */
    return 4 * dmax <= INT16_MAX && 9 * gmax <= INT16_MAX && 36 * (int64_t)g->C * dmax * gmax < ((int64_t)1 << 31);
}

qat__wino_geom qat__wino_geometry(const qat__op_geom *g) {
    qat__wino_geom w = {.tx = (g->OW + 1) / 2, .ty = (g->OH + 1) / 2};
    w.T = w.tx * w.ty, w.Ww = 2 * w.tx + 2, w.Hw = 2 * w.ty + 2;
    w.end = w.tx >= 8 ? w.T : w.T - w.tx + 8; /* the last chunk's end: a row of fewer than 8 tiles takes 8 */
    w.Tg = (int)qat__round_up(w.T, 8), w.Ts = (int)qat__round_up(w.end > w.Tg ? w.end : w.Tg, 8);
    return w;
}

int64_t qat__wino_const_bytes(const qat__op_geom *g) {
    return qat__round_up(16 * qat__round_up(g->O, 4) * (g->C / 2) * 4, 64);
}

static int64_t planes_bytes(const qat__op_geom *g, const qat__wino_geom *w) {
    return qat__round_up(((int64_t)g->C / 2 * w->Hw * w->Ww + QAT_WINO_SLACK) * 4, 64);
}

static int64_t v_bytes(const qat__op_geom *g, const qat__wino_geom *w) {
    return qat__round_up(16 * (int64_t)(g->C / 2) * w->Ts * 4, 64);
}

int64_t qat__wino_scratch_bytes(const qat__op_geom *g) {
    qat__wino_geom w = qat__wino_geometry(g);
    return planes_bytes(g, &w) + v_bytes(g, &w) + qat__round_up(16 * qat__round_up(g->O, 4) * w.Ts * 4, 64);
}

qat__wino_args qat__wino_layout(const qat__op_geom *g, void *scratch) {
    qat__wino_geom w = qat__wino_geometry(g);
    uint8_t *v = (uint8_t *)scratch + planes_bytes(g, &w);
    return (qat__wino_args){.g = *g, .planes = scratch, .v = (int32_t *)(void *)v,
                            .m = (int32_t *)(void *)(v + v_bytes(g, &w))};
}

/* U = (2G) g (2G)^T for each output and input channel, 2G = [[2,0,0],
 * [1,1,1], [1,-1,1], [0,0,2]]: 4 times F(2x2, 3x3)'s G g G^T, in integers. */
void qat__wino_prepare(const qat_qop *op, const qat__op_geom *g, int32_t *u) {
    int C2 = g->C / 2, Op = (int)qat__round_up(g->O, 4);
    memset(u, 0, (size_t)(16 * (int64_t)Op * C2) * sizeof *u);
    for (int o = 0; o < g->O; o++)
        for (int c = 0; c < g->C; c++) {
            int32_t k[3][3], t[4][3], U[4][4];
            for (int i = 0; i < 9; i++) k[i / 3][i % 3] = weight_at(op, ((int64_t)o * g->C + c) * 9 + i);
            for (int j = 0; j < 3; j++) {
                t[0][j] = 2 * k[0][j], t[1][j] = k[0][j] + k[1][j] + k[2][j];
                t[2][j] = k[0][j] - k[1][j] + k[2][j], t[3][j] = 2 * k[2][j];
            }
            for (int i = 0; i < 4; i++) {
                U[i][0] = 2 * t[i][0], U[i][1] = t[i][0] + t[i][1] + t[i][2];
                U[i][2] = t[i][0] - t[i][1] + t[i][2], U[i][3] = 2 * t[i][2];
            }
            for (int e = 0; e < 16; e++) { /* the pair's half c % 2, through memcpy: the slot is an int32 */
                int32_t *slot = &u[((int64_t)e * Op + o / 4 * 4) * C2 + c / 2 * 4 + o % 4];
                int16_t pair[2];
                memcpy(pair, slot, sizeof pair);
                pair[c % 2] = (int16_t)U[e / 4][e % 4];
                memcpy(slot, pair, sizeof pair);
            }
        }
}

void qat__wino_pad(const int8_t *x, const qat__op_geom *g, int ph, int pw, int32_t zp, qat__pad_row_fn row,
                   bool clear, int32_t *planes) {
    qat__wino_geom w = qat__wino_geometry(g);
    if (clear) memset(planes, 0, (size_t)planes_bytes(g, &w));
    qat__pad_row r = {.W = g->W, .pw = pw, .Wp = w.Ww, .sw = 2, .zp = zp, .cs = (int64_t)g->H * g->W};
    for (int cc = 0; cc < g->C / 2; cc++)
        for (int y = 0; y < g->H; y++)
            row(x + ((int64_t)2 * cc * g->H + y) * g->W, &r, planes + ((int64_t)cc * w.Hw + y + ph) * w.Ww);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QAT_AVX2 __attribute__((target("avx2")))
#include "requant_x86.h"

QAT_AVX2 static inline __m256i ld(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
QAT_AVX2 static inline void st(int32_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)p, v); }

/* V = B^T d B of 8 tiles from the one at row0 (its patch's first row in
 * the phase-split plane: even columns from row0, odd ones Ww/2 further),
 * B^T = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]], in the pairs'
 * int16 lanes; element e = 4i + j to v + e·estep. */
QAT_AVX2 static void input_tiles(const int32_t *row0, int Ww, int32_t *v, int64_t estep) {
    const int Wh = Ww / 2;
    __m256i t[4][4];
    for (int r = 0; r < 4; r++) {
        const int32_t *p = row0 + (int64_t)r * Ww;
        __m256i d0 = ld(p), d1 = ld(p + Wh), d2 = ld(p + 1), d3 = ld(p + Wh + 1);
        t[r][0] = _mm256_sub_epi16(d0, d2), t[r][1] = _mm256_add_epi16(d1, d2);
        t[r][2] = _mm256_sub_epi16(d2, d1), t[r][3] = _mm256_sub_epi16(d1, d3);
    }
    for (int j = 0; j < 4; j++) {
        st(v + j * estep, _mm256_sub_epi16(t[0][j], t[2][j]));
        st(v + (4 + j) * estep, _mm256_add_epi16(t[1][j], t[2][j]));
        st(v + (8 + j) * estep, _mm256_sub_epi16(t[2][j], t[1][j]));
        st(v + (12 + j) * estep, _mm256_sub_epi16(t[1][j], t[3][j]));
    }
}

/* The first tile of a row's chunk after the one at tx0: chunks of 8, the
 * last overlapping the one before it (rows of 8 tiles or more), or one
 * chunk (shorter rows: its last lanes are the next row's tiles, which that
 * row writes again). -1 after the last. */
static inline int next_chunk(int tx0, int tx) {
    if (tx0 + 8 >= tx) return -1;
    return tx0 + 16 > tx ? tx - 8 : tx0 + 8;
}

QAT_AVX2 static void input_transform(const qat__wino_args *a, const qat__wino_geom *w) {
    const int C2 = a->g.C / 2;
    const int64_t estep = (int64_t)C2 * w->Ts;
    for (int cc = 0; cc < C2; cc++) {
        const int32_t *plane = a->planes + (int64_t)cc * w->Hw * w->Ww;
        int32_t *v = a->v + (int64_t)cc * w->Ts;
        for (int ty = 0; ty < w->ty; ty++)
            for (int tx0 = 0; tx0 >= 0; tx0 = next_chunk(tx0, w->tx))
                input_tiles(plane + (int64_t)2 * ty * w->Ww + tx0, w->Ww, v + ty * w->tx + tx0, estep);
        if (w->Tg > w->end) /* the GEMM's last lanes, from the last row's patches past its end (the slack) */
            input_tiles(plane + (int64_t)2 * (w->ty - 1) * w->Ww + (w->Tg - 8 - (w->ty - 1) * w->tx), w->Ww,
                        v + w->Tg - 8, estep);
    }
}

/* M[e][o0..o0+3][t..] for 16 or 8 tiles: Σ over the channel pairs of V's
 * pairs times U's broadcast pairs (vpmaddwd). */
#define MAC(c, x, w) c = _mm256_add_epi32(c, _mm256_madd_epi16(x, w))
QAT_AVX2 static void block_4x16(const int32_t *v, const int32_t *u, int C2, int Ts, int32_t *m) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int cc = 0; cc < C2; cc++, v += Ts, u += 4) {
        __m256i x0 = ld(v), x1 = ld(v + 8);
        __m256i w0 = _mm256_set1_epi32(u[0]), w1 = _mm256_set1_epi32(u[1]);
        MAC(c00, x0, w0), MAC(c01, x1, w0), MAC(c10, x0, w1), MAC(c11, x1, w1);
        __m256i w2 = _mm256_set1_epi32(u[2]), w3 = _mm256_set1_epi32(u[3]);
        MAC(c20, x0, w2), MAC(c21, x1, w2), MAC(c30, x0, w3), MAC(c31, x1, w3);
    }
    st(m, c00), st(m + 8, c01), st(m + Ts, c10), st(m + Ts + 8, c11);
    st(m + 2 * Ts, c20), st(m + 2 * Ts + 8, c21), st(m + 3 * Ts, c30), st(m + 3 * Ts + 8, c31);
}

QAT_AVX2 static void block_4x8(const int32_t *v, const int32_t *u, int C2, int Ts, int32_t *m) {
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
    for (int cc = 0; cc < C2; cc++, v += Ts, u += 4) {
        __m256i x = ld(v);
        MAC(c0, x, _mm256_set1_epi32(u[0])), MAC(c1, x, _mm256_set1_epi32(u[1]));
        MAC(c2, x, _mm256_set1_epi32(u[2])), MAC(c3, x, _mm256_set1_epi32(u[3]));
    }
    st(m, c0), st(m + Ts, c1), st(m + 2 * Ts, c2), st(m + 3 * Ts, c3);
}

QAT_AVX2 static void products(const qat__wino_args *a, const qat__wino_geom *w) {
    const int C2 = a->g.C / 2, Op = (int)qat__round_up(a->rq.O, 4), Tg = w->Tg, Ts = w->Ts;
    for (int e = 0; e < 16; e++)
        for (int o0 = 0; o0 < Op; o0 += 4) {
            const int32_t *u = a->u + ((int64_t)e * Op + o0) * C2, *v = a->v + (int64_t)e * C2 * Ts;
            int32_t *m = a->m + ((int64_t)e * Op + o0) * Ts;
            int t = 0;
            for (; t + 16 <= Tg; t += 16) block_4x16(v + t, u, C2, Ts, m + t);
            if (t < Tg) block_4x8(v + t, u, C2, Ts, m + t);
        }
}

/* One output row of a chunk: the tiles' left (ya) and right (yb) outputs
 * interleaved into 16 positions, requantized and stored from column
 * 2·tx0. spill (direct_store): the bytes past np land on a row the pass
 * writes later. */
QAT_AVX2 static inline void store_row(const out_requant *q, int8_t *plane, int OW, int64_t so, int oy, int tx0,
                                      bool spill_ok, __m256i ya, __m256i yb) {
    __m256i lo = _mm256_unpacklo_epi32(ya, yb), hi = _mm256_unpackhi_epi32(ya, yb);
    int np = OW - 2 * tx0 < 16 ? OW - 2 * tx0 : 16;
    int64_t at = (int64_t)oy * OW + 2 * tx0;
    store_requant(q, plane + at, np, spill_ok && at + 16 <= so, _mm256_permute2x128_si256(lo, hi, 0x20),
                  _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* Y = A^T M A / 4, A^T = [[1,1,1,0], [0,1,-1,-1]]: exact, the sum being 4
 * times the convolution's (kernels.h bounds it below 2^31). */
QAT_AVX2 static void output_transform(const qat__wino_args *a, const qat__wino_geom *w) {
    const qat__direct_args *r = &a->rq;
    const int64_t estep = qat__round_up(r->O, 4) * w->Ts, so = (int64_t)r->OH * r->OW;
    const int OH = r->OH, OW = r->OW, tx = w->tx, tyn = w->ty, Ts = w->Ts;
    for (int o = 0; o < r->O; o++) {
        const out_requant q = out_requant_of(r, o);
        int8_t *plane = r->out + o * so;
        for (int ty = 0; ty < tyn; ty++)
            for (int tx0 = 0; tx0 >= 0; tx0 = next_chunk(tx0, tx)) {
                const int32_t *m = a->m + (int64_t)o * Ts + ty * tx + tx0;
                __m256i s[4], d[4];
                for (int i = 0; i < 4; i++) {
                    __m256i m0 = ld(m + (4 * i) * estep), m1 = ld(m + (4 * i + 1) * estep);
                    __m256i m2 = ld(m + (4 * i + 2) * estep), m3 = ld(m + (4 * i + 3) * estep);
                    s[i] = _mm256_add_epi32(_mm256_add_epi32(m0, m1), m2);
                    d[i] = _mm256_sub_epi32(_mm256_sub_epi32(m1, m2), m3);
                }
                __m256i y00 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), s[2]), 2);
                __m256i y01 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(d[0], d[1]), d[2]), 2);
                /* a row of one chunk: the first output row's spill lands on the second, stored next */
                store_row(&q, plane, OW, so, 2 * ty, tx0, tx <= 8, y00, y01);
                if (2 * ty + 1 >= OH) continue;
                __m256i y10 = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_sub_epi32(s[1], s[2]), s[3]), 2);
                __m256i y11 = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_sub_epi32(d[1], d[2]), d[3]), 2);
                store_row(&q, plane, OW, so, 2 * ty + 1, tx0, true, y10, y11);
            }
    }
}

void qat__conv_wino(const qat__wino_args *a) {
    qat__wino_geom w = qat__wino_geometry(&a->g);
    input_transform(a, &w);
    products(a, &w);
    output_transform(a, &w);
}
#else
void qat__conv_wino(const qat__wino_args *a) { (void)a; } /* never chosen: qat__wino_fits is false here */
#endif
