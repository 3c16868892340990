/* The bottom module: status strings, the quantized type's index
 * arithmetic, and the requantization multiplier (contract §5; the
 * fixed-point arithmetic that applies it is inline in qat/core.h). No
 * libm: the multiplier is taken from the bits of the double. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "qat/core.h"

const char *qat_version(void) { return QAT_VERSION_STRING; }

const char *qat_status_str(qat_status s) {
    switch (s) {
#define QAT_X_STR(name, value, text) \
    case name:                       \
        return text;
        QAT_STATUS_LIST(QAT_X_STR)
#undef QAT_X_STR
    }
    return "unknown status";
}

/* name as printable text: printable ASCII but '"' and '\\' as they are,
 * every other byte as \xNN, at most n bytes of it, "..." after a cut. */
static void show_name(const char *name, size_t n, bool cut, char *out, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out[k++] = (char)c;
        } else {
            out[k++] = '\\', out[k++] = 'x', out[k++] = hex[c >> 4], out[k++] = hex[c & 15];
        }
    }
    if (cut && k + 4 < len) out[k++] = '.', out[k++] = '.', out[k++] = '.';
    out[k < len ? k : len - 1] = '\0';
}

_Static_assert(QAT_NAME_LEN == 32, "the rule's text below says 1-31 characters");

/* The length of the UTF-8 sequence a lead byte starts (0: not a lead byte), and the lowest and
 * highest second byte it takes (overlong forms, surrogates and code points past U+10FFFF cut out). */
static int utf8_lead(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80, *hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0) *lo = 0xa0;
        if (c == 0xed) *hi = 0x9f;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0) *lo = 0x90;
        if (c == 0xf4) *hi = 0x8f;
        return 4;
    }
    return 0;
}

size_t qat_text_check(const char *s, size_t n, bool tabs, uint32_t *cp) {
    if (!s) { /* no text: as if its first byte were bad */
        if (cp) *cp = 0;
        return 0;
    }
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i], lo, hi;
        uint32_t point = c;
        int len = c < 0x80 ? 1 : utf8_lead(c, &lo, &hi);
        bool ok = len > 0 && i + (size_t)len <= n;
        if (ok && len > 1) {
            ok = u[i + 1] >= lo && u[i + 1] <= hi;
            point = c & (0x7f >> len);
            for (int k = 1; ok && k < len; k++) {
                ok = k == 1 || (u[i + k] & 0xc0) == 0x80;
                point = point << 6 | (u[i + k] & 0x3f);
            }
        }
        if (!ok) point = c;
        bool control = point < 0x20 ? !(tabs && (point == '\t' || point == '\r')) : point >= 0x7f && point <= 0x9f;
        if (!ok || control) {
            if (cp) *cp = point;
            return i;
        }
        i += (size_t)len;
    }
    return n;
}

bool qat_name_valid(const char *name, char *why, size_t len) {
    static const char rule[] = "a name has 1-31 bytes of UTF-8 text, no control character, none of '.', '/', ',' or space";
    char shown[4 * QAT_NAME_LEN + 8];
    if (!name) {
        if (why && len) snprintf(why, len, "no name (%s)", rule);
        return false;
    }
    size_t n = 0;
    while (n < QAT_NAME_LEN && name[n]) n++;
    if (n == 0 || n == QAT_NAME_LEN) {
        show_name(name, n ? QAT_NAME_LEN - 1 : 0, n != 0, shown, sizeof shown);
        if (why && len) snprintf(why, len, "\"%s\" is %s (%s)", shown, n ? "too long" : "empty", rule);
        return false;
    }
    uint32_t cp;
    size_t bad = qat_text_check(name, n, false, &cp), punct = 0; /* the first fault is the one said */
    while (punct < bad && !strchr("./, ", name[punct])) punct++;
    if (punct < bad) {
        show_name(name, n, false, shown, sizeof shown);
        if (why && len) snprintf(why, len, "\"%s\" holds '%c' at byte %zu (%s)", shown, name[punct], punct, rule);
        return false;
    }
    if (bad < n) {
        show_name(name, n, false, shown, sizeof shown);
        if (why && len) {
            unsigned char c = (unsigned char)name[bad];
            if (cp < 0x80 || cp == c) /* one byte: a C0 control, DEL, or a byte that is not UTF-8 */
                snprintf(why, len, "\"%s\" holds %s 0x%02x at byte %zu (%s)", shown,
                         c < 0x80 ? "the control character" : "the byte, not UTF-8,", c, bad, rule);
            else
                snprintf(why, len, "\"%s\" holds the control character U+%04X at byte %zu (%s)", shown, (unsigned)cp,
                         bad, rule);
        }
        return false;
    }
    return true;
}

qat_status qat_storage_range(int bits, bool is_signed, bool narrow, int32_t *qmin, int32_t *qmax) {
    if (bits < 2 || bits > 16 || !qmin || !qmax) return QAT_ERR_ARG;
    if (is_signed) {
        *qmax = (1 << (bits - 1)) - 1;
        *qmin = narrow ? -*qmax : -*qmax - 1;
    } else {
        if (narrow) return QAT_ERR_ARG; /* narrow range is a signed notion */
        *qmin = 0;
        *qmax = (1 << bits) - 1;
    }
    return QAT_OK;
}

int qat_qtype_axis(const qat_qtype *q) {
    if (!q) return -1;
    int axis = -1;
    for (int d = 0; d < q->rank; d++) {
        if (q->block[d] == q->shape[d]) continue;
        if (q->block[d] != 1 || axis != -1) return -2;
        axis = d;
    }
    return axis;
}

int64_t qat_qtype_param_index(const qat_qtype *q, int64_t i) {
    if (!q) return 0;
    int64_t p = 0, pstride = 1;
    for (int d = q->rank - 1; d >= 0; d--) {
        int64_t c = i % q->shape[d];
        i /= q->shape[d];
        p += (c / q->block[d]) * pstride;
        pstride *= q->pshape[d];
    }
    return p;
}

qat_status qat_quantize_multiplier(double M, int32_t *m0, int *shift) {
    if (!m0 || !shift) return QAT_ERR_ARG;
    uint64_t bits;
    memcpy(&bits, &M, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7FF);
    uint64_t mant = bits & ((1ULL << 52) - 1);
    if (biased == 0x7FF || (bits >> 63 && (biased || mant))) return QAT_ERR_ARG; /* Inf, NaN, < 0 */
    if (biased == 0 && mant == 0) { /* +0 and -0 */
        *m0 = 0, *shift = 0;
        return QAT_OK;
    }
    /* M = mant · 2^(e - 1075) with mant in [2^52, 2^53): normalise subnormals */
    int e = biased ? biased : 1;
    if (biased) mant |= 1ULL << 52;
    while (!(mant >> 52)) mant <<= 1, e--;
    /* frexp's q = mant / 2^53 in [0.5, 1), exponent e - 1022; q·2^31 =
     * mant / 2^22, rounded half away from zero (mant > 0: half up) */
    int exponent = e - 1022;
    int64_t fixed = (int64_t)((mant + (1ULL << 21)) >> 22);
    if (fixed == (1LL << 31)) fixed /= 2, exponent++;
    if (exponent < -31) fixed = 0, exponent = 0;
    if (exponent > 30) fixed = INT32_MAX, exponent = 30;
    *m0 = (int32_t)fixed;
    *shift = exponent;
    return QAT_OK;
}

/* ---- the input normalization ---------------------------------------------------------- */

/* From the bits: exponent field 1..254 is a normal float, 255 inf or NaN. */
static int float_exponent(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return (int)((b >> 23) & 0xFF);
}
static bool positive_normal(float v) { return v > 0 && float_exponent(v) != 0 && float_exponent(v) != 255; }
static bool finite(float v) { return float_exponent(v) != 255; }

qat_status qat_message(char *msg, size_t len, qat_status st, const char *fmt, ...) {
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

#define norm_fail(msg, len, ...) qat_message(msg, len, QAT_ERR_ARG, __VA_ARGS__)

qat_status qat_normalization_check(const qat_normalization *n, int rank, const int64_t *shape, char *msg,
                                   size_t len) {
    if (msg && len) msg[0] = '\0';
    if (!n) return norm_fail(msg, len, "NULL");
    if (n->channels < 1 || n->channels > QAT_NORM_MAX_CHANNELS)
        return norm_fail(msg, len, "channels %d is outside 1..%d", n->channels, QAT_NORM_MAX_CHANNELS);
    if (n->channels > 1 && rank == 1)
        return norm_fail(msg, len, "channels %d for an input of rank 1 (a vector is one channel)",
                         n->channels);
    if (n->channels > 1 && rank == 3 && shape && shape[0] != n->channels)
        return shape[0] == 1 ? norm_fail(msg, len, "channels %d, the input [1, %lld, %lld] has 1 (want 1)",
                                         n->channels, (long long)shape[1], (long long)shape[2])
                             : norm_fail(msg, len, "channels %d, the input [%lld, %lld, %lld] has %lld (want 1 or %lld)",
                                         n->channels, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                                         (long long)shape[0], (long long)shape[0]);
    if (!positive_normal(n->divisor))
        return norm_fail(msg, len, "divisor %g is not a positive normal float", (double)n->divisor);
    for (int c = 0; c < n->channels; c++) {
        if (!finite(n->mean[c]))
            return norm_fail(msg, len, "mean[%d] = %g is not finite", c, (double)n->mean[c]);
        if (!positive_normal(n->std[c]))
            return norm_fail(msg, len, "std[%d] = %g is not a positive normal float", c,
                             (double)n->std[c]);
    }
    return QAT_OK;
}
