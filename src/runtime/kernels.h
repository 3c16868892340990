/* The runtime's integer kernels. Activations are storage integers in one
 * byte (signed 2..8-bit types); products take (x - zp_x)·(w - zp_w) in
 * int16 and accumulate in int32.
 *
 * The GEMM's operands are padded so its loops run whole blocks:
 *   w   [Op][Kp]  output rows, Op = O rounded up to 8, zero rows past O;
 *   col [Kp][Pp]  one row per reduction index k (im2col row, or input
 *                 feature), Pp = positions (or samples) rounded up to 16;
 *   Kp = K rounded up to 2. Weights past K are 0; col's padding rows
 *   and columns may hold anything (they meet zero weights, or give
 *   results that are not stored). */
#ifndef QAT_RUNTIME_KERNELS_H
#define QAT_RUNTIME_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "qat/runtime.h"

static inline int64_t qat__round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
#define QAT_KPAD 2  /* K: the kernels take k in pairs */
#define QAT_PPAD 16 /* P */
#define QAT_OPAD 4  /* O: the AVX2 block; w has rows up to a multiple of 8 (QAT_WROWS) */
#define QAT_WROWS 8

/* xp [C][H + 2·ph][W + 2·pw] = x - zp, 0 in the padding (real 0 is zp),
 * then QAT_IM2COL_CHUNK zeros (kernels may read that far past the planes). */
void qat__pad_s8(const int8_t *x, int C, int H, int W, int ph, int pw, int32_t zp, int16_t *xp);

/* The padded planes every convolution path reads, in one frame: groups of
 * G channels interleaved by pixel (G = 1: int16 x - zp; 2: int16 pairs; 4:
 * uint8 quads of x + 128; kernels.h's direct convolution has the pair and
 * quad layouts), the padding filled with the real 0, then the slack, and
 * each input row put in place by a row function: portable C here, AVX2 in
 * kernels_x86.c. A row function fills the pixels of one padded row from
 * the G input rows at src (channel planes cs bytes apart). The padding and
 * the slack are written only when clear is set: rows write pixels only, so
 * an op's later samples in the same planes keep its first sample's. */
typedef struct {
    int W, pw, Wp, sw; /* input width, left padding, padded width, horizontal stride (the column phases) */
    int32_t zp;
    int64_t cs;
} qat__pad_row;
typedef enum { QAT_PAD_PLAIN = 1, QAT_PAD_PAIRS = 2, QAT_PAD_QUADS = 4 } qat__pad_kind;
typedef void (*qat__pad_row_fn)(const int8_t *src, const qat__pad_row *r, void *row);
void qat__pad_planes(const int8_t *x, int C, int H, int W, int ph, int pw, int sw, int32_t zp, qat__pad_kind kind,
                     qat__pad_row_fn row, bool clear, void *dst);
void qat__pad_row_plain(const int8_t *src, const qat__pad_row *r, void *row);
void qat__pad_row_pairs(const int8_t *src, const qat__pad_row *r, void *row);
void qat__pad_row_quads(const int8_t *src, const qat__pad_row *r, void *row);
/* The AVX2 row function of a kind where the CPU has AVX2 (else the portable one). */
qat__pad_row_fn qat__pad_row_simd(qat__pad_kind kind);

/* col rows [0, K) from a padded sample xp [C, Hp, Wp], K = C·kh·kw:
 * col[(c·kh·kw + ky·kw + kx)·Pp + oy·OW + ox] = xp[c][oy·sh + ky][ox·sw + kx].
 * With stride 1 the runs are copied in whole chunks of QAT_IM2COL_CHUNK
 * elements, so a chunk may overrun its run (the next run, written after
 * it, overwrites that) and the last one may write up to
 * QAT_IM2COL_CHUNK - 1 elements past the col matrix and read as far past
 * the end of xp: both buffers need that much slack. */
#define QAT_IM2COL_CHUNK 16
void qat__im2col_s16(const int16_t *xp, int C, int Hp, int Wp, int kh, int kw, int sh, int sw, int OH, int OW,
                     int Pp, int16_t *col);

/* For o < O, p < P: out[o·so + p·sp] = clamp(zp + requant(w[o]·col[:, p] + bias[o],
 * m0[o], shift[o]), lo, hi). qat__gemm_requant picks the fastest kernel
 * this CPU runs; the _ref one is the portable C kernel (tests check that
 * every kernel gives the same integers). */
typedef struct {
    const int16_t *w, *col;
    int O, P, Kp, Pp;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *out;
    int64_t so, sp;
    bool single; /* the program's single rounding (qat_rounding); false: the contract's double rounding */
} qat__gemm_args;
void qat__gemm_requant(const qat__gemm_args *a);
void qat__gemm_requant_ref(const qat__gemm_args *a);
const char *qat__gemm_kernel_name(void);
/* Kernel i (0 portable, 1 AVX2, 2 AVX-512 VNNI), or NULL where this CPU
 * lacks it: for tests that check every kernel against the portable one. */
typedef void (*qat__gemm_fn)(const qat__gemm_args *a);
qat__gemm_fn qat__gemm_kernel(int i, const char **name);

/* The direct convolution of the AVX2 and AVX-VNNI levels (groups 1, C
 * even, horizontal stride 1 or 2; or one channel: tap pairs or quads,
 * below): no im2col. The input is padded into channel-group planes
 * of 4 bytes a pixel,
 *   int16 pairs (G = 2): xq [C/2][Hp][Wrow][2] int16, pixel (y, x) of the
 *     padded plane holding x[2cc + j][y - ph][x - pw] - zp, 0 in the padding;
 *   byte quads (G = 4, the `bytes` form): xq [C/4][Hp][Wrow][4] uint8 holding
 *     x[4cc + j][y - ph][x - pw] + 128, zp + 128 in the padding (real 0),
 * at column x of its row (stride 1: Wrow = Wp) or, stride 2, split by
 * column phase: column (x % 2)·Wh + x / 2, Wh = ceil(Wp / 2), Wrow = 2·Wh,
 * so that the pixels a tap reads for consecutive outputs are consecutive;
 * QAT_DIRECT_SLACK pixels follow (zero pairs; zp + 128 bytes). The weights
 * are groups too, w [Op/8][KG][8] int32 holding G weights w - zp_w (int16
 * pairs, first in the low half; or int8 quads, first in the low byte), KG
 * = C/G·kh·kw groups in the order kg = (cc·kh + ky)·kw + kx, rows past O
 * zero; koff[kg] = (cc·Hp + ky)·Wrow + the column of kx, the group's pixel
 * offset from a position's window origin (output (oy, ox): oy·ystep + ox,
 * ystep = sh·Wrow). Pairs: one vpmaddwd of 8 consecutive positions by a
 * broadcast weight pair gives each position's two products summed. Quads:
 * vpmaddubsw multiplies the unsigned bytes by the signed weights and sums
 * each two products in int16, which saturates unless every |w - zp_w| <=
 * 64 (then |a pair| <= 255·128 = 32 640), so the form is taken only then;
 * vpmaddwd by ones sums the pairs, and the bias is corrected for the 128 +
 * zp the bytes carry: bias - (zp + 128)·Σ_k (w_k - zp_w). At the AVX-VNNI
 * level, vpdpbusd sums the four products in int32 instead, so any int8
 * weight takes the quads. Either way the sums are the GEMM's, in the
 * output's order. A block of positions may run
 * past its row (those results are not stored), reading at most 16 pixels
 * past the planes: the slack.
 *
 * Tap pairs: one input channel at horizontal stride 2 (a stem) pairs two
 * horizontally adjacent taps of the channel instead of two channels. xq is
 * the plain padded plane, [Hp][Wp] int16 holding x - zp (0 in the padding),
 * and with Wp even, pixels (2·ox + 2j, 2·ox + 2j + 1) are the int32 pixel
 * pair ox + j of a row: consecutive for consecutive outputs. KG =
 * kh·ceil(kw/2) groups kg = ky·ceil(kw/2) + j, koff[kg] = ky·Wp/2 + j,
 * ystep = sh·Wp/2 (in pairs), weights (w[ky][2j], w[ky][2j + 1]) with 0
 * past the row: the pixel that weight meets is the next one in the plane
 * or in its slack (a block reads at most 14 int16 past the plane: within
 * the 16 zeros qat__pad_planes writes after it). At horizontal stride 1
 * the pairs overlap: xq is the pair plane, [Hp][Wp] pixels of two int16,
 * pixel (y, i) holding padded columns i and i + 1 of row y (x - zp, 0 in
 * the padding and past the row), so that consecutive outputs read
 * consecutive pixels again; koff[kg] = ky·Wp + 2j, ystep = sh·Wp, and
 * QAT_DIRECT_SLACK zero pixels follow (qat__pad_tap_pairs). A 3x3 stem
 * takes 6 pairs, 9 products of 12 (ResNet-8's: 22 µs a sample against
 * the int16 GEMM's 36 on an AVX2-only core, performance.md).
 *
 * Tap quads: one input channel at horizontal stride s of 1 or 2 in the
 * byte form (qat__direct_bytes_fit) takes four horizontally adjacent taps
 * of the channel as a quad. xq is a quad plane of Hp rows of Wq =
 * ceil(Wp / s) pixels, pixel (y, i) holding bytes s·i .. s·i + 3 of the
 * padded row y (x + 128, zp + 128 in the padding and past the row), so
 * that the quad a tap group reads is pixel ox + 4j / s for output column
 * ox: consecutive for consecutive outputs. KG = kh·ceil(kw/4) groups kg =
 * ky·ceil(kw/4) + j, koff[kg] = ky·Wq + 4j / s, ystep = sh·Wq, weights
 * (w[ky][4j .. 4j + 3]) with 0 past the row; QAT_DIRECT_SLACK pixels of
 * zp + 128 follow the plane (qat__pad_tap_quads). */
#define QAT_DIRECT_SLACK 32
static inline int qat__direct_wrow(int Wp, int sw) { return sw == 1 ? Wp : 2 * ((Wp + 1) / 2); }
static inline int qat__direct_col(int x, int Wp, int sw) { return sw == 1 ? x : x % 2 * ((Wp + 1) / 2) + x / 2; }
/* The two layouts, and how the byte form multiplies: vpmaddubsw (weights
 * within ±64), or vpdpbusd (any int8 weight: it sums four products into
 * int32, nothing saturates; AVX-VNNI or AVX-512 VNNI). */
typedef enum { QAT_DIRECT_PAIRS = 1, QAT_DIRECT_BYTES = 2, QAT_DIRECT_BYTES_VNNI = 3 } qat__direct_form;
typedef struct {
    const void *xq;
    const int32_t *w, *koff;
    qat__direct_form form;
    bool vex; /* QAT_DIRECT_BYTES_VNNI: AVX-VNNI's encoding, else AVX-512 VNNI's (prepare asks the CPU once) */
    int KG, O, OH, OW, ystep;
    const int32_t *bias, *m0, *shift; /* bias: corrected in the byte form */
    int32_t zp, lo, hi;
    int8_t *out; /* [O][OH][OW] */
    bool single; /* as qat__gemm_args' */
} qat__direct_args;
/* The AVX2 kernel where the CPU has it, else the same sums in C. */
void qat__conv_direct(const qat__direct_args *a);
/* Whether this CPU has vpdpbusd in AVX-VNNI's VEX encoding (CPUID: ask once, at prepare). */
bool qat__direct_vex(void);
void qat__conv_direct_ref(const qat__direct_args *a);

/* Depthwise convolution of one sample from its padded planes xp
 * [C][Hp][Wp] (x - zp): output channel o reads input channel o / mult;
 * w16 [O][kh·kw] (w - zp_w); y [O][OH][OW]. */
typedef struct {
    const int16_t *xp, *w16;
    int16_t
        *pairs; /* scratch of QAT_DW_SCRATCH_BYTES(Hp, Wp) for the AVX2 kernel: its tap pairs or quads
                 * (QAT_DW_PAIRS int16), then one channel's outputs on the grid, or NULL */
    const int32_t *w4, *bias4; /* qat__dw_quads: the prepared quads and corrected biases */
    const int8_t *x8; /* qat__dw_quads: the sample [C][H][W] unpadded, in place of xp (NULL), and */
    uint8_t *plane8;  /* scratch of Hp·Wp + 32 bytes for one channel's byte plane; else both NULL */
    int H, W, ph, pw; /* (x8's sizes and padding) */
    int32_t zp_in;  /* the input's zero point (the AVX-VNNI level's bytes) */
    int vnni;       /* the AVX-VNNI level's bytes: 1 vpdpbusd in AVX-VNNI's encoding, 2 in AVX-512 VNNI's; 0:
                     * none. Only where every w - zp_w is an int8 and every corrected bias an int32 */
    int C, Hp, Wp, O, kh, kw, sh, sw, OH, OW;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *y;
    bool single; /* as qat__gemm_args' */
} qat__depthwise_args;
void qat__depthwise(const qat__depthwise_args *a);
/* Whether the AVX-VNNI level's depthwise kernel takes its quads from the
 * unpadded sample (its bytes, vnni: stride 1, rows of at most 8 taps, a
 * window the AVX2 kernel takes). */
static inline bool qat__dw_quads(int vnni, int sh, int sw, int kh, int kw) {
    return vnni && sh == 1 && sw == 1 && kw <= 8 && kh * kw <= QAT_QOP_MAX_WINDOW;
}
/* Its weights as prepared after w16 (run.c): each output's kh·ceil(kw/4) quads of int8 (row ky's
 * taps 4j..4j+3, 0 past the row), [O][quads] int32, then its corrected biases [O] int32 (bias -
 * (zp_in + 128)·Σ w: the bytes carry x + 128). */
static inline int64_t qat__dw_quads_per_output(int kh, int kw) { return (int64_t)kh * ((kw + 3) / 4); }
static inline int64_t qat__dw_quads_bytes(int O, int kh, int kw) {
    return qat__round_up(O * qat__dw_quads_per_output(kh, kw) * 4, 64) + qat__round_up((int64_t)O * 4, 64);
}
#define QAT_DW_PAIR_SLACK 8
#define QAT_DW_PAIRS(Hp, Wp) (2 * ((int64_t)(Hp) * (Wp) + QAT_DW_PAIR_SLACK))
/* the grid buffer: positions up to ceil8(the last output) <= Hp·Wp + 7, rows copied 16 bytes at a time */
#define QAT_DW_SCRATCH_BYTES(Hp, Wp) (QAT_DW_PAIRS(Hp, Wp) * 2 + (int64_t)(Hp) * (Wp) + 32)

/* The portable level's linear and convolution: qk.h's kernels (the ones the
 * generated C ships), one sample at a time, int8 weights w - zp_w in the
 * layout they read: linear [O][K]; conv [O][C/G][kh][kw], or, where
 * qk_conv_uses_pairs, [O][kh·kw][C/G] with each four channels stored as
 * (c, c+2, c+1, c+3) (qk_pair_channel). */
typedef struct {
    const int8_t *w;
    int C, H, W, O, OH, OW, kh, kw, sh, sw, ph, pw, groups;
    const int32_t *bias, *m0, *shift;
    int32_t zp_in, zp, lo, hi;
    bool single; /* as qat__gemm_args' */
} qat__qk_conv_args;
void qat__qk_conv(const int8_t *x, const qat__qk_conv_args *a, int8_t *y);
/* x [K] -> y [O], the args' C = K (the other shapes unused) */
void qat__qk_linear(const int8_t *x, const qat__qk_conv_args *a, int8_t *y);
/* Whether a conv takes the channel-pair kernel; the program's weight
 * (natural index, [O][K] with K = C/G·kk, kk = kh·kw) that stored byte i
 * of the int8 weights [O][K] holds. */
bool qat__qk_conv_pairs(int C, int groups, int kw);
int64_t qat__qk_weight_index(int64_t i, int K, int kk, bool pairs);

/* Max pooling of x [C, H, W] with kh x kw windows, strides, and padding
 * that never wins (PyTorch's -inf). */
void qat__maxpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw, int8_t *y);
/* The 2x2, stride-2, unpadded case with SIMD where the CPU and the shape
 * allow (even W; tmp holds (H/2)·W bytes). false: not done. */
bool qat__maxpool2_s8_simd(const int8_t *x, int C, int H, int W, int8_t *y, int8_t *tmp);

/* Window sums of (x - zp_in), padding counting 0, requantized:
 * clamp(zp_out + requant(sum), lo, hi). keep (average pools only): the
 * pool keeps its input's quantization instead (qat_qop.keeps_scale):
 * clamp(qk_div_round(Σ x, n), lo, hi) over the raw integers of the
 * window's n positions inside the input; zp and the multiplier unused. */
typedef struct {
    int32_t zp_in, m0;
    int shift;
    int32_t zp_out, lo, hi;
    bool keep;
    bool single; /* as qat__gemm_args' */
} qat__requant_args;
void qat__avgpool_s8(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                     const qat__requant_args *r, int8_t *y);
/* y[c] = requant(Σ_{i < HW} (x[c·HW + i] - zp_in)), or with keep
 * qk_div_round(Σ_{i < HW} x[c·HW + i], HW). */
void qat__global_avgpool_s8(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y);
/* ... one channel's output from its Σ x (the SIMD kernels' sums) */
int8_t qat__global_avgpool_out(int32_t sum, int HW, const qat__requant_args *r);
/* y = clamp(zp_out + requant(x - zp_in)) over n elements (concat's inputs). */
void qat__requant_s8(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y);

/* TFLite's ADD over n elements: each input (x - zp) << left_shift scaled
 * by its multiplier, summed, requantized by the output multiplier. */
typedef struct {
    int32_t zp_a, zp_b, m_a, m_b, m_out;
    int sh_a, sh_b, sh_out, left_shift;
    int32_t zp_out, lo, hi;
    bool single; /* as qat__gemm_args' */
} qat__add_args;
void qat__add_s8(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y);

/* TFLite's MUL over one sample's n elements of a: (a - zp_a)·(b - zp_b)
 * requantized, b's element k / per (per = 1, or H·W for b of [C, 1, 1]). */
typedef struct {
    int32_t zp_a, zp_b, m0;
    int shift;
    int32_t zp_out, lo, hi;
    bool single; /* as qat__gemm_args' */
} qat__mul_args;
void qat__mul_s8(const int8_t *a, const int8_t *b, int32_t n, int32_t per, const qat__mul_args *r, int8_t *y);

/* kernels_qk.c's kernels, compiled once per rounding (R: double, single);
 * the entry points above pick one by their records' single. */
#define QAT__QKR_DECLARE(R)                                                                                     \
    void qat__qkr_avgpool_##R(const int8_t *x, int C, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw, \
                              const qat__requant_args *r, int8_t *y);                                           \
    void qat__qkr_global_avgpool_##R(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y);   \
    void qat__qkr_requant_##R(const int8_t *x, int32_t n, const qat__requant_args *r, int8_t *y);              \
    void qat__qkr_add_##R(const int8_t *a, const int8_t *b, int32_t n, const qat__add_args *r, int8_t *y);     \
    void qat__qkr_mul_##R(const int8_t *a, const int8_t *b, int32_t n, int32_t per, const qat__mul_args *r,    \
                          int8_t *y);                                                                           \
    void qat__qkr_conv_##R(const int8_t *x, const qat__qk_conv_args *a, int8_t *y);                            \
    void qat__qkr_linear_##R(const int8_t *x, const qat__qk_conv_args *a, int8_t *y);
QAT__QKR_DECLARE(double)
QAT__QKR_DECLARE(single)
/* On aarch64 Linux, the same for cores with the dot-product extension
 * (kernels_qk_dot*.c), and whether this one has it (the kernel's auxiliary
 * vector, HWCAP_ASIMDDP). */
#if defined(__aarch64__) && defined(__linux__)
#define QAT__QK_DOT 1
QAT__QKR_DECLARE(dot_double)
QAT__QKR_DECLARE(dot_single)
bool qat__cpu_dotprod(void);
#else
#define QAT__QK_DOT 0
#endif

/* y[i] = table[x[i] - qmin] (table of 256 bytes indexed from qmin). */
void qat__lut_s8(const int8_t *x, int64_t n, const int8_t *table, int32_t qmin, int8_t *y);
/* y[i] = clamp(x[i], lo, hi). */
void qat__clamp_s8(const int8_t *x, int64_t n, int32_t lo, int32_t hi, int8_t *y);

/* ---- kernel levels ---------------------------------------------------------------
 * What the runtime may use on this CPU. qat_runtime_prepare and
 * qat_runtime_run use qat__cpu_level(); the _level variants let tests run
 * one program at every level this CPU has and compare the integers.
 * Prepare and run must be given the same level (the constants' layout
 * depends on it). Every level gives the same integers. */
typedef enum {
    QAT_LEVEL_PORTABLE, /* portable C */
    QAT_LEVEL_AVX2,     /* int16 GEMM on ymm (vpmaddwd), 2x2 max pooling, the direct convolution */
    QAT_LEVEL_AVXVNNI,  /* + the direct convolution's bytes by vpdpbusd on ymm: AVX-VNNI's VEX form where
                         * the CPU has it, else (for the tests of an AVX-512 VNNI machine) the EVEX form */
    QAT_LEVEL_VNNI16,   /* + int16 GEMM with vpdpwssd on ymm */
    QAT_LEVEL_VNNI8,    /* + the int8 path (kernels_vnni8.c): vpdpbusd on zmm, vectorised requantization */
    QAT_LEVEL_COUNT
} qat__level;
qat__level qat__cpu_level(void);
const char *qat__level_name(qat__level l); /* "portable C", "AVX2", "AVX-VNNI", "AVX-512 VNNI", "AVX-512 VNNI int8" */
/* The int16 GEMM kernel of a level (the best one it has, if this CPU lacks it). */
void qat__gemm_requant_level(const qat__gemm_args *a, qat__level level);
/* Depthwise convolution at a level: the AVX2 kernel (kernels_x86.c) from QAT_LEVEL_AVX2 up. */
void qat__depthwise_level(const qat__depthwise_args *a, qat__level level);
/* TFLite's ADD at a level: the AVX2 loop (kernels_x86.c) from QAT_LEVEL_AVX2 up (VNNI8 has its table kernel). */
void qat__add_s8_level(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, int8_t *y, qat__level level);
/* Whether the AVX2 loop takes each input's term in 32-bit lanes (the
 * multiplier split at 31 - left_shift: 8 <= left_shift <= 20, no left
 * shift in a multiplier), not as 64-bit products: for the tests. */
bool qat__add_split_avx2(const qat__add_args *r);
/* That form's term of 256 input bytes x, out[i] = MBQM((x[i] - zp) <<
 * left_shift, m, shift) (8 <= left_shift <= 20, -31 <= shift <= 0): for
 * the tests, which compare it with the scalar definition on every byte. */
void qat__add_terms_avx2(const int8_t *x, int32_t zp, int32_t m, int shift, int left_shift, bool single, int32_t *out);
/* Global average pooling at a level: the AVX2 sums (kernels_x86.c) from QAT_LEVEL_AVX2 up. */
void qat__global_avgpool_s8_level(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y,
                                  qat__level level);
void qat__runtime_prepare_level(const qat_qmodel *q, const qat_plan *plan, void *consts, qat__level level);
qat_status qat__runtime_run_level(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena,
                                  void *scratch, int64_t n, qat__level level);
/* Ops [first, end) only (the per-op profile of bench_ops). */
qat_status qat__runtime_run_ops(const qat_qmodel *q, const qat_plan *plan, const void *consts, void *arena,
                                void *scratch, int64_t n, qat__level level, int first, int end);
/* How prepare chose to run a linear or conv2d op (op_consts: its prepared
 * constants): "int8" (the int8 path), "qk" (qk.h's kernels), "direct" or
 * "bytes" (the direct convolution's two forms), "lanes" (depthwise with
 * the channels in the lanes), "int16" (im2col and the
 * int16 GEMM), "sub" (sub-channel kernels); "" for other ops. */
const char *qat__runtime_op_path(const qat_qop *op, const void *op_consts);

/* ---- chunks of samples ------------------------------------------------------------
 * The executor runs the whole program on a chunk of samples at a time, so
 * that a chunk's activations stay in the L2 cache from one op to the next
 * (op by op over a batch of 64, each op's input had left L2: measured 20 %
 * of the time). The input, the output and the tensors that share their
 * bytes (flatten views, in-place ops) stay in the arena; every other
 * tensor lives in a sub-arena in scratch, at its planned per-sample offset
 * times the chunk's size: the plan is per sample and scales with any batch.
 * Scratch is [the ops' working memory][the sub-arena][a flag per tensor].
 * 512 KiB: half the L2 of the machine it was tuned on (128 KiB to 1 MiB
 * measured; 512 the best for the three graph models). */
#define QAT_CHUNK_BYTES (512 * 1024)
static inline int qat__chunk_samples(int64_t per_sample, int max_batch) {
    int64_t m = QAT_CHUNK_BYTES / (per_sample > 0 ? per_sample : 1);
    return (int)(m < 1 ? 1 : m > max_batch ? max_batch : m);
}
/* Bytes of scratch after the ops' working memory: the sub-arena and the flags. */
static inline int64_t qat__chunk_scratch(int64_t per_sample, int max_batch, int n_tensors, int64_t *sub_bytes) {
    *sub_bytes = qat__round_up(per_sample * qat__chunk_samples(per_sample, max_batch), 64);
    return *sub_bytes + qat__round_up(n_tensors, 64);
}

/* The sizes of a linear or conv2d op, for the planner and the executor:
 * conv input [C, H, W] padded to [C, Hp, Wp], output [O, OH, OW] in
 * `groups` groups of Og outputs; K = C/groups·kh·kw products per output
 * (linear: its input features), Kp = K rounded up to 2, Pp = positions
 * (linear: samples) rounded up to 16; depthwise: one input channel per
 * group, run by the direct kernel. */
typedef struct {
    int C, H, W, Hp, Wp, O, OH, OW, groups, Og, kk, K, Kp, Pp;
    bool depthwise;
} qat__op_geom;
void qat__op_geometry(const qat_qmodel *q, const qat_qop *op, int max_batch, qat__op_geom *g);

/* ---- Winograd (kernels_wino.c) -----------------------------------------------------
 * The AVX2 level's 3x3 convolutions of stride 1 (groups 1, C even, at
 * least QAT_WINO_MIN_CHANNELS) as F(2x2, 3x3) in integers: the output in
 * tiles of 2x2, tile (ty, tx) at outputs (2ty + i, 2tx + j), read from
 * the 4x4 patch d of padded input at rows 2ty..2ty + 3, columns
 * 2tx..2tx + 3. With
 *   B^T = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]],
 *   2G  = [[2,0,0], [1,1,1], [1,-1,1], [0,0,2]],
 *   A^T = [[1,1,1,0], [0,1,-1,-1]],
 * V = B^T d B per input channel (d = x - zp, 0 in the padding),
 * U = (2G) g (2G)^T per output and input channel (g = w - zp_w), and
 * 4·y = A^T (Σ_c U_c ⊙ V_c) A, exactly: y is each output's sum of the
 * direct convolution. Element e = 4i + j of the 4x4 transforms.
 * Bounds (why nothing overflows; qat__wino_bounds_fit checks them at
 * prepare, else the direct convolution runs): |V| <= 4·max|d| (max|d|
 * over every int8 byte, not the tensor's storage range: a program's
 * input bytes are the caller's; at most 255, so 1020) and |U| <=
 * 9·max|g| must be int16, so a vpmaddwd
 * pair sum is within 2·32767² (no -32768 operand); the int32 sums may
 * wrap, but every step is a ring operation, and the result 4·y is within
 * int32 when 36·C·max|d|·max|g| < 2^31, so it and y = (4·y) >> 2 are
 * exact.
 * Layouts (qat__wino_geometry): tx = ceil(OW/2) tiles a row, ty rows, T
 * tiles t = ty'·tx + tx' in all, the input transform's chunks of 8 tiles
 * a row (the last overlapping the one before; a row of fewer than 8 runs
 * as 8, its last lanes the next row's tiles, which that row writes again)
 * and Tg = T rounded up to 8 lanes of products:
 *   planes [C/2][Hw][Ww] int32, a pixel two int16 (channels 2cc, 2cc + 1)
 *     of x - zp at rows 0..Hp - 1, Hw = 2·ty + 2 >= Hp rows and Ww =
 *     2·tx + 2 >= Wp columns (0 past the padded input), the columns split
 *     by phase as the direct convolution's stride 2 (column x at
 *     (x % 2)·Ww/2 + x/2), then QAT_WINO_SLACK zero pixels;
 *   V [16][C/2][Ts] int32 (pairs), U [16][O/4][C/2][4] int32 (pairs, O
 *     rounded up to 4, zeros past O), M [16][O][Ts] int32 (O rounded up
 *     to 4), Ts >= every lane a chunk touches.
 * The sums are the direct convolution's; the stores requantize as its
 * blocks do (requant_x86.h). 16 vpmaddwd per 4 outputs a channel pair
 * instead of 36. */
#define QAT_WINO_MIN_CHANNELS 8 /* fewer: the transforms outweigh the products saved */
#define QAT_WINO_SLACK 32       /* pixels read past the planes: at most 8 (a row's 8-tile chunks, the last lanes) */
typedef struct {
    int tx, ty, T, Ww, Hw;
    int end; /* lanes the input transform writes: T, or with rows of fewer than 8 tiles T - tx + 8 */
    int Tg;  /* lanes the products compute: T rounded up to 8 (the transform writes them) */
    int Ts;  /* V's and M's rows: end and Tg rounded up to 8 (M's lanes past Tg: never written, never stored) */
} qat__wino_geom;
typedef struct {
    qat__op_geom g;
    qat__direct_args rq; /* O, OH, OW, bias, m0, shift, zp, lo, hi, single, out: the requantization */
    int32_t *planes, *v, *m; /* scratch: qat__wino_layout */
    const int32_t *u;        /* qat__wino_prepare's */
} qat__wino_args;
bool qat__wino_fits(const qat_qop *op, const qat__op_geom *g);
/* The bounds above, for this op's weights and its input's zero point zp_in. */
bool qat__wino_bounds_fit(int32_t zp_in, const qat_qop *op, const qat__op_geom *g);
qat__wino_geom qat__wino_geometry(const qat__op_geom *g);
int64_t qat__wino_const_bytes(const qat__op_geom *g);
int64_t qat__wino_scratch_bytes(const qat__op_geom *g); /* planes, V, M */
/* The args' g and its scratch pointers (planes, V, M) in scratch. */
qat__wino_args qat__wino_layout(const qat__op_geom *g, void *scratch);
void qat__wino_prepare(const qat_qop *op, const qat__op_geom *g, int32_t *u);
void qat__wino_pad(const int8_t *x, const qat__op_geom *g, int ph, int pw, int32_t zp, qat__pad_row_fn row,
                   bool clear, int32_t *planes); /* clear: qat__pad_planes' */
void qat__conv_wino(const qat__wino_args *a);
/* ---- depthwise convolution of small maps (kernels_dw_lanes.c) ----------------------
 * A depthwise op with one output per channel and at most
 * QAT_DW_LANES_MAX_POSITIONS output positions (a MobileNet's 4x4, 2x2 and
 * 1x1 maps of up to 1024 channels) runs, from the AVX2 level up, with the
 * channels in the lanes: the sample laid out position-major in scratch
 * (t[p][c] = x - zp_in, 0 in the padding and past C, C rounded up to 16),
 * each output position's 16 channels one vpmaddwd per pair of taps (the
 * window's taps paired in order, a lone last one against a zero weight),
 * requantized lane by lane. The plane-by-plane kernel spends such a
 * channel's time on its setup: 1 to 16 outputs each. */
#define QAT_DW_LANES_MAX_POSITIONS 16
bool qat__dw_lanes_fits(const qat_qop *op, const qat__op_geom *g);
int64_t qat__dw_lanes_const_bytes(const qat__op_geom *g);
int64_t qat__dw_lanes_scratch_bytes(const qat__op_geom *g);
/* Each block of 16 channels' tap-pair weights and requantization constants (kernels_dw_lanes.c's
 * layout). */
void qat__dw_lanes_prepare(const qat_qop *op, const qat__op_geom *g, uint8_t *c);
typedef struct {
    qat__op_geom g;
    const int8_t *x;  /* one sample [C][H][W] */
    const uint8_t *consts; /* qat__dw_lanes_prepare's */
    int16_t *scratch; /* qat__dw_lanes_scratch_bytes, zeroed by the caller before an op's first sample:
                       * the kernel writes the input's pixels only */
    int32_t zp_in;
    int kw, sh, sw, ph, pw;
    const int32_t *bias, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *y; /* [C][OH][OW] */
    bool single;
} qat__dw_lanes_args;
void qat__dw_lanes(const qat__dw_lanes_args *a);

/* Whether a conv2d op may run in the direct convolution (groups 1, C even,
 * horizontal stride 1 or 2; or one channel: tap pairs or quads, below),
 * and the bytes of its constants (w, then koff) and of its padded planes
 * with their slack, in any form. */
bool qat__direct_fits(const qat_qop *op, const qat__op_geom *g);
/* ... in tap pairs (one input channel, horizontal stride 1, or 2 with Wp even) */
static inline bool qat__direct_tap_pairs(const qat_qop *op, const qat__op_geom *g) {
    return op->kind == QAT_QOP_CONV2D && g->groups == 1 && g->C == 1 &&
           (op->stride_w == 1 || (op->stride_w == 2 && g->Wp % 2 == 0));
}
/* ... in tap quads (one input channel, horizontal stride 1 or 2; the byte form only) */
static inline bool qat__direct_tap_quads(const qat_qop *op, const qat__op_geom *g) {
    return op->kind == QAT_QOP_CONV2D && g->groups == 1 && g->C == 1 && op->stride_w <= 2;
}
/* The pixels of a row of tap pairs (Wp / 2) or quads (Wq). */
static inline int qat__taps_width(int Wp, int sw) { return (Wp + sw - 1) / sw; }
/* The quad plane of one channel x [H][W] (kernels.h, tap quads) at dst,
 * bytes: qat__tap_quads_bytes; its slack included. */
void qat__pad_tap_quads(const int8_t *x, int H, int W, int ph, int pw, int sw, int32_t zp, uint8_t *dst);
static inline int64_t qat__tap_quads_bytes(int Hp, int Wp, int sw) {
    return ((int64_t)Hp * qat__taps_width(Wp, sw) + QAT_DIRECT_SLACK) * 4;
}
/* The pair plane of one channel x [H][W] (kernels.h, tap pairs at
 * horizontal stride 1) at dst, qat__tap_quads_bytes(Hp, Wp, 1) bytes (the
 * same count: four bytes a pixel), its slack included. */
void qat__pad_tap_pairs(const int8_t *x, int H, int W, int ph, int pw, int32_t zp, int16_t *dst);
/* ... as a 1x1 convolution of stride 1 over the input's even rows and
 * columns, copied out first (a 1x1 of stride 2 without padding: a
 * shortcut; channel pairs or quads: one channel takes the tap pairs) */
static inline bool qat__direct_subsampled(const qat_qop *op, const qat__op_geom *g) {
    return g->C % 2 == 0 && op->kh == 1 && op->kw == 1 && op->stride_h == 2 && op->stride_w == 2 && op->pad_h == 0 &&
           op->pad_w == 0;
}
/* The direct convolution's groups of G (2: pairs, 4: quads) per output: C/G·kh·kw, or (one channel) kh·ceil(kw/G)
 * tap pairs or quads. */
static inline int qat__direct_groups(const qat_qop *op, const qat__op_geom *g, int G) {
    return g->C == 1 ? op->kh * ((op->kw + G - 1) / G) : g->C / G * g->kk;
}
/* ... and its byte form (C % 4 == 0 or tap quads, every w - zp_w within
 * ±64, or, with vnni, within int8). */
bool qat__direct_bytes_fit(const qat_qop *op, const qat__op_geom *g, bool vnni);
int64_t qat__direct_const_bytes(const qat_qop *op, const qat__op_geom *g);
int64_t qat__direct_scratch_bytes(const qat_qop *op, const qat__op_geom *g);
/* Pointwise convolutions of small maps (1x1, stride 1, no padding, fewer
 * than 16 positions a sample) run the positions of B samples as one row
 * of B·P (B = qat__direct_batch: 64 positions or more, at most
 * max_batch samples), so that the kernel's blocks of 16 positions are
 * full: the samples' channels gathered into [C][B·P] bytes, the outputs
 * into [O][B·P], then copied out to each sample. Their koff address
 * planes of B·P pixels. Scratch: the planes, then the two buffers. */
int qat__direct_batch(const qat_qop *op, const qat__op_geom *g, int max_batch);
int64_t qat__direct_batch_scratch_bytes(const qat__op_geom *g, int B);
int64_t qat__direct_batch_planes_bytes(const qat__op_geom *g, int B);
/* Where a subsampled input's int8 copy starts in the scratch: after the planes of its pixels. */
static inline int64_t qat__direct_subsampled_at(const qat__op_geom *g) {
    return qat__round_up(((int64_t)g->C / 2 * g->OH * g->OW + QAT_DIRECT_SLACK) * 4, 64);
}

/* ---- the int8 path ------------------------------------------------------------------
 * Products of unsigned activations u = x + 128 (x ^ 0x80) and signed int8
 * weights w8 = w - zp_w, four at a time (vpdpbusd: 64 per zmm instruction,
 * four times the int16 path's). Where the portable kernel sums
 * Σ (x - zp)·w8, this one sums Σ u·w8 and corrects it exactly:
 *     Σ_k (x_k - zp)·w8_k = Σ_k u_k·w8_k - (128 + zp)·Σ_k w8_k,
 * the last term folded into the bias at prepare time (bias8). The int32
 * sums wrap (vpdpbusd does not saturate), so every partial sum is the
 * portable one modulo 2^32; the planner bounds the true sum plus bias by
 * K·255·255 + |bias| <= INT32_MAX, so the final int32 is the portable
 * kernel's sum exactly, whatever the intermediate values.
 * The path runs where every w - zp_w fits int8 (qat_qop_int8_weights): the
 * symmetric weights of <= 8-bit types always do. Padding is u = zp + 128
 * (real 0, like the portable path's x - zp = 0).
 *
 * Layouts: a "column" is 4 bytes (4 reduction indices) of one output
 * position. Convolutions whose group has a multiple of 4 channels read
 * pixels of 4 channels (NC4HW4-like planes, "dense4"): reduction index
 * k = ((c4·kh + ky)·kw + kx)·4 + c%4, and the GEMM reads each (c4, ky, kx)
 * row straight from the padded planes when that wastes little (implicit
 * im2col), else from a compact im2col copy. Other convolutions (the first
 * layer's single channel) take k in the weight's natural order
 * ((c·kh + ky)·kw + kx), padded to a multiple of 4 with zero weights
 * ("generic"). The planes make every tap one contiguous run of a grid
 * of positions q = (s·Hq + oy)·Wq + ox (sample s, output row oy, column
 * ox); positions with ox >= OW or oy >= OH are computed and dropped (the
 * position map). Two layouts:
 *  - packed (stride 1, "same"-like padding: ph + 1 <= kh <= 2·ph + 1, the
 *    same across): rows of W pixels and pw padding pixels, samples of H
 *    rows and ph padding rows, after ph padding rows and pw padding pixels
 *    (front). The padding between two rows (samples) is the right (bottom)
 *    padding of one and the left (top) padding of the next: no window
 *    reaches further. Tap (ky, kx) of position q is pixel
 *    q + ky·Wq + kx - pw from the origin (Hq = H + ph, Wq = W + pw);
 *  - phases (any other): the padded input split by stride phase,
 *        plane(c4, py, px)[s·Hq + qy][qx] = padded pixel (qy·sh + py, qx·sw + px) of sample s,
 *    and tap (ky, kx) of position q is plane(c4, ky % sh, kx % sw) + q + (ky / sh)·Wq + kx / sw. */

/* One output channel's requantization, prepared for the vector kernels:
 * zp + qat_multiply_by_quantized_multiplier(acc + bias, m0, shift) is, with x = (acc + bias) << left
 * (saturated; shift > 0 only) and P = x·m0 in 64 bits,
 *     (P + n - [P < 0]·c) >> s,
 * with zp·2^s inside n when that cannot overflow (fold; kernels_vnni8.c
 * gives the proof), then the clamp. The kernels start their sums at bias.
 * The single rounding (qat_multiply_by_quantized_multiplier_single) is the
 * same form with left = 0, n = 2^(s-1), c = 0 and s = 31 - shift.
 * 64 bytes: one line. */
typedef struct {
    int64_t m0, n, c, s;
    int32_t bias, left, zp, fold;
    int32_t unused[4];
} qat__rq;
/* lo: the clamp's lower bound; lo >= zp drops the [P < 0]·c term (c = 0):
 * every result it would change is at most zp, and clamps to lo alike. */
qat__rq qat__rq_make(int32_t bias, int32_t m0, int shift, int32_t zp, int32_t lo, bool single);

/* Every w - zp_w of a linear/conv2d op fits int8. */

/* How the int8 path runs one linear/conv2d op (qat__i8_geometry). */
typedef enum { QAT_I8_LINEAR, QAT_I8_DENSE4, QAT_I8_GENERIC, QAT_I8_DEPTHWISE } qat__i8_kind;
typedef struct {
    qat__i8_kind kind;
    bool implicit;      /* dense4: the GEMM reads the planes (no im2col copy) */
    int K4;             /* reduction groups of 4 (depthwise: tap groups per channel, kh·G) */
    int G;              /* depthwise: groups of 4 taps per kernel row */
    int R, TT;          /* the GEMM tile: R output rows (linear: samples) x 16·TT positions (linear: outputs) */
    int Op;             /* output rows rounded up to R (linear: outputs rounded up to 16·TT) */
    int m;              /* samples per pass (the planes and columns of m samples at a time) */
    int pix;            /* bytes per plane pixel: 4 (dense4: 4 channels), 1 (generic, depthwise) */
    bool packed;        /* the packed layout (else phases) */
    int64_t front;      /* packed: bytes before a stack's origin (>= pw pixels, all padding) */
    int phy, phx;       /* stride phases of the planes (depthwise: rows only, phx = 1) */
    int Hq, Wq;         /* rows per sample and row pitch (pixels) of a phase plane */
    int Wg, step;       /* the grid's row pitch in positions, and plane pixels per position
                         * (depthwise with horizontal stride sw: Wq = Wg·sw, step sw; else Wg = Wq, step 1) */
    int64_t plane;      /* bytes of one (channel group, phase) stack of m samples, with slack */
    int64_t Q;          /* positions computed for m samples (the grid up to the last valid one) */
    int64_t P;          /* valid positions per sample */
    int64_t colpitch;   /* explicit columns: bytes per row k4 */
    int64_t max_segs;   /* of the position map */
    /* scratch, in bytes from its start: planes, explicit columns, the GEMM's
     * row offsets koff [K4], the planes' offsets of each row (ksrc [K4], or
     * generic: of each k [4·K4]; depthwise: the taps [K4]), the position map */
    int64_t off_planes, off_col, off_koff, off_ksrc, off_first, off_seg, scratch;
    /* constants: corrected bias [rows] int32, the packed weights, then
     * (conv2d) a qat__rq per output channel (rq_offset) */
    int64_t rq_offset, const_bytes;
} qat__i8_geom;
void qat__i8_geometry(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, int max_batch, qat__i8_geom *i8);

/* Fills an op's int8 constants (the layout of qat__i8_geom): bias8 and the packed weights:
 *   dense4/generic [Op/R][K4][R][4] int8;  depthwise [O][kh][G][4] int8 (taps kx = 4g + j);
 *   linear [Op/16][K4][16][4] uint8 = w8 + 128 (0 past K), see qat__linear8_args. */
void qat__i8_prepare(const qat_qmodel *q, const qat_qop *op, const qat__op_geom *g, const qat__i8_geom *i8,
                     void *consts);

/* The position map: which computed positions are stored, and where.
 * Positions come in chunks of 16 (one zmm of int32 sums); chunk j's
 * segments are seg[first[j] .. first[j + 1]): the lanes set in mask, in
 * order, go to dst, dst + 1, ... (dst: element offset in output channel
 * 0). Lanes of dropped positions between two rows of one sample leave a
 * hole in one segment; a new segment starts where the outputs jump (the
 * next sample). */
typedef struct {
    int64_t dst;
    uint32_t mask;
} qat__seg;
typedef struct {
    int64_t chunks;
    int32_t *first; /* [chunks + 1] */
    qat__seg *seg;
} qat__posmap;
/* m samples on a grid of rows of Wq positions, Hq rows per sample (a
 * sample's positions start at s·Hq·Wq); valid rows oy < OH and columns
 * ox < OW go to s·out_n + oy·OW + ox. Returns the positions spanned. */
int64_t qat__posmap_build(int m, int Hq, int Wq, int OH, int OW, int64_t out_n, qat__posmap *map);
/* Segments a map of these dimensions can need at most. */
int64_t qat__posmap_max_segs(int m, int Hq, int Wq, int OH, int OW);

/* The padded, stride-phase-split planes of m samples (layout above) from
 * x [m][C][H][W] int8 (samples in_n apart): pix = 4 (dense4: channels
 * interleaved by 4, C % 4 == 0) or 1 (one channel per plane). Stack
 * (c, py, px) starts at dst + ((c / pix)·phy·phx + py·phx + px)·plane;
 * pixels outside the input are zp + 128; bytes past the m samples in a
 * stack are zeroed up to the stack's end. */
typedef struct {
    int C, H, W, ph, pw, sh, sw, kh, kw; /* phases no tap reads (py >= kh, px >= kw) are not built */
    int phy, phx, Hq, Wq, pix, m;
    bool packed;
    int64_t in_n, plane, front;
    int32_t zp;
} qat__planes_args;
void qat__planes_u8(const int8_t *x, const qat__planes_args *a, uint8_t *dst);

/* Explicit columns of m samples from the planes: row k4 (colpitch bytes
 * apart) holds each valid position's 4 bytes in order s·P + oy·OW + ox,
 * then zeros to the 64-position tiles' end. dense4: the 4 bytes are the
 * pixel at ksrc[k4] + 4·((s·Hq + oy)·Wq + ox); generic: byte j is the
 * pixel at ksrc[4·k4 + j] + (s·Hq + oy)·Wq + ox, 0 for 4·k4 + j >= K. */
typedef struct {
    bool dense4;
    int K, K4, m, Hq, Wq, OH, OW;
    int64_t colpitch;
} qat__columns_args;
void qat__columns_u8(const uint8_t *planes, const int32_t *ksrc, const qat__columns_args *a, uint8_t *col);

/* The GEMM of the conv paths, requantized:
 *   out[o·so + dst(q)] = clamp(zp + requant(Σ_k4 Σ_j w[o][k4][j]·col(k4, q)[j] + bias8[o]))
 * col(k4, q) = the 4 bytes at col + koff[k4] + 4·q; w packed [Op/R][K4][R][4]
 * (rows >= O zero). Positions are computed in tiles of 16·TT; col must be
 * readable 64·TT bytes past every row's last position. */
typedef struct {
    const uint8_t *col;
    const int32_t *koff;
    const int8_t *w;
    int K4, O, R, TT;
    int64_t Q;
    const qat__rq *rq; /* [O]: the x86 kernel's form of bias8, m0 and shift */
    const int32_t *bias8, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *out;
    int64_t so;
    const qat__posmap *map;
    bool single; /* as qat__gemm_args' (the kernels' rq records carry it already) */
} qat__gemm8_args;
void qat__gemm8_ref(const qat__gemm8_args *a);

/* Depthwise: output channel o reads input channel o / mult, its stack at
 * planes + (o / mult)·cstride; position q's tap row t (t = ky·G + g) is the
 * 4 bytes at tap[t] + step·q:
 *   out[o·so + dst(q)] = clamp(zp + requant(Σ_t Σ_j w[o][t][j]·byte(tap[t] + step·q + j) + bias8[o])). */
typedef struct {
    const uint8_t *planes;
    int64_t cstride;
    const int32_t *tap; /* [T] byte offsets in a channel's stacks */
    int T, step, mult, O;
    const int8_t *w;    /* [O][T][4] */
    int64_t Q;
    const qat__rq *rq;  /* [O] */
    const int32_t *bias8, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *out;
    int64_t so;
    const qat__posmap *map;
    bool single; /* as qat__gemm_args' (the kernels' rq records carry it already) */
} qat__dw8_args;
void qat__dw8_ref(const qat__dw8_args *a);

/* Linear: lanes are outputs, rows are samples. wu = w8 + 128 (uint8,
 * [Op/16][K4][16][4], 0 past K), the samples' raw int8 rows are the
 * signed operand, and the correction is per sample:
 *   Σ_k (x_k - zp)·w8_k = Σ_k wu_k·x_k - 128·Σ_k x_k - zp·Σ_k w8_k,
 * the last term in bias8 (linear: bias - zp·Σ w8), Σ_k x_k summed per
 * sample. out[s·O + o] = clamp(zp_out + requant(...)). Sample s's row is
 * x + s·K, the last one `last` when given (a copy padded to 4·K4 bytes:
 * rows are read in whole groups of 4). */
typedef struct {
    const int8_t *x, *last;
    int K, K4, O, n, TT;
    const uint8_t *wu;
    const int32_t *bias8, *m0, *shift;
    int32_t zp, lo, hi;
    int8_t *out;
    bool single; /* as qat__gemm_args' */
} qat__linear8_args;
void qat__linear8_ref(const qat__linear8_args *a);

/* The int8 path's x86 kernels (kernels_vnni8.c), for CPUs with AVX-512
 * VNNI, VBMI and VBMI2 (qat__cpu_level() == QAT_LEVEL_VNNI8). */
void qat__gemm8_vnni(const qat__gemm8_args *a);
void qat__dw8_vnni(const qat__dw8_args *a);
void qat__linear8_vnni(const qat__linear8_args *a);
void qat__planes_u8_avx512(const int8_t *x, const qat__planes_args *a, uint8_t *dst);
void qat__columns_u8_avx512(const uint8_t *planes, const int32_t *ksrc, const qat__columns_args *a, uint8_t *col);
/* TFLite's ADD with each input's rescaled term looked up: qat_multiply_by_quantized_multiplier((x -
 * zp) << left_shift, m, shift) depends on the input byte alone, so it is a
 * table of 256 int32, kept as 4 planes of bytes (byte k of every entry)
 * that vpermi2b indexes: tables [2][4][256], input a then b, entry x + 128.
 * The add's constants (qat__add_tables fills them at prepare). */
#define QAT_ADD_TABLE_BYTES 2048
void qat__add_tables(const qat__add_args *r, uint8_t *tables);
void qat__add_s8_tab_avx512(const int8_t *a, const int8_t *b, int64_t n, const qat__add_args *r, const uint8_t *tables,
                            int8_t *y);
void qat__requant_s8_avx512(const int8_t *x, int64_t n, const qat__requant_args *r, int8_t *y);
void qat__global_avgpool_s8_avx512(const int8_t *x, int C, int HW, const qat__requant_args *r, int8_t *y);
/* 16 lanes of qat_requantize with one multiplier and shift, for the tests */
void qat__requant16_avx512(const int32_t *acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi, bool single,
                           int32_t *y);
#endif
