/* The per-row loops of the two BatchNorm ops (a row: one sample's values
 * of one channel, H·W floats in a row).
 *
 * Why a file of their own: the statistics are sums in double, and a sum
 * written as one accumulator is a chain of dependent adds the compiler
 * may not reorder (ISO C keeps floating-point order), so it ran at one
 * add per 4 cycles and the BatchNorms took a fifth of a ResNet's training
 * step. Here every sum has QAT__BN_LANES independent accumulators, which
 * the vectoriser turns into one register of doubles, and the row's total
 * is their sum. The order of the additions is fixed (lane j takes the
 * elements j, j + LANES, ...; the tail goes to lane 0; lanes are added in
 * order), so results are deterministic on every CPU and in every clone. */
#include "internal.h"

#define LANES QAT__BN_LANES

static double lanes_total(const double *l) {
    double t = 0;
    for (int j = 0; j < LANES; j++) t += l[j];
    return t;
}

/* z = x·sc + sh (the float operations of a multiply op then an add op)
 * into z when z is not NULL; acc[0] += Σz, acc[1] += Σz². z² of a float is
 * exact in double, and the variance E[z²] - E[z]² is formed in double,
 * which keeps float's precision unless |mean| exceeds the standard
 * deviation by ~10^4 (no activation of a trained network comes near). */
QAT__SIMD_CLONES
void qat__bn_moments_row(const float *x, float *z, int64_t n, float sc, float sh, double acc[2]) {
    double s[LANES] = {0}, q[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float v = x[i + j] * sc + sh;
            if (z) z[i + j] = v;
            s[j] += v;
            q[j] += (double)v * v;
        }
    for (; i < n; i++) {
        float v = x[i] * sc + sh;
        if (z) z[i] = v;
        s[0] += v;
        q[0] += (double)v * v;
    }
    acc[0] += lanes_total(s);
    acc[1] += lanes_total(q);
}

/* y = g·((z - mu)·is) + bt, the BatchNorm's output from z (y may be z). */
QAT__SIMD_CLONES
void qat__bn_normalize_row(const float *z, float *y, int64_t n, float mu, float is, float g, float bt) {
    for (int64_t i = 0; i < n; i++) y[i] = g * ((z[i] - mu) * is) + bt;
}

/* The sums backward needs, with z = x·sc + sh and xhat = (z - mu)·is
 * computed again by the forward's float operations (the same bits):
 * acc[0] += Σdy, acc[1] += Σdy·xhat, acc[2] += Σxhat, acc[3] += Σdy·x,
 * acc[4] += Σx, acc[5] += Σxhat·x. The last four give the gradients of
 * scale and shift in closed form, so the pass that writes dx has no sum. */
QAT__SIMD_CLONES
void qat__bn_grad_sums_row(const float *x, const float *dy, int64_t n, float sc, float sh, float mu, float is,
                           double acc[6]) {
    double l[6][LANES] = {{0}};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float xv = x[i + j], d = dy[i + j], xh = ((xv * sc + sh) - mu) * is;
            l[0][j] += d;
            l[1][j] += (double)d * xh;
            l[2][j] += xh;
            l[3][j] += (double)d * xv;
            l[4][j] += xv;
            l[5][j] += (double)xh * xv;
        }
    for (; i < n; i++) {
        float xv = x[i], d = dy[i], xh = ((xv * sc + sh) - mu) * is;
        l[0][0] += d;
        l[1][0] += (double)d * xh;
        l[2][0] += xh;
        l[3][0] += (double)d * xv;
        l[4][0] += xv;
        l[5][0] += (double)xh * xv;
    }
    for (int k = 0; k < 6; k++) acc[k] += lanes_total(l[k]);
}

/* dx of one row: dz = k·(dy - a - xhat·b) in training (a = mean dy,
 * b = mean dy·xhat), k·dy with frozen statistics; dx = dz·sc, stored
 * (store) or added to what gx holds. */
QAT__SIMD_CLONES
void qat__bn_grad_x_row(const float *x, const float *dy, float *gx, int64_t n, float sc, float sh, float mu, float is,
                        float k, float a, float b, bool training, bool store) {
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
