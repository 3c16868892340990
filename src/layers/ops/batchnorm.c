/* batchnorm: batch normalization over the channels, 1-d on [N, C] and 2-d
 * on [N, C, H, W] (PyTorch's nn.BatchNorm1d/2d): weight and bias [C],
 * running mean and variance [C] (buffers). Under QAT it folds into the
 * Linear/Conv before it (op.h: folds); a BatchNorm that does not fold has
 * no integer form. */
#include <math.h>
#include <string.h>

#include "../internal.h"
#include "../op.h"

int qat_layer_batchnorm(qat_model *m, const char *name, int x, int channels, float momentum, float eps) {
    qat__layer *l = qat__append(m, QAT_LAYER_BATCHNORM, name, 1, &x);
    if (!l) return -1;
    if (channels < 1 || !(momentum >= 0 && momentum <= 1) || !(eps > 0 && eps < INFINITY))
        return qat__refuse(m, "needs channels >= 1, momentum in [0, 1], eps > 0");
    if (channels > (1 << 24)) return qat__refuse(m, "channels must be at most 2^24");
    l->cin = l->cout = channels, l->momentum = momentum, l->eps = eps, l->has_bias = true;
    return qat__admit(m);
}

static qat_status parse(qat__qnet *p, const char *name, int n, const int *ids) {
    (void)n;
    const char *v;
    double momentum = 0.1, eps = 1e-5;
    if ((v = qat__qnet_get(p, "momentum")) && !qat__qnet_real(v, 0, 1, &momentum))
        return qat__qnet_fail(p, "batchnorm %s: momentum in [0, 1]", name);
    if ((v = qat__qnet_get(p, "eps")) && !qat__qnet_real(v, 1e-30, 1, &eps))
        return qat__qnet_fail(p, "batchnorm %s: eps in (0, 1]", name);
    int x = ids[0];
    return qat__qnet_added(p, qat_layer_batchnorm(p->m, name, x, (int)p->shapes[x][0], (float)momentum, (float)eps));
}

static void print(const qat_model *m, const qat__layer *l, qat__text *t) {
    (void)m;
    if (l->momentum != 0.1f) qat__text_printf(t, " momentum=%.9g", l->momentum);
    if (l->eps != 1e-5f) qat__text_printf(t, " eps=%.9g", l->eps);
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    if (x[0] != l->cout) return qat__misfit(m, l, "wants its channels on the first axis", r, x);
    *rank = r, memcpy(s, x, 3 * sizeof *s);
    return QAT_OK;
}

static int64_t n_params(const qat__layer *l) { return 4 * (int64_t)l->cout; /* weight, bias, running mean and variance */ }

static void lay_out(qat__builder *b, qat__layer *l) {
    int64_t o = l->cout;
    l->gamma = qat__param(b, l, "weight", 1, &o);
    l->beta = qat__param(b, l, "bias", 1, &o);
    l->running_mean = qat__buffer(b, l, "running_mean", o);
    l->running_var = qat__buffer(b, l, "running_var", o);
}

/* weight 1, bias 0, running mean 0, variance 1 */
static void init(qat__layer *l, qat_rng *rng) {
    (void)rng;
    for (int c = 0; c < l->cout; c++) {
        l->gamma->data[c] = 1.0f, l->beta->data[c] = 0.0f;
        l->running_mean[c] = 0.0f, l->running_var[c] = 1.0f;
    }
}

static qat_tensor *forward(qat_model *m, qat__layer *l, qat_tensor *const *xs) {
    if (l->folded) return xs[0]; /* applied by the Linear/Conv before it */
    return qat_batchnorm(m->ctx, xs[0], l->gamma, l->beta, l->running_mean, l->running_var, l->momentum, l->eps,
                         m->training);
}

static qat_status lower(qat__lowering *L, int id) {
    return qat__lower_fail(L, &qat__lower_model(L)->layers[id], QAT_ERR_UNSUPPORTED,
                           "a BatchNorm not folded into the Linear/Conv before it (fold_bn off, or that layer's "
                           "output feeds other layers too) has no integer form");
}

static int rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)n;
    return qat_layer_batchnorm(m, name, in[0], (int)h->hp[1], h->momentum, h->eps);
}

const qat__op_kind qat__op_batchnorm = {
    .kind = QAT_LAYER_BATCHNORM, .name = "batchnorm", .stem = "bn", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "momentum, eps", .parse = parse, .print = print,
    .shape = shape, .n_params = n_params, .lay_out = lay_out, .init = init, .forward = forward,
    .folds = true, .lower = lower, .rebuild = rebuild,
};
