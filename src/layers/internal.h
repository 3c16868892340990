/* Private to the layers module (and white-box tests): the helpers its
 * files share. The model's layout, which other modules read, is in
 * model.h. Prefix qat__. */
#ifndef QAT_LAYERS_INTERNAL_H
#define QAT_LAYERS_INTERNAL_H

#include "model.h"

/* Counts consumers (n_consumers) once the graph is complete. */
void qat__count_consumers(qat_model *m);
/* Does this kind requantize its output in the integer program (so that
 * the QAT pass puts an activation quantizer after its group)? */
bool qat__requantizes(qat_layer_kind kind);

/* ---- the QAT pass (prepare.c) ------------------------------------------ */
/* Checks a configuration (bit widths, block size); QAT_OK or an error on ctx. */
qat_status qat__check_qat_config(qat_ctx *ctx, const qat_prepare_config *c);

/* ---- pools that keep their input's quantization (inspect.c) ------------ */
/* Is layer l an average pool prepared with pool_keeps_scale (no quantizer
 * of its own; its output on its input's grid)? */
bool qat__pool_keeps_scale(const qat__layer *l);
/* The activation quantizer whose grid layer id's output is on: its own,
 * or, back through layers that keep their input's quantization (max
 * pooling, flatten, dropout, a lone ReLU, such pools), the one that holds
 * the tensor; NULL when the walk meets a layer with neither (a float
 * model, or a layer with no integer form). Found on every call, never
 * stored: qat_prepare_layer may replace the quantizer it finds. */
qat__act_quant *qat__grid_quant(const qat_model *m, int id);

/* ---- shapes (shapes.c) ------------------------------------------------ */
/* Layer l's per-sample output shape from its inputs' (ranks, shapes of
 * the layers before it); an error naming the layer if they do not fit. */
qat_status qat__layer_shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                            int64_t *s);

/* ---- limits (model.c) ------------------------------------------------------- */
/* Elements of a per-sample shape, saturating at 2^62 (dimensions up to
 * 2^24 each would overflow int64 in three). */
int64_t qat__shape_numel(int rank, const int64_t *s);
/* Refuses float32 layer outputs of total_bytes a sample beyond the model's
 * limit, naming the size, the limit and how to raise it. */
qat_status qat__check_activation_bytes(qat_model *m, int64_t total_bytes);

/* ---- names ---------------------------------------------------------------- */
/* Appends a layer (model.c); NULL + error on the context. */
qat__layer *qat__append(qat_model *m, qat_layer_kind kind, const char *name, int n_in, const int *in);

#endif
