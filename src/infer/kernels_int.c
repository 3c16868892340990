/* Integer kernels (kernels.h): im2col, pools, and the portable GEMM. The
 * products are an integer GEMM written here, not cblas_sgemm: BLAS has no
 * integer GEMM, float32 cannot hold every int32 sum exactly (2^24), and
 * this engine exists for devices with no float unit. The AVX2 kernel is
 * in kernels_avx2.c. */
#include <string.h>

#include "fakequant/internal.h"
#include "kernels.h"
#include "core/requant.h"

void qat__pad_s16(const int16_t *restrict x, int C, int H, int W, int pad, int32_t zp, int16_t *restrict xp) {
    int Hp = H + 2 * pad, Wp = W + 2 * pad;
    memset(xp, 0, (size_t)C * (size_t)(Hp * Wp) * sizeof *xp);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++) {
            int16_t *restrict d = xp + ((int64_t)c * Hp + y + pad) * Wp + pad;
            const int16_t *restrict s = x + ((int64_t)c * H + y) * W;
            for (int i = 0; i < W; i++) d[i] = (int16_t)(s[i] - zp);
        }
}

void qat__im2col_s16(const int16_t *xp, int C, int Hp, int Wp, int k, int stride, int OH, int OW, int Pp,
                     int16_t *col) {
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                int16_t *row = col + (int64_t)((c * k + ky) * k + kx) * Pp;
                const int16_t *src = xp + ((int64_t)c * Hp + ky) * Wp + kx;
                int64_t step = (int64_t)stride * Wp;
                if (stride == 1 && OW <= QAT_IM2COL_CHUNK) /* one chunk per run (LeNet's conv2) */
                    for (int oy = 0; oy < OH; oy++) memcpy(row + oy * OW, src + oy * step, QAT_IM2COL_CHUNK * sizeof *row);
                else if (stride == 1) /* whole chunks: a chunk may run past its run */
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox += QAT_IM2COL_CHUNK)
                            memcpy(row + oy * OW + ox, src + oy * step + ox, QAT_IM2COL_CHUNK * sizeof *row);
                else
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) row[oy * OW + ox] = src[oy * step + ox * stride];
            }
}

void qat__gemm_requant_s16_ref(const qat__gemm_args *a) {
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
                    (int16_t)qat__requant(acc[j] + a->bias[o], a->m0[o], a->shift[o], a->zp, a->lo, a->hi);
        }
    }
}

void qat__quantize_s16(const float *restrict x, int64_t n, float inv, int32_t zp, int32_t qmin, int32_t qmax,
                       int16_t *restrict q) {
    /* the fake quantization's rounding, branch-free; NaN becomes zp (real 0),
     * as in qat__quant1 */
    float lo = (float)(qmin - zp), hi = (float)(qmax - zp);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * inv;
        q[i] = (int16_t)((int32_t)qat__rint_clamped(v == v ? v : 0.0f, lo, hi) + zp);
    }
}

/* 2x2 windows, stride 2 (LeNet's): two input rows give one output row. */
static void maxpool2_row(int16_t *restrict y, const int16_t *restrict a, const int16_t *restrict b, int OW) {
    for (int ox = 0; ox < OW; ox++) {
        int16_t m0 = a[2 * ox] > a[2 * ox + 1] ? a[2 * ox] : a[2 * ox + 1];
        int16_t m1 = b[2 * ox] > b[2 * ox + 1] ? b[2 * ox] : b[2 * ox + 1];
        y[ox] = m0 > m1 ? m0 : m1;
    }
}

void qat__maxpool_s16(const int16_t *x, int C, int H, int W, int k, int s, int16_t *y) {
    int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
    for (int c = 0; c < C; c++) {
        const int16_t *xc = x + (int64_t)c * H * W;
        int16_t *yc = y + (int64_t)c * OH * OW;
        if (k == 2 && s == 2) {
            for (int oy = 0; oy < OH; oy++) maxpool2_row(yc + oy * OW, xc + 2 * oy * W, xc + (2 * oy + 1) * W, OW);
            continue;
        }
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
