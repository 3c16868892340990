/* Optimizers against torch.optim golden values (golden/make_optim_golden.py),
 * gradient clipping, and learning-rate schedules against hand values. */
#include <string.h>

#include "golden/optim_golden.h"
#include "qat/optim.h"
#include "test_util.h"

static void run_case(qat_optim_config cfg, const float want[3][6]) {
    qat_ctx *ctx = qat_ctx_new();
    qat_optim o;
    float p[6];
    memcpy(p, golden_p0, sizeof p);
    CU_ASSERT_EQUAL_FATAL(qat_optim_init(&o, ctx, &cfg, 6), QAT_OK);
    for (int s = 0; s < 3; s++) {
        qat_optim_step(&o, p, golden_grads[s], cfg.lr);
        for (int i = 0; i < 6; i++) {
            /* torch uses fused/foreach kernels: allow a few ulps of order difference */
            double tol = 4e-7 * (fabs((double)want[s][i]) + 1.0);
            if (fabs(p[i] - want[s][i]) > tol)
                printf("\n  step %d param %d: got %.9g want %.9g\n", s, i, p[i], want[s][i]);
            ASSERT_CLOSE(p[i], want[s][i], tol);
        }
    }
    qat_ctx_free(ctx);
}

static void test_sgd(void) {
    qat_optim_config c = qat_optim_defaults(QAT_OPTIM_SGD);
    c.lr = 0.1f;
    run_case(c, golden_sgd_plain);
    c.momentum = 0.9f, c.weight_decay = 0.01f, c.dampening = 0.1f;
    run_case(c, golden_sgd_momentum_wd);
    c = qat_optim_defaults(QAT_OPTIM_SGD);
    c.lr = 0.05f, c.momentum = 0.8f, c.nesterov = true;
    run_case(c, golden_sgd_nesterov);
}

static void test_adam(void) {
    qat_optim_config c = qat_optim_defaults(QAT_OPTIM_ADAM);
    c.lr = 0.01f;
    run_case(c, golden_adam);
    c.weight_decay = 0.1f, c.beta1 = 0.8f, c.beta2 = 0.99f;
    run_case(c, golden_adam_wd);
}

static void test_adamw(void) {
    qat_optim_config c = qat_optim_defaults(QAT_OPTIM_ADAMW);
    CU_ASSERT_DOUBLE_EQUAL(c.weight_decay, 0.01, 1e-9);
    c.lr = 0.01f, c.weight_decay = 0.05f;
    run_case(c, golden_adamw);
}

static void test_bad_config(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_optim o;
    qat_optim_config c = qat_optim_defaults(QAT_OPTIM_SGD);
    c.nesterov = true; /* without momentum */
    CU_ASSERT_EQUAL(qat_optim_init(&o, ctx, &c, 6), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    c = qat_optim_defaults(QAT_OPTIM_ADAM);
    c.beta2 = 1.0f;
    CU_ASSERT_EQUAL(qat_optim_init(&o, ctx, &c, 6), QAT_ERR_ARG);
    qat_ctx_clear_error(ctx);
    CU_ASSERT_EQUAL(qat_optim_init(&o, ctx, &c, 0), QAT_ERR_ARG);
    qat_ctx_free(ctx);
}

static void test_clip(void) {
    float g[6];
    for (int i = 0; i < 6; i++) g[i] = golden_grads[0][i] * 10;
    float norm = qat_clip_grad_norm(g, 6, 1.0f);
    ASSERT_CLOSE(norm, golden_clip_norm, 1e-5);
    for (int i = 0; i < 6; i++) ASSERT_CLOSE(g[i], golden_clipped[i], 1e-6);
    float small[2] = {0.3f, 0.4f}; /* norm 0.5 < 1: untouched */
    ASSERT_CLOSE(qat_clip_grad_norm(small, 2, 1.0f), 0.5f, 1e-7);
    ASSERT_CLOSE(small[1], 0.4f, 0);
}

static void test_schedules(void) {
    qat_lr_schedule s = {.kind = QAT_LR_STEP, .base_lr = 0.1f, .step_size = 10, .gamma = 0.5f};
    ASSERT_CLOSE(qat_lr_at(&s, 9), 0.1f, 1e-9);
    ASSERT_CLOSE(qat_lr_at(&s, 10), 0.05f, 1e-9);
    ASSERT_CLOSE(qat_lr_at(&s, 25), 0.025f, 1e-9);
    s = (qat_lr_schedule){.kind = QAT_LR_COSINE, .base_lr = 1.0f, .total_steps = 100, .min_lr = 0.0f};
    ASSERT_CLOSE(qat_lr_at(&s, 0), 1.0f, 1e-7);
    ASSERT_CLOSE(qat_lr_at(&s, 50), 0.5f, 1e-6);
    ASSERT_CLOSE(qat_lr_at(&s, 100), 0.0f, 1e-7);
    ASSERT_CLOSE(qat_lr_at(&s, 200), 0.0f, 1e-7); /* stays at the floor */
    s = (qat_lr_schedule){.kind = QAT_LR_CONSTANT, .base_lr = 0.2f, .warmup_steps = 4, .warmup_start = 0.0f};
    ASSERT_CLOSE(qat_lr_at(&s, 0), 0.0f, 1e-9);
    ASSERT_CLOSE(qat_lr_at(&s, 2), 0.1f, 1e-7);
    ASSERT_CLOSE(qat_lr_at(&s, 4), 0.2f, 1e-7);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"sgd: plain, momentum+decay+dampening, nesterov vs torch", test_sgd},
        {"adam: plain and L2 vs torch", test_adam},
        {"adamw vs torch", test_adamw},
        {"bad configurations are refused", test_bad_config},
        {"clip_grad_norm vs torch", test_clip},
        {"lr schedules: step, cosine, warm-up", test_schedules},
        {NULL, NULL},
    };
    return qat_test_main("optim", cases, argc, argv);
}
