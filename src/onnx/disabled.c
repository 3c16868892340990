/* qat/onnx.h in a build without ONNX support (CMake QAT_ONNX=OFF, or
 * protobuf-c not found): every call says so, nothing is made. */
#include <stdio.h>

#include "qat/onnx.h"

static const char *const why = "onnx: this build of qat has no ONNX support (configure with QAT_ONNX=ON; "
                               "it needs libprotobuf-c-dev, protobuf-c-compiler and python3-onnx)";

bool qat_onnx_available(void) { return false; }

qat_status qat_onnx_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len) {
    (void)q;
    if (bytes) *bytes = NULL;
    if (size) *size = 0;
    if (msg && len) snprintf(msg, len, "%s", why);
    return QAT_ERR_UNSUPPORTED;
}
