/* dropout: in training, each element zeroed with probability p and the
 * rest scaled by 1/(1 - p) (PyTorch's nn.Dropout); an identity in
 * evaluation and in the integer program (lowering aliases its input). */
#include "../internal.h"
#include "../op.h"

int qat_layer_dropout(qat_model *m, const char *name, int x, float p) {
    qat__layer *l = qat__append(m, QAT_LAYER_DROPOUT, name, 1, &x);
    if (!l) return -1;
    if (!(p >= 0 && p < 1)) return qat__refuse(m, "p must be in [0, 1)");
    l->p = p;
    return m->n_layers - 1;
}

static qat_status parse(qat__qnet *p, const char *name, int n, const int *ids) {
    (void)n;
    const char *v;
    double prob = 0.5;
    if ((v = qat__qnet_get(p, "p")) && !qat__qnet_real(v, 0, 0.999999, &prob))
        return qat__qnet_fail(p, "dropout %s: p in [0, 1)", name);
    return qat__qnet_added(p, qat_layer_dropout(p->m, name, ids[0], (float)prob));
}

static void print(const qat_model *m, const qat__layer *l, qat__text *t) {
    (void)m;
    qat__text_printf(t, " p=%.9g", l->p);
}

/* Dropout on this process's slice of the global batch: one uniform per
 * element, drawn for the samples before the slice and after it too (and
 * thrown away), so every process's RNG moves by the global batch. */
static qat_tensor *dropout(qat_model *m, const qat__layer *l, qat_tensor *x) {
    int64_t n = x->rank > 0 ? x->shape[0] : 1, per = 1; /* elements per sample, also when n is 0 */
    for (int d = 1; d < x->rank; d++) per *= x->shape[d];
    int64_t before = 0, after = 0;
    if (m->slice_global > 0) {
        if (m->slice_first + n > m->slice_global)
            return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: layer %s: a batch of %lld at sample %lld of a global "
                                "batch of %lld", l->name, (long long)n, (long long)m->slice_first,
                                (long long)m->slice_global), NULL;
        before = m->slice_first * per, after = (m->slice_global - m->slice_first - n) * per;
    }
    for (int64_t i = 0; i < before; i++) (void)qat_rng_uniform(&m->rng);
    qat_tensor *y = qat_dropout(m->ctx, x, l->p, &m->rng);
    for (int64_t i = 0; i < after; i++) (void)qat_rng_uniform(&m->rng);
    return y;
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    return m->training && l->p > 0 ? dropout(m, l, xs[0]) : xs[0];
}

static qat_status lower(qat__lowering *L, int id) {
    qat__lower_alias(L, id);
    return QAT_OK;
}

static int rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)n;
    return qat_layer_dropout(m, name, in[0], h->p);
}

const qat__op_kind qat__op_dropout = {
    .kind = QAT_LAYER_DROPOUT, .name = "dropout", .stem = "dropout", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "p", .parse = parse, .print = print, .forward = forward, .keeps_quant = true,
    .lower = lower, .rebuild = rebuild,
};
