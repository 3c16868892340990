/* Sigmoid, tanh and hard-swish, float32 as PyTorch 1.13 computes them on
 * the CPU, bit for bit, and qat_eval_* computing one value exactly as the
 * op's loop does (both call the same inline function): the integer
 * program's 256-entry tables are built with them.
 *
 * PyTorch's vectorised kernels (every element of a contiguous tensor but
 * a tail of fewer than 16; its scalar tail calls libm and can differ by
 * an ulp) evaluate, in float32:
 *   sigmoid(x)   = 1 / (exp(0 - x) + 1)
 *   tanh(x)      = SLEEF's tanhf, 1-ulp variant
 *   hardswish(x) = x * min(max(x + 3, 0), 6) / 6   (left to right)
 * with exp = SLEEF's expf, 1-ulp variant. Both SLEEF functions (SLEEF
 * 3.5, Boost licence; the library PyTorch calls) are re-done below step
 * by step in scalar C with fmaf where SLEEF's AVX2 code fuses; fmaf is
 * exact, so every build and CPU gives the same bits. Checked against
 * libsleef's AVX2 functions on all 2^32 inputs, and against PyTorch in the
 * golden tests. The library is compiled in ISO C mode, where GCC does not
 * contract a*b + c into an fma behind our back.
 *
 * Backward, as PyTorch's CPU kernels: sigmoid dy·(1 - y)·y; tanh
 * dy·fma(-y, y, 1) (PyTorch's AVX2 build fuses 1 - y·y); hard-swish 0 for
 * x < -3, dy·(x/3 + 0.5) for -3 <= x < 3, dy for x >= 3 (so the gradient
 * at -3 is -dy/2 and at 3 is dy). */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- SLEEF's float arithmetic, scalar ------------------------------------------- */

/* A float-float pair hi + lo (SLEEF's vfloat2). */
typedef struct {
    float hi, lo;
} ff;

static inline float pow2i(int q) { /* 2^q for -126 <= q <= 127 */
    uint32_t bits = (uint32_t)(q + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* d·2^q in two steps, as SLEEF's vldexp2 (no overflow in between) */
static inline float ldexp2(float d, int q) { return d * pow2i(q >> 1) * pow2i(q - (q >> 1)); }

static inline ff ff_add2_f(ff x, float y) { /* dfadd2_vf2_vf2_vf */
    float s = x.hi + y, v = s - x.hi;
    return (ff){s, ((x.hi - (s - v)) + (y - v)) + x.lo};
}
static inline ff ff_add2_ff(ff x, ff y) { /* dfadd2_vf2_vf2_vf2 */
    float s = x.hi + y.hi, v = s - x.hi;
    return (ff){s, ((x.hi - (s - v)) + (y.hi - v)) + (x.lo + y.lo)};
}
static inline ff ff_add_f_ff(float x, ff y) { /* dfadd_vf2_vf_vf2, |x| >= |y| */
    float s = x + y.hi;
    return (ff){s, ((x - s) + y.hi) + y.lo};
}
static inline ff ff_add_ff(ff x, ff y) { /* dfadd_vf2_vf2_vf2, |x| >= |y| */
    float s = x.hi + y.hi;
    return (ff){s, (((x.hi - s) + y.hi) + x.lo) + y.lo};
}
static inline ff ff_mul_f(ff x, float y) { /* dfmul_vf2_vf2_vf, with fma */
    float s = x.hi * y;
    return (ff){s, fmaf(x.lo, y, fmaf(x.hi, y, -s))};
}
static inline ff ff_mul_ff(ff x, ff y) { /* dfmul_vf2_vf2_vf2, with fma */
    float s = x.hi * y.hi;
    return (ff){s, fmaf(x.hi, y.lo, fmaf(x.lo, y.hi, fmaf(x.hi, y.hi, -s)))};
}
static inline ff ff_sqr(ff x) { /* dfsqu_vf2_vf2, with fma */
    float s = x.hi * x.hi;
    return (ff){s, fmaf(x.hi + x.hi, x.lo, fmaf(x.hi, x.hi, -s))};
}
static inline ff ff_rec(ff d) { /* dfrec_vf2_vf2, with fma */
    float t = 1.0f / d.hi;
    return (ff){t, t * fmaf(-d.lo, t, fmaf(-d.hi, t, 1.0f))};
}
static inline ff ff_div(ff n, ff d) { /* dfdiv_vf2_vf2_vf2, with fma */
    float t = 1.0f / d.hi, s = n.hi * t, u = fmaf(t, n.hi, -s);
    float v = fmaf(-d.lo, t, fmaf(-d.hi, t, 1.0f));
    return (ff){s, fmaf(s, v, fmaf(n.lo, t, u))};
}

/* ln 2 split for the reduction x - q·ln 2, and 1 / ln 2 */
#define SL_R_LN2 1.442695040888963407359924681001892137426645954152985934135449406931f
#define SL_L2U 0.693145751953125f
#define SL_L2L 1.428606765330187045e-06f

/* SLEEF's xexpf (1 ulp): q = rint(x / ln 2), a degree-6 polynomial of
 * s = x - q·ln 2, scaled by 2^q; 0 below -104, inf above 100. */
static inline float sleef_expf(float d) {
    if (isnan(d)) return d;
    /* q from d clamped (the results out there are replaced below), so that
     * the conversion to int stays defined */
    float qf = rintf((d < -110.0f ? -110.0f : d > 110.0f ? 110.0f : d) * SL_R_LN2);
    int q = (int)qf;
    float s = fmaf(qf, -SL_L2U, d);
    s = fmaf(qf, -SL_L2L, s);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, s, 0.00139304355252534151077271f);
    u = fmaf(u, s, 0.00833336077630519866943359f);
    u = fmaf(u, s, 0.0416664853692054748535156f);
    u = fmaf(u, s, 0.166666671633720397949219f);
    u = fmaf(u, s, 0.5f);
    u = 1.0f + fmaf(s * s, u, s);
    u = ldexp2(u, q);
    if (d < -104.0f) u = 0.0f;
    if (d > 100.0f) u = INFINITY;
    return u;
}

/* SLEEF's expk2f for d >= 0: exp(d) as a float-float pair */
static inline ff sleef_expk2f(float d) {
    float qf = rintf(d * SL_R_LN2);
    int q = (int)qf;
    ff s = ff_add2_f((ff){d, 0.0f}, qf * -SL_L2U);
    s = ff_add2_f(s, qf * -SL_L2L);
    float u = 0.1980960224e-3f;
    u = fmaf(u, s.hi, 0.1394256484e-2f);
    u = fmaf(u, s.hi, 0.8333456703e-2f);
    u = fmaf(u, s.hi, 0.4166637361e-1f);
    ff t = ff_add2_f(ff_mul_f(s, u), 0.166666659414234244790680580464e+0f);
    t = ff_add2_f(ff_mul_ff(s, t), 0.5f);
    t = ff_add2_ff(s, ff_mul_ff(ff_sqr(s), t));
    t = ff_add_f_ff(1.0f, t);
    return (ff){ldexp2(t.hi, q), ldexp2(t.lo, q)};
}

/* SLEEF's xtanhf (1 ulp): (e - 1/e) / (e + 1/e), e = exp(|x|), in
 * float-float; 1 beyond |x| > 8.664339742; the sign of x. */
static inline float sleef_tanhf(float x) {
    if (isnan(x)) return x;
    float a = fabsf(x);
    /* beyond 8.66 the result is 1: clamped, the reduction's int stays defined */
    ff d = sleef_expk2f(a < 9.0f ? a : 9.0f), e = ff_rec(d);
    d = ff_div(ff_add_ff(d, (ff){-e.hi, -e.lo}), ff_add_ff(d, e));
    float y = d.hi + d.lo;
    if (a > 8.664339742f || isnan(y)) y = 1.0f;
    return copysignf(y, x);
}

/* ---- the functions, one value each ------------------------------------------------ */

static inline float sigmoid1(float x) { return 1.0f / (sleef_expf(0.0f - x) + 1.0f); }
static inline float tanh1(float x) { return sleef_tanhf(x); }
static inline float hardswish1(float x) {
    float c = x + 3.0f; /* min(max(x + 3, 0), 6), a NaN kept as PyTorch keeps it */
    c = c < 0.0f ? 0.0f : c;
    c = c > 6.0f ? 6.0f : c;
    return x * c / 6.0f;
}

float qat_eval_sigmoid(float x) { return sigmoid1(x); }
float qat_eval_tanh(float x) { return tanh1(x); }
float qat_eval_hardswish(float x) { return hardswish1(x); }

/* ---- the ops -------------------------------------------------------------------------- */

/* The loops come in the copies of QAT__SIMD_FN (op_api.h); the AVX2 one
 * has FMA, so fmaf is one instruction there. fmaf is exact everywhere:
 * every copy gives the same bits. */
enum { ACT_SIGMOID, ACT_TANH, ACT_HARDSWISH };

QAT__SIMD_FN(static, act_forward, (kind, x, y, n), int kind, const float *restrict x, float *restrict y, int64_t n) {
    switch (kind) {
    case ACT_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = sigmoid1(x[i]); break;
    case ACT_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanh1(x[i]); break;
    default: for (int64_t i = 0; i < n; i++) y[i] = hardswish1(x[i]); break;
    }
}

/* The derivative times dy for one element: x the input, y the output. */
static inline float act_grad(int kind, float x, float y, float dy) {
    switch (kind) {
    case ACT_SIGMOID: return dy * (1.0f - y) * y;
    case ACT_TANH: return dy * fmaf(-y, y, 1.0f);
    default: return x < -3.0f ? 0.0f : x < 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    }
}

/* In place into dy's buffer when the input's gradient is new (dy is then
 * handed to it), else added. */
QAT__SIMD_FN(static, act_backward, (kind, x, y, gy, gx, n, add), int kind, const float *restrict x,
             const float *restrict y, const float *gy, float *gx, int64_t n, bool add) {
    if (add)
        for (int64_t i = 0; i < n; i++) gx[i] += act_grad(kind, x[i], y[i], gy[i]);
    else
        for (int64_t i = 0; i < n; i++) gx[i] = act_grad(kind, x[i], y[i], gy[i]);
}

static void act_bw(qat_ctx *ctx, qat_node *n) {
    qat_tensor *x = n->in[0], *y = n->out;
    int kind = (int)n->i[0];
    float *g = qat__grad_reuse(x, y);
    if (g) {
        act_backward_at(qat__simd_level(), kind, x->data, y->data, g, g, y->numel, false);
        return;
    }
    float *gx = qat__grad(ctx, x);
    if (gx) act_backward_at(qat__simd_level(), kind, x->data, y->data, y->grad, gx, y->numel, true);
}

static qat_tensor *activation(qat_ctx *ctx, const char *name, int kind, qat_tensor *x) {
    if (!qat__inputs_ok(ctx, name, 1, &x)) return NULL;
    if (!qat_tensor_is_contiguous(x)) {
        char s[64];
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "%s: input %s must be contiguous", name, qat_shape_str(x, s, sizeof s)),
               NULL;
    }
    qat_tensor *y = qat__new_out(ctx, x->rank, x->shape);
    if (!y) return NULL;
    act_forward_at(qat__simd_level(), kind, x->data, y->data, x->numel);
    qat_node *n = qat__record(ctx, name, act_bw, y, x, NULL, NULL);
    if (n) n->i[0] = kind;
    return y;
}

qat_tensor *qat_sigmoid(qat_ctx *ctx, qat_tensor *x) { return activation(ctx, "qat_sigmoid", ACT_SIGMOID, x); }
qat_tensor *qat_tanh(qat_ctx *ctx, qat_tensor *x) { return activation(ctx, "qat_tanh", ACT_TANH, x); }
qat_tensor *qat_hardswish(qat_ctx *ctx, qat_tensor *x) { return activation(ctx, "qat_hardswish", ACT_HARDSWISH, x); }
