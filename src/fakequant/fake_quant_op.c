/* The fake-quantize op in the autograd graph, with straight-through
 * backward: clipped (gradient where the unclamped integer is in range, as
 * PyTorch) or plain. */
#include <math.h>
#include <string.h>

#include "autograd/op_api.h"
#include "internal.h"

/* The backward's masks are kept from forward to backward as bits (bit i
 * of byte i/8 for element i): an eighth of the memory of a byte per
 * element, for a tensor that lives through the whole forward pass. The
 * forward writes one byte per element into a transient buffer (bit 0:
 * the unclamped integer is in range; bit 1: a fused ReLU/ReLU6 passes
 * the gradient), packs each bit plane, and gives the buffer back.
 *
 * The two masks act differently, as the PyTorch ops they stand for do:
 *   MASK_MUL  fake quantization's clipped STE: dx = dy · mask (float 0 or 1),
 *             so a clipped element gets dy·0: -0.0 for a negative dy, NaN
 *             for a NaN or infinite dy (torch: dY * mask);
 *   MASK_SEL  a fused ReLU/ReLU6: dx = pass ? dx : +0.0 (torch's
 *             threshold/hardtanh backward select a literal zero).
 * node->i[0] says which planes the node keeps; MASK_MUL's comes first. */
enum { MASK_MUL = 1, MASK_SEL = 2 };

/* bits[k] = bit `plane` of bytes[8k .. 8k+7], element 8k + j at bit j. */
static void pack_bits(const uint8_t *restrict bytes, uint8_t *restrict bits, int64_t n, int plane) {
    int64_t k = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* eight 0/1 bytes in one word: the multiply moves byte j's bit to bit
     * 56 + j, and no two partial products meet */
    for (; 8 * k + 8 <= n; k++) {
        uint64_t v;
        memcpy(&v, bytes + 8 * k, sizeof v);
        v = (v >> plane) & 0x0101010101010101ULL;
        bits[k] = (uint8_t)((v * 0x0102040810204080ULL) >> 56);
    }
#endif
    for (; 8 * k < n; k++) {
        uint8_t b = 0;
        for (int64_t j = 0; j < 8 && 8 * k + j < n; j++) b |= (uint8_t)(((bytes[8 * k + j] >> plane) & 1) << j);
        bits[k] = b;
    }
}

static inline bool bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* One element's gradient under the masks (NULL: no such mask). */
static inline float masked1(float g, const uint8_t *mul, const uint8_t *sel, int64_t i) {
    if (mul) g *= bit(mul, i) ? 1.0f : 0.0f;
    return !sel || bit(sel, i) ? g : 0.0f;
}

/* Sixteen elements at a time as GCC/Clang vectors: two mask bytes
 * broadcast, each lane tests its own bit. MASK_MUL multiplies by the lane
 * as a float 0 or 1; MASK_SEL ANDs with the all-ones/all-zeros lane (+0
 * where clear). Written out because the compiler made a scalar loop of
 * the bit tests. (Macros: a vector argument or result of a function built
 * for the baseline ABI is what GCC warns about.) */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
/* Lane k's bit moved to bit 31, then spread over the lane by an arithmetic
 * shift: all ones where set. (The test (word & 1 << k) != 0 gave the same
 * lanes, but GCC built its AVX2 copy lane by lane, 10x the AVX-512 one's
 * time: 5.5 % of a ResNet-8 step at the avx2 level.) */
#define LANE_SHIFT ((v16u){31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16})
#define LANES_ON(bits, i) \
    ((v16i)(((v16u){0} + ((uint32_t)(bits)[(i) >> 3] | (uint32_t)(bits)[((i) >> 3) + 1] << 8)) << LANE_SHIFT) >> 31)
#define FLOAT_ONE_BITS 0x3F800000 /* 1.0f */
#define MASKED16(out, g, mul, sel, i)                                                      \
    do {                                                                                   \
        v16f g_;                                                                           \
        memcpy(&g_, (g) + (i), sizeof g_);                                                 \
        if (mul) g_ *= (v16f)(LANES_ON(mul, i) & FLOAT_ONE_BITS);                          \
        if (sel) g_ = (v16f)((v16i)g_ & LANES_ON(sel, i));                                 \
        (out) = g_;                                                                        \
    } while (0)

/* dx += dy under the masks (all of dy without masks: plain STE). */
QAT__SIMD_FN(static, ste_accumulate, (gx, gy, mul, sel, n), float *restrict gx, const float *restrict gy,
             const uint8_t *restrict mul, const uint8_t *restrict sel, int64_t n) {
    if (!mul && !sel) {
        for (int64_t i = 0; i < n; i++) gx[i] += gy[i];
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f d, x;
        MASKED16(d, gy, mul, sel, i);
        memcpy(&x, gx + i, sizeof x);
        x += d;
        memcpy(gx + i, &x, sizeof x);
    }
    for (; i < n; i++) gx[i] += masked1(gy[i], mul, sel, i);
}

/* dy under the masks, in place. */
QAT__SIMD_FN(static, ste_mask, (g, mul, sel, n), float *restrict g, const uint8_t *restrict mul,
             const uint8_t *restrict sel, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f d;
        MASKED16(d, g, mul, sel, i);
        memcpy(g + i, &d, sizeof d);
    }
    for (; i < n; i++) g[i] = masked1(g[i], mul, sel, i);
}

/* The pool's tasks take QAT__GRAIN elements each: a multiple of 64, so
 * each starts on a whole mask byte and a 16-lane block. */
typedef struct {
    float *g;
    const float *gy;
    const uint8_t *mul, *sel;
    qat__simd simd; /* the loops' copy (op_api.h) */
} ste_job;

#define PLANE_AT(p, i) ((p) ? (p) + (i) / 8 : NULL)

static void ste_mask_range(void *u, int64_t i0, int64_t i1) {
    const ste_job *j = u;
    ste_mask_at(j->simd, j->g + i0, PLANE_AT(j->mul, i0), PLANE_AT(j->sel, i0), i1 - i0);
}

static void ste_accumulate_range(void *u, int64_t i0, int64_t i1) {
    const ste_job *j = u;
    ste_accumulate_at(j->simd, j->g + i0, j->gy + i0, PLANE_AT(j->mul, i0), PLANE_AT(j->sel, i0), i1 - i0);
}

static void fq_bw(qat_ctx *ctx, qat_node *n) {
    int64_t numel = n->in[0]->numel, nb = (numel + 7) / 8;
    const uint8_t *planes = n->saved;
    ste_job j = {.gy = n->out->grad, .simd = qat__simd_level()};
    j.mul = n->i[0] & MASK_MUL ? planes : NULL;
    j.sel = n->i[0] & MASK_SEL ? planes + (j.mul ? nb : 0) : NULL;
    if ((j.g = qat__grad_reuse(n->in[0], n->out))) {
        if (j.mul || j.sel) qat__par_range(ctx, numel, QAT__GRAIN, ste_mask_range, &j);
        return;
    }
    if ((j.g = qat__grad(ctx, n->in[0]))) qat__par_range(ctx, numel, QAT__GRAIN, ste_accumulate_range, &j);
}

/* One run of elements sharing (scale, zero point): y = clamp(rint(x·inv),
 * lo, hi)·s, and the clipped-STE mask (where the unclamped integer is in
 * [lo, hi]) if mask is given. lo, hi are qmin - zp, qmax - zp. */
QAT__SIMD_FN(static, fq_run, (xs, ys, mask, n, inv, sc, lo, hi), const float *restrict xs, float *restrict ys,
             uint8_t *restrict mask, int64_t n, float inv, float sc, float lo, float hi) {
    if (mask) {
        for (int64_t j = 0; j < n; j++) {
            float r = qat__rint_clamped(xs[j] * inv, lo - 1.0f, hi + 1.0f);
            mask[j] = (r >= lo) & (r <= hi);
            float c = r < lo ? lo : r;
            c = c > hi ? hi : c;
            ys[j] = c * sc;
        }
    } else {
        for (int64_t j = 0; j < n; j++) ys[j] = qat__rint_clamped(xs[j] * inv, lo, hi) * sc;
    }
}

/* The same run over one buffer (in place): no restrict, one pointer.
 * With a pre-clamp (a fused ReLU/ReLU6: clo < chi), the value quantized is
 * min(max(v, clo), chi) — relu's and clamp's forward — and bit 1 of the
 * mask holds their gradient rule, clo < v < chi (bit 0: in range, or 1
 * under plain STE). */
QAT__SIMD_FN(static, fq_run_inplace, (v, mask, n, inv, sc, lo, hi, clo, chi, clipped), float *v,
             uint8_t *restrict mask, int64_t n, float inv, float sc, float lo, float hi, float clo, float chi,
             bool clipped) {
    for (int64_t j = 0; j < n; j++) {
        float x = v[j];
        uint8_t pass = 1;
        if (clo < chi) {
            pass = (x > clo) & (x < chi);
            /* relu's forward (x > 0 ? x : 0: NaN becomes 0), or clamp's (NaN stays) */
            x = chi == INFINITY ? (x > clo ? x : clo) : (x < clo ? clo : (x > chi ? chi : x));
        }
        float r = qat__rint_clamped(x * inv, lo - 1.0f, hi + 1.0f);
        uint8_t in = (r >= lo) & (r <= hi);
        if (mask) mask[j] = (uint8_t)((clipped ? in : 1) | pass << 1); /* plain STE: the clamp's rule alone */
        float c = r < lo ? lo : r;
        c = c > hi ? hi : c;
        v[j] = c * sc;
    }
}

/* Elements [i0, i1), run by run (each run shares one (scale, zero point)),
 * then their mask bytes packed into the planes. With runs of one length
 * (fixed > 0) a task may start inside a run: i0 is a multiple of 64, and
 * the run ends at the next multiple of fixed. Ragged runs (fixed == 0) are
 * walked from a run's start: those calls cover [0, n) in one task. */
typedef struct {
    const qat_qtype *q;
    const float *x;
    float *y;
    uint8_t *mask, *mul, *sel;
    int64_t fixed;
    bool in_place, clipped;
    float clo, chi;
    qat__simd simd; /* the runs' copy (op_api.h) */
} fq_job;

static void fq_range(void *u, int64_t i0, int64_t i1) {
    const fq_job *j = u;
    const qat_qtype *q = j->q;
    for (int64_t s = i0, e; s < i1; s = e) {
        e = j->fixed ? (s / j->fixed + 1) * j->fixed : s + qat__qtype_run_len(q, s);
        if (e > i1) e = i1;
        int64_t p = qat_qtype_param_index(q, s);
        float sc = q->scale[p], inv = 1.0f / sc; /* x * (1/scale), as PyTorch */
        /* clamp r = round(x/s) to [qmin - zp, qmax - zp]: then r = q - zp exactly
         * (small integers), and x_hat = r * s is (q - zp) * s bit for bit. NaN
         * passes through (no comparison holds) and is out of range. */
        float lo = (float)(q->qmin - q->zero_point[p]), hi = (float)(q->qmax - q->zero_point[p]);
        if (j->in_place)
            fq_run_inplace_at(j->simd, j->y + s, j->mask ? j->mask + s : NULL, e - s, inv, sc, lo, hi, j->clo, j->chi,
                              j->clipped);
        else
            fq_run_at(j->simd, j->x + s, j->y + s, j->mask ? j->mask + s : NULL, e - s, inv, sc, lo, hi);
    }
    if (j->mul) pack_bits(j->mask + i0, j->mul + i0 / 8, i1 - i0, 0);
    if (j->sel) pack_bits(j->mask + i0, j->sel + i0 / 8, i1 - i0, 1);
}

/* in_place: write over x when allowed; clo < chi: quantize clamp(x, clo,
 * chi) instead (a fused ReLU/ReLU6, only in place). */
static qat_tensor *fake_quant(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste, bool in_place, float clo,
                              float chi) {
    if (!qat__inputs_ok(ctx, "qat_fake_quant", 1, &x)) return NULL;
    if (!q || !q->scale) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_fake_quant: NULL type"), NULL;
    bool same = (x->rank == q->rank || q->rank == 0) && qat_tensor_is_contiguous(x);
    for (int d = 0; same && d < q->rank; d++) same = x->shape[d] == q->shape[d];
    if (!same) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_fake_quant: tensor %s does not have the type's "
                            "shape", qat_shape_str(x, s, sizeof s)), NULL;
    }
    bool record = qat_ctx_grad_enabled(ctx) && x->requires_grad;
    /* over x itself only when the caller says nothing else reads x and, if
     * the step is recorded, x's producer does not need it for its backward */
    in_place = in_place && x->mem == QAT_MEM_STEP && (!record || (x->node && x->node->out_free));
    bool clamp = clo < chi;
    if (clamp && !in_place) { /* not allowed over x: the two ops, as they are */
        qat_tensor *c = clo == 0.0f && chi == INFINITY ? qat_relu(ctx, x) : qat_clamp(ctx, x, clo, chi);
        return c ? fake_quant(ctx, c, q, ste, true, 0.0f, 0.0f) : NULL;
    }
    qat_tensor *y = in_place ? qat_tensor_wrap(ctx, QAT_MEM_STEP, x->data, NULL, x->rank, x->shape)
                             : qat__new_out(ctx, x->rank, x->shape);
    uint8_t *mask = NULL, *bits = NULL;
    /* the planes the backward needs: clipped STE multiplies by the range
     * mask, a fused clamp selects by its pass mask */
    int kinds = record ? (ste == QAT_STE_CLIPPED ? MASK_MUL : 0) | (clamp ? MASK_SEL : 0) : 0;
    int64_t nb = (x->numel + 7) / 8;
    if (kinds) {
        mask = (uint8_t *)qat__step_recycled(ctx, (size_t)x->numel);
        bits = qat__step_scratch(ctx, (size_t)(nb * (kinds == (MASK_MUL | MASK_SEL) ? 2 : 1)));
    }
    if (!y || (kinds && (!mask || !bits))) return NULL;
    int64_t n = x->numel;
    fq_job j = {.simd = qat__simd_level(), .q = q, .x = x->data, .y = y->data, .mask = mask,
                .fixed = q->rank == 0 ? n : qat__qtype_fixed_run(q), .in_place = in_place, .clo = clamp ? clo : 0.0f,
                .chi = clamp ? chi : 0.0f, .clipped = ste == QAT_STE_CLIPPED};
    j.mul = kinds & MASK_MUL ? bits : NULL;
    j.sel = kinds & MASK_SEL ? bits + (j.mul ? nb : 0) : NULL;
    if (j.fixed)
        qat__par_range(ctx, n, QAT__GRAIN, fq_range, &j);
    else
        fq_range(&j, 0, n);
    if (mask) qat__step_release(ctx, (float *)(void *)mask, (size_t)n);
    qat_node *node = qat__record(ctx, "qat_fake_quant", fq_bw, y, x, NULL, NULL);
    if (node) node->saved = bits, node->i[0] = kinds;
    return y;
}

qat_tensor *qat_fake_quant(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste) {
    return fake_quant(ctx, x, q, ste, false, 0.0f, 0.0f);
}

qat_tensor *qat__fake_quant_over(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste, float clo, float chi) {
    return fake_quant(ctx, x, q, ste, true, clo, chi);
}
