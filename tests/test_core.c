/* The bottom module: the multiplier taken from a double's bits equals the
 * contract's frexp/llround definition, everywhere, subnormals included. */
#include <float.h>
#include <math.h>

#include "qat/core.h"
#include "test_util.h"

/* The contract's QuantizeMultiplier, written with libm as it reads. */
static void reference(double M, int32_t *m0, int *shift) {
    if (M == 0.0) {
        *m0 = 0, *shift = 0;
        return;
    }
    int e;
    double q = frexp(M, &e);
    long long fixed = llround(q * 2147483648.0);
    if (fixed == 2147483648LL) fixed /= 2, e++;
    if (e < -31) fixed = 0, e = 0;
    if (e > 30) fixed = 2147483647LL, e = 30;
    *m0 = (int32_t)fixed, *shift = e;
}

static void check(double M) {
    int32_t a, b;
    int sa, sb;
    CU_ASSERT_EQUAL_FATAL(qat_quantize_multiplier(M, &a, &sa), QAT_OK);
    reference(M, &b, &sb);
    if (a != b || sa != sb) printf("\n  M = %.17g: %d·2^%d, want %d·2^%d\n", M, a, sa, b, sb);
    CU_ASSERT(a == b && sa == sb);
}

static void test_multiplier_matches_frexp(void) {
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < 200000; i++) { /* log-uniform over the whole range */
        double e = -1080.0 + 2100.0 * qat_rng_uniform(&rng);
        check(ldexp(1.0 + qat_rng_uniform(&rng), (int)e));
    }
    /* ties of the rounding: q·2^31 ending in exactly .5, and the carry to 2^31 */
    for (int k = 0; k < 64; k++) {
        check(ldexp(1.0 + ldexp(2 * k + 1, -32), k - 20));
        check(ldexp(1.0 - ldexp(1.0, -33), k - 20));
    }
    const double edges[] = {0.0, -0.0, DBL_MIN, DBL_TRUE_MIN, 4.9e-324 * 3, DBL_MAX, 1.0, 0.5, 0.25, 1e-10,
                            ldexp(1.0, -31), ldexp(1.0, -32), ldexp(0.75, -31), ldexp(1.0, 30), ldexp(1.0, 31)};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check(edges[i]);
    int32_t m;
    int s;
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-1e-3, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(INFINITY, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(NAN, &m, &s), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_quantize_multiplier(-DBL_TRUE_MIN, &m, &s), QAT_ERR_ARG);
}

static void test_status_strings(void) {
    CU_ASSERT_STRING_EQUAL(qat_status_str(QAT_OK), "ok");
    CU_ASSERT_STRING_EQUAL(qat_status_str(QAT_ERR_FORMAT), "bad file format");
    CU_ASSERT_STRING_EQUAL(qat_status_str((qat_status)42), "unknown status");
}

/* Text a terminal shows as it is: UTF-8 (RFC 3629's table of well-formed
 * sequences) without C0, DEL or C1 controls; the index and code point of
 * the first byte that is not. */
static void test_text_check(void) {
    static const struct {
        const char *s;
        bool tabs;
        size_t bad; /* SIZE_MAX: the whole is text */
        uint32_t cp;
    } cases[] = {
        {"conv1 relu_2", false, SIZE_MAX, 0},
        {"a\tb\r", true, SIZE_MAX, 0},
        {"a\tb", false, 1, '\t'},
        {"x\x1b[2J", true, 1, 0x1b},
        {"ab\x7f", true, 2, 0x7f},
        {"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80", false, SIZE_MAX, 0}, /* 2, 3 and 4 bytes */
        {"\xc2\xa0", false, SIZE_MAX, 0},                         /* U+00A0, the first past C1 */
        {"a\xc2\x9b[2J", false, 1, 0x9b},                         /* CSI as UTF-8 */
        {"a\xc2\x80", false, 1, 0x80},
        {"ab\x9b[2J", false, 2, 0x9b},                             /* CSI as one byte: not UTF-8 */
        {"\xc0\xaf", false, 0, 0xc0},                             /* overlong '/' */
        {"\xc1\xbf", false, 0, 0xc1},
        {"\xe0\x80\xaf", false, 0, 0xe0},                         /* overlong in 3 */
        {"\xed\xa0\x80", false, 0, 0xed},                         /* a surrogate */
        {"\xf0\x8f\xbf\xbf", false, 0, 0xf0},                     /* overlong in 4 */
        {"\xf4\x90\x80\x80", false, 0, 0xf4},                     /* past U+10FFFF */
        {"\xf5\x80\x80\x80", false, 0, 0xf5},
        {"ok\xe2\x82", false, 2, 0xe2},                            /* cut short */
        {"\xe2\x28\xa1", false, 0, 0xe2},                         /* a bad continuation */
        {"\xef\xbf\xbf\xf4\x8f\xbf\xbf", false, SIZE_MAX, 0},     /* U+FFFF, U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].s), want = cases[i].bad == SIZE_MAX ? n : cases[i].bad;
        uint32_t cp = 0xffffffffu;
        size_t got = qat_text_check(cases[i].s, n, cases[i].tabs, &cp);
        if (got != want) printf("\n  case %zu: %zu, want %zu\n", i, got, want);
        CU_ASSERT_EQUAL(got, want);
        if (cases[i].bad != SIZE_MAX) CU_ASSERT_EQUAL(cp, cases[i].cp);
    }
    CU_ASSERT_EQUAL(qat_text_check("a\0b", 3, true, NULL), 1); /* a NUL is C0 */
    char why[200];
    CU_ASSERT(qat_name_valid("caf\xc3\xa9", why, sizeof why));
    CU_ASSERT(!qat_name_valid("a\xc2\x9b" "b", why, sizeof why));
    CU_ASSERT(strstr(why, "U+009B at byte 1") != NULL);
    CU_ASSERT(!qat_name_valid("a\x9b" "b", why, sizeof why));
    CU_ASSERT(strstr(why, "\"a\\x9bb\" holds the byte, not UTF-8, 0x9b at byte 1") != NULL);
}

int main(int argc, char **argv) {
    static const qat_test_case cases[] = {
        {"the multiplier from a double's bits equals frexp/llround", test_multiplier_matches_frexp},
        {"status strings", test_status_strings},
        {"text: UTF-8 without control characters, C1 included", test_text_check},
        {NULL, NULL}};
    return qat_test_main("core", cases, argc, argv);
}
