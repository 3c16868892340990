/* The model's architecture and QAT configuration inside a training
 * checkpoint (group "architecture"), so a model can be rebuilt from the
 * file alone (qat_checkpoint_model). */
#ifndef QAT_IO_ARCHITECTURE_H
#define QAT_IO_ARCHITECTURE_H

#include "h5util.h"
#include "qat/layers.h"

void qat__arch_write(qat__h5w *w, const qat_model *m);

/* The model's input normalization from /architecture/normalization,
 * checked like hostile input (channels bounded before anything is read,
 * the values by qat_normalization_check against m's declared input
 * shape): out->channels 0 when the file has none (a model without one,
 * or a file written before it was stored). false + error on r. */
bool qat__arch_read_norm(qat__h5r *r, const qat_model *m, qat_normalization *out);

#endif
