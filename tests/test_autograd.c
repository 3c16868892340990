/* Autograd: contexts and errors, forward values against hand-computed
 * ones, a central-difference gradient check for every op on several shapes
 * (batch 1 and non-square among them), golden values from PyTorch 1.13 for
 * the graph models' ops (tests/golden/make_conv_golden.py), and the error
 * paths. */
#define _POSIX_C_SOURCE 200809L /* setenv: the instruction-set levels */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "internals.h"
#include "golden/conv_golden.h"
#include "golden/loss_golden.h"
#include "test_util.h"

/* ---- gradient-check harness --------------------------------------------------------- */

enum {
    G_ADD, G_SUB, G_MUL, G_SCALE, G_MATMUL, G_LINEAR, G_RELU, G_CLAMP, G_SUM, G_MEAN,
    G_FLATTEN_LINEAR, G_XENT, G_CONV, G_MAXPOOL, G_AVGPOOL, G_DROPOUT, G_BN_TRAIN, G_BN_EVAL, G_RECIP,
    G_SHARED, G_CONV_MID, G_CONV_EX, G_MAXPOOL_EX, G_AVGPOOL_EX, G_GAP, G_CONCAT, G_SIGMOID, G_TANH,
    G_HARDSWISH, G_CUSTOM, G_XENT_EX, G_MSE
};

typedef struct {
    int kind;
    bool ta, tb;
    int stride, pad, k;
    const int32_t *labels;
    const float *weights, *target; /* G_XENT_EX's class weights; G_MSE's target */
    float smoothing;
    qat_rng rng0;
    qat_conv2d_params cp;
    qat_pool2d_params pp;
    qat_tensor *fixed; /* an input that wants no gradient (concat) */
} gc_user;

static qat_tensor *custom_fma(qat_ctx *ctx, qat_tensor *const *in); /* x*y + z as a custom op, below */

static qat_tensor *gc_fn(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    const gc_user *u = user;
    qat_tensor *y = NULL;
    qat_rng rng = u->rng0; /* same mask at every evaluation */
    switch (u->kind) {
    case G_ADD: y = qat_add(ctx, in[0], in[1]); break;
    case G_SUB: y = qat_sub(ctx, in[0], in[1]); break;
    case G_MUL: y = qat_mul(ctx, in[0], in[1]); break;
    case G_SCALE: y = qat_scale(ctx, in[0], -1.75f); break;
    case G_MATMUL: y = qat_matmul(ctx, in[0], in[1], u->ta, u->tb); break;
    case G_LINEAR: y = qat_linear(ctx, in[0], in[1], u->k ? in[2] : NULL); break;
    case G_RELU: y = qat_relu(ctx, in[0]); break;
    case G_CLAMP: y = qat_clamp(ctx, in[0], -0.5f, 0.5f); break;
    case G_RECIP: y = qat_reciprocal(ctx, in[0]); break;
    case G_SUM: return qat_sum(ctx, qat_mul(ctx, in[0], in[0]));
    case G_MEAN: return qat_mean(ctx, qat_mul(ctx, in[0], in[0]));
    case G_FLATTEN_LINEAR: y = qat_linear(ctx, qat_flatten(ctx, in[0]), in[1], NULL); break;
    case G_XENT: return qat_cross_entropy(ctx, in[0], u->labels);
    case G_XENT_EX: return qat_cross_entropy_ex(ctx, in[0], u->labels, u->weights, u->smoothing);
    case G_MSE: return qat_mse_loss(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0], u->target);
    case G_CONV: y = qat_conv2d(ctx, in[0], in[1], u->k ? in[2] : NULL, u->stride, u->pad); break;
    case G_MAXPOOL: /* u->ta: on an intermediate, whose gradient pooling writes */
        y = qat_maxpool2d(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0], u->k, u->stride);
        break;
    case G_AVGPOOL: y = qat_avgpool2d(ctx, in[0], u->k, u->stride); break;
    case G_DROPOUT: y = qat_dropout(ctx, in[0], 0.3f, &rng); break;
    case G_CONV_MID: /* the input is an intermediate: its gradient is written, not added */
        y = qat_conv2d(ctx, qat_scale(ctx, in[0], 0.5f), in[1], NULL, u->stride, u->pad);
        break;
    case G_SHARED: { /* an intermediate t with five consumers, recorded in either order */
        qat_tensor *t = qat_scale(ctx, in[0], -0.3f), *c[5];
        for (int j = 0; j < 5; j++) {
            switch (u->k ? 4 - j : j) {
            case 0: c[j] = qat_relu(ctx, t); break;
            case 1: c[j] = qat_clamp(ctx, t, -0.5f, 0.5f); break;
            case 2: c[j] = qat_dropout(ctx, t, 0.3f, &rng); break;
            case 3: c[j] = qat_linear(ctx, t, in[1], NULL); break;
            default: c[j] = qat_flatten(ctx, t); break;
            }
        }
        y = qat_add(ctx, qat_add(ctx, qat_add(ctx, c[0], c[1]), qat_add(ctx, c[2], c[3])), c[4]);
        break;
    }
    case G_CONV_EX: /* u->ta: on an intermediate, whose gradient the op writes */
        y = qat_conv2d_ex(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0], in[1], u->k ? in[2] : NULL, &u->cp);
        break;
    case G_MAXPOOL_EX: y = qat_maxpool2d_ex(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0], &u->pp); break;
    case G_AVGPOOL_EX: y = qat_avgpool2d_ex(ctx, in[0], &u->pp); break;
    case G_GAP: y = qat_global_avgpool2d(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0]); break;
    case G_CONCAT: { /* three inputs and a fixed one, along axis u->k; the
                      * first through a scale (an intermediate: stored) */
        qat_tensor *xs[4] = {qat_scale(ctx, in[0], 0.5f), in[1], u->fixed, in[2]};
        y = qat_concat(ctx, 4, xs, u->k);
        break;
    }
    case G_SIGMOID: y = qat_sigmoid(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0]); break;
    case G_TANH: y = qat_tanh(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0]); break;
    case G_HARDSWISH: y = qat_hardswish(ctx, u->ta ? qat_scale(ctx, in[0], 0.5f) : in[0]); break;
    case G_CUSTOM: y = custom_fma(ctx, in); break;
    case G_BN_TRAIN:
    case G_BN_EVAL: {
        float rm[8] = {0.1f, -0.2f, 0.3f, 0, 0, 0, 0, 0}, rv[8] = {1.5f, 0.5f, 2, 1, 1, 1, 1, 1};
        y = qat_batchnorm(ctx, in[0], in[1], in[2], rm, rv, 0.1f, 1e-5f, u->kind == G_BN_TRAIN);
        break;
    }
    }
    /* sum(y ⊙ y): a smooth, non-uniform weighting of every output */
    return qat_sum(ctx, qat_mul(ctx, y, y));
}

static void check(qat_ctx *ctx, gc_user *u, qat_tensor **in, int n) {
    qat_gradcheck_result r;
    qat_status st = qat_gradcheck(ctx, gc_fn, u, in, n, 1e-2f, 2e-3f, 1e-2f, &r);
    if (st != QAT_OK) printf("\n  kind %d: %s\n", u->kind, qat_ctx_error(ctx));
    CU_ASSERT_EQUAL(st, QAT_OK);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += in[i]->numel;
    CU_ASSERT_EQUAL(r.n_checked, total);
    qat_ctx_clear_error(ctx);
}

/* Fills the step arena with NaN and resets it: the next steps' unzeroed
 * scratch (new gradients an op must write in full) then starts as NaN, not
 * as the zeros of fresh pages, so an element left unwritten shows. */
static void dirty_step_arena(qat_ctx *ctx) {
    /* twice: a reset merges a many-chunk arena into one new (zeroed) chunk;
     * the second fill lands in that chunk, which the reset then keeps */
    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 1 << 20;
        qat_tensor *t = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &n, false);
        for (int64_t i = 0; t && i < n; i++) t->data[i] = NAN;
        qat_ctx_step_reset(ctx);
    }
}

static qat_rng rng_for(uint64_t seed) {
    qat_rng r;
    qat_rng_seed(&r, seed);
    return r;
}

/* ---- context, memory, errors ------------------------------------------------------- */

static void test_ctx_errors_are_sticky_and_readable(void) {
    qat_ctx_free(NULL); /* accepts NULL */
    qat_ctx *ctx = qat_ctx_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_STRING_EQUAL(qat_ctx_error(ctx), "");
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    qat_tensor *a = qat_tensor_new(ctx, QAT_MEM_STEP, 2, s23, false);
    qat_tensor *b = qat_tensor_new(ctx, QAT_MEM_STEP, 1, s4, false);
    CU_ASSERT_PTR_NULL(qat_add(ctx, a, b));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "[2, 3] and [4] do not broadcast"));
    /* a NULL input propagates without replacing the root cause */
    CU_ASSERT_PTR_NULL(qat_relu(ctx, qat_add(ctx, a, b)));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "do not broadcast"));
    CU_ASSERT_EQUAL(qat_backward(ctx, a), QAT_ERR_SHAPE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_OK);
    CU_ASSERT_STRING_EQUAL(qat_status_str(QAT_ERR_NOMEM), "out of memory");
    int64_t bad[2] = {2, 0};
    CU_ASSERT_PTR_NULL(qat_tensor_new(ctx, QAT_MEM_STEP, 2, bad, false));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_tensor_new(ctx, QAT_MEM_STEP, 5, s23, false));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_backward_misuse(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(1);
    int64_t s[2] = {2, 3};
    qat_tensor *w = t_rand(ctx, &rng, 2, s, -1, 1, true);
    qat_tensor *y = qat_relu(ctx, w);
    CU_ASSERT_EQUAL(qat_backward(ctx, y), QAT_ERR_SHAPE); /* not a scalar */
    qat_ctx_clear_error(ctx);
    qat_tensor *l = qat_sum(ctx, y);
    CU_ASSERT_EQUAL(qat_backward(ctx, l), QAT_OK);
    CU_ASSERT_EQUAL(qat_backward(ctx, l), QAT_ERR_STATE); /* twice */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_relu(ctx, w)); /* graph used: reset first */
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_STATE);
    qat_ctx_clear_error(ctx);
    qat_ctx_step_reset(ctx);
    /* no grad mode: nothing recorded, so backward refuses with a reason */
    qat_ctx_set_grad_enabled(ctx, false);
    l = qat_sum(ctx, qat_relu(ctx, w));
    CU_ASSERT_FALSE(l->requires_grad);
    CU_ASSERT_EQUAL(qat_backward(ctx, l), QAT_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "does not depend"));
    qat_ctx_free(ctx);
}

static void test_grads_accumulate_until_zeroed(void) {
    qat_ctx *ctx = qat_ctx_new();
    float v[3] = {1, -2, 3};
    int64_t s[1] = {3};
    qat_tensor *w = qat_tensor_from(ctx, QAT_MEM_PERSIST, v, 1, s, true);
    for (int step = 0; step < 2; step++) {
        CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_scale(ctx, w, 2.0f))), QAT_OK);
        qat_ctx_step_reset(ctx);
    }
    for (int i = 0; i < 3; i++) ASSERT_CLOSE(w->grad[i], 4.0f, 0);
    qat_tensor_zero_grad(w);
    for (int i = 0; i < 3; i++) ASSERT_CLOSE(w->grad[i], 0.0f, 0);
    qat_ctx_free(ctx);
}

static void test_step_arena_stops_allocating(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(2);
    int64_t sx[2] = {64, 784}, sw1[2] = {256, 784}, sb1[1] = {256}, sw2[2] = {10, 256},
            sb2[1] = {10};
    qat_tensor *x = t_rand(ctx, &rng, 2, sx, 0, 1, false);
    qat_tensor *w1 = t_rand(ctx, &rng, 2, sw1, -0.05f, 0.05f, true);
    qat_tensor *b1 = t_rand(ctx, &rng, 1, sb1, -0.05f, 0.05f, true);
    qat_tensor *w2 = t_rand(ctx, &rng, 2, sw2, -0.05f, 0.05f, true);
    qat_tensor *b2 = t_rand(ctx, &rng, 1, sb2, -0.05f, 0.05f, true);
    int32_t labels[64];
    for (int i = 0; i < 64; i++) labels[i] = i % 10;
    size_t after_warmup = 0;
    for (int step = 0; step < 6; step++) {
        qat_tensor *h = qat_relu(ctx, qat_linear(ctx, x, w1, b1));
        qat_tensor *loss = qat_cross_entropy(ctx, qat_linear(ctx, h, w2, b2), labels);
        CU_ASSERT_EQUAL(qat_backward(ctx, loss), QAT_OK);
        qat_ctx_step_reset(ctx);
        if (step == 1) after_warmup = qat_ctx_step_mallocs(ctx);
    }
    CU_ASSERT(after_warmup > 0);
    CU_ASSERT_EQUAL(qat_ctx_step_mallocs(ctx), after_warmup);
    size_t peak = qat_ctx_step_peak_bytes(ctx);
    CU_ASSERT(peak > (size_t)64 * 256 * 4);
    /* trimmed: the memory is given back, the next step allocates again and
     * computes the same loss; the high-water figure stays */
    qat_tensor *h = qat_relu(ctx, qat_linear(ctx, x, w1, b1));
    float before = qat_cross_entropy(ctx, qat_linear(ctx, h, w2, b2), labels)->data[0];
    qat_ctx_step_trim(ctx);
    CU_ASSERT_EQUAL(qat_ctx_step_peak_bytes(ctx), peak);
    h = qat_relu(ctx, qat_linear(ctx, x, w1, b1));
    qat_tensor *loss = qat_cross_entropy(ctx, qat_linear(ctx, h, w2, b2), labels);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    CU_ASSERT_EQUAL(loss->data[0], before);
    CU_ASSERT(qat_ctx_step_mallocs(ctx) > after_warmup);
    CU_ASSERT_EQUAL(qat_backward(ctx, loss), QAT_OK);
    qat_ctx_free(ctx);
}

static void test_reshape_views_share_storage(void) {
    qat_ctx *ctx = qat_ctx_new();
    float v[6] = {0, 1, 2, 3, 4, 5};
    int64_t s[3] = {1, 2, 3}, want[2] = {-1, 2};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_STEP, v, 3, s, false);
    qat_tensor *y = qat_reshape(ctx, x, 2, want);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->shape[0], 3);
    CU_ASSERT_EQUAL(y->shape[1], 2);
    CU_ASSERT_PTR_EQUAL(y->data, x->data);
    CU_ASSERT(qat_tensor_is_contiguous(y));
    qat_tensor *f = qat_flatten(ctx, x);
    CU_ASSERT_EQUAL(f->shape[0], 1);
    CU_ASSERT_EQUAL(f->shape[1], 6);
    int64_t bad[2] = {4, 2};
    CU_ASSERT_PTR_NULL(qat_reshape(ctx, x, 2, bad));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_SHAPE);
    qat_ctx_free(ctx);
}

static void test_rng_is_reproducible(void) {
    qat_rng a = rng_for(42), b = rng_for(42), c = rng_for(43);
    bool diff = false;
    for (int i = 0; i < 100; i++) {
        uint32_t x = qat_rng_u32(&a);
        CU_ASSERT_EQUAL(x, qat_rng_u32(&b));
        diff |= x != qat_rng_u32(&c);
    }
    CU_ASSERT(diff);
    double mean = 0;
    for (int i = 0; i < 10000; i++) {
        float u = qat_rng_uniform(&a);
        CU_ASSERT(u >= 0.0f && u < 1.0f);
        mean += u;
        CU_ASSERT(qat_rng_below(&a, 7) < 7);
    }
    ASSERT_CLOSE(mean / 10000, 0.5, 0.02);
}

/* ---- forward values, computed by hand ---------------------------------------------------- */

static void test_forward_elementwise_broadcast(void) {
    qat_ctx *ctx = qat_ctx_new();
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c[2] = {2, -1};
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1};
    qat_tensor *ta = qat_tensor_from(ctx, QAT_MEM_STEP, a, 2, s23, false);
    qat_tensor *tb = qat_tensor_from(ctx, QAT_MEM_STEP, b, 1, s3, false);
    qat_tensor *tc = qat_tensor_from(ctx, QAT_MEM_STEP, c, 2, s21, false);
    qat_tensor *y = qat_add(ctx, ta, tb); /* bias over rows */
    float want_add[6] = {11, 22, 33, 14, 25, 36};
    for (int i = 0; i < 6; i++) ASSERT_CLOSE(y->data[i], want_add[i], 0);
    y = qat_sub(ctx, ta, tb);
    for (int i = 0; i < 6; i++) ASSERT_CLOSE(y->data[i], a[i] - b[i % 3], 0);
    y = qat_mul(ctx, ta, tc); /* per-row (channel) vector */
    float want_mul[6] = {2, 4, 6, -4, -5, -6};
    for (int i = 0; i < 6; i++) ASSERT_CLOSE(y->data[i], want_mul[i], 0);
    y = qat_scale(ctx, ta, 0.5f);
    ASSERT_CLOSE(y->data[5], 3.0f, 0);
    float r[4] = {-1, 0, 0.5f, 7};
    int64_t s4[1] = {4};
    qat_tensor *tr = qat_tensor_from(ctx, QAT_MEM_STEP, r, 1, s4, false);
    y = qat_relu(ctx, tr);
    ASSERT_CLOSE(y->data[0], 0, 0);
    ASSERT_CLOSE(y->data[2], 0.5f, 0);
    y = qat_clamp(ctx, tr, 0, 6); /* ReLU6 */
    ASSERT_CLOSE(y->data[0], 0, 0);
    ASSERT_CLOSE(y->data[3], 6, 0);
    ASSERT_CLOSE(qat_sum(ctx, ta)->data[0], 21, 0);
    ASSERT_CLOSE(qat_mean(ctx, ta)->data[0], 3.5f, 0);
    ASSERT_OK(ctx);
    qat_ctx_free(ctx);
}

static void test_forward_matmul_linear(void) {
    qat_ctx *ctx = qat_ctx_new();
    float a[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 2, 1, 0}, b[2] = {0.5f, -0.5f};
    int64_t s23[2] = {2, 3}, s2[1] = {2};
    qat_tensor *ta = qat_tensor_from(ctx, QAT_MEM_STEP, a, 2, s23, false);
    qat_tensor *tw = qat_tensor_from(ctx, QAT_MEM_STEP, w, 2, s23, false);
    qat_tensor *tb = qat_tensor_from(ctx, QAT_MEM_STEP, b, 1, s2, false);
    /* a·wᵀ = [[1-3, 2+2], [4-6, 8+5]] = [[-2, 4], [-2, 13]] */
    qat_tensor *y = qat_matmul(ctx, ta, tw, false, true);
    float want[4] = {-2, 4, -2, 13};
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want[i], 0);
    y = qat_linear(ctx, ta, tw, tb);
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want[i] + b[i % 2], 0);
    /* aᵀ·w: [3, 3] */
    y = qat_matmul(ctx, ta, tw, true, false);
    CU_ASSERT_EQUAL(y->shape[0], 3);
    ASSERT_CLOSE(y->data[0], 1 * 1 + 4 * 2, 0);
    ASSERT_CLOSE(y->data[8], 3 * -1 + 6 * 0, 0);
    CU_ASSERT_PTR_NULL(qat_matmul(ctx, ta, tw, false, false));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_SHAPE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_linear(ctx, ta, tb, NULL));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_SHAPE);
    qat_ctx_free(ctx);
}

static void test_forward_cross_entropy(void) {
    qat_ctx *ctx = qat_ctx_new();
    /* row 0: equal logits -> ln 2; row 1: [1000, 0] label 0 -> ~0 (stable) */
    float l[4] = {3, 3, 1000, 0};
    int32_t lab[2] = {0, 0};
    int64_t s[2] = {2, 2};
    qat_tensor *t = qat_tensor_from(ctx, QAT_MEM_STEP, l, 2, s, false);
    qat_tensor *y = qat_cross_entropy(ctx, t, lab);
    ASSERT_CLOSE(y->data[0], 0.5 * log(2.0), 1e-6);
    CU_ASSERT(isfinite(y->data[0]));
    int32_t bad[2] = {0, 2};
    CU_ASSERT_PTR_NULL(qat_cross_entropy(ctx, t, bad));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "label 2 of sample 1"));
    qat_ctx_free(ctx);
}

static void test_forward_conv_pool(void) {
    qat_ctx *ctx = qat_ctx_new();
    /* 1x1x3x3 input 1..9, 2x2 kernel of ones, bias 1: window sums + 1 */
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, b[1] = {1};
    int64_t sx[4] = {1, 1, 3, 3}, sw[4] = {1, 1, 2, 2}, sb[1] = {1};
    qat_tensor *tx = qat_tensor_from(ctx, QAT_MEM_STEP, x, 4, sx, false);
    qat_tensor *tw = qat_tensor_from(ctx, QAT_MEM_STEP, w, 4, sw, false);
    qat_tensor *tb = qat_tensor_from(ctx, QAT_MEM_STEP, b, 1, sb, false);
    qat_tensor *y = qat_conv2d(ctx, tx, tw, tb, 1, 0);
    float want[4] = {13, 17, 25, 29};
    CU_ASSERT_EQUAL(y->shape[2], 2);
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want[i], 0);
    /* padding 1, stride 2: corners of the padded grid -> output 2x2 */
    y = qat_conv2d(ctx, tx, tw, NULL, 2, 1);
    float want_p[4] = {1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9};
    CU_ASSERT_EQUAL(y->shape[3], 2);
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want_p[i], 0);
    y = qat_maxpool2d(ctx, tx, 2, 1);
    float want_max[4] = {5, 6, 8, 9};
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want_max[i], 0);
    y = qat_avgpool2d(ctx, tx, 2, 1);
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], (want[i] - 1) / 4, 1e-6);
    y = qat_maxpool2d(ctx, tx, 3, 3);
    CU_ASSERT_EQUAL(y->numel, 1);
    ASSERT_CLOSE(y->data[0], 9, 0);
    ASSERT_OK(ctx);
    /* errors: kernel larger than input, channel mismatch, window too big */
    int64_t sbig[4] = {1, 1, 4, 4}, sc2[4] = {1, 2, 2, 2};
    qat_tensor *big = qat_tensor_new(ctx, QAT_MEM_STEP, 4, sbig, false);
    CU_ASSERT_PTR_NULL(qat_conv2d(ctx, tx, big, NULL, 1, 0));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_SHAPE);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_conv2d(ctx, tx, qat_tensor_new(ctx, QAT_MEM_STEP, 4, sc2, false), NULL, 1, 0));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_maxpool2d(ctx, tx, 4, 1));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_forward_dropout(void) {
    qat_ctx *ctx = qat_ctx_new();
    int64_t s[1] = {10000};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 1, s, false);
    for (int i = 0; i < 10000; i++) x->data[i] = 1.0f;
    qat_rng r1 = rng_for(7), r2 = rng_for(7);
    qat_tensor *y1 = qat_dropout(ctx, x, 0.25f, &r1), *y2 = qat_dropout(ctx, x, 0.25f, &r2);
    int zeros = 0;
    for (int i = 0; i < 10000; i++) {
        CU_ASSERT(y1->data[i] == 0.0f || fabsf(y1->data[i] - 4.0f / 3.0f) < 1e-6f);
        CU_ASSERT_EQUAL(y1->data[i], y2->data[i]);
        zeros += y1->data[i] == 0.0f;
    }
    CU_ASSERT(zeros > 2300 && zeros < 2700);
    CU_ASSERT_PTR_NULL(qat_dropout(ctx, x, 1.0f, &r1));
    qat_ctx_clear_error(ctx);
    x->data[3] = 0.0f;
    CU_ASSERT_PTR_NULL(qat_reciprocal(ctx, x));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "element 3 is zero"));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

/* ---- gradient checks ---------------------------------------------------------------------- */

static void test_grad_elementwise(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(11);
    const int64_t shapes[][2][4] = {
        {{3, 4}, {4}},             /* bias over rows */
        {{2, 3, 4, 5}, {3, 1, 1}}, /* per-channel over NCHW */
        {{1, 5}, {1, 5}},          /* batch 1, same shape */
        {{4, 1}, {1, 3}},          /* both broadcast: outer product shape */
    };
    const int ranks[][2] = {{2, 1}, {4, 3}, {2, 2}, {2, 2}};
    for (int kind = G_ADD; kind <= G_MUL; kind++)
        for (int s = 0; s < 4; s++) {
            qat_tensor *in[2] = {t_rand(ctx, &rng, ranks[s][0], shapes[s][0], -1, 1, true),
                                 t_rand(ctx, &rng, ranks[s][1], shapes[s][1], -1, 1, true)};
            gc_user u = {.kind = kind};
            check(ctx, &u, in, 2);
        }
    int64_t s35[2] = {3, 5};
    qat_tensor *x = t_rand(ctx, &rng, 2, s35, -1, 1, true);
    gc_user u = {.kind = G_SCALE};
    check(ctx, &u, &x, 1);
    qat_ctx_free(ctx);
}

static void test_grad_matmul_linear(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(12);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int64_t M = 3, K = 4, N = 5;
        int64_t sa[2] = {ta ? K : M, ta ? M : K}, sb[2] = {tb ? N : K, tb ? K : N};
        qat_tensor *in[2] = {t_rand(ctx, &rng, 2, sa, -1, 1, true),
                             t_rand(ctx, &rng, 2, sb, -1, 1, true)};
        gc_user u = {.kind = G_MATMUL, .ta = ta, .tb = tb};
        check(ctx, &u, in, 2);
    }
    const int64_t dims[][3] = {{1, 7, 3}, {5, 4, 6}, {2, 9, 1}}; /* N, in, out */
    for (int d = 0; d < 3; d++)
        for (int bias = 0; bias < 2; bias++) {
            int64_t sx[2] = {dims[d][0], dims[d][1]}, sw[2] = {dims[d][2], dims[d][1]},
                    sb[1] = {dims[d][2]};
            qat_tensor *in[3] = {t_rand(ctx, &rng, 2, sx, -1, 1, true),
                                 t_rand(ctx, &rng, 2, sw, -1, 1, true),
                                 t_rand(ctx, &rng, 1, sb, -1, 1, true)};
            gc_user u = {.kind = G_LINEAR, .k = bias};
            check(ctx, &u, in, bias ? 3 : 2);
        }
    /* flatten feeding linear: the view's gradient reaches the 4-D input */
    int64_t sx[4] = {2, 3, 2, 2}, sw[2] = {4, 12};
    qat_tensor *in[2] = {t_rand(ctx, &rng, 4, sx, -1, 1, true), t_rand(ctx, &rng, 2, sw, -1, 1, true)};
    gc_user u = {.kind = G_FLATTEN_LINEAR};
    check(ctx, &u, in, 2);
    qat_ctx_free(ctx);
}

static void test_grad_activations_reductions(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(13);
    const int64_t shapes[][4] = {{1, 6}, {4, 3}, {2, 3, 2, 5}};
    const int ranks[] = {2, 2, 4};
    for (int s = 0; s < 3; s++) {
        qat_tensor *x = t_rand(ctx, &rng, ranks[s], shapes[s], -1, 1, true);
        t_away_from_zero(x, 0.05f);
        gc_user u = {.kind = G_RELU};
        check(ctx, &u, &x, 1);
        /* clamp at ±0.5: keep values away from both edges */
        for (int64_t i = 0; i < x->numel; i++)
            if (fabsf(fabsf(x->data[i]) - 0.5f) < 0.05f) x->data[i] *= 1.3f;
        u.kind = G_CLAMP;
        check(ctx, &u, &x, 1);
        u.kind = G_SUM;
        check(ctx, &u, &x, 1);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = 0.5f + fabsf(x->data[i]); /* away from 0 */
        u.kind = G_RECIP;
        check(ctx, &u, &x, 1);
        u.kind = G_MEAN;
        check(ctx, &u, &x, 1);
    }
    qat_ctx_free(ctx);
}

static void test_grad_cross_entropy(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(14);
    int32_t labels[5] = {2, 0, 9, 3, 3};
    const int64_t shapes[][2] = {{1, 10}, {5, 10}, {3, 4}};
    for (int s = 0; s < 3; s++) {
        qat_tensor *x = t_rand(ctx, &rng, 2, shapes[s], -3, 3, true);
        int32_t lab[5];
        for (int i = 0; i < 5; i++) lab[i] = labels[i] % (int32_t)shapes[s][1];
        gc_user u = {.kind = G_XENT, .labels = lab};
        check(ctx, &u, &x, 1);
    }
    qat_ctx_free(ctx);
}

/* Class weights and label smoothing, each alone and together, and MSE
 * (on a leaf, and on an intermediate whose gradient the loss writes). */
static void test_grad_losses(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(41);
    int32_t lab[5] = {2, 0, 3, 3, 1};
    const float w[4] = {0.5f, 2.0f, 0.0f, 1.5f};
    const int64_t shape[2] = {5, 4};
    const struct { const float *w; float eps; } cases[] = {{w, 0.0f}, {NULL, 0.1f}, {w, 0.3f}};
    for (int c = 0; c < 3; c++) {
        qat_tensor *x = t_rand(ctx, &rng, 2, shape, -3, 3, true);
        gc_user u = {.kind = G_XENT_EX, .labels = lab, .weights = cases[c].w, .smoothing = cases[c].eps};
        check(ctx, &u, &x, 1);
    }
    float t[3 * 2 * 4];
    for (int i = 0; i < 24; i++) t[i] = qat_rng_normal(&rng);
    for (int mid = 0; mid < 2; mid++) {
        const int64_t s3[3] = {3, 2, 4};
        qat_tensor *x = t_rand(ctx, &rng, 3, s3, -2, 2, true);
        gc_user u = {.kind = G_MSE, .target = t, .ta = mid};
        check(ctx, &u, &x, 1);
    }
    qat_ctx_free(ctx);
}

/* A persistent leaf holding a copy of v, with a zeroed gradient. */
static qat_tensor *leaf_of(qat_ctx *ctx, const float *v, int rank, const int64_t *shape) {
    qat_tensor *t = qat_tensor_new(ctx, QAT_MEM_PERSIST, rank, shape, true);
    if (t) memcpy(t->data, v, (size_t)t->numel * sizeof(float));
    return t;
}

/* The losses against PyTorch's cross_entropy(weight=, label_smoothing=)
 * and mse_loss (tests/golden/make_loss_golden.py): the loss and the
 * logits' gradient within float rounding; no weights and no smoothing
 * gives qat_cross_entropy's bits. Bad arguments are refused. */
static void test_losses_match_pytorch(void) {
    qat_ctx *ctx = qat_ctx_new();
    const int64_t shape[2] = {6, 5};
    const float *losses[] = {xent_plain_loss, xent_weighted_loss, xent_smooth_loss, xent_both_loss};
    const float *grads[] = {xent_plain_grad, xent_weighted_grad, xent_smooth_grad, xent_both_grad};
    const float *weights[] = {NULL, xent_w, NULL, xent_w};
    const float eps[] = {0.0f, 0.0f, 0.1f, 0.2f};
    for (int c = 0; c < 4; c++) {
        qat_tensor *x = leaf_of(ctx, xent_x, 2, shape);
        qat_tensor *l = qat_cross_entropy_ex(ctx, x, xent_y, weights[c], eps[c]);
        CU_ASSERT_FATAL(l != NULL);
        CU_ASSERT_EQUAL(qat_backward(ctx, l), QAT_OK);
        CU_ASSERT(fabsf(l->data[0] - losses[c][0]) <= 2e-6f * fabsf(losses[c][0]));
        float worst = 0;
        for (int i = 0; i < 30; i++) worst = fmaxf(worst, fabsf(x->grad[i] - grads[c][i]));
        CU_ASSERT(worst <= 1e-6f);
        if (c == 0) { /* the plain op, in a context of its own */
            qat_ctx *c2 = qat_ctx_new();
            qat_tensor *x2 = leaf_of(c2, xent_x, 2, shape), *l2 = qat_cross_entropy(c2, x2, xent_y);
            CU_ASSERT_FATAL(l2 != NULL);
            CU_ASSERT_EQUAL(qat_backward(c2, l2), QAT_OK);
            CU_ASSERT_EQUAL(memcmp(&l2->data[0], &l->data[0], sizeof(float)), 0);
            CU_ASSERT_EQUAL(memcmp(x2->grad, x->grad, 30 * sizeof(float)), 0);
            qat_ctx_free(c2);
        }
        qat_ctx_step_reset(ctx);
    }
    const int64_t ms[2] = {3, 7};
    qat_tensor *p = leaf_of(ctx, mse_x, 2, ms);
    qat_tensor *l = qat_mse_loss(ctx, p, mse_t);
    CU_ASSERT_FATAL(l != NULL);
    CU_ASSERT_EQUAL(qat_backward(ctx, l), QAT_OK);
    CU_ASSERT(fabsf(l->data[0] - mse_loss[0]) <= 2e-6f * mse_loss[0]);
    for (int i = 0; i < 21; i++) CU_ASSERT(fabsf(p->grad[i] - mse_grad[i]) <= 1e-6f);
    qat_ctx_step_reset(ctx);
    /* refusals: smoothing outside [0, 1), a negative weight, every label of weight 0 */
    qat_tensor *x = leaf_of(ctx, xent_x, 2, shape);
    CU_ASSERT_PTR_NULL(qat_cross_entropy_ex(ctx, x, xent_y, NULL, 1.0f));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "smoothing") != NULL);
    qat_ctx_clear_error(ctx);
    const float neg[5] = {1, 1, -1, 1, 1}, zero[5] = {1, 1, 1, 0, 1};
    CU_ASSERT_PTR_NULL(qat_cross_entropy_ex(ctx, x, xent_y, neg, 0.0f));
    qat_ctx_clear_error(ctx);
    const int32_t threes[6] = {3, 3, 3, 3, 3, 3};
    CU_ASSERT_PTR_NULL(qat_cross_entropy_ex(ctx, x, threes, zero, 0.0f));
    CU_ASSERT(strstr(qat_ctx_error(ctx), "weight 0") != NULL);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_mse_loss(ctx, x, NULL));
    qat_ctx_free(ctx);
}

static void test_grad_conv2d(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(15);
    struct {
        int64_t x[4], w[4];
        int stride, pad;
    } cases[] = {
        {{1, 1, 5, 5}, {2, 1, 3, 3}, 1, 0}, /* batch 1 */
        {{2, 3, 6, 5}, {4, 3, 3, 2}, 1, 1}, /* non-square input and kernel, padding */
        {{3, 2, 7, 7}, {3, 2, 3, 3}, 2, 1}, /* stride 2 */
        {{1, 2, 1, 3}, {2, 2, 5, 5}, 1, 2}, /* "same" width, input shorter than the kernel */
    };
    /* an intermediate input, rows within AVX-512's 16 floats and beyond */
    struct {
        int64_t x[4], w[4];
        int pad;
    } mid[] = {{{2, 3, 6, 5}, {4, 3, 3, 2}, 1}, {{1, 2, 5, 18}, {2, 2, 3, 3}, 0}};
    for (int c = 0; c < 2; c++) {
        qat_tensor *in[2] = {t_rand(ctx, &rng, 4, mid[c].x, -1, 1, true), t_rand(ctx, &rng, 4, mid[c].w, -1, 1, true)};
        dirty_step_arena(ctx);
        gc_user u = {.kind = G_CONV_MID, .stride = 1, .pad = mid[c].pad};
        check(ctx, &u, in, 2);
    }
    for (int c = 0; c < 4; c++)
        for (int bias = 0; bias < 2; bias++) {
            int64_t sb[1] = {cases[c].w[0]};
            qat_tensor *in[3] = {t_rand(ctx, &rng, 4, cases[c].x, -1, 1, true),
                                 t_rand(ctx, &rng, 4, cases[c].w, -1, 1, true),
                                 t_rand(ctx, &rng, 1, sb, -1, 1, true)};
            gc_user u = {.kind = G_CONV, .stride = cases[c].stride, .pad = cases[c].pad, .k = bias};
            check(ctx, &u, in, bias ? 3 : 2);
        }
    qat_ctx_free(ctx);
}

/* The first gradient an intermediate tensor receives is stored (or its
 * consumer's buffer reused in place); the ones after it add. Both orders. */
static void test_grad_shared_intermediate(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(16);
    int64_t sx[2] = {3, 4}, sw[2] = {4, 4};
    for (int order = 0; order < 2; order++) {
        qat_tensor *in[2] = {t_rand(ctx, &rng, 2, sx, -1, 1, true), t_rand(ctx, &rng, 2, sw, -1, 1, true)};
        /* t = -0.3·x in ±[0.06, 0.25]: clear of the ReLU and clamp kinks */
        for (int64_t i = 0; i < in[0]->numel; i++) in[0]->data[i] = (i % 2 ? 1.0f : -1.0f) * (0.2f + 0.05f * (float)i);
        gc_user u = {.kind = G_SHARED, .k = order, .rng0 = rng_for(17)};
        dirty_step_arena(ctx);
        check(ctx, &u, in, 2);
    }
    qat_ctx_free(ctx);
}

/* The AVX-512 and AVX2 im2col and col2im give the portable ones' bits:
 * strides 1x1, 1x2, 2x2 and 2x1 (height x width; 2x1 is not taken),
 * paddings 0-2, kernels 1x1 to 5x5, widths 1 to 40 (one to three chunks
 * of 16 a row, one to five of 8) and, with 3 channels, 100 and 127 (up to
 * the 128 the rows take); 3, 4 and 9 channels (col2im sums four channels
 * side by side: a partial block, a whole one, two and a partial); adding
 * into a gradient that already holds values (signed zeros among them);
 * nothing written past the sample's columns, nothing read past the
 * buffers given (each of its exact size: AddressSanitizer sees any
 * access past them). Each set of rows runs where the CPU (and
 * QAT_MAX_ISA) allows it, and must then take more than 900 cases. */
typedef struct {
    const char *name;
    bool (*fits)(const qat__conv_dims *);
    void (*im2col)(const qat__conv_dims *, const float *, float *);
    void (*col2im)(const qat__conv_dims *, const float *, float *, bool);
} conv_rows;

static int conv_rows_case(const conv_rows *k, const qat__conv_dims *d, qat_rng *rng) {
    int64_t n_col = d->C * d->KH * d->KW * d->OH * d->OW, n_x = d->C * d->H * d->W;
    float *x = malloc((size_t)n_x * sizeof *x), *g0 = malloc((size_t)n_x * sizeof *g0),
          *g1 = malloc((size_t)n_x * sizeof *g1), *c0 = malloc((size_t)(n_col + 16) * sizeof *c0),
          *c1 = malloc((size_t)(n_col + 16) * sizeof *c1), *cx = malloc((size_t)n_col * sizeof *cx);
    CU_ASSERT_FATAL(x && g0 && g1 && c0 && c1 && cx);
    for (int64_t i = 0; i < n_x; i++) x[i] = qat_rng_normal(rng);
    for (int64_t i = 0; i < n_col + 16; i++) c0[i] = c1[i] = 99.0f; /* 16 sentinels after the columns */
    qat__im2col(d, x, c0);
    k->im2col(d, x, c1);
    CU_ASSERT_EQUAL(memcmp(c0, c1, (size_t)n_col * sizeof(float)), 0);
    bool spill = false; /* the last chunks' stores are masked: nothing past the columns */
    for (int64_t i = n_col; i < n_col + 16; i++) spill |= c1[i] != 99.0f;
    CU_ASSERT(!spill);
    for (int64_t i = 0; i < n_col; i++) cx[i] = qat_rng_normal(rng);
    for (int64_t i = 0; i < n_x; i++) g0[i] = g1[i] = i % 5 == 0 ? -0.0f : qat_rng_normal(rng);
    qat__col2im_add(d, cx, g0);
    k->col2im(d, cx, g1, false);
    CU_ASSERT_EQUAL(memcmp(g0, g1, (size_t)n_x * sizeof(float)), 0);
    /* overwriting garbage equals adding into zeros */
    for (int64_t i = 0; i < n_x; i++) g0[i] = 0.0f, g1[i] = NAN;
    qat__col2im_add(d, cx, g0);
    k->col2im(d, cx, g1, true);
    CU_ASSERT_EQUAL(memcmp(g0, g1, (size_t)n_x * sizeof(float)), 0);
    /* -0 added to -0 stays -0: a tap that does not reach an element must
     * add nothing to it, not +0 */
    for (int64_t i = 0; i < n_col; i++) cx[i] = -0.0f;
    for (int64_t i = 0; i < n_x; i++) g0[i] = g1[i] = -0.0f;
    qat__col2im_add(d, cx, g0);
    k->col2im(d, cx, g1, false);
    CU_ASSERT_EQUAL(memcmp(g0, g1, (size_t)n_x * sizeof(float)), 0);
    free(x), free(g0), free(g1), free(c0), free(c1), free(cx);
    return 1;
}

static int conv_rows_check(const conv_rows *k) {
    qat_rng rng = rng_for(22);
    static const int64_t widths[] = {1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 34, 37, 40, 100, 127};
    static const int64_t channels[] = {3, 4, 9};
    int checked = 0;
    for (size_t ci = 0; ci < sizeof channels / sizeof *channels; ci++)
        for (int64_t H = 1; H <= 13; H += 3)
            for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
                for (int64_t K = 1; K <= 5; K += 2)
                    for (int64_t pad = 0; pad <= 2; pad++)
                        for (int st = 0; st < 4; st++) {
                            int64_t W = widths[wi], sh = st & 1 ? 2 : 1, sw = st & 2 ? 2 : 1;
                            if (W > 40 && channels[ci] != 3) continue;
                            qat__conv_dims d = {.N = 1, .C = channels[ci], .H = H, .W = W, .O = 2, .KH = K, .KW = K,
                                                .sh = sh, .sw = sw, .ph = pad, .pw = pad, .G = 1};
                            if (H + 2 * pad < K || W + 2 * pad < K) continue;
                            d.OH = (H + 2 * pad - K) / sh + 1, d.OW = (W + 2 * pad - K) / sw + 1;
                            if (d.OH < 1 || d.OW < 1 || !k->fits(&d)) continue;
                            checked += conv_rows_case(k, &d, &rng);
                        }
    return checked;
}

static void test_conv_rows_match_portable(void) {
#if QAT__CONV_AVX512 && QAT__CONV_AVX2
    const struct {
        conv_rows rows;
        bool on;
    } sets[] = {{{"AVX-512", qat__conv_avx512_fits, qat__im2col_avx512, qat__col2im_add_avx512}, qat__have_avx512f()},
                {{"AVX2", qat__conv_avx2_fits, qat__im2col_avx2, qat__col2im_add_avx2}, qat_isa_allowed(QAT_ISA_AVX2)}};
    int ran = 0;
    for (size_t r = 0; r < sizeof sets / sizeof *sets; r++) {
        if (!sets[r].on) continue; /* this CPU (or QAT_MAX_ISA) does not run these rows */
        int checked = conv_rows_check(&sets[r].rows);
        if (checked <= 900) printf("\n  the %s rows: %d cases", sets[r].rows.name, checked);
        CU_ASSERT(checked > 900);
        ran++;
    }
    if (!ran) QAT_TEST_SKIP("this CPU has no AVX2: neither the AVX-512 nor the AVX2 rows run");
#else
    QAT_TEST_SKIP("built without the AVX-512 and AVX2 rows (x86-64 GCC or clang only)");
#endif
}

/* The AVX-512 and AVX2 max-pool rows give the portable rows' values,
 * codes and gradients bit for bit: every width from 1 to 40 outputs
 * (tails, more than one step), input rows as wide or (forward) one wider
 * (a last column no window covers), on data full of ties, signed zeros
 * and NaNs,
 * gradients with -0 among them; one row, and a plane of rows storing
 * whole vectors past each row's end. Each set of rows runs where the CPU
 * (and QAT_MAX_ISA) allows it. */
typedef struct {
    const char *name;
    bool on;
    void (*row)(const float *, const float *, float *, uint8_t *, int64_t, bool);
    void (*bw)(float *, int64_t, const float *, const uint8_t *, int64_t, bool);
} pool_rows;

static void pool_rows_check(const pool_rows *k) {
    qat_rng rng = rng_for(21);
    const float pool[8] = {0.0f, -0.0f, 1.0f, 1.0f, -2.0f, 0.5f, NAN, 3.0f};
    for (int64_t OW = 1; OW <= 40; OW++)
        for (int64_t W = 2 * OW; W <= 2 * OW + 1; W++) {
            float x[2 * 81 + 16], y0[40], y1[40], gy[40], g0[2 * 81 + 16], g1[2 * 81 + 16];
            uint8_t c0[40], c1[40];
            for (int64_t i = 0; i < 2 * W; i++) x[i] = pool[qat_rng_below(&rng, 8)];
            for (int64_t i = 0; i < OW; i++) gy[i] = i % 3 == 1 ? -0.0f : (float)(i + 1);
            for (int64_t i = 0; i < 2 * W + 16; i++) g0[i] = g1[i] = -7.0f; /* beyond 2W: must stay */
            qat__maxpool2_row(x, x + W, y0, c0, OW, false);
            k->row(x, x + W, y1, c1, OW, false);
            CU_ASSERT_EQUAL(memcmp(y0, y1, (size_t)OW * sizeof(float)), 0);
            CU_ASSERT_EQUAL(memcmp(c0, c1, (size_t)OW), 0);
            if (W % 2) continue; /* the store form is for windows that tile the rows (ops_pool.c) */
            qat__maxpool2_row_bw_store(g0, W, gy, c0, OW, false);
            k->bw(g1, W, gy, c0, OW, false);
            CU_ASSERT_EQUAL(memcmp(g0, g1, (size_t)(2 * W + 16) * sizeof(float)), 0);
            CU_ASSERT_EQUAL(g1[2 * W], -7.0f);
        }
    /* A plane of R row pairs as ops_pool.c runs it: spill (whole vectors
     * past a row's end, written again by the next row) on every row but
     * the last, which must not touch what follows the plane. */
    enum { R = 3 };
    for (int64_t OW = 1; OW <= 40; OW++) {
        int64_t W = 2 * OW;
        float x[2 * R * 80], y0[R * 40 + 16], y1[R * 40 + 16], gy[R * 40], g0[2 * R * 80 + 32], g1[2 * R * 80 + 32];
        uint8_t c0[R * 40 + 16], c1[R * 40 + 16];
        for (int64_t i = 0; i < 2 * R * W; i++) x[i] = pool[qat_rng_below(&rng, 8)];
        for (int64_t i = 0; i < R * OW; i++) gy[i] = (float)(i + 1);
        for (int64_t i = 0; i < R * 40 + 16; i++) y0[i] = y1[i] = -5.0f, c0[i] = c1[i] = 0xEE;
        for (int64_t i = 0; i < 2 * R * 80 + 32; i++) g0[i] = g1[i] = -7.0f;
        for (int64_t r = 0; r < R; r++) {
            const float *r0 = x + 2 * r * W, *r1 = r0 + W;
            qat__maxpool2_row(r0, r1, y0 + r * OW, c0 + r * OW, OW, r < R - 1);
            k->row(r0, r1, y1 + r * OW, c1 + r * OW, OW, r < R - 1);
        }
        CU_ASSERT_EQUAL(memcmp(y0, y1, sizeof y0), 0); /* the sentinels after the plane too */
        CU_ASSERT_EQUAL(memcmp(c0, c1, sizeof c0), 0);
        for (int64_t r = 0; r < R; r++) {
            qat__maxpool2_row_bw_store(g0 + 2 * r * W, W, gy + r * OW, c0 + r * OW, OW, r < R - 1);
            k->bw(g1 + 2 * r * W, W, gy + r * OW, c0 + r * OW, OW, r < R - 1);
        }
        CU_ASSERT_EQUAL(memcmp(g0, g1, sizeof g0), 0);
        CU_ASSERT_EQUAL(g1[2 * R * W], -7.0f);
    }
}

static void test_maxpool2_rows_match_portable(void) {
#if QAT__POOL_AVX512
    const pool_rows rows[] = {
        {"AVX-512", qat__have_avx512f() && qat__have_avx512bw(), qat__maxpool2_row_avx512, qat__maxpool2_row_bw_store_avx512},
        {"AVX2", qat_isa_allowed(QAT_ISA_AVX2), qat__maxpool2_row_avx2, qat__maxpool2_row_bw_store_avx2}};
    int ran = 0;
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
        if (rows[r].on) pool_rows_check(&rows[r]), ran++;
    if (!ran) QAT_TEST_SKIP("this CPU has no AVX2: neither the AVX-512 nor the AVX2 rows run");
#else
    QAT_TEST_SKIP("built without the AVX-512 and AVX2 rows (x86-64 GCC or clang only)");
#endif
}

/* Distinct values spaced well beyond the finite-difference step, so no
 * window's maximum can change under ±eps. */
static void fill_spaced(qat_tensor *t, qat_rng *rng) {
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = 0.05f * (float)i - 1.0f;
    for (int64_t i = t->numel - 1; i > 0; i--) {
        int64_t j = qat_rng_below(rng, (uint32_t)(i + 1));
        float tmp = t->data[i];
        t->data[i] = t->data[j];
        t->data[j] = tmp;
    }
}

static void test_grad_batchnorm(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(18);
    const int64_t shapes[][4] = {{4, 3}, {2, 3, 3, 2}, {1, 2, 3, 3}};
    const int ranks[] = {2, 4, 4};
    for (int s = 0; s < 3; s++) {
        int64_t sc[1] = {shapes[s][1]};
        qat_tensor *in[3] = {t_rand(ctx, &rng, ranks[s], shapes[s], -1, 1, true),
                             t_rand(ctx, &rng, 1, sc, 0.5f, 1.5f, true),
                             t_rand(ctx, &rng, 1, sc, -0.5f, 0.5f, true)};
        gc_user u = {.kind = G_BN_TRAIN};
        check(ctx, &u, in, 3);
        u.kind = G_BN_EVAL;
        check(ctx, &u, in, 3);
    }
    qat_ctx_free(ctx);
}

/* The folded BatchNorm op: x·scale (+ shift), batch-normalised. */
static qat_tensor *bn_scaled_loss(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    bool *training = user;
    static float rm[3], rv[3] = {1, 1, 1};
    qat_tensor *y = qat__batchnorm_scaled(ctx, in[0], in[1], in[2], in[3], in[4], rm, rv, 0.1f, 1e-5f, *training);
    /* a weighted sum: a plain sum of a normalised output has no gradient */
    qat_tensor *w = qat_tensor_new(ctx, QAT_MEM_STEP, y ? y->rank : 1, y ? y->shape : (int64_t[]){1}, false);
    for (int64_t i = 0; w && i < w->numel; i++) w->data[i] = (float)((i * 7) % 5) - 2.0f;
    return qat_sum(ctx, qat_mul(ctx, qat_mul(ctx, y, y), w));
}

/* A ReLU/ReLU6 written over its input (a float model's activation whose
 * input has no other reader) equals qat_relu/qat_clamp: values and input
 * gradients bit for bit, with NaN, +-0, values at the bounds; over a step
 * tensor whose producer allows it, and as a new tensor otherwise (a leaf). */
static void test_clamp_over(void) {
    float v[12] = {-2.0f, -0.0f, 0.0f, 1e-30f, 0.5f, 6.0f, 6.5f, NAN, 3.0f, -1e-30f, 5.999f, 100.0f};
    for (int six = 0; six < 2; six++)
        for (int leaf = 0; leaf < 2; leaf++) {
            float res[2][12], grad[2][12];
            for (int over = 0; over < 2; over++) {
                qat_ctx *ctx = qat_ctx_new();
                qat_tensor *w = qat_tensor_from(ctx, QAT_MEM_PERSIST, v, 1, (int64_t[]){12}, true);
                qat_tensor *one = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, (int64_t[]){12}, false);
                for (int i = 0; i < 12; i++) one->data[i] = 1.0f;
                qat_tensor *x = leaf ? w : qat_mul(ctx, w, one); /* out_free: may be written over */
                float hi = six ? 6.0f : INFINITY;
                qat_tensor *y = over ? qat__clamp_over(ctx, x, 0.0f, hi) : six ? qat_clamp(ctx, x, 0.0f, 6.0f) : qat_relu(ctx, x);
                CU_ASSERT_FATAL(y != NULL);
                if (over) CU_ASSERT(leaf ? y->data != x->data : y->data == x->data);
                memcpy(res[over], y->data, sizeof res[over]);
                qat_tensor *dy = qat_tensor_new(ctx, QAT_MEM_STEP, 1, (int64_t[]){12}, false);
                for (int i = 0; i < 12; i++) dy->data[i] = (float)(i % 5) - 1.5f;
                CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, dy))), QAT_OK);
                memcpy(grad[over], w->grad, sizeof grad[over]);
                qat_ctx_free(ctx);
            }
            CU_ASSERT_EQUAL(qat_test_bit_diffs(res[1], res[0], 12, true), 0);
            CU_ASSERT_EQUAL(qat_test_bit_diffs(grad[1], grad[0], 12, true), 0);
        }
}

static void test_grad_batchnorm_scaled(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(33);
    int64_t sx[4] = {2, 3, 3, 2}, sc[1] = {3};
    qat_tensor *in[5] = {t_rand(ctx, &rng, 4, sx, -1, 1, true), t_rand(ctx, &rng, 1, sc, 0.5f, 1.5f, true),
                         t_rand(ctx, &rng, 1, sc, -0.5f, 0.5f, true), t_rand(ctx, &rng, 1, sc, 0.5f, 1.5f, true),
                         t_rand(ctx, &rng, 1, sc, -0.5f, 0.5f, true)};
    for (int t = 0; t < 2; t++) {
        bool training = t == 0;
        qat_gradcheck_result r;
        qat_status st = qat_gradcheck(ctx, bn_scaled_loss, &training, in, 5, 1e-2f, 2e-3f, 2e-2f, &r);
        if (st) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL(st, QAT_OK);
        qat_ctx_clear_error(ctx);
    }
    /* its forward is qat_mul, qat_add and qat_batchnorm's, to the bit */
    float rm1[3] = {0}, rv1[3] = {1, 1, 1}, rm2[3] = {0}, rv2[3] = {1, 1, 1};
    qat_tensor *a = qat__batchnorm_scaled(ctx, in[0], in[1], in[2], in[3], in[4], rm1, rv1, 0.1f, 1e-5f, true);
    int64_t c11[3] = {3, 1, 1};
    qat_tensor *z = qat_add(ctx, qat_mul(ctx, in[0], qat_reshape(ctx, in[1], 3, c11)), qat_reshape(ctx, in[2], 3, c11));
    qat_tensor *b = qat_batchnorm(ctx, z, in[3], in[4], rm2, rv2, 0.1f, 1e-5f, true);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(a->data, b->data, a->numel, true), 0);
    CU_ASSERT(!memcmp(rm1, rm2, sizeof rm1) && !memcmp(rv1, rv2, sizeof rv1));
    /* its scale and shift gradients, in closed form from two sums a row
     * and the forward's, against the separate ops' (which sum dz·x and dz
     * element by element), in training and with frozen statistics, the
     * mean of z far from 0: within float rounding of Σ|dz·x| */
    qat_tensor *x3 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, sx, false); /* z's mean far from 0 */
    for (int64_t i = 0; i < x3->numel; i++) x3->data[i] = in[0]->data[i] + 3.0f;
    for (int t = 0; t < 2; t++) {
        bool training = t == 0;
        float g[2][2][3];
        for (int path = 0; path < 2; path++) {
            qat_ctx_step_reset(ctx);
            for (int i = 1; i < 5; i++) memset(in[i]->grad, 0, (size_t)in[i]->numel * sizeof(float));
            float rm[3] = {4, 4, 4}, rv[3] = {2, 2, 2};
            qat_tensor *y =
                path ? qat_batchnorm(ctx, qat_add(ctx, qat_mul(ctx, x3, qat_reshape(ctx, in[1], 3, c11)),
                                                  qat_reshape(ctx, in[2], 3, c11)),
                                     in[3], in[4], rm, rv, 0.1f, 1e-5f, training)
                     : qat__batchnorm_scaled(ctx, x3, in[1], in[2], in[3], in[4], rm, rv, 0.1f, 1e-5f, training);
            qat_tensor *w = qat_tensor_new(ctx, QAT_MEM_STEP, 4, sx, false);
            CU_ASSERT_FATAL(y && w);
            for (int64_t i = 0; i < w->numel; i++) w->data[i] = (float)((i * 7) % 5) - 2.0f;
            CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, qat_mul(ctx, y, y), w))), QAT_OK);
            memcpy(g[path][0], in[1]->grad, sizeof g[path][0]);
            memcpy(g[path][1], in[2]->grad, sizeof g[path][1]);
        }
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 2; k++) {
                if (!(fabsf(g[0][k][c] - g[1][k][c]) <= 2e-5f * (1.0f + fabsf(g[1][k][c]))))
                    printf("\n  %s, channel %d, %s: %g against %g", training ? "training" : "frozen", c,
                           k ? "shift" : "scale", (double)g[0][k][c], (double)g[1][k][c]);
                CU_ASSERT(fabsf(g[0][k][c] - g[1][k][c]) <= 2e-5f * (1.0f + fabsf(g[1][k][c])));
            }
    }
    qat_ctx_free(ctx);
}

static void test_forward_batchnorm(void) {
    qat_ctx *ctx = qat_ctx_new();
    /* one channel, values 1, 3: mean 2, biased var 1, unbiased var 2 */
    float x[2] = {1, 3}, g[1] = {2}, b[1] = {0.5f}, rm[1] = {0}, rv[1] = {1};
    int64_t sx[2] = {2, 1}, s1[1] = {1};
    qat_tensor *tx = qat_tensor_from(ctx, QAT_MEM_STEP, x, 2, sx, false);
    qat_tensor *tg = qat_tensor_from(ctx, QAT_MEM_STEP, g, 1, s1, false);
    qat_tensor *tb = qat_tensor_from(ctx, QAT_MEM_STEP, b, 1, s1, false);
    qat_tensor *y = qat_batchnorm(ctx, tx, tg, tb, rm, rv, 0.1f, 1e-5f, true);
    float k = 1.0f / sqrtf(1.0f + 1e-5f);
    ASSERT_CLOSE(y->data[0], -2 * k + 0.5f, 1e-6);
    ASSERT_CLOSE(y->data[1], 2 * k + 0.5f, 1e-6);
    ASSERT_CLOSE(rm[0], 0.2f, 1e-7);
    ASSERT_CLOSE(rv[0], 0.9f + 0.2f, 1e-6);
    y = qat_batchnorm(ctx, tx, tg, tb, rm, rv, 0.1f, 1e-5f, false); /* eval: running stats */
    ASSERT_CLOSE(y->data[0], 2 * (1 - 0.2f) / sqrtf(1.1f + 1e-5f) + 0.5f, 1e-5);
    ASSERT_CLOSE(rm[0], 0.2f, 1e-7); /* unchanged in eval */
    int64_t s11[2] = {1, 1};
    CU_ASSERT_PTR_NULL(qat_batchnorm(ctx, qat_tensor_from(ctx, QAT_MEM_STEP, x, 2, s11, false), tg,
                                     tb, rm, rv, 0.1f, 1e-5f, true));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_grad_pool_dropout(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(16);
    struct {
        int64_t x[4];
        int k, stride;
    } cases[] = {{{1, 1, 4, 4}, 2, 2}, {{2, 3, 5, 6}, 3, 1}, {{2, 2, 6, 5}, 2, 2}};
    for (int c = 0; c < 3; c++) {
        qat_tensor *x = t_rand(ctx, &rng, 4, cases[c].x, -1, 1, true);
        fill_spaced(x, &rng);
        gc_user u = {.kind = G_MAXPOOL, .k = cases[c].k, .stride = cases[c].stride};
        check(ctx, &u, &x, 1);
        u.ta = true;
        dirty_step_arena(ctx);
        check(ctx, &u, &x, 1);
        u = (gc_user){.kind = G_AVGPOOL, .k = cases[c].k, .stride = cases[c].stride};
        check(ctx, &u, &x, 1);
    }
    int64_t s[2] = {4, 6};
    qat_tensor *x = t_rand(ctx, &rng, 2, s, -1, 1, true);
    gc_user u = {.kind = G_DROPOUT, .rng0 = rng_for(99)};
    check(ctx, &u, &x, 1);
    qat_ctx_free(ctx);
}

/* The checker itself must fail on a wrong gradient: an op whose backward is
 * off by a factor is caught. Use clamp's mask as a probe: a clamp that cuts
 * inside the data gives zero gradient there, which the numeric side sees
 * unless we deliberately check clamp against relu's expectations. */
static qat_tensor *wrong_fn(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    (void)user;
    /* forward uses x*x*x but the graph only knows x*x: gradients differ */
    qat_tensor *sq = qat_mul(ctx, in[0], in[0]);
    qat_ctx_set_grad_enabled(ctx, false);
    qat_tensor *cube = qat_mul(ctx, sq, in[0]);
    bool grad = qat_ctx_status(ctx) == QAT_OK;
    qat_ctx_set_grad_enabled(ctx, true);
    if (!grad || !cube) return NULL;
    /* y = sum(sq) + (cube - sq) computed untracked: value of cube, gradient of sq */
    qat_tensor *y = qat_sum(ctx, sq);
    if (!y) return NULL;
    double extra = 0;
    for (int64_t i = 0; i < cube->numel; i++) extra += cube->data[i] - sq->data[i];
    y->data[0] += (float)extra;
    return y;
}

/* sum(x * c) with a NaN in c: every gradient and difference is NaN */
static qat_tensor *nan_fn(qat_ctx *ctx, qat_tensor *const *in, void *user) {
    (void)user;
    int64_t n = in[0]->numel;
    qat_tensor *c = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &n, false);
    if (!c) return NULL;
    for (int64_t i = 0; i < n; i++) c->data[i] = i == 1 ? NAN : 1.0f;
    return qat_sum(ctx, qat_mul(ctx, in[0], c));
}

static void test_gradcheck_catches_wrong_gradient(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(17);
    int64_t s[1] = {4};
    qat_tensor *x = t_rand(ctx, &rng, 1, s, 0.5f, 1.5f, true);
    qat_gradcheck_result r;
    CU_ASSERT_EQUAL(qat_gradcheck(ctx, wrong_fn, NULL, &x, 1, 1e-2f, 2e-3f, 1e-2f, &r),
                    QAT_ERR_STATE);
    CU_ASSERT(r.max_abs_err > 0.5);
    /* a NaN gradient fails: it compares false with every tolerance */
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_gradcheck(ctx, nan_fn, NULL, &x, 1, 1e-2f, 2e-3f, 1e-2f, &r), QAT_ERR_STATE);
    qat_ctx_free(ctx);
}

/* The 2x2/stride-2 fast path: values, and on ties the gradient goes to the
 * first maximum in (kh, kw) order, as the generic path and PyTorch do. */
static void test_maxpool_2x2_ties(void) {
    qat_ctx *ctx = qat_ctx_new();
    float x[16] = {1, 1, 0, 2, /* window (0,0): 1,1 / 1,0 -> first 1 at (0,0) */
                   1, 0, 2, 2, /* window (0,1): 0,2 / 2,2 -> first 2 at (0,3) */
                   -1, -3, 5, 4, /* window (1,0): -1,-3 / -2,-1 -> -1 at (2,0) first */
                   -2, -1, 4, 5}; /* window (1,1): 5,4 / 4,5 -> 5 at (2,2) first */
    int64_t sx[4] = {1, 1, 4, 4};
    qat_tensor *tx = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, sx, true);
    memcpy(tx->data, x, sizeof x);
    qat_tensor *y = qat_maxpool2d(ctx, tx, 2, 2);
    CU_ASSERT_FATAL(y != NULL);
    float want[4] = {1, 2, -1, 5};
    for (int i = 0; i < 4; i++) ASSERT_CLOSE(y->data[i], want[i], 0);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
    float gwant[16] = {1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
    for (int i = 0; i < 16; i++) ASSERT_CLOSE(tx->grad[i], gwant[i], 0);
    qat_ctx_free(ctx);
}

/* ---- the graph models' ops: gradient checks ------------------------------------------ */

/* One conv2d_ex case: shapes, parameters; with and without bias, and on an
 * intermediate input (its gradient written, not added). */
typedef struct {
    int64_t x[4], w[4];
    qat_conv2d_params p;
} conv_case;

static void grad_conv_cases(qat_ctx *ctx, qat_rng *rng, const conv_case *cases, int n) {
    for (int c = 0; c < n; c++)
        for (int variant = 0; variant < 3; variant++) {
            int64_t sb[1] = {cases[c].w[0]};
            qat_tensor *in[3] = {t_rand(ctx, rng, 4, cases[c].x, -1, 1, true),
                                 t_rand(ctx, rng, 4, cases[c].w, -1, 1, true), t_rand(ctx, rng, 1, sb, -1, 1, true)};
            gc_user u = {.kind = G_CONV_EX, .cp = cases[c].p, .k = variant != 1, .ta = variant == 2};
            if (u.ta) dirty_step_arena(ctx);
            check(ctx, &u, in, u.k ? 3 : 2);
        }
}

static void test_grad_conv_grouped(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(31);
    const conv_case cases[] = {
        {{2, 4, 5, 6}, {6, 2, 3, 3}, {1, 1, 1, 1, 2}},  /* groups 2 */
        {{1, 6, 6, 5}, {3, 2, 3, 2}, {2, 1, 1, 0, 3}},  /* groups 3, one output each, stride 2x1 */
        {{2, 3, 7, 5}, {6, 1, 2, 3}, {1, 2, 0, 1, 3}},  /* groups 3 == C: depthwise, multiplier 2 */
        {{1, 2, 9, 7}, {4, 1, 3, 3}, {2, 2, 1, 1, 2}},  /* depthwise, multiplier 2, stride 2 */
        {{2, 3, 6, 6}, {3, 1, 3, 3}, {1, 1, 1, 1, 3}},  /* depthwise 3x3, stride 1, padding 1 */
        {{1, 3, 7, 8}, {3, 1, 3, 3}, {2, 2, 0, 0, 3}},  /* stride 2, no padding */
        {{2, 2, 6, 8}, {2, 1, 3, 5}, {1, 1, 1, 2, 2}},  /* non-square 3x5 kernel */
        {{1, 2, 14, 9}, {2, 1, 10, 4}, {2, 2, 1, 1, 2}}, /* a DS-CNN stem's 10x4 at stride 2x2 */
        {{2, 2, 5, 5}, {4, 2, 3, 3}, {1, 2, 2, 1, 1}},  /* dense, separate strides and padding */
        {{2, 2, 4, 5}, {2, 1, 1, 1}, {1, 1, 1, 1, 2}},  /* depthwise 1x1 with padding: wider than the input */
        {{1, 2, 4, 4}, {4, 1, 3, 2}, {1, 1, 3, 2, 2}},  /* padding as large as the kernel */
        {{1, 2, 5, 4}, {2, 1, 2, 3}, {2, 3, 2, 3, 2}},  /* the same at strides 2x3 */
        {{2, 3, 4, 5}, {4, 3, 1, 1}, {1, 1, 0, 0, 1}},  /* pointwise: the input is its own column matrix */
        {{2, 4, 3, 3}, {6, 2, 1, 1}, {1, 1, 0, 0, 2}},  /* pointwise, groups 2 */
        {{1, 3, 5, 5}, {2, 3, 1, 1}, {2, 2, 0, 0, 1}},  /* 1x1 strided (a ResNet shortcut): im2col */
        /* the kernel-row form (stride 1 down, C·KW >= 16): KH sgemm calls over shared columns; few
         * outputs, so that the loss stays small enough for float differences */
        {{1, 6, 4, 5}, {2, 6, 3, 3}, {1, 1, 1, 1, 1}},  /* "same" padding */
        {{1, 12, 4, 4}, {2, 6, 3, 3}, {1, 1, 1, 0, 2}}, /* groups 2, no padding across */
        {{1, 4, 6, 7}, {1, 4, 5, 5}, {1, 1, 0, 0, 1}},  /* LeNet's 5x5, no padding */
        {{1, 6, 4, 7}, {2, 6, 3, 3}, {1, 2, 1, 1, 1}},  /* stride 2 across only */
        {{1, 8, 3, 4}, {1, 8, 2, 2}, {1, 1, 2, 1, 1}},  /* padding as large as the kernel */
    };
    grad_conv_cases(ctx, &rng, cases, (int)(sizeof cases / sizeof cases[0]));
    qat_ctx_free(ctx);
}

/* A convolution's columns are kept from forward to backward up to a size
 * (ops_conv.c), beyond it built again: a batch of 48 samples past that
 * size gives each sample's output and input gradient the bits of the same
 * sample run alone (whose columns are kept), in both column forms (3x3:
 * the kernel-row form; stride 2: the full one). */
static void test_conv_rebuilt_columns_match_kept(void) {
    const int64_t N = 64, xs[4] = {N, 16, 28, 28}, ws[4] = {8, 16, 3, 3}, one[4] = {1, 16, 28, 28};
    qat_conv2d_params ps[2] = {{1, 1, 1, 1, 1}, {2, 2, 1, 1, 1}};
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_rng rng = rng_for(41);
        qat_tensor *x = t_rand(ctx, &rng, 4, xs, -1, 1, true), *w = t_rand(ctx, &rng, 4, ws, -1, 1, true);
        qat_tensor *y = qat_conv2d_ex(ctx, x, w, NULL, &ps[k]);
        CU_ASSERT_FATAL(y != NULL);
        CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, y))), QAT_OK);
        int64_t yn = y->numel / N, xn = x->numel / N, bad = 0;
        float *ys = malloc((size_t)y->numel * sizeof(float)); /* y is step memory */
        CU_ASSERT_FATAL(ys != NULL);
        memcpy(ys, y->data, (size_t)y->numel * sizeof(float));
        for (int64_t n = 0; n < N; n++) {
            qat_ctx_step_reset(ctx);
            qat_tensor *xi = qat_tensor_new(ctx, QAT_MEM_STEP, 4, one, true);
            CU_ASSERT_FATAL(xi != NULL);
            memcpy(xi->data, x->data + n * xn, (size_t)xn * sizeof(float));
            qat_tensor *yi = qat_conv2d_ex(ctx, xi, w, NULL, &ps[k]);
            CU_ASSERT_FATAL(yi != NULL);
            CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, yi, yi))), QAT_OK);
            bad += memcmp(yi->data, ys + n * yn, (size_t)yn * sizeof(float)) != 0;
            bad += memcmp(xi->grad, x->grad + n * xn, (size_t)xn * sizeof(float)) != 0;
        }
        CU_ASSERT_EQUAL(bad, 0);
        free(ys);
        ASSERT_OK(ctx);
        qat_ctx_free(ctx);
    }
}

/* Pools with padding and non-square windows, on inputs spaced far beyond
 * the finite-difference step (no ties, no kink within reach). */
static void test_grad_pool_ex(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(32);
    struct {
        int64_t x[4];
        qat_pool2d_params p;
    } cases[] = {
        {{1, 2, 5, 6}, {3, 2, 2, 1, 1, 1}}, {{2, 1, 7, 7}, {3, 3, 2, 2, 1, 1}}, {{1, 2, 4, 9}, {2, 4, 1, 3, 0, 2}},
        {{1, 1, 6, 6}, {2, 2, 2, 2, 1, 1}}};
    for (int c = 0; c < 4; c++) {
        qat_tensor *x = t_rand(ctx, &rng, 4, cases[c].x, -1, 1, true);
        fill_spaced(x, &rng);
        gc_user u = {.kind = G_MAXPOOL_EX, .pp = cases[c].p};
        check(ctx, &u, &x, 1);
        u.ta = true;
        dirty_step_arena(ctx);
        check(ctx, &u, &x, 1);
        u = (gc_user){.kind = G_AVGPOOL_EX, .pp = cases[c].p};
        check(ctx, &u, &x, 1);
    }
    int64_t s[4] = {2, 3, 4, 5};
    qat_tensor *x = t_rand(ctx, &rng, 4, s, -1, 1, true);
    gc_user u = {.kind = G_GAP};
    check(ctx, &u, &x, 1);
    u.ta = true;
    dirty_step_arena(ctx);
    check(ctx, &u, &x, 1);
    qat_ctx_free(ctx);
}

/* Concat of three checked inputs and a fixed one (no gradient), along
 * axis 1 and axis 0. */
static void test_grad_concat(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(33);
    const int64_t a1[3][4] = {{2, 3, 2, 2}, {2, 1, 2, 2}, {2, 2, 2, 2}}, f1[4] = {2, 2, 2, 2};
    const int64_t a0[3][2] = {{2, 5}, {1, 5}, {3, 5}}, f0[2] = {2, 5};
    for (int axis = 0; axis < 2; axis++) {
        int rank = axis ? 4 : 2;
        qat_tensor *in[3];
        for (int i = 0; i < 3; i++) in[i] = t_rand(ctx, &rng, rank, axis ? a1[i] : a0[i], -1, 1, true);
        qat_tensor *fixed = t_rand(ctx, &rng, rank, axis ? f1 : f0, -1, 1, false);
        gc_user u = {.kind = G_CONCAT, .k = axis, .fixed = fixed};
        dirty_step_arena(ctx);
        check(ctx, &u, in, 3);
        CU_ASSERT_PTR_NULL(fixed->grad); /* it asked for none */
    }
    qat_ctx_free(ctx);
}

/* Sigmoid, tanh, hard-swish; hard-swish's inputs kept away from its kinks
 * at -3 and 3 (its second derivative also jumps at... only there). */
static void test_grad_activations_smooth(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(34);
    int64_t s[3] = {2, 3, 7};
    qat_tensor *x = t_rand(ctx, &rng, 3, s, -5, 5, true);
    for (int64_t i = 0; i < x->numel; i++)
        if (fabsf(fabsf(x->data[i]) - 3.0f) < 0.1f) x->data[i] += x->data[i] > 0 ? 0.25f : -0.25f;
    for (int kind = G_SIGMOID; kind <= G_HARDSWISH; kind++)
        for (int mid = 0; mid < 2; mid++) {
            gc_user u = {.kind = kind, .ta = mid};
            /* the intermediate is x/2: keep it off the kinks too */
            if (mid && kind == G_HARDSWISH)
                for (int64_t i = 0; i < x->numel; i++)
                    if (fabsf(fabsf(0.5f * x->data[i]) - 3.0f) < 0.1f) x->data[i] *= 1.2f;
            dirty_step_arena(ctx);
            check(ctx, &u, &x, 1);
        }
    qat_ctx_free(ctx);
}

/* ---- custom ops ---------------------------------------------------------------------- */

/* y = x·y + z elementwise, three inputs of one shape. */
static qat_status fma_shape(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank, int64_t *shape) {
    (void)user;
    for (int i = 1; i < n; i++)
        if (!qat_tensor_same_shape(x[0], x[i])) return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "inputs differ in shape");
    *rank = x[0]->rank;
    memcpy(shape, x[0]->shape, (size_t)x[0]->rank * sizeof(int64_t));
    return QAT_OK;
}
static qat_status fma_forward(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)ctx, (void)user, (void)n;
    for (int64_t i = 0; i < y->numel; i++) y->data[i] = x[0]->data[i] * x[1]->data[i] + x[2]->data[i];
    return QAT_OK;
}
static qat_status fma_backward(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, const qat_tensor *y,
                               float *const *gx) {
    (void)ctx, (void)n;
    if (user) (*(int *)user)++; /* counts the calls */
    for (int64_t i = 0; i < y->numel; i++) {
        float g = y->grad[i];
        if (gx[0]) gx[0][i] += g * x[1]->data[i];
        if (gx[1]) gx[1][i] += g * x[0]->data[i];
        if (gx[2]) gx[2][i] += g;
    }
    return QAT_OK;
}
static const qat_custom_op fma_op = {"fma", fma_shape, fma_forward, fma_backward};

static qat_tensor *custom_fma(qat_ctx *ctx, qat_tensor *const *in) {
    qat_tensor *xs[3] = {in[0], in[1], in[2]};
    return qat_custom(ctx, &fma_op, NULL, 3, xs);
}

static void test_custom_op_gradcheck(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(35);
    int64_t s[2] = {3, 4};
    qat_tensor *in[3] = {t_rand(ctx, &rng, 2, s, -1, 1, true), t_rand(ctx, &rng, 2, s, -1, 1, true),
                         t_rand(ctx, &rng, 2, s, -1, 1, true)};
    gc_user u = {.kind = G_CUSTOM};
    check(ctx, &u, in, 3);
    /* an input that wants no gradient gets a NULL gx, and the values are right */
    qat_tensor *c = t_rand(ctx, &rng, 2, s, -1, 1, false);
    int calls = 0;
    qat_tensor *xs[3] = {in[0], c, in[2]};
    qat_tensor *y = qat_custom(ctx, &fma_op, &calls, 3, xs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int64_t i = 0; i < y->numel; i++) ASSERT_CLOSE(y->data[i], in[0]->data[i] * c->data[i] + in[2]->data[i], 0);
    qat_tensor_zero_grad(in[0]);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_OK);
    CU_ASSERT_EQUAL(calls, 1);
    CU_ASSERT_PTR_NULL(c->grad);
    for (int64_t i = 0; i < y->numel; i++) ASSERT_CLOSE(in[0]->grad[i], c->data[i], 0);
    qat_ctx_free(ctx);
}

/* Callbacks that fail: with a message of their own (kept, the op named in
 * front), and without one (the library says which callback failed). */
static qat_status fail_quiet(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)ctx, (void)user, (void)n, (void)x, (void)y;
    return QAT_ERR_UNSUPPORTED;
}
static qat_status fail_loud(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, qat_tensor *y) {
    (void)user, (void)n, (void)x, (void)y;
    return qat_ctx_fail(ctx, QAT_ERR_ARG, "the moon is full");
}
static qat_status bw_fail(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, const qat_tensor *y,
                          float *const *gx) {
    (void)ctx, (void)user, (void)n, (void)x, (void)y, (void)gx;
    return QAT_ERR_STATE;
}
static qat_status shape_rank9(qat_ctx *ctx, void *user, int n, const qat_tensor *const *x, int *rank, int64_t *shape) {
    (void)ctx, (void)user, (void)n, (void)x, (void)shape;
    *rank = 9;
    return QAT_OK;
}

static void test_custom_op_errors(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(36);
    int64_t s[1] = {5};
    qat_tensor *a = t_rand(ctx, &rng, 1, s, -1, 1, true);
    qat_tensor *xs[1] = {a};
    qat_custom_op quiet = {"quiet", fma_shape, fail_quiet, fma_backward};
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &quiet, NULL, 1, xs));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "custom op quiet: forward failed"));
    qat_ctx_clear_error(ctx);
    qat_custom_op loud = {"loud", fma_shape, fail_loud, fma_backward};
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &loud, NULL, 1, xs));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    CU_ASSERT_STRING_EQUAL(qat_ctx_error(ctx), "custom op loud: forward: the moon is full");
    qat_ctx_clear_error(ctx);
    /* a failing backward stops qat_backward with its status and a message */
    qat_custom_op bw = {"bw", fma_shape, fma_forward, bw_fail};
    qat_tensor *x3[3] = {a, a, a};
    qat_tensor *y = qat_custom(ctx, &bw, NULL, 3, x3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, y)), QAT_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "custom op bw: backward failed"));
    qat_ctx_clear_error(ctx);
    qat_ctx_step_reset(ctx);
    /* misuse: bad rank from shape(), no inputs, too many, a NULL callback, a NULL input */
    qat_custom_op r9 = {"r9", shape_rank9, fma_forward, fma_backward};
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &r9, NULL, 1, xs));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "custom op r9: shape gave rank 9"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &fma_op, NULL, 0, xs));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    qat_tensor *many[QAT_CUSTOM_MAX_INPUTS + 1];
    for (int i = 0; i <= QAT_CUSTOM_MAX_INPUTS; i++) many[i] = a;
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &fma_op, NULL, QAT_CUSTOM_MAX_INPUTS + 1, many));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "17 inputs (want 1 to 16)"));
    qat_ctx_clear_error(ctx);
    qat_custom_op none = {"none", fma_shape, NULL, fma_backward};
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &none, NULL, 1, xs));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    qat_tensor *withnull[2] = {a, NULL};
    CU_ASSERT_PTR_NULL(qat_custom(ctx, &fma_op, NULL, 2, withnull));
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "custom op fma: input 1 is NULL"));
    qat_ctx_free(ctx);
}

/* ---- grouped convolution against the dense one ------------------------------------------ */

/* A grouped convolution equals a dense one (groups 1) whose weight is
 * block-diagonal: forward, dx, the weight gradient's blocks (the rest of
 * the dense weight's gradient is what the zero blocks would get), db.
 * Tolerance: 1e-5 of the tensor's largest magnitude. The two add the same
 * nonzero products (the dense one adds exact zeros besides) in different
 * orders: sgemm's blocking, or the depthwise kernel's tap order; each
 * float32 sum of K <= 90 terms is within about K·2^-24 of the exact one,
 * relative to its terms' magnitudes, about 5e-6 here. */
static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

static void expect_close_scaled(const float *got, const float *want, int64_t n, double rel, const char *what) {
    double tol = rel * (max_abs(want, n) + 1e-30), worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    if (!(worst <= tol)) printf("\n  %s: max diff %g > %g\n", what, worst, tol);
    CU_ASSERT(worst <= tol);
}

static void grouped_vs_dense(const conv_case *cc, uint64_t seed) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(seed);
    int64_t G = cc->p.groups, C = cc->x[1], O = cc->w[0], Cg = C / G, Og = O / G, KK = cc->w[2] * cc->w[3];
    int64_t swd[4] = {O, C, cc->w[2], cc->w[3]}, sb[1] = {O};
    qat_tensor *x = t_rand(ctx, &rng, 4, cc->x, -1, 1, true), *x2 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, cc->x, true);
    qat_tensor *w = t_rand(ctx, &rng, 4, cc->w, -1, 1, true), *wd = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, swd, true);
    qat_tensor *b = t_rand(ctx, &rng, 1, sb, -1, 1, true), *b2 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, sb, true);
    memcpy(x2->data, x->data, (size_t)x->numel * sizeof(float));
    memcpy(b2->data, b->data, (size_t)b->numel * sizeof(float));
    for (int64_t o = 0; o < O; o++) /* output o reads group o / Og's channels */
        memcpy(wd->data + (o * C + o / Og * Cg) * KK, w->data + o * Cg * KK, (size_t)(Cg * KK) * sizeof(float));
    qat_conv2d_params dense = cc->p;
    dense.groups = 1;
    qat_tensor *y = qat_conv2d_ex(ctx, x, w, b, &cc->p), *y2 = qat_conv2d_ex(ctx, x2, wd, b2, &dense);
    CU_ASSERT_FATAL(y && y2 && qat_tensor_same_shape(y, y2));
    qat_tensor *dy = t_rand(ctx, &rng, 4, y->shape, -1, 1, false);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_add(ctx, qat_sum(ctx, qat_mul(ctx, y, dy)), qat_sum(ctx, qat_mul(ctx, y2, dy)))),
                    QAT_OK);
    expect_close_scaled(y->data, y2->data, y->numel, 1e-5, "y");
    expect_close_scaled(x->grad, x2->grad, x->numel, 1e-5, "dx");
    expect_close_scaled(b->grad, b2->grad, b->numel, 1e-5, "db");
    float *blocks = calloc((size_t)w->numel, sizeof(float));
    for (int64_t o = 0; o < O; o++)
        memcpy(blocks + o * Cg * KK, wd->grad + (o * C + o / Og * Cg) * KK, (size_t)(Cg * KK) * sizeof(float));
    expect_close_scaled(w->grad, blocks, w->numel, 1e-5, "dw");
    free(blocks);
    qat_ctx_free(ctx);
}

static void test_conv_grouped_equals_dense(void) {
    const conv_case cases[] = {
        {{2, 4, 6, 5}, {6, 2, 3, 3}, {1, 1, 1, 1, 2}},    /* groups 2 */
        {{3, 6, 7, 6}, {9, 2, 3, 2}, {2, 1, 1, 0, 3}},    /* groups 3 */
        {{4, 8, 14, 14}, {8, 1, 3, 3}, {1, 1, 1, 1, 8}},  /* depthwise, MobileNet's 3x3 */
        {{4, 8, 7, 7}, {16, 1, 3, 3}, {2, 2, 1, 1, 8}},   /* depthwise, multiplier 2, stride 2 */
        {{2, 3, 20, 12}, {3, 1, 10, 4}, {2, 2, 1, 1, 3}}, /* depthwise 10x4 at stride 2x2 */
        {{2, 5, 9, 28}, {5, 1, 3, 5}, {1, 1, 1, 2, 5}},   /* rows wider than 16 floats */
    };
    for (int c = 0; c < 6; c++) grouped_vs_dense(&cases[c], 40 + (uint64_t)c);
}

/* ---- golden values from PyTorch 1.13 ------------------------------------------------------ */

/* Worst |got - want| in units of the reference tensor's largest magnitude
 * times FLT_EPSILON (ulps of the tensor's scale). */
static double ulps_of_scale(const float *got, const float *want, int64_t n) {
    double scale = max_abs(want, n) * FLT_EPSILON, worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]) / scale);
    return worst;
}

/* Tolerances, in ulps of each tensor's scale (FLT_EPSILON times its
 * largest magnitude): outputs and input gradients are sums of at most 40
 * products, added in a different order than oneDNN's; 4 ulps. Weight
 * and bias gradients sum a whole batch's products (up to 150 here) in
 * lanes where PyTorch blocks differently; 8 ulps. */
#define GOLDEN_ULPS_Y 4.0
#define GOLDEN_ULPS_W 8.0

static void check_ulps(const char *case_name, const char *what, const float *got, const float *want, int64_t n,
                       double limit) {
    double u = ulps_of_scale(got, want, n);
    if (!(u <= limit)) printf("\n  %s %s: %.2f ulps of scale (limit %.0f)\n", case_name, what, u, limit);
    CU_ASSERT(u <= limit);
}

typedef struct {
    const char *name;
    const int *dims; /* N C H W O KH KW sh sw ph pw */
    int groups;
    const float *x, *w, *b, *dy, *y, *dx, *dw, *db;
} conv_golden;
#define CONV_GOLDEN(n) {#n, n##_dims, n##_groups, n##_x, n##_w, n##_b, n##_dy, n##_y, n##_dx, n##_dw, n##_db}

/* Forward, then backward of sum(y ⊙ dy): y's gradient is dy exactly. */
static void golden_conv_case(const conv_golden *g) {
    qat_ctx *ctx = qat_ctx_new();
    const int *d = g->dims;
    int64_t sx[4] = {d[0], d[1], d[2], d[3]}, sw[4] = {d[4], d[1] / g->groups, d[5], d[6]}, sb[1] = {d[4]};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_PERSIST, g->x, 4, sx, true);
    qat_tensor *w = qat_tensor_from(ctx, QAT_MEM_PERSIST, g->w, 4, sw, true);
    qat_tensor *b = qat_tensor_from(ctx, QAT_MEM_PERSIST, g->b, 1, sb, true);
    qat_conv2d_params p = {d[7], d[8], d[9], d[10], g->groups};
    qat_tensor *y = qat_conv2d_ex(ctx, x, w, b, &p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    qat_tensor *dy = qat_tensor_from(ctx, QAT_MEM_STEP, g->dy, 4, y->shape, false);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, dy))), QAT_OK);
    check_ulps(g->name, "y", y->data, g->y, y->numel, GOLDEN_ULPS_Y);
    check_ulps(g->name, "dx", x->grad, g->dx, x->numel, GOLDEN_ULPS_Y);
    check_ulps(g->name, "dw", w->grad, g->dw, w->numel, GOLDEN_ULPS_W);
    check_ulps(g->name, "db", b->grad, g->db, b->numel, GOLDEN_ULPS_W);
    qat_ctx_free(ctx);
}

static void test_golden_conv(void) {
    const conv_golden cases[] = {CONV_GOLDEN(dw_s1p1), CONV_GOLDEN(dw_m2s2), CONV_GOLDEN(dw_k35),
                                 CONV_GOLDEN(dw_stem), CONV_GOLDEN(dw_s21), CONV_GOLDEN(grp2)};
    for (int c = 0; c < 6; c++) golden_conv_case(&cases[c]);
}

typedef struct {
    const char *name;
    bool max;
    const int *dims; /* N C H W kh kw sh sw ph pw */
    const float *x, *dy, *y, *dx;
} pool_golden;
#define POOL_GOLDEN(n, m) {#n, m, n##_dims, n##_x, n##_dy, n##_y, n##_dx}

/* Max pooling picks and routes exactly; average pooling sums in PyTorch's
 * order and divides as it does: both bit for bit. */
static void golden_pool_case(const pool_golden *g) {
    qat_ctx *ctx = qat_ctx_new();
    const int *d = g->dims;
    int64_t sx[4] = {d[0], d[1], d[2], d[3]};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_PERSIST, g->x, 4, sx, true);
    qat_pool2d_params p = {d[4], d[5], d[6], d[7], d[8], d[9]};
    qat_tensor *y = g->max ? qat_maxpool2d_ex(ctx, x, &p) : qat_avgpool2d_ex(ctx, x, &p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    qat_tensor *dy = qat_tensor_from(ctx, QAT_MEM_STEP, g->dy, 4, y->shape, false);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, dy))), QAT_OK);
    int64_t bad_y = qat_test_bit_diffs(y->data, g->y, y->numel, false), bad_dx = qat_test_bit_diffs(x->grad, g->dx, x->numel, false);
    if (bad_y || bad_dx) printf("\n  %s: %lld outputs, %lld gradients differ\n", g->name, (long long)bad_y, (long long)bad_dx);
    CU_ASSERT_EQUAL(bad_y, 0);
    CU_ASSERT_EQUAL(bad_dx, 0);
    qat_ctx_free(ctx);
}

static void test_golden_pool(void) {
    const pool_golden cases[] = {POOL_GOLDEN(mp_pad, true), POOL_GOLDEN(mp_33s2, true), POOL_GOLDEN(ap_pad, false),
                                 POOL_GOLDEN(ap_33s2, false)};
    for (int c = 0; c < 4; c++) golden_pool_case(&cases[c]);
    /* global average pooling: a double sum against PyTorch's float one, 2 ulps */
    qat_ctx *ctx = qat_ctx_new();
    int64_t sx[4] = {2, 3, 4, 5}, sy[2] = {2, 3};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_PERSIST, gap_x, 4, sx, true);
    qat_tensor *y = qat_global_avgpool2d(ctx, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT(y->rank == 2 && y->shape[0] == 2 && y->shape[1] == 3);
    qat_tensor *dy = qat_tensor_from(ctx, QAT_MEM_STEP, gap_dy, 2, sy, false);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, dy))), QAT_OK);
    check_ulps("gap", "y", y->data, gap_y, 6, 2.0);
    CU_ASSERT_EQUAL(qat_test_bit_diffs(x->grad, gap_dx, x->numel, false), 0); /* dy / 20, as PyTorch */
    qat_ctx_free(ctx);
}

/* Sigmoid, tanh, hard-swish: forward and input gradient bit for bit with
 * PyTorch on the sweep (signed zeros included), and qat_eval_* equal to
 * the op's elements. */
static void golden_activation(const char *name, qat_tensor *(*op)(qat_ctx *, qat_tensor *), float (*eval)(float),
                              const uint32_t *want_y, const uint32_t *want_dx) {
    qat_ctx *ctx = qat_ctx_new();
    int64_t n = ACT_N;
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, &n, true);
    qat_tensor *dy = qat_tensor_new(ctx, QAT_MEM_STEP, 1, &n, false);
    memcpy(x->data, act_x, sizeof act_x);
    memcpy(dy->data, act_dy, sizeof act_dy);
    qat_tensor *y = op(ctx, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, dy))), QAT_OK);
    int64_t bad_y = qat_test_bit_diffs(y->data, (const float *)want_y, n, true);
    int64_t bad_dx = qat_test_bit_diffs(x->grad, (const float *)want_dx, n, false), bad_eval = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = eval(x->data[i]);
        bad_eval += memcmp(&e, &y->data[i], sizeof e) != 0;
    }
    if (bad_y || bad_dx || bad_eval)
        printf("\n  %s: %lld outputs, %lld gradients, %lld eval values differ\n", name, (long long)bad_y,
               (long long)bad_dx, (long long)bad_eval);
    CU_ASSERT_EQUAL(bad_y, 0);
    CU_ASSERT_EQUAL(bad_dx, 0);
    CU_ASSERT_EQUAL(bad_eval, 0);
    qat_ctx_free(ctx);
}

static void test_golden_activations(void) {
    CU_ASSERT_EQUAL(sizeof act_x, ACT_N * sizeof(float)); /* uint32 bits read as floats */
    golden_activation("sigmoid", qat_sigmoid, qat_eval_sigmoid, act_sigmoid_y, act_sigmoid_dx);
    golden_activation("tanh", qat_tanh, qat_eval_tanh, act_tanh_y, act_tanh_dx);
    golden_activation("hardswish", qat_hardswish, qat_eval_hardswish, act_hardswish_y, act_hardswish_dx);
    /* PyTorch's boundary conventions, by hand: hard-swish's gradient is
     * -1/2 at -3 (the middle piece) and 1 at 3; the functions at a few
     * points */
    ASSERT_CLOSE(qat_eval_hardswish(-3.0f), 0.0f, 0);
    ASSERT_CLOSE(qat_eval_hardswish(3.0f), 3.0f, 0);
    ASSERT_CLOSE(qat_eval_sigmoid(0.0f), 0.5f, 0);
    ASSERT_CLOSE(qat_eval_tanh(0.0f), 0.0f, 0);
    ASSERT_CLOSE(qat_eval_tanh(-20.0f), -1.0f, 0);
    CU_ASSERT(isnan(qat_eval_sigmoid(NAN)) && isnan(qat_eval_tanh(NAN)) && isnan(qat_eval_hardswish(NAN)));
    qat_ctx *ctx = qat_ctx_new();
    float v[2] = {-3.0f, 3.0f};
    int64_t s[1] = {2};
    qat_tensor *x = qat_tensor_from(ctx, QAT_MEM_PERSIST, v, 1, s, true);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_hardswish(ctx, x))), QAT_OK);
    ASSERT_CLOSE(x->grad[0], -0.5f, 0);
    ASSERT_CLOSE(x->grad[1], 1.0f, 0);
    qat_ctx_free(ctx);
}

/* ---- SIMD row copies against the portable ones ------------------------------------------ */

/* Every width 1..40, several pitches: the same bits, adding into signed
 * zeros too, and nothing outside the rows touched; the AVX-512 and the
 * AVX2 rows, each where this CPU (and QAT_MAX_ISA) has it. */
static void test_rows_match_portable(void) {
#if QAT__CONV_AVX512 || QAT__CONV_AVX2
    typedef struct {
        qat__rows_fn copy, add;
    } rows_pair;
    rows_pair simd[2];
    int n_simd = 0;
#if QAT__CONV_AVX512
    if (qat__have_avx512f()) simd[n_simd++] = (rows_pair){qat__rows_copy_avx512, qat__rows_add_avx512};
#endif
#if QAT__CONV_AVX2
    if (qat_isa_allowed(QAT_ISA_AVX2)) simd[n_simd++] = (rows_pair){qat__rows_copy_avx2, qat__rows_add_avx2};
#endif
    if (n_simd == 0) QAT_TEST_SKIP("this CPU has no AVX2 (or QAT_MAX_ISA caps it): the SIMD rows never run");
    qat_rng rng = rng_for(37);
    enum { PLANES = 2, ROWS = 3, PITCH = 48, PLANE = ROWS * PITCH + 8 };
    static float src[PLANES * PLANE], d0[PLANES * PLANE], d1[PLANES * PLANE];
    for (int i = 0; i < PLANES * PLANE; i++) src[i] = i % 7 == 0 ? -0.0f : qat_rng_normal(&rng);
    int checked = 0;
    /* source pitches: wide, and short (several rows to a vector: a 7x7
     * plane's rows at pitch 7 or 8) */
    for (int k = 0; k < n_simd; k++)
        for (int64_t width = 1; width <= 40; width++)
            for (int64_t gap = 0; gap <= 8; gap += 4)
                for (int64_t sgap = 0; sgap <= 2; sgap++) {
                    int64_t spitch = sgap == 2 ? PITCH - 1 : width + sgap;
                    if (width + gap > PITCH) continue;
                    qat__rows g = {.planes = PLANES, .rows = ROWS, .dplane = PLANE, .dpitch = width + gap,
                                   .splane = PLANE - 5, .spitch = spitch, .width = width};
                    for (int i = 0; i < PLANES * PLANE; i++) d0[i] = d1[i] = i % 5 == 0 ? -0.0f : (float)i;
                    qat__rows_copy(&g, d0, src);
                    simd[k].copy(&g, d1, src);
                    CU_ASSERT_EQUAL(memcmp(d0, d1, sizeof d0), 0);
                    for (int i = 0; i < PLANES * PLANE; i++) d0[i] = d1[i] = i % 5 == 0 ? -0.0f : (float)i;
                    qat__rows_add(&g, d0, src);
                    simd[k].add(&g, d1, src);
                    CU_ASSERT_EQUAL(memcmp(d0, d1, sizeof d0), 0);
                    checked++;
                }
    CU_ASSERT(checked >= 300 * n_simd);
#else
    QAT_TEST_SKIP("built without the SIMD rows (x86-64 GCC or clang only)");
#endif
}

/* The ops whose fast paths depend on the instruction-set level (im2col
 * and col2im of a strided, padded conv; the depthwise rows; 2x2 and
 * general max pooling, forward and backward; the observers' min/max runs
 * in test_fakequant) run at every level this CPU has, capped by
 * QAT_MAX_ISA: values and gradients must be the same bits as at the
 * portable level (these kernels only move, compare or add in one order). */
enum { LEVEL_OUTS = 9, LEVEL_VALUES = 6, LEVEL_MAX = 16 };
typedef struct {
    float *v[LEVEL_MAX];
    int64_t n[LEVEL_MAX];
    int count; /* outputs kept */
} level_result;

/* Keeps a copy of n floats as output k. */
static void level_keep(level_result *r, int k, const float *src, int64_t n) {
    r->n[k] = src ? n : 0;
    r->v[k] = calloc((size_t)r->n[k] + 1, sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->v[k]);
    if (src) memcpy(r->v[k], src, (size_t)r->n[k] * sizeof(float));
    if (k >= r->count) r->count = k + 1;
}

static void level_run(level_result *r, qat_isa isa) {
    setenv("QAT_MAX_ISA", qat_isa_str(isa), 1);
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(91);
    const int64_t xs[4] = {3, 8, 12, 16}, ws[4] = {6, 8, 3, 3}, ds[4] = {8, 1, 3, 3};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, xs, true);
    qat_tensor *w = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, ws, true);
    qat_tensor *d = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, ds, true);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
    for (int64_t i = 0; i < w->numel; i++) w->data[i] = qat_rng_normal(&rng);
    for (int64_t i = 0; i < d->numel; i++) d->data[i] = qat_rng_normal(&rng);
    /* dense and depthwise at stride 1 and 2 (each has its own AVX-512 rows) */
    qat_conv2d_params c1 = {.stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1, .groups = 1};
    qat_conv2d_params c2 = {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 1};
    qat_conv2d_params d1 = {.stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1, .groups = 8};
    qat_conv2d_params d2 = {.stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 8};
    qat_pool2d_params pp = {.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1};
    qat_tensor *y[LEVEL_VALUES] = {qat_conv2d_ex(ctx, x, w, NULL, &c1), qat_conv2d_ex(ctx, x, w, NULL, &c2),
                                   qat_conv2d_ex(ctx, x, d, NULL, &d1), qat_conv2d_ex(ctx, x, d, NULL, &d2),
                                   qat_maxpool2d(ctx, x, 2, 2), qat_maxpool2d_ex(ctx, x, &pp)};
    qat_tensor *loss = NULL;
    for (int k = 0; k < LEVEL_VALUES; k++) {
        qat_tensor *sq = qat_sum(ctx, qat_mul(ctx, y[k], y[k]));
        loss = loss ? qat_add(ctx, loss, sq) : sq;
    }
    CU_ASSERT_EQUAL(qat_backward(ctx, loss), QAT_OK);
    const qat_tensor *t[LEVEL_OUTS] = {y[0], y[1], y[2], y[3], y[4], y[5], x, w, d};
    r->count = 0;
    for (int k = 0; k < LEVEL_OUTS; k++)
        level_keep(r, k, !t[k] ? NULL : k < LEVEL_VALUES ? t[k]->data : t[k]->grad, t[k] ? t[k]->numel : 0);
    ASSERT_OK(ctx);
    qat_ctx_free(ctx);
    unsetenv("QAT_MAX_ISA");
}

static void level_free(level_result *r) {
    for (int k = 0; k < r->count; k++) free(r->v[k]);
}

/* The loops built in three copies (QAT__SIMD_FN: AVX-512, AVX2 with FMA,
 * baseline), which the op picks by the level: BatchNorm (plain and the
 * folded form) forward and backward in training, the activations, fake
 * quantization per tensor and per channel (its calibration's min/max too)
 * and its STE, SGD with Nesterov momentum and Adam. Sums in a fixed order,
 * no contraction: the same bits at every level. */
static void loops_run(level_result *r, qat_isa isa) {
    setenv("QAT_MAX_ISA", qat_isa_str(isa), 1);
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(92);
    const int64_t xs[4] = {4, 8, 5, 13}, cs[1] = {8};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, xs, true);
    qat_tensor *g = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, cs, true);
    qat_tensor *b = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, cs, true);
    qat_tensor *sc = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, cs, true);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 2.0f * qat_rng_normal(&rng);
    for (int64_t i = 0; i < 8; i++)
        g->data[i] = 1.0f + 0.1f * qat_rng_normal(&rng), b->data[i] = 0.1f * qat_rng_normal(&rng),
        sc->data[i] = 1.0f + 0.2f * qat_rng_normal(&rng);
    float rm[2][8] = {{0}}, rv[2][8] = {{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}};
    qat_qtype qt, qc;
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init(ctx, &qt, 8, true, false, 4, xs, NULL), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_qtype_init_axis(ctx, &qc, 4, true, true, 4, xs, 1), QAT_OK);
    qat_qtype_calibrate(&qt, x->data, false);
    qat_qtype_calibrate(&qc, x->data, true);
    qat_tensor *y[7] = {qat_batchnorm(ctx, x, g, b, rm[0], rv[0], 0.1f, 1e-5f, true),
                        qat__batchnorm_scaled(ctx, x, sc, NULL, g, b, rm[1], rv[1], 0.1f, 1e-5f, true),
                        qat_sigmoid(ctx, x), qat_tanh(ctx, x), qat_hardswish(ctx, x),
                        qat_fake_quant(ctx, x, &qt, QAT_STE_CLIPPED), qat_fake_quant(ctx, x, &qc, QAT_STE_PLAIN)};
    qat_tensor *loss = NULL;
    for (int k = 0; k < 7; k++) {
        qat_tensor *sq = qat_sum(ctx, qat_mul(ctx, y[k], y[k]));
        loss = loss ? qat_add(ctx, loss, sq) : sq;
    }
    CU_ASSERT_EQUAL(qat_backward(ctx, loss), QAT_OK);
    r->count = 0;
    for (int k = 0; k < 7; k++) level_keep(r, k, y[k] ? y[k]->data : NULL, y[k] ? y[k]->numel : 0);
    level_keep(r, 7, x->grad, x->numel), level_keep(r, 8, g->grad, 8), level_keep(r, 9, b->grad, 8);
    level_keep(r, 10, sc->grad, 8), level_keep(r, 11, rv[1], 8);
    /* three steps of SGD (Nesterov) and of Adam on x's values from x's gradient */
    for (int k = 0; k < 2; k++) {
        qat_optim_config c = qat_optim_defaults(k ? QAT_OPTIM_ADAM : QAT_OPTIM_SGD);
        if (!k) c.momentum = 0.9f, c.nesterov = true, c.weight_decay = 1e-4f;
        qat_optim o;
        CU_ASSERT_EQUAL_FATAL(qat_optim_init(&o, ctx, &c, x->numel), QAT_OK);
        float *p = malloc((size_t)x->numel * sizeof *p);
        memcpy(p, x->data, (size_t)x->numel * sizeof *p);
        for (int s = 0; s < 3; s++) qat_optim_step(&o, p, x->grad, c.lr);
        level_keep(r, 12 + k, p, x->numel);
        free(p);
    }
    ASSERT_OK(ctx);
    qat_ctx_free(ctx);
    unsetenv("QAT_MAX_ISA");
}

/* Runs `run` at the portable level and at every level this CPU has above
 * it; every output must be the portable level's bits. */
static void every_level_same_bits(void (*run)(level_result *, qat_isa), int outputs) {
    level_result ref, got;
    run(&ref, QAT_ISA_PORTABLE);
    CU_ASSERT_EQUAL(ref.count, outputs);
    for (int k = 0; k < ref.count; k++) CU_ASSERT(ref.n[k] > 0);
    int levels = 0;
    for (int isa = QAT_ISA_AVX2; isa < QAT_ISA_COUNT; isa++) {
        if (!qat_isa_cpu_has((qat_isa)isa)) continue;
        run(&got, (qat_isa)isa);
        for (int k = 0; k < ref.count; k++) {
            CU_ASSERT_EQUAL(got.n[k], ref.n[k]);
            bool same = got.n[k] == ref.n[k] && !memcmp(got.v[k], ref.v[k], (size_t)ref.n[k] * sizeof(float));
            if (!same) printf("\n  level %s: output %d differs from the portable level's bits\n", qat_isa_str((qat_isa)isa), k);
            CU_ASSERT(same);
        }
        level_free(&got);
        levels++;
    }
    level_free(&ref);
    if (!levels) QAT_TEST_SKIP("this CPU has no SIMD level above portable: only the portable kernels ran");
}

static void test_training_kernels_every_level(void) { every_level_same_bits(level_run, LEVEL_OUTS); }
static void test_simd_copies_every_level(void) { every_level_same_bits(loops_run, 14); }

/* ---- misuse, grad mode, errors ------------------------------------------------------------ */

static void expect_error(qat_ctx *ctx, const qat_tensor *y, const char *want) {
    CU_ASSERT_PTR_NULL(y);
    if (!strstr(qat_ctx_error(ctx), want)) printf("\n  error \"%s\", want \"%s\"\n", qat_ctx_error(ctx), want);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), want));
    qat_ctx_clear_error(ctx);
}

static void test_new_ops_no_grad_and_errors(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng = rng_for(38);
    int64_t sx[4] = {2, 4, 6, 6}, sw[4] = {4, 1, 3, 3}, sd[4] = {4, 2, 3, 3}, s2[2] = {2, 4};
    qat_tensor *x = t_rand(ctx, &rng, 4, sx, -1, 1, true), *w = t_rand(ctx, &rng, 4, sw, -1, 1, true);
    qat_tensor *wd = t_rand(ctx, &rng, 4, sd, -1, 1, true), *v = t_rand(ctx, &rng, 2, s2, -1, 1, true);
    qat_conv2d_params dw = {1, 1, 1, 1, 4}, g2 = {1, 1, 0, 0, 2};
    qat_pool2d_params pp = {3, 3, 2, 2, 1, 1};
    /* no grad: every new op computes and records nothing */
    qat_ctx_set_grad_enabled(ctx, false);
    qat_tensor *ys[9] = {qat_conv2d_ex(ctx, x, w, NULL, &dw), qat_conv2d_ex(ctx, x, wd, NULL, &g2),
                         qat_maxpool2d_ex(ctx, x, &pp), qat_avgpool2d_ex(ctx, x, &pp),
                         qat_global_avgpool2d(ctx, x), qat_concat(ctx, 2, (qat_tensor *[]){v, v}, 0),
                         qat_sigmoid(ctx, v), qat_tanh(ctx, v), qat_hardswish(ctx, v)};
    for (int i = 0; i < 9; i++) {
        CU_ASSERT_PTR_NOT_NULL(ys[i]);
        if (ys[i]) CU_ASSERT(!ys[i]->requires_grad && !ys[i]->node);
    }
    qat_tensor *xs3[3] = {v, v, v};
    qat_tensor *yc = qat_custom(ctx, &fma_op, NULL, 3, xs3);
    CU_ASSERT(yc && !yc->requires_grad && !yc->node);
    CU_ASSERT(qat__tape_peek(ctx) && !qat__tape_peek(ctx)->tape); /* the context's tape state (qat/context.h) */
    ASSERT_OK(ctx);
    qat_ctx_set_grad_enabled(ctx, true);
    /* a NULL input propagates without replacing the first error */
    qat_ctx_fail(ctx, QAT_ERR_IO, "first");
    CU_ASSERT_PTR_NULL(qat_conv2d_ex(ctx, NULL, w, NULL, &dw));
    CU_ASSERT_PTR_NULL(qat_maxpool2d_ex(ctx, NULL, &pp));
    CU_ASSERT_PTR_NULL(qat_avgpool2d_ex(ctx, NULL, &pp));
    CU_ASSERT_PTR_NULL(qat_global_avgpool2d(ctx, NULL));
    CU_ASSERT_PTR_NULL(qat_concat(ctx, 2, (qat_tensor *[]){v, NULL}, 0));
    CU_ASSERT_PTR_NULL(qat_sigmoid(ctx, NULL));
    CU_ASSERT_PTR_NULL(qat_tanh(ctx, NULL));
    CU_ASSERT_PTR_NULL(qat_hardswish(ctx, NULL));
    CU_ASSERT_STRING_EQUAL(qat_ctx_error(ctx), "first");
    qat_ctx_clear_error(ctx);
    /* shape and argument errors name the op and the shapes */
    qat_conv2d_params g3 = {1, 1, 0, 0, 3}, s0 = {0, 1, 0, 0, 1};
    expect_error(ctx, qat_conv2d_ex(ctx, x, wd, NULL, &g3),
                 "qat_conv2d_ex: input [2, 4, 6, 6] and weight [4, 2, 3, 3] with groups 3: want");
    expect_error(ctx, qat_conv2d_ex(ctx, x, w, NULL, &g2),
                 "qat_conv2d_ex: input [2, 4, 6, 6] and weight [4, 1, 3, 3] with groups 2: want");
    expect_error(ctx, qat_conv2d_ex(ctx, x, w, v, &dw), "qat_conv2d_ex: bias has 8 elements, want 4");
    expect_error(ctx, qat_conv2d_ex(ctx, x, w, NULL, &s0), "qat_conv2d_ex: stride 0x1, padding 0x0, groups 1");
    expect_error(ctx, qat_conv2d_ex(ctx, x, w, NULL, NULL), "qat_conv2d_ex: NULL parameters");
    int64_t sbig[4] = {4, 1, 9, 3};
    expect_error(ctx, qat_conv2d_ex(ctx, x, qat_tensor_new(ctx, QAT_MEM_STEP, 4, sbig, false), NULL, &dw),
                 "qat_conv2d_ex: kernel [4, 1, 9, 3] larger than input [2, 4, 6, 6] with padding 1x1");
    qat_pool2d_params big = {3, 3, 1, 1, 2, 0};
    expect_error(ctx, qat_maxpool2d_ex(ctx, x, &big),
                 "qat_maxpool2d_ex: window 3x3, stride 1x1, padding 2x0 do not fit input [2, 4, 6, 6]");
    expect_error(ctx, qat_avgpool2d_ex(ctx, v, &pp), "qat_avgpool2d_ex: want contiguous [N, C, H, W], got [2, 4]");
    int64_t s3[2] = {2, 3};
    qat_tensor *u = t_rand(ctx, &rng, 2, s3, -1, 1, false);
    expect_error(ctx, qat_concat(ctx, 2, (qat_tensor *[]){v, u}, 0),
                 "qat_concat: input 1 [2, 3] does not match input 0 [2, 4] outside axis 0");
    expect_error(ctx, qat_concat(ctx, 2, (qat_tensor *[]){v, u}, 2), "qat_concat: axis 2 outside a rank-2 tensor");
    expect_error(ctx, qat_concat(ctx, 0, (qat_tensor *[]){v}, 0), "qat_concat: 0 inputs");
    expect_error(ctx, qat_global_avgpool2d(ctx, v), "qat_global_avgpool2d: want contiguous [N, C, H, W], got [2, 4]");
    qat_tensor *vu[2] = {v, u};
    expect_error(ctx, qat_custom(ctx, &fma_op, NULL, 2, vu), "custom op fma: shape: inputs differ in shape");
    /* concat along -1 is the last axis, as in PyTorch */
    qat_tensor *cat = qat_concat(ctx, 2, (qat_tensor *[]){v, u}, -1);
    CU_ASSERT(cat && cat->shape[0] == 2 && cat->shape[1] == 7);
    if (cat) ASSERT_CLOSE(cat->data[4], u->data[0], 0);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"ctx: errors are sticky and readable", test_ctx_errors_are_sticky_and_readable},
        {"ctx: backward misuse is reported", test_backward_misuse},
        {"ctx: gradients accumulate until zeroed", test_grads_accumulate_until_zeroed},
        {"ctx: step arena stops allocating", test_step_arena_stops_allocating},
        {"tensor: reshape views share storage", test_reshape_views_share_storage},
        {"rng: reproducible and uniform", test_rng_is_reproducible},
        {"forward: elementwise and broadcasting", test_forward_elementwise_broadcast},
        {"forward: matmul and linear", test_forward_matmul_linear},
        {"forward: cross-entropy", test_forward_cross_entropy},
        {"losses: class weights, label smoothing and MSE match PyTorch", test_losses_match_pytorch},
        {"gradcheck: weighted and smoothed cross-entropy, MSE", test_grad_losses},
        {"forward: conv2d and pooling", test_forward_conv_pool},
        {"forward: dropout", test_forward_dropout},
        {"grad: add/sub/mul/scale", test_grad_elementwise},
        {"grad: matmul/linear/flatten", test_grad_matmul_linear},
        {"grad: relu/clamp/sum/mean", test_grad_activations_reductions},
        {"grad: cross-entropy", test_grad_cross_entropy},
        {"grad: conv2d", test_grad_conv2d},
        {"grad: an intermediate with several consumers", test_grad_shared_intermediate},
        {"maxpool 2x2 rows: the AVX-512 and AVX2 rows equal portable", test_maxpool2_rows_match_portable},
        {"conv im2col/col2im: the AVX-512 and AVX2 rows equal portable", test_conv_rows_match_portable},
        {"conv: rebuilt columns give the kept ones' bits", test_conv_rebuilt_columns_match_kept},
        {"grad: pooling and dropout", test_grad_pool_dropout},
        {"forward: batchnorm train and eval", test_forward_batchnorm},
        {"grad: batchnorm train and eval", test_grad_batchnorm},
        {"grad: the folded BatchNorm (x·scale + shift, normalised); its forward's bits", test_grad_batchnorm_scaled},
        {"ReLU/ReLU6 over the input: qat_relu's and qat_clamp's values and gradients", test_clamp_over},
        {"grad: checker catches a wrong gradient", test_gradcheck_catches_wrong_gradient},
        {"maxpool 2x2: values, and ties send the gradient to the first maximum", test_maxpool_2x2_ties},
        {"grad: grouped and depthwise conv2d_ex", test_grad_conv_grouped},
        {"grad: padded, non-square max/avg pooling, global average pooling", test_grad_pool_ex},
        {"grad: concat along axis 0 and 1", test_grad_concat},
        {"grad: sigmoid, tanh, hard-swish", test_grad_activations_smooth},
        {"custom op: gradcheck, values, NULL gradient for an input without one", test_custom_op_gradcheck},
        {"custom op: failing callbacks and misuse give messages", test_custom_op_errors},
        {"conv2d_ex: grouped and depthwise equal dense with block-diagonal weights", test_conv_grouped_equals_dense},
        {"golden: depthwise and grouped conv2d against PyTorch", test_golden_conv},
        {"golden: padded pools and global average pooling against PyTorch", test_golden_pool},
        {"golden: sigmoid, tanh, hard-swish bits against PyTorch", test_golden_activations},
        {"depthwise rows: AVX-512 and AVX2 equal portable", test_rows_match_portable},
        {"conv, depthwise, max pooling: the same bits at every QAT_MAX_ISA level", test_training_kernels_every_level},
        {"BatchNorm, activations, fake quantization, optimizers: the same bits at every level",
         test_simd_copies_every_level},
        {"new ops: no-grad mode, NULL inputs, error messages", test_new_ops_no_grad_and_errors},
        {NULL, NULL},
    };
    return qat_test_main("autograd", cases, argc, argv);
}
