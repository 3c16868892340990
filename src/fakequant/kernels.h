/* The fake quantizer's element kernels for the modules built on it: the
 * rounding and the quantization of one float (lowering's tables and the
 * float engine's input quantization use the very same), the fused
 * quantize-over of the QAT forward, and the pooled range calibration.
 * Shared with: src/export src/infer src/layers
 * Prefix qat__. */
#ifndef QAT_FAKEQUANT_KERNELS_H
#define QAT_FAKEQUANT_KERNELS_H

#include <math.h>

#include "qat/fakequant.h"

/* Elements that share one (scale, zero point) pair come in contiguous
 * runs: the block of the last split dimension times every whole dimension
 * after it (shorter where a ragged last block ends). The length of the run
 * that starts at flat index s (s must start a run: 0, then each s + len). */
int64_t qat__qtype_run_len(const qat_qtype *q, int64_t s);

/* Round half to even, as nearbyintf under the default rounding mode, but
 * inline and vectorisable: adding and subtracting 2^23 (signed like v)
 * leaves no fraction bits, and the addition rounds ties to even. Values
 * of magnitude >= 2^23 are already integers. */
static inline float qat__rint(float v) {
    float t = copysignf(8388608.0f, v);
    return fabsf(v) < 8388608.0f ? (v + t) - t : v;
}

/* One element: clamp(round_half_even(x * inv) + zp, qmin, qmax), computed so
 * that no out-of-range float is ever converted to an integer. *in_range
 * (if given) is the clipped-STE mask. NaN quantizes to zp and is out of range. */
static inline int32_t qat__quant1(float x, float inv, int32_t zp, int32_t qmin, int32_t qmax,
                                  bool *in_range) {
    float r = qat__rint(x * inv);
    int32_t q;
    bool ok = true;
    if (r < (float)(qmin - zp)) q = qmin, ok = false;
    else if (r > (float)(qmax - zp)) q = qmax, ok = false;
    else if (r != r) q = zp, ok = false;
    else q = (int32_t)r + zp;
    if (in_range) *in_range = ok;
    return q;
}

/* qat__minmax (internal.h) over ctx's pool (the same range for any number of threads). */
void qat__minmax_par(qat_ctx *ctx, const float *x, int64_t n, float *lo, float *hi);
/* qat_qtype_calibrate over ctx's pool (the same parameters). */
void qat__qtype_calibrate_par(qat_ctx *ctx, qat_qtype *q, const float *x, bool symmetric);

/* qat_fake_quant writing over x when it may: x is a step tensor, and (if
 * the step is recorded) its producer's backward does not read it (the
 * node's out_free). The caller guarantees that nothing else reads x. The
 * same values and gradients as qat_fake_quant, one tensor less. With
 * clo < chi it quantizes clamp(x, clo, chi) — a ReLU (0, +inf) or ReLU6
 * (0, 6) fused in, the same values and gradients as qat_relu/qat_clamp
 * then qat_fake_quant, two tensors less; where x may not be written over,
 * it runs those two ops. clo == chi: no clamp. */
qat_tensor *qat__fake_quant_over(qat_ctx *ctx, qat_tensor *x, const qat_qtype *q, qat_ste ste, float clo, float chi);

#endif
