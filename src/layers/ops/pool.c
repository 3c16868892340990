/* The window pools' shared parts (pool.h): a window of kh x kw, strides
 * (0: the window's size, as PyTorch), zero padding of at most half the
 * window, on [C, H, W]. */
#include "../internal.h"
#include "pool.h"

int qat__pool_add(qat_model *m, qat_layer_kind kind, const char *name, int x, const qat_pool2d_spec *s) {
    qat__layer *l = qat__append(m, kind, name, 1, &x);
    if (!l) return -1;
    if (!s) return qat__refuse(m, "no spec");
    int sh = s->stride_h ? s->stride_h : s->kh, sw = s->stride_w ? s->stride_w : s->kw;
    if (s->kh < 1 || s->kw < 1 || sh < 1 || sw < 1 || s->pad_h < 0 || s->pad_w < 0 || s->kh > 64 || s->kw > 64 ||
        sh > 64 || sw > 64)
        return qat__refuse(m, "window (1..64) and strides (1..64) must be positive, padding >= 0");
    if (2 * s->pad_h > s->kh || 2 * s->pad_w > s->kw) return qat__refuse(m, "padding is at most half the window");
    l->kh = s->kh, l->kw = s->kw, l->sh = sh, l->sw = sw, l->ph = s->pad_h, l->pw = s->pad_w;
    return m->n_layers - 1;
}

qat_status qat__pool_parse(qat__qnet *p, const char *name, int n, const int *in) {
    (void)n;
    const char *v, *k = qat_layer_kind_str(p->kind);
    qat_pool2d_spec s = {0};
    if (!(v = qat__qnet_get(p, "kernel")) || !qat__qnet_pair(v, 1, 64, &s.kh, &s.kw))
        return qat__qnet_need(p, v, k, name, "kernel=K or KHxKW (1..64)");
    if ((v = qat__qnet_get(p, "stride")) && !qat__qnet_pair(v, 1, 64, &s.stride_h, &s.stride_w))
        return qat__qnet_fail(p, "%s %s: stride=S or SHxSW (1..64)", k, name);
    if ((v = qat__qnet_get(p, "pad")) && !qat__qnet_pair(v, 0, 32, &s.pad_h, &s.pad_w))
        return qat__qnet_fail(p, "%s %s: pad=P or PHxPW", k, name);
    return qat__qnet_added(p, qat__pool_add(p->m, p->kind, name, in[0], &s));
}

static void print_pair(qat__text *t, const char *key, int a, int b) {
    if (a == b) qat__text_printf(t, " %s=%d", key, a);
    else qat__text_printf(t, " %s=%dx%d", key, a, b);
}

void qat__pool_print(const qat_model *m, const qat__layer *l, qat__text *t) {
    (void)m;
    print_pair(t, "kernel", l->kh, l->kw);
    if (l->sh != l->kh || l->sw != l->kw) print_pair(t, "stride", l->sh, l->sw);
    if (l->ph || l->pw) print_pair(t, "pad", l->ph, l->pw);
}

qat_status qat__pool_shape(const qat_model *m, const qat__layer *l, const int *ranks, int64_t (*shapes)[3], int *rank,
                           int64_t *s) {
    int r = ranks[l->in[0]];
    const int64_t *x = shapes[l->in[0]];
    if (r != 3) return qat__misfit(m, l, "wants [C, H, W]", r, x);
    *rank = 3, s[0] = x[0];
    s[1] = qat__window_out(x[1], l->kh, l->sh, l->ph), s[2] = qat__window_out(x[2], l->kw, l->sw, l->pw);
    if (!s[1] || !s[2]) return qat__misfit(m, l, "its window is larger than its padded input", r, x);
    return QAT_OK;
}

int qat__pool_rebuild(qat_model *m, const char *name, int n, const int *in, const qat__hparams *h) {
    (void)n;
    qat_pool2d_spec ps = {(int)h->hp[2], (int)h->hp[3], (int)h->hp[4], (int)h->hp[5], (int)h->hp[6], (int)h->hp[7]};
    return qat__pool_add(m, h->kind, name, in[0], &ps);
}
