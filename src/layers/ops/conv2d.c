/* conv2d: a 2-d convolution on [N, C, H, W] (PyTorch's nn.Conv2d): groups
 * (depthwise when groups = in), non-square kernels, strides and zero
 * padding. Weight [out, in/groups, kh, kw], bias [out]; a weight
 * quantizer, a BatchNorm folded in and a ReLU/ReLU6 fused under QAT; the
 * integer program's conv2d op (a multiplier per output channel). */
#include <math.h>
#include <string.h>

#include "../internal.h"
#include "../op.h"

qat_conv2d_spec qat_conv2d_square(int in, int out, int k, int stride, int pad, bool bias) {
    return (qat_conv2d_spec){.in = in, .out = out, .kh = k, .kw = k, .stride_h = stride, .stride_w = stride,
                             .pad_h = pad, .pad_w = pad, .groups = 1, .bias = bias};
}

int qat_layer_conv2d(qat_model *m, const char *name, int x, const qat_conv2d_spec *s) {
    qat__layer *l = qat__append(m, QAT_LAYER_CONV2D, name, 1, &x);
    if (!l) return -1;
    if (!s) return qat__refuse(m, "no spec");
    int g = s->groups ? s->groups : 1;
    if (s->in < 1 || s->out < 1 || s->kh < 1 || s->kw < 1 || s->stride_h < 1 || s->stride_w < 1 || s->pad_h < 0 ||
        s->pad_w < 0 || s->kh > 64 || s->kw > 64 || s->stride_h > 64 || s->stride_w > 64 || s->pad_h > 64 ||
        s->pad_w > 64)
        return qat__refuse(m, "channels, kernel (1..64) and strides (1..64) must be positive, padding 0..64");
    if (g < 1 || s->in % g || s->out % g) return qat__refuse(m, "groups must divide the input and output channels");
    l->cin = s->in, l->cout = s->out, l->kh = s->kh, l->kw = s->kw, l->sh = s->stride_h, l->sw = s->stride_w;
    if (s->in > (1 << 24) || s->out > (1 << 24)) return qat__refuse(m, "channels must be at most 2^24");
    l->ph = s->pad_h, l->pw = s->pad_w, l->groups = g, l->has_bias = s->bias;
    return qat__admit(m);
}

static qat_status parse(qat__qnet *p, const char *name, int n, const int *ids) {
    (void)n;
    const char *v;
    long out = 0, in = 0;
    int x = ids[0];
    qat_conv2d_spec s = {.stride_h = 1, .stride_w = 1, .groups = 1, .bias = true};
    if (!(v = qat__qnet_get(p, "out")) || !qat__qnet_int(v, 1, 1 << 20, &out))
        return qat__qnet_need(p, v, "conv2d", name, "out=N (channels, 1..1048576)");
    if (!(v = qat__qnet_get(p, "kernel")) || !qat__qnet_pair(v, 1, 64, &s.kh, &s.kw))
        return qat__qnet_need(p, v, "conv2d", name, "kernel=K or kernel=KHxKW (1..64)");
    if ((v = qat__qnet_get(p, "stride")) && !qat__qnet_pair(v, 1, 64, &s.stride_h, &s.stride_w))
        return qat__qnet_fail(p, "conv2d %s: stride=S or SHxSW (1..64)", name);
    if ((v = qat__qnet_get(p, "pad")) && !qat__qnet_pair(v, 0, 64, &s.pad_h, &s.pad_w))
        return qat__qnet_fail(p, "conv2d %s: pad=P or PHxPW (0..64)", name);
    if ((v = qat__qnet_get(p, "bias")) && strcmp(v, "true") && strcmp(v, "false"))
        return qat__qnet_fail(p, "conv2d %s: bias=true|false", name);
    if (v) s.bias = !strcmp(v, "true");
    if (p->ranks[x] != 3) return qat__qnet_fail(p, "conv2d %s: its input %s is not [C, H, W]", name, p->m->layers[x].name);
    s.in = (int)p->shapes[x][0], s.out = (int)out;
    if ((v = qat__qnet_get(p, "in")) && (!qat__qnet_int(v, 1, 1 << 20, &in) || in != s.in))
        return qat__qnet_fail(p, "conv2d %s: in=%s, but its input has %d channels", name, v, s.in);
    long groups = 1;
    if ((v = qat__qnet_get(p, "groups")) && strcmp(v, "depthwise") && !qat__qnet_int(v, 1, 1 << 20, &groups))
        return qat__qnet_fail(p, "conv2d %s: groups=G or groups=depthwise", name);
    s.groups = v && !strcmp(v, "depthwise") ? s.in : (int)groups;
    return qat__qnet_added(p, qat_layer_conv2d(p->m, name, x, &s));
}

static void print_pair(qat__text *t, const char *key, int a, int b) {
    if (a == b) qat__text_printf(t, " %s=%d", key, a);
    else qat__text_printf(t, " %s=%dx%d", key, a, b);
}

static void print(const qat_model *m, const qat__layer *l, qat__text *t) {
    (void)m;
    qat__text_printf(t, " out=%d", l->cout);
    print_pair(t, "kernel", l->kh, l->kw);
    if (l->sh != 1 || l->sw != 1) print_pair(t, "stride", l->sh, l->sw);
    if (l->ph || l->pw) print_pair(t, "pad", l->ph, l->pw);
    if (l->groups != 1) qat__text_printf(t, " groups=%d", l->groups);
    if (!l->has_bias) qat__text_printf(t, " bias=false");
}

static qat_status shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                        int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    if (r != 3) return qat__misfit(m, l, "wants [C, H, W]", r, x);
    if (x[0] != l->cin) return qat__misfit(m, l, "wants its in channels", r, x);
    *rank = 3, s[0] = l->cout;
    s[1] = qat__window_out(x[1], l->kh, l->sh, l->ph), s[2] = qat__window_out(x[2], l->kw, l->sw, l->pw);
    if (!s[1] || !s[2]) return qat__misfit(m, l, "its window is larger than its padded input", r, x);
    return QAT_OK;
}

static int64_t n_params(const qat__layer *l) {
    int64_t o = l->cout;
    return o * (l->cin / l->groups) * l->kh * l->kw + (l->has_bias ? o : 0);
}

static void lay_out(qat__builder *b, qat__layer *l) {
    int64_t o = l->cout, sw[4] = {o, l->cin / l->groups, l->kh, l->kw};
    l->weight = qat__param(b, l, "weight", 4, sw);
    l->bias = l->has_bias ? qat__param(b, l, "bias", 1, &o) : NULL;
}

static qat_tensor *product(qat_ctx *ctx, const qat__layer *l, qat_tensor *x, qat_tensor *w, qat_tensor *b) {
    qat_conv2d_params p = {l->sh, l->sw, l->ph, l->pw, l->groups};
    return qat_conv2d_ex(ctx, x, w, b, &p);
}

static qat_status lower(qat__lowering *L, int id) {
    return qat__lower_product(L, id, QAT_QOP_CONV2D);
}

static int rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)n;
    const long long *hp = h->hp;
    qat_conv2d_spec cs = {.in = (int)hp[0], .out = (int)hp[1], .kh = (int)hp[2], .kw = (int)hp[3],
                          .stride_h = (int)hp[4], .stride_w = (int)hp[5], .pad_h = (int)hp[6], .pad_w = (int)hp[7],
                          .groups = (int)hp[8], .bias = hp[9] != 0};
    return qat_layer_conv2d(m, name, in[0], &cs);
}

static int64_t macs(const qat__layer *l, int rank, const int64_t *out) {
    return l->weight->numel * (rank == 3 ? out[1] * out[2] : 1);
}

const qat__op_kind qat__op_conv2d = {
    .kind = QAT_LAYER_CONV2D, .name = "conv2d", .stem = "conv", .min_inputs = 1, .max_inputs = 1,
    .in_files = true, .keys = "out, kernel, stride, pad, groups, bias, in", .parse = parse, .print = print,
    .shape = shape, .n_params = n_params, .lay_out = lay_out, .init = qat__kaiming_init,
    .forward = qat__product_forward, .product = product,
    .requantizes = true, .weighted = true, .fuses_act = true,
    .lower = lower, .rebuild = rebuild, .macs = macs,
};
