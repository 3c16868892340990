/* The fusion matcher: the one place that decides which layers form a
 * group — what the QAT pass quantizes after, and what lowering emits as
 * one integer op. */
#include "op.h"

void qat__count_consumers(qat_model *m) {
    for (int i = 0; i < m->n_layers; i++) m->layers[i].n_consumers = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i].n_in; j++) m->layers[m->layers[i].in[j]].n_consumers++;
    m->layers[qat__model_output(m)].n_consumers++; /* the caller reads it too */
}

/* The one layer that reads layer id's output, or -1 (none, several, or
 * the model output). Consumers come after their inputs. */
static int sole_consumer(const qat_model *m, int id) {
    if (m->layers[id].n_consumers != 1) return -1;
    for (int i = id + 1; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i].n_in; j++)
            if (m->layers[i].in[j] == id) return i;
    return -1; /* its one consumer is the caller: the model output */
}

void qat__match_group(const qat_model *m, int anchor, bool fold_bn, qat__group *g) {
    *g = (qat__group){.anchor = anchor, .bn = -1, .act = -1, .end = anchor};
    const qat__layer *a = &m->layers[anchor];
    const qat__op_kind *op = qat__op(a->kind);
    if (!op->fuses_act) return;
    int c = sole_consumer(m, anchor);
    if (op->weighted && fold_bn && c >= 0 && qat__op(m->layers[c].kind)->folds && m->layers[c].cout == a->cout) {
        g->bn = g->end = c;
        c = sole_consumer(m, c);
    }
    if (c >= 0 && qat__op(m->layers[c].kind)->act != QAT_ACT_NONE) g->act = g->end = c;
}

bool qat__requantizes(qat_layer_kind kind) { return qat__op(kind)->requantizes; }
