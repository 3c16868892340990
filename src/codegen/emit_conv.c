/* The convolution's emitter: dense, grouped and depthwise (one group per
 * input channel) are one kernel, y[o] = requant(b[o] + Σ w·(x - zp)) over
 * the taps inside the input, with the op's shapes as literals.
 *
 * No scratch memory and no padded copy: each output row clips its kernel
 * rows to the input; the columns split into the interior, where every tap
 * of a kernel row lies inside the input, and the border, where each tap
 * is tested. In the interior a kernel row is KW contiguous inputs: with
 * the DSP extension four at a time (LDR, two SXTAB16 giving (x0 - zp,
 * x2 - zp) and (x1 - zp, x3 - zp), the weights likewise by SXTB16, two
 * SMLAD), the rest one by one. Several output channels share each
 * unpacked input (qat__cg_block). The int32 sums are exact in any order
 * (|x - zp| <= 255, |w| <= 128, and the plan checks K·255·255 + |b| <
 * 2^31), so both paths compute the runtime's integers. */
#include <stdlib.h>

#include "internal.h"

/* The taps of one kernel row in the interior, for B output channels:
 * xr points at the row's first input, wr at channel o's weights for it,
 * channel o + j's at wr + j·KK. */
static void interior_row(qat__cg *g, int KW, int KK, int B, int32_t zp, int32_t nzp, const char *ind) {
    int k = 0;
    if (KW >= 4) {
        qat__cg_printf(g, "#if Q_DSP\n");
        for (; k + 4 <= KW; k += 4) {
            qat__cg_printf(g, "%s{\n%s    uint32_t xv = q_ld32(xr + %d), wv;\n"
                           "%s    int32_t xa = __sxtab16(%ld, (int32_t)xv), xb = q_sxtab16_ror8(%ld, xv);\n",
                           ind, ind, k, ind, (long)nzp, (long)nzp);
            for (int j = 0; j < B; j++)
                qat__cg_printf(g, "%s    wv = q_ld32(wr + %d);\n"
                               "%s    acc%d = __smlad(__sxtb16((int32_t)wv), xa, acc%d);\n"
                               "%s    acc%d = __smlad(q_sxtb16_ror8(wv), xb, acc%d);\n",
                               ind, j * KK + k, ind, j, j, ind, j, j);
            qat__cg_printf(g, "%s}\n", ind);
        }
        qat__cg_printf(g, "#else\n");
        for (int t = 0; t < k; t++) {
            qat__cg_printf(g, "%s{\n%s    int32_t xv = xr[%d] - (%d);\n", ind, ind, t, zp);
            for (int j = 0; j < B; j++) qat__cg_printf(g, "%s    acc%d += wr[%d] * xv;\n", ind, j, j * KK + t);
            qat__cg_printf(g, "%s}\n", ind);
        }
        qat__cg_printf(g, "#endif\n");
    }
    for (; k < KW; k++) {
        qat__cg_printf(g, "%s{\n%s    int32_t xv = xr[%d] - (%d);\n", ind, ind, k, zp);
        for (int j = 0; j < B; j++) qat__cg_printf(g, "%s    acc%d += wr[%d] * xv;\n", ind, j, j * KK + k);
        qat__cg_printf(g, "%s}\n", ind);
    }
}

static int32_t neg_zp_pair(int32_t zp) {
    uint32_t h = (uint32_t)(uint16_t)(int16_t)-zp;
    uint32_t v = h | (h << 16);
    return v > INT32_MAX ? -(int32_t)(~v) - 1 : (int32_t)v;
}

/* A convolution whose kernel rows are shorter than a DSP word (3x3, 1x1)
 * over at least 4 input channels per group (ResNet's, MobileNet's
 * pointwise, DS-CNN's): the reduction runs over channels, a plane apart,
 * so the DSP pairs channels instead of taps: (x_c - zp, x_c+1 - zp)
 * packed from two loads and one SADD16. The weights are stored at export
 * as [o][ky][kx][c], each group of four channels as (c, c+2, c+1, c+3), so
 * that SXTB16 gives (w_c, w_c+1) and its rotated form (w_c+2, w_c+3); the
 * portable path reads the same layout. Each output position clips its
 * taps to the input (padding adds nothing). */
static void channel_pairs(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int O = (int)out->shape[0], OH = (int)out->shape[1], OW = (int)out->shape[2];
    int KH = op->kh, KW = op->kw, SH = op->stride_h, SW = op->stride_w, PH = op->pad_h, PW = op->pad_w;
    int G = op->groups, CG = C / G, OG = O / G, B = qat__cg_block(OG), HW = H * W, C4 = CG / 4 * 4;
    int KK = CG * KH * KW;
    int32_t zp = in->q.zero_point, zpo = out->q.zero_point, nzp = neg_zp_pair(zp);
    int8_t *pw = malloc((size_t)O * (size_t)KK);
    if (!pw) {
        g->failed = true;
        return;
    }
    static const int perm[4] = {0, 2, 1, 3}; /* stored byte b of a group holds channel c + perm[b] */
    for (int o = 0; o < O; o++)
        for (int t = 0; t < KH * KW; t++)
            for (int c = 0; c < CG; c++) {
                int src = c < C4 ? c / 4 * 4 + perm[c % 4] : c;
                pw[(int64_t)o * KK + t * CG + c] = w[(int64_t)o * KK + src * KH * KW + t];
            }
    char id[32], detail[200];
    snprintf(id, sizeof id, "op%d_w", i);
    qat__cg_array_i8(g, id, pw, (int64_t)O * KK);
    free(pw);
    qat__cg_channel_params(g, i);
    snprintf(detail, sizeof detail, "%dx%d kernel, stride %dx%d, padding %dx%d, %d group(s), activation %s; weights "
             "[o][ky][kx][c], each 4 channels stored as (c, c+2, c+1, c+3)", KH, KW, SH, SW, PH, PW, G,
             qat_act_kind_str(op->act));
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    int o, oy, ox, ky, kx, c;\n    for (o = 0; o < %d; o += %d) {\n"
                   "        const int8_t *xg = x0 + (o / %d) * %d; /* the group's input channels */\n"
                   "        const int8_t *w = op%d_w + o * %d;\n"
                   "        for (oy = 0; oy < %d; oy++) {\n            const int iy = oy * %d - %d;\n",
                   O, B, OG, CG * HW, i, KK, OH, SH, PH);
    if (PH)
        qat__cg_printf(g, "            const int ky0 = iy < 0 ? -iy : 0, ky1 = iy + %d > %d ? %d - iy : %d;\n", KH, H, H, KH);
    else
        qat__cg_printf(g, "            const int ky0 = 0, ky1 = %d;\n", KH);
    qat__cg_printf(g, "            for (ox = 0; ox < %d; ox++) {\n                const int ix = ox * %d - %d;\n", OW, SW, PW);
    if (PW)
        qat__cg_printf(g, "                const int kx0 = ix < 0 ? -ix : 0, kx1 = ix + %d > %d ? %d - ix : %d;\n", KW, W, W, KW);
    else
        qat__cg_printf(g, "                const int kx0 = 0, kx1 = %d;\n", KW);
    for (int j = 0; j < B; j++) qat__cg_printf(g, "                int32_t acc%d = op%d_b[o + %d];\n", j, i, j);
    qat__cg_printf(g, "                for (ky = ky0; ky < ky1; ky++)\n                    for (kx = kx0; kx < kx1; kx++) {\n"
                   "                        const int8_t *xp = xg + (iy + ky) * %d + ix + kx;\n"
                   "                        const int8_t *wt = w + (ky * %d + kx) * %d;\n"
                   "                        for (c = 0; c < %d; c += 4) {\n#if Q_DSP\n"
                   "                            uint32_t wv;\n"
                   "                            int32_t x01 = __sadd16((int32_t)(((uint32_t)xp[c * %d] & 0xFFFFu) | ((uint32_t)xp[(c + 1) * %d] << 16)), %ld);\n"
                   "                            int32_t x23 = __sadd16((int32_t)(((uint32_t)xp[(c + 2) * %d] & 0xFFFFu) | ((uint32_t)xp[(c + 3) * %d] << 16)), %ld);\n",
                   W, KW, CG, C4, HW, HW, (long)nzp, HW, HW, (long)nzp);
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "                            wv = q_ld32(wt + %d + c);\n"
                       "                            acc%d = __smlad(__sxtb16((int32_t)wv), x01, acc%d);\n"
                       "                            acc%d = __smlad(q_sxtb16_ror8(wv), x23, acc%d);\n", j * KK, j, j, j, j);
    qat__cg_printf(g, "#else\n                            int32_t xa = xp[c * %d] - (%d), xb = xp[(c + 1) * %d] - (%d);\n"
                   "                            int32_t xc = xp[(c + 2) * %d] - (%d), xd = xp[(c + 3) * %d] - (%d);\n",
                   HW, zp, HW, zp, HW, zp, HW, zp);
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "                            acc%d += wt[%d + c] * xa + wt[%d + c] * xb + wt[%d + c] * xc + "
                       "wt[%d + c] * xd;\n", j, j * KK, j * KK + 2, j * KK + 1, j * KK + 3);
    qat__cg_printf(g, "#endif\n                        }\n");
    if (C4 < CG) {
        qat__cg_printf(g, "                        for (c = %d; c < %d; c++) {\n"
                       "                            int32_t xv = xp[c * %d] - (%d);\n", C4, CG, HW, zp);
        for (int j = 0; j < B; j++) qat__cg_printf(g, "                            acc%d += wt[%d + c] * xv;\n", j, j * KK);
        qat__cg_printf(g, "                        }\n");
    }
    qat__cg_printf(g, "                    }\n");
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "                y[((o + %d) * %d + oy) * %d + ox] = q_out(q_requant(acc%d, op%d_m[o + %d], "
                       "op%d_s[o + %d]) + (%d), %d, %d);\n", j, OH, OW, j, i, j, i, j, zpo, op->act_min, op->act_max);
    qat__cg_printf(g, "            }\n        }\n    }\n}\n");
}

void qat__cg_conv(qat__cg *g, int i, const int8_t *w) {
    const qat_qop *op = &g->q->ops[i];
    if (op->kw < 4 && g->q->tensors[op->inputs[0]].shape[0] / op->groups >= 4) {
        channel_pairs(g, i, w);
        return;
    }
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int O = (int)out->shape[0], OH = (int)out->shape[1], OW = (int)out->shape[2];
    int KH = op->kh, KW = op->kw, SH = op->stride_h, SW = op->stride_w, PH = op->pad_h, PW = op->pad_w;
    int G = op->groups, CG = C / G, OG = O / G, KK = CG * KH * KW, B = qat__cg_block(OG);
    int32_t zp = g->q->tensors[op->inputs[0]].q.zero_point, zpo = out->q.zero_point, nzp = neg_zp_pair(zp);
    /* interior columns: ox·SW - PW >= 0 and ox·SW - PW + KW <= W */
    int oxa = (PW + SW - 1) / SW, oxb = W + PW - KW >= 0 ? (W + PW - KW) / SW + 1 : 0;
    if (oxb > OW) oxb = OW;
    if (oxb < oxa) oxb = oxa;
    bool border = oxa > 0 || oxb < OW;
    char id[32], detail[160];
    snprintf(id, sizeof id, "op%d_w", i);
    qat__cg_array_i8(g, id, w, (int64_t)O * KK);
    qat__cg_channel_params(g, i);
    snprintf(detail, sizeof detail, "%dx%d kernel, stride %dx%d, padding %dx%d, %d group(s), activation %s", KH, KW, SH,
             SW, PH, PW, G, qat_act_kind_str(op->act));
    qat__cg_begin(g, i, detail);
    qat__cg_printf(g, "    int o, oy, ox, c%s;\n    for (o = 0; o < %d; o += %d) {\n"
                   "        const int8_t *xg = x0 + (o / %d) * %d; /* the group's input channels */\n"
                   "        const int8_t *w = op%d_w + o * %d;\n"
                   "        for (oy = 0; oy < %d; oy++) {\n            const int iy = oy * %d - %d;\n",
                   PH || border ? ", ky" : "", O, B, OG, CG * H * W, i, KK, OH, SH, PH);
    if (PH)
        qat__cg_printf(g, "            const int ky0 = iy < 0 ? -iy : 0, ky1 = iy + %d > %d ? %d - iy : %d;\n", KH, H, H, KH);
    else if (border)
        qat__cg_printf(g, "            const int ky0 = 0, ky1 = %d;\n", KH);
    /* the interior */
    qat__cg_printf(g, "            for (ox = %d; ox < %d; ox++) {\n                const int ix = ox * %d - %d;\n", oxa, oxb,
                   SW, PW);
    for (int j = 0; j < B; j++) qat__cg_printf(g, "                int32_t acc%d = op%d_b[o + %d];\n", j, i, j);
    /* rows whose kernel lies wholly inside the input: the kernel rows
     * unrolled (literal offsets, no loop); clipped rows: a loop */
    if (!PH) qat__cg_printf(g, "                for (c = 0; c < %d; c++) {\n", CG);
    for (int ky = 0; ky < KH && !PH; ky++) {
        qat__cg_printf(g, "                    {\n"
                       "                        const int8_t *xr = xg + (c * %d + iy + %d) * %d + ix;\n"
                       "                        const int8_t *wr = w + (c * %d + %d) * %d;\n",
                       H, ky, W, KH, ky, KW);
        interior_row(g, KW, KK, B, zp, nzp, "                        ");
        qat__cg_printf(g, "                    }\n");
    }
    if (!PH) qat__cg_printf(g, "                }\n");
    if (PH) {
        qat__cg_printf(g, "                for (c = 0; c < %d; c++)\n                    for (ky = ky0; ky < ky1; ky++) {\n"
                       "                        const int8_t *xr = xg + (c * %d + iy + ky) * %d + ix;\n"
                       "                        const int8_t *wr = w + (c * %d + ky) * %d;\n",
                       CG, H, W, KH, KW);
        interior_row(g, KW, KK, B, zp, nzp, "                        ");
        qat__cg_printf(g, "                    }\n");
    }
    for (int j = 0; j < B; j++)
        qat__cg_printf(g, "                y[((o + %d) * %d + oy) * %d + ox] = q_out(q_requant(acc%d, op%d_m[o + %d], op%d_s[o + %d]) + (%d), %d, %d);\n", j, OH, OW, j, i, j, i, j, zpo, op->act_min, op->act_max);
    qat__cg_printf(g, "            }\n");
    if (border) { /* the border: each tap tested against the input's columns */
        qat__cg_printf(g, "            for (ox = 0; ox < %d; ox++) {\n                int ix, kx0, kx1, kx;\n", OW);
        for (int j = 0; j < B; j++) qat__cg_printf(g, "                int32_t acc%d = op%d_b[o + %d];\n", j, i, j);
        qat__cg_printf(g, "                if (ox == %d) ox = %d; /* skip the interior */\n"
                       "                if (ox >= %d) break;\n"
                       "                ix = ox * %d - %d;\n"
                       "                kx0 = ix < 0 ? -ix : 0;\n                kx1 = ix + %d > %d ? %d - ix : %d;\n"
                       "                for (c = 0; c < %d; c++)\n                    for (ky = ky0; ky < ky1; ky++)\n"
                       "                        for (kx = kx0; kx < kx1; kx++) {\n"
                       "                            int32_t xv = xg[(c * %d + iy + ky) * %d + ix + kx] - (%d);\n"
                       "                            const int8_t *wr = w + (c * %d + ky) * %d + kx;\n",
                       oxa, oxb, OW, SW, PW, KW, W, W, KW, CG, H, W, zp, KH, KW);
        for (int j = 0; j < B; j++) qat__cg_printf(g, "                            acc%d += wr[%d] * xv;\n", j, j * KK);
        qat__cg_printf(g, "                        }\n");
        for (int j = 0; j < B; j++)
            qat__cg_printf(g, "                y[((o + %d) * %d + oy) * %d + ox] = q_out(q_requant(acc%d, op%d_m[o + %d], "
                           "op%d_s[o + %d]) + (%d), %d, %d);\n", j, OH, OW, j, i, j, i, j, zpo, op->act_min, op->act_max);
        qat__cg_printf(g, "            }\n");
    }
    qat__cg_printf(g, "        }\n    }\n}\n");
}
