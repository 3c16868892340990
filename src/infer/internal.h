/* Private to the host engines (src/infer/): the raw input's way into the
 * integer program. */
#ifndef QAT_INFER_INTERNAL_H
#define QAT_INFER_INTERNAL_H

#include "qat/infer.h"

/* Raw float samples x [n, input numel] to the program's input integers
 * out [n, input numel]: the program's normalization (if any) in float32,
 * then the input quantization — what qat_engine_run computes, and what
 * qat_input_table tabulates. */
void qat__input_quantize(const qat_qmodel *q, const float *x, int64_t n, int8_t *out);

/* Raw byte samples x [n, input numel] through a table made by
 * qat_input_table (table_channels = qat_input_table_channels(q)). */
void qat__input_lookup(const qat_qmodel *q, const int8_t *table, const uint8_t *x, int64_t n, int8_t *out);

#endif
