/* Shared by the CUnit suites: the runner (test_main.h) and small tensor
 * helpers. */
#ifndef QAT_TEST_UTIL_H
#define QAT_TEST_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qat/autograd.h"
#include "test_main.h"

/* Whether the suite runs under valgrind (.ci/run sets QAT_TEST_VALGRIND=1
 * there): the few cases whose cost is sheer arithmetic take smaller
 * batches, the same code paths. */
static inline bool qat_test_under_valgrind(void) {
    const char *v = getenv("QAT_TEST_VALGRIND");
    return v && !strcmp(v, "1");
}

/* A graph with every op kind of the integer program, as model-file text
 * (docs/model-format.md): strided non-square conv + folded BatchNorm +
 * ReLU6, depthwise, grouped, add + ReLU, padded max and average pools, a
 * lone ReLU, concat, sigmoid, tanh, hard-swish, a squeeze-and-excitation
 * gate (pool, 1x1 convs, hard-sigmoid, mul over channels), leaky ReLU (the
 * table alone), global average pooling,
 * dropout, linear. The graph, codegen and ONNX suites all run it. */
#define QAT_TEST_EVERY_OP \
    "input shape=2,10,9\n" \
    "conv2d    stem  input out=8 kernel=3x2 stride=1x2 pad=1x0\n" \
    "batchnorm bn    stem\n" \
    "relu6     r6    bn\n" \
    "conv2d    dw    r6 out=8 kernel=3 pad=1 groups=depthwise\n" \
    "relu      r1    dw\n" \
    "conv2d    g2    r1 out=8 kernel=1 groups=2\n" \
    "add       sum   g2,r6\n" \
    "relu      r2    sum\n" \
    "maxpool2d mp    r2 kernel=3 stride=2 pad=1\n" \
    "relu      rmp   mp\n" \
    "avgpool2d ap    r2 kernel=2x3 stride=2x2 pad=0x1\n" \
    "concat    cat   rmp,ap\n" \
    "sigmoid   sg    cat\n" \
    "tanh      th    cat\n" \
    "add       sum2  sg,th\n" \
    "hardswish hs    sum2\n" \
    "avgpool2d sq    hs kernel=5x2\n" \
    "conv2d    se1   sq out=4 kernel=1\n" \
    "relu      ser   se1\n" \
    "conv2d    se2   ser out=16 kernel=1\n" \
    "hardsigmoid gate se2\n" \
    "mul       se    hs,gate\n" \
    "leaky_relu lr   se negative_slope=0.1\n" \
    "global_avgpool gap lr\n" \
    "dropout   d     gap p=0.1\n" \
    "linear    fc    d out=5\n"

/* Persistent tensor filled with uniform values in [lo, hi). */
static inline qat_tensor *t_rand(qat_ctx *ctx, qat_rng *rng, int rank, const int64_t *shape,
                                 float lo, float hi, bool grad) {
    qat_tensor *t = qat_tensor_new(ctx, QAT_MEM_PERSIST, rank, shape, grad);
    if (t)
        for (int64_t i = 0; i < t->numel; i++) t->data[i] = lo + (hi - lo) * qat_rng_uniform(rng);
    return t;
}

/* Uniform in [-1, 1] but at least `gap` away from zero: keeps kinks
 * (ReLU at 0) out of reach of the finite-difference step. */
static inline void t_away_from_zero(qat_tensor *t, float gap) {
    for (int64_t i = 0; i < t->numel; i++) {
        float v = t->data[i];
        if (fabsf(v) < gap) t->data[i] = v < 0 ? v - gap : v + gap;
    }
}

/* Elements whose float bits differ. With signed_zeros false, -0 and +0
 * count as equal: an accumulated gradient (0 + 0) cannot carry the sign of
 * a reference's dy·0. */
static inline int64_t qat_test_bit_diffs(const float *a, const float *b, int64_t n, bool signed_zeros) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = signed_zeros ? a[i] : a[i] + 0.0f, y = signed_zeros ? b[i] : b[i] + 0.0f;
        bad += memcmp(&x, &y, sizeof(float)) != 0;
    }
    return bad;
}

#define ASSERT_CLOSE(a, b, tol) CU_ASSERT(fabs((double)(a) - (double)(b)) <= (tol))
#define ASSERT_OK(ctx)                                                          \
    do {                                                                        \
        if (qat_ctx_status(ctx) != QAT_OK) printf("\n  error: %s\n", qat_ctx_error(ctx)); \
        CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_OK);                           \
    } while (0)

#endif
