/* linear: y = x·Wᵀ + b on [N, F] (PyTorch's nn.Linear). Weight [out, in],
 * bias [out]; a weight quantizer, a BatchNorm folded in and a ReLU/ReLU6
 * fused under QAT; the integer program's linear op (a multiplier per
 * output channel). */
#include <math.h>
#include <string.h>

#include "../internal.h"
#include "../op.h"

int qat_layer_linear(qat_model *m, const char *name, int x, int in, int out, bool bias) {
    qat__layer *l = qat__append(m, QAT_LAYER_LINEAR, name, 1, &x);
    if (!l) return -1;
    if (in < 1 || out < 1) return qat__refuse(m, "sizes must be positive");
    if (in > (1 << 24) || out > (1 << 24)) return qat__refuse(m, "sizes must be at most 2^24");
    l->cin = in, l->cout = out, l->has_bias = bias;
    return qat__admit(m);
}

static qat_status parse(qat__qnet *p, const char *name, int n, const int *ids) {
    (void)n;
    const char *v;
    long out = 0, in = 0;
    bool bias = true;
    int x = ids[0];
    if (!(v = qat__qnet_get(p, "out")) || !qat__qnet_int(v, 1, 1 << 24, &out))
        return qat__qnet_need(p, v, "linear", name, "out=N (features, 1..16777216)");
    if ((v = qat__qnet_get(p, "bias")) && strcmp(v, "true") && strcmp(v, "false"))
        return qat__qnet_fail(p, "linear %s: bias=true|false", name);
    if (v) bias = !strcmp(v, "true");
    if (p->ranks[x] != 1)
        return qat__qnet_fail(p, "linear %s: its input %s is not a vector (flatten it first)", name, p->m->layers[x].name);
    int features = (int)p->shapes[x][0];
    if ((v = qat__qnet_get(p, "in")) && (!qat__qnet_int(v, 1, 1 << 24, &in) || in != features))
        return qat__qnet_fail(p, "linear %s: in=%s, but its input has %d features", name, v, features);
    return qat__qnet_added(p, qat_layer_linear(p->m, name, x, features, (int)out, bias));
}

static void print(const qat_model *m, const qat__layer *l, qat__text *t) {
    (void)m;
    qat__text_printf(t, " out=%d", l->cout);
    if (!l->has_bias) qat__text_printf(t, " bias=false");
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    if (r != 1 || x[0] != l->cin) return qat__misfit(m, l, "wants a vector of its in features (Flatten missing?)", r, x);
    *rank = 1, s[0] = l->cout;
    return QAT_OK;
}

static int64_t n_params(const qat__layer *l) { return (int64_t)l->cout * l->cin + (l->has_bias ? l->cout : 0); }

static void lay_out(qat__builder *b, qat__layer *l) {
    int64_t o = l->cout, sw[2] = {o, l->cin};
    l->weight = qat__param(b, l, "weight", 2, sw);
    l->bias = l->has_bias ? qat__param(b, l, "bias", 1, &o) : NULL;
}

static qat_tensor *product(qat_ctx *ctx, const qat__layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    (void)l;
    return qat_linear(ctx, x, w, b);
}

static qat_status lower(qat__lowering *L, int id) {
    return qat__lower_product(L, id, QAT_QOP_LINEAR);
}

static int rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)n;
    return qat_layer_linear(m, name, in[0], (int)h->hp[0], (int)h->hp[1], h->hp[9] != 0);
}

static int64_t macs(const qat__layer *l, int rank, const int64_t *out) {
    (void)rank, (void)out;
    return l->weight->numel;
}

const qat__op_kind qat__op_linear = {
    .kind = QAT_LAYER_LINEAR, .name = "linear", .stem = "fc", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "out, bias, in", .parse = parse, .print = print,
    .shape = shape, .n_params = n_params, .lay_out = lay_out, .init = qat__kaiming_init,
    .forward = qat__product_forward, .product = product,
    .requantizes = true, .weighted = true, .fuses_act = true,
    .lower = lower, .rebuild = rebuild, .macs = macs,
};
