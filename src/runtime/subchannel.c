/* Sub-channel weights in the integer runtime (subchannel.h): the prepared
 * layout, the accumulation bounds, and the portable kernel, which is the
 * reference every SIMD kernel (subchannel_x86.c) must equal. */
#include "subchannel.h"

#include <stdio.h>
#include <string.h>


static int64_t up64(int64_t n) { return qat__round_up(n, 64); }

void qat__sc_shape_of(const qat_qop *op, qat__sc_shape *s) {
    const qat_qtype *q = &op->wq;
    s->O = q->shape[0];
    s->K = 1;
    for (int d = 1; d < q->rank; d++) s->K *= q->shape[d];
    s->J = q->nparams / q->pshape[0];
    s->Ks = qat__round_up(s->K + s->J, 2); /* each block's run padded to even: at most one more each */
    s->rows_per_param = q->block[0];
}

/* The three parts of the constants. */
typedef struct {
    int16_t *w16;  /* [qat__sc_rows(O)][Ks] */
    int32_t *row;  /* [Ks]: the col row read at each position */
    int32_t *seg;  /* [J + 1]: first position of each block; seg[J] the end */
} sc_parts;

static sc_parts parts(const qat__sc_shape *s, const void *consts) {
    uint8_t *c = (uint8_t *)(uintptr_t)consts;
    int64_t wbytes = up64(qat__sc_rows(s->O) * s->Ks * (int64_t)sizeof(int16_t));
    int64_t rbytes = up64(s->Ks * (int64_t)sizeof(int32_t));
    return (sc_parts){(int16_t *)(void *)c, (int32_t *)(void *)(c + wbytes), (int32_t *)(void *)(c + wbytes + rbytes)};
}

int64_t qat__sc_const_bytes(const qat_qop *op) {
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    return up64(qat__sc_rows(s.O) * s.Ks * (int64_t)sizeof(int16_t)) +
           up64(s.Ks * (int64_t)sizeof(int32_t)) + up64((s.J + 1) * (int64_t)sizeof(int32_t));
}

/* Row 0's elements give every row's block pattern: the block of (o, k)
 * is block k of row 0, in row o's group of parameters. */
void qat__sc_prepare(const qat_qop *op, void *consts) {
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    sc_parts c = parts(&s, consts);
    const qat_qtype *q = &op->wq;
    int64_t rows = qat__sc_rows(s.O);
    /* block sizes into seg[j + 1], then the starts, each run padded to even */
    memset(c.seg, 0, (size_t)(s.J + 1) * sizeof *c.seg);
    for (int64_t k = 0; k < s.K; k++) c.seg[qat_qtype_param_index(q, k) + 1]++;
    for (int64_t j = 0; j < s.J; j++) c.seg[j + 1] = c.seg[j] + (int32_t)qat__round_up(c.seg[j + 1], 2);
    /* each block's positions in k order; the cursors borrow the weights' memory */
    int32_t *cursor = (int32_t *)(void *)c.w16; /* J int32 <= the weights' 2·rows·Ks bytes */
    memcpy(cursor, c.seg, (size_t)s.J * sizeof *cursor);
    memset(c.row, 0, (size_t)s.Ks * sizeof *c.row); /* padding reads row 0, against a zero weight */
    for (int64_t k = 0; k < s.K; k++) c.row[cursor[qat_qtype_param_index(q, k)]++] = (int32_t)k;
    /* the weights minus their zero points in that order; zeros in the padding */
    memset(c.w16, 0, (size_t)(rows * s.Ks) * sizeof *c.w16);
    for (int64_t o = 0; o < s.O; o++) {
        int64_t base = o / s.rows_per_param * s.J;
        for (int64_t j = 0; j < s.J; j++) {
            int32_t zp = q->zero_point[base + j];
            /* compact block scales: the weight times its block's sub-scale
             * (|w| <= 128, q <= 255: within int16), so that the block's sum
             * is P_j·q_j exactly and its conversion is the identity */
            int32_t k = op->subscale ? op->subscale[base + j] : 1;
            /* k ascends within a block, so row 0 appears past a block's first
             * position only as its padding, whose weight stays 0 */
            for (int32_t t = c.seg[j]; t < c.seg[j + 1]; t++)
                if (t == c.seg[j] || c.row[t] != 0)
                    c.w16[o * s.Ks + t] = (int16_t)((op->weight[o * s.K + c.row[t]] - zp) * k);
        }
    }
}

void qat__sc_row_sums(const qat_qop *op, int64_t o, int64_t *work) {
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    const qat_qtype *q = &op->wq;
    int64_t base = o / s.rows_per_param * s.J;
    memset(work, 0, (size_t)s.J * sizeof *work);
    for (int64_t k = 0; k < s.K; k++) {
        int64_t p = qat_qtype_param_index(q, o * s.K + k);
        int64_t d = (int64_t)op->weight[o * s.K + k] - q->zero_point[p];
        work[p - base] += d < 0 ? -d : d;
    }
}

/* Compact block scales: T = bias + Σ_j q_j·P_j with |P_j| <= X·W_j, so
 * |bias| + X·Σ_j q_j·W_j <= 2^31 - 1 bounds T and every partial sum of
 * its products in any order (each term of the sum at most 2^31 - 1 times
 * 255, so no int64 overflow either). */
static bool compact_bounds(const qat_qop *op, const qat__sc_shape *s, int64_t o, int64_t X, const int64_t *work,
                           char *why, size_t len) {
    int64_t base = o / s->rows_per_param * s->J;
    int64_t sum = 0, total = op->bias[o] < 0 ? -(int64_t)op->bias[o] : op->bias[o];
    for (int64_t j = 0; j < s->J && sum <= INT32_MAX; j++) sum += op->subscale[base + j] * work[j];
    if (X > 0 && sum > (INT32_MAX - total) / X) {
        if (why) snprintf(why, len, "row %lld: the bias (%lld) and the weights' |w|·q summed (%lld) times the largest "
                          "|x - zp| (%lld) can leave int32", (long long)o, (long long)total, (long long)sum, (long long)X);
        return false;
    }
    return true;
}

bool qat__sc_row_bounds(const qat_qop *op, int64_t o, int64_t X, const int64_t *work, char *why, size_t len) {
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    if (op->subscale) return compact_bounds(op, &s, o, X, work, why, len);
    int64_t base = o / s.rows_per_param * s.J;
    int64_t total = op->bias[o] < 0 ? -(int64_t)op->bias[o] : op->bias[o];
    for (int64_t j = 0; j < s.J; j++) {
        int32_t m = op->block_multiplier[base + j];
        int sh = op->block_shift[base + j];
        int64_t P = X > 0 && work[j] > INT32_MAX / X ? (int64_t)INT32_MAX + 1 : work[j] * (X > 0 ? X : 0), most = 0;
        if (P > INT32_MAX) {
            if (why) snprintf(why, len, "row %lld, block %lld: its partial sum can reach %lld x %lld (the weights' "
                              "|w - zp| summed, times the largest |x - zp|), beyond int32",
                              (long long)o, (long long)j, (long long)work[j], (long long)X);
            return false;
        }
        if (sh > 30 || sh < -31) {
            if (why) snprintf(why, len, "row %lld, block %lld: shift %d outside [-31, 30]", (long long)o, (long long)j, sh);
            return false;
        }
        if (sh > 0 && P * ((int64_t)1 << sh) > INT32_MAX) {
            if (why) snprintf(why, len, "row %lld, block %lld: the conversion's left shift by %d of a partial sum "
                              "up to %lld leaves int32", (long long)o, (long long)j, sh, (long long)P);
            return false;
        }
        /* both roundings are monotone in the sum, so ±P bound them; the
         * larger of the two roundings makes the bound hold for either */
        for (int single = 0; single < 2; single++) {
            int32_t hi = qat_multiply_by_quantized_multiplier_r((int32_t)P, m, sh, single),
                    lo = qat_multiply_by_quantized_multiplier_r((int32_t)-P, m, sh, single);
            int64_t big = hi > -(int64_t)lo ? hi : -(int64_t)lo;
            if (big > most) most = big;
        }
        total += most;
    }
    if (total > INT32_MAX) {
        if (why) snprintf(why, len, "row %lld: the bias and the converted partial sums can reach %lld, beyond int32",
                          (long long)o, (long long)total);
        return false;
    }
    return true;
}

bool qat__sc_bounds(const qat_qop *op, int64_t X, int64_t *work, char *why, size_t len) {
    for (int64_t o = 0; o < op->wq.shape[0]; o++) {
        qat__sc_row_sums(op, o, work);
        if (!qat__sc_row_bounds(op, o, X, work, why, len)) return false;
    }
    return true;
}

/* ---- the portable kernel ------------------------------------------------------------- */

void qat__sc_gemm_ref(const qat__sc_args *a) {
    const qat_qop *op = a->op;
    qat__sc_shape s;
    qat__sc_shape_of(op, &s);
    sc_parts c = parts(&s, a->consts);
    for (int r = 0; r < a->O; r++) {
        int64_t o = a->o0 + r, base = o / s.rows_per_param * s.J;
        const int16_t *w = c.w16 + o * s.Ks;
        for (int p0 = 0; p0 < a->P; p0 += QAT_PPAD) {
            int32_t total[QAT_PPAD];
            for (int l = 0; l < QAT_PPAD; l++) total[l] = op->bias[o];
            for (int64_t j = 0; j < s.J; j++) {
                int32_t acc[QAT_PPAD] = {0};
                for (int32_t t = c.seg[j]; t < c.seg[j + 1]; t++) {
                    int32_t wk = w[t];
                    const int16_t *col = a->col + (int64_t)c.row[t] * a->Pp + p0;
                    for (int l = 0; l < QAT_PPAD; l++) acc[l] += wk * col[l];
                }
                if (op->subscale) { /* acc is P_j·q_j already (the prepared weights carry q_j) */
                    for (int l = 0; l < QAT_PPAD; l++) total[l] += acc[l];
                    continue;
                }
                int32_t m = op->block_multiplier[base + j];
                int sh = op->block_shift[base + j];
                for (int l = 0; l < QAT_PPAD; l++) total[l] += qat_multiply_by_quantized_multiplier_r(acc[l], m, sh, a->single);
            }
            for (int l = 0; l < QAT_PPAD && p0 + l < a->P; l++)
                a->out[r * a->so + (p0 + l) * a->sp] =
                    (int8_t)qat_requantize_r(total[l], op->multiplier[o], op->shift[o], a->zp, a->lo, a->hi, a->single);
        }
    }
}

/* ---- the ops ------------------------------------------------------------------------- */

void qat__sc_run_linear(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const void *consts,
                        const int8_t *x, int8_t *y, void *scratch, int64_t n) {
    int32_t zp_in = q->tensors[op->inputs[0]].q.zero_point;
    int16_t *col = scratch; /* the input transposed: col[k][s] = x[s][k] - zp */
    for (int64_t smp = 0; smp < n; smp++)
        for (int64_t k = 0; k < g->K; k++) col[k * g->Pp + smp] = (int16_t)(x[smp * g->K + k] - zp_in);
    const qat_aparams *out = &q->tensors[op->output].q;
    qat__sc_args a = {.op = op, .consts = consts, .col = col, .O = g->O, .P = (int)n, .Pp = g->Pp, .o0 = 0,
                      .zp = out->zero_point, .lo = op->act_min, .hi = op->act_max, .out = y, .so = 1, .sp = g->O,
                      .single = q->rounding == QAT_ROUNDING_SINGLE};
    qat__sc_gemm(&a);
}

void qat__sc_run_conv(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const void *consts,
                      const int8_t *x, int8_t *y, void *scratch, int64_t n) {
    const qat_qtensor *in = &q->tensors[op->inputs[0]];
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    int16_t *xpad = scratch;
    int16_t *col = (int16_t *)(void *)((uint8_t *)scratch + up64((g->C * g->Hp * g->Wp + QAT_IM2COL_CHUNK) * 2));
    const qat_aparams *out = &q->tensors[op->output].q;
    int Cg = g->C / g->groups, P = g->OH * g->OW;
    for (int64_t smp = 0; smp < n; smp++) {
        qat__pad_s8(x + smp * in_n, g->C, g->H, g->W, op->pad_h, op->pad_w, in->q.zero_point, xpad);
        for (int grp = 0; grp < g->groups; grp++) {
            qat__im2col_s16(xpad + (int64_t)grp * Cg * g->Hp * g->Wp, Cg, g->Hp, g->Wp, op->kh, op->kw, op->stride_h,
                            op->stride_w, g->OH, g->OW, g->Pp, col);
            int o0 = grp * g->Og;
            qat__sc_args a = {.op = op, .consts = consts, .col = col, .O = g->Og, .P = P, .Pp = g->Pp, .o0 = o0,
                              .zp = out->zero_point, .lo = op->act_min, .hi = op->act_max,
                              .out = y + smp * out_n + (int64_t)o0 * P, .so = P, .sp = 1,
                              .single = q->rounding == QAT_ROUNDING_SINGLE};
            qat__sc_gemm(&a);
        }
    }
}
