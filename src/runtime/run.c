/* The executor of an integer program: each op's constants prepared once
 * (qat_runtime_prepare), then ops run in order over the planned arena
 * (qat_runtime_run). One sample after another inside a tensor; linear ops
 * take the whole batch in one GEMM, convolutions m samples at a time on
 * the int8 path (kernels.h), one at a time on the int16 one.
 *
 * A linear or conv2d op's constants start with a header (HEADER bytes)
 * that says which path prepare chose: the int8 path when the level has it
 * and every w - zp_w fits int8, else the int16 one. */
#include <string.h>

#include "kernels.h"
#include "subchannel.h"

#define HEADER 64 /* the constants after it stay 64-byte aligned */

typedef struct {
    int32_t int8; /* the op runs on the int8 path (qat__i8_geom's layout follows) */
    int32_t qk;   /* the portable level's qk.h kernels: int8 weights (qat__qk_conv_args' layout) follow */
    int32_t direct; /* the direct convolution's qat__direct_form, or 0 (prepare_direct's layout follows) */
    int32_t vex;    /* its vpdpbusd in AVX-VNNI's encoding (qat__direct_args) */
    int32_t dw_bytes; /* AVX-VNNI level, depthwise: int8 weights and int32 corrected biases (tap quads) */
    int32_t dw_lanes; /* depthwise of a small map, channels in the lanes (qat__dw_lanes_prepare's layout follows) */
    int32_t wino;     /* 3x3 of stride 1 as Winograd F(2x2, 3x3) (qat__wino_prepare's layout follows) */
} op_header;

/* The portable level's kernels are qk.h's, whose NEON paths an aarch64
 * build takes (the same test as qk.h's Q_NEON), and on aarch64 Linux their
 * dot-product paths where the CPU has the extension (kernels.c). */
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(QAT_NO_NEON)
#define QAT__PORTABLE_NAME "portable C with NEON"
#else
#define QAT__PORTABLE_NAME "portable C"
#endif

const char *qat__level_name(qat__level l) {
    static const char *const names[QAT_LEVEL_COUNT] = {QAT__PORTABLE_NAME, "AVX2", "AVX-VNNI", "AVX-512 VNNI",
                                                       "AVX-512 VNNI int8"};
#if QAT__QK_DOT && !defined(QAT_NO_NEON)
    if (l == QAT_LEVEL_PORTABLE && qat__cpu_dotprod()) return QAT__PORTABLE_NAME " and SDOT";
#endif
    return l >= 0 && l < QAT_LEVEL_COUNT ? names[l] : "unknown";
}

const char *qat_runtime_kernel(void) { return qat__level_name(qat__cpu_level()); }

static bool int8_path(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, int max_batch, qat__level level) {
    if (level < QAT_LEVEL_VNNI8) return false;
    /* depthwise windows of 4 taps come from 64 bytes at a byte step of stride_w */
    if (g->depthwise && op->stride_w > 4) return false;
    qat__i8_geom i8; /* its offsets into scratch are int32 */
    qat__i8_geometry(q, op, g, max_batch, &i8);
    if (i8.scratch > INT32_MAX / 2) return false;
    return qat_qop_int8_weights(op, NULL);
}

static qat__add_args add_args(const qat_qmodel *q, const qat_qop *op) {
    const qat_qtensor *a = &q->tensors[op->inputs[0]], *b = &q->tensors[op->inputs[1]];
    return (qat__add_args){.zp_a = a->q.zero_point, .zp_b = b->q.zero_point, .m_a = op->multiplier[0],
                           .m_b = op->multiplier[1], .m_out = op->multiplier[2], .sh_a = op->shift[0],
                           .sh_b = op->shift[1], .sh_out = op->shift[2], .left_shift = op->left_shift,
                           .zp_out = q->tensors[op->output].q.zero_point, .lo = op->act_min, .hi = op->act_max,
                           .single = q->rounding == QAT_ROUNDING_SINGLE};
}

/* The direct convolution's constants (kernels.h): weight groups of G = 2
 * (int16 pairs) or 4 (int8 quads, bytes), their pixel offsets, and (bytes)
 * the corrected bias. The offsets of the parts: direct_parts. */
static void direct_parts(const qat_qop *op, const qat__op_geom *g, int G, int64_t *koff_at, int64_t *bias_at) {
    int64_t KG = qat__direct_groups(op, g, G);
    *koff_at = qat__round_up(qat__round_up(g->O, 8) * KG * 4, 64);
    *bias_at = *koff_at + qat__round_up(KG * 4, 64);
}

/* The byte form's bias for output o: bias - (zp + 128)·Σ_k (w_k - zp_w), in 64 bits. */
static int64_t bytes_bias(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, int o) {
    const qat_qtype *wq = &op->wq;
    int64_t sum = 0;
    for (int64_t k = 0; k < g->K; k++) {
        int64_t i = (int64_t)o * g->K + k;
        sum += op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)];
    }
    return (int64_t)op->bias[o] - (int64_t)(q->tensors[op->inputs[0]].q.zero_point + 128) * sum;
}

/* The byte form fits when every corrected bias is an int32 (the sums from
 * it wrap in vpaddd and end at the true sum, which the program check
 * bounds). */
static bool bytes_biases_fit(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g) {
    for (int o = 0; o < g->O; o++) {
        int64_t b = bytes_bias(q, op, g, o);
        if (b < INT32_MIN || b > INT32_MAX) return false;
    }
    return true;
}

static bool bytes_form(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, bool vnni) {
    return qat__direct_bytes_fit(op, g, vnni) && bytes_biases_fit(q, op, g);
}

/* One weight group of the direct convolution: G = 2 values as an int16
 * pair, or 4 as an int8 quad (the first in the low half or byte). */
static void put_group(int32_t *dst, const int32_t v[4], int G) {
    if (G == 4) {
        int8_t quad[4] = {(int8_t)v[0], (int8_t)v[1], (int8_t)v[2], (int8_t)v[3]};
        memcpy(dst, quad, sizeof quad);
    } else {
        int16_t pair[2] = {(int16_t)v[0], (int16_t)v[1]};
        memcpy(dst, pair, sizeof pair);
    }
}

/* The tap pairs' or quads' weights and offsets (kernels.h): group
 * ky·n + j holds (w[ky][G·j .. G·j + G - 1]), 0 past the row, as int16
 * pairs (G = 2) or int8 quads (G = 4), at pixel ky·Wrow + G·j / s of a
 * window's origin. */
static void prepare_taps(const qat_qop *op, const qat__op_geom *g, int G, int32_t *w, int32_t *koff) {
    const qat_qtype *wq = &op->wq;
    int n = (op->kw + G - 1) / G, KG = op->kh * n, Wrow = qat__taps_width(g->Wp, op->stride_w);
    for (int ky = 0; ky < op->kh; ky++)
        for (int j = 0; j < n; j++) {
            int kg = ky * n + j;
            koff[kg] = ky * Wrow + G * j / op->stride_w;
            for (int o = 0; o < g->O; o++) {
                int32_t v[4] = {0, 0, 0, 0};
                for (int t = 0; t < G && G * j + t < op->kw; t++) {
                    int64_t i = ((int64_t)o * op->kh + ky) * op->kw + G * j + t;
                    v[t] = op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)];
                }
                put_group(&w[((int64_t)(o / 8) * KG + kg) * 8 + o % 8], v, G);
            }
        }
}

/* The weight groups of G channels and their offsets (kernels.h). */
static void prepare_channel_groups(const qat_qop *op, const qat__op_geom *g, int G, int32_t *w, int32_t *koff) {
    const qat_qtype *wq = &op->wq;
    int KG = qat__direct_groups(op, g, G), Wrow = qat__direct_wrow(g->Wp, op->stride_w);
    for (int cc = 0; cc < g->C / G; cc++)
        for (int ky = 0; ky < op->kh; ky++)
            for (int kx = 0; kx < op->kw; kx++) {
                int kg = (cc * op->kh + ky) * op->kw + kx;
                koff[kg] = qat__direct_subsampled(op, g) ? cc * g->OH * g->OW /* one row of the copy's pixels */
                                                      : (cc * g->Hp + ky) * Wrow + qat__direct_col(kx, g->Wp, op->stride_w);
                for (int o = 0; o < g->O; o++) {
                    int32_t v[4] = {0, 0, 0, 0};
                    for (int j = 0; j < G; j++) {
                        int64_t i = (((int64_t)o * g->C + G * cc + j) * op->kh + ky) * op->kw + kx;
                        v[j] = op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)];
                    }
                    put_group(&w[((int64_t)(o / 8) * KG + kg) * 8 + o % 8], v, G);
                }
            }
}

static void prepare_direct(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g0, int max_batch, bool bytes,
                           uint8_t *c) {
    qat__op_geom batched = *g0, *g = &batched; /* with a batch of samples, planes of B·P pixels */
    int B = qat__direct_batch(op, g0, max_batch);
    if (B > 1) batched.H = batched.Hp = 1, batched.W = batched.Wp = B * g0->OH * g0->OW;
    int G = bytes ? 4 : 2, KG = qat__direct_groups(op, g, G);
    int64_t koff_at, bias_at;
    direct_parts(op, g, G, &koff_at, &bias_at);
    int32_t *w = (int32_t *)(void *)c, *koff = (int32_t *)(void *)(c + koff_at);
    memset(w, 0, (size_t)(qat__round_up(g->O, 8) * KG) * sizeof *w);
    if (g->C == 1) prepare_taps(op, g, G, w, koff);
    else prepare_channel_groups(op, g, G, w, koff);
    if (!bytes) return;
    /* the bytes carry x + 128, the padding zp + 128: Σ w·(x - zp) = Σ w·byte - (zp + 128)·Σ w */
    int32_t *bias = (int32_t *)(void *)(c + bias_at);
    for (int o = 0; o < g->O; o++) bias[o] = (int32_t)bytes_bias(q, op, g, o); /* bytes_form: it fits */
}

/* Where the AVX-VNNI depthwise quads' weights sit in a depthwise op's constants (w16, then
 * qat__dw_quads_bytes), and (bias4) their corrected biases. */
static int32_t *dw_quads_at(const qat_qop *op, const qat__op_geom *g, const int16_t *w16, int32_t **bias4) {
    int32_t *w4 = (int32_t *)(uintptr_t)((const uint8_t *)w16 + qat__round_up((int64_t)g->O * g->kk * 2, 64));
    *bias4 = w4 + qat__round_up(g->O * qat__dw_quads_per_output(op->kh, op->kw) * 4, 64) / 4;
    return w4;
}

/* The AVX-VNNI depthwise quads' weights and corrected biases. */
static void prepare_dw_quads(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const int16_t *w16) {
    int64_t nq = (op->kw + 3) / 4, n = qat__dw_quads_per_output(op->kh, op->kw);
    int32_t *bias4, *w4 = dw_quads_at(op, g, w16, &bias4);
    for (int o = 0; o < g->O; o++) {
        for (int64_t p = 0; p < n; p++) {
            int64_t ky = p / nq, j = p % nq;
            int8_t quad[4] = {0, 0, 0, 0};
            for (int t = 0; t < 4 && 4 * j + t < op->kw; t++) quad[t] = (int8_t)w16[o * g->kk + ky * op->kw + 4 * j + t];
            memcpy(&w4[o * n + p], quad, sizeof quad);
        }
        bias4[o] = (int32_t)bytes_bias(q, op, g, o); /* dw_bytes: it fits */
    }
}

static void prepare_op(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, int max_batch, uint8_t *c,
                       qat__level level) {
    if (op->kind == QAT_QOP_ADD) {
        qat__add_args r = add_args(q, op);
        qat__add_tables(&r, c);
        return;
    }
    if (op->kind == QAT_QOP_LUT) {
        for (int i = 0; i < op->table_len; i++) ((int8_t *)c)[i] = (int8_t)op->table[i];
        return;
    }
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return;
    op_header *h = (op_header *)(void *)c;
    bool sc = qat_qop_subchannel(op); /* blocks with their own scales: subchannel.c's layout */
    h->int8 = !sc && int8_path(q, op, g, max_batch, level);
    h->qk = !sc && level == QAT_LEVEL_PORTABLE && qat_qop_int8_weights(op, NULL);
    bool vnni = level == QAT_LEVEL_AVXVNNI;
    /* the AVX2 level's multiplies are its time (one vpmaddwd pipe on the cores that stop there): 16 per 4
     * outputs instead of 36; AVX-VNNI's vpdpbusd does 4 products where vpmaddwd does 2 */
    h->wino = !sc && level == QAT_LEVEL_AVX2 && qat__wino_fits(op, g) &&
              qat__wino_bounds_fit(q->tensors[op->inputs[0]].q.zero_point, op, g);
    h->direct = sc || h->int8 || h->wino || (level != QAT_LEVEL_AVX2 && !vnni) || !qat__direct_fits(op, g) ? 0
                : bytes_form(q, op, g, vnni)                    ? (vnni ? QAT_DIRECT_BYTES_VNNI : QAT_DIRECT_BYTES)
                : g->C == 1 && !qat__direct_tap_pairs(op, g)    ? 0 /* one channel: pairs at stride 2 over an odd Wp */
                                                                : QAT_DIRECT_PAIRS;
    h->dw_lanes = !sc && !h->int8 && !h->direct && level >= QAT_LEVEL_AVX2 && qat__dw_lanes_fits(op, g);
    c += HEADER;
    if (h->wino) {
        qat__wino_prepare(op, g, (int32_t *)(void *)c);
        return;
    }
    if (sc) {
        qat__sc_prepare(op, c);
        return;
    }
    if (h->int8) {
        qat__i8_geom i8;
        qat__i8_geometry(q, op, g, max_batch, &i8);
        qat__i8_prepare(q, op, g, &i8, c);
        return;
    }
    const qat_qtype *wq = &op->wq;
    h->vex = vnni && qat__direct_vex(); /* the AVX-VNNI level's encoding: the direct and the depthwise convolutions */
    h->dw_bytes = !sc && vnni && g->depthwise && qat_qop_int8_weights(op, NULL) && bytes_biases_fit(q, op, g);
    if (h->direct) {
        prepare_direct(q, op, g, max_batch, h->direct != QAT_DIRECT_PAIRS, c);
        return;
    }
    if (h->dw_lanes) {
        qat__dw_lanes_prepare(op, g, c);
        return;
    }
    if (h->qk) { /* the int8 weights in the layout qk.h's kernels read */
        bool pairs = op->kind == QAT_QOP_CONV2D && qat__qk_conv_pairs(g->C, g->groups, op->kw);
        for (int64_t i = 0; i < (int64_t)g->O * g->K; i++) {
            int64_t k = qat__qk_weight_index(i, g->K, g->kk, pairs);
            ((int8_t *)c)[i] = (int8_t)(op->weight[k] - wq->zero_point[qat_qtype_param_index(wq, k)]);
        }
        return;
    }
    int16_t *w16 = (int16_t *)(void *)c;
    int64_t row = g->depthwise ? g->kk : g->Kp, rows = g->depthwise ? g->O : qat__round_up(g->O, QAT_WROWS);
    memset(w16, 0, (size_t)(rows * row) * sizeof *w16);
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t k = 0; k < g->K; k++) {
            int64_t i = o * g->K + k;
            w16[o * row + k] = (int16_t)(op->weight[i] - wq->zero_point[qat_qtype_param_index(wq, i)]);
        }
    if (h->dw_bytes && qat__dw_quads(1, op->stride_h, op->stride_w, op->kh, op->kw))
        prepare_dw_quads(q, op, g, w16);
}

void qat__runtime_prepare_level(const qat_qmodel *q, const qat_plan *plan, void *consts, qat__level level) {
    if (!q || !plan || (!consts && plan->const_bytes)) return;
    for (int i = 0; i < q->n_ops; i++) {
        qat__op_geom g;
        qat__op_geometry(q, &q->ops[i], plan->max_batch, &g);
        prepare_op(q, &q->ops[i], &g, plan->max_batch, (uint8_t *)consts + plan->const_offset[i], level);
    }
}

void qat_runtime_prepare(const qat_qmodel *q, const qat_plan *plan, void *consts) {
    qat__runtime_prepare_level(q, plan, consts, qat__cpu_level());
}

/* ---- one op over n samples -------------------------------------------------------- */

typedef struct {
    const qat_qmodel *q;
    const qat_plan *plan;
    const uint8_t *consts;
    int8_t *arena;
    uint8_t *scratch;   /* the ops' working memory */
    int64_t n;          /* samples in this chunk */
    qat__level level;
    int64_t s0;         /* the chunk's first sample */
    int mc;             /* samples a chunk */
    int8_t *sub;        /* the chunk's sub-arena */
    const uint8_t *real; /* [n_tensors]: the tensor is in the arena, else in the sub-arena */
} exec;

/* The program rounds once (qat_rounding): every kernel's record says so. */
#define SINGLE(e) ((e)->q->rounding == QAT_ROUNDING_SINGLE)

/* Sample 0 of the chunk in tensor t (kernels.h: chunks of samples). */
static int8_t *tensor(const exec *e, int t) {
    if (e->real[t]) return e->arena + e->plan->offset[t] + e->s0 * qat_qtensor_numel(&e->q->tensors[t]);
    return e->sub + e->plan->offset[t] / e->plan->max_batch * e->mc;
}

/* The tensors that stay in the arena: the input and its flatten views,
 * the output and what shares its buffer (flatten, and an in-place op's
 * input: at the output's offset while both are alive, so the same buffer). */
static void real_tensors(const qat_qmodel *q, const qat_plan *p, uint8_t *real) {
    memset(real, 0, (size_t)q->n_tensors);
    real[q->input] = real[q->output] = 1;
    for (int i = q->n_ops - 1; i >= 0; i--) {
        const qat_qop *op = &q->ops[i];
        bool in_place = op->kind == QAT_QOP_FLATTEN || op->kind == QAT_QOP_RELU || op->kind == QAT_QOP_LUT ||
                        op->kind == QAT_QOP_ADD;
        if (!real[op->output] || !in_place) continue;
        for (int j = 0; j < op->n_inputs; j++)
            if (p->offset[op->inputs[j]] == p->offset[op->output]) real[op->inputs[j]] = 1;
    }
    for (int i = 0; i < q->n_ops; i++)
        if (q->ops[i].kind == QAT_QOP_FLATTEN && real[q->ops[i].inputs[0]]) real[q->ops[i].output] = 1;
}

/* P bytes, P < 16: a pointwise map's run of one channel */
static inline void copy_run(int8_t *d, const int8_t *src, int P) {
    if (P == 4) {
        uint32_t v;
        memcpy(&v, src, sizeof v);
        memcpy(d, &v, sizeof v);
    } else
        for (int i = 0; i < P; i++) d[i] = src[i];
}

/* qat__direct_batch: B samples' P positions a row (a's constants, koff for planes of B·P). A short
 * group (the chunk's last, or a chunk of fewer than B samples) runs its own positions only; the
 * rest of its planes holds the input's zero point. */
static void run_direct_batch(const exec *e, const qat__op_geom *g, qat__direct_args *a, const int8_t *x,
                             int32_t zp_in, int8_t *y, int B, qat__pad_kind kind, qat__pad_row_fn row) {
    int P = g->OH * g->OW, W = B * P;
    int64_t in_n = (int64_t)g->C * P, out_n = (int64_t)g->O * P;
    int8_t *xb = (int8_t *)e->scratch + qat__direct_batch_planes_bytes(g, B);
    int8_t *yb = xb + qat__round_up((int64_t)g->C * W, 64);
    a->OH = 1, a->ystep = W, a->out = yb;
    for (int64_t s0 = 0; s0 < e->n; s0 += B) {
        int nb = e->n - s0 < B ? (int)(e->n - s0) : B;
        a->OW = nb * P; /* the outputs: [O][nb·P] */
        for (int c = 0; c < g->C; c++) {
            for (int b = 0; b < nb; b++) copy_run(xb + (int64_t)c * W + b * P, x + (s0 + b) * in_n + (int64_t)c * P, P);
            if (nb < B) memset(xb + (int64_t)c * W + nb * P, zp_in, (size_t)(B - nb) * P);
        }
        qat__pad_planes(xb, g->C, 1, W, 0, 0, 1, zp_in, kind, row, s0 == 0, e->scratch);
        qat__conv_direct(a);
        for (int b = 0; b < nb; b++)
            for (int o = 0; o < g->O; o++)
                copy_run(y + (s0 + b) * out_n + (int64_t)o * P, yb + (int64_t)o * a->OW + b * P, P);
    }
}

static void run_conv_direct(const exec *e, const qat_qop *op, const qat__op_geom *g, const uint8_t *c,
                            qat__direct_form form, bool vex) {
    bool bytes = form != QAT_DIRECT_PAIRS;
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW, koff_at, bias_at;
    int G = bytes ? 4 : 2;
    direct_parts(op, g, G, &koff_at, &bias_at);
    qat__direct_args a = {.xq = e->scratch, .w = (const int32_t *)(const void *)c,
                          .koff = (const int32_t *)(const void *)(c + koff_at), .form = form, .vex = vex,
                          .KG = qat__direct_groups(op, g, G), .O = g->O, .OH = g->OH, .OW = g->OW,
                          .ystep = op->stride_h * qat__direct_wrow(g->Wp, op->stride_w),
                          .bias = bytes ? (const int32_t *)(const void *)(c + bias_at) : op->bias,
                          .m0 = op->multiplier, .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point,
                          .lo = op->act_min, .hi = op->act_max, .single = SINGLE(e)};
    int H = g->H, W = g->W, sw = op->stride_w; /* the input's rows as padded */
    bool subsampled = qat__direct_subsampled(op, g);
    bool one_row = subsampled || (op->kh == 1 && op->kw == 1 && op->pad_h == 0 && op->pad_w == 0 &&
                                  op->stride_h == 1 && sw == 1);
    bool taps = g->C == 1, quads = taps && bytes; /* one channel: tap pairs or quads (qat__pad_tap_quads) */
    if (taps) a.ystep = op->stride_h * qat__taps_width(g->Wp, sw);
    if (one_row) a.OW = g->OH * g->OW, a.OH = 1, a.ystep = a.OW, W = a.OW, H = 1, sw = 1; /* the pixels are the positions */
    qat__pad_kind kind = bytes ? QAT_PAD_QUADS : taps ? QAT_PAD_PLAIN : QAT_PAD_PAIRS;
    qat__pad_row_fn row = qat__pad_row_simd(kind); /* the direct convolution runs from the AVX2 level up */
    int B = qat__direct_batch(op, g, e->plan->max_batch);
    if (B > 1) {
        run_direct_batch(e, g, &a, x, in->q.zero_point, y, B, kind, row);
        return;
    }
    for (int64_t s = 0; s < e->n; s++) {
        const int8_t *xs = x + s * in_n;
        int32_t zp = in->q.zero_point;
        if (subsampled) { /* the even rows' even columns, the pixels a 1x1 of stride 2 reads */
            int8_t *copy = (int8_t *)e->scratch + qat__direct_subsampled_at(g);
            for (int64_t ch = 0; ch < g->C; ch++)
                for (int oy = 0; oy < g->OH; oy++) {
                    const int8_t *src = xs + (ch * g->H + 2 * oy) * g->W;
                    int8_t *dst = copy + (ch * g->OH + oy) * g->OW;
                    for (int ox = 0; ox < g->OW; ox++) dst[ox] = src[2 * ox];
                }
            xs = copy;
        }
        if (quads) qat__pad_tap_quads(xs, H, W, op->pad_h, op->pad_w, sw, zp, e->scratch);
        else if (taps && sw == 1) qat__pad_tap_pairs(xs, H, W, op->pad_h, op->pad_w, zp, (int16_t *)e->scratch);
        else qat__pad_planes(xs, g->C, H, W, op->pad_h, op->pad_w, sw, zp, kind, row, s == 0, e->scratch);
        a.out = y + s * out_n;
        qat__conv_direct(&a);
    }
}

static void run_conv_wino(const exec *e, const qat_qop *op, const qat__op_geom *g, const int32_t *u) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    qat__wino_args a = qat__wino_layout(g, e->scratch);
    a.u = u;
    a.rq = (qat__direct_args){.O = g->O, .OH = g->OH, .OW = g->OW, .bias = op->bias, .m0 = op->multiplier,
                              .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point, .lo = op->act_min,
                              .hi = op->act_max, .single = SINGLE(e)};
    qat__pad_row_fn row = qat__pad_row_simd(QAT_PAD_PAIRS);
    for (int64_t s = 0; s < e->n; s++) {
        qat__wino_pad(x + s * in_n, g, op->pad_h, op->pad_w, in->q.zero_point, row, s == 0, a.planes);
        a.rq.out = y + s * out_n;
        qat__conv_wino(&a);
    }
}

static void run_conv(const exec *e, const qat_qop *op, const qat__op_geom *g, const int16_t *w16, bool bytes,
                     bool vex) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    int16_t *xpad = (int16_t *)e->scratch;
    int16_t *col = (int16_t *)(e->scratch + qat__round_up((g->C * g->Hp * g->Wp + QAT_IM2COL_CHUNK) * 2, 64));
    int32_t zp = e->q->tensors[op->output].q.zero_point;
    qat__pad_row_fn row = e->level >= QAT_LEVEL_AVX2 ? qat__pad_row_simd(QAT_PAD_PLAIN) : qat__pad_row_plain;
    int vnni = !bytes ? 0 : vex ? 1 : 2;
    bool quads = g->depthwise && e->level >= QAT_LEVEL_AVX2 && /* the AVX2 kernel, without xp */
                 qat__dw_quads(vnni, op->stride_h, op->stride_w, op->kh, op->kw);
    int32_t *bias4 = NULL, *w4 = quads ? dw_quads_at(op, g, w16, &bias4) : NULL;
    for (int64_t s = 0; s < e->n; s++) {
        if (!quads)
            qat__pad_planes(x + s * in_n, g->C, g->H, g->W, op->pad_h, op->pad_w, 1, in->q.zero_point, QAT_PAD_PLAIN,
                            row, s == 0, xpad);
        if (g->depthwise) {
            qat__depthwise_args d = {.xp = quads ? NULL : xpad, .x8 = quads ? x + s * in_n : NULL, .w4 = w4,
                                     .bias4 = bias4, .plane8 = quads ? e->scratch : NULL, .H = g->H, .W = g->W, .ph = op->pad_h,
                                     .pw = op->pad_w, .w16 = w16, .pairs = col, .zp_in = in->q.zero_point,
                                     .vnni = vnni, .C = g->C, .Hp = g->Hp,
                                     .Wp = g->Wp, .O = g->O, .kh = op->kh, .kw = op->kw, .sh = op->stride_h,
                                     .sw = op->stride_w, .OH = g->OH, .OW = g->OW, .bias = op->bias,
                                     .m0 = op->multiplier, .shift = op->shift, .zp = zp, .lo = op->act_min,
                                     .hi = op->act_max, .y = y + s * out_n, .single = SINGLE(e)};
            qat__depthwise_level(&d, e->level);
            continue;
        }
        int Cg = g->C / g->groups, P = g->OH * g->OW;
        for (int grp = 0; grp < g->groups; grp++) {
            qat__im2col_s16(xpad + (int64_t)grp * Cg * g->Hp * g->Wp, Cg, g->Hp, g->Wp, op->kh, op->kw, op->stride_h,
                            op->stride_w, g->OH, g->OW, g->Pp, col);
            int64_t o0 = (int64_t)grp * g->Og;
            qat__gemm_args a = {.w = w16 + o0 * g->Kp, .col = col, .O = g->Og, .P = P, .Kp = g->Kp, .Pp = g->Pp,
                                .bias = op->bias + o0, .m0 = op->multiplier + o0, .shift = op->shift + o0, .zp = zp,
                                .lo = op->act_min, .hi = op->act_max, .out = y + s * out_n + o0 * P, .so = P, .sp = 1,
                                .single = SINGLE(e)};
            qat__gemm_requant_level(&a, e->level);
        }
    }
}

static void run_dw_lanes(const exec *e, const qat_qop *op, const qat__op_geom *g, const uint8_t *c) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    qat__dw_lanes_args a = {.g = *g, .consts = c, .scratch = (int16_t *)(void *)e->scratch,
                            .zp_in = in->q.zero_point, .kw = op->kw, .sh = op->stride_h, .sw = op->stride_w,
                            .ph = op->pad_h, .pw = op->pad_w, .bias = op->bias, .m0 = op->multiplier,
                            .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point, .lo = op->act_min,
                            .hi = op->act_max, .single = SINGLE(e)};
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    memset(e->scratch, 0, (size_t)qat__dw_lanes_scratch_bytes(g)); /* the padding, and the channels past C */
    for (int64_t s = 0; s < e->n; s++) {
        a.x = x + s * in_n, a.y = y + s * out_n;
        qat__dw_lanes(&a);
    }
}

/* The portable level's kernels of qk.h (the generated C's), one sample at a time. */
static void run_qk(const exec *e, const qat_qop *op, const qat__op_geom *g, const int8_t *w8) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]], *out = &e->q->tensors[op->output];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = qat_qtensor_numel(out);
    bool conv = op->kind == QAT_QOP_CONV2D;
    qat__qk_conv_args a = {.w = w8, .C = conv ? g->C : g->K, .H = g->H, .W = g->W, .O = g->O, .OH = g->OH,
                           .OW = g->OW, .kh = op->kh, .kw = op->kw, .sh = op->stride_h, .sw = op->stride_w,
                           .ph = op->pad_h, .pw = op->pad_w, .groups = conv ? g->groups : 1, .bias = op->bias,
                           .m0 = op->multiplier, .shift = op->shift, .zp_in = in->q.zero_point,
                           .zp = out->q.zero_point, .lo = op->act_min, .hi = op->act_max, .single = SINGLE(e)};
    for (int64_t s = 0; s < e->n; s++) (conv ? qat__qk_conv : qat__qk_linear)(x + s * in_n, &a, y + s * out_n);
}

static void run_linear(const exec *e, const qat_qop *op, const qat__op_geom *g, const int16_t *w16) {
    const int8_t *x = tensor(e, op->inputs[0]);
    int32_t zp_in = e->q->tensors[op->inputs[0]].q.zero_point;
    int16_t *col = (int16_t *)e->scratch;
    /* the input transposed: col[k][s] = x[s][k] - zp */
    for (int64_t s = 0; s < e->n; s++)
        for (int64_t k = 0; k < g->K; k++) col[k * g->Pp + s] = (int16_t)(x[s * g->K + k] - zp_in);
    if (g->K < g->Kp) memset(col + (int64_t)g->K * g->Pp, 0, (size_t)g->Pp * sizeof *col);
    qat__gemm_args a = {.w = w16, .col = col, .O = g->O, .P = (int)e->n, .Kp = g->Kp, .Pp = g->Pp, .bias = op->bias,
                        .m0 = op->multiplier, .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point,
                        .lo = op->act_min, .hi = op->act_max, .out = tensor(e, op->output), .so = 1, .sp = g->O,
                        .single = SINGLE(e)};
    qat__gemm_requant_level(&a, e->level);
}

/* ---- the int8 path ---------------------------------------------------------------- */

/* Plane offsets of each GEMM row k4 (dense4: (c4, ky, kx); generic: of each
 * k = (c, ky, kx)) or depthwise tap row (ky, g), within one group's stacks. */
static void plane_offsets(const qat_qop *op, const qat__op_geom *g, const qat__i8_geom *i, int32_t *ksrc) {
    int sh = op->stride_h, sw = op->stride_w;
    if (i->kind == QAT_I8_DEPTHWISE) {
        for (int ky = 0; ky < op->kh; ky++)
            for (int gg = 0; gg < i->G; gg++)
                ksrc[ky * i->G + gg] = i->packed ? (int32_t)(i->front + (int64_t)ky * i->Wq + 4 * gg - op->pad_w)
                                                 : (int32_t)((ky % sh) * i->plane + (int64_t)(ky / sh) * i->Wq + 4 * gg);
        return;
    }
    int n = i->kind == QAT_I8_DENSE4 ? i->K4 : g->K;
    for (int k = 0; k < n; k++) {
        int t = k % g->kk, c = k / g->kk, ky = t / op->kw, kx = t % op->kw;
        if (i->packed) {
            ksrc[k] = (int32_t)(c * i->plane + i->front + ((int64_t)ky * i->Wq + kx - op->pad_w) * i->pix);
            continue;
        }
        int64_t stack = ((int64_t)c * sh + ky % sh) * sw + kx % sw;
        ksrc[k] = (int32_t)(stack * i->plane + ((int64_t)(ky / sh) * i->Wq + kx / sw) * i->pix);
    }
}

static void run_conv8(const exec *e, const qat_qop *op, const qat__op_geom *g, const uint8_t *c) {
    qat__i8_geom i;
    qat__i8_geometry(e->q, op, g, e->plan->max_batch, &i);
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int64_t in_n = qat_qtensor_numel(in), out_n = (int64_t)g->O * g->OH * g->OW;
    int64_t rows = i.kind == QAT_I8_DEPTHWISE ? g->O : (int64_t)g->groups * i.Op;
    const int32_t *bias8 = (const int32_t *)(const void *)c;
    const int8_t *w8 = (const int8_t *)c + qat__round_up(4 * rows, 64);
    const qat__rq *rq = (const qat__rq *)(const void *)(c + i.rq_offset);
    uint8_t *planes = e->scratch + i.off_planes, *col = e->scratch + i.off_col;
    int32_t *koff = (int32_t *)(void *)(e->scratch + i.off_koff), *ksrc = (int32_t *)(void *)(e->scratch + i.off_ksrc);
    qat__posmap map = {.first = (int32_t *)(void *)(e->scratch + i.off_first),
                       .seg = (qat__seg *)(void *)(e->scratch + i.off_seg)};
    bool simd = e->level >= QAT_LEVEL_VNNI8;
    plane_offsets(op, g, &i, ksrc);
    for (int k = 0; k < i.K4; k++) koff[k] = i.implicit ? ksrc[k] : (int32_t)(k * i.colpitch);
    qat__planes_args pa = {.C = g->C, .H = g->H, .W = g->W, .ph = op->pad_h, .pw = op->pad_w, .sh = op->stride_h,
                           .sw = op->stride_w, .kh = op->kh, .kw = op->kw, .phy = i.phy, .phx = i.phx, .Hq = i.Hq, .Wq = i.Wq, .pix = i.pix,
                           .packed = i.packed, .in_n = in_n, .plane = i.plane, .front = i.front,
                           .zp = in->q.zero_point};
    int32_t zp = e->q->tensors[op->output].q.zero_point;
    int64_t stacks_per_group = (int64_t)g->C / g->groups / i.pix * i.phy * i.phx;
    for (int64_t s0 = 0; s0 < e->n; s0 += i.m) {
        int mm = (int)(e->n - s0 < i.m ? e->n - s0 : i.m);
        pa.m = mm;
        (simd ? qat__planes_u8_avx512 : qat__planes_u8)(x + s0 * in_n, &pa, planes);
        bool grid = i.kind == QAT_I8_DEPTHWISE || i.implicit;
        int64_t Q = grid ? qat__posmap_build(mm, i.Hq, i.Wg, g->OH, g->OW, out_n, &map)
                         : qat__posmap_build(mm, 1, (int)i.P, 1, (int)i.P, out_n, &map);
        if (i.kind == QAT_I8_DEPTHWISE) {
            qat__dw8_args d = {.planes = planes, .cstride = i.phy * i.plane, .tap = ksrc, .T = i.K4, .step = i.step,
                               .mult = g->O / g->C, .O = g->O, .w = w8, .Q = Q, .rq = rq, .bias8 = bias8, .m0 = op->multiplier,
                               .shift = op->shift, .zp = zp, .lo = op->act_min, .hi = op->act_max,
                               .out = y + s0 * out_n, .so = (int64_t)g->OH * g->OW, .map = &map, .single = SINGLE(e)};
            (simd ? qat__dw8_vnni : qat__dw8_ref)(&d);
            continue;
        }
        for (int grp = 0; grp < g->groups; grp++) {
            const uint8_t *gp = planes + grp * stacks_per_group * i.plane;
            if (!i.implicit) {
                qat__columns_args ca = {.dense4 = i.kind == QAT_I8_DENSE4, .K = g->K, .K4 = i.K4, .m = mm, .Hq = i.Hq,
                                        .Wq = i.Wq, .OH = g->OH, .OW = g->OW, .colpitch = i.colpitch};
                (simd ? qat__columns_u8_avx512 : qat__columns_u8)(gp, ksrc, &ca, col);
            }
            int64_t o0 = (int64_t)grp * g->Og;
            qat__gemm8_args a = {.col = i.implicit ? gp : col, .koff = koff, .w = w8 + grp * (int64_t)i.Op * i.K4 * 4,
                                 .K4 = i.K4, .O = g->Og, .R = i.R, .TT = i.TT, .Q = Q, .rq = rq + o0,
                                 .bias8 = bias8 + grp * i.Op,
                                 .m0 = op->multiplier + o0, .shift = op->shift + o0, .zp = zp, .lo = op->act_min,
                                 .hi = op->act_max, .out = y + s0 * out_n + o0 * i.P, .so = i.P, .map = &map,
                                 .single = SINGLE(e)};
            (simd ? qat__gemm8_vnni : qat__gemm8_ref)(&a);
        }
    }
}

static void run_linear8(const exec *e, const qat_qop *op, const qat__op_geom *g, const uint8_t *c) {
    qat__i8_geom i;
    qat__i8_geometry(e->q, op, g, e->plan->max_batch, &i);
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *last = NULL;
    if (g->K % 4) { /* the last row read in whole groups of 4 would run past the tensor */
        last = (int8_t *)e->scratch;
        memcpy(last, x + (e->n - 1) * g->K, (size_t)g->K);
        memset(last + g->K, 0, (size_t)(4 * i.K4 - g->K));
    }
    qat__linear8_args a = {.x = x, .last = last, .K = g->K, .K4 = i.K4, .O = g->O, .n = (int)e->n, .TT = i.TT,
                           .wu = c + qat__round_up(4 * (int64_t)i.Op, 64), .bias8 = (const int32_t *)(const void *)c,
                           .m0 = op->multiplier, .shift = op->shift, .zp = e->q->tensors[op->output].q.zero_point,
                           .lo = op->act_min, .hi = op->act_max, .out = tensor(e, op->output), .single = SINGLE(e)};
    (e->level >= QAT_LEVEL_VNNI8 ? qat__linear8_vnni : qat__linear8_ref)(&a);
}

static qat__requant_args requant_of(const exec *e, const qat_qop *op, int input, int m) {
    return (qat__requant_args){.zp_in = e->q->tensors[op->inputs[input]].q.zero_point, .m0 = op->multiplier[m],
                               .shift = op->shift[m], .zp_out = e->q->tensors[op->output].q.zero_point,
                               .lo = op->act_min, .hi = op->act_max, .single = SINGLE(e)};
}

/* An average pool's arguments: its multiplier, or (keeps_scale) the
 * dividing rule, which has none. */
static qat__requant_args pool_args(const exec *e, const qat_qop *op) {
    if (op->keeps_scale) return (qat__requant_args){.lo = op->act_min, .hi = op->act_max, .keep = true};
    return requant_of(e, op, 0, 0);
}

/* TFLite's MUL (qat__mul_s8), one sample at a time. */
static void run_mul(const exec *e, const qat_qop *op) {
    const qat_qtensor *ta = &e->q->tensors[op->inputs[0]], *tb = &e->q->tensors[op->inputs[1]];
    const int8_t *a = tensor(e, op->inputs[0]), *b = tensor(e, op->inputs[1]);
    int8_t *y = tensor(e, op->output);
    int64_t n = qat_qtensor_numel(ta), nb = qat_qtensor_numel(tb), per = n / nb; /* a's elements per b element */
    qat__mul_args r = {.zp_a = ta->q.zero_point, .zp_b = tb->q.zero_point, .m0 = op->multiplier[0],
                       .shift = op->shift[0], .zp_out = e->q->tensors[op->output].q.zero_point, .lo = op->act_min,
                       .hi = op->act_max, .single = SINGLE(e)};
    for (int64_t s = 0; s < e->n; s++) qat__mul_s8(a + s * n, b + s * nb, (int32_t)n, (int32_t)per, &r, y + s * n);
}

static void run_pool(const exec *e, const qat_qop *op) {
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int64_t in_n = qat_qtensor_numel(in), out_n = qat_qtensor_numel(&e->q->tensors[op->output]);
    qat__requant_args r = op->kind == QAT_QOP_AVGPOOL2D ? pool_args(e, op) : (qat__requant_args){0};
    bool two = op->kh == 2 && op->kw == 2 && op->stride_h == 2 && op->stride_w == 2 && !op->pad_h && !op->pad_w;
    for (int64_t s = 0; s < e->n; s++) {
        const int8_t *xs = x + s * in_n;
        int8_t *ys = y + s * out_n;
        if (op->kind == QAT_QOP_AVGPOOL2D)
            qat__avgpool_s8(xs, C, H, W, op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w, &r, ys);
        else if (!(two && e->level >= QAT_LEVEL_AVX2 && qat__maxpool2_s8_simd(xs, C, H, W, ys, (int8_t *)e->scratch)))
            qat__maxpool_s8(xs, C, H, W, op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w, ys);
    }
}

/* Concatenation along the per-sample first axis (channels, or features):
 * each input's block, requantized to the output, at its place in y. */
static void run_concat(const exec *e, const qat_qop *op) {
    int8_t *y = tensor(e, op->output);
    int64_t out_n = qat_qtensor_numel(&e->q->tensors[op->output]);
    for (int64_t s = 0; s < e->n; s++) {
        int64_t at = 0;
        for (int i = 0; i < op->n_inputs; i++) {
            int64_t in_n = qat_qtensor_numel(&e->q->tensors[op->inputs[i]]);
            qat__requant_args r = requant_of(e, op, i, i);
            (e->level >= QAT_LEVEL_VNNI8 ? qat__requant_s8_avx512 : qat__requant_s8)(tensor(e, op->inputs[i]) + s * in_n,
                                                                                    in_n, &r, y + s * out_n + at);
            at += in_n;
        }
    }
}

static void run_op(const exec *e, int i) {
    const qat_qop *op = &e->q->ops[i];
    qat__op_geom g;
    qat__op_geometry(e->q, op, e->plan->max_batch, &g);
    const void *c = e->consts + e->plan->const_offset[i];
    const qat_qtensor *in = &e->q->tensors[op->inputs[0]];
    int64_t n = e->n * qat_qtensor_numel(in);
    const int8_t *x = tensor(e, op->inputs[0]);
    int8_t *y = tensor(e, op->output);
    bool simd = e->level >= QAT_LEVEL_VNNI8;
    switch (op->kind) {
    case QAT_QOP_CONV2D:
    case QAT_QOP_LINEAR: {
        const uint8_t *body = (const uint8_t *)c + HEADER;
        if (qat_qop_subchannel(op)) {
            if (op->kind == QAT_QOP_CONV2D) qat__sc_run_conv(e->q, op, &g, body, x, y, e->scratch, e->n);
            else qat__sc_run_linear(e->q, op, &g, body, x, y, e->scratch, e->n);
            return;
        }
        bool i8 = ((const op_header *)c)->int8;
        if (((const op_header *)c)->qk) {
            run_qk(e, op, &g, (const int8_t *)body);
            return;
        }
        if (((const op_header *)c)->wino) {
            run_conv_wino(e, op, &g, (const int32_t *)(const void *)body);
            return;
        }
        if (((const op_header *)c)->direct) {
            const op_header *h = c;
            run_conv_direct(e, op, &g, body, (qat__direct_form)h->direct, h->vex);
            return;
        }
        if (((const op_header *)c)->dw_lanes) {
            run_dw_lanes(e, op, &g, body);
            return;
        }
        const int16_t *w16 = (const int16_t *)(const void *)body;
        if (op->kind == QAT_QOP_CONV2D)
            i8 ? run_conv8(e, op, &g, body) : run_conv(e, op, &g, w16, ((const op_header *)c)->dw_bytes, ((const op_header *)c)->vex);
        else i8 ? run_linear8(e, op, &g, body) : run_linear(e, op, &g, w16);
        return;
    }
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D: run_pool(e, op); return;
    case QAT_QOP_GLOBAL_AVGPOOL: {
        qat__requant_args r = pool_args(e, op);
        int HW = (int)(in->shape[1] * in->shape[2]);
        for (int64_t s = 0; s < e->n; s++) {
            const int8_t *xs = x + s * qat_qtensor_numel(in);
            int8_t *ys = y + s * in->shape[0];
            if (simd) qat__global_avgpool_s8_avx512(xs, (int)in->shape[0], HW, &r, ys);
            else qat__global_avgpool_s8_level(xs, (int)in->shape[0], HW, &r, ys, e->level);
        }
        return;
    }
    case QAT_QOP_ADD: {
        qat__add_args r = add_args(e->q, op);
        if (simd) qat__add_s8_tab_avx512(x, tensor(e, op->inputs[1]), n, &r, c, y);
        else qat__add_s8_level(x, tensor(e, op->inputs[1]), n, &r, y, e->level);
        return;
    }
    case QAT_QOP_CONCAT: run_concat(e, op); return;
    case QAT_QOP_MUL: run_mul(e, op); return;
    case QAT_QOP_LUT: qat__lut_s8(x, n, c, in->q.qmin, y); return;
    case QAT_QOP_RELU: qat__clamp_s8(x, n, op->act_min, op->act_max, y); return;
    case QAT_QOP_FLATTEN: /* the same bytes: the plan gave both tensors one buffer */
    case QAT_QOP_KIND_COUNT: return;
    }
}

qat_status qat__runtime_run_ops(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena,
                                void *scratch, int64_t n, qat__level level, int first, int end) {
    if (!q || !plan || !arena || (!consts && plan->const_bytes) || (!scratch && plan->scratch_bytes) || n < 1 ||
        n > plan->max_batch || first < 0 || end > q->n_ops)
        return QAT_ERR_ARG;
    int64_t sub_bytes, tail = qat__chunk_scratch(plan->peak_activation_bytes, plan->max_batch, q->n_tensors, &sub_bytes);
    uint8_t *sub = (uint8_t *)scratch + plan->scratch_bytes - tail, *real = sub + sub_bytes;
    real_tensors(q, plan, real);
    exec e = {.q = q, .plan = plan, .consts = consts, .arena = arena, .scratch = scratch, .level = level,
              .mc = qat__chunk_samples(plan->peak_activation_bytes, plan->max_batch), .sub = (int8_t *)sub, .real = real};
    for (e.s0 = 0; e.s0 < n; e.s0 += e.mc) {
        e.n = n - e.s0 < e.mc ? n - e.s0 : e.mc;
        for (int i = first; i < end; i++) run_op(&e, i);
    }
    return QAT_OK;
}

qat_status qat__runtime_run_level(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena,
                                  void *scratch, int64_t n, qat__level level) {
    return qat__runtime_run_ops(q, plan, consts, arena, scratch, n, level, 0, q ? q->n_ops : 0);
}

const char *qat__runtime_op_path(const qat_qop *op, const void *op_consts) {
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return "";
    const op_header *h = op_consts;
    if (qat_qop_subchannel(op)) return "sub";
    return h->int8                                ? "int8"
           : h->qk                                ? "qk"
           : h->wino                              ? "winograd"
           : h->direct == QAT_DIRECT_BYTES_VNNI   ? "vnni"
           : h->direct == QAT_DIRECT_BYTES        ? "bytes"
           : h->direct                            ? "direct"
           : h->dw_lanes                          ? "lanes"
                                                  : "int16";
}

qat_status qat_runtime_run(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena, void *scratch,
                           int64_t n) {
    return qat__runtime_run_level(q, plan, consts, arena, scratch, n, qat__cpu_level());
}
