/* qat fit's cycle firmware: the generated model on a few samples, each
 * inference between the markers where the cycle-pricing plugin counts
 * (firmware.h). The samples' floats (input.inc, written by the tool) are
 * quantized on the device by NAME_quantize_input before each first
 * marker, so only NAME_run is priced. Exit status through semihosting:
 * nonzero when a run failed.
 *   -DQAT_MODEL=name -DQAT_MODEL_UP=NAME -DQAT_MODEL_HEADER='"name.h"' */
#include <stdint.h>

#include QAT_MODEL_HEADER
#include "firmware.h"
#include "input.inc" /* QAT_N_INPUTS; static const float qat_inputs[QAT_N_INPUTS][NAME_INPUT_SIZE] */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

int main(void) {
    static int8_t q[CAT(QAT_MODEL_UP, _INPUT_SIZE)], y[CAT(QAT_MODEL_UP, _OUTPUT_SIZE)];
    int rc = 0;
    for (int i = 0; i < QAT_N_INPUTS; i++) {
        CAT(QAT_MODEL, _quantize_input)(qat_inputs[i], q);
        qat_mark_begin();
        rc |= CAT(QAT_MODEL, _run)(q, y);
        qat_mark_end();
    }
    return rc;
}
