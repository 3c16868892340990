/* Model files written (docs/model-format.md): the model's graph as the
 * text qat_model_from_text reads back — the input line, a line per layer
 * with the fields its kind prints (op.h: print), and an output line when
 * the output is not the last layer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "op.h"

struct qat__text {
    char *buf;
    size_t cap;
    int64_t len; /* the whole text's length, written or not */
};

void qat__text_printf(qat__text *t, const char *fmt, ...) {
    char *at = t->buf && (size_t)t->len < t->cap ? t->buf + t->len : NULL;
    size_t room = at ? t->cap - (size_t)t->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += n;
}

/* Layer l's attributes, key=value each (the kinds without a print hook). */
static void attributes(const qat__op_kind *op, const qat__layer *l, qat__text *t) {
    for (int a = 0; a < op->n_attrs; a++) qat__text_printf(t, " %s=%.9g", op->attrs[a].key, (double)l->attr[a]);
}

/* A layer's own precision, as its line's keys. */
static void precision(const qat_layer_precision *p, qat__text *t) {
    if (p->wbits) qat__text_printf(t, " wbits=%d", p->wbits);
    if (p->abits) qat__text_printf(t, " abits=%d", p->abits);
    if (!p->has_granularity) return;
    if (p->granularity == QAT_GRAN_BLOCK) qat__text_printf(t, " granularity=block:%d", p->block);
    else qat__text_printf(t, " granularity=%s", p->granularity == QAT_GRAN_TENSOR ? "tensor" : "channel");
}

int64_t qat_model_to_text(const qat_model *m, char *buf, size_t cap) {
    if (!m) return -1;
    if (buf && cap) buf[0] = '\0';
    if (m->in_rank != 1 && m->in_rank != 3)
        return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model file: the model declares no input shape "
                            "(qat_model_set_input_shape)"), -1;
    qat__text t = {.buf = buf, .cap = buf ? cap : 0};
    qat__text_printf(&t, "input shape=");
    for (int d = 0; d < m->in_rank; d++) qat__text_printf(&t, "%s%lld", d ? "," : "", (long long)m->in_shape[d]);
    qat__text_printf(&t, "\n");
    for (int i = 1; i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        const qat__op_kind *op = qat__op(l->kind);
        if (!op->in_files)
            return qat_ctx_fail(m->ctx, QAT_ERR_UNSUPPORTED, "model file: layer %s is a %s layer, which model files "
                                "cannot declare", l->name, op->name), -1;
        qat__text_printf(&t, "%s %s ", op->name, l->name);
        for (int j = 0; j < l->n_in; j++) qat__text_printf(&t, "%s%s", j ? "," : "", m->layers[l->in[j]].name);
        if (op->print) op->print(m, l, &t);
        else attributes(op, l, &t);
        precision(&l->prec, &t);
        qat__text_printf(&t, "\n");
    }
    if (m->output >= 0 && m->output != m->n_layers - 1) qat__text_printf(&t, "output %s\n", m->layers[m->output].name);
    return t.len;
}
