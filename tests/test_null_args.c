/* The public functions the library documents as taking NULL where a
 * pointer is wrong (docs/library.md): each called with NULLs returns an
 * error, an empty value or nothing, and never touches memory. A crash
 * here fails the suite. */
#include <math.h>
#include <string.h>

#include "qat/core.h"
#include "qat/data.h"
#include "qat/fakequant.h"
#include "qat/layers.h"
#include "qat/optim.h"
#include "qat/runtime.h"
#include "qat/train.h"
#include "test_util.h"

static void test_status_functions(void) {
    CU_ASSERT_EQUAL(qat_isa_cap(NULL), QAT_ERR_ARG);
    qat_metrics out;
    CU_ASSERT_EQUAL(qat_model_evaluate(NULL, NULL, QAT_SPLIT_TEST, 0, NULL, NULL, &out), QAT_ERR_ARG);
    qat_ctx *ctx = qat_ctx_new();
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL(qat_model_evaluate(m, NULL, QAT_SPLIT_TEST, 0, NULL, NULL, NULL), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "NULL out"));
    qat_ctx_free(ctx);
    qat_plan plan = {0};
    int64_t offsets[4];
    CU_ASSERT_EQUAL(qat_plan_program(NULL, 1, offsets, &plan, NULL, 0), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_runtime_run(NULL, &plan, NULL, NULL, NULL, 1), QAT_ERR_ARG);
}

static void test_value_functions(void) {
    CU_ASSERT_FALSE(qat_data_fits_input(1, NULL, 1, NULL));
    CU_ASSERT_EQUAL(qat_qtensor_numel(NULL), 0);
    CU_ASSERT_FALSE(qat_rounding_parse("double", NULL));
    CU_ASSERT_EQUAL(qat_qtype_param_index(NULL, 3), 0);
    CU_ASSERT_EQUAL(qat_qtype_axis(NULL), -1);
    CU_ASSERT_FALSE(qat_qop_int8_weights(NULL, NULL));
    CU_ASSERT_EQUAL(qat_qop_weight_shape(NULL, NULL, NULL), 0);
    int rank;
    int64_t shape[4];
    char msg[64];
    CU_ASSERT_EQUAL(qat_qop_output_shape(NULL, NULL, &rank, shape, msg, sizeof msg), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_text_check(NULL, 10, false, NULL), 0);
    CU_ASSERT_STRING_EQUAL(qat_dims_str(2, NULL, NULL, 0), "");
    char buf[16];
    CU_ASSERT_STRING_EQUAL(qat_dims_str(2, NULL, buf, sizeof buf), "[]");
    CU_ASSERT(isnan(qat_roc_auc(NULL, NULL, 4)));
    CU_ASSERT(isnan(qat_metrics_get(NULL, "loss", NULL)));
    CU_ASSERT_EQUAL(qat_clip_grad_norm(NULL, 4, 1.0f), 0.0f);
    CU_ASSERT_EQUAL(qat_rng_u32(NULL), 0);
    CU_ASSERT_EQUAL(qat_rng_below(NULL, 7), 0);
    CU_ASSERT_EQUAL(qat_rng_uniform(NULL), 0.0f);
    CU_ASSERT_EQUAL(qat_rng_normal(NULL), 0.0f);
}

/* Functions without a result: called with NULLs, they return. */
static void test_void_functions(void) {
    int lo = -1, hi = -1;
    qat_model_weight_bits(NULL, &lo, &hi);
    CU_ASSERT(lo == 0 && hi == 0);
    qat_model_weight_bits(NULL, NULL, NULL);
    qat_rng_seed(NULL, 1);
    qat_shuffle(NULL, 4, NULL);
    qat_mnist_batch(NULL, NULL, 4, NULL, NULL);
    float x[4] = {0};
    int32_t q[4];
    qat_quantize(NULL, x, q);
    qat_dequantize(NULL, q, x);
    qat_qtype_calibrate(NULL, x, true);
    qat_qparams_from_range(0, 1, -128, 127, false, true, NULL, NULL);
    qat_observer_update(NULL, x, 4);
    qat_observer_qparams(NULL, NULL);
    qat_observer_qparams_channels(NULL, NULL);
    qat_qtype_compact_scales(NULL, 4, NULL, NULL); /* row_scale and sub may be NULL: q may not */
    int8_t o[4];
    qat_input_quantize(NULL, x, 4, o);
    qat_input_lookup(NULL, NULL, NULL, 4, o);
    qat_runtime_prepare(NULL, NULL, NULL);
    CU_PASS("no crash");
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"functions returning a status: QAT_ERR_ARG on NULL", test_status_functions},
        {"functions returning a value: an empty one on NULL", test_value_functions},
        {"functions without a result: NULL does nothing", test_void_functions},
        {NULL, NULL},
    };
    return qat_test_main("null_args", cases, argc, argv);
}
