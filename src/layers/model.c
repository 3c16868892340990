/* The sequential model: adding layers, naming, the flat parameter blocks
 * and PyTorch's default initialisation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qat/layers.h"

static const char *const kind_names[QAT_LAYER_KIND_COUNT] = {
    "linear", "conv2d", "batchnorm", "relu", "relu6", "maxpool2d", "avgpool2d", "flatten", "dropout",
};
/* Default layer-name stems, PyTorch-example style. */
static const char *const kind_stems[QAT_LAYER_KIND_COUNT] = {
    "fc", "conv", "bn", "relu", "relu6_", "pool", "avgpool", "flatten", "dropout",
};

const char *qat_layer_kind_str(qat_layer_kind kind) {
    return (unsigned)kind < QAT_LAYER_KIND_COUNT ? kind_names[kind] : "unknown";
}

qat_model *qat_model_new(qat_ctx *ctx) {
    qat_model *m = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, sizeof *m);
    if (!m) return NULL;
    m->ctx = ctx;
    m->training = true;
    return m;
}

qat_layer *qat_model_find_layer(qat_model *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, name)) return &m->layers[i];
    return NULL;
}

/* Appends a layer of `kind`, named `name` or "<stem><k>". */
static qat_layer *append(qat_model *m, qat_layer_kind kind, const char *name) {
    if (!m) return NULL;
    qat_ctx *ctx = m->ctx;
    if (m->built) {
        qat_ctx_fail(ctx, QAT_ERR_STATE, "model: cannot add a %s layer after qat_model_build",
                     kind_names[kind]);
        return NULL;
    }
    if (m->n_layers == QAT_MAX_LAYERS) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "model: more than %d layers", QAT_MAX_LAYERS);
        return NULL;
    }
    char buf[QAT_NAME_LEN];
    if (!name) {
        int k = 1;
        for (int i = 0; i < m->n_layers; i++) k += m->layers[i].kind == kind;
        snprintf(buf, sizeof buf, "%s%d", kind_stems[kind], k);
        name = buf;
    }
    if (!*name || strlen(name) >= QAT_NAME_LEN || strchr(name, '.') || strchr(name, '/')) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "model: bad layer name \"%s\" (1-%d characters, no '.' or '/')",
                     name, QAT_NAME_LEN - 1);
        return NULL;
    }
    if (qat_model_find_layer(m, name)) {
        qat_ctx_fail(ctx, QAT_ERR_ARG, "model: two layers named \"%s\"", name);
        return NULL;
    }
    qat_layer *l = &m->layers[m->n_layers++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    strcpy(l->name, name);
    return l;
}

#define ADD_OR_FAIL(l, m, kind, name) \
    qat_layer *l = append(m, kind, name); \
    if (!l) return m ? qat_ctx_status(m->ctx) : QAT_ERR_ARG

static qat_status bad(qat_model *m, const char *what) {
    m->n_layers--;
    return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model: %s", what);
}

qat_status qat_model_add_linear(qat_model *m, const char *name, int in, int out, bool bias) {
    ADD_OR_FAIL(l, m, QAT_LAYER_LINEAR, name);
    if (in < 1 || out < 1) return bad(m, "linear sizes must be positive");
    l->in = in, l->out = out, l->has_bias = bias;
    return QAT_OK;
}

qat_status qat_model_add_conv2d(qat_model *m, const char *name, int in_ch, int out_ch, int kernel,
                                int stride, int pad, bool bias) {
    ADD_OR_FAIL(l, m, QAT_LAYER_CONV2D, name);
    if (in_ch < 1 || out_ch < 1 || kernel < 1 || stride < 1 || pad < 0)
        return bad(m, "conv2d channels, kernel and stride must be positive, padding >= 0");
    l->in = in_ch, l->out = out_ch, l->kernel = kernel, l->stride = stride, l->pad = pad;
    l->has_bias = bias;
    return QAT_OK;
}

qat_status qat_model_add_batchnorm(qat_model *m, const char *name, int channels, float momentum,
                                   float eps) {
    ADD_OR_FAIL(l, m, QAT_LAYER_BATCHNORM, name);
    if (channels < 1 || !(momentum >= 0 && momentum <= 1) || !(eps > 0 && eps < INFINITY))
        return bad(m, "batchnorm needs channels >= 1, momentum in [0, 1], eps > 0");
    l->in = l->out = channels, l->momentum = momentum, l->eps = eps, l->has_bias = true;
    return QAT_OK;
}

static qat_status add_pool(qat_model *m, qat_layer_kind kind, int kernel, int stride) {
    ADD_OR_FAIL(l, m, kind, NULL);
    if (kernel < 1 || stride < 1) return bad(m, "pool window and stride must be positive");
    l->kernel = kernel, l->stride = stride;
    return QAT_OK;
}

qat_status qat_model_add_maxpool2d(qat_model *m, int k, int s) { return add_pool(m, QAT_LAYER_MAXPOOL2D, k, s); }
qat_status qat_model_add_avgpool2d(qat_model *m, int k, int s) { return add_pool(m, QAT_LAYER_AVGPOOL2D, k, s); }

static qat_status add_plain(qat_model *m, qat_layer_kind kind) {
    ADD_OR_FAIL(l, m, kind, NULL);
    (void)l;
    return QAT_OK;
}
qat_status qat_model_add_relu(qat_model *m) { return add_plain(m, QAT_LAYER_RELU); }
qat_status qat_model_add_relu6(qat_model *m) { return add_plain(m, QAT_LAYER_RELU6); }
qat_status qat_model_add_flatten(qat_model *m) { return add_plain(m, QAT_LAYER_FLATTEN); }

qat_status qat_model_add_dropout(qat_model *m, float p) {
    ADD_OR_FAIL(l, m, QAT_LAYER_DROPOUT, NULL);
    if (!(p >= 0 && p < 1)) return bad(m, "dropout p must be in [0, 1)");
    l->p = p;
    return QAT_OK;
}

/* ---- build: flat blocks, names, initialisation -------------------------------------- */

typedef struct {
    qat_model *m;
    int64_t param_off, buffer_off;
    int np, nb;
    bool count_only;
} builder;

static qat_tensor *param(builder *b, qat_layer *l, const char *suffix, int rank,
                         const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    int64_t off = b->param_off;
    b->param_off += n;
    int idx = b->np++;
    if (b->count_only) return NULL;
    qat_model *m = b->m;
    qat_tensor *t = qat_tensor_wrap(m->ctx, QAT_MEM_PERSIST, m->params + off, m->grads + off, rank,
                                    shape);
    char *name = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, 2 * QAT_NAME_LEN);
    if (!t || !name) return NULL;
    snprintf(name, 2 * QAT_NAME_LEN, "%s.%s", l->name, suffix);
    m->param_list[idx] = (qat_named_tensor){name, t};
    return t;
}

static float *buffer(builder *b, qat_layer *l, const char *suffix, int64_t n) {
    int64_t off = b->buffer_off;
    b->buffer_off += n;
    int idx = b->nb++;
    if (b->count_only) return NULL;
    qat_model *m = b->m;
    qat_tensor *t = qat_tensor_wrap(m->ctx, QAT_MEM_PERSIST, m->buffers + off, NULL, 1, &n);
    char *name = qat_ctx_alloc(m->ctx, QAT_MEM_PERSIST, 2 * QAT_NAME_LEN);
    if (!t || !name) return NULL;
    snprintf(name, 2 * QAT_NAME_LEN, "%s.%s", l->name, suffix);
    m->buffer_list[idx] = (qat_named_tensor){name, t};
    return m->buffers + off;
}

static void lay_out(builder *b) {
    qat_model *m = b->m;
    for (int i = 0; i < m->n_layers; i++) {
        qat_layer *l = &m->layers[i];
        int64_t o = l->out, in = l->in, k = l->kernel;
        switch (l->kind) {
        case QAT_LAYER_LINEAR: {
            int64_t sw[2] = {o, in};
            l->weight = param(b, l, "weight", 2, sw);
            l->bias = l->has_bias ? param(b, l, "bias", 1, &o) : NULL;
            break;
        }
        case QAT_LAYER_CONV2D: {
            int64_t sw[4] = {o, in, k, k};
            l->weight = param(b, l, "weight", 4, sw);
            l->bias = l->has_bias ? param(b, l, "bias", 1, &o) : NULL;
            break;
        }
        case QAT_LAYER_BATCHNORM:
            l->gamma = param(b, l, "weight", 1, &o);
            l->beta = param(b, l, "bias", 1, &o);
            l->running_mean = buffer(b, l, "running_mean", o);
            l->running_var = buffer(b, l, "running_var", o);
            break;
        default:
            break;
        }
    }
}

static void uniform(qat_rng *rng, float *p, int64_t n, float bound) {
    for (int64_t i = 0; i < n; i++) p[i] = bound * (2.0f * qat_rng_uniform(rng) - 1.0f);
}

qat_status qat_model_build(qat_model *m, uint64_t seed) {
    if (!m) return QAT_ERR_ARG;
    if (m->built) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: already built");
    if (m->n_layers == 0) return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model: no layers");
    builder b = {.m = m, .count_only = true};
    lay_out(&b);
    m->n_params = b.param_off, m->n_buffers = b.buffer_off;
    m->n_param_tensors = b.np, m->n_buffer_tensors = b.nb;
    qat_ctx *ctx = m->ctx;
    m->params = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_params + 1) * sizeof(float));
    m->grads = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_params + 1) * sizeof(float));
    m->buffers = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(m->n_buffers + 1) * sizeof(float));
    m->param_list = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(b.np + 1) * sizeof(qat_named_tensor));
    m->buffer_list = qat_ctx_alloc(ctx, QAT_MEM_PERSIST, (size_t)(b.nb + 1) * sizeof(qat_named_tensor));
    if (!m->params || !m->grads || !m->buffers || !m->param_list || !m->buffer_list)
        return qat_ctx_status(ctx);
    b = (builder){.m = m};
    lay_out(&b);
    if (qat_ctx_status(ctx) != QAT_OK) return qat_ctx_status(ctx);

    qat_rng_seed(&m->rng, seed);
    qat_rng init;
    qat_rng_seed(&init, seed ^ 0x5eedf00dull); /* init stream apart from the dropout stream */
    for (int i = 0; i < m->n_layers; i++) {
        qat_layer *l = &m->layers[i];
        if (l->kind == QAT_LAYER_LINEAR || l->kind == QAT_LAYER_CONV2D) {
            float bound = 1.0f / sqrtf((float)(l->weight->numel / l->out)); /* 1/sqrt(fan_in) */
            uniform(&init, l->weight->data, l->weight->numel, bound);
            if (l->bias) uniform(&init, l->bias->data, l->bias->numel, bound);
        } else if (l->kind == QAT_LAYER_BATCHNORM) {
            for (int c = 0; c < l->out; c++) {
                l->gamma->data[c] = 1.0f, l->beta->data[c] = 0.0f;
                l->running_mean[c] = 0.0f, l->running_var[c] = 1.0f;
            }
        }
    }
    m->built = true;
    return QAT_OK;
}

void qat_model_train(qat_model *m, bool training) {
    if (m) m->training = training;
}

void qat_model_zero_grad(qat_model *m) {
    if (m && m->grads) memset(m->grads, 0, (size_t)m->n_params * sizeof(float));
    if (m && m->qgrads) memset(m->qgrads, 0, (size_t)m->n_qparams * sizeof(float));
}

qat_tensor *qat_model_find_param(qat_model *m, const char *name) {
    if (!m || !name || !m->built) return NULL;
    for (int i = 0; i < m->n_param_tensors; i++)
        if (!strcmp(m->param_list[i].name, name)) return m->param_list[i].tensor;
    for (int i = 0; i < m->n_buffer_tensors; i++)
        if (!strcmp(m->buffer_list[i].name, name)) return m->buffer_list[i].tensor;
    return NULL;
}
