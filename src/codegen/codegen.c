/* The C generator's driver (qat/codegen.h): checks that the program can be
 * generated, plans its arena with the runtime's planner (qat_plan_program,
 * one sample), then makes NAME.h (the API), NAME.c (the shared fixed-point
 * kernels of src/runtime/qk.h, one function per op from the emitters, NAME_run) and NAME_io.c
 * (the float edges) in memory. It reads the program alone; the export
 * (src/export/targets.c) stages the three files together. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "runtime/plan_rules.h"
#include "runtime/qk.h"

void qat__cg_printf(qat__cg *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(g->f, fmt, ap) < 0) g->failed = true;
    va_end(ap);
}

const char *qat__cg_text(const char *s, char *buf) {
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < QAT_NAME_LEN && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            buf[k++] = (char)c;
        } else {
            buf[k++] = '%', buf[k++] = hex[c >> 4], buf[k++] = hex[c & 15];
        }
    }
    buf[k] = '\0';
    return buf;
}

const char *qat__cg_i32(int32_t v, char *buf) {
    if (v == INT32_MIN) return strcpy(buf, "(-2147483647 - 1)");
    snprintf(buf, 24, "%ld", (long)v);
    return buf;
}

void qat__cg_array_i8(qat__cg *g, const char *ident, const int8_t *v, int64_t n) {
    qat__cg_printf(g, "static const int8_t %s[%lld] = {", ident, (long long)n);
    for (int64_t i = 0; i < n; i++) qat__cg_printf(g, "%s%d,", i % 24 ? " " : "\n    ", v[i]);
    qat__cg_printf(g, "\n};\n");
    g->const_bytes += n;
}

void qat__cg_array_i32(qat__cg *g, const char *ident, const int32_t *v, int64_t n) {
    char b[24];
    qat__cg_printf(g, "static const int32_t %s[%lld] = {", ident, (long long)n);
    for (int64_t i = 0; i < n; i++) qat__cg_printf(g, "%s%s,", i % 8 ? " " : "\n    ", qat__cg_i32(v[i], b));
    qat__cg_printf(g, "\n};\n");
    g->const_bytes += 4 * n;
}


int qat__cg_weight_bits(const qat_qop *op, const int8_t *w) {
    int P = op->wq.bits <= 2 ? 2 : op->wq.bits <= 4 ? 4 : 8;
    int64_t n = op->wq.shape[0] * (op->wq.rank == 4 ? op->wq.shape[1] * op->wq.shape[2] * op->wq.shape[3]
                                                    : op->wq.shape[1]);
    /* sub-channel (a linear op's): each block starts on a group of the
     * packed row, and its scaled DSP sum (|2^(8-P)·w| <= 128, |x - zp| <=
     * 255 per product) stays in int32 whatever the weights */
    int64_t NB = op->wq.block[1];
    while (qat_qop_subchannel(op) && P < 8 && (NB % (32 / P) || NB * 128 * 255 > INT32_MAX)) P *= 2;
    for (int64_t i = 0; i < n && P < 8; i++)
        while (P < 8 && (w[i] < -(1 << (P - 1)) || w[i] >= 1 << (P - 1))) P *= 2; /* an asymmetric range: wider */
    return P;
}

void qat__cg_weight_array(qat__cg *g, int i, const int8_t *w, int O, int32_t L, int P) {
    char id[32];
    snprintf(id, sizeof id, "op%d_w", i);
    if (P >= 8) {
        qat__cg_array_i8(g, id, w, (int64_t)O * L);
        return;
    }
    int32_t rb = qk_packed_row(L, P), G = 32 / P;
    uint8_t *pk = calloc((size_t)O * (size_t)rb, 1);
    if (!pk) {
        g->failed = true;
        return;
    }
    /* weight k of row o: group k / G, byte (k % G) % 4, bits ((k % G) / 4)·P */
    for (int64_t o = 0; o < O; o++)
        for (int32_t k = 0; k < L; k++) {
            int32_t r = k % G;
            pk[o * rb + k / G * 4 + r % 4] |= (uint8_t)(((uint32_t)w[o * L + k] & ((1u << P) - 1)) << (r / 4 * P));
        }
    qat__cg_printf(g, "/* %d row(s) of %ld weights, %d bits each, packed: %ld bytes a row (qk_packed_row) */\n", O,
                   (long)L, P, (long)rb);
    qat__cg_array_i8(g, id, (const int8_t *)pk, (int64_t)O * rb);
    free(pk);
}

/* The SN of kernels that requantize by qk_rqz with these n shifts and
 * accumulators of magnitude at most bound: 2 when every shift lies in
 * [-23, -2] and bound is below QAT__CG_FOLD_BOUND (no test of the sign,
 * the output's zero point folded into the nudge; on the DSP the doubled
 * accumulator of q_requant_fold's SMMLAR), and 1 - s (3 to 24) instead
 * when every shift is that one s (qk_sh: the shift a literal), 1 when every shift is negative
 * (no test of the sign), else 0. The plan sets each op's (qat__cg.sn): a
 * linear or convolution op's over its shifts with bound max |bias| +
 * 255·Σ|w| over its rows, a tabled add's over its output shift with bound
 * the largest sum of two table terms. */
static int qat__cg_sn(const int32_t *shift, int n, int64_t bound) {
    int sn = bound < QAT__CG_FOLD_BOUND ? 2 : 1;
    bool same = true;
    for (int j = 0; j < n; j++) {
        if (shift[j] >= 0) return 0;
        if (shift[j] > -2 || shift[j] < -23) sn = 1;
        same = same && shift[j] == shift[0];
    }
    return sn == 2 && same && n > 0 ? 1 - shift[0] : sn; /* qk.h's qk_sh: the one shift as a literal */
}

/* A linear or convolution op's SN: w its int8 weights, rows of the weight
 * shape's trailing dimensions. */
static int op_sn(const qat_qop *op, const int8_t *w) {
    int64_t O = op->wq.shape[0], K = 1, bound = 0;
    for (int d = 1; d < op->wq.rank; d++) K *= op->wq.shape[d];
    for (int64_t o = 0; o < O; o++) { /* |bias| + 255·Σ|w|: |x - zp| <= 255 */
        int64_t b = op->bias ? llabs((long long)op->bias[o]) : 0;
        for (int64_t k = 0; k < K; k++) b += 255 * abs(w[o * K + k]);
        bound = b > bound ? b : bound;
    }
    return qat__cg_sn(op->shift, op->n_mult, bound);
}

/* Whether every output channel of a linear or convolution op has the same
 * multiplier and shift (per-tensor weights): the generated C stores that
 * pair once, not once a channel (qk.h's MS = 0). */
static bool one_pair(const qat_qop *op) {
    for (int j = 1; j < op->n_mult; j++)
        if (op->multiplier[j] != op->multiplier[0] || op->shift[j] != op->shift[0]) return false;
    return op->n_mult > 0;
}

/* A tabled add's SN: the bound the largest sum of a term of each table. */
static int add_sn(const qat__cg *g, const qat_qop *op) {
    int64_t bound = 0;
    for (int j = 0; j < 2; j++) {
        int32_t zp = g->q->tensors[op->inputs[j]].q.zero_point;
        int64_t t = 0;
        for (int v = -128; v < 128; v++) {
            int64_t u = llabs((long long)q_mbqm((int32_t)((uint32_t)(v - zp) << op->left_shift), op->multiplier[j],
                                                op->shift[j]));
            t = u > t ? u : t;
        }
        bound += t + 1; /* either rounding's terms: they differ by at most 1 */
    }
    return qat__cg_sn(op->shift + 2, 1, bound);
}

bool qat__cg_add_tab(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    return op->kind == QAT_QOP_ADD && !g->small && qat_qtensor_numel(&g->q->tensors[op->output]) >= 1024;
}

bool qat__cg_pair_rows(const int8_t *rows, int64_t O, int64_t L, int64_t L4, int32_t zp, const int32_t *bias,
                       int8_t *wp, int32_t *bp) {
    if (L4 % 4 || L4 > L || L4 <= 0) return false;
    for (int64_t o = 0; o < O; o++) {
        const int8_t *r = rows + o * L;
        int64_t bound = 0, fold = bias[o];
        for (int64_t k = 0; k < L4; k += 2) {
            int a = r[k], b = r[k + 1], hi = b - (a < 0); /* the odd byte with the low byte's borrow undone */
            if (hi < -128) return false;                  /* 256·b + a below int16 */
            bound += 128 * (a < 0 ? -a : a) + 256 * (b < 0 ? -b : b);
            fold -= (int64_t)a * (1 + zp) + (int64_t)b * (129 + zp);
            if (wp) wp[o * L + k] = (int8_t)a, wp[o * L + k + 1] = (int8_t)hi;
        }
        if (bound >= (int64_t)1 << 23 || fold < INT32_MIN || fold > INT32_MAX) return false;
        if (wp) memcpy(wp + o * L + L4, r + L4, (size_t)(L - L4)); /* the rest as it is */
        if (bp) bp[o] = (int32_t)fold;
    }
    return true;
}

bool qat__cg_paired(const qat_qop *op, const int8_t *w, int32_t zp, int8_t *wp, int32_t *bp) {
    if (op->kind != QAT_QOP_LINEAR || op->wq.rank != 2 || qat_qop_subchannel(op)) return false;
    return qat__cg_pair_rows(w, op->wq.shape[0], op->wq.shape[1], op->wq.shape[1], zp, op->bias, wp, bp);
}

/* Op i's biases (bias), multipliers and shifts as one array, opN_q, and
 * opN_b, opN_m, opN_s pointing into it: one base address for the three (a
 * kernel's epilogue keeps one register for them, not three, or loads
 * fewer addresses from the literal pool). One multiplier and one shift
 * when the channels share them (qat__cg.ms). */
static void params_array(qat__cg *g, int i, const int32_t *bias) {
    const qat_qop *op = &g->q->ops[i];
    int64_t O = op->wq.shape[0], M = g->ms[i] ? op->n_mult : 1; /* one pair when the channels share it */
    int32_t *q = malloc(sizeof *q * (size_t)(O + 2 * M));
    char id[32];
    if (!q) {
        g->failed = true;
        return;
    }
    memcpy(q, bias, sizeof *q * (size_t)O);
    memcpy(q + O, op->multiplier, sizeof *q * (size_t)M);
    memcpy(q + O + M, op->shift, sizeof *q * (size_t)M);
    qat__cg_array_i32(g, (snprintf(id, sizeof id, "op%d_q", i), id), q, O + 2 * M);
    qat__cg_printf(g, "static const int32_t *const op%d_b = op%d_q, *const op%d_m = op%d_q + %lld, *const op%d_s = op%d_q + %lld;\n",
                   i, i, i, i, (long long)O, i, i, (long long)(O + M));
    free(q);
}

void qat__cg_paired_params(qat__cg *g, int i, const int8_t *w, const int8_t *wp, int64_t n, const int32_t *bp) {
    const qat_qop *op = &g->q->ops[i];
    int64_t O = op->wq.shape[0], before = g->const_bytes, params = 4 * (O + 2 * (int64_t)(g->ms[i] ? op->n_mult : 1));
    bool doubled = g->sn[i] >= 2;
    int32_t *b2 = doubled ? malloc(sizeof *b2 * (size_t)O) : NULL;
    char id[32];
    if (doubled && !b2) {
        g->failed = true;
        return;
    }
    /* SN 2 and above: the kernels take 2·acc (qk.h's QK_DOUBLED), the biases doubled here. |bp| is at most
     * |bias| + 256·Σ|w| (the fold's |1 + zp| <= 128 and |129 + zp| <= 256 per weight), and SN 2
     * bounds |bias| + 255·Σ|w| below 2^29: 2·|bp| < 2^30 + 2^23. */
    for (int64_t o = 0; doubled && o < O; o++) b2[o] = 2 * bp[o];
    if (!wp) qat__cg_array_i8(g, (snprintf(id, sizeof id, "op%d_w", i), id), w, n);
    qat__cg_printf(g, "#if Q_DSP /* %s the biases with the paired form's constant folded in%s */\n",
                   wp ? "each odd weight byte less the borrow of the even one before it (the paired form);" : "",
                   doubled ? ", doubled (QK_DOUBLED)" : "");
    if (wp) qat__cg_array_i8(g, (snprintf(id, sizeof id, "op%d_w", i), id), wp, n);
    params_array(g, i, doubled ? b2 : bp);
    free(b2);
    qat__cg_printf(g, "#else\n");
    if (wp) qat__cg_array_i8(g, (snprintf(id, sizeof id, "op%d_w", i), id), w, n);
    params_array(g, i, op->bias);
    qat__cg_printf(g, "#endif\n");
    g->const_bytes = before + n + params; /* one copy is compiled */
}

void qat__cg_channel_params(qat__cg *g, int i) { params_array(g, i, g->q->ops[i].bias); }

/* ---- checks ----------------------------------------------------------------------- */

/* Headers a build of the generated C may include with NAME's folder on
 * its include path, where NAME.h would be found first: C11's and Arm's
 * intrinsics and CMSIS-DSP's. */
static const char *const reserved_names[] = {
    "assert", "complex", "ctype", "errno", "fenv", "float", "inttypes", "iso646", "limits", "locale", "math",
    "setjmp", "signal", "stdalign", "stdarg", "stdatomic", "stdbool", "stddef", "stdint", "stdio", "stdlib",
    "stdnoreturn", "string", "tgmath", "threads", "time", "uchar", "wchar", "wctype", "arm_acle", "arm_neon",
    "arm_mve", "arm_fp16", "arm_bf16", "arm_sve", "arm_math", "cmsis_compiler", NULL};

bool qat_codegen_name_reserved(const char *s) {
    for (int i = 0; s && reserved_names[i]; i++)
        if (!strcmp(s, reserved_names[i])) return true;
    return false;
}

bool qat_codegen_name_ok(const char *s) {
    if (!s || !s[0] || strlen(s) > QAT_CODEGEN_MAX_NAME || (s[0] >= '0' && s[0] <= '9')) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return false;
    return !qat_codegen_name_reserved(s);
}

/* What the generator refuses beyond the runtime's plan (which refuses what
 * the runtime cannot run): sub-channel convolutions (only qk_linear has
 * the block conversions), and weights whose difference from
 * their zero point leaves int8 (the kernels keep weights in int8 and unpack
 * them in pairs). */
static qat_status check_program(const qat_qmodel *q, char *msg, size_t len) {
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (qat_qop_subchannel(op) && op->kind != QAT_QOP_LINEAR)
            return qat__cg_fail(msg, len, QAT_ERR_UNSUPPORTED,
                                "codegen: op %d (%s %s): its weights are sub-channel (several scales along a row): the "
                                "generated convolutions requantize once per output channel and have no block "
                                "conversions (docs/subchannel.md; a linear op's are generated); the integer runtime "
                                "and the hybrid engine run it",
                                i, qat_qop_kind_str(op->kind), op->name);
        if ((op->kind == QAT_QOP_LINEAR || op->kind == QAT_QOP_CONV2D) && !qat_qop_int8_weights(op, NULL))
            return qat__cg_fail(msg, len, QAT_ERR_UNSUPPORTED,
                                "codegen: op %d (%s %s): its weights minus their zero points do not fit int8 "
                                "(asymmetric 8-bit weights): the generated kernels keep weights in int8",
                                i, qat_qop_kind_str(op->kind), op->name);
    }
    return QAT_OK;
}

/* Each linear and convolution's stored weight bits (qat__cg_weight_bits),
 * and the scratch the packed convolutions unpack a block of rows into
 * (qk_rows: B·KK bytes, the largest over the ops), placed in the arena
 * after the plan's bytes, 4-byte aligned: no tensor is ever there. */
int64_t qat__cg_small_maps(const qat_qmodel *q, int i) {
    const qat_qop *op = &q->ops[i];
    const qat_qtensor *out = &q->tensors[op->output];
    int64_t plane = out->shape[1] * out->shape[2];
    bool pw = qat__fused_pool(q, i) < 0 && op->groups == 1;
    return (pw ? out->shape[0] * (qat__cg_pw_run(plane) + 1) : plane + 3) / 4 * 4;
}

int64_t qat__cg_small_scratch(const qat_qmodel *q, int i, int P) {
    const qat_qop *op = &q->ops[i];
    int64_t KK = q->tensors[op->inputs[0]].shape[0] / op->groups * op->kh * op->kw;
    bool pw = qat__fused_pool(q, i) < 0 && op->groups == 1;
    return qat__cg_small_maps(q, i) + (P >= 8 ? 0 : pw ? q->tensors[op->output].shape[0] * KK : KK);
}

bool qat__cg_uses_cols(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    if (op->kind != QAT_QOP_CONV2D || g->mode[i] != QAT__CG_PLAIN) return false;
    int C = (int)g->q->tensors[op->inputs[0]].shape[0], G = op->groups;
    int64_t KK = (int64_t)(C / G) * op->kh * op->kw;
    if (g->wbits[i] < 8) /* whole packed groups a row (qk_wload); sums of 2^(8-P)·255·2^(P-1) a tap in int32 */
        return qk_conv_uses_pairs(C, G, op->kw) && (C / G) % 4 == 0 && KK % (32 / g->wbits[i]) == 0 &&
               KK * 255 * 128 <= INT32_MAX;
    if (qk_conv_uses_pairs(C, G, op->kw)) return (C / G) % 4 == 0;
    return qat__cg_natural_cols(g, i);
}

/* Does the doubled ring copy fewer rows per output row (its sh new rows,
 * but for those landing in ring row kh - 1: sh·(kh - 1)/kh on average)
 * than the ring moves (the kh - sh rows it shares)? At stride 1, not at
 * stride 2 with kh 3. */
static bool doubled_ring_pays(int kh, int sh) { return sh * (kh - 1) < kh * (kh - sh); }

/* The ring form an op takes by the scratch it would need (doubled, plain):
 * 2 where the doubled one pays and takes at most an eighth of the
 * activations' arena, else 1 where the plain one does, else 0. */
static int ring_form(const qat__cg *g, const qat_qop *op, int64_t doubled, int64_t plain) {
    if (doubled_ring_pays(op->kh, op->stride_h) && doubled * 8 <= g->plan->arena_bytes) return 2;
    return plain * 8 <= g->plan->arena_bytes;
}

int qat__cg_ring(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    if (g->small || op->groups != 1 || !qat__cg_uses_cols(g, i)) return 0;
    if (op->kh <= op->stride_h && op->kw <= op->stride_w) return 0; /* no input shared between positions */
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]];
    int C = (int)in->shape[0], W = (int)in->shape[2];
    if (!qk_conv_uses_pairs(C, 1, op->kw)) return 0;
    return ring_form(g, op, qk_ring_bytes(C, W, op->kh, op->pad_w, 1), qk_ring_bytes(C, W, op->kh, op->pad_w, 0));
}

/* qat__cg_natural_ring's choice for op i's shape and the arena, whatever
 * its weights. */
static int natural_ring_form(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    if (g->small) return 0;
    if (op->kh <= op->stride_h && op->kw <= op->stride_w) return 0; /* no input shared between positions */
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], C4 = (C + 3) / 4 * 4, W = (int)in->shape[2], O = (int)out->shape[0];
    if (3 * C4 > 4 * C) return 0; /* at most a third more products than C */
    return ring_form(g, op, qk_padded_ring_bytes(C, W, O, op->kh, op->kw, op->pad_w, 1),
                     qk_padded_ring_bytes(C, W, O, op->kh, op->kw, op->pad_w, 0));
}

int qat__cg_natural_ring(const qat__cg *g, int i) { return qat__cg_natural_cols(g, i) ? natural_ring_form(g, i) : 0; }

bool qat__cg_natural_cols(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    if (op->kind != QAT_QOP_CONV2D || g->mode[i] != QAT__CG_PLAIN || op->groups != 1) return false;
    /* packed weights only in the ring form, which re-lays them as int8 once a run (qk_relay_c4) */
    if (g->wbits[i] < 8 && !natural_ring_form(g, i)) return false;
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    int C = (int)in->shape[0], H = (int)in->shape[1], W = (int)in->shape[2];
    int64_t cols = 4 * (((int64_t)C * op->kh * op->kw + 3) / 4 * 4); /* two int16 columns of C·kh·kw rounded up to 4 */
    return !qk_conv_uses_pairs(C, 1, op->kw) &&
           !qk_conv_uses_dw3_rows(C, (int)out->shape[0], 1, W, op->kh, op->kw, op->stride_w, op->pad_h, op->pad_w) &&
           !qk_conv_uses_pw(C, 1, H, W, op->kh, op->kw, op->stride_h, op->stride_w, op->pad_h, op->pad_w) &&
           cols * 4 <= g->plan->arena_bytes; /* at most a quarter of the activations' arena */
}

bool qat__cg_dw_rows(const qat__cg *g, int i) {
    const qat_qop *op = &g->q->ops[i];
    if (op->kind != QAT_QOP_CONV2D || g->mode[i] != QAT__CG_PLAIN) return false; /* packed taps too: read once a channel */
    const qat_qtensor *in = &g->q->tensors[op->inputs[0]], *out = &g->q->tensors[op->output];
    return qk_conv_uses_dw3_rows((int)in->shape[0], (int)out->shape[0], op->groups, (int)in->shape[2], op->kh, op->kw,
                            op->stride_w, op->pad_h, op->pad_w);
}

bool qat__cg_unscheduled(const qat__cg *g, int i) {
    return g->q->ops[i].kind == QAT_QOP_LINEAR || qat__cg_uses_cols(g, i) || qat__cg_dw_rows(g, i);
}

static qat_status plan_weights(qat__cg *g) {
    int64_t scratch = 0;
    for (int i = 0; i < g->q->n_ops; i++) { /* the small plan's modes */
        const qat_qop *op = &g->q->ops[i];
        if (!g->small || op->kind != QAT_QOP_CONV2D) continue;
        int j = qat__fused_pool(g->q, i);
        if (j >= 0) g->mode[i] = QAT__CG_FUSED, g->mode[j] = QAT__CG_IN_FUSED;
        else if (qat__conv_over_input(g->q, op) && g->plan->offset[op->inputs[0]] == g->plan->offset[op->output] &&
                 op->inputs[0] != g->q->input)
            g->mode[i] = QAT__CG_OVER_INPUT;
    }
    for (int i = 0; i < g->q->n_ops; i++) {
        const qat_qop *op = &g->q->ops[i];
        g->wbits[i] = 8;
        if (qat__cg_add_tab(g, i)) {
            scratch = scratch > 2048 ? scratch : 2048; /* qk_add_tab's two tables */
            g->sn[i] = (int8_t)add_sn(g, op);
        }
        if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) continue;
        int64_t O = op->wq.shape[0], L = op->wq.rank == 4 ? op->wq.shape[1] * op->wq.shape[2] * op->wq.shape[3]
                                                          : op->wq.shape[1];
        int8_t *w = malloc((size_t)(O * L));
        if (!w) return qat__cg_fail(g->msg, g->len, QAT_ERR_NOMEM, "codegen: out of memory");
        qat_qop_int8_weights(op, w);
        g->wbits[i] = (int8_t)qat__cg_weight_bits(op, w);
        g->sn[i] = (int8_t)op_sn(op, w);
        g->ms[i] = (int8_t)!one_pair(op);
        int32_t zp = g->q->tensors[op->inputs[0]].q.zero_point;
        if (op->kind == QAT_QOP_LINEAR) {
            g->paired[i] = !g->small && g->wbits[i] == 8 && qat__cg_paired(op, w, zp, NULL, NULL);
        } else { /* the rows as the DSP kernel the op takes reads them, where it pairs */
            int64_t rl, rl4;
            bool stored;
            int8_t *rows = qat__cg_conv_dsp_rows(g, i, w, &rl, &rl4, &stored);
            g->paired[i] = rows && qat__cg_pair_rows(rows, O, rl, rl4, zp, op->bias, NULL, NULL);
            free(rows);
        }
        free(w);
        int64_t need = 0;
        if (g->mode[i] == QAT__CG_FUSED || g->mode[i] == QAT__CG_OVER_INPUT)
            need = qat__cg_small_scratch(g->q, i, g->wbits[i]);
        else if (op->kind == QAT_QOP_CONV2D && g->wbits[i] < 8 && !qat__cg_uses_cols(g, i) && !qat__cg_dw_rows(g, i) &&
                 !qat__cg_natural_cols(g, i))
            need = qk_block((int)(O / op->groups)) * L;
        else if (g->paired[i] && op->kind == QAT_QOP_LINEAR)
            need = 2 * L; /* the input words, two per four inputs */
        else if (qat__cg_dw_rows(g, i)) { /* the whole padded plane where it takes at most 1 KiB, else three rows */
            const qat_qtensor *in = &g->q->tensors[op->inputs[0]];
            int64_t plane = qk_dw_plane_bytes((int)in->shape[1], (int)in->shape[2], op->pad_h, op->pad_w);
            g->dw_plane[i] = plane <= 1024;
            need = g->dw_plane[i] ? plane : 3 * qk_dw_row_stride((int)in->shape[2], op->pad_w);
        }
        else if (qat__cg_natural_ring(g, i))
            need = qk_padded_ring_bytes((int)g->q->tensors[op->inputs[0]].shape[0],
                                        (int)g->q->tensors[op->inputs[0]].shape[2], (int)O, op->kh, op->kw, op->pad_w,
                                        qat__cg_natural_ring(g, i) == 2);
        else if (qat__cg_natural_cols(g, i))
            need = 4 * ((L + 3) / 4 * 4); /* two int16 columns of C·kh·kw rounded up to 4 */
        else if (qat__cg_ring(g, i))
            need = qk_ring_bytes((int)g->q->tensors[op->inputs[0]].shape[0], (int)g->q->tensors[op->inputs[0]].shape[2],
                                 op->kh, op->pad_w, qat__cg_ring(g, i) == 2); /* kh (2·kh - 1) padded rows as int16 */
        else if (qat__cg_uses_cols(g, i))
            need = 4 * L; /* two int16 columns of a group's C/G·kh·kw */
        if (op->kind == QAT_QOP_CONV2D && g->wbits[i] < 8 && qat__cg_uses_cols(g, i) &&
            need < qk_block((int)(O / op->groups)) * L) /* where there is no DSP, qk_conv_pairs unpacks into it */
            need = qk_block((int)(O / op->groups)) * L;
        scratch = need > scratch ? need : scratch;
    }
    if (scratch) g->scratch_at = (g->plan->arena_bytes + 3) / 4 * 4, g->arena_bytes = g->scratch_at + scratch;
    return QAT_OK;
}

/* ---- the three files ---------------------------------------------------------------- */

/* Each file is made in memory (a memory stream) and staged whole. */
static FILE *open_out(qat__cg *g, char **buf, size_t *size) {
    *buf = NULL, *size = 0;
    FILE *f = open_memstream(buf, size);
    if (!f) qat__cg_fail(g->msg, g->len, QAT_ERR_NOMEM, "codegen: out of memory");
    return f;
}

static qat_status close_out(qat__cg *g) {
    bool bad = g->failed || ferror(g->f);
    if (fclose(g->f) != 0) bad = true;
    g->f = NULL;
    return bad ? qat__cg_fail(g->msg, g->len, QAT_ERR_NOMEM, "codegen: out of memory while generating") : QAT_OK;
}

static void shape_str(const qat_qtensor *t, char *buf, size_t len) {
    if (t->rank == 1) snprintf(buf, len, "[%lld]", (long long)t->shape[0]);
    else snprintf(buf, len, "[%lld, %lld, %lld]", (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2]);
}

static void header(qat__cg *g, const char *name, const char *up) {
    const qat_qmodel *q = g->q;
    const qat_qtensor *in = &q->tensors[q->input], *out = &q->tensors[q->output];
    char si[64], so[64];
    shape_str(in, si, sizeof si), shape_str(out, so, sizeof so);
    qat__cg_printf(g,
        "/* %s.h — generated by qat (qat export --c): do not edit.\n"
        " * The integer program of a quantized model as C99: %d ops, input %s, output %s.\n"
        " * %s_run computes the integers of qat's integer engine, bit for bit; it uses\n"
        " * one static arena of %s_ARENA_BYTES and no float (see docs/codegen.md). */\n"
        "#ifndef %s_H\n#define %s_H\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
        name, q->n_ops, si, so, name, up, up, up);
    qat__cg_printf(g, "#define %s_INPUT_SIZE %lld  /* int8 elements, %s (C, H, W order) */\n", up,
                   (long long)qat_qtensor_numel(in), si);
    qat__cg_printf(g, "#define %s_OUTPUT_SIZE %lld /* int8 elements */\n", up, (long long)qat_qtensor_numel(out));
    qat__cg_printf(g, "#define %s_ARENA_BYTES %lld /* the static arena in %s.c: activations%s */\n", up,
                   (long long)g->arena_bytes, name, g->arena_bytes > g->plan->arena_bytes ? ", unpacked weights" : "");
    /* real = scale·(q - zero point); the scales as exact hex literals */
    qat__cg_printf(g, "#define %s_INPUT_SCALE %af  /* %.9g */\n", up, (double)in->q.scale, (double)in->q.scale);
    qat__cg_printf(g, "#define %s_INPUT_ZERO_POINT (%d)\n", up, in->q.zero_point);
    qat__cg_printf(g, "#define %s_INPUT_QMIN (%d)\n#define %s_INPUT_QMAX (%d)\n", up, in->q.qmin, up, in->q.qmax);
    qat__cg_printf(g, "#define %s_OUTPUT_SCALE %af  /* %.9g */\n", up, (double)out->q.scale, (double)out->q.scale);
    qat__cg_printf(g, "#define %s_OUTPUT_ZERO_POINT (%d)\n\n", up, out->q.zero_point);
    qat__cg_printf(g,
        "/* Runs the model on one input of storage integers (%s_INPUT_SIZE, the\n"
        " * model's layout) and writes the output integers (%s_OUTPUT_SIZE).\n"
        " * 0 on success, -1 for a NULL pointer. Not reentrant: one static arena. */\n"
        "int %s_run(const int8_t *input, int8_t *output);\n\n",
        up, up, name);
    qat__cg_input_header(g, name, up);
    qat__cg_printf(g, "#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

/* A tensor's bytes in NAME_run: the caller's input, or the arena. */
static void tensor_expr(const qat__cg *g, int t, char *buf, size_t len) {
    if (t == g->q->input) snprintf(buf, len, "input");
    else snprintf(buf, len, "a + %lld", (long long)g->plan->offset[t]);
}

static qat_status source(qat__cg *g, const char *name, const char *up) {
    const qat_qmodel *q = g->q;
    qat__cg_printf(g,
        "/* %s.c — generated by qat from a quantized model: do not edit.\n"
        " * %d ops, one function each: a call to qat's kernel for it (below, the\n"
        " * runtime's portable kernels), specialized to its shapes; the activations in\n"
        " * one static arena laid out by qat's lifetime plan (tensors whose lifetimes do\n"
        " * not overlap share bytes). C99 on integers only: no float, no malloc. */\n"
        "#include <stdint.h>\n#include <string.h>\n\n#include \"%s.h\"\n\n"
        "/* ---- qat's integer kernels (src/runtime/qk.h, the runtime's portable level) ---- */\n",
        name, q->n_ops, name);
    if (q->rounding == QAT_ROUNDING_SINGLE) /* the kernels' requantization rounds the exact product once */
        qat__cg_printf(g, "#define QK_SINGLE_ROUNDING 1\n");
    if (fwrite(qat__cg_kernels, 1, qat__cg_kernels_len, g->f) != qat__cg_kernels_len) g->failed = true;
    qat__cg_printf(g, "/* ---- the model ---- */\n\n");
    qat__cg_printf(g, "/* the activations: %lld bytes, 4-byte aligned", (long long)g->plan->arena_bytes);
    if (g->arena_bytes > g->plan->arena_bytes)
        qat__cg_printf(g, "; at %lld, %lld bytes of the kernels' scratch (unpacked weight rows, the DSP's int16 columns, the small "
                       "plan's maps)",
                       (long long)g->scratch_at, (long long)(g->arena_bytes - g->scratch_at));
    qat__cg_printf(g, " */\nstatic union {\n    int32_t align;\n    int8_t b[%s_ARENA_BYTES];\n} arena;\n\n", up);
    for (int i = 0; i < q->n_ops; i++)
        if (qat__cg_uses_cols(g, i) || qat__cg_dw_rows(g, i) || g->paired[i] || qat__cg_add_tab(g, i)) { /* the scratch, 4-byte aligned */
            qat__cg_printf(g, "#define QK_COLS ((int16_t *)(void *)(arena.b + %lld))\n\n", (long long)g->scratch_at);
            break;
        }
    bool emitted[QAT_QMODEL_MAX_OPS] = {false};
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        int8_t *w = NULL;
        if (op->kind == QAT_QOP_LINEAR || op->kind == QAT_QOP_CONV2D) {
            w = malloc((size_t)(op->wq.shape[0] * (op->wq.rank == 4 ? op->wq.shape[1] * op->wq.shape[2] * op->wq.shape[3]
                                                                     : op->wq.shape[1])));
            if (!w) return qat__cg_fail(g->msg, g->len, QAT_ERR_NOMEM, "codegen: out of memory");
            qat_qop_int8_weights(op, w);
        }
        emitted[i] = true;
        switch (op->kind) {
        case QAT_QOP_CONV2D: qat__cg_conv(g, i, w); break;
        case QAT_QOP_LINEAR: qat__cg_linear(g, i, w); break;
        case QAT_QOP_MAXPOOL2D:
        case QAT_QOP_AVGPOOL2D:
            if (g->mode[i] != QAT__CG_IN_FUSED) qat__cg_pool(g, i);
            break;
        case QAT_QOP_GLOBAL_AVGPOOL: qat__cg_global_avgpool(g, i); break;
        case QAT_QOP_ADD: qat__cg_add(g, i); break;
        case QAT_QOP_CONCAT: qat__cg_concat(g, i); break;
        case QAT_QOP_MUL: qat__cg_mul(g, i); break;
        case QAT_QOP_LUT: qat__cg_lut(g, i); break;
        case QAT_QOP_RELU: qat__cg_relu(g, i); break;
        case QAT_QOP_FLATTEN:
        case QAT_QOP_KIND_COUNT: emitted[i] = false; break;
        }
        free(w);
    }
    char a[64], b[64], text[QAT__CG_TEXT_LEN];
    qat__cg_printf(g, "int %s_run(const int8_t *input, int8_t *output) {\n    int8_t *a = arena.b;\n"
                   "    if (!input || !output) return -1;\n", name);
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        if (g->mode[i] == QAT__CG_IN_FUSED) continue; /* its convolution wrote its output */
        tensor_expr(g, g->mode[i] == QAT__CG_FUSED ? q->ops[i + 1].output : op->output, b, sizeof b);
        if (!emitted[i]) { /* flatten: the plan gives it its input's bytes */
            tensor_expr(g, op->inputs[0], a, sizeof a);
            if (strcmp(a, b))
                qat__cg_printf(g, "    memmove(%s, %s, %lld); /* %s */\n", b, a,
                               (long long)qat_qtensor_numel(&q->tensors[op->output]), qat__cg_text(op->name, text));
            continue;
        }
        qat__cg_printf(g, "    op%d(", i);
        for (int j = 0; j < op->n_inputs; j++) {
            tensor_expr(g, op->inputs[j], a, sizeof a);
            qat__cg_printf(g, "%s, ", a);
        }
        qat__cg_printf(g, "%s); /* %s %s */\n", b, qat_qop_kind_str(op->kind), qat__cg_text(op->name, text));
    }
    tensor_expr(g, q->output, b, sizeof b);
    qat__cg_printf(g, "    memcpy(output, %s, %s_OUTPUT_SIZE);\n    return 0;\n}\n", b, up);
    return qat__cg_input_u8(g, name);
}

const char *qat_codegen_suffix(int k) {
    static const char *const suffix[QAT_CODEGEN_FILES] = {".h", ".c", "_io.c"};
    return k >= 0 && k < QAT_CODEGEN_FILES ? suffix[k] : NULL;
}

void qat_codegen_source_free(qat_codegen_source *s) {
    if (!s) return;
    for (int k = 0; k < QAT_CODEGEN_FILES; k++) free(s->text[k]), s->text[k] = NULL, s->size[k] = 0;
}

qat_status qat_codegen_generate(const qat_qmodel *q, const char *name, qat_codegen_source *out, char *msg,
                                size_t len) {
    return qat_codegen_generate_ex(q, name, NULL, out, msg, len);
}

qat_status qat_codegen_generate_ex(const qat_qmodel *q, const char *name, const qat_codegen_options *opt,
                                   qat_codegen_source *out, char *msg, size_t len) {
    bool small = opt && opt->small_ram;
    if (msg && len) msg[0] = '\0';
    if (!out) return qat__cg_fail(msg, len, QAT_ERR_ARG, "codegen: need a program and an output");
    memset(out, 0, sizeof *out);
    if (!q) return qat__cg_fail(msg, len, QAT_ERR_ARG, "codegen: need a program and an output");
    if (!name) name = "model";
    if (qat_codegen_name_reserved(name))
        return qat__cg_fail(msg, len, QAT_ERR_ARG, "codegen: name \"%s\" is a standard header's: %s.h would hide "
                            "<%s.h> from a build that includes its folder", name, name, name);
    if (!qat_codegen_name_ok(name))
        return qat__cg_fail(msg, len, QAT_ERR_ARG, "codegen: name \"%s\" is not a C identifier of 1..%d characters",
                            name, QAT_CODEGEN_MAX_NAME);
    char why[400];
    int64_t *offsets = NULL;
    if (q->n_tensors > 0 && q->n_ops > 0 && q->n_tensors <= QAT_QMODEL_MAX_OPS + 1 && q->n_ops <= QAT_QMODEL_MAX_OPS)
        offsets = calloc((size_t)(q->n_tensors + q->n_ops), sizeof *offsets);
    qat_plan plan;
    qat_status st = offsets ? qat_plan_program_flags(q, 1, QAT_PLAN_INPUT_OUTSIDE | (small ? QAT_PLAN_SMALL : 0u), offsets, &plan, why,
                                                   sizeof why) : QAT_ERR_FORMAT;
    if (!offsets) snprintf(why, sizeof why, "the program has %d tensors and %d ops", q->n_tensors, q->n_ops);
    if (st != QAT_OK) {
        free(offsets);
        return qat__cg_fail(msg, len, st, "codegen: %s", why);
    }
    if ((st = check_program(q, msg, len)) != QAT_OK) {
        free(offsets);
        return st;
    }
    char up[QAT_CODEGEN_MAX_NAME + 1];
    for (size_t k = 0; k <= strlen(name); k++) up[k] = (char)(name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k]);
    qat__cg g = {.q = q, .plan = &plan, .msg = msg, .len = len, .arena_bytes = plan.arena_bytes, .small = small};
    if ((st = plan_weights(&g)) != QAT_OK) {
        free(offsets);
        return st;
    }
    for (int k = 0; k < QAT_CODEGEN_FILES && st == QAT_OK; k++) {
        if (!(g.f = open_out(&g, &out->text[k], &out->size[k]))) {
            st = QAT_ERR_NOMEM;
            break;
        }
        g.failed = false;
        if (k == 0) header(&g, name, up);
        else if (k == 1) st = source(&g, name, up);
        else qat__cg_io_file(&g, name, up);
        qat_status cs = close_out(&g);
        if (st == QAT_OK) st = cs;
    }
    if (st == QAT_OK)
        out->info = (qat_codegen_info){.arena_bytes = g.arena_bytes, .weight_bytes = g.const_bytes,
                                       .input_size = qat_qtensor_numel(&q->tensors[q->input]),
                                       .output_size = qat_qtensor_numel(&q->tensors[q->output]), .n_ops = q->n_ops};
    else qat_codegen_source_free(out);
    free(offsets);
    return st;
}
