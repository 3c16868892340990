/* Central-difference gradient check. The function is evaluated in grad
 * mode once for the analytic gradient, then 2 x numel times with grad mode
 * off; each evaluation is a fresh step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static qat_status eval(qat_ctx *ctx, qat_graph_fn fn, void *user, qat_tensor *const *inputs,
                       double *value) {
    qat_ctx_step_reset(ctx);
    qat_tensor *y = fn(ctx, inputs, user);
    if (!y) return qat_ctx_status(ctx) ? qat_ctx_status(ctx)
                                       : qat_ctx_fail(ctx, QAT_ERR_STATE, "gradcheck: fn gave NULL");
    if (y->numel != 1)
        return qat_ctx_fail(ctx, QAT_ERR_SHAPE, "gradcheck: fn must return a scalar");
    *value = y->data[0];
    return QAT_OK;
}

qat_status qat_gradcheck(qat_ctx *ctx, qat_graph_fn fn, void *user, qat_tensor *const *inputs,
                         int n_inputs, float eps, float atol, float rtol,
                         qat_gradcheck_result *result) {
    if (!ctx) return QAT_ERR_ARG;
    if (!fn || !inputs || n_inputs < 1 || !(eps > 0.0f))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "gradcheck: bad arguments");
    qat_gradcheck_result r = {0};
    r.worst_input = r.worst_index = -1;
    int64_t total = 0;
    for (int k = 0; k < n_inputs; k++) {
        if (!inputs[k] || inputs[k]->mem != QAT_MEM_PERSIST || !inputs[k]->requires_grad)
            return qat_ctx_fail(ctx, QAT_ERR_ARG,
                                "gradcheck: input %d must be a persistent tensor requiring grad", k);
        qat_tensor_zero_grad(inputs[k]);
        total += inputs[k]->numel;
    }
    bool was = qat_ctx_grad_enabled(ctx);
    qat_ctx_set_grad_enabled(ctx, true);
    qat_ctx_step_reset(ctx);
    qat_tensor *y0 = fn(ctx, inputs, user);
    qat_status st = y0 ? qat_backward(ctx, y0) : qat_ctx_status(ctx);
    if (st == QAT_OK && qat_ctx_status(ctx) != QAT_OK) st = qat_ctx_status(ctx);
    if (!y0 && st == QAT_OK) st = qat_ctx_fail(ctx, QAT_ERR_STATE, "gradcheck: fn gave NULL");
    float *analytic = st == QAT_OK ? malloc((size_t)total * sizeof(float)) : NULL;
    if (st == QAT_OK && !analytic) st = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "gradcheck: no memory");
    if (st == QAT_OK) {
        int64_t off = 0;
        for (int k = 0; k < n_inputs; k++) {
            memcpy(analytic + off, inputs[k]->grad, (size_t)inputs[k]->numel * sizeof(float));
            off += inputs[k]->numel;
        }
    }
    qat_ctx_set_grad_enabled(ctx, false);
    int64_t off = 0;
    for (int k = 0; k < n_inputs && st == QAT_OK; k++) {
        qat_tensor *t = inputs[k];
        for (int64_t i = 0; i < t->numel && st == QAT_OK; i++) {
            float keep = t->data[i];
            double fp = 0.0, fm = 0.0;
            t->data[i] = keep + eps;
            st = eval(ctx, fn, user, inputs, &fp);
            t->data[i] = keep - eps;
            if (st == QAT_OK) st = eval(ctx, fn, user, inputs, &fm);
            t->data[i] = keep;
            if (st != QAT_OK) break;
            /* divide by the step actually taken, not the nominal one */
            double h = (double)(keep + eps) - (double)(keep - eps);
            double num = (fp - fm) / h, ana = analytic[off + i];
            double err = fabs(ana - num), rel = err / (fabs(num) > 1e-12 ? fabs(num) : 1e-12);
            if (err > r.max_abs_err) {
                r.max_abs_err = err;
                r.worst_input = k;
                r.worst_index = i;
            }
            if (rel > r.max_rel_err && err > atol) r.max_rel_err = rel;
            r.n_checked++;
            if (!(err <= atol + rtol * fabs(num))) /* a NaN on either side fails too */
                st = qat_ctx_fail(ctx, QAT_ERR_STATE,
                                  "gradcheck: input %d element %lld: analytic %.6g, numeric %.6g",
                                  k, (long long)i, ana, num);
        }
        off += t->numel;
    }
    qat_ctx_set_grad_enabled(ctx, was);
    qat_ctx_step_reset(ctx);
    free(analytic);
    if (result) *result = r;
    return st;
}
