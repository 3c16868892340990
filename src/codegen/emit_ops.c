/* The emitters of every op but the convolution: linear (its loop written
 * with the op's shapes as literals), and max and average pooling, global
 * average pooling, add, mul, concat, lookup tables and ReLU, each one call
 * to its kernel in src/runtime/qk.h, the runtime's own portable kernels. */
#include <string.h>

#include "internal.h"

static const char *act_of(const qat_qop *op) { return qat_act_kind_str(op->act); }

void qat__cg_begin(qat__cg *g, int i, const char *detail) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    char text[QAT__CG_TEXT_LEN];
    qat__cg_printf(g, "\n/* op %d: %s %s, ", i, qat_qop_kind_str(op->kind), qat__cg_text(op->name, text));
    for (int r = 0; r < in->rank; r++) qat__cg_printf(g, "%s%lld", r ? "x" : "[", (long long)in->shape[r]);
    qat__cg_printf(g, "]%s -> ", op->n_inputs > 1 ? " (and more)" : "");
    for (int r = 0; r < out->rank; r++) qat__cg_printf(g, "%s%lld", r ? "x" : "[", (long long)out->shape[r]);
    qat__cg_printf(g, "]%s%s */\nstatic Q_NOINLINE void op%d(", detail[0] ? ", " : "", detail, i);
    for (int j = 0; j < op->n_inputs; j++) qat__cg_printf(g, "const int8_t *x%d, ", j);
    qat__cg_printf(g, "int8_t *y) {\n");
}

int qat__cg_block(int n) { return n % 4 == 0 ? 4 : n % 3 == 0 ? 3 : n % 2 == 0 ? 2 : 1; }

static int32_t zp_of(const qat__cg *g, int t) { return g->q->tensors[t].q.zero_point; }

/* The packed pair (-zp, -zp) that SXTAB16 adds to two unpacked bytes. */
static int32_t neg_zp_pair(int32_t zp) {
    uint32_t h = (uint32_t)(uint16_t)(int16_t)-zp;
    uint32_t v = h | (h << 16);
    return v > INT32_MAX ? -(int32_t)(~v) - 1 : (int32_t)v;
}

/* y[o] = requant(b[o] + Σ_k w[o][k]·(x[k] - zp)). With the DSP extension,
 * four inputs at a time: one LDR and two SXTAB16 give the pairs
 * (x0 - zp, x2 - zp) and (x1 - zp, x3 - zp); the weights unpack the same
 * way (SXTB16), so the pairs match without reordering; SMLAD adds both
 * products. The int32 sums are exact in any order: |x - zp| <= 255,
 * |w| <= 128, K·255·128 + |b| < 2^31 (the runtime's plan checks
 * K·255·255 + |b|), so the DSP and portable paths give the same bits. */
void qat__cg_linear(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    int O = (int)op->wq.shape[0], K = (int)op->wq.shape[1], B = qat__cg_block(O);
    int32_t zp = zp_of(g, op->inputs[0]), zpo = zp_of(g, op->output);
    char id[32], detail[64];
    snprintf(id, sizeof id, "op%d_w", i);
    qat__cg_array_i8(g, id, w, (int64_t)O * K);
    qat__cg_channel_params(g, i);
    snprintf(detail, sizeof detail, "activation %s", act_of(op));
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    int o, k;\n    for (o = 0; o < %d; o += %d) {\n        const int8_t *w = op%d_w + o * %d;\n",
                   O, B, i, K);
    for (int j = 0; j < B; j++) qat__cg_printf(g, "        int32_t acc%d = op%d_b[o + %d];\n", j, i, j);
    qat__cg_printf(g, "#if Q_DSP\n        for (k = 0; k + 4 <= %d; k += 4) {\n"
                   "            uint32_t xv = q_ld32(x0 + k), wv;\n"
                   "            int32_t xa = __sxtab16(%ld, (int32_t)xv), xb = q_sxtab16_ror8(%ld, xv);\n",
                   K, (long)neg_zp_pair(zp), (long)neg_zp_pair(zp));
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "            wv = q_ld32(w + %d + k);\n"
                       "            acc%d = __smlad(__sxtb16((int32_t)wv), xa, acc%d);\n"
                       "            acc%d = __smlad(q_sxtb16_ror8(wv), xb, acc%d);\n", j * K, j, j, j, j);
    qat__cg_printf(g, "        }\n#else\n        k = 0;\n#endif\n        for (; k < %d; k++) {\n"
                   "            int32_t xv = x0[k] - (%d);\n", K, zp);
    for (int j = 0; j < B; j++) qat__cg_printf(g, "            acc%d += w[%d + k] * xv;\n", j, j * K);
    qat__cg_printf(g, "        }\n");
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "        y[o + %d] = q_out(q_requant(acc%d, op%d_m[o + %d], op%d_s[o + %d]) + (%d), %d, %d);\n", j, j, i,
                       j, i, j, zpo, op->act_min, op->act_max);
    qat__cg_printf(g, "    }\n}\n");
}

/* The ops below are one call each to a kernel of src/runtime/qk.h (the
 * runtime's portable level), with the op's shapes and integers as
 * literals: the kernel is inlined and specialised by them. */

/* Max and average pooling over [C, H, W]: qk_maxpool, qk_avgpool. */
void qat__cg_pool(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2], OH = (int)out->shape[1],
        OW = (int)out->shape[2];
    char detail[96];
    snprintf(detail, sizeof detail, "%dx%d window, stride %dx%d, padding %dx%d", op->kh, op->kw, op->stride_h,
             op->stride_w, op->pad_h, op->pad_w);
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    qk_%s(x0, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, ",
                   op->kind == QAT_QOP_AVGPOOL2D ? "avgpool" : "maxpool", C, H, W, op->kh, op->kw, op->stride_h,
                   op->stride_w, op->pad_h, op->pad_w, OH, OW);
    if (op->kind == QAT_QOP_AVGPOOL2D)
        qat__cg_printf(g, "%d, %ld, %ld, %d, %d, %d, ", zp_of(g, op->inputs[0]), (long)op->multiplier[0],
                       (long)op->shift[0], zp_of(g, op->output), op->act_min, op->act_max);
    qat__cg_printf(g, "y);\n}\n");
}

/* qk_global_avgpool: the plan refuses H·W·255 > INT32_MAX. */
void qat__cg_global_avgpool(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]];
    int C = (int)in->shape[0], HW = (int)(in->shape[1] * in->shape[2]);
    qat__cg_begin(g, i, "");
    qat__cg_printf(g, "    qk_global_avgpool(x0, %d, %d, %d, %ld, %ld, %d, %d, %d, y);\n}\n", C, HW,
                   zp_of(g, op->inputs[0]), (long)op->multiplier[0], (long)op->shift[0], zp_of(g, op->output),
                   op->act_min, op->act_max);
}

/* TFLite's ADD: qk_add. */
void qat__cg_add(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    int64_t n = qat_qtensor_numel(&g->q->tensors[op->output]);
    qat__cg_begin(g, i, act_of(op));
    qat__cg_printf(g, "    qk_add(x0, x1, %lld, %d, %d, %d, %ld, %ld, %ld, %ld, %ld, %ld, %d, %d, %d, y);\n}\n",
                   (long long)n, zp_of(g, op->inputs[0]), zp_of(g, op->inputs[1]), op->left_shift,
                   (long)op->multiplier[0], (long)op->shift[0], (long)op->multiplier[1], (long)op->shift[1],
                   (long)op->multiplier[2], (long)op->shift[2], zp_of(g, op->output), op->act_min, op->act_max);
}

/* TFLite's MUL: qk_mul, b's element a's own or its channel's (b of
 * [C, 1, 1]: k / (H·W)). */
void qat__cg_mul(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    int64_t n = qat_qtensor_numel(&g->q->tensors[op->output]);
    int64_t per = n / qat_qtensor_numel(&g->q->tensors[op->inputs[1]]);
    qat__cg_begin(g, i, "");
    qat__cg_printf(g, "    qk_mul(x0, x1, %lld, %lld, %d, %d, %ld, %ld, %d, %d, %d, y);\n}\n", (long long)n,
                   (long long)per, zp_of(g, op->inputs[0]), zp_of(g, op->inputs[1]), (long)op->multiplier[0],
                   (long)op->shift[0], zp_of(g, op->output), op->act_min, op->act_max);
}

/* Each input requantized to the output's parameters (qk_requant_s8), at
 * its place along the first axis. */
void qat__cg_concat(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    qat__cg_begin(g, i, "");
    int64_t at = 0;
    for (int j = 0; j < op->n_inputs; j++) {
        int64_t n = qat_qtensor_numel(&g->q->tensors[op->inputs[j]]);
        qat__cg_printf(g, "    qk_requant_s8(x%d, %lld, %d, %ld, %ld, %d, %d, %d, y + %lld);\n", j, (long long)n,
                       zp_of(g, op->inputs[j]), (long)op->multiplier[j], (long)op->shift[j], zp_of(g, op->output),
                       op->act_min, op->act_max, (long long)at);
        at += n;
    }
    qat__cg_printf(g, "}\n");
}

void qat__cg_lut(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    int8_t t[256];
    for (int k = 0; k < op->table_len && k < 256; k++) t[k] = (int8_t)op->table[k];
    char id[32];
    snprintf(id, sizeof id, "op%d_t", i);
    qat__cg_array_i8(g, id, t, op->table_len);
    qat__cg_begin(g, i, qat_lut_fn_str(op->lut));
    qat__cg_printf(g, "    qk_lut(x0, %lld, op%d_t, %d, y);\n}\n",
                   (long long)qat_qtensor_numel(&g->q->tensors[op->output]), i, g->q->tensors[op->inputs[0]].q.qmin);
}

void qat__cg_relu(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    qat__cg_begin(g, i, "");
    qat__cg_printf(g, "    qk_clamp(x0, %lld, %d, %d, y);\n}\n",
                   (long long)qat_qtensor_numel(&g->q->tensors[op->output]), op->act_min, op->act_max);
}
