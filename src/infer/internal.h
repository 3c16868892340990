/* Private to the host engines (src/infer/). The raw input's way into the
 * integer program is the program's own (qat_input_quantize,
 * qat_input_lookup, qat_input_table in qat/runtime.h). */
#ifndef QAT_INFER_INTERNAL_H
#define QAT_INFER_INTERNAL_H

#include "qat/infer.h"

/* The most samples e runs at once (qat_engine_new's max_batch). */
int64_t qat__engine_max_batch(const qat_engine *e);

#endif
