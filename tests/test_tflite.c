/* The TFLite export (qat/tflite.h): a hand-written program of every kind
 * the export takes (tests/programs.h, program_e) written as .tflite and
 * run by TFLite's interpreter with its reference kernels (ai-edge-litert
 * from PyPI, .venv/: tests/tflite/tfl_compare.py) against qat's runtime on
 * random inputs, every output integer equal; each refusal by name, with no
 * file left; the flatbuffer's layout as TFLite's schema defines it. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qat/data.h"
#include "qat/export.h"
#include "qat/tflite.h"
#include "test_util.h"

static char dir[256];

#define PROG_CHECK(cond) CU_ASSERT_FATAL(cond)
#include "programs.h"

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* Writes q as NAME.tflite with n random input samples (TFLite's NHWC) and
 * the runtime's outputs beside it, and runs tfl_compare.py on them: its
 * exit status (0: every output integer equal). */
static int compare_with_tflite(const qat_qmodel *q, const char *name, int n, uint64_t seed) {
    char model[400], in[400], out[400], file[64], cmd[2048];
    snprintf(file, sizeof file, "%s.tflite", name), path_of(model, sizeof model, file);
    snprintf(file, sizeof file, "%s.in.npy", name), path_of(in, sizeof in, file);
    snprintf(file, sizeof file, "%s.out.npy", name), path_of(out, sizeof out, file);
    qat_ctx *ctx = qat_ctx_new();
    qat_status st = qat_tflite_save(ctx, q, model);
    if (st) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    const qat_qtensor *x = &q->tensors[q->input];
    int64_t per = qat_qtensor_numel(x), K = qat_qtensor_numel(&q->tensors[q->output]);
    int64_t C = x->rank == 3 ? x->shape[0] : 1, HW = per / C;
    int8_t *xq = malloc((size_t)(n * per)), *nhwc = malloc((size_t)(n * per));
    uint64_t r = seed * 0x9E3779B97F4A7C15ULL + 7;
    for (int64_t i = 0; i < n * per; i++) {
        r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
        xq[i] = (int8_t)((r * 2685821657736338717ULL) >> 56);
    }
    for (int s = 0; s < n; s++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++) nhwc[s * per + p * C + c] = xq[s * per + c * HW + p];
    int8_t *y = prog_run(q, xq, n);
    int64_t xs[4] = {n, x->rank == 3 ? x->shape[1] : per, x->rank == 3 ? x->shape[2] : 0, C}, ys[2] = {n, K};
    CU_ASSERT_EQUAL(qat_npy_save(ctx, in, QAT_DT_I8, x->rank == 3 ? 4 : 2, xs, nhwc), QAT_OK);
    CU_ASSERT_EQUAL(qat_npy_save(ctx, out, QAT_DT_I8, 2, ys, y), QAT_OK);
    free(xq), free(nhwc), free(y);
    qat_ctx_free(ctx);
    const char *py = getenv("QAT_PYTHON"), *src = getenv("QAT_SOURCE_DIR");
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/tflite/tfl_compare.py' '%s' '%s' '%s' --default", py ? py : "python3",
             src ? src : ".", model, in, out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool have_litert(void) {
    const char *py = getenv("QAT_PYTHON");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import ai_edge_litert' 2>/dev/null", py ? py : "python3");
    return system(cmd) == 0;
}

/* Every kind the export takes, within TFLite's rules: TFLite's reference
 * kernels give the runtime's integers on 256 random inputs. Without the
 * interpreter the test fails (scripts/setup-python.sh installs it): it
 * never skips. */
static void test_reference_kernels_equal_runtime(void) {
    CU_ASSERT_FATAL(have_litert());
    prog p;
    program_e(&p);
    CU_ASSERT_EQUAL(compare_with_tflite(&p.q, "every_kind", 256, 1), 0);
    prog_free(&p);

}

/* The refusal message of serializing q, or "" when it was written. */
static const char *refusal(const qat_qmodel *q, char *msg, size_t len) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    qat_status st = qat_tflite_serialize(q, &bytes, &size, msg, len);
    free(bytes);
    if (st == QAT_OK) msg[0] = '\0';
    else CU_ASSERT_EQUAL(st, QAT_ERR_UNSUPPORTED);
    return msg;
}

#define ASSERT_REFUSED(q, ...)                                                                                        \
    do {                                                                                                          \
        char m_[512];                                                                                             \
        const char *got_ = refusal(q, m_, sizeof m_);                                                             \
        const char *want_[] = {__VA_ARGS__};                                                                      \
        for (size_t k_ = 0; k_ < sizeof want_ / sizeof *want_; k_++) {                                            \
            if (!strstr(got_, want_[k_])) printf("\n  \"%s\" lacks \"%s\"\n", got_, want_[k_]);                 \
            CU_ASSERT_PTR_NOT_NULL(strstr(got_, want_[k_]));                                                      \
        }                                                                                                         \
    } while (0)

/* Every product's, add's and mul's multipliers derived from the scales,
 * as TFLite derives them (programs a, b and d pick theirs for spread, not
 * from their scales): the refusals below then meet what they test. */
static void rederive(prog *p) {
    for (int i = 0; i < p->q.n_ops; i++) {
        qat_qop *o = &p->o[i];
        double s_in = p->t[o->inputs[0]].q.scale, s_out = p->t[o->output].q.scale, M[3];
        int n = 0;
        if (o->kind == QAT_QOP_LINEAR || o->kind == QAT_QOP_CONV2D)
            for (int64_t c = 0; c < p->t[o->output].shape[0]; c++) M[0] = s_in * o->wq.scale[c] / s_out, mult(&o->multiplier[c], &o->shift[c], M[0]);
        if (o->kind == QAT_QOP_ADD) {
            double sb = p->t[o->inputs[1]].q.scale, t = 2.0 * (s_in > sb ? s_in : sb);
            M[0] = s_in / t, M[1] = sb / t, M[2] = t / ((double)(1 << o->left_shift) * s_out), n = 3;
        }
        if (o->kind == QAT_QOP_MUL) M[0] = s_in * p->t[o->inputs[1]].q.scale / s_out, n = 1;
        for (int k = 0; k < n; k++) mult(&o->multiplier[k], &o->shift[k], M[k]);
    }
}

/* What TFLite's int8 kernels cannot say is refused, naming the layer and
 * the reason; a refused export leaves no file. */
static void test_refusals(void) {
    prog a, b, c;
    program_a(&a); /* a grouped pointwise convolution first */
    rederive(&a);
    ASSERT_REFUSED(&a.q, "layer pw", "grouped convolution");
    program_b(&b); /* an average pool with its own scale */
    rederive(&b);
    ASSERT_REFUSED(&b.q, "layer sq", "requantizes");
    prog_free(&b);
    program_c(&b); /* multipliers that are not its scales' (TFLite derives them from the scales) */
    ASSERT_REFUSED(&b.q, "layer conv", "not the one TFLite derives from the scales");
    prog_free(&b);
    program_d(&b); /* 3x3, stride 2, padding 1 over 8 columns: SAME pads 0 before */
    rederive(&b);
    ASSERT_REFUSED(&b.q, "layer clipped", "neither TFLite's SAME nor VALID");
    prog_free(&b);
    program_e(&c);
    qat_qop *same = &c.o[0];
    same->wq.zero_point[3] = 1;
    ASSERT_REFUSED(&c.q, "layer same", "asymmetric weights");
    same->wq.zero_point[3] = 0;
    same->wq.bits = 12, same->wq.qmin = -2047, same->wq.qmax = 2047, same->weight[5] = 200;
    ASSERT_REFUSED(&c.q, "layer same", "12-bit weights");
    same->wq.bits = 8, same->wq.qmin = -127, same->wq.qmax = 127, same->weight[5] = 3;
    same->act_min = -100;
    ASSERT_REFUSED(&c.q, "layer same", "none of TFLite's fused activations");
    same->act_min = c.t[same->output].q.zero_point;
    qat_qop *ap = NULL, *cat = NULL;
    for (int i = 0; i < c.q.n_ops; i++) {
        if (!strcmp(c.o[i].name, "ap")) ap = &c.o[i];
        if (!strcmp(c.o[i].name, "cat")) cat = &c.o[i];
    }
    CU_ASSERT_FATAL(ap && cat);
    ap->keeps_scale = false, ap->n_mult = 1, ap->multiplier = cat->multiplier, ap->shift = cat->shift;
    ASSERT_REFUSED(&c.q, "layer ap", "requantizes", "--target tflite");
    ap->keeps_scale = true, ap->n_mult = 0, ap->multiplier = ap->shift = NULL;
    c.t[c.q.input].q.qmin = -8, c.t[c.q.input].q.qmax = 7, c.t[c.q.input].q.bits = 4;
    ASSERT_REFUSED(&c.q, "tensor input", "int8 over [-128, 127]");
    c.t[c.q.input].q.qmin = -128, c.t[c.q.input].q.qmax = 127, c.t[c.q.input].q.bits = 8;
    /* a concatenation that requantizes, or clamps: TFLite's copies */
    cat->multiplier[1] += 1;
    ASSERT_REFUSED(&c.q, "layer cat", "not the one TFLite derives from the scales");
    cat->multiplier[1] -= 1;
    cat->act_min = c.t[cat->output].q.zero_point;
    ASSERT_REFUSED(&c.q, "layer cat", "a concatenation that clamps");
    cat->act_min = -128;
    char msg[512];
    CU_ASSERT_STRING_EQUAL(refusal(&c.q, msg, sizeof msg), ""); /* whole again */
    c.q.rounding = QAT_ROUNDING_SINGLE; /* TFLite's stock kernels round twice */
    ASSERT_REFUSED(&c.q, "rounds its requantization once", "--rounding double");
    c.q.rounding = QAT_ROUNDING_DOUBLE;
    /* a refused save writes nothing */
    char path[300];
    path_of(path, sizeof path, "refused.tflite");
    qat_ctx *ctx = qat_ctx_new();
    CU_ASSERT_EQUAL(qat_tflite_save(ctx, &a.q, path), QAT_ERR_UNSUPPORTED);
    struct stat sb;
    CU_ASSERT_NOT_EQUAL(stat(path, &sb), 0);
    qat_ctx_free(ctx);
    prog_free(&a), prog_free(&c);
}

/* Little-endian reads of the flatbuffer, for the layout checks. */
static uint32_t u32(const uint8_t *b, size_t at) {
    return (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 | (uint32_t)b[at + 3] << 24;
}

/* The file is a TFLite model as the schema defines it: identifier "TFL3",
 * version 3, one subgraph; the bytes are the same for the same program. */
static void test_layout(void) {
    prog c;
    program_e(&c);
    uint8_t *b1, *b2;
    size_t n1, n2;
    char msg[400];
    CU_ASSERT_EQUAL_FATAL(qat_tflite_serialize(&c.q, &b1, &n1, msg, sizeof msg), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_tflite_serialize(&c.q, &b2, &n2, msg, sizeof msg), QAT_OK);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT(n1 == n2 && memcmp(b1, b2, n1) == 0);
    CU_ASSERT(memcmp(b1 + 4, "TFL3", 4) == 0);
    /* root table: field 0 (version) through the vtable */
    uint32_t root = u32(b1, 0);
    int32_t vt = (int32_t)u32(b1, root);
    size_t vtable = (size_t)((int64_t)root - vt);
    uint16_t off0 = (uint16_t)(b1[vtable + 4] | b1[vtable + 5] << 8);
    CU_ASSERT_FATAL(off0 != 0);
    CU_ASSERT_EQUAL(u32(b1, root + off0), 3);
    free(b1), free(b2);
    prog_free(&c);
    CU_ASSERT_TRUE(qat_tflite_available());
}

int main(int argc, char **argv) {
    if (!qat_test_tmpdir(dir, sizeof dir, "tflite")) return 2;
    const qat_test_case cases[] = {
        {"every kind the export takes: TFLite's reference kernels equal the runtime", test_reference_kernels_equal_runtime},
        {"what TFLite cannot say is refused by name; no file", test_refusals},
        {"the flatbuffer: TFL3, version 3, the same bytes twice", test_layout},
        {NULL, NULL},
    };
    int rc = qat_test_main("tflite", cases, argc, argv);
    qat_test_rmdir(dir);
    return rc;
}
