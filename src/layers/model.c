/* The model graph: adding layers, naming, the sequential sugar, the flat
 * parameter blocks and PyTorch's default initialisation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/op_api.h"
#include "internal.h"
#include "op.h"

/* ---- limits ------------------------------------------------------------------------ */

qat_model_limits qat_model_limits_default(void) {
    return (qat_model_limits){.max_params = QAT_MODEL_MAX_PARAMS, .max_activation_bytes = QAT_MODEL_MAX_ACTIVATION_BYTES,
                              .max_layers = QAT_MODEL_MAX_LAYERS};
}

qat_status qat_model_set_limits(qat_model *m, const qat_model_limits *limits) {
    if (!m) return QAT_ERR_ARG;
    if (m->n_layers > 1 || m->built)
        return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: set the limits before adding layers");
    qat_model_limits d = qat_model_limits_default(), l = limits ? *limits : d;
    if (l.max_params <= 0) l.max_params = d.max_params;
    if (l.max_activation_bytes <= 0) l.max_activation_bytes = d.max_activation_bytes;
    if (l.max_layers <= 0) l.max_layers = d.max_layers;
    if (l.max_layers > INT32_MAX) l.max_layers = INT32_MAX; /* layer ids are int */
    m->limits = l;
    return QAT_OK;
}

qat_model_limits qat_model_get_limits(const qat_model *m) { return m ? m->limits : qat_model_limits_default(); }

int64_t qat__shape_numel(int rank, const int64_t *s) {
    const int64_t cap = (int64_t)1 << 62;
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n = s[d] <= 0 ? 0 : n > cap / s[d] ? cap : n * s[d];
    return n;
}

qat_status qat__check_activation_bytes(qat_model *m, int64_t total_bytes) {
    if (total_bytes <= m->limits.max_activation_bytes) return QAT_OK;
    return qat_ctx_fail(m->ctx, QAT_ERR_UNSUPPORTED,
                        "model: its layers' outputs take %lld bytes a sample (float32), more than the limit "
                        "max_activation_bytes = %lld (raise it: qat_model_set_limits; on the command line "
                        "--max-activation-bytes)", (long long)total_bytes, (long long)m->limits.max_activation_bytes);
}

/* Parameters and buffers a layer adds to the flat blocks (lay_out's count). */
static int64_t layer_params(const qat__layer *l) {
    const qat__op_kind *op = qat__op(l->kind);
    return op->n_params ? op->n_params(l) : 0;
}

static qat_status params_fail(qat_model *m, const char *what, int64_t n) {
    return qat_ctx_fail(m->ctx, QAT_ERR_UNSUPPORTED,
                        "model: %s%s %lld parameters (and buffers), more than the limit max_params = %lld (raise "
                        "it: qat_model_set_limits; on the command line --max-params)", what[0] ? what : "",
                        what[0] ? "" : "the model has", (long long)n, (long long)m->limits.max_params);
}

/* The layer just added, its hyperparameters set: its parameters counted
 * against the limit (sizes up to 2^24 each: the products fit int64). On
 * refusal the layer is taken back. */
int qat__admit(qat_model *m) {
    qat__layer *l = &m->layers[m->n_layers - 1];
    int64_t total = m->declared_params + layer_params(l);
    if (total > m->limits.max_params) {
        char what[96];
        snprintf(what, sizeof what, "%s %s brings the model to", qat_layer_kind_str(l->kind), l->name);
        m->n_layers--;
        params_fail(m, what, total);
        return -1;
    }
    m->declared_params = total;
    return m->n_layers - 1;
}

qat_model *qat_model_new(qat_ctx *ctx) {
    qat_model *m = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *m);
    if (!m) return NULL;
    m->ctx = ctx;
    m->limits = qat_model_limits_default();
    m->training = true;
    m->output = -1;
    if (!qat__append(m, QAT_LAYER_INPUT, "input", 0, NULL)) return NULL;
    return m;
}

int qat_model_input(const qat_model *m) { return m ? 0 : -1; }

qat_status qat_model_set_input_shape(qat_model *m, int rank, const int64_t *shape) {
    if (!m) return QAT_ERR_ARG;
    if ((rank != 1 && rank != 3) || !shape)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: the input shape is [C, H, W] or [F]");
    for (int d = 0; d < rank; d++)
        if (shape[d] < 1 || shape[d] > (1 << 24))
            return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: input dimension %lld", (long long)shape[d]);
    char msg[200];
    if (m->norm && qat_normalization_check(m->norm, rank, shape, msg, sizeof msg) != QAT_OK)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: the input shape does not fit the model's normalization: %s", msg);
    m->in_rank = rank;
    memcpy(m->in_shape, shape, (size_t)rank * sizeof *shape);
    return QAT_OK;
}

int qat_model_input_shape(const qat_model *m, int64_t *shape) {
    if (!m) return 0;
    if (shape) memcpy(shape, m->in_shape, sizeof m->in_shape);
    return m->in_rank;
}

qat_status qat_model_set_normalization(qat_model *m, const qat_normalization *norm) {
    if (!m) return QAT_ERR_ARG;
    if (!norm || norm->channels == 0) {
        m->norm = NULL;
        return QAT_OK;
    }
    char msg[200];
    if (qat_normalization_check(norm, m->in_rank, m->in_shape, msg, sizeof msg) != QAT_OK)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: normalization: %s", msg);
    if (!m->norm_mem && !(m->norm_mem = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, sizeof *m->norm_mem)))
        return qat_ctx_status(m->ctx);
    /* the channels in use, the rest zero: two equal normalizations are equal bytes */
    qat_normalization *n = m->norm_mem;
    memset(n, 0, sizeof *n);
    n->channels = norm->channels, n->divisor = norm->divisor, n->raw_uint8 = norm->raw_uint8;
    memcpy(n->mean, norm->mean, (size_t)norm->channels * sizeof *n->mean);
    memcpy(n->std, norm->std, (size_t)norm->channels * sizeof *n->std);
    m->norm = n;
    return QAT_OK;
}

const qat_normalization *qat_model_normalization(const qat_model *m) { return m ? m->norm : NULL; }

static bool name_taken(const qat_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, name)) return true;
    return false;
}

qat__layer *qat__append(qat_model *m, qat_layer_kind kind, const char *name, int n_in, const int *in) {
    if (!m) return NULL;
    qat_ctx *ctx = m->ctx;
    if (m->built) {
        qat_ctx_fail(ctx, QAT_ERR_STATE, "model: cannot add a %s layer after qat_model_build", qat_layer_kind_str(kind));
        return NULL;
    }
    char buf[QAT_NAME_LEN];
    if (!name) {
        int k = 1;
        for (int i = 0; i < m->n_layers; i++) k += m->layers[i].kind == kind;
        snprintf(buf, sizeof buf, "%s%d", qat__op(kind)->stem, k);
        name = buf;
    }
    char why[256];
    if (!qat_name_valid(name, why, sizeof why)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "model: bad layer name: %s", why);
        return NULL;
    }
    if (m->n_layers >= m->limits.max_layers) {
        qat_ctx_fail(ctx, QAT_ERR_UNSUPPORTED, "model: layer %s would make %d layers (the input included), more than the limit max_layers = %lld "
                     "(raise it: qat_model_set_limits; on the command line --max-layers)", name, m->n_layers + 1,
                     (long long)m->limits.max_layers);
        return NULL;
    }
    for (int j = 0; j < n_in; j++)
        if (in[j] < 0 || in[j] >= m->n_layers) {
            qat_ctx_fail(ctx, QAT_ERR_ARG, "model: %s layer %s: input %d is not a layer of the model (0..%d)",
                         qat_layer_kind_str(kind), name, in[j], m->n_layers - 1);
            return NULL;
        }
    if (name_taken(m, name)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "model: two layers named \"%s\"", name);
        return NULL;
    }
    if (m->n_layers == m->cap) { /* grows by copying: building happens once, not per step */
        int cap = m->cap ? 2 * m->cap : 16;
        qat__layer *l = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)cap * sizeof *l);
        if (!l) return NULL;
        if (m->n_layers) memcpy(l, m->layers, (size_t)m->n_layers * sizeof *l);
        m->layers = l, m->cap = cap;
    }
    int *ids = n_in ? qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)n_in * sizeof *ids) : NULL;
    if (n_in && !ids) return NULL;
    if (n_in) memcpy(ids, in, (size_t)n_in * sizeof *ids);
    qat__layer *l = &m->layers[m->n_layers++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->n_in = n_in, l->in = ids, l->fold_bn = -1;
    return l;
}

int qat__refuse(qat_model *m, const char *what) {
    qat__layer *l = &m->layers[--m->n_layers];
    qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: %s %s: %s", qat_layer_kind_str(l->kind), l->name, what);
    return -1;
}

int qat__add_layer(qat_model *m, qat_layer_kind kind, const char *name, int n, const int *in, const float *attrs) {
    const qat__op_kind *op = qat__op(kind);
    if (m && (!op || n < op->min_inputs || n > op->max_inputs || (n && !in))) {
        if (!op) qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: unknown layer kind %d", (int)kind);
        else if (op->min_inputs == op->max_inputs)
            qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: %s takes %d input%s, not %d", op->name, op->min_inputs,
                         op->min_inputs == 1 ? "" : "s", n);
        else qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: %s takes %d..%d inputs, not %d", op->name, op->min_inputs,
                          op->max_inputs, n);
        return -1;
    }
    qat__layer *l = qat__append(m, kind, name, n, in);
    if (!l) return -1;
    for (int a = 0; a < op->n_attrs; a++) {
        const qat__attr *at = &op->attrs[a];
        float v = attrs ? attrs[a] : at->def;
        if (!(v >= at->lo && v <= at->hi)) {
            char what[96];
            snprintf(what, sizeof what, "%s must be in [%g, %g]", at->key, at->lo, at->hi);
            return qat__refuse(m, what);
        }
        l->attr[a] = v;
    }
    return m->n_layers - 1;
}

qat_status qat_model_set_output(qat_model *m, int id) {
    if (!m) return QAT_ERR_ARG;
    if (m->built) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: set the output before qat_model_build");
    if (id < 0 || id >= m->n_layers)
        return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: output %d is not a layer of the model", id);
    m->output = id;
    return QAT_OK;
}

/* ---- sequential sugar ---------------------------------------------------------------- */

static qat_status seq(qat_model *m, int id) { return m ? (id >= 0 ? QAT_OK : qat_ctx_status(m->ctx)) : QAT_ERR_ARG; }
static int last(const qat_model *m) { return m ? m->n_layers - 1 : 0; }

qat_status qat_model_add_linear(qat_model *m, const char *name, int in, int out, bool bias) {
    return seq(m, qat_layer_linear(m, name, last(m), in, out, bias));
}
qat_status qat_model_add_conv2d(qat_model *m, const char *name, int in_ch, int out_ch, int kernel, int stride,
                                int pad, bool bias) {
    qat_conv2d_spec s = qat_conv2d_square(in_ch, out_ch, kernel, stride, pad, bias);
    return seq(m, qat_layer_conv2d(m, name, last(m), &s));
}
qat_status qat_model_add_batchnorm(qat_model *m, const char *name, int channels, float momentum, float eps) {
    return seq(m, qat_layer_batchnorm(m, name, last(m), channels, momentum, eps));
}
qat_status qat_model_add_relu(qat_model *m) { return seq(m, qat_layer_relu(m, NULL, last(m))); }
qat_status qat_model_add_relu6(qat_model *m) { return seq(m, qat_layer_relu6(m, NULL, last(m))); }
qat_status qat_model_add_maxpool2d(qat_model *m, int k, int s) {
    qat_pool2d_spec p = {k, k, s, s, 0, 0};
    return seq(m, qat_layer_maxpool2d(m, NULL, last(m), &p));
}
qat_status qat_model_add_avgpool2d(qat_model *m, int k, int s) {
    qat_pool2d_spec p = {k, k, s, s, 0, 0};
    return seq(m, qat_layer_avgpool2d(m, NULL, last(m), &p));
}
qat_status qat_model_add_flatten(qat_model *m) { return seq(m, qat_layer_flatten(m, NULL, last(m))); }
qat_status qat_model_add_dropout(qat_model *m, float p) { return seq(m, qat_layer_dropout(m, NULL, last(m), p)); }

/* ---- build: flat blocks, names, initialisation ------------------------------------------ */

struct qat__builder {
    qat_model *m;
    int64_t param_off, buffer_off;
    int np, nb;
    bool count_only;
};
typedef qat__builder builder;

static qat__named_tensor *named(builder *b, qat__named_tensor *list, int idx, const qat__layer *l, const char *suffix,
                                qat_tensor *t) {
    char *name = qat_ctx_alloc(b->m->ctx, QAT_MEM_PERSIST, 2 * QAT_NAME_LEN);
    if (!t || !name) return NULL;
    snprintf(name, 2 * QAT_NAME_LEN, "%s.%s", l->name, suffix);
    list[idx] = (qat__named_tensor){name, t};
    return &list[idx];
}

qat_tensor *qat__param(builder *b, const qat__layer *l, const char *suffix, int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    int64_t off = b->param_off;
    b->param_off += n;
    int idx = b->np++;
    if (b->count_only) return NULL;
    qat_model *m = b->m;
    qat_tensor *t = qat_tensor_wrap(m->ctx, QAT_MEM_PERSIST, m->params + off, m->grads + off, rank, shape);
    return named(b, m->param_list, idx, l, suffix, t) ? t : NULL;
}

float *qat__buffer(builder *b, const qat__layer *l, const char *suffix, int64_t n) {
    int64_t off = b->buffer_off;
    b->buffer_off += n;
    int idx = b->nb++;
    if (b->count_only) return NULL;
    qat_model *m = b->m;
    qat_tensor *t = qat_tensor_wrap(m->ctx, QAT_MEM_PERSIST, m->buffers + off, NULL, 1, &n);
    return named(b, m->buffer_list, idx, l, suffix, t) ? m->buffers + off : NULL;
}

static void lay_out(builder *b) {
    qat_model *m = b->m;
    for (int i = 0; i < m->n_layers; i++) {
        const qat__op_kind *op = qat__op(m->layers[i].kind);
        if (op->lay_out) op->lay_out(b, &m->layers[i]);
    }
}

void qat__uniform(qat_rng *rng, float *p, int64_t n, float bound) {
    for (int64_t i = 0; i < n; i++) p[i] = bound * (2.0f * qat_rng_uniform(rng) - 1.0f);
}

void qat__kaiming_init(qat__layer *l, qat_rng *rng) {
    float bound = 1.0f / sqrtf((float)(l->weight->numel / l->cout));
    qat__uniform(rng, l->weight->data, l->weight->numel, bound);
    if (l->bias) qat__uniform(rng, l->bias->data, l->bias->numel, bound);
}

qat_status qat_model_build(qat_model *m, uint64_t seed) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = m->ctx;
    if (m->built) return qat_ctx_fail(ctx, QAT_ERR_STATE, "model: already built");
    if (m->n_layers < 2) return qat_ctx_fail(ctx, QAT_ERR_STATE, "model: no layers");
    if (m->in_rank) { /* a declared input shape: check that every layer fits */
        int *ranks = qat_ctx_alloc(ctx, QAT_MEM_STEP, (size_t)m->n_layers * sizeof *ranks);
        int64_t(*shapes)[3] = qat_ctx_alloc(ctx, QAT_MEM_STEP, (size_t)m->n_layers * sizeof *shapes);
        if (!ranks || !shapes) return qat_ctx_status(ctx);
        qat_status st = qat_model_shapes(m, m->in_rank, m->in_shape, ranks, shapes);
        if (st != QAT_OK) return st;
        int64_t bytes = 4 * qat__shape_numel(m->in_rank, m->in_shape);
        for (int i = 1; i < m->n_layers && bytes <= m->limits.max_activation_bytes; i++)
            bytes += 4 * qat__shape_numel(ranks[i], shapes[i]);
        if ((st = qat__check_activation_bytes(m, bytes)) != QAT_OK) return st;
    }
    builder b = {.m = m, .count_only = true};
    lay_out(&b);
    if (b.param_off + b.buffer_off > m->limits.max_params) /* before anything is allocated */
        return params_fail(m, "", b.param_off + b.buffer_off);
    m->n_params = b.param_off, m->n_buffers = b.buffer_off;
    m->n_param_tensors = b.np, m->n_buffer_tensors = b.nb;
    m->params = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_params + 1) * sizeof(float));
    m->grads = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_params + 1) * sizeof(float));
    m->buffers = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_buffers + 1) * sizeof(float));
    m->param_list = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(b.np + 1) * sizeof(qat__named_tensor));
    m->buffer_list = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(b.nb + 1) * sizeof(qat__named_tensor));
    if (!m->params || !m->grads || !m->buffers || !m->param_list || !m->buffer_list) return qat_ctx_status(ctx);
    b = (builder){.m = m};
    lay_out(&b);
    if (qat_ctx_status(ctx) != QAT_OK) return qat_ctx_status(ctx);

    qat_rng_seed(&m->rng, seed);
    qat_rng init;
    qat_rng_seed(&init, seed ^ 0x5eedf00dull); /* init stream apart from the dropout stream */
    for (int i = 0; i < m->n_layers; i++) { /* layer by layer in id order, one stream */
        const qat__op_kind *op = qat__op(m->layers[i].kind);
        if (op->init) op->init(&m->layers[i], &init);
    }
    qat__count_consumers(m);
    m->built = true;
    return QAT_OK;
}

/* ---- looking inside -------------------------------------------------------------------- */

void qat_model_train(qat_model *m, bool training) {
    if (m) m->training = training;
}
bool qat_model_training(const qat_model *m) { return m && m->training; }

static void zero_range(void *u, int64_t i0, int64_t i1) { memset((float *)u + i0, 0, (size_t)(i1 - i0) * sizeof(float)); }

void qat_model_zero_grad(qat_model *m) {
    if (m && m->grads) qat__par_range(m->ctx, m->n_params, 4 * QAT__GRAIN, zero_range, m->grads);
    if (m && m->qgrads) memset(m->qgrads, 0, (size_t)m->n_qparams * sizeof(float));
}

qat_ctx *qat_model_ctx(const qat_model *m) { return m ? m->ctx : NULL; }
int qat_model_n_layers(const qat_model *m) { return m ? m->n_layers : 0; }
int qat_model_output(const qat_model *m) { return m ? qat__model_output(m) : -1; }

int qat_model_find_layer(const qat_model *m, const char *name) {
    for (int i = 0; m && name && i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, name)) return i;
    return -1;
}

const char *qat_model_layer_name(const qat_model *m, int id) {
    return m && id >= 0 && id < m->n_layers ? m->layers[id].name : NULL;
}

qat_layer_kind qat_model_layer_kind(const qat_model *m, int id) {
    return m && id >= 0 && id < m->n_layers ? m->layers[id].kind : QAT_LAYER_KIND_COUNT;
}

int qat_model_layer_inputs(const qat_model *m, int id, const int **ids) {
    if (!m || id < 0 || id >= m->n_layers) return 0;
    if (ids) *ids = m->layers[id].in;
    return m->layers[id].n_in;
}

qat_tensor *qat_model_find_param(qat_model *m, const char *name) {
    if (!m || !name || !m->built) return NULL;
    for (int i = 0; i < m->n_param_tensors; i++)
        if (!strcmp(m->param_list[i].name, name)) return m->param_list[i].tensor;
    for (int i = 0; i < m->n_buffer_tensors; i++)
        if (!strcmp(m->buffer_list[i].name, name)) return m->buffer_list[i].tensor;
    return NULL;
}

int64_t qat_model_n_params(const qat_model *m) { return m ? m->n_params : 0; }
float *qat_model_params(qat_model *m) { return m ? m->params : NULL; }
float *qat_model_grads(qat_model *m) { return m ? m->grads : NULL; }
int64_t qat_model_n_qparams(const qat_model *m) { return m ? m->n_qparams : 0; }
float *qat_model_qparams(qat_model *m) { return m ? m->qparams : NULL; }
float *qat_model_qgrads(qat_model *m) { return m ? m->qgrads : NULL; }

/* Appends n bytes at *off when they fit. */
static void put(void *buf, size_t cap, size_t *off, const void *p, size_t n) {
    if (buf && *off + n <= cap && n) memcpy((char *)buf + *off, p, n);
    *off += n;
}

static void put_qtype(void *buf, size_t cap, size_t *off, const qat_qtype *q) {
    put(buf, cap, off, q->scale, (size_t)q->nparams * sizeof *q->scale);
    put(buf, cap, off, q->zero_point, (size_t)q->nparams * sizeof *q->zero_point);
}

size_t qat_model_state_bytes(const qat_model *m, void *buf, size_t cap) {
    size_t off = 0;
    if (!m || !m->built) return 0;
    put(buf, cap, &off, m->params, (size_t)m->n_params * sizeof(float));
    put(buf, cap, &off, m->buffers, (size_t)m->n_buffers * sizeof(float));
    put(buf, cap, &off, m->qparams, (size_t)m->n_qparams * sizeof(float));
    put(buf, cap, &off, m->rng.s, sizeof m->rng.s);
    uint8_t flags[4] = {m->prepared, m->fake_quant_on, m->observers_frozen, m->bn_frozen};
    put(buf, cap, &off, flags, sizeof flags);
    if (m->norm) { /* the processes of a data-parallel job must normalize alike too */
        const qat_normalization *n = m->norm;
        float d[2] = {(float)n->channels, n->divisor};
        put(buf, cap, &off, d, sizeof d);
        put(buf, cap, &off, n->mean, (size_t)n->channels * sizeof *n->mean);
        put(buf, cap, &off, n->std, (size_t)n->channels * sizeof *n->std);
        put(buf, cap, &off, &n->raw_uint8, sizeof n->raw_uint8);
    }
    for (int i = 0; i < m->n_layers; i++) {
        const qat__layer *l = &m->layers[i];
        if (l->aq) { /* the observer's numbers, field by field (the struct has padding) */
            const qat_observer *o = &l->aq->obs;
            float f[5] = {o->min, o->max, o->state, o->acc_min, o->acc_max};
            put(buf, cap, &off, f, sizeof f);
            put(buf, cap, &off, o->win_min, sizeof o->win_min);
            put(buf, cap, &off, o->win_max, sizeof o->win_max);
            put(buf, cap, &off, &o->updates, sizeof o->updates);
            put_qtype(buf, cap, &off, &l->aq->q);
        }
        /* a weight quantizer's scales are not state: every forward derives them from the parameters, the
         * buffers (a folded BatchNorm) and LSQ's scales, all above; until the first, a model just loaded
         * would differ from the one saved */
    }
    return off;
}
