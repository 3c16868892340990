/* The per-row loops of the two BatchNorm ops (a row: one sample's values
 * of one channel, H·W floats in a row).
 *
 * Why a file of their own: the statistics are sums in double, and a sum
 * written as one accumulator is a chain of dependent adds the compiler
 * may not reorder (ISO C keeps floating-point order), so it ran at one
 * add per 4 cycles and the BatchNorms took a fifth of a ResNet's training
 * step. Here every sum has 8 independent accumulators, eight lanes of
 * doubles (v8d: two 4-double vectors), and the row's total is their sum. The order of the additions
 * is fixed (lane j takes the elements j, j + 8, ...; the tail has its own
 * accumulator; lanes are added in order), so results are the same on
 * every CPU and in every clone. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* One channel's statistics: in training (acc = Σz, Σz² over m values)
 * the batch's mean and biased variance, and the running statistics moved
 * by momentum toward them (with the unbiased variance, as PyTorch); in
 * evaluation (acc NULL) the running ones. Then mu and 1/sqrt(var + eps). */
void qat__bn_channel_stats(const double *acc, double m, float momentum, float eps, float *running_mean,
                           float *running_var, float *mu, float *invstd) {
    float mean_f, var;
    if (acc) {
        double mean = acc[0] / m, sq = acc[1] - acc[0] * mean; /* Σ(z - mean)² */
        if (sq < 0) sq = 0;
        mean_f = (float)mean;
        var = (float)(sq / m);
        *running_mean = (1.0f - momentum) * *running_mean + momentum * mean_f;
        *running_var = (1.0f - momentum) * *running_var + momentum * (float)(sq / (m - 1));
    } else {
        mean_f = *running_mean;
        var = *running_var;
    }
    *invstd = 1.0f / sqrtf(var + eps);
    *mu = mean_f;
}

/* Eight floats and eight doubles as GCC/Clang vector types: the compiler
 * maps them onto whatever registers the clone targets (one zmm, two ymm,
 * four xmm). Written out because the auto-vectoriser built the lanes of
 * plain arrays one element at a time. ISO C mode keeps contraction off,
 * so v·a + b is a multiply then an add, as the scalar tail computes it. */
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
/* The eight double lanes as two halves (lanes 0-3, 4-7): as one 64-byte
 * vector, GCC's AVX2 copy kept the accumulators in memory and moved them
 * through general registers every step (7.4 % of a ResNet-8 step at the
 * avx2 level for the moments alone). Each lane sums the same elements in
 * the same order either way. */
typedef struct {
    v4d lo, hi;
} v8d;

/* (Macros, not functions: a vector argument or result of a function
 * built for the baseline ABI is what GCC warns about.) */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v))
#define WIDEN(v)                                                                 \
    ((v8d){__builtin_convertvector(__builtin_shufflevector((v), (v), 0, 1, 2, 3), v4d), \
           __builtin_convertvector(__builtin_shufflevector((v), (v), 4, 5, 6, 7), v4d)})
#define ADD8(acc, w) ((acc).lo += (w).lo, (acc).hi += (w).hi)
#define ADD_MUL8(acc, a, b) ((acc).lo += (a).lo * (b).lo, (acc).hi += (a).hi * (b).hi)

static inline double total(const v8d *v) {
    double t = 0;
    for (int j = 0; j < 4; j++) t += v->lo[j];
    for (int j = 0; j < 4; j++) t += v->hi[j];
    return t;
}

/* z = x·sc + sh (the float operations of a multiply op then an add op)
 * into z when z is not NULL; acc[0] += Σz, acc[1] += Σz². z² of a float is
 * exact in double, and the variance E[z²] - E[z]² is formed in double,
 * which keeps float's precision unless |mean| exceeds the standard
 * deviation by ~10^4 (no activation of a trained network comes near). */
QAT__SIMD_FN(, qat__bn_moments_row, (x, z, n, sc, sh, acc), const float *x, float *z, int64_t n, float sc, float sh,
             double acc[2]) {
    v8d s = {{0}, {0}}, q = {{0}, {0}};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v;
        LOAD8(v, x + i);
        v = v * sc + sh;
        if (z) STORE8(z + i, v);
        v8d w = WIDEN(v);
        ADD8(s, w);
        ADD_MUL8(q, w, w);
    }
    double ts = 0, tq = 0; /* the tail */
    for (; i < n; i++) {
        float v = x[i] * sc + sh;
        if (z) z[i] = v;
        ts += v;
        tq += (double)v * v;
    }
    acc[0] += total(&s) + ts;
    acc[1] += total(&q) + tq;
}

/* y = g·((z - mu)·is) + bt, the BatchNorm's output from z (y may be z). */
QAT__SIMD_FN(, qat__bn_normalize_row, (z, y, n, mu, is, g, bt), const float *z, float *y, int64_t n, float mu, float is,
             float g, float bt) {
    for (int64_t i = 0; i < n; i++) y[i] = g * ((z[i] - mu) * is) + bt;
}

/* The sums backward needs, with z = x·sc + sh and xhat = (z - mu)·is
 * computed again by the forward's float operations (the same bits):
 * acc[0] += Σdy, acc[1] += Σdy·xhat. The folded BatchNorm's scale and
 * shift gradients come from these and the forward's Σz, Σz² in closed
 * form (ops_batchnorm.c), so the pass that writes dx has no sum. */
QAT__SIMD_FN(, qat__bn_grad_sums_row, (x, dy, n, sc, sh, mu, is, acc), const float *x, const float *dy, int64_t n,
             float sc, float sh, float mu, float is, double acc[2]) {
    v8d l0 = {{0}, {0}}, l1 = l0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f xv, dv;
        LOAD8(xv, x + i);
        LOAD8(dv, dy + i);
        v8f xhv = ((xv * sc + sh) - mu) * is;
        v8d d = WIDEN(dv), xh = WIDEN(xhv);
        ADD8(l0, d);
        ADD_MUL8(l1, d, xh);
    }
    double t[2] = {0}; /* the tail */
    for (; i < n; i++) {
        float xv = x[i], d = dy[i], xh = ((xv * sc + sh) - mu) * is;
        t[0] += d;
        t[1] += (double)d * xh;
    }
    acc[0] += total(&l0) + t[0];
    acc[1] += total(&l1) + t[1];
}

/* dx of one row: dz = k·(dy - a - xhat·b) in training (a = mean dy,
 * b = mean dy·xhat), k·dy with frozen statistics; dx = dz·sc, stored
 * (store) or added to what gx holds. */
QAT__SIMD_FN(, qat__bn_grad_x_row, (x, dy, gx, n, sc, sh, mu, is, k, a, b, training, store), const float *x,
             const float *dy, float *gx, int64_t n, float sc, float sh, float mu, float is, float k, float a, float b,
             bool training, bool store) {
    if (training) {
        if (store)
            for (int64_t i = 0; i < n; i++) gx[i] = k * (dy[i] - a - (((x[i] * sc + sh) - mu) * is) * b) * sc;
        else
            for (int64_t i = 0; i < n; i++) gx[i] += k * (dy[i] - a - (((x[i] * sc + sh) - mu) * is) * b) * sc;
    } else {
        if (store)
            for (int64_t i = 0; i < n; i++) gx[i] = k * dy[i] * sc;
        else
            for (int64_t i = 0; i < n; i++) gx[i] += k * dy[i] * sc;
    }
}
