/* Private helpers of lowering and the quantized file's reader. */
#ifndef QAT_EXPORT_INTERNAL_H
#define QAT_EXPORT_INTERNAL_H

#include <stddef.h>

#include "qat/export.h"

/* The input conversions of a sub-channel op by the file's rule
 * (docs/subchannel.md): for each weight block p of the rows [o_begin,
 * o_end) (whole groups of rows that share their weight scales), with o
 * the first row of p's group,
 *     M[p] = ((double)s_in · (double)s_w[p]) / (double)bias_scale[o]
 * into block_multiplier[p], block_shift[p] by QuantizeMultiplier. Every
 * step is one IEEE double operation, so any reader derives the same
 * integers. op's arrays must exist. */
void qat__sc_derive(qat_qop *op, float s_in, int64_t o_begin, int64_t o_end);

/* Lowering's accumulation scales (docs/subchannel.md): for each group of
 * rows sharing weight scales, the largest G in [QAT__SC_G_MIN,
 * QAT__SC_G_MAX] with s_acc = s_in · max_p s_w[p] · 2^-G (rounded to
 * float) such that the bias b[o] / s_acc rounds into int32, the output
 * multiplier s_acc / s_out is representable (not 0), and the bounds of
 * qat__sc_row_bounds hold for inputs of quantization `in`. Fills
 * bias_scale, bias, multiplier/shift [O] and the block multipliers (all
 * allocated by the caller). false with the reason in why. */
#define QAT__SC_G_MAX 29  /* a conversion multiplier stays below 2^30: shift <= 30 */
#define QAT__SC_G_MIN (-31)
/* Compact block scales (docs/subchannel.md): what the file does not store,
 * derived from the row scales as the reader derives it: bias_scale[o] =
 * (float)(s_in · s_r) and (multiplier[o], shift[o]) = QuantizeMultiplier(
 * (s_in · s_r) / s_out), both in double, s_r the row scale of o's
 * parameter row. false if a multiplier is not finite. */
bool qat__sc_compact_derive(const qat_qop *op, float s_in, float s_out, float *bias_scale, int32_t *mult,
                            int32_t *shift);
bool qat__sc_accumulation(qat_qop *op, const qat_aparams *in, float s_out, const double *b, char *why, size_t len);

/* Packed weights of the quantized file: 2 or 4 bits per value for
 * storage types of at most that many bits, 0 (one int8 per value) above. */
static inline int qat__packed_bits(int bits) { return bits <= 2 ? 2 : bits <= 4 ? 4 : 0; }

#endif
