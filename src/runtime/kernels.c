/* The runtime's portable integer kernels (kernels.h). The products are an
 * integer GEMM written here, not cblas_sgemm: BLAS has no integer GEMM,
 * float32 cannot hold every int32 sum exactly (2^24), and this runtime
 * exists for devices with no float unit. The x86 kernels are in
 * kernels_x86.c and give the same integers; the simple ops are qk.h's
 * kernels, the source the generated C ships. */
#include <string.h>

#include "kernels.h"
#include "qk.h"

void qat__pad_planes(const int8_t *x, int C, int H, int W, int ph, int pw, int sw, int32_t zp, qat__pad_kind kind,
                     qat__pad_row_fn row, bool clear, void *dst) {
    int G = (int)kind, esize = kind == QAT_PAD_QUADS ? 1 : 2;
    int Hp = H + 2 * ph, Wp = W + 2 * pw, Wrow = G == 1 ? Wp : qat__direct_wrow(Wp, sw);
    int64_t pixel = (int64_t)G * esize, plane = (int64_t)Hp * Wrow * pixel;
    int64_t slack = G == 1 ? QAT_IM2COL_CHUNK * esize : QAT_DIRECT_SLACK * pixel;
    int fill = kind == QAT_PAD_QUADS ? (uint8_t)(zp + 128) : 0; /* the real 0 */
    uint8_t *d = dst;
    if (clear && (ph || pw || Wrow != Wp)) memset(d, fill, (size_t)(C / G * plane));
    if (clear) memset(d + C / G * plane, fill, (size_t)slack);
    qat__pad_row r = {.W = W, .pw = pw, .Wp = Wp, .sw = G == 1 ? 1 : sw, .zp = zp, .cs = (int64_t)H * W};
    for (int cc = 0; cc < C / G; cc++)
        for (int y = 0; y < H; y++)
            row(x + ((int64_t)G * cc * H + y) * W, &r, d + cc * plane + (y + ph) * Wrow * pixel);
}

/* The row functions take r's fields into locals first: their byte stores
 * may alias anything, and the compiler would reload every field after
 * each one. */
void qat__pad_row_plain(const int8_t *restrict src, const qat__pad_row *r, void *row) {
    const int W = r->W;
    const int32_t zp = r->zp;
    int16_t *restrict d = (int16_t *)row + r->pw;
    for (int i = 0; i < W; i++) d[i] = (int16_t)(src[i] - zp);
}

void qat__pad_row_pairs(const int8_t *restrict src, const qat__pad_row *r, void *row) {
    const int W = r->W, pw = r->pw, Wp = r->Wp, sw = r->sw;
    const int32_t zp = r->zp;
    const int8_t *restrict s1 = src + r->cs;
    for (int i = 0; i < W; i++) {
        int16_t *d = (int16_t *)row + 2 * qat__direct_col(i + pw, Wp, sw);
        d[0] = (int16_t)(src[i] - zp), d[1] = (int16_t)(s1[i] - zp);
    }
}

void qat__pad_row_quads(const int8_t *restrict src, const qat__pad_row *r, void *row) {
    const int W = r->W, pw = r->pw, Wp = r->Wp, sw = r->sw;
    const int64_t cs = r->cs;
    uint8_t *restrict d = row;
    for (int i = 0; i < W; i++) {
        uint8_t *p = d + 4 * qat__direct_col(i + pw, Wp, sw);
        for (int j = 0; j < 4; j++) p[j] = (uint8_t)(src[j * cs + i] + 128);
    }
}

void qat__pad_s8(const int8_t *x, int C, int H, int W, int ph, int pw, int32_t zp, int16_t *xp) {
    qat__pad_planes(x, C, H, W, ph, pw, 1, zp, QAT_PAD_PLAIN, qat__pad_row_plain, true, xp);
}

/* The quad plane from the padded row: pixel i of row y holds bytes s·i ..
 * s·i + 3 of it. Row by row, in pieces of PIECE pixels: the piece's bytes
 * of the padded row (fill past it) into run, then four bytes a pixel. */
void qat__pad_tap_quads(const int8_t *x, int H, int W, int ph, int pw, int sw, int32_t zp, uint8_t *dst) {
    enum { PIECE = 64, MAX_SW = 2 }; /* qat__direct_tap_quads: sw <= 2 */
    int Hp = H + 2 * ph, Wp = W + 2 * pw, Wq = qat__taps_width(Wp, sw);
    uint8_t fill = (uint8_t)(zp + 128), run[MAX_SW * (PIECE - 1) + 4];
    if (sw < 1 || sw > MAX_SW) return; /* never called so (the form's condition) */
    for (int y = 0; y < Hp; y++) {
        const int8_t *src = y >= ph && y < ph + H ? x + (int64_t)(y - ph) * W : NULL;
        uint8_t *d = dst + (int64_t)y * Wq * 4;
        for (int i0 = 0; i0 < Wq; i0 += PIECE) {
            int n = Wq - i0 < PIECE ? Wq - i0 : PIECE, c0 = sw * i0, len = sw * (n - 1) + 4; /* padded columns [c0, c0 + len) */
            for (int k = 0; k < len; k++) {
                int c = c0 + k - pw;
                run[k] = src && c >= 0 && c < W ? (uint8_t)(src[c] + 128) : fill;
            }
            for (int i = 0; i < n; i++) memcpy(d + 4 * (i0 + i), run + sw * i, 4);
        }
    }
    memset(dst + (int64_t)Hp * Wq * 4, fill, QAT_DIRECT_SLACK * 4);
}

/* The pair plane, pixel by pixel: column c of padded row y is x - zp
 * inside the input, 0 in the padding and at c = Wp, past the row. */
static inline int16_t padded_at(const int8_t *row, int c, int pw, int W, int32_t zp) {
    return row && c >= pw && c < pw + W ? (int16_t)(row[c - pw] - zp) : 0;
}

void qat__pad_tap_pairs(const int8_t *x, int H, int W, int ph, int pw, int32_t zp, int16_t *dst) {
    int Hp = H + 2 * ph, Wp = W + 2 * pw;
    for (int y = 0; y < Hp; y++) {
        const int8_t *src = y >= ph && y < ph + H ? x + (int64_t)(y - ph) * W : NULL;
        int16_t *d = dst + (int64_t)y * Wp * 2;
        for (int i = 0; i < Wp; i++) d[2 * i] = padded_at(src, i, pw, W, zp), d[2 * i + 1] = padded_at(src, i + 1, pw, W, zp);
    }
    memset(dst + (int64_t)Hp * Wp * 2, 0, QAT_DIRECT_SLACK * 4);
}

bool qat__direct_fits(const qat_qop *op, const qat__op_geom *g) {
    return (op->kind == QAT_QOP_CONV2D && g->groups == 1 && op->stride_w <= 2 && g->C % 2 == 0) ||
           qat__direct_tap_pairs(op, g) || qat__direct_tap_quads(op, g);
}

bool qat__direct_bytes_fit(const qat_qop *op, const qat__op_geom *g, bool vnni) {
    if (!qat__direct_fits(op, g) || (g->C % 4 && !qat__direct_tap_quads(op, g))) return false;
    const qat_qtype *wq = &op->wq;
    int32_t lo = vnni ? -128 : -64, hi = vnni ? 127 : 64;
    for (int64_t i = 0; i < (int64_t)g->O * g->K; i++) {
        int32_t v = op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)];
        if (v < lo || v > hi) return false;
    }
    return true;
}

int64_t qat__direct_const_bytes(const qat_qop *op, const qat__op_geom *g) {
    int64_t KP = qat__direct_groups(op, g, 2), KQ = qat__direct_groups(op, g, 4), Op = qat__round_up(g->O, 8);
    int64_t pairs = qat__round_up(Op * KP * 4, 64) + qat__round_up(KP * 4, 64);
    int64_t quads = qat__round_up(Op * KQ * 4, 64) + qat__round_up(KQ * 4, 64) + qat__round_up((int64_t)g->O * 4, 64);
    return pairs > quads ? pairs : quads;
}

int qat__direct_batch(const qat_qop *op, const qat__op_geom *g, int max_batch) {
    int P = g->OH * g->OW;
    if (op->kh != 1 || op->kw != 1 || op->pad_h || op->pad_w || op->stride_h != 1 || op->stride_w != 1 || P >= 16 ||
        g->C == 1) /* one channel: the tap forms' planes */
        return 1;
    int B = (64 + P - 1) / P;
    return B < max_batch ? B : max_batch;
}

/* The direct convolution's planes of C channels, Hp rows of Wp pixels (at most 2 bytes a channel's
 * pixel in either form), with their slack. */
static int64_t planes_bytes(int64_t C, int64_t Hp, int64_t Wp) {
    return qat__round_up((C * Hp * (Wp + 1) + 2 * QAT_DIRECT_SLACK) * 2, 64);
}

int64_t qat__direct_batch_planes_bytes(const qat__op_geom *g, int B) {
    return planes_bytes(g->C, 1, (int64_t)B * g->OH * g->OW);
}

int64_t qat__direct_batch_scratch_bytes(const qat__op_geom *g, int B) {
    int64_t W = (int64_t)B * g->OH * g->OW;
    return qat__direct_batch_planes_bytes(g, B) + qat__round_up(g->C * W, 64) + qat__round_up(g->O * W, 64);
}

int64_t qat__direct_scratch_bytes(const qat_qop *op, const qat__op_geom *g) {
    int64_t planes = planes_bytes(g->C, g->Hp, g->Wp);
    if (qat__direct_tap_quads(op, g) || qat__direct_tap_pairs(op, g)) { /* the pair plane's size at stride 1 */
        int64_t quads = qat__round_up(qat__tap_quads_bytes(g->Hp, g->Wp, op->stride_w), 64);
        if (quads > planes) planes = quads;
    }
    if (!qat__direct_subsampled(op, g)) return planes;
    /* the planes of the OH·OW pixels (4 bytes each, C/2 of them at most), then the pixels' int8 copy */
    int64_t P = (int64_t)g->OH * g->OW;
    int64_t sub = qat__direct_subsampled_at(g) + qat__round_up((int64_t)g->C * P, 64);
    return planes > sub ? planes : sub;
}

/* The direct convolution's sums in C (CPUs without AVX2): the reference
 * of its layouts, the same integers as every other kernel. */
void qat__conv_direct_ref(const qat__direct_args *a) {
    for (int o = 0; o < a->O; o++)
        for (int oy = 0; oy < a->OH; oy++)
            for (int ox = 0; ox < a->OW; ox++) {
                int64_t acc = a->bias[o]; /* the byte form's partial sums may leave int32; the total does not */
                int64_t origin = (int64_t)oy * a->ystep + ox; /* in pixels of 4 bytes */
                const int32_t *w = a->w + (int64_t)(o / 8) * a->KG * 8 + o % 8;
                for (int kg = 0; kg < a->KG; kg++) {
                    const uint8_t *px = (const uint8_t *)a->xq + 4 * (origin + a->koff[kg]);
                    if (a->form != QAT_DIRECT_PAIRS) {
                        int8_t wq[4];
                        memcpy(wq, w + (int64_t)kg * 8, sizeof wq);
                        for (int j = 0; j < 4; j++) acc += px[j] * wq[j];
                    } else {
                        int16_t wp[2], x[2];
                        memcpy(wp, w + (int64_t)kg * 8, sizeof wp);
                        memcpy(x, px, sizeof x);
                        acc += x[0] * wp[0] + x[1] * wp[1];
                    }
                }
                a->out[((int64_t)o * a->OH + oy) * a->OW + ox] =
                    (int8_t)qat_requantize_r((int32_t)acc, a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
            }
}

void qat__im2col_s16(const int16_t *xp, int C, int Hp, int Wp, int kh, int kw, int sh, int sw, int OH, int OW,
                     int Pp, int16_t *col) {
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < kh; ky++)
            for (int kx = 0; kx < kw; kx++) {
                int16_t *row = col + (int64_t)((c * kh + ky) * kw + kx) * Pp;
                const int16_t *src = xp + ((int64_t)c * Hp + ky) * Wp + kx;
                int64_t step = (int64_t)sh * Wp;
                if (sw == 1 && OW <= QAT_IM2COL_CHUNK) /* one chunk per run (LeNet's conv2) */
                    for (int oy = 0; oy < OH; oy++) memcpy(row + oy * OW, src + oy * step, QAT_IM2COL_CHUNK * sizeof *row);
                else if (sw == 1) /* whole chunks: a chunk may run past its run */
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox += QAT_IM2COL_CHUNK)
                            memcpy(row + oy * OW + ox, src + oy * step + ox, QAT_IM2COL_CHUNK * sizeof *row);
                else
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) row[oy * OW + ox] = src[oy * step + ox * sw];
            }
}

void qat__gemm_requant_ref(const qat__gemm_args *a) {
    for (int o = 0; o < a->O; o++) {
        const int16_t *w = a->w + (int64_t)o * a->Kp;
        for (int p0 = 0; p0 < a->P; p0 += QAT_PPAD) {
            int32_t acc[QAT_PPAD] = {0};
            for (int k = 0; k < a->Kp; k++) {
                int32_t wk = w[k];
                const int16_t *c = a->col + (int64_t)k * a->Pp + p0;
                for (int j = 0; j < QAT_PPAD; j++) acc[j] += wk * c[j];
            }
            for (int j = 0; j < QAT_PPAD && p0 + j < a->P; j++)
                a->out[o * a->so + (p0 + j) * a->sp] =
                    (int8_t)qat_requantize_r(acc[j] + a->bias[o], a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
        }
    }
}

/* One output row of a depthwise channel: the window's taps in order,
 * each a contiguous run of the padded input (stride 1) or a strided one. */
void qat__depthwise(const qat__depthwise_args *a) {
    int mult = a->O / a->C, taps = a->kh * a->kw;
    int32_t acc[256];
    for (int o = 0; o < a->O; o++) {
        const int16_t *xc = a->xp + (int64_t)(o / mult) * a->Hp * a->Wp;
        const int16_t *w = a->w16 + (int64_t)o * taps;
        int8_t *yc = a->y + (int64_t)o * a->OH * a->OW;
        for (int oy = 0; oy < a->OH; oy++)
            for (int ox0 = 0; ox0 < a->OW; ox0 += 256) {
                int n = a->OW - ox0 < 256 ? a->OW - ox0 : 256;
                for (int i = 0; i < n; i++) acc[i] = a->bias[o];
                for (int ky = 0; ky < a->kh; ky++)
                    for (int kx = 0; kx < a->kw; kx++) {
                        int32_t wk = w[ky * a->kw + kx];
                        const int16_t *src = xc + (int64_t)(oy * a->sh + ky) * a->Wp + ox0 * a->sw + kx;
                        if (a->sw == 1)
                            for (int i = 0; i < n; i++) acc[i] += wk * src[i];
                        else
                            for (int i = 0; i < n; i++) acc[i] += wk * src[i * a->sw];
                    }
                for (int i = 0; i < n; i++)
                    yc[oy * a->OW + ox0 + i] =
                        (int8_t)qat_requantize_r(acc[i], a->m0[o], a->shift[o], a->zp, a->lo, a->hi, a->single);
            }
    }
}

/* The simple ops: the shared kernels of qk.h (the generated C's too). Their
 * element counts are int32; the runtime's may be a whole batch's, so it
 * runs them in pieces. Those that requantize are kernels_qk.c's, compiled
 * once per rounding; the entry points here pick one. */
#define QK_PIECE ((int64_t)1 << 30)
#define QKR(a, name) ((a)->single ? qat__qkr_##name##_single : qat__qkr_##name##_double)

void qat__maxpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw, int8_t *y) {
    qk_maxpool(x, C, H, W, kh, kw, sh, sw, ph, pw, (H + 2 * ph - kh) / sh + 1, (W + 2 * pw - kw) / sw + 1, y);
}

void qat__avgpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                     const qat__requant_args *r, int8_t *y) {
    int OH = (H + 2 * ph - kh) / sh + 1, OW = (W + 2 * pw - kw) / sw + 1;
    if (r->keep) qk_avgpool_keep(x, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW, r->lo, r->hi, y);
    else QKR(r, avgpool)(x, C, H, W, kh, kw, sh, sw, ph, pw, r, y);
}

void qat__global_avgpool_s8(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y) {
    if (r->keep) qk_global_avgpool_keep(x, C, HW, r->lo, r->hi, y);
    else QKR(r, global_avgpool)(x, C, HW, r, y);
}

int8_t qat__global_avgpool_out(int32_t sum, int HW, const qat__requant_args *r) {
    if (r->keep) return (int8_t)q_out(qk_div_round(sum, HW), r->lo, r->hi); /* the input's quantization kept */
    return (int8_t)qat_requantize_r(sum - r->zp_in * HW, r->m0, r->shift, r->zp_out, r->lo, r->hi, r->single);
}

void qat__requant_s8(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y) {
    for (int64_t i = 0; i < n; i += QK_PIECE) QKR(r, requant)(x + i, (int32_t)(n - i < QK_PIECE ? n - i : QK_PIECE), r, y + i);
}

void qat__add_s8(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y) {
    for (int64_t i = 0; i < n; i += QK_PIECE)
        QKR(r, add)(a + i, b + i, (int32_t)(n - i < QK_PIECE ? n - i : QK_PIECE), r, y + i);
}

void qat__mul_s8(const int8_t *a, const int8_t *b, int32_t n, int32_t per, const qat__mul_args *r, int8_t *y) {
    QKR(r, mul)(a, b, n, per, r, y);
}

void qat__lut_s8(const int8_t *x, int64_t n, const int8_t *table, int32_t qmin, int8_t *y) {
    for (int64_t i = 0; i < n; i += QK_PIECE)
        qk_lut(x + i, (int32_t)(n - i < QK_PIECE ? n - i : QK_PIECE), table, qmin, y + i);
}

void qat__clamp_s8(const int8_t *x, int64_t n, int32_t lo, int32_t hi, int8_t *y) {
    for (int64_t i = 0; i < n; i += QK_PIECE)
        qk_clamp(x + i, (int32_t)(n - i < QK_PIECE ? n - i : QK_PIECE), lo, hi, y + i);
}

/* ---- linear and convolution at the portable level -------------------------------- */

bool qat__qk_conv_pairs(int C, int groups, int kw) { return qk_conv_uses_pairs(C, groups, kw); }

/* Stored byte i = o·K + t·CG + c (pairs: tap t, channel slot c) holds the
 * weight of channel qk_pair_channel(c) at tap t, naturally o·K + ch·kk + t. */
int64_t qat__qk_weight_index(int64_t i, int K, int kk, bool pairs) {
    if (!pairs) return i;
    int64_t o = i / K, r = i % K;
    int CG = K / kk, t = (int)(r / CG), c = (int)(r % CG);
    return o * K + (int64_t)qk_pair_channel(c, CG) * kk + t;
}

#if QAT__QK_DOT
#include <sys/auxv.h>

bool qat__cpu_dotprod(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }
/* The convolutions and the linear op with the dot-product extension's paths where the CPU has it */
#define QKD(a, name)                                                                                             \
    (qat__cpu_dotprod() ? ((a)->single ? qat__qkr_##name##_dot_single : qat__qkr_##name##_dot_double) : QKR(a, name))
#else
#define QKD(a, name) QKR(a, name)
#endif

void qat__qk_conv(const int8_t *x, const qat__qk_conv_args *a, int8_t *y) { QKD(a, conv)(x, a, y); }
void qat__qk_linear(const int8_t *x, const qat__qk_conv_args *a, int8_t *y) { QKD(a, linear)(x, a, y); }
