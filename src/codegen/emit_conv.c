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
#include "runtime/qk.h"

void qat__cg_conv(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int O = (int)out->shape[0], OH = (int)out->shape[1], OW = (int)out->shape[2];
    int KH = op->kh, KW = op->kw, G = op->groups, CG = C / G, KK = CG * KH * KW;
    bool pairs = qk_conv_uses_pairs(C, G, KW);
    int P = g->wbits[i];
    char detail[240];
    if (pairs) {
        int8_t *pw = malloc((size_t)O * (size_t)KK);
        if (!pw) {
            g->failed = true;
            return;
        }
        for (int o = 0; o < O; o++)
            for (int t = 0; t < KH * KW; t++)
                for (int c = 0; c < CG; c++)
                    pw[(int64_t)o * KK + t * CG + c] = w[(int64_t)o * KK + qk_pair_channel(c, CG) * KH * KW + t];
        qat__cg_weight_array(g, i, pw, 1, (int32_t)O * KK, P); /* one row: qk_rows */
        free(pw);
    } else {
        qat__cg_weight_array(g, i, w, 1, (int32_t)O * KK, P);
    }
    qat__cg_channel_params(g, i);
    snprintf(detail, sizeof detail, "%dx%d kernel, stride %dx%d, padding %dx%d, %d group(s), activation %s%s%s", KH,
             KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w, G, qat_act_kind_str(op->act),
             pairs ? "; weights [o][ky][kx][c], each 4 channels stored as (c, c+2, c+1, c+3)" : "",
             P < 8 ? "; weights packed as one row (qk_packed_row), a block of channels unpacked at a time into the arena" : "");
    qat__cg_begin(g, i, detail);
    /* the depthwise and pointwise kernels read int8 weights: packed ones take the
     * general kernels, which unpack a block of channels at a time */
    if (P >= 8 && qk_conv_uses_dw3(C, O, G, W, KH, KW, op->stride_w, op->pad_h, op->pad_w)) {
        qat__cg_printf(g, "    qk_dwconv3(x0, op%d_w, %d, %d, %d, %d, %d, %d, %d, %d, %d, op%d_b, op%d_m, op%d_s, %d, %d, "
                       "%d, %d, y);\n}\n", i, C, H, W, OH, OW, op->stride_h, op->stride_w, op->pad_h, op->pad_w, i, i,
                       i, in->q.zero_point, out->q.zero_point, op->act_min, op->act_max);
        return;
    }
    if (P >= 8 && qk_conv_uses_pw(C, G, H, W, KH, KW, op->stride_h, op->stride_w, op->pad_h, op->pad_w)) {
        qat__cg_printf(g, "    qk_conv_pw(x0, op%d_w, %d, %d, %d, %d, op%d_b, op%d_m, op%d_s, %d, %d, %d, %d, y);\n}\n", i,
                       C, H * W, O, qk_pw_block(O), i, i, i, in->q.zero_point, out->q.zero_point, op->act_min,
                       op->act_max);
        return;
    }
    char s[48] = "NULL";
    if (P < 8) snprintf(s, sizeof s, "arena.b + %lld", (long long)g->scratch_at);
    qat__cg_printf(g, "    %s(x0, op%d_w, %d, %s, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, op%d_b, op%d_m, "
                   "op%d_s, %d, %d, %d, %d, y);\n}\n", pairs ? "qk_conv_pairs" : "qk_conv", i, P, s, C, H, W, O, OH, OW, KH, KW,
                   op->stride_h, op->stride_w, op->pad_h, op->pad_w, G, qk_block(O / G), i, i, i, in->q.zero_point,
                   out->q.zero_point, op->act_min, op->act_max);
}
