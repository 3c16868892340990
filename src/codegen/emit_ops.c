/* The emitters of every op but the convolution: linear, max and average
 * pooling, global average pooling, add, mul, concat, lookup tables and
 * ReLU, each one call to its kernel in src/runtime/qk.h (the runtime's own
 * portable kernels) with the op's shapes and integers as literals. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "runtime/qk.h"

static const char *act_of(const qat_qop *op) { return qat_act_kind_str(op->act); }

void qat__cg_begin(qat__cg *g, int i, const char *detail) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    char text[QAT__CG_TEXT_LEN];
    qat__cg_printf(g, "\n/* op %d: %s %s, ", i, qat_qop_kind_str(op->kind), qat__cg_text(op->name, text));
    for (int r = 0; r < in->rank; r++) qat__cg_printf(g, "%s%lld", r ? "x" : "[", (long long)in->shape[r]);
    qat__cg_printf(g, "]%s -> ", op->n_inputs > 1 ? " (and more)" : "");
    for (int r = 0; r < out->rank; r++) qat__cg_printf(g, "%s%lld", r ? "x" : "[", (long long)out->shape[r]);
    qat__cg_printf(g, "]%s%s */\nstatic Q_NOINLINE %svoid op%d(", detail[0] ? ", " : "", detail,
                   qat__cg_unscheduled(g, i) ? "QK_NO_SCHED " : "", i);
    for (int j = 0; j < op->n_inputs; j++) qat__cg_printf(g, "const int8_t *x%d, ", j);
    qat__cg_printf(g, "int8_t *y) {\n");
}

static int32_t zp_of(const qat__cg *g, int t) { return g->q->tensors[t].q.zero_point; }

/* y[o] = requant(b[o] + Σ_k w[o][k]·(x[k] - zp)): qk_linear. */
void qat__cg_linear(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    int O = (int)op->wq.shape[0], K = (int)op->wq.shape[1];
    int P = g->wbits[i], NB = (int)op->wq.block[1], J = (K + NB - 1) / NB;
    bool sub = qat_qop_subchannel(op);
    char detail[160], blocks[48] = "0, NULL, NULL";
    if (g->paired[i]) { /* the DSP's stored weights and folded biases; the plain ones elsewhere */
        int8_t *wp = malloc((size_t)O * (size_t)K);
        int32_t *bp = malloc(sizeof *bp * (size_t)O);
        if (!wp || !bp || !qat__cg_paired(op, w, zp_of(g, op->inputs[0]), wp, bp)) {
            free(wp), free(bp);
            g->failed = true;
            return;
        }
        qat__cg_paired_params(g, i, w, wp, (int64_t)O * K, bp);
        free(wp), free(bp);
        snprintf(detail, sizeof detail, "activation %s; on the DSP, paired-byte weights (qk_linear_paired)", act_of(op));
        qat__cg_begin(g, i, detail);
        qat__cg_printf(g, "    qk_linear_paired(x0, op%d_w, (int32_t *)(void *)QK_COLS, %d, %d, %d, op%d_b, op%d_m, op%d_s, %d, "
                          "%d, %d, %d, %d, %d, y);\n}\n",
                       i, K, O, qk_block(O), i, i, i, g->ms[i], g->sn[i], zp_of(g, op->inputs[0]),
                       zp_of(g, op->output), op->act_min, op->act_max);
        return;
    }
    qat__cg_weight_array(g, i, w, O, K, P);
    qat__cg_channel_params(g, i);
    if (sub) { /* each row's block multipliers and shifts, [O][J] (rows sharing a block's parameters repeat them) */
        int32_t *bm = malloc(sizeof *bm * (size_t)O * (size_t)J), *bs = malloc(sizeof *bs * (size_t)O * (size_t)J);
        if (!bm || !bs) {
            free(bm), free(bs);
            g->failed = true;
            return;
        }
        for (int64_t o = 0; o < O; o++)
            for (int j = 0; j < J; j++) {
                int64_t p = qat_qtype_param_index(&op->wq, o * K + (int64_t)j * NB);
                bm[o * J + j] = op->block_multiplier[p], bs[o * J + j] = op->block_shift[p];
            }
        char id[32];
        snprintf(id, sizeof id, "op%d_bm", i);
        qat__cg_array_i32(g, id, bm, (int64_t)O * J);
        snprintf(id, sizeof id, "op%d_bs", i);
        qat__cg_array_i32(g, id, bs, (int64_t)O * J);
        free(bm), free(bs);
        snprintf(blocks, sizeof blocks, "%d, op%d_bm, op%d_bs", NB, i, i);
    }
    snprintf(detail, sizeof detail, "activation %s%s%s", act_of(op),
             P < 8 ? "; rows packed (qk_packed_row), unpacked in registers" : "",
             sub ? "; sub-channel: each block's sum converted (op_bm, op_bs) before the bias" : "");
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    qk_linear(x0, op%d_w, %d, %d, %d, %d, %s, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, y);\n}\n", i,
                   P, K, O, qk_block(O), blocks, i, i, i, g->ms[i], zp_of(g, op->inputs[0]), zp_of(g, op->output),
                   op->act_min, op->act_max);
}

/* The ops below are one call each to a kernel of src/runtime/qk.h (the
 * runtime's portable level), with the op's shapes and integers as
 * literals: the kernel is inlined and specialised by them. */

/* Max and average pooling over [C, H, W]: qk_maxpool, qk_avgpool, or
 * qk_avgpool_keep for a pool that keeps its input's quantization. */
void qat__cg_pool(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2], OH = (int)out->shape[1],
        OW = (int)out->shape[2];
    bool avg = op->kind == QAT_QOP_AVGPOOL2D;
    char detail[128];
    snprintf(detail, sizeof detail, "%dx%d window, stride %dx%d, padding %dx%d%s", op->kh, op->kw, op->stride_h,
             op->stride_w, op->pad_h, op->pad_w, op->keeps_scale ? ", the input's quantization kept" : "");
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    qk_%s(x0, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, ",
                   !avg ? "maxpool" : op->keeps_scale ? "avgpool_keep" : "avgpool", C, H, W, op->kh, op->kw,
                   op->stride_h, op->stride_w, op->pad_h, op->pad_w, OH, OW);
    if (avg && op->keeps_scale) qat__cg_printf(g, "%d, %d, ", op->act_min, op->act_max);
    else if (avg)
        qat__cg_printf(g, "%d, %ld, %ld, %d, %d, %d, ", zp_of(g, op->inputs[0]), (long)op->multiplier[0],
                       (long)op->shift[0], zp_of(g, op->output), op->act_min, op->act_max);
    qat__cg_printf(g, "y);\n}\n");
}

/* qk_global_avgpool (or qk_global_avgpool_keep): the plan refuses
 * H·W·255 > INT32_MAX. */
void qat__cg_global_avgpool(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]];
    int C = (int)in->shape[0], HW = (int)(in->shape[1] * in->shape[2]);
    qat__cg_begin(g, i, op->keeps_scale ? "the input's quantization kept" : "");
    if (op->keeps_scale)
        qat__cg_printf(g, "    qk_global_avgpool_keep(x0, %d, %d, %d, %d, y);\n}\n", C, HW, op->act_min, op->act_max);
    else
        qat__cg_printf(g, "    qk_global_avgpool(x0, %d, %d, %d, %ld, %ld, %d, %d, %d, y);\n}\n", C, HW,
                       zp_of(g, op->inputs[0]), (long)op->multiplier[0], (long)op->shift[0], zp_of(g, op->output),
                       op->act_min, op->act_max);
}

/* TFLite's ADD: qk_add. */
void qat__cg_add(qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    int64_t n = qat_qtensor_numel(&g->q->tensors[op->output]);
    bool tab = qat__cg_add_tab(g, i);
    char detail[96];
    snprintf(detail, sizeof detail, "%s%s", act_of(op), tab ? "; each input's 256 terms tabled in the scratch" : "");
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    qk_add%s(x0, x1, %lld, %d, %d, %d, %ld, %ld, %ld, %ld, %ld, %ld, ", tab ? "_tab" : "",
                   (long long)n, zp_of(g, op->inputs[0]), zp_of(g, op->inputs[1]), op->left_shift,
                   (long)op->multiplier[0], (long)op->shift[0], (long)op->multiplier[1], (long)op->shift[1],
                   (long)op->multiplier[2], (long)op->shift[2]);
    if (tab) qat__cg_printf(g, "%d, ", g->sn[i]);
    qat__cg_printf(g, "%d, %d, %d, %sy);\n}\n", zp_of(g, op->output), op->act_min, op->act_max,
                   tab ? "(int32_t *)(void *)QK_COLS, " : "");
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
