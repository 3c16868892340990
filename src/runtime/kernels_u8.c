/* The int8 path's portable half (kernels.h): which layout each linear and
 * conv2d op takes and its working memory (qat__i8_geometry), its constants
 * (corrected bias, packed weights), the padded stride-phase planes, the
 * position map, and reference kernels that state what the x86 kernels of
 * kernels_vnni8.c compute (the tests compare them). */
#include <string.h>

#include "kernels.h"

/* Bytes after every plane stack and column row: tiles compute up to 64
 * positions past the last one (4 bytes each), and the depthwise windows
 * read 64 bytes at up to 4 bytes a position. The results there are dropped. */
#define SLACK 512
/* Planes and columns of one pass of m samples stay about this size: a
 * quarter of the L2 cache of the machines this was measured on (1-2 MiB). */
#define PASS_BYTES (256 * 1024)
/* Implicit im2col computes the grid's dropped positions too; above this
 * fraction the compact copy of the columns costs less (measured, see README). */
#define IMPLICIT_MAX_WASTE 0.3

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A pitch between the rows a GEMM tile reads together (plane stacks,
 * column rows): an odd multiple of 64 bytes. A multiple of 4 KiB would
 * put every row's line of a tile in the same L1 set (the set is address
 * bits 6..11), and 16 rows overflow its 12 ways: the tile then misses L1
 * on every k (measured: a third of the pointwise convolutions' time). */
static int64_t pitch(int64_t bytes) {
    int64_t p = qat__round_up(bytes, 64);
    return p / 64 % 2 ? p : p + 64;
}

/* The GEMM tile for Og output rows: R rows x 16·TT positions, 16 int32
 * accumulators in zmm registers (the columns and the previous tile's
 * requantization, interleaved with this tile's sums, need the others). */
static void conv_tile(int Og, int *R, int *TT) {
    if (Og <= 4) *R = 4, *TT = 4;
    else *R = 8, *TT = 2; /* each broadcast weight used twice: 8-10 % faster than 16 x 16 (measured) */
}

void qat__i8_geometry(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, int max_batch, qat__i8_geom *i) {
    (void)q;
    memset(i, 0, sizeof *i);
    if (op->kind == QAT_QOP_LINEAR) {
        i->kind = QAT_I8_LINEAR;
        i->K4 = (int)cdiv(g->K, 4);
        i->TT = g->O > 32 ? 3 : (int)cdiv(g->O, 16);
        i->R = 8;
        i->Op = (int)qat__round_up(g->O, 16 * i->TT);
        i->m = max_batch;
        /* scratch: the last sample's row, padded to whole groups of 4 */
        i->scratch = qat__round_up(4 * (int64_t)i->K4, 64);
        int64_t wbytes = qat__round_up((int64_t)i->Op, 16) * i->K4 * 4;
        i->const_bytes = i->rq_offset = qat__round_up(4 * (int64_t)i->Op, 64) + qat__round_up(wbytes, 64);
        return;
    }
    int sh = op->stride_h, sw = op->stride_w, Cg = g->C / g->groups, OH = g->OH, OW = g->OW;
    int ph = op->pad_h, pw = op->pad_w;
    i->P = (int64_t)OH * OW;
    i->phy = sh, i->phx = sw, i->step = 1;
    i->Hq = (int)cdiv(g->Hp, sh), i->Wq = (int)cdiv(g->Wp, sw);
    i->packed = sh == 1 && sw == 1 && op->kh >= ph + 1 && op->kh <= 2 * ph + 1 && op->kw >= pw + 1 && op->kw <= 2 * pw + 1;
    if (i->packed) i->Hq = g->H + ph, i->Wq = g->W + pw;
    int64_t stacks, col_per_sample = 0;
    if (g->depthwise) {
        /* rows split by phase, columns at a byte step of sw (windows of 4 taps) */
        i->kind = QAT_I8_DEPTHWISE, i->pix = 1, i->phx = 1, i->step = sw;
        i->G = (int)cdiv(op->kw, 4), i->K4 = op->kh * i->G;
        if (!i->packed) i->Wg = (int)cdiv(g->Wp, sw), i->Wq = i->Wg * sw;
        else i->Wg = i->Wq;
        stacks = (int64_t)g->C * sh;
        i->R = 1, i->TT = 4, i->Op = g->O;
    } else {
        i->kind = Cg % 4 == 0 ? QAT_I8_DENSE4 : QAT_I8_GENERIC;
        i->pix = i->kind == QAT_I8_DENSE4 ? 4 : 1;
        i->K4 = i->kind == QAT_I8_DENSE4 ? Cg / 4 * g->kk : (int)cdiv(g->K, 4);
        i->Wg = i->Wq;
        stacks = (int64_t)g->C / i->pix * sh * sw;
        double waste = 1.0 - (double)i->P / ((double)i->Hq * i->Wq);
        i->implicit = i->kind == QAT_I8_DENSE4 && waste <= IMPLICIT_MAX_WASTE;
        if (!i->implicit) col_per_sample = 4 * (int64_t)i->K4 * i->P;
        conv_tile(g->Og, &i->R, &i->TT);
        i->Op = (int)qat__round_up(g->Og, i->R);
    }
    int64_t plane_per_sample = (int64_t)i->pix * i->Hq * i->Wq;
    int64_t per_sample = stacks * plane_per_sample + col_per_sample;
    int64_t m = PASS_BYTES / (per_sample ? per_sample : 1);
    i->m = (int)(m < 1 ? 1 : m > max_batch ? max_batch : m);
    i->front = i->packed ? qat__round_up((int64_t)pw * i->pix, 64) : 0;
    int64_t top = i->packed ? (int64_t)ph * i->Wq * i->pix : 0; /* the first sample's top padding rows */
    i->plane = pitch(i->front + top + plane_per_sample * i->m + SLACK);
    bool grid = g->depthwise || i->implicit; /* positions on the planes' grid, else compact */
    int gm = i->m, gH = grid ? i->Hq : 1, gW = grid ? i->Wg : (int)i->P, gOH = grid ? OH : 1, gOW = grid ? OW : (int)i->P;
    i->Q = (int64_t)(gm - 1) * gH * gW + (int64_t)(gOH - 1) * gW + gOW;
    i->max_segs = qat__posmap_max_segs(gm, gH, gW, gOH, gOW);
    i->colpitch = col_per_sample ? pitch(4 * qat__round_up(i->Q, 64) + SLACK) : 0;
    int ksrc = i->kind == QAT_I8_GENERIC ? 4 * i->K4 : i->K4;
    i->off_planes = 0;
    i->off_col = i->off_planes + stacks * i->plane;
    i->off_koff = i->off_col + (col_per_sample ? i->K4 * i->colpitch : 0);
    i->off_ksrc = i->off_koff + qat__round_up(4 * (int64_t)i->K4, 64);
    i->off_first = i->off_ksrc + qat__round_up(4 * (int64_t)ksrc, 64);
    i->off_seg = i->off_first + qat__round_up(4 * (cdiv(i->Q, 16) + 1), 64);
    i->scratch = i->off_seg + qat__round_up(i->max_segs * (int64_t)sizeof(qat__seg), 64);
    int64_t rows = g->depthwise ? g->O : (int64_t)g->groups * i->Op;
    int64_t wbytes = g->depthwise ? (int64_t)g->O * i->K4 * 4 : rows * i->K4 * 4;
    i->rq_offset = qat__round_up(4 * rows, 64) + qat__round_up(wbytes, 64);
    i->const_bytes = i->rq_offset + (int64_t)g->O * (int64_t)sizeof(qat__rq);
}

qat__rq qat__rq_make(int32_t bias, int32_t m0, int shift, int32_t zp, int32_t lo, bool single) {
    int right = shift < 0 ? (shift < -31 ? 31 : -shift) : 0;
    qat__rq q = {.m0 = m0, .n = (1LL << 30) + (right ? 1LL << (30 + right) : 0), .c = right ? 1LL << 31 : 0,
                 .s = 31 + right, .bias = bias, .left = shift > 0 ? shift : 0, .zp = zp};
    if (single) { /* shift in [-31, 30] (the program's check): s in [1, 62] */
        int s = 31 - (shift < -31 ? -31 : shift > 30 ? 30 : shift);
        q.n = 1LL << (s - 1), q.c = 0, q.s = s, q.left = 0;
    }
    /* Under a clamp at or above zp (a fused ReLU): without the term, (P + n) >> s is still the exact
     * result where P >= -2^30; below, both are <= 0 (P + n < 2^(30+right)), so zp plus either clamps
     * to lo (kernels_vnni8.c: mbqm16) */
    if (lo >= zp) q.c = 0;
    /* |P| < 2^62 and n <= 2^61 + 2^30: adding zp·2^s (|zp| <= 2^8) stays
     * below 2^63 while s <= 53 */
    if (q.s <= 53) q.n += (int64_t)zp * (1LL << q.s), q.fold = 1;
    return q;
}

/* Where weight k (natural order, [C/groups][kh][kw] flattened) of output
 * row r (within its group) goes in the packed [Op/R][K4][R][4] block. */
static int64_t packed_index(const qat_qop *op, const qat__op_geom *g, const qat__i8_geom *i, int r, int k) {
    int k4, j;
    if (i->kind == QAT_I8_DENSE4) {
        int c = k / g->kk, t = k % g->kk; /* t = ky·kw + kx */
        k4 = (c / 4) * g->kk + t, j = c % 4;
    } else {
        k4 = k / 4, j = k % 4;
    }
    (void)op;
    return (((int64_t)(r / i->R) * i->K4 + k4) * i->R + r % i->R) * 4 + j;
}

void qat__i8_prepare(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const qat__i8_geom *i,
                     void *consts) {
    const qat_qtype *wq = &op->wq;
    int32_t zp_in = q->tensors[op->inputs[0]].q.zero_point;
    int64_t rows = i->kind == QAT_I8_DEPTHWISE || i->kind == QAT_I8_LINEAR ? i->Op : (int64_t)g->groups * i->Op;
    int32_t *bias8 = consts;
    int8_t *w8 = (int8_t *)consts + qat__round_up(4 * rows, 64);
    memset(consts, 0, (size_t)i->const_bytes);
    /* bias8 = bias - c·Σ_k w8: every term modulo 2^32 (kernels.h: the final sum is exact) */
    uint32_t corr = (uint32_t)(i->kind == QAT_I8_LINEAR ? zp_in : 128 + zp_in);
    for (int o = 0; o < g->O; o++) {
        uint32_t sum = 0;
        for (int k = 0; k < g->K; k++) {
            int64_t idx = (int64_t)o * g->K + k;
            int32_t v = op->weight[idx] - wq->zero_point[qat_qtype_param_index(wq, idx)];
            sum += (uint32_t)v;
            if (i->kind == QAT_I8_LINEAR) {
                ((uint8_t *)w8)[(((int64_t)(o / 16) * i->K4 + k / 4) * 16 + o % 16) * 4 + k % 4] = (uint8_t)(v + 128);
            } else if (i->kind == QAT_I8_DEPTHWISE) {
                int ky = k / op->kw, kx = k % op->kw;
                w8[(((int64_t)o * op->kh + ky) * i->G + kx / 4) * 4 + kx % 4] = (int8_t)v;
            } else {
                int grp = o / g->Og, r = o % g->Og;
                w8[(int64_t)grp * i->Op * i->K4 * 4 + packed_index(op, g, i, r, k)] = (int8_t)v;
            }
        }
        int64_t at = i->kind == QAT_I8_DEPTHWISE || i->kind == QAT_I8_LINEAR ? o : (int64_t)(o / g->Og) * i->Op + o % g->Og;
        bias8[at] = (int32_t)((uint32_t)op->bias[o] - corr * sum);
        if (i->kind != QAT_I8_LINEAR)
            ((qat__rq *)(void *)((uint8_t *)consts + i->rq_offset))[o] =
                qat__rq_make(bias8[at], op->multiplier[o], op->shift[o], q->tensors[op->output].q.zero_point,
                             op->act_min, q->rounding == QAT_ROUNDING_SINGLE);
    }
}

void qat__add_tables(const qat__add_args *r, uint8_t *tables) {
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 256; i++) {
            int32_t zp = t ? r->zp_b : r->zp_a, m = t ? r->m_b : r->m_a, sh = t ? r->sh_b : r->sh_a;
            /* qat__add_s8's term, for the input integer i - 128 */
            int32_t v = qat_multiply_by_quantized_multiplier_r((int32_t)((uint32_t)(i - 128 - zp) << r->left_shift), m, sh,
                                                               r->single);
            for (int k = 0; k < 4; k++) tables[(t * 4 + k) * 256 + i] = (uint8_t)((uint32_t)v >> (8 * k));
        }
}

/* ---- position maps ------------------------------------------------------------------ */

int64_t qat__posmap_max_segs(int m, int Hq, int Wq, int OH, int OW) {
    (void)Hq, (void)Wq;
    return (int64_t)m * OH * (cdiv(OW, 16) + 1);
}

int64_t qat__posmap_build(int m, int Hq, int Wq, int OH, int OW, int64_t out_n, qat__posmap *map) {
    int64_t Q = (int64_t)(m - 1) * Hq * Wq + (int64_t)(OH - 1) * Wq + OW;
    int64_t chunks = cdiv(Q, 16), filled = 0;
    int32_t ns = 0;
    for (int s = 0; s < m; s++)
        for (int oy = 0; oy < OH; oy++) {
            int64_t at = ((int64_t)s * Hq + oy) * Wq, dst = s * out_n + (int64_t)oy * OW;
            for (int left = OW; left > 0;) {
                int64_t chunk = at / 16;
                int lane = (int)(at % 16), n = 16 - lane < left ? 16 - lane : left;
                uint32_t bits = ((1u << n) - 1) << lane;
                while (filled <= chunk) map->first[filled++] = ns;
                qat__seg *prev = ns > map->first[chunk] ? &map->seg[ns - 1] : NULL;
                if (prev && prev->dst + __builtin_popcount(prev->mask) == dst) prev->mask |= bits; /* continues */
                else map->seg[ns++] = (qat__seg){.dst = dst, .mask = bits};
                at += n, dst += n, left -= n;
            }
        }
    while (filled <= chunks) map->first[filled++] = ns;
    map->chunks = chunks;
    return Q;
}

/* ---- planes ------------------------------------------------------------------------ */

/* The packed layout: front and top padding, then each sample's rows, each
 * followed by pw padding pixels, and ph padding rows after each sample. */
static void planes_packed(const int8_t *x, const qat__planes_args *a, uint8_t *dst) {
    uint8_t pad = (uint8_t)(a->zp + 128);
    int64_t rowb = (int64_t)a->Wq * a->pix, used = a->front + rowb * (a->ph + (int64_t)a->m * a->Hq);
    for (int cg = 0; cg < a->C / a->pix; cg++) {
        uint8_t *st = dst + cg * a->plane;
        memset(st, pad, (size_t)(a->front + a->ph * rowb));
        for (int s = 0; s < a->m; s++) {
            uint8_t *rows = st + a->front + (a->ph + (int64_t)s * a->Hq) * rowb;
            for (int iy = 0; iy < a->H; iy++) {
                uint8_t *row = rows + iy * rowb;
                for (int ix = 0; ix < a->W; ix++)
                    for (int j = 0; j < a->pix; j++)
                        row[ix * a->pix + j] =
                            (uint8_t)((uint8_t)x[s * a->in_n + ((int64_t)(cg * a->pix + j) * a->H + iy) * a->W + ix] ^ 0x80);
                memset(row + (int64_t)a->W * a->pix, pad, (size_t)((int64_t)(a->Wq - a->W) * a->pix));
            }
            memset(rows + a->H * rowb, pad, (size_t)((int64_t)(a->Hq - a->H) * rowb));
        }
        memset(st + used, 0, (size_t)(a->plane - used));
    }
}

void qat__planes_u8(const int8_t *x, const qat__planes_args *a, uint8_t *dst) {
    if (a->packed) {
        planes_packed(x, a, dst);
        return;
    }
    uint8_t pad = (uint8_t)(a->zp + 128);
    int64_t used = (int64_t)a->pix * a->m * a->Hq * a->Wq;
    for (int cg = 0; cg < a->C / a->pix; cg++)
        for (int py = 0; py < a->phy && py < a->kh; py++)
            for (int px = 0; px < a->phx && px < a->kw; px++) {
                uint8_t *st = dst + (((int64_t)cg * a->phy + py) * a->phx + px) * a->plane;
                for (int s = 0; s < a->m; s++)
                    for (int qy = 0; qy < a->Hq; qy++) {
                        int iy = qy * a->sh + py - a->ph;
                        uint8_t *row = st + ((int64_t)s * a->Hq + qy) * a->Wq * a->pix;
                        for (int qx = 0; qx < a->Wq; qx++) {
                            int ix = qx * (a->phx > 1 ? a->sw : 1) + px - a->pw;
                            bool in = iy >= 0 && iy < a->H && ix >= 0 && ix < a->W;
                            for (int j = 0; j < a->pix; j++) {
                                int c = cg * a->pix + j;
                                row[qx * a->pix + j] =
                                    in ? (uint8_t)((uint8_t)x[s * a->in_n + ((int64_t)c * a->H + iy) * a->W + ix] ^ 0x80) : pad;
                            }
                        }
                    }
                memset(st + used, 0, (size_t)(a->plane - used));
            }
}

/* ---- reference kernels --------------------------------------------------------------- */

/* Stores the 16 sums of chunk c of output channel o through the map. */
static void store_chunk(const qat__posmap *map, int64_t c, int8_t *out, const int32_t acc[16], int32_t m0, int shift,
                        int32_t zp, int32_t lo, int32_t hi, bool single) {
    for (int32_t s = map->first[c]; s < map->first[c + 1]; s++) {
        const qat__seg *sg = &map->seg[s];
        int64_t d = sg->dst;
        for (int l = 0; l < 16; l++)
            if (sg->mask >> l & 1) out[d++] = (int8_t)qat_requantize_r(acc[l], m0, shift, zp, lo, hi, single);
    }
}

void qat__gemm8_ref(const qat__gemm8_args *a) {
    for (int o = 0; o < a->O; o++) {
        const int8_t *w = a->w + ((int64_t)(o / a->R) * a->K4 * a->R + o % a->R) * 4;
        for (int64_t c = 0; c < a->map->chunks; c++) {
            int32_t acc[16];
            for (int j = 0; j < 16; j++) {
                uint32_t sum = (uint32_t)a->bias8[o]; /* modulo 2^32, as the SIMD kernel */
                for (int k = 0; k < a->K4; k++) {
                    const uint8_t *u = a->col + a->koff[k] + 4 * (c * 16 + j);
                    const int8_t *wk = w + (int64_t)k * a->R * 4;
                    for (int b = 0; b < 4; b++) sum += (uint32_t)(u[b] * wk[b]);
                }
                acc[j] = (int32_t)sum;
            }
            store_chunk(a->map, c, a->out + o * a->so, acc, a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
        }
    }
}

void qat__dw8_ref(const qat__dw8_args *a) {
    for (int o = 0; o < a->O; o++) {
        const uint8_t *pl = a->planes + (int64_t)(o / a->mult) * a->cstride;
        const int8_t *w = a->w + (int64_t)o * a->T * 4;
        for (int64_t c = 0; c < a->map->chunks; c++) {
            int32_t acc[16];
            for (int j = 0; j < 16; j++) {
                uint32_t sum = (uint32_t)a->bias8[o];
                for (int t = 0; t < a->T; t++)
                    for (int b = 0; b < 4; b++) sum += (uint32_t)(pl[a->tap[t] + a->step * (c * 16 + j) + b] * w[t * 4 + b]);
                acc[j] = (int32_t)sum;
            }
            store_chunk(a->map, c, a->out + o * a->so, acc, a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
        }
    }
}

void qat__linear8_ref(const qat__linear8_args *a) {
    for (int s = 0; s < a->n; s++) {
        const int8_t *x = s == a->n - 1 && a->last ? a->last : a->x + (int64_t)s * a->K;
        uint32_t sx = 0;
        for (int k = 0; k < a->K; k++) sx += (uint32_t)x[k];
        for (int o = 0; o < a->O; o++) {
            uint32_t sum = (uint32_t)a->bias8[o] - 128u * sx;
            for (int k = 0; k < 4 * a->K4; k++)
                sum += (uint32_t)(a->wu[(((int64_t)(o / 16) * a->K4 + k / 4) * 16 + o % 16) * 4 + k % 4] * x[k]);
            a->out[(int64_t)s * a->O + o] =
                (int8_t)qat_requantize_r((int32_t)sum, a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
        }
    }
}

void qat__columns_u8(const uint8_t *planes, const int32_t *ksrc, const qat__columns_args *a, uint8_t *col) {
    int64_t P = (int64_t)a->OH * a->OW, used = 4 * a->m * P, end = 4 * qat__round_up(a->m * P, 64);
    for (int k4 = 0; k4 < a->K4; k4++) {
        uint8_t *row = col + k4 * a->colpitch;
        for (int s = 0; s < a->m; s++)
            for (int oy = 0; oy < a->OH; oy++) {
                uint8_t *d = row + 4 * (s * P + (int64_t)oy * a->OW);
                int64_t at = ((int64_t)s * a->Hq + oy) * a->Wq;
                if (a->dense4) {
                    memcpy(d, planes + ksrc[k4] + 4 * at, 4 * (size_t)a->OW);
                    continue;
                }
                for (int j = 0; j < 4; j++) {
                    int k = 4 * k4 + j;
                    const uint8_t *src = k < a->K ? planes + ksrc[k] + at : NULL;
                    for (int ox = 0; ox < a->OW; ox++) d[4 * ox + j] = src ? src[ox] : 0;
                }
            }
        memset(row + used, 0, (size_t)(end - used));
    }
}
