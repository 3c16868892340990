/* Threads and the reducer hook (qat/parallel.h).
 *
 * The pool runs every task once; every threaded op gives the same bits on
 * 1, 2 and 3 threads (outputs and gradients); whole QAT training steps of
 * LeNet-BN and the MLP end in the same model state; the integer engine
 * gives the same integers; and the reducer makes two "processes" (two
 * threads, each with its own context and half of a batch) see the global
 * batch: observers exactly the full batch's range, BatchNorm its
 * statistics, and both end identical. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <stdlib.h>

#include "internals.h"
#include "qat/export.h"
#include "qat/infer.h"
#include "qat/layers.h"
#include "qat/optim.h"
#include "test_util.h"

/* ---- the pool itself -------------------------------------------------------------- */

typedef struct {
    int *count;
    int threads;
    int bad_worker;
    qat_pool *pool;
    int nested_tasks;
} pool_probe;

static void count_task(void *u, int64_t t, int worker) {
    pool_probe *p = u;
    p->count[t]++; /* each task its own slot */
    if (worker < 0 || worker >= p->threads) p->bad_worker = 1;
}

static void test_pool_runs_every_task_once(void) {
    for (int threads = 1; threads <= 4; threads++) {
        qat_status st;
        qat_pool *pool = qat_pool_new(threads, &st);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
        CU_ASSERT_EQUAL(st, QAT_OK);
        CU_ASSERT_EQUAL(qat_pool_threads(pool), threads);
        int64_t sizes[] = {0, 1, 2, 3, 7, 64, 1000};
        for (int round = 0; round < 50; round++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                int count[1000] = {0};
                pool_probe p = {.count = count, .threads = threads};
                qat_pool_run(pool, sizes[k], count_task, &p);
                int ok = !p.bad_worker;
                for (int64_t t = 0; t < 1000; t++) ok &= count[t] == (t < sizes[k]);
                CU_ASSERT(ok);
            }
        qat_pool_free(pool);
    }
    qat_status st = QAT_OK;
    CU_ASSERT_PTR_NULL(qat_pool_new(0, &st));
    CU_ASSERT_EQUAL(st, QAT_ERR_ARG);
    CU_ASSERT_PTR_NULL(qat_pool_new(QAT_POOL_MAX + 1, NULL));
    CU_ASSERT_EQUAL(qat_pool_threads(NULL), 1);
    qat_pool_free(NULL);
}

static void inner_task(void *u, int64_t t, int worker) {
    pool_probe *p = u;
    (void)t;
    if (worker != 0) p->bad_worker = 1; /* inline: on the calling thread's slot */
    __atomic_fetch_add(&p->nested_tasks, 1, __ATOMIC_RELAXED);
}

static void outer_task(void *u, int64_t t, int worker) {
    pool_probe *p = u;
    (void)t, (void)worker;
    pool_probe inner = {.threads = p->threads};
    qat_pool_run(p->pool, 5, inner_task, &inner); /* runs inline: the pool is busy */
    __atomic_fetch_add(&p->nested_tasks, inner.nested_tasks + (inner.bad_worker ? 1000 : 0), __ATOMIC_RELAXED);
}

static void test_pool_nested_loops_run_inline(void) {
    qat_pool *pool = qat_pool_new(3, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
    pool_probe p = {.threads = 3, .pool = pool};
    qat_pool_run(pool, 8, outer_task, &p);
    CU_ASSERT_EQUAL(p.nested_tasks, 40);
    qat_pool_free(pool);
}

/* ---- ops: the same bits on 1, 2 and 3 threads ------------------------------------------- */

typedef struct {
    const char *name;
    int n_in;
    int64_t shapes[3][4];
    int ranks[3];
    qat_tensor *(*fn)(qat_ctx *ctx, qat_tensor *const *in, void *user);
    void *user;
} op_case;

/* Runs the case on a context with the given pool: the output and every
 * input's gradient (loss = Σ y·r, r random) into out (malloc'd). */
static float *run_case(const op_case *c, qat_pool *pool, int64_t *n_out) {
    qat_ctx *ctx = qat_ctx_new();
    qat_ctx_set_pool(ctx, pool);
    qat_rng rng;
    qat_rng_seed(&rng, 42);
    qat_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < c->n_in; i++) {
        in[i] = qat_tensor_new(ctx, QAT_MEM_PERSIST, c->ranks[i], c->shapes[i], true);
        for (int64_t j = 0; j < in[i]->numel; j++) in[i]->data[j] = qat_rng_normal(&rng);
    }
    qat_tensor *y = c->fn(ctx, in, c->user);
    if (!y) printf("\n  %s: %s\n", c->name, qat_ctx_error(ctx));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    qat_tensor *r = qat_tensor_new(ctx, QAT_MEM_STEP, y->rank, y->shape, false);
    for (int64_t j = 0; j < r->numel; j++) r->data[j] = qat_rng_normal(&rng);
    int64_t n = y->numel;
    for (int i = 0; i < c->n_in; i++) n += in[i]->numel;
    float *out = malloc((size_t)n * sizeof *out);
    memcpy(out, y->data, (size_t)y->numel * sizeof *out);
    CU_ASSERT_EQUAL(qat_backward(ctx, qat_sum(ctx, qat_mul(ctx, y, r))), QAT_OK);
    int64_t off = y->numel;
    for (int i = 0; i < c->n_in; i++) {
        memcpy(out + off, in[i]->grad, (size_t)in[i]->numel * sizeof *out);
        off += in[i]->numel;
    }
    *n_out = n;
    qat_ctx_free(ctx);
    return out;
}

static void check_case(const op_case *c) {
    int64_t n1, n;
    float *one = run_case(c, NULL, &n1);
    for (int threads = 2; threads <= 3; threads++) {
        qat_pool *pool = qat_pool_new(threads, NULL);
        float *many = run_case(c, pool, &n);
        CU_ASSERT_EQUAL(n, n1);
        bool same = n == n1 && !memcmp(one, many, (size_t)n * sizeof *one);
        if (!same) printf("\n  %s: %d threads differ from one\n", c->name, threads);
        CU_ASSERT(same);
        free(many);
        qat_pool_free(pool);
    }
    free(one);
}

static qat_tensor *f_conv(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    return qat_conv2d_ex(ctx, in[0], in[1], in[2], u);
}
static qat_tensor *f_linear(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    (void)u;
    return qat_linear(ctx, in[0], in[1], in[2]);
}
static qat_tensor *f_maxpool(qat_ctx *ctx, qat_tensor *const *in, void *u) { return qat_maxpool2d_ex(ctx, in[0], u); }
static qat_tensor *f_avgpool(qat_ctx *ctx, qat_tensor *const *in, void *u) { return qat_avgpool2d_ex(ctx, in[0], u); }
static qat_tensor *f_gap(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    (void)u;
    return qat_global_avgpool2d(ctx, in[0]);
}
static qat_tensor *f_eltwise(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    (void)u; /* relu, clamp, scale, add (same shape and broadcast), mul */
    qat_tensor *a = qat_relu(ctx, in[0]), *b = qat_clamp(ctx, in[1], -0.5f, 0.7f);
    return qat_mul(ctx, qat_add(ctx, qat_scale(ctx, a, 1.5f), b), qat_add(ctx, b, in[2]));
}
typedef struct {
    bool training;
    float rm[16], rv[16]; /* the running statistics after the call */
} bn_user;

static qat_tensor *f_batchnorm(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    bn_user *b = u; /* the same statistics at every call */
    for (int c = 0; c < 16; c++) b->rm[c] = 0.1f * (float)c, b->rv[c] = 1.0f + 0.05f * (float)c;
    return qat_batchnorm(ctx, in[0], in[1], in[2], b->rm, b->rv, 0.1f, 1e-5f, b->training);
}
static qat_tensor *f_fake_quant(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    (void)u; /* per-channel on the weight, per-tensor on the activation */
    qat_qtype wq, aq;
    qat_qtype_init_axis(ctx, &wq, 4, true, true, 4, in[1]->shape, 0);
    qat_qtype_calibrate(&wq, in[1]->data, true);
    qat_qtype_init(ctx, &aq, 8, true, false, 0, NULL, NULL);
    aq.scale[0] = 0.02f, aq.zero_point[0] = 3;
    qat_tensor *w = qat_fake_quant(ctx, in[1], &wq, QAT_STE_CLIPPED);
    qat_tensor *x = qat_fake_quant(ctx, in[0], &aq, QAT_STE_CLIPPED);
    qat_conv2d_params p = {1, 1, 1, 1, 1};
    return qat_conv2d_ex(ctx, x, w, NULL, &p);
}

/* Sub-channel blocks: runs of 10 (a task of QAT__GRAIN elements starts
 * inside one) on the activation, ragged blocks of 4 of 6 inputs on the
 * weight (runs of two lengths); the weight calibrated over the pool. */
static qat_tensor *f_fake_quant_blocks(qat_ctx *ctx, qat_tensor *const *in, void *u) {
    (void)u;
    qat_qtype wq, aq;
    int64_t wb[4] = {1, 4, 0, 0}, ab[4] = {0, 0, 0, 10};
    qat_qtype_init_blocks(ctx, &wq, 4, true, true, 4, in[1]->shape, wb, true);
    qat__qtype_calibrate_par(ctx, &wq, in[1]->data, true);
    qat_qtype_init_blocks(ctx, &aq, 8, true, false, 4, in[0]->shape, ab, false);
    for (int64_t p = 0; p < aq.nparams; p++) aq.scale[p] = 0.01f + 0.001f * (float)(p % 7), aq.zero_point[p] = (int32_t)(p % 5);
    qat_tensor *w = qat_fake_quant(ctx, in[1], &wq, QAT_STE_CLIPPED);
    qat_tensor *x = qat_fake_quant(ctx, in[0], &aq, QAT_STE_CLIPPED);
    qat_conv2d_params p = {1, 1, 1, 1, 1};
    return qat_conv2d_ex(ctx, x, w, NULL, &p);
}

static void test_ops_equal_on_any_thread_count(void) {
    qat_conv2d_params same = {1, 1, 2, 2, 1}, strided = {2, 2, 1, 1, 1}, grouped = {1, 2, 0, 1, 2}, pw = {1, 1, 0, 0, 1};
    qat_conv2d_params dw = {1, 1, 1, 1, 8}, dw2 = {2, 2, 1, 1, 6};
    qat_pool2d_params two = {2, 2, 2, 2, 0, 0}, three = {3, 3, 2, 2, 1, 1}, odd = {2, 2, 2, 2, 0, 0};
    bn_user bn_train = {.training = true}, bn_eval = {.training = false};
    op_case cases[] = {
        {"conv 5x5 same (LeNet conv1), 19 samples", 3, {{19, 1, 28, 28}, {6, 1, 5, 5}, {6}}, {4, 4, 1}, f_conv, &same},
        {"conv 3x3 stride 2", 3, {{13, 3, 15, 17}, {8, 3, 3, 3}, {8}}, {4, 4, 1}, f_conv, &strided},
        {"conv grouped, non-square", 2, {{9, 4, 10, 12}, {6, 2, 3, 2}}, {4, 4}, f_conv, &grouped},
        {"conv pointwise", 3, {{17, 8, 7, 7}, {5, 8, 1, 1}, {5}}, {4, 4, 1}, f_conv, &pw},
        /* columns too large to keep (> 6 MiB): rebuilt in backward, per thread */
        {"conv with rebuilt columns", 2, {{24, 16, 28, 28}, {16, 16, 3, 3}}, {4, 4}, f_conv, &same},
        {"depthwise 3x3 padded", 3, {{11, 8, 14, 14}, {8, 1, 3, 3}, {8}}, {4, 4, 1}, f_conv, &dw},
        {"depthwise, multiplier 2, stride 2", 2, {{9, 6, 15, 15}, {12, 1, 3, 3}}, {4, 4}, f_conv, &dw2},
        {"linear, several blocks", 3, {{100, 300}, {70, 300}, {70}}, {2, 2, 1}, f_linear, NULL},
        {"maxpool 2x2", 1, {{21, 6, 28, 28}}, {4}, f_maxpool, &two},
        {"maxpool 2x2 odd input", 1, {{21, 6, 13, 13}}, {4}, f_maxpool, &odd},
        {"maxpool 3x3 padded", 1, {{21, 6, 16, 16}}, {4}, f_maxpool, &three},
        {"avgpool 3x3 padded", 1, {{21, 6, 16, 16}}, {4}, f_avgpool, &three},
        {"global avgpool", 1, {{33, 64, 9, 9}}, {4}, f_gap, NULL},
        {"relu, clamp, scale, add, mul, broadcast", 3, {{37, 16, 12, 12}, {37, 16, 12, 12}, {16, 1, 1}}, {4, 4, 3},
         f_eltwise, NULL},
        {"batchnorm, training", 3, {{29, 16, 11, 11}, {16}, {16}}, {4, 1, 1}, f_batchnorm, &bn_train},
        {"batchnorm, evaluation", 3, {{29, 16, 11, 11}, {16}, {16}}, {4, 1, 1}, f_batchnorm, &bn_eval},
        {"fake quantization, per channel and per tensor", 2, {{23, 6, 20, 20}, {8, 6, 3, 3}}, {4, 4}, f_fake_quant,
         NULL},
        {"fake quantization, blocks of 10 and ragged blocks", 2, {{23, 6, 20, 20}, {8, 6, 3, 3}}, {4, 4},
         f_fake_quant_blocks, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

/* Fake quantization split into tasks of QAT__GRAIN elements (on a pool or
 * not) equals quantize -> dequantize element by element, with runs of 10
 * that the tasks' edges cut, and with ragged blocks (runs of 4 and 2). */
static void test_fake_quant_tasks_match_quantize(void) {
    qat_pool *pool = qat_pool_new(2, NULL);
    int64_t shape[4] = {23, 6, 20, 20}, blocks[2][4] = {{0, 0, 0, 10}, {0, 4, 0, 0}};
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_ctx_set_pool(ctx, pool);
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 4, shape, false);
        qat_rng rng;
        qat_rng_seed(&rng, 7);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_normal(&rng);
        qat_qtype q;
        CU_ASSERT_EQUAL_FATAL(qat_qtype_init_blocks(ctx, &q, 4, true, false, 4, shape, blocks[k], k == 1), QAT_OK);
        for (int64_t p = 0; p < q.nparams; p++)
            q.scale[p] = 0.05f + 0.01f * (float)(p % 7), q.zero_point[p] = (int32_t)(p % 5) - 2;
        qat_tensor *y = qat_fake_quant(ctx, x, &q, QAT_STE_CLIPPED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        int32_t *qv = malloc((size_t)x->numel * sizeof *qv);
        float *ref = malloc((size_t)x->numel * sizeof *ref);
        qat_quantize(&q, x->data, qv);
        qat_dequantize(&q, qv, ref);
        CU_ASSERT(!memcmp(ref, y->data, (size_t)x->numel * sizeof *ref));
        free(qv), free(ref);
        qat_ctx_free(ctx);
    }
    qat_pool_free(pool);
}

/* Dropout on slices of a global batch (qat_model_set_batch_slice): two
 * "processes" forwarding samples [0, 3) and [3, 7) draw the masks one
 * process draws for all 7, and end with its RNG state. */
static qat_model *dropout_model(qat_ctx *ctx) {
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, "input shape=5\ndropout d input p=0.5\n", "test"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 9), QAT_OK);
    qat_model_train(m, true);
    return m;
}

static void test_dropout_slices_draw_the_global_masks(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_model *whole = dropout_model(ctx), *a = dropout_model(ctx), *b = dropout_model(ctx);
    int64_t s7[2] = {7, 5}, s3[2] = {3, 5}, s4[2] = {4, 5};
    qat_tensor *x7 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, s7, false), *x3 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, s3, false),
               *x4 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, s4, false);
    for (int64_t i = 0; i < 35; i++) x7->data[i] = 1.0f;
    for (int64_t i = 0; i < 15; i++) x3->data[i] = 1.0f;
    for (int64_t i = 0; i < 20; i++) x4->data[i] = 1.0f;
    CU_ASSERT_EQUAL(qat_model_set_batch_slice(a, 0, 7), QAT_OK);
    CU_ASSERT_EQUAL(qat_model_set_batch_slice(b, 3, 7), QAT_OK);
    for (int step = 0; step < 2; step++) {
        qat_tensor *y7 = qat_model_forward(whole, x7), *ya = qat_model_forward(a, x3), *yb = qat_model_forward(b, x4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y7);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ya);
        CU_ASSERT_PTR_NOT_NULL_FATAL(yb);
        CU_ASSERT(!memcmp(ya->data, y7->data, 15 * sizeof(float)));
        CU_ASSERT(!memcmp(yb->data, y7->data + 15, 20 * sizeof(float)));
        qat_ctx_step_reset(ctx);
    }
    size_t n = qat_model_state_bytes(whole, NULL, 0);
    unsigned char *sw = malloc(n), *sa = malloc(n), *sb = malloc(n);
    qat_model_state_bytes(whole, sw, n), qat_model_state_bytes(a, sa, n), qat_model_state_bytes(b, sb, n);
    CU_ASSERT(!memcmp(sw, sa, n) && !memcmp(sw, sb, n));
    /* a batch that does not fit its slice is an error, not a silent overrun */
    CU_ASSERT_EQUAL(qat_model_set_batch_slice(b, 5, 7), QAT_OK);
    CU_ASSERT_PTR_NULL(qat_model_forward(b, x4));
    CU_ASSERT_EQUAL(qat_model_set_batch_slice(b, 8, 7), QAT_ERR_ARG);
    free(sw), free(sa), free(sb);
    qat_ctx_free(ctx);
}

static void test_observer_range_equal_on_any_thread_count(void) {
    enum { N = 3000001 };
    float *x = malloc(N * sizeof *x);
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) x[i] = qat_rng_normal(&rng);
    x[N - 1] = 9.5f, x[17] = -8.25f, x[123456] = NAN;
    qat_ctx *ctx = qat_ctx_new();
    float lo1 = INFINITY, hi1 = -INFINITY;
    qat__minmax_par(ctx, x, N, &lo1, &hi1);
    CU_ASSERT_EQUAL(lo1, -8.25f);
    CU_ASSERT_EQUAL(hi1, 9.5f);
    qat_pool *pool = qat_pool_new(3, NULL);
    qat_ctx_set_pool(ctx, pool);
    float lo3 = INFINITY, hi3 = -INFINITY;
    qat__minmax_par(ctx, x, N, &lo3, &hi3);
    CU_ASSERT(lo3 == lo1 && hi3 == hi1);
    qat_ctx_free(ctx);
    qat_pool_free(pool);
    free(x);
}

/* ---- whole training steps and the engine ---------------------------------------------- */

/* Trains `steps` QAT steps of a model on random data with `threads`
 * threads (model, optimizer and ops on one pool); its state bytes. */
static void *train_state(const char *model, int threads, int steps, size_t *bytes, qat_qmodel *q, qat_ctx **qctx) {
    qat_pool *pool = threads > 1 ? qat_pool_new(threads, NULL) : NULL;
    qat_ctx *ctx = qat_ctx_new();
    qat_ctx_set_pool(ctx, pool);
    qat_model *m = qat_model_new(ctx);
    bool mlp = !strcmp(model, "mlp");
    CU_ASSERT_EQUAL_FATAL(mlp ? qat_model_mlp(m) : qat_model_lenet(m, !strcmp(model, "lenet-bn")), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 11), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_prepare(m, NULL), QAT_OK);
    qat_optim_config oc = qat_optim_defaults(QAT_OPTIM_ADAM);
    qat_optim opt;
    CU_ASSERT_EQUAL_FATAL(qat_optim_init(&opt, ctx, &oc, qat_model_n_params(m)), QAT_OK);
    qat_optim_set_pool(&opt, pool);
    qat_model_train(m, true);
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    enum { B = 26 }; /* 4 chunks of the convolutions' weight gradient, the last short */
    int32_t labels[B];
    for (int s = 0; s < steps; s++) {
        int64_t shape[4] = {B, 1, 28, 28}, flat[2] = {B, 784};
        qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, mlp ? 2 : 4, mlp ? flat : shape, false);
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = qat_rng_uniform(&rng);
        for (int i = 0; i < B; i++) labels[i] = (int32_t)qat_rng_below(&rng, 10);
        qat_tensor *loss = qat_cross_entropy(ctx, qat_model_forward(m, x), labels);
        CU_ASSERT_EQUAL_FATAL(qat_backward(ctx, loss), QAT_OK);
        qat_optim_step(&opt, qat_model_params(m), qat_model_grads(m), 1e-3f);
        qat_model_zero_grad(m);
        qat_ctx_step_reset(ctx);
    }
    *bytes = qat_model_state_bytes(m, NULL, 0);
    void *buf = malloc(*bytes);
    qat_model_state_bytes(m, buf, *bytes);
    if (q) { /* its integer program, for the engine test */
        *qctx = qat_ctx_new();
        CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, *qctx, q), QAT_OK);
    }
    qat_ctx_free(ctx);
    qat_pool_free(pool);
    return buf;
}

static void check_training(const char *model) {
    size_t n1, n;
    void *one = train_state(model, 1, 3, &n1, NULL, NULL);
    for (int threads = 2; threads <= 3; threads++) {
        void *many = train_state(model, threads, 3, &n, NULL, NULL);
        bool same = n == n1 && !memcmp(one, many, n);
        if (!same) printf("\n  %s: %d threads end in another state\n", model, threads);
        CU_ASSERT(same);
        free(many);
    }
    free(one);
}

static void test_lenet_bn_qat_steps_equal_on_any_thread_count(void) { check_training("lenet-bn"); }
static void test_lenet_qat_steps_equal_on_any_thread_count(void) { check_training("lenet"); }
static void test_mlp_qat_steps_equal_on_any_thread_count(void) { check_training("mlp"); }

static void test_int_engine_equal_on_any_thread_count(void) {
    size_t n;
    qat_qmodel q;
    qat_ctx *qctx = NULL;
    free(train_state("lenet", 1, 3, &n, &q, &qctx));
    enum { B = 37 };
    float *x = malloc(B * 784 * sizeof *x);
    int32_t y1[B * 10], y[B * 10];
    qat_rng rng;
    qat_rng_seed(&rng, 9);
    for (int i = 0; i < B * 784; i++) x[i] = qat_rng_uniform(&rng);
    qat_ctx *ctx = qat_ctx_new();
    qat_engine *e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, B);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(qat_engine_run(e, x, B, NULL, y1), QAT_OK);
    qat_engine_free(e);
    for (int threads = 2; threads <= 5; threads += 3) {
        qat_pool *pool = qat_pool_new(threads, NULL);
        qat_ctx_set_pool(ctx, pool);
        e = qat_engine_new(ctx, &q, QAT_ENGINE_INT, B);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        for (int n_run = B; n_run >= 1; n_run -= 12) { /* full and partial batches */
            memset(y, 0, sizeof y);
            CU_ASSERT_EQUAL(qat_engine_run(e, x, n_run, NULL, y), QAT_OK);
            CU_ASSERT_EQUAL(memcmp(y, y1, (size_t)n_run * 10 * sizeof *y), 0);
        }
        qat_engine_free(e);
        qat_ctx_set_pool(ctx, NULL);
        qat_pool_free(pool);
    }
    free(x);
    qat_ctx_free(ctx);
    qat_ctx_free(qctx);
}

/* ---- the reducer: two "processes" as two threads ------------------------------------- */

typedef struct {
    pthread_barrier_t barrier;
    double dsum[2][256];
    float lo[2][16], hi[2][16];
    int calls;
} rendezvous;

typedef struct {
    rendezvous *rv;
    int rank;
} peer;

/* Each side puts its values in its slot; after the barrier both add the
 * two slots in rank order (the same result on both); a second barrier
 * keeps the slots until both have read them. */
static qat_status peer_sum(void *user, double *v, int64_t n, char *msg, size_t len) {
    peer *p = user;
    if (n > 256) return snprintf(msg, len, "too many"), QAT_ERR_ARG;
    memcpy(p->rv->dsum[p->rank], v, (size_t)n * sizeof *v);
    pthread_barrier_wait(&p->rv->barrier);
    for (int64_t i = 0; i < n; i++) v[i] = p->rv->dsum[0][i] + p->rv->dsum[1][i];
    if (p->rank == 0) p->rv->calls++;
    pthread_barrier_wait(&p->rv->barrier);
    return QAT_OK;
}

static qat_status peer_minmax(void *user, float *lo, float *hi, int64_t n, char *msg, size_t len) {
    peer *p = user;
    if (n > 16) return snprintf(msg, len, "too many"), QAT_ERR_ARG;
    memcpy(p->rv->lo[p->rank], lo, (size_t)n * sizeof *lo);
    memcpy(p->rv->hi[p->rank], hi, (size_t)n * sizeof *hi);
    pthread_barrier_wait(&p->rv->barrier);
    for (int64_t i = 0; i < n; i++)
        lo[i] = fminf(p->rv->lo[0][i], p->rv->lo[1][i]), hi[i] = fmaxf(p->rv->hi[0][i], p->rv->hi[1][i]);
    pthread_barrier_wait(&p->rv->barrier);
    return QAT_OK;
}

enum { RB = 40 }; /* the global batch */

typedef struct {
    peer *p;       /* NULL: one process, the whole batch */
    const float *x;
    qat_model *m;
    qat_ctx *ctx;
    float obs_min[8], obs_max[8];
    float running[64];
} side;

/* One forward of LeNet-BN in QAT training mode on this side's share of
 * the batch (prepared, fake quantization on). */
static void *run_side(void *u) {
    side *s = u;
    s->ctx = qat_ctx_new();
    qat_model *m = s->m = qat_model_new(s->ctx);
    qat_model_lenet(m, true);
    qat_model_build(m, 2);
    qat_prepare(m, NULL);
    qat_model_train(m, true);
    qat_reducer r = {peer_sum, peer_minmax, s->p};
    if (s->p) qat_ctx_set_reducer(s->ctx, &r);
    int64_t lo = s->p ? RB / 2 * s->p->rank : 0, n = s->p ? RB / 2 : RB;
    int64_t shape[4] = {n, 1, 28, 28};
    qat_tensor *x = qat_tensor_from(s->ctx, QAT_MEM_STEP, s->x + lo * 784, 4, shape, false);
    qat_tensor *y = qat_model_forward(m, x);
    CU_ASSERT_PTR_NOT_NULL(y);
    int k = 0;
    for (int i = 0; i < m->n_layers && k < 8; i++)
        if (m->layers[i].aq) s->obs_min[k] = m->layers[i].aq->obs.min, s->obs_max[k++] = m->layers[i].aq->obs.max;
    memcpy(s->running, m->buffers, (size_t)(m->n_buffers < 64 ? m->n_buffers : 64) * sizeof(float));
    return NULL;
}

static void test_reducer_makes_two_halves_one_batch(void) {
    float *x = malloc(RB * 784 * sizeof *x);
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < RB * 784; i++) x[i] = 2.0f * qat_rng_uniform(&rng) - 0.5f;
    side whole = {.x = x};
    run_side(&whole);
    rendezvous rv = {0};
    pthread_barrier_init(&rv.barrier, NULL, 2);
    peer peers[2] = {{&rv, 0}, {&rv, 1}};
    side half[2] = {{.p = &peers[0], .x = x}, {.p = &peers[1], .x = x}};
    pthread_t th;
    pthread_create(&th, NULL, run_side, &half[1]);
    run_side(&half[0]);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&rv.barrier);
    CU_ASSERT(rv.calls >= 2); /* the two BatchNorms' sums */
    /* observers: the whole batch's ranges. The min and max reduce exactly,
     * but what they see follows BatchNorm's statistics, whose double sums
     * the halves add in another order: equal up to a few float ulps (exact
     * for this seed before a change of the convolution's summation order;
     * for five of six other seeds not even then) */
    for (int k = 0; k < 8; k++) {
        CU_ASSERT(fabsf(half[0].obs_min[k] - whole.obs_min[k]) <= 1e-6f * fmaxf(1.0f, fabsf(whole.obs_min[k])));
        CU_ASSERT(fabsf(half[0].obs_max[k] - whole.obs_max[k]) <= 1e-6f * fmaxf(1.0f, fabsf(whole.obs_max[k])));
    }
    /* both sides alike, bit for bit */
    size_t n0 = qat_model_state_bytes(half[0].m, NULL, 0), n1 = qat_model_state_bytes(half[1].m, NULL, 0);
    CU_ASSERT_EQUAL_FATAL(n0, n1);
    void *b0 = malloc(n0), *b1 = malloc(n1);
    qat_model_state_bytes(half[0].m, b0, n0), qat_model_state_bytes(half[1].m, b1, n1);
    CU_ASSERT_EQUAL(memcmp(b0, b1, n0), 0);
    /* BatchNorm's running statistics: the whole batch's, up to the order of the sums */
    int64_t nb = whole.m->n_buffers < 64 ? whole.m->n_buffers : 64;
    double worst = 0;
    for (int64_t i = 0; i < nb; i++) {
        double d = fabs((double)half[0].running[i] - whole.running[i]);
        worst = d > worst ? d : worst;
    }
    CU_ASSERT(nb > 0 && worst < 1e-5);
    /* and not merely the local halves': one side's own statistics would differ */
    free(b0), free(b1);
    qat_ctx_free(whole.ctx), qat_ctx_free(half[0].ctx), qat_ctx_free(half[1].ctx);
    free(x);
}

static qat_status failing_sum(void *u, double *v, int64_t n, char *msg, size_t len) {
    (void)u, (void)v, (void)n;
    snprintf(msg, len, "the network is down");
    return QAT_ERR_IO;
}

static void test_reducer_error_fails_the_op_with_its_message(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_reducer r = {failing_sum, peer_minmax, NULL};
    qat_ctx_set_reducer(ctx, &r);
    CU_ASSERT(qat_ctx_has_reducer(ctx));
    int64_t s[4] = {4, 3, 5, 5}, c = 3;
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_STEP, 4, s, false);
    qat_tensor *g = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, &c, true), *b = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, &c, true);
    float rm[3] = {0}, rv[3] = {1, 1, 1};
    CU_ASSERT_PTR_NULL(qat_batchnorm(ctx, x, g, b, rm, rv, 0.1f, 1e-5f, true));
    CU_ASSERT_EQUAL(qat_ctx_status(ctx), QAT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "the network is down"));
    qat_ctx_clear_error(ctx);
    CU_ASSERT_PTR_NOT_NULL(qat_batchnorm(ctx, x, g, b, rm, rv, 0.1f, 1e-5f, false)); /* evaluation: no reduction */
    qat_ctx_set_reducer(ctx, NULL);
    CU_ASSERT(!qat_ctx_has_reducer(ctx));
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"the pool runs every task once, on any thread count", test_pool_runs_every_task_once},
        {"a loop started from inside a task runs inline", test_pool_nested_loops_run_inline},
        {"every threaded op: the same outputs and gradients on 1, 2 and 3 threads", test_ops_equal_on_any_thread_count},
        {"fake quantization in tasks equals quantize -> dequantize (blocks cut by tasks, ragged)",
         test_fake_quant_tasks_match_quantize},
        {"dropout on slices of a global batch draws its masks", test_dropout_slices_draw_the_global_masks},
        {"observer range: the same on 1 and 3 threads", test_observer_range_equal_on_any_thread_count},
        {"LeNet-BN QAT steps: the same state on 1, 2 and 3 threads", test_lenet_bn_qat_steps_equal_on_any_thread_count},
        {"LeNet QAT steps: the same state on 1, 2 and 3 threads", test_lenet_qat_steps_equal_on_any_thread_count},
        {"MLP QAT steps: the same state on 1, 2 and 3 threads", test_mlp_qat_steps_equal_on_any_thread_count},
        {"integer engine: the same integers on 1, 2 and 5 threads", test_int_engine_equal_on_any_thread_count},
        {"reducer: two halves of a batch see the whole batch", test_reducer_makes_two_halves_one_batch},
        {"reducer: its error fails the op, with its message", test_reducer_error_fails_the_op_with_its_message},
        {NULL, NULL},
    };
    return qat_test_main("parallel", cases, argc, argv);
}
