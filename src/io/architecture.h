/* The model's architecture and QAT configuration inside a training
 * checkpoint (group "architecture"), so a model can be rebuilt from the
 * file alone (qat_checkpoint_model). */
#ifndef QAT_IO_ARCHITECTURE_H
#define QAT_IO_ARCHITECTURE_H

#include "h5util.h"
#include "qat/layers.h"

void qat__arch_write(qat__h5w *w, const qat_model *m);

#endif
