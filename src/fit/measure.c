/* The fit's measurement: each fitted layer alone at each candidate weight
 * width — its calibration loss, and the generated C's constants and arena
 * (qat/fit.h). */
#include <stdlib.h>
#include <string.h>

#include "layers/model.h"
#include "qat/codegen.h"
#include "qat/export.h"
#include "qat/fit.h"

/* The calibration loss and metric of m as it stands. */
static qat_status calibrate(qat_model *m, const qat_fit_data *d, double *loss, double *metric, bool *higher) {
    qat_metrics mt;
    qat_status st = qat_model_evaluate(m, d->data, d->split, d->limit, d->task, NULL, &mt);
    if (st == QAT_OK) {
        *loss = mt.loss;
        *metric = qat_metrics_get(&mt, d->task->kind == QAT_TASK_CLASSIFY ? "accuracy" : "mse", higher);
    }
    qat_metrics_free(&mt);
    return st;
}

/* The generated C's constant bytes and arena for m as it stands: lowered
 * in a context of its own (freed here), generated, sized. */
static qat_status c_size(qat_model *m, int64_t *flash, int64_t *arena, int64_t *arena_small) {
    qat_ctx *pctx = qat_ctx_new();
    if (!pctx) return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_NOMEM, "fit: out of memory");
    qat_qmodel q;
    qat_status st = qat_qmodel_lower(m, 0, NULL, pctx, &q);
    if (st != QAT_OK) {
        qat_ctx_fail(qat_model_ctx(m), st, "fit: %s", qat_ctx_error(pctx));
        qat_ctx_free(pctx);
        return st;
    }
    qat_codegen_source src;
    char msg[512] = "";
    for (int small = 0; small < 2 && st == QAT_OK; small++) {
        st = qat_codegen_generate_ex(&q, "fit", &(qat_codegen_options){.small_ram = small}, &src, msg, sizeof msg);
        if (st == QAT_OK && !small) *flash = src.info.weight_bytes, *arena = src.info.arena_bytes;
        else if (st == QAT_OK) *arena_small = src.info.arena_bytes;
        else qat_ctx_fail(qat_model_ctx(m), st, "fit: the C generator: %s", msg);
        qat_codegen_source_free(&src);
    }
    qat_ctx_free(pctx);
    return st;
}

/* The layers the choice may set: quantized Linear/Conv weights whose
 * precision the model file left to the run. */
static bool fitted(const qat_model *m, int id) {
    const qat__layer *l = &m->layers[id];
    return l->wq && l->qcfg && !l->prec.wbits;
}

static qat_status check_bits(qat_ctx *ctx, const int *bits, int n) {
    if (!bits || n < 1 || n > QAT_FIT_MAX_CHOICES)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: 1 to %d candidate bit widths, not %d", QAT_FIT_MAX_CHOICES, n);
    for (int k = 0; k < n; k++)
        if (bits[k] < 2 || bits[k] > 8 || (k && bits[k] <= bits[k - 1]))
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: candidate bits must ascend within 2..8 (the generated C packs "
                                "2- and 4-bit weights and stores up to 8); got %d after %d", bits[k], k ? bits[k - 1] : 0);
    return QAT_OK;
}

qat_status qat_fit_measure(qat_model *m, const qat_fit_data *d, const int *bits, int n, qat_ctx *ctx,
                           void (*progress)(void *user, int done, int total), void *user, qat_fit_table *out) {
    if (!m || !d || !d->data || !d->task || !ctx || !out) return QAT_ERR_ARG;
    memset(out, 0, sizeof *out);
    qat_ctx *mctx = qat_model_ctx(m);
    qat_status st = check_bits(mctx, bits, n);
    if (st != QAT_OK) return st;
    if (!m->prepared) return qat_ctx_fail(mctx, QAT_ERR_ARG, "fit: the model is not prepared for QAT (train with --qat)");
    int count = 0;
    for (int i = 1; i < m->n_layers; i++) {
        if (!fitted(m, i)) continue;
        if (m->layers[i].qcfg->lsq)
            return qat_ctx_fail(mctx, QAT_ERR_UNSUPPORTED, "fit: layer %s learned its weight scales (LSQ); the fit "
                                "measures other widths with min-max scales: train without --lsq", m->layers[i].name);
        count++;
    }
    if (!count) return qat_ctx_fail(mctx, QAT_ERR_ARG, "fit: no Linear or Conv layer left to fit (the model file sets "
                                    "the weight bits of every one)");
    qat_fit_layer *L = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)count * sizeof *L);
    if (!L) return qat_ctx_status(ctx);
    bool higher = true;
    if ((st = calibrate(m, d, &out->loss, &out->metric, &higher)) != QAT_OK ||
        (st = c_size(m, &out->flash, &out->arena, &out->arena_small)) != QAT_OK)
        return st;
    int done = 0, total = count * n;
    for (int i = 1, j = 0; i < m->n_layers && st == QAT_OK; i++) {
        if (!fitted(m, i)) continue;
        qat_fit_layer *f = &L[j++];
        const qat__layer *l = &m->layers[i];
        *f = (qat_fit_layer){.layer = i, .name = l->name, .weights = l->weight->numel, .n = n, .trained = -1,
                             .config = *l->qcfg};
        for (int k = 0; k < n && st == QAT_OK; k++) {
            f->bits[k] = bits[k];
            if (bits[k] == f->config.wbits) f->trained = k;
            qat_prepare_config c = f->config;
            c.wbits = bits[k];
            if ((st = qat_prepare_layer(m, l->name, &c)) == QAT_OK && (st = calibrate(m, d, &f->loss[k], &f->metric[k], &higher)) == QAT_OK)
                st = c_size(m, &f->flash[k], &f->arena[k], &f->arena_small[k]);
            if (progress) progress(user, ++done, total);
        }
        qat_status back = qat_prepare_layer(m, l->name, &f->config); /* as trained, its observers untouched */
        if (st == QAT_OK) st = back;
    }
    if (st != QAT_OK) return st;
    out->n_layers = count, out->layers = L, out->metric_higher = higher;
    return QAT_OK;
}

qat_status qat_fit_apply(qat_model *m, const qat_fit_table *t, const int *choice) {
    if (!m || !t) return QAT_ERR_ARG;
    for (int i = 0; i < t->n_layers; i++) {
        const qat_fit_layer *f = &t->layers[i];
        qat_prepare_config c = f->config;
        if (choice) {
            if (choice[i] < 0 || choice[i] >= f->n)
                return qat_ctx_fail(qat_model_ctx(m), QAT_ERR_ARG, "fit: layer %s: choice %d of %d", f->name, choice[i], f->n);
            c.wbits = f->bits[choice[i]];
        }
        qat_status st = qat_prepare_layer(m, f->name, &c);
        if (st != QAT_OK) return st;
    }
    return QAT_OK;
}
