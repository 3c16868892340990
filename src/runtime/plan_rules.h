/* Which ops may write over their input, and which convolutions the small
 * plan fuses with the max pool after them: the rules the planner (plan.c)
 * and the C generator (src/codegen/) both follow, in one place. It reads
 * the program alone (qat/runtime.h).
 * Shared with: src/codegen
 */
#ifndef QAT_RUNTIME_PLAN_RULES_H
#define QAT_RUNTIME_PLAN_RULES_H

#include <stdbool.h>

#include "qat/runtime.h"

/* A max pool whose windows do not overlap (kernel <= stride) and which
 * has no padding: output (c, oy, ox), at c·OH·OW + oy·OW + ox, lies below
 * every input a later window reads (c·H·W + oy·sh·W + (ox + 1)·sw and
 * beyond), and each input is read by one window only; the kernels write
 * an output after reading its window (qk_maxpool), or a channel's outputs
 * after reading the whole channel (the AVX2 2x2 kernel): both may write
 * over their input. */
static inline bool qat__pool_disjoint(const qat_qop *op) {
    return op->kind == QAT_QOP_MAXPOOL2D && op->kh <= op->stride_h && op->kw <= op->stride_w && !op->pad_h &&
           !op->pad_w;
}

/* Weights of one scale per channel or tensor (not sub-channel): the
 * generated C's per-channel calls index them (packed ones unpacked a
 * channel's row at a time). */
static inline bool qat__channel_weights(const qat_qop *op) { return !qat_qop_subchannel(op); }

/* A convolution the small plan writes over its input (the generated C
 * computes into a scratch and copies back): depthwise (one channel in,
 * one out, per group) whose output map is no larger than its input's,
 * computed a channel at a time, each channel's output written over
 * channels already read; or pointwise (1x1, stride 1, no padding, one
 * group), computed a run of positions at a time for every output channel,
 * each written over positions already read (channels past the input's
 * land past its bytes). */
static inline bool qat__conv_over_input(const qat_qmodel *q, const qat_qop *op) {
    if (op->kind != QAT_QOP_CONV2D || !qat__channel_weights(op)) return false;
    const qat_qtensor *in = &q->tensors[op->inputs[0]], *out = &q->tensors[op->output];
    int64_t C = in->shape[0], O = out->shape[0];
    bool dw = op->groups == C && O == C && C > 1 && out->shape[1] * out->shape[2] <= in->shape[1] * in->shape[2];
    bool pw = op->groups == 1 && op->kh == 1 && op->kw == 1 && op->stride_h == 1 && op->stride_w == 1 && !op->pad_h &&
              !op->pad_w && C >= 4 && in->shape[1] * in->shape[2] >= 2; /* qk_conv_pw's */
    return dw || pw;
}

/* The max pool the small plan fuses convolution i with: ops[i + 1], when
 * it is a max pool of disjoint windows that alone reads op i's output,
 * which is not the model's output (the generated C then computes one
 * output channel's map at a time into a scratch and pools it: the
 * convolution's output is never whole in memory). -1 otherwise. */
static inline int qat__fused_pool(const qat_qmodel *q, int i) {
    const qat_qop *op = &q->ops[i];
    if (op->kind != QAT_QOP_CONV2D || !qat__channel_weights(op) || i + 1 >= q->n_ops || op->output == q->output) return -1;
    const qat_qop *next = &q->ops[i + 1];
    if (!qat__pool_disjoint(next) || next->inputs[0] != op->output) return -1;
    for (int j = 0; j < q->n_ops; j++)
        for (int k = 0; k < q->ops[j].n_inputs; k++)
            if (j != i + 1 && q->ops[j].inputs[k] == op->output) return -1;
    return i + 1;
}

#endif
