/* What the window pools (maxpool2d.c, avgpool2d.c) share: the window's
 * checks, its model-file keys, its shape rule and its checkpoint record. */
#ifndef QAT_LAYERS_OPS_POOL_H
#define QAT_LAYERS_OPS_POOL_H

#include "../op.h"

/* Adds a pool of `kind` with window s (stride 0: the window's size). */
int qat__pool_add(qat_model *m, qat_layer_kind kind, const char *name, int x, const qat_pool2d_spec *s);
qat_status qat__pool_parse(qat__qnet *p, const char *name, int n, const int *in);
void qat__pool_print(const qat_model *m, const qat__layer *l, qat__text *t);
qat_status qat__pool_shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                           int64_t *s);
int qat__pool_rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h);
/* The window as the autograd ops take it. */
static inline qat_pool2d_params qat__pool_params(const qat__layer *l) {
    return (qat_pool2d_params){l->kh, l->kw, l->sh, l->sw, l->ph, l->pw};
}

#endif
