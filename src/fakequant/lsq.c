/* LSQ: fake quantization with learnable scale and zero point. */
#include "autograd/op_api.h"
#include "internal.h"

float qat_lsq_grad_factor(int64_t numel, int32_t qmax) {
    return 1.0f / sqrtf((float)numel * (float)(qmax > 0 ? qmax : 1));
}

/* The zero point as PyTorch uses it: rounded half to even, clamped. */
static float zp_of(const qat_qtype *q, float z) {
    z = qat__rint(z);
    return z < (float)q->qmin ? (float)q->qmin : z > (float)q->qmax ? (float)q->qmax : z;
}

static void lsq_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *sc = n->in[1], *zt = n->in[2];
    const qat_qtype *q = n->saved;
    float gf = n->f[0];
    bool store = false; /* a fresh step gradient: written, so dy·0 keeps its sign as torch's dY·mask */
    float *gx = qat__wants_grad(x) ? qat__grad_dst(ctx, x, &store) : NULL;
    float *gs = qat__wants_grad(sc) ? qat__grad(ctx, sc) : NULL;
    float *gz = qat__wants_grad(zt) ? qat__grad(ctx, zt) : NULL;
    if (qat_ctx_status(ctx) != QAT_OK) return;
    const float *dy = n->out->grad;
    int64_t N = x->numel, fixed = q->rank == 0 ? N : qat__qtype_fixed_run(q);
    for (int64_t s = 0, run; s < N; s += run) {
        run = QAT__RUN(q, fixed, s);
        int64_t p = qat_qtype_param_index(q, s);
        float scale = sc->data[p], inv = 1.0f / scale, zp = zp_of(q, zt->data[p]);
        float lo = (float)q->qmin - zp, hi = (float)q->qmax - zp; /* dscale outside the range */
        double ds = 0.0, dz = 0.0;
        for (int64_t j = s; j < s + run; j++) {
            float r = qat__rint(x->data[j] * inv), g = dy[j];
            bool out = r < lo || r > hi;
            if (gx) { /* dx = dy·mask, as torch: -0 for a negative dy outside, NaN for a NaN dy */
                float d = g * (out ? 0.0f : 1.0f);
                gx[j] = store ? d : gx[j] + d;
            }
            if (out) {
                ds += (double)(g * (r < lo ? lo : hi));
                dz += (double)(-g * scale);
            } else {
                float xfq = r * scale;
                ds += (double)((xfq - x->data[j]) * inv * g);
            }
        }
        if (gs) gs[p] += (float)ds * gf;
        if (gz) gz[p] += (float)dz * gf;
    }
}

qat_tensor *qat_fake_quant_lsq(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale, qat_tensor *zero_point,
                               const qat_qtype *q, float grad_factor) {
    qat_tensor *ins[3] = {x, scale, zero_point};
    if (!qat__inputs_ok(ctx, "qat_fake_quant_lsq", 3, ins)) return NULL;
    if (!q) return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_fake_quant_lsq: NULL type"), NULL;
    bool same = (x->rank == q->rank || q->rank == 0) && qat_tensor_is_contiguous(x);
    for (int d = 0; same && d < q->rank; d++) same = x->shape[d] == q->shape[d];
    if (!same || scale->numel != q->nparams || zero_point->numel != q->nparams)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "qat_fake_quant_lsq: x, scale (%lld) and zero point "
                            "(%lld) must fit the type (%lld blocks)", (long long)scale->numel,
                            (long long)zero_point->numel, (long long)q->nparams), NULL;
    for (int64_t p = 0; p < q->nparams; p++)
        if (!(scale->data[p] > 0.0f))
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "qat_fake_quant_lsq: scale %lld is %g (must be > 0)",
                                (long long)p, (double)scale->data[p]), NULL;
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    int64_t N = x->numel, fixed = q->rank == 0 ? N : qat__qtype_fixed_run(q);
    for (int64_t s = 0, run; s < N; s += run) {
        run = QAT__RUN(q, fixed, s);
        int64_t p = qat_qtype_param_index(q, s);
        float sc = scale->data[p], inv = 1.0f / sc, zp = zp_of(q, zero_point->data[p]);
        float lo = (float)q->qmin - zp, hi = (float)q->qmax - zp;
        for (int64_t j = s; j < s + run; j++) {
            float r = qat__rint(x->data[j] * inv);
            float c = r < lo ? lo : r;
            y->data[j] = (c > hi ? hi : c) * sc;
        }
    }
    qat_node *n = qat__record(ctx, "qat_fake_quant_lsq", lsq_bw, y, x, scale, zero_point);
    if (n) {
        n->saved = (void *)q;
        n->f[0] = grad_factor;
    }
    return y;
}
