/* qat/core.h — the bottom of the house: status codes, the description of
 * a uniform quantized type, and the fixed-point arithmetic of
 * requantization (contract §1, §5).
 *
 * It depends on nothing — no other qat module, no libm, no allocation —
 * so the training side (lowering) and the device runtime (the integer
 * engine, generated microcontroller code) share one definition of every
 * integer formula. The functions that compute on integers use no float. */
#ifndef QAT_CORE_H
#define QAT_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(QAT_BUILDING) && defined(__GNUC__)
#define QAT_API __attribute__((visibility("default")))
#else
#define QAT_API
#endif

#define QAT_MAX_RANK 4
#define QAT_NAME_LEN 32 /* names of layers, ops and tensors, with the NUL */

/* X-macro: one list makes both the enum and qat_status_str. */
#define QAT_STATUS_LIST(X)                                   \
    X(QAT_OK, 0, "ok")                                       \
    X(QAT_ERR_ARG, -1, "invalid argument")                   \
    X(QAT_ERR_SHAPE, -2, "shape mismatch")                   \
    X(QAT_ERR_NOMEM, -3, "out of memory")                    \
    X(QAT_ERR_STATE, -4, "invalid state")                    \
    X(QAT_ERR_IO, -5, "input/output error")                  \
    X(QAT_ERR_FORMAT, -6, "bad file format")                 \
    X(QAT_ERR_UNSUPPORTED, -7, "unsupported")

typedef enum {
#define QAT_X_ENUM(name, value, text) name = value,
    QAT_STATUS_LIST(QAT_X_ENUM)
#undef QAT_X_ENUM
} qat_status;

QAT_API const char *qat_status_str(qat_status s);
/* The library's version ("0.3.0" for this one): what files record as their producer. */
QAT_API const char *qat_version(void);

/* A one-line, printf-formatted message into the caller's buffer msg (len
 * bytes; nothing when msg is NULL or len 0), and st back: how the functions
 * that report into a caller's buffer rather than a context fail. */
QAT_API qat_status qat_message(char *msg, size_t len, qat_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---- names ---------------------------------------------------------------------
 * The one rule for the names of layers, ops and tensors, wherever they
 * come from: code, model files, training checkpoints, quantized models.
 * A name has 1 to QAT_NAME_LEN - 1 bytes of text (qat_text_check: UTF-8
 * without control characters, so a name never carries a line break or a
 * terminal escape into a message, a table or generated source), and none of '.'
 * (it joins a layer's name to its tensors' suffixes), '/' (HDF5's path
 * separator), ',' (the model file's input lists) or space. At most
 * QAT_NAME_LEN bytes of name are read, so a fixed array of that size that
 * lacks its NUL is refused, not overrun. Returns true when name follows
 * the rule; otherwise false, and when why is not NULL, one line in why
 * that shows the name (bytes outside printable ASCII as \xNN, cut
 * after 31 bytes) and says what breaks the rule. */
QAT_API bool qat_name_valid(const char *name, char *why, size_t len);

/* Where the n bytes at s stop being text that a terminal shows as it is:
 * the index of the first byte that is not part of well-formed UTF-8
 * (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF) or
 * that starts a control character: C0 (0x00-0x1f; with tabs, tab and
 * carriage return are text), DEL (0x7f) or C1 (U+0080-U+009F, which some
 * terminals take as escapes, CSI among them). n when the whole is text.
 * *cp gets the code point at that index (or the byte, for one that is
 * not UTF-8) when cp is not NULL. */
QAT_API size_t qat_text_check(const char *s, size_t n, bool tabs, uint32_t *cp);

/* ---- the quantized type (contract §1) ------------------------------------------
 * One struct describes per-tensor, per-axis and sub-channel quantization:
 * every granularity is a block size per dimension, and the element at
 * index i uses the scale and zero point of block i / block. Per-tensor =
 * every block whole; per-axis on d = block 1 on d, whole elsewhere.
 * real = scale · (q - zero_point). The functions that make and use types
 * (allocation, calibration, reading the MLIR spelling) are in qat/fakequant.h. */
typedef struct {
    int bits;            /* 2..16 */
    bool is_signed;      /* i<bits> or u<bits> storage */
    int32_t qmin, qmax;  /* storage range (full or narrow) */
    int rank;            /* of the quantized tensor, 0..4 */
    int64_t shape[QAT_MAX_RANK];
    int64_t block[QAT_MAX_RANK];  /* block size per dimension; whole = shape */
    int64_t pshape[QAT_MAX_RANK]; /* shape of scale and zero_point: ceil(shape / block) (a ragged last block) */
    int64_t nparams;              /* number of (scale, zero point) pairs */
    float *scale;                 /* [pshape] */
    int32_t *zero_point;          /* [pshape] */
} qat_qtype;

/* The storage range of a b-bit type; narrow drops the most negative value
 * of a signed type ([-127, 127] for int8). QAT_ERR_ARG for 2 > b > 16, or
 * narrow unsigned. */
QAT_API qat_status qat_storage_range(int bits, bool is_signed, bool narrow, int32_t *qmin, int32_t *qmax);
/* -1 for per-tensor, the quantized dimension for per-axis, -2 for
 * sub-channel (more than one dimension split, or blocks larger than 1). */
QAT_API int qat_qtype_axis(const qat_qtype *q);
/* Index of the (scale, zero point) pair of flat element `i`. */
QAT_API int64_t qat_qtype_param_index(const qat_qtype *q, int64_t i);
/* MLIR spelling (§1): "!quant.uniform<i8:f32, 0.01:50>",
 * "!quant.uniform<i8<-127:127>:f32:0, {0.2:0, 0.1:0}>",
 * "!quant.uniform<i8:f32:{0:1, 1:2}, {{s:z, s:z}, ...}>", each scale the
 * shortest text that reads back to the same float32. The storage range is
 * written only when it is not the full one. Returns the length the whole
 * string needs (as snprintf); -1 for a NULL type or scales. The parser is
 * qat_qtype_from_mlir (qat/fakequant.h). */
QAT_API int qat_qtype_to_mlir(const qat_qtype *q, char *buf, size_t len);

/* ---- the model's input normalization -----------------------------------------
 * Raw samples go in (uint8 pixels as the floats 0..255, float features as
 * they are), and per element of channel c, in float32 with each operation
 * rounded:  x' = ((x / divisor) - mean[c]) / std[c]  (qat/layers.h says
 * where it applies; docs/quantization.md, "Normalization", why the uint8
 * table is exact). Channels are axis 0 of a [C, H, W] input; a rank-1
 * input is one channel. The model (qat_model_set_normalization), its
 * checkpoint, the integer program (qat_qmodel.norm) and its file carry it.
 * The type lives here, at the bottom, because both sides use it: the
 * training side and the integer program. */
#define QAT_NORM_MAX_CHANNELS 1024
typedef struct {
    int channels;       /* 0 (none), 1 (every element), or the input's C */
    float divisor;      /* 255 for uint8 data (torchvision's ToTensor), 1 otherwise; a positive normal float */
    float mean[QAT_NORM_MAX_CHANNELS]; /* [channels] used; each finite */
    float std[QAT_NORM_MAX_CHANNELS];  /* [channels] used; each a positive normal float */
    bool raw_uint8;     /* the data are uint8: the integer targets also take bytes (a table) */
} qat_normalization;

/* Checks a normalization that is set (channels >= 1) against a per-sample
 * input shape (rank 1 or 3; rank 0: not known, only the bounds): channels
 * in 1..QAT_NORM_MAX_CHANNELS and 1 or the C of a [C, H, W] input; divisor
 * and every std[c] positive normal floats (a subnormal one would divide
 * differently where denormals flush to zero); every mean[c] finite. QAT_OK,
 * or QAT_ERR_ARG with a message naming the field, its value and the limit
 * in msg (len bytes; msg may be NULL; "divisor 0 is not a positive normal
 * float": the caller says whose normalization it is). No libm: the tests read the bits. */
QAT_API qat_status qat_normalization_check(const qat_normalization *n, int rank, const int64_t *shape, char *msg,
                                           size_t len);

/* ---- instruction-set levels ----------------------------------------------------
 * The SIMD paths qat may take, lowest first. Each hand-written fast path
 * needs its level's features on the CPU and a cap at or above its level:
 * the cap is the environment variable QAT_MAX_ISA (these names, as
 * oneDNN's ONEDNN_MAX_CPU_ISA), read at each dispatch, so one machine can
 * test and time every level below its own. Every level gives the same
 * integers, and the training kernels that only move or compare data give
 * the same bits. Not capped: the compiler's clones of plain C loops
 * (GCC target_clones), which the CPU picks and which compute the same
 * IEEE results at every width (docs/performance.md). */
typedef enum {
    QAT_ISA_PORTABLE,    /* portable C */
    QAT_ISA_AVX2,        /* AVX2 (Haswell, Zen 1-3) */
    QAT_ISA_AVX_VNNI,    /* + AVX-VNNI, VEX-encoded dot products (Alder Lake, Zen 5) */
    QAT_ISA_AVX512,      /* AVX-512 F, BW, DQ, VL (Skylake-SP) */
    QAT_ISA_AVX512_VNNI, /* + AVX-512 VNNI (Cascade Lake, Ice Lake, Zen 4) */
    QAT_ISA_COUNT
} qat_isa;

QAT_API const char *qat_isa_str(qat_isa isa); /* "portable", "avx2", "avx_vnni", "avx512", "avx512_vnni" */
/* Whether this CPU has a level's features (levels are not nested: Zen 4
 * has avx512_vnni without avx_vnni). Portable is always there. */
QAT_API bool qat_isa_cpu_has(qat_isa isa);
/* The cap: QAT_MAX_ISA's level, the highest when it is unset. A value
 * that names no level caps nothing and returns QAT_ERR_ARG (the tool
 * refuses it; the library goes on at full speed). */
QAT_API qat_status qat_isa_cap(qat_isa *cap);
/* Whether a fast path of this level may run: the CPU has it and the cap allows it. */
QAT_API bool qat_isa_allowed(qat_isa isa);
/* The highest level allowed: what `qat info` and the benchmarks report. */
QAT_API qat_isa qat_isa_active(void);

/* ---- fixed-point requantization (contract §5) ---------------------------------
 * An int32 accumulator at scale s_in·s_w becomes an output at scale s_out
 * through M = s_in·s_w/s_out, represented as M0·2^(shift-31) with M0 in
 * [2^30, 2^31): gemmlowp's and TFLite's MultiplyByQuantizedMultiplier. */

/* q = frexp(M, &shift); M0 = round(q·2^31) half away from zero; M0 == 2^31
 * becomes 2^30 with shift + 1; shift < -31 gives M0 = 0, shift = 0 (the
 * multiplier rounds to nothing); shift > 30 saturates to M0 = 2^31 - 1,
 * shift = 30. M must be finite and >= 0: QAT_ERR_ARG otherwise. Computed
 * from the bits of the double (no libm). */
QAT_API qat_status qat_quantize_multiplier(double M, int32_t *m0, int *shift);

/* The three below are defined here, inline, so that the integer kernels of
 * the runtime and a user's own kernels compute them from this one
 * definition at full speed (they sit in every kernel's innermost loop).
 *
 * Saturating rounding doubling high multiply: (a·b + nudge) / 2^31 in 64
 * bits with truncating division, nudge = 2^30 or 1 - 2^30 by the sign of
 * a·b; INT32_MIN·INT32_MIN saturates to INT32_MAX. */
static inline int32_t qat_srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31)); /* C division truncates toward zero */
}

/* x / 2^exponent rounded half away from zero; exponent is taken in [0, 31]. */
static inline int32_t qat_rounding_divide_by_pot(int32_t x, int exponent) {
    if (exponent <= 0) return x;
    if (exponent > 31) exponent = 31;
    int32_t mask = (int32_t)((1LL << exponent) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* >> of a negative int is arithmetic on every compiler qat builds with */
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* RoundingDivideByPOT(SRDHM(x·2^max(shift,0), m0), max(-shift,0)); the left
 * shift saturates to int32 instead of overflowing. */
static inline int32_t qat_multiply_by_quantized_multiplier(int32_t x, int32_t m0, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int64_t shifted = (int64_t)x * ((int64_t)1 << (left < 32 ? left : 31));
    if (shifted > INT32_MAX) shifted = INT32_MAX;
    if (shifted < INT32_MIN) shifted = INT32_MIN;
    return qat_rounding_divide_by_pot(qat_srdhm((int32_t)shifted, m0), right);
}

/* One output integer of a requantizing op: zp + the above, clamped to
 * [lo, hi]. The sum is taken in 64 bits: a multiplier above 1 can
 * saturate the product to INT32_MAX. */
static inline int32_t qat_requantize(int32_t acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi) {
    int64_t y = (int64_t)qat_multiply_by_quantized_multiplier(acc, m0, shift) + zp;
    return y < lo ? lo : y > hi ? hi : (int32_t)y;
}

/* The single-rounding form (a program's QAT_ROUNDING_SINGLE, qat/runtime.h;
 * TFLite's TFLITE_SINGLE_ROUNDING): the exact 64-bit product x·m0 rounded
 * once, half up (toward +infinity), by t = 31 - shift:
 *     floor((x·m0 + 2^(t-1)) / 2^t),  t taken in [1, 62],
 * saturated to int32 (only a multiplier above 1 can reach it). |x·m0| <
 * 2^62, so the sum never overflows 64 bits; >> of a negative int64 is
 * arithmetic on every compiler qat builds with. */
static inline int32_t qat_multiply_by_quantized_multiplier_single(int32_t x, int32_t m0, int shift) {
    int t = 31 - shift;
    if (t < 1) t = 1;
    if (t > 62) t = 62;
    int64_t v = ((int64_t)x * m0 + ((int64_t)1 << (t - 1))) >> t;
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* qat_requantize with the single rounding. */
static inline int32_t qat_requantize_single(int32_t acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi) {
    int64_t y = (int64_t)qat_multiply_by_quantized_multiplier_single(acc, m0, shift) + zp;
    return y < lo ? lo : y > hi ? hi : (int32_t)y;
}

/* Either form: single false gives the contract's double rounding. */
static inline int32_t qat_multiply_by_quantized_multiplier_r(int32_t x, int32_t m0, int shift, bool single) {
    return single ? qat_multiply_by_quantized_multiplier_single(x, m0, shift)
                  : qat_multiply_by_quantized_multiplier(x, m0, shift);
}
static inline int32_t qat_requantize_r(int32_t acc, int32_t m0, int shift, int32_t zp, int32_t lo, int32_t hi,
                                       bool single) {
    return single ? qat_requantize_single(acc, m0, shift, zp, lo, hi) : qat_requantize(acc, m0, shift, zp, lo, hi);
}

#ifdef __cplusplus
}
#endif
#endif
