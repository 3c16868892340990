/* Sub-channel weights on the way to the integer program: the accumulation
 * scale of each row (the quantized-reduction seed's accum_scale), chosen
 * by lowering, and the rule that derives every block's conversion
 * multiplier from the scales, shared by lowering and the file's reader.
 * docs/subchannel.md has the derivation and the proofs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "runtime/subchannel.h"

void qat__sc_derive(qat_qop *op, float s_in, int64_t o_begin, int64_t o_end) {
    const qat_qtype *q = &op->wq;
    int64_t b0 = q->block[0], J = q->nparams / q->pshape[0];
    for (int64_t o = o_begin; o < o_end; o += b0 - o % b0) { /* the first row of each group */
        double s_acc = op->bias_scale[o];
        for (int64_t p = o / b0 * J; p < (o / b0 + 1) * J; p++) {
            double M = (double)s_in * (double)q->scale[p] / s_acc;
            int sh = 0;
            if (qat_quantize_multiplier(M, &op->block_multiplier[p], &sh) != QAT_OK) op->block_multiplier[p] = 0;
            op->block_shift[p] = sh;
        }
    }
}

bool qat__sc_compact_derive(const qat_qop *op, float s_in, float s_out, float *bias_scale, int32_t *mult,
                            int32_t *shift) {
    const qat_qtype *q = &op->wq;
    for (int64_t o = 0; o < q->shape[0]; o++) {
        double bs = (double)s_in * (double)op->row_scale[o / q->block[0]]; /* exact: two float32 */
        int sh = 0;
        bias_scale[o] = (float)bs;
        if (qat_quantize_multiplier(bs / (double)s_out, &mult[o], &sh) != QAT_OK) return false;
        shift[o] = sh;
    }
    return true;
}

/* A positive normal float (a scale the program check accepts). */
static bool normal(float f) { return isnormal(f) && f > 0; }

/* Rows [o0, o1) at exponent G: their quantities, and whether they hold. */
static bool try_g(qat_qop *op, const qat_aparams *in, float s_out, const double *b, int64_t o0, int64_t o1, int G,
                  int64_t X, int64_t *work, bool sums_cached, char *why, size_t len) {
    const qat_qtype *q = &op->wq;
    int64_t J = q->nparams / q->pshape[0];
    float s_ref = 0;
    for (int64_t p = o0 / q->block[0] * J; p < (o0 / q->block[0] + 1) * J; p++) s_ref = fmaxf(s_ref, q->scale[p]);
    float s_acc = (float)ldexp((double)in->scale * (double)s_ref, -G);
    if (!normal(s_acc)) return snprintf(why, len, "no normal accumulation scale"), false;
    int32_t m_out;
    int sh_out;
    if (qat_quantize_multiplier((double)s_acc / (double)s_out, &m_out, &sh_out) != QAT_OK || m_out == 0)
        return snprintf(why, len, "the output multiplier s_acc / s_out underflows"), false;
    for (int64_t o = o0; o < o1; o++) {
        double qb = nearbyint(b[o] / (double)s_acc);
        if (!(fabs(qb) <= 2147483647.0)) return snprintf(why, len, "row %lld: the bias leaves int32", (long long)o), false;
        op->bias[o] = (int32_t)qb, op->bias_scale[o] = s_acc;
        op->multiplier[o] = m_out, op->shift[o] = sh_out;
    }
    qat__sc_derive(op, in->scale, o0, o1);
    for (int64_t o = o0; o < o1; o++) {
        if (!sums_cached) qat__sc_row_sums(op, o, work);
        if (!qat__sc_row_bounds(op, o, X, work, why, len)) return false;
    }
    return true;
}

bool qat__sc_accumulation(qat_qop *op, const qat_aparams *in, float s_out, const double *b, char *why, size_t len) {
    const qat_qtype *q = &op->wq;
    int64_t O = q->shape[0], b0 = q->block[0], J = q->nparams / q->pshape[0];
    int64_t X = qat__sc_input_bound(in);
    int64_t *work = malloc((size_t)J * sizeof *work);
    if (!work) return snprintf(why, len, "out of memory"), false;
    bool ok = true;
    for (int64_t o0 = 0; ok && o0 < O; o0 += b0) {
        int64_t o1 = o0 + b0 < O ? o0 + b0 : O;
        bool cached = o1 - o0 == 1; /* one row: its sums do not change with G */
        if (cached) qat__sc_row_sums(op, o0, work);
        ok = false;
        for (int G = QAT__SC_G_MAX; !ok && G >= QAT__SC_G_MIN; G--)
            ok = try_g(op, in, s_out, b, o0, o1, G, X, work, cached, why, len);
    }
    free(work);
    return ok;
}
