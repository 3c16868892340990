/* The library built without TFLite support (CMake QAT_TFLITE=OFF, or
 * flatc and the flatbuffers headers not found): every call says so. */
#include <stdio.h>

#include "qat/tflite.h"

bool qat_tflite_available(void) { return false; }

qat_status qat_tflite_serialize(const qat_qmodel *q, uint8_t **bytes, size_t *size, char *msg, size_t len) {
    (void)q;
    if (bytes) *bytes = NULL;
    if (size) *size = 0;
    if (msg && len)
        snprintf(msg, len, "tflite: this build of qat has no TFLite export (rebuild with flatc and the flatbuffers "
                 "headers: scripts/setup-deps.sh installs them)");
    return QAT_ERR_UNSUPPORTED;
}
