/* input: layer 0, the model's input. It has no line of its own in model
 * files (the "input shape=..." line declares it), no forward (the model
 * normalizes and quantizes the caller's tensor), no lowering (the
 * program's input tensor), and checkpoints record it as layer 0 only. */
#include "../op.h"

static int rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)m, (void)name, (void)n, (void)in, (void)h;
    return -2; /* a second input: not a kind a recorded layer can have */
}

const qat__op_kind qat__op_input = {
    .kind = QAT_LAYER_INPUT, .name = "input", .stem = "input", .min_inputs = 0, .max_inputs = 0, .rebuild = rebuild,
};
