/* The C generator's private interface: the state of one generation and
 * the emitters of each op kind (emit_conv.c, emit_ops.c). Every emitter
 * writes one static function `opN` into NAME.c whose integers equal the
 * runtime kernel's (src/runtime/kernels.c) for that op, bit for bit. */
#ifndef QAT_CODEGEN_INTERNAL_H
#define QAT_CODEGEN_INTERNAL_H

#include <stdio.h>

#include "qat/codegen.h"

typedef struct {
    const qat_qmodel *q;
    const qat_plan *plan;
    FILE *f;               /* the file being written */
    bool failed;           /* a write failed */
    int64_t const_bytes;   /* static const bytes written (flash besides code) */
    int64_t scratch_at;    /* the arena's offset of the packed convolutions' unpacked rows */
    int64_t arena_bytes;   /* the whole arena: the plan's, then the scratch */
    int8_t wbits[QAT_QMODEL_MAX_OPS]; /* each op's stored weight bits: 8, or packed 4 or 2 */
    bool small;            /* the small-RAM plan (QAT_PLAN_SMALL) */
    int8_t mode[QAT_QMODEL_MAX_OPS];  /* QAT__CG_*: how op i runs under that plan */
    bool paired[QAT_QMODEL_MAX_OPS];  /* a linear op run by qk_linear_paired on the DSP (qat__cg_paired) */
    bool dw_plane[QAT_QMODEL_MAX_OPS]; /* a qat__cg_dw_rows op copying whole planes (qk_dwconv3_rows' PL) */
    int8_t sn[QAT_QMODEL_MAX_OPS];     /* the SN of a linear, conv or tabled add op (qat__cg_sn), set by the plan */
    int8_t ms[QAT_QMODEL_MAX_OPS];     /* a linear or conv op's multiplier step (qk.h's MS): 1, a multiplier and
                                        * shift per output channel; 0, every channel's the same, stored once */
    char *msg;             /* the caller's message buffer (may be NULL) */
    size_t len;
} qat__cg;

/* How an op runs in NAME.c (qat__cg.mode). */
enum {
    QAT__CG_PLAIN,       /* its own function, output in its own bytes (or the plan's in-place ops') */
    QAT__CG_OVER_INPUT,  /* a convolution written over its input through the scratch (plan_rules.h) */
    QAT__CG_FUSED,       /* a convolution that computes the max pool after it, a channel at a time */
    QAT__CG_IN_FUSED     /* that max pool: no code of its own */
};

/* The text of src/runtime/qk.h, the kernels every generated NAME.c carries
 * (embedded at build time: cmake/embed_text.cmake). */
extern const unsigned char qat__cg_kernels[];
extern const unsigned long qat__cg_kernels_len;

/* Writes the one-line message (printf-style) into msg, returns st. */
#define qat__cg_fail(msg, len, st, ...) qat_message(msg, len, st, __VA_ARGS__)

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
void qat__cg_printf(qat__cg *g, const char *fmt, ...);

/* static const int8_t/int32_t NAME[n] = {...}; counted in const_bytes. */
void qat__cg_array_i8(qat__cg *g, const char *ident, const int8_t *v, int64_t n);
void qat__cg_array_i32(qat__cg *g, const char *ident, const int32_t *v, int64_t n);
/* A string of the program (an op's name: it may come from a file) as
 * comment text. The generator writes nothing from the program verbatim:
 * letters, digits, '_' and '-' stay, every other byte becomes %XX (its hex
 * value), so no name can end a comment, splice a line with a backslash,
 * spell a trigraph or start a directive, whatever the name rule admits.
 * buf: at least 3 * QAT_NAME_LEN + 1 bytes. Returns buf. */
#define QAT__CG_TEXT_LEN (3 * QAT_NAME_LEN + 1)
const char *qat__cg_text(const char *s, char *buf);
/* An int32 as a C expression of type int32_t (INT32_MIN has no literal). */
const char *qat__cg_i32(int32_t v, char *buf);

/* The bits op's weights are stored at in NAME.c: 4 (2) when the op's
 * weights have at most 4 (2) bits and every w - zp fits them, else 8.
 * Weights (op's, minus zero points) from qat_qop_int8_weights. */
int qat__cg_weight_bits(const qat_qop *op, const int8_t *w);

/* The weights w, O rows of L int8, as opN_w: int8 for P = 8, else each row
 * packed at P bits in qk.h's layout (qk_packed_row), counted in
 * const_bytes as stored. */
void qat__cg_weight_array(qat__cg *g, int i, const int8_t *w, int O, int32_t L, int P);

/* The kernels' SN of a linear, convolution or tabled add op (qk.h's
 * qk_rqz): set by the plan into qat__cg.sn (codegen.c's qat__cg_sn says
 * its values); its fold needs accumulators below QAT__CG_FOLD_BOUND. */
#define QAT__CG_FOLD_BOUND ((int64_t)1 << 29)
/* Does add op i take qk_add_tab's tables (2 048 bytes of the arena's
 * scratch: at least 1 024 elements, not in the small plan)? */
bool qat__cg_add_tab(const qat__cg *g, int i);

/* The paired form (qk_linear_paired in src/runtime/qk.h) of O rows of L
 * int8 weights in the order the DSP kernel reads them, the first L4 of
 * each row (a multiple of 4) paired, the rest as they are: can it hold
 * them (no odd byte of -128 after a negative even one), is each row's
 * bound Σ_even |w|·128 + Σ_odd |w|·256 below 2^23, does each folded bias
 * fit int32? Where wp and bp are given, writes the stored rows (each odd
 * byte less the borrow of the even byte before it) and the biases with
 * the constant and the zero point zp folded in. */
bool qat__cg_pair_rows(const int8_t *rows, int64_t O, int64_t L, int64_t L4, int32_t zp, const int32_t *bias,
                       int8_t *wp, int32_t *bp);
/* qat__cg_pair_rows for a linear op (int8 weights, no sub-channel blocks). */
bool qat__cg_paired(const qat_qop *op, const int8_t *w, int32_t zp, int8_t *wp, int32_t *bp);
/* A paired op's opN_w (n bytes) and its requantization (as
 * qat__cg_channel_params), the DSP's (wp, bp) under #if Q_DSP and the
 * plain ones (w, the op's biases) after #else, counted once; wp NULL:
 * opN_w is w on every core (a kernel that pairs them at run time), only
 * the biases differ. */
void qat__cg_paired_params(qat__cg *g, int i, const int8_t *w, const int8_t *wp, int64_t n, const int32_t *bp);
/* The rows of conv op i's int8 weights (w: the program's order) in the
 * order the DSP kernel the generator gives it reads them, when that kernel
 * can take the paired form (qk_conv_pw_cols, qk_conv_rows, qk_conv_cols),
 * else NULL; the caller frees them. *L: a row's bytes, *L4: its paired
 * head; *stored: whether they are opN_w as written (else qk_conv_cols
 * re-lays opN_w at run time into them). */
int8_t *qat__cg_conv_dsp_rows(const qat__cg *g, int i, const int8_t *w, int64_t *L, int64_t *L4, bool *stored);

/* The requantization of each output channel of op i: its biases,
 * multipliers and shifts as one array opN_q, and opN_b, opN_m and opN_s
 * pointing into it. */
void qat__cg_channel_params(qat__cg *g, int i);

/* The comment naming op i and the opening of its function:
 * static Q_NOINLINE void opN(const int8_t *x0, ..., int8_t *y) { */
void qat__cg_begin(qat__cg *g, int i, const char *detail);

/* The positions a pointwise convolution written over its input computes
 * per pass (a last pass of one position joins the one before). */
static inline int qat__cg_pw_run(int64_t HW) { return HW < 4 ? (int)HW : 4; }

/* The small-RAM plan's scratch for op i (a convolution in mode
 * QAT__CG_FUSED or _OVER_INPUT): its maps (one output channel's map, or a
 * pointwise op's run of positions for every output channel), then, for
 * packed weights, their int8 form (a channel's row, or a pointwise op's
 * whole matrix). */
int64_t qat__cg_small_maps(const qat_qmodel *q, int i);
int64_t qat__cg_small_scratch(const qat_qmodel *q, int i, int P);

/* Does op i (a pairs-kernel convolution in its own function) take the
 * DSP's int16 columns (qk_conv_q15: groups of a multiple of 4 channels,
 * int8 weights, or packed ones in rows of whole groups, unpacked in the
 * dot)? Their 4·KK bytes are in the arena's scratch (QK_COLS), which for
 * packed weights also holds what qk_conv_pairs unpacks where there is no
 * DSP. */
bool qat__cg_uses_cols(const qat__cg *g, int i);
/* Does it take a ring of input rows instead (qk_conv_rows: a pairs-kernel
 * convolution of one group whose windows overlap, not in the small plan,
 * whose kh padded rows of int16 take at most an eighth of the activations'
 * arena)? 2: the doubled ring (2·kh - 1 rows, no rows moved), where the
 * windows share rows and it too takes at most that eighth; 1: the ring;
 * 0: no. */
int qat__cg_ring(const qat__cg *g, int i);
/* Does it take them in its weights' natural order (qk_conv_cols: a dense
 * convolution none of qk_conv_pairs, qk_dwconv3 and qk_conv_pw takes;
 * packed weights only where it takes the ring form below)? */
bool qat__cg_natural_cols(const qat__cg *g, int i);
/* Does it take them as a ring of rows of C rounded up to 4 channels, its
 * weights re-laid in the scratch (qk_conv_cols' ring form: windows that
 * overlap, at most a third more products, not in the small plan, at most
 * an eighth of the activations' arena)? 2, 1, 0 as qat__cg_ring. */
int qat__cg_natural_ring(const qat__cg *g, int i);
/* Does op i take qk_dwconv3_padded with the scratch for its padded rows
 * (a depthwise 3x3 convolution, its taps int8 or packed, not in the small
 * plan's modes)? Its rows are a whole padded plane (dw_plane) where that takes at
 * most 1 KiB, else three rows: decided by the op alone, so that its
 * cycles do not depend on the other layers (qat fit adds them up). */
bool qat__cg_dw_rows(const qat__cg *g, int i);
/* Is op i's function built without GCC's first scheduling pass on the DSP
 * (QK_NO_SCHED, src/runtime/qk.h): the linear ops, the convolutions
 * over columns and the depthwise 3x3 ones over padded rows, whose loads
 * the pass moves apart (measured: qk_conv's own loops lose by it). */
bool qat__cg_unscheduled(const qat__cg *g, int i);

/* Emitters: one `static void opN(...)` each. */
void qat__cg_conv(qat__cg *g, int i, const int8_t *w);
void qat__cg_linear(qat__cg *g, int i, const int8_t *w);
void qat__cg_pool(qat__cg *g, int i);
void qat__cg_global_avgpool(qat__cg *g, int i);
void qat__cg_add(qat__cg *g, int i);
void qat__cg_mul(qat__cg *g, int i);
void qat__cg_concat(qat__cg *g, int i);
void qat__cg_lut(qat__cg *g, int i);
void qat__cg_relu(qat__cg *g, int i);

/* The input path (emit_input.c): NAME.h's declarations of the input
 * functions (and the normalization's macros); NAME_io.c whole; and, in
 * NAME.c, NAME_quantize_input_u8 with its table when the program's
 * normalization says raw_uint8 (nothing otherwise). */
void qat__cg_input_header(qat__cg *g, const char *name, const char *up);
void qat__cg_io_file(qat__cg *g, const char *name, const char *up);
qat_status qat__cg_input_u8(qat__cg *g, const char *name);

#endif
