/* The model's input normalization as a plain function of raw samples
 * (qat/layers.h): the forward's first operation, and the autoencoder's
 * target. */
#include <string.h>

#include "qat/layers.h"

void qat_normalize_samples(const qat_normalization *n, int64_t numel, const float *x, float *y, int64_t count) {
    if (!n || n->channels <= 0) {
        if (y != x) memmove(y, x, (size_t)(count * numel) * sizeof *y);
        return;
    }
    int64_t per = numel / n->channels; /* elements of one channel in a sample */
    for (int64_t i = 0; i < count; i++)
        for (int c = 0; c < n->channels; c++) {
            const float *xs = x + i * numel + c * per;
            float *ys = y + i * numel + c * per;
            const float d = n->divisor, mean = n->mean[c], sd = n->std[c];
            for (int64_t e = 0; e < per; e++) ys[e] = (xs[e] / d - mean) / sd;
        }
}
