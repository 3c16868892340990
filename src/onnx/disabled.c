/* qat/onnx.h in a build without ONNX support (CMake QAT_ONNX=OFF, or
 * protobuf-c not found): every call says so, nothing is written. */
#include "qat/onnx.h"

static const char *const why = "onnx: this build of qat has no ONNX support (configure with QAT_ONNX=ON; "
                               "it needs libprotobuf-c-dev, protobuf-c-compiler and python3-onnx)";

bool qat_onnx_available(void) { return false; }

qat_status qat_onnx_serialize(qat_ctx *ctx, const qat_qmodel *q, const uint8_t **bytes, size_t *size) {
    (void)q, (void)bytes, (void)size;
    return ctx ? qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s", why) : QAT_ERR_ARG;
}

qat_status qat_onnx_save(qat_ctx *ctx, const qat_qmodel *q, const char *path) {
    (void)q, (void)path;
    return ctx ? qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s", why) : QAT_ERR_ARG;
}

qat_status qat_onnx_stage(qat_ctx *ctx, const qat_qmodel *q, const char *path, qat_save_set *set) {
    (void)q, (void)path, (void)set;
    return ctx ? qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "%s", why) : QAT_ERR_ARG;
}

qat_status qat_onnx_export(qat_model *m, int in_rank, const int64_t *in_shape, const char *config,
                           const char *path) {
    (void)in_rank, (void)in_shape, (void)config, (void)path;
    return m ? qat_ctx_fail(qat_model_ctx(m), QAT_ERR_UNSUPPORTED, "%s", why) : QAT_ERR_ARG;
}
