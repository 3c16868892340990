/* The fake-quantize op in the autograd graph, with straight-through
 * backward: clipped (gradient where the unclamped integer is in range, as
 * PyTorch) or plain. */
#include <math.h>
#include <string.h>

#include "autograd/internal.h"
#include "internal.h"

/* The clipped-STE mask is kept from forward to backward as bits (bit i
 * of byte i/8 for element i): an eighth of the memory of a byte per
 * element, for a tensor that lives through the whole forward pass. The
 * forward writes bytes into a transient buffer, packs them, and gives the
 * buffer back. */
static void pack_bits(const uint8_t *restrict bytes, uint8_t *restrict bits, int64_t n) {
    int64_t k = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* eight 0/1 bytes in one word: the multiply moves byte j's bit to bit
     * 56 + j, and no two partial products meet */
    for (; 8 * k + 8 <= n; k++) {
        uint64_t v;
        memcpy(&v, bytes + 8 * k, sizeof v);
        bits[k] = (uint8_t)((v * 0x0102040810204080ULL) >> 56);
    }
#endif
    for (; 8 * k < n; k++) {
        uint8_t b = 0;
        for (int64_t j = 0; j < 8 && 8 * k + j < n; j++) b |= (uint8_t)(bytes[8 * k + j] << j);
        bits[k] = b;
    }
}

static inline bool bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* Sixteen elements at a time as GCC/Clang vectors: two mask bytes
 * broadcast, each lane tests its own bit, and the gradient is ANDed with
 * the all-ones/all-zeros lane (+0 where the mask is clear, as before).
 * Written out because the compiler made a scalar loop of the bit tests.
 * (Macros: a vector argument or result of a function built for the
 * baseline ABI is what GCC warns about.) */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
#define LANE_BITS ((v16i){1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768})
#define MASKED16(out, g, bits, i)                                                         \
    do {                                                                                  \
        v16f g_;                                                                          \
        memcpy(&g_, (g) + (i), sizeof g_);                                                \
        int32_t b_ = (int32_t)(bits)[(i) >> 3] | (int32_t)(bits)[((i) >> 3) + 1] << 8;    \
        v16i on_ = (((v16i){0} + b_) & LANE_BITS) != 0;                                   \
        (out) = (v16f)((v16i)g_ & on_);                                                   \
    } while (0)

/* dx += dy where the mask is set (all of dy without a mask: plain STE). */
QAT__SIMD_CLONES
static void ste_accumulate(float *restrict gx, const float *restrict gy, const uint8_t *restrict bits, int64_t n) {
    if (!bits) {
        for (int64_t i = 0; i < n; i++) gx[i] += gy[i];
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f d, x;
        MASKED16(d, gy, bits, i);
        memcpy(&x, gx + i, sizeof x);
        x += d;
        memcpy(gx + i, &x, sizeof x);
    }
    for (; i < n; i++) gx[i] += bit(bits, i) ? gy[i] : 0.0f;
}

/* dy, zeroed where the mask is clear, in place (plain STE: as it is). */
QAT__SIMD_CLONES
static void ste_mask(float *restrict g, const uint8_t *restrict bits, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f d;
        MASKED16(d, g, bits, i);
        memcpy(g + i, &d, sizeof d);
    }
    for (; i < n; i++) g[i] = bit(bits, i) ? g[i] : 0.0f;
}

/* The pool's tasks take QAT__GRAIN elements each: a multiple of 64, so
 * each starts on a whole mask byte and a 16-lane block. */
typedef struct {
    float *g;
    const float *gy;
    const uint8_t *bits;
} ste_job;

static void ste_mask_range(void *u, int64_t i0, int64_t i1) {
    const ste_job *j = u;
    ste_mask(j->g + i0, j->bits + i0 / 8, i1 - i0);
}

static void ste_accumulate_range(void *u, int64_t i0, int64_t i1) {
    const ste_job *j = u;
    ste_accumulate(j->g + i0, j->gy + i0, j->bits ? j->bits + i0 / 8 : NULL, i1 - i0);
}

static void fq_bw(qat_ctx *ctx, qat_node *n) {
    ste_job j = {.gy = n->out->grad, .bits = n->saved};
    if ((j.g = qat__grad_reuse(n->in[0], n->out))) {
        if (n->saved) qat__par_range(ctx, n->in[0]->numel, QAT__GRAIN, ste_mask_range, &j);
        return;
    }
    if ((j.g = qat__grad(ctx, n->in[0]))) qat__par_range(ctx, n->out->numel, QAT__GRAIN, ste_accumulate_range, &j);
}

/* One run of elements sharing (scale, zero point): y = clamp(rint(x·inv),
 * lo, hi)·s, and the clipped-STE mask (where the unclamped integer is in
 * [lo, hi]) if mask is given. lo, hi are qmin - zp, qmax - zp. */
QAT__SIMD_CLONES
static void fq_run(const float *restrict xs, float *restrict ys, uint8_t *restrict mask, int64_t n, float inv,
                   float sc, float lo, float hi) {
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
 * min(max(v, clo), chi) — relu's and clamp's forward — and the mask also
 * holds their gradient rule, clo < v < chi (so no mask means plain STE and
 * no pre-clamp). */
QAT__SIMD_CLONES
static void fq_run_inplace(float *v, uint8_t *restrict mask, int64_t n, float inv, float sc, float lo, float hi,
                           float clo, float chi, bool clipped) {
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
        if (mask) mask[j] = clipped ? (uint8_t)(pass & in) : pass; /* plain STE: the clamp's rule alone */
        float c = r < lo ? lo : r;
        c = c > hi ? hi : c;
        v[j] = c * sc;
    }
}

/* Elements [i0, i1) (i0 a multiple of 64 but at the start), run by run:
 * each run shares one (scale, zero point); then their mask bytes packed. */
typedef struct {
    const qat_qtype *q;
    const float *x;
    float *y;
    uint8_t *mask, *bits;
    int64_t run;
    bool in_place, clipped;
    float clo, chi;
} fq_job;

static void fq_range(void *u, int64_t i0, int64_t i1) {
    const fq_job *j = u;
    const qat_qtype *q = j->q;
    for (int64_t s = i0; s < i1;) {
        int64_t e = (s / j->run + 1) * j->run;
        if (e > i1) e = i1;
        int64_t p = qat_qtype_param_index(q, s);
        float sc = q->scale[p], inv = 1.0f / sc; /* x * (1/scale), as PyTorch */
        /* clamp r = round(x/s) to [qmin - zp, qmax - zp]: then r = q - zp exactly
         * (small integers), and x_hat = r * s is (q - zp) * s bit for bit. NaN
         * passes through (no comparison holds) and is out of range. */
        float lo = (float)(q->qmin - q->zero_point[p]), hi = (float)(q->qmax - q->zero_point[p]);
        if (j->in_place)
            fq_run_inplace(j->y + s, j->mask ? j->mask + s : NULL, e - s, inv, sc, lo, hi, j->clo, j->chi, j->clipped);
        else
            fq_run(j->x + s, j->y + s, j->mask ? j->mask + s : NULL, e - s, inv, sc, lo, hi);
        s = e;
    }
    if (j->mask) pack_bits(j->mask + i0, j->bits + i0 / 8, i1 - i0);
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
    bool record = ctx->grad_enabled && x->requires_grad;
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
    bool want_mask = record && (ste == QAT_STE_CLIPPED || clamp);
    if (want_mask) {
        mask = (uint8_t *)qat__step_recycled(ctx, (size_t)x->numel);
        bits = qat__step_scratch(ctx, (size_t)(x->numel + 7) / 8);
    }
    if (!y || (want_mask && (!mask || !bits))) return NULL;
    int64_t n = x->numel;
    fq_job j = {.q = q, .x = x->data, .y = y->data, .mask = mask, .bits = bits, .run = q->rank == 0 ? n : qat__qtype_run(q),
                .in_place = in_place, .clo = clamp ? clo : 0.0f, .chi = clamp ? chi : 0.0f, .clipped = ste == QAT_STE_CLIPPED};
    qat__par_range(ctx, n, QAT__GRAIN, fq_range, &j);
    if (mask) qat__step_release(ctx, (float *)(void *)mask, (size_t)n);
    qat_node *node = qat__record(ctx, "qat_fake_quant", fq_bw, y, x, NULL, NULL);
    if (node) node->saved = bits;
    return y;
}

qat_tensor *qat_fake_quant(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste) {
    return fake_quant(ctx, x, q, ste, false, 0.0f, 0.0f);
}

qat_tensor *qat__fake_quant_over(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste, float clo, float chi) {
    return fake_quant(ctx, x, q, ste, true, clo, chi);
}
