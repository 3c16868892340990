/* The convolution's emitter: dense, grouped and depthwise (one group per
 * input channel) are one call to a kernel of src/runtime/qk.h (the
 * runtime's portable level), with the op's shapes and integers as literals
 * (the kernel is inlined and specialised by them): qk_dwconv3 for 3x3
 * depthwise, qk_conv_pw for 1x1 stride-1 (both with int8 weights),
 * qk_conv_pairs for kernel rows shorter than a DSP word over >= 4 input
 * channels per group, qk_conv otherwise. The weights are written in the
 * layout the kernel reads (qk_pair_channel's for the pairs and the
 * pointwise kernel), packed below 8 bits (qk_packed_row). */
#include <stdlib.h>

#include "internal.h"
#include "runtime/plan_rules.h"
#include "runtime/qk.h"

/* One output channel `ch` of op i into s (its map, [OH, OW]): the kernel
 * the op would take, called for that channel alone with int8 weights wch
 * (an expression: its row in opN_w, or its packed row unpacked into the
 * scratch), its bias and requantization at its offset, its group's input
 * channels. */
static void one_channel(qat__cg *g, int i, bool pairs, const char *ch, const char *wch, const char *s) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int O = (int)out->shape[0], OH = (int)out->shape[1], OW = (int)out->shape[2];
    int KH = op->kh, KW = op->kw, G = op->groups, CG = C / G, OG = O / G;
    int32_t zp = in->q.zero_point, zo = out->q.zero_point;
    char x[96], tail[160];
    if (G == 1) snprintf(x, sizeof x, "x0"); /* every output channel reads every input channel */
    else snprintf(x, sizeof x, "x0 + (int32_t)(%s / %d) * %d", ch, OG, CG * H * W);
    if (g->ms[i]) /* channel ch's multiplier and shift */
        snprintf(tail, sizeof tail, "op%d_b + %s, op%d_m + %s, op%d_s + %s, 1, %d, %d, %d, %d, %s", i, ch, i, ch, i, ch, zp,
                 zo, op->act_min, op->act_max, s);
    else /* the op's one pair */
        snprintf(tail, sizeof tail, "op%d_b + %s, op%d_m, op%d_s, 0, %d, %d, %d, %d, %s", i, ch, i, i, zp, zo, op->act_min,
                 op->act_max, s);
    if (qk_conv_uses_dw3(C, O, G, W, KH, KW, op->stride_w, op->pad_h, op->pad_w))
        qat__cg_printf(g, "        qk_dwconv3(%s, %s, 1, %d, %d, %d, %d, %d, %d, %d, %d, %s);\n", x, wch, H, W, OH, OW,
                       op->stride_h, op->stride_w, op->pad_h, op->pad_w, tail);
    else if (qk_conv_uses_pw(C, G, H, W, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w))
        qat__cg_printf(g, "        qk_conv_pw(%s, %s, %d, %d, %d, 1, %d, 1, %s);\n", x, wch, C, H * W, H * W, OH * OW,
                       tail);
    else
        qat__cg_printf(g, "        %s(%s, %s, 8, NULL, %d, %d, %d, 1, %d, %d, %d, %d, %d, %d, %d, %d, 1, 1, %s);\n",
                       pairs ? "qk_conv_pairs" : "qk_conv", x, wch, CG, H, W, OH, OW, KH, KW,
                       op->stride_h, op->stride_w, op->pad_h, op->pad_w, tail);
}

/* Channel ch's int8 weights for one_channel: its row of opN_w, or (packed)
 * the statement unpacking its row into the scratch at sw, and sw. */
static void channel_weights(qat__cg *g, int i, const char *ch, const char *sw, char *wch, size_t len) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]];
    int KK = (int)(in->shape[0] / op->groups) * op->kh * op->kw, P = g->wbits[i];
    if (P >= 8) {
        snprintf(wch, len, "op%d_w + %s * %d", i, ch, KK);
        return;
    }
    qat__cg_printf(g, "        qk_unpack(op%d_w, %s * %d, (%s + 1) * %d, %d, %s);\n", i, ch, KK, ch, KK, P, sw);
    snprintf(wch, len, "%s", sw);
}

/* The small-RAM plan's convolutions (plan_rules.h): fused with the max
 * pool after it, one output channel's map at a time into the scratch and
 * pooled into y; or written over its input, depthwise a channel at a
 * time, pointwise a run of positions at a time, through the scratch.
 * Packed weights are unpacked into the scratch after the maps: a
 * channel's row at a time, or a pointwise op's whole matrix once. */
static void small_ram(qat__cg *g, int i, bool pairs, const char *detail) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], HW = (int)(in->shape[1] * in->shape[2]);
    int O = (int)out->shape[0], OHW = (int)(out->shape[1] * out->shape[2]), P = g->wbits[i];
    char text[520], s[48], sw[64], wch[96];
    snprintf(s, sizeof s, "arena.b + %lld", (long long)g->scratch_at);
    snprintf(sw, sizeof sw, "arena.b + %lld", (long long)(g->scratch_at + qat__cg_small_maps(g->q, i)));
    if (g->mode[i] == QAT__CG_FUSED) {
        const qat_qop *p = &g->q->ops[i + 1];
        const qat_qtensor *po = &g->q->tensors[p->output];
        int POH = (int)po->shape[1], POW = (int)po->shape[2];
        snprintf(text, sizeof text, "%s; with max pool %dx%d stride %dx%d after it: each output channel's map into "
                 "the scratch, then pooled into y", detail, p->kh, p->kw, p->stride_h, p->stride_w);
        qat__cg_begin(g, i, text);
        qat__cg_printf(g, "    int o;\n    for (o = 0; o < %d; o++) {\n", O);
        channel_weights(g, i, "o", sw, wch, sizeof wch);
        one_channel(g, i, pairs, "o", wch, s);
        qat__cg_printf(g, "        qk_maxpool(%s, 1, %d, %d, %d, %d, %d, %d, 0, 0, %d, %d, y + (int32_t)o * %d);\n    }\n}\n", s,
                       (int)out->shape[1], (int)out->shape[2], p->kh, p->kw, p->stride_h, p->stride_w, POH, POW,
                       POH * POW);
        return;
    }
    snprintf(text, sizeof text, "%s; written over its input (y is x0) through the scratch", detail);
    qat__cg_begin(g, i, text);
    if (op->groups > 1) { /* depthwise: channel c's map, then over channels <= c, all read */
        qat__cg_printf(g, "    int c;\n    for (c = 0; c < %d; c++) {\n", C);
        channel_weights(g, i, "c", sw, wch, sizeof wch);
        one_channel(g, i, pairs, "c", wch, s);
        qat__cg_printf(g, "        memcpy(y + (int32_t)c * %d, %s, %d);\n    }\n}\n", OHW, s, OHW);
        return;
    }
    /* pointwise: positions [p, p + n) of every output channel, then over positions < p + n, all read */
    int run = qat__cg_pw_run(HW);
    snprintf(wch, sizeof wch, "op%d_w", i);
    qat__cg_printf(g, "    int p, o, n;\n");
    if (P < 8) {
        qat__cg_printf(g, "    qk_unpack(op%d_w, 0, %d, %d, %s);\n", i, O * C, P, sw);
        snprintf(wch, sizeof wch, "%s", sw);
    }
    qat__cg_printf(g, "    for (p = 0; p < %d; p += n) {\n        n = %d - p <= %d ? %d - p : %d;\n"
                   "        qk_conv_pw(x0 + p, %s, %d, n, %d, %d, n, %d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, %s);\n"
                   "        for (o = 0; o < %d; o++) memcpy(y + (int32_t)o * %d + p, %s + o * n, (size_t)n);\n    }\n}\n",
                   HW, HW, run + 1, HW, run, wch, C, HW, O, qk_pw_block(O), i, i, i, g->ms[i], in->q.zero_point,
                   out->q.zero_point, op->act_min, op->act_max, s, O, HW, s);
}

/* w [O][CG][T] (T = KH·KW) in qk_conv_pairs' layout [O][T][CG], each 4
 * channels in qk_pair_channel's order. */
static void pairs_layout(const int8_t *w, int O, int CG, int T, int8_t *pw) {
    for (int o = 0; o < O; o++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < CG; c++)
                pw[((int64_t)o * T + t) * CG + c] = w[((int64_t)o * CG + qk_pair_channel(c, CG)) * T + t];
}

int8_t *qat__cg_conv_dsp_rows(const qat__cg *g, int i, const int8_t *w, int64_t *L, int64_t *L4, bool *stored) {
    const qat_qop *op = &g->q->ops[i];
    if (op->kind != QAT_QOP_CONV2D || g->wbits[i] < 8 || g->mode[i] != QAT__CG_PLAIN) return NULL;
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2], O = (int)out->shape[0];
    int KH = op->kh, KW = op->kw, G = op->groups, CG = C / G, T = KH * KW, KK = CG * T;
    if (qk_conv_uses_dw3_rows(C, O, G, W, KH, KW, op->stride_w, op->pad_h, op->pad_w)) return NULL;
    bool pw = qk_conv_uses_pw(C, G, H, W, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w);
    int8_t *r = NULL;
    *stored = true, *L = *L4 = KK;
    if (!qat__cg_natural_cols(g, i) && qat__cg_uses_cols(g, i)) { /* qk_conv_pw_cols, qk_conv_rows */
        if ((r = malloc((size_t)O * (size_t)KK))) pairs_layout(w, O, CG, T, r);
    } else if (!pw && qat__cg_natural_cols(g, i) && qat__cg_natural_ring(g, i)) { /* re-laid by qk_conv_cols */
        int C4 = (C + 3) / 4 * 4;
        *stored = false, *L = *L4 = (int64_t)T * C4;
        if ((r = malloc((size_t)O * (size_t)*L))) qk_relay_c4(w, 8, O, C, T, r);
    } else if (!pw && qat__cg_natural_cols(g, i)) { /* qk_conv_bytes: whole words paired, the rest scalar */
        *L4 = KK / 4 * 4;
        if ((r = malloc((size_t)O * (size_t)KK))) memcpy(r, w, (size_t)O * (size_t)KK);
    }
    return r;
}

void qat__cg_conv(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int O = (int)out->shape[0], OH = (int)out->shape[1], OW = (int)out->shape[2];
    int KH = op->kh, KW = op->kw, G = op->groups, CG = C / G, KK = CG * KH * KW;
    bool pairs = qk_conv_uses_pairs(C, G, KW);
    int P = g->wbits[i];
    char detail[320];
    int8_t *pw = pairs ? malloc((size_t)O * (size_t)KK) : NULL;
    if (pairs && !pw) {
        g->failed = true;
        return;
    }
    if (pairs) pairs_layout(w, O, CG, KH * KW, pw);
    if (g->paired[i]) { /* the DSP's paired rows and folded biases beside the plain ones */
        int64_t L, L4;
        bool stored;
        int8_t *rows = qat__cg_conv_dsp_rows(g, i, w, &L, &L4, &stored);
        int8_t *wp = rows ? malloc((size_t)O * (size_t)L) : NULL;
        int32_t *bp = malloc(sizeof *bp * (size_t)O);
        if (!wp || !bp || !qat__cg_pair_rows(rows, O, L, L4, in->q.zero_point, op->bias, wp, bp)) {
            free(rows), free(wp), free(bp), free(pw);
            g->failed = true;
            return;
        }
        qat__cg_paired_params(g, i, pairs ? pw : w, stored ? wp : NULL, (int64_t)O * KK, bp);
        free(rows), free(wp), free(bp);
    } else {
        qat__cg_weight_array(g, i, pairs ? pw : w, 1, (int32_t)O * KK, P); /* one row: qk_rows */
        qat__cg_channel_params(g, i);
    }
    free(pw);
    snprintf(detail, sizeof detail, "%dx%d kernel, stride %dx%d, padding %dx%d, %d group(s), activation %s%s%s%s", KH,
             KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w, G, qat_act_kind_str(op->act),
             pairs ? "; weights [o][ky][kx][c], each 4 channels stored as (c, c+2, c+1, c+3)" : "",
             P < 8 && qat__cg_dw_rows(g, i) ? "; weights packed as one row (qk_packed_row), a channel's taps unpacked at a time"
             : P < 8 && qat__cg_uses_cols(g, i)
                 ? "; weights packed as one row (qk_packed_row), unpacked in registers on the DSP, elsewhere a block of "
                   "channels at a time into the arena"
             : P < 8 ? "; weights packed as one row (qk_packed_row), a block of channels unpacked at a time into the arena"
                     : "",
             g->paired[i] ? "; paired-byte weights on the DSP" : "");
    if (g->mode[i] == QAT__CG_FUSED || g->mode[i] == QAT__CG_OVER_INPUT) {
        small_ram(g, i, pairs, detail);
        return;
    }
    qat__cg_begin(g, i, detail);
    /* the depthwise kernel reads a channel's taps once, packed ones unpacked there; the
     * pointwise one reads int8 weights: packed ones take qk_conv_rows below (groups of
     * a multiple of 8 channels) or the general kernels, which unpack a block of channels
     * at a time */
    if (qk_conv_uses_dw3_rows(C, O, G, W, KH, KW, op->stride_w, op->pad_h, op->pad_w)) {
        qat__cg_printf(g, "    qk_dwconv3_padded(x0, op%d_w, %d, (int8_t *)(void *)QK_COLS, %d, %d, %d, %d, %d, %d, %d, %d, "
                       "%d, %d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, %d, y);\n}\n", i, P, g->dw_plane[i], C, H, W, OH, OW,
                       op->stride_h, op->stride_w, op->pad_h, op->pad_w, i, i, i, g->ms[i], g->sn[i], in->q.zero_point,
                       out->q.zero_point, op->act_min, op->act_max);
        return;
    }
    if (P >= 8 && qk_conv_uses_pw(C, G, H, W, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w)) {
        if (qat__cg_uses_cols(g, i))
            qat__cg_printf(g, "    qk_conv_pw_cols(x0, op%d_w, QK_COLS, %d, %d, %d, %d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, "
                           "%d, %d, y);\n}\n", i, C, H * W, O, qk_pw_block(O), i, i, i, g->ms[i], g->sn[i], g->paired[i],
                           in->q.zero_point, out->q.zero_point, op->act_min, op->act_max);
        else
            qat__cg_printf(g, "    qk_conv_pw(x0, op%d_w, %d, %d, %d, %d, %d, %d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, y);\n}\n",
                           i, C, H * W, H * W, O, H * W, qk_pw_block(O), i, i, i, g->ms[i], in->q.zero_point, out->q.zero_point,
                           op->act_min, op->act_max);
        return;
    }
    if (qat__cg_natural_cols(g, i)) { /* weights in order, the DSP's columns or ring where it has them */
        qat__cg_printf(g, "    qk_conv_cols(x0, op%d_w, %d, QK_COLS, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, "
                       "op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, %d, %d, y);\n}\n", i, P, qat__cg_natural_ring(g, i), C, H, W, O,
                       OH, OW, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w, qk_block(O), i, i, i, g->ms[i],
                       g->sn[i], g->paired[i], in->q.zero_point, out->q.zero_point, op->act_min, op->act_max);
        return;
    }
    if (pairs && qat__cg_uses_cols(g, i)) { /* the pairs layout over the DSP's ring of rows, or its int16 columns */
        /* a pointwise one (4-bit weights) as one row of H·W positions: qk_conv_q15's pointwise columns */
        bool row = qk_conv_uses_pw(C, G, H, W, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w);
        qat__cg_printf(g, "    qk_conv_rows(x0, op%d_w, %d, QK_COLS, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, "
                       "%d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, %d, %d, %d, y);\n}\n", i, P, qat__cg_ring(g, i), C,
                       row ? 1 : H, row ? H * W : W, O, row ? 1 : OH, row ? OH * OW : OW, KH, KW, op->stride_h,
                       op->stride_w, op->pad_h, op->pad_w, G, qk_block(O / G), i, i, i, g->ms[i],
                       g->sn[i], g->paired[i], in->q.zero_point, out->q.zero_point, op->act_min,
                       op->act_max);
        return;
    }
    char s[48] = "NULL";
    if (P < 8) snprintf(s, sizeof s, "arena.b + %lld", (long long)g->scratch_at);
    qat__cg_printf(g, "    %s(x0, op%d_w, %d, %s, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, op%d_b, op%d_m, "
                   "op%d_s, %d, %d, %d, %d, %d, y);\n}\n", pairs ? "qk_conv_pairs" : "qk_conv", i, P, s, C, H, W, O, OH, OW,
                   KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w, G, qk_block(O / G), i, i, i, g->ms[i],
                   in->q.zero_point, out->q.zero_point, op->act_min, op->act_max);
}
