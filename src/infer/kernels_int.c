/* Integer kernels (kernels.h). The products are an integer GEMM written
 * here, not cblas_sgemm: BLAS has no integer GEMM, float32 cannot hold
 * every int32 sum exactly (2^24), and this engine exists for devices with
 * no float unit. The dot product is laid out so compilers turn it into
 * pmaddwd (16x16 -> 32-bit multiply-add); on x86-64 an AVX2 clone is
 * picked at load time when the CPU has it. */
#include <string.h>

#include "kernels.h"
#include "requant.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define QAT_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define QAT_MULTIVERSION
#endif

void qat__im2col_s16(const int16_t *x, int C, int H, int W, int k, int stride, int pad, int32_t zp,
                     int OH, int OW, int Kp, int16_t *colT) {
    int K = C * k * k;
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            int16_t *row = colT + (int64_t)(oy * OW + ox) * Kp;
            int j = 0;
            for (int c = 0; c < C; c++) {
                const int16_t *xc = x + (int64_t)c * H * W;
                for (int ky = 0; ky < k; ky++) {
                    int iy = oy * stride + ky - pad;
                    if (iy < 0 || iy >= H) {
                        memset(row + j, 0, (size_t)k * sizeof *row);
                        j += k;
                        continue;
                    }
                    for (int kx = 0; kx < k; kx++, j++) {
                        int ix = ox * stride + kx - pad;
                        row[j] = ix < 0 || ix >= W ? 0 : (int16_t)(xc[iy * W + ix] - zp);
                    }
                }
            }
            memset(row + K, 0, (size_t)(Kp - K) * sizeof *row);
        }
}

QAT_MULTIVERSION
void qat__gemm_requant_s16(const int16_t *w, const int16_t *col, int O, int P, int Kp,
                           const int32_t *bias, const int32_t *m0, const int32_t *shift, int32_t zp,
                           int32_t lo, int32_t hi, int16_t *out, int64_t so, int64_t sp) {
    /* Four outputs per pass over a column: each column row is loaded once
     * for four dot products, which stay in vector registers. */
    for (int p = 0; p < P; p++) {
        const int16_t *c = col + (int64_t)p * Kp;
        int o = 0;
        for (; o + 4 <= O; o += 4) {
            const int16_t *w0 = w + (int64_t)o * Kp, *w1 = w0 + Kp, *w2 = w1 + Kp, *w3 = w2 + Kp;
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (int k = 0; k < Kp; k++) {
                int32_t v = c[k];
                a0 += w0[k] * v, a1 += w1[k] * v, a2 += w2[k] * v, a3 += w3[k] * v;
            }
            int32_t acc[4] = {a0, a1, a2, a3};
            for (int j = 0; j < 4; j++)
                out[(o + j) * so + p * sp] =
                    (int16_t)qat__requant(acc[j] + bias[o + j], m0[o + j], shift[o + j], zp, lo, hi);
        }
        for (; o < O; o++) {
            const int16_t *wo = w + (int64_t)o * Kp;
            int32_t a = 0;
            for (int k = 0; k < Kp; k++) a += wo[k] * (int32_t)c[k];
            out[o * so + p * sp] = (int16_t)qat__requant(a + bias[o], m0[o], shift[o], zp, lo, hi);
        }
    }
}

void qat__maxpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int16_t *y) {
    int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
    for (int c = 0; c < C; c++) {
        const int16_t *xc = x + (int64_t)c * H * W;
        int16_t *yc = y + (int64_t)c * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const int16_t *win = xc + oy * s * W + ox * s;
                int16_t m = win[0];
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) m = win[ky * W + kx] > m ? win[ky * W + kx] : m;
                yc[oy * OW + ox] = m;
            }
    }
}

void qat__avgpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int32_t zp_in, int32_t m0,
                      int shift, int32_t zp_out, int32_t lo, int32_t hi, int16_t *y) {
    int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
    for (int c = 0; c < C; c++) {
        const int16_t *xc = x + (int64_t)c * H * W;
        int16_t *yc = y + (int64_t)c * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const int16_t *win = xc + oy * s * W + ox * s;
                int32_t sum = 0;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) sum += win[ky * W + kx] - zp_in;
                yc[oy * OW + ox] = (int16_t)qat__requant(sum, m0, shift, zp_out, lo, hi);
            }
    }
}
