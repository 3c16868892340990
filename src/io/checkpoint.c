/* Training checkpoints in HDF5 (layout: docs/checkpoint-format.md). */
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "architecture.h"
#include "h5util.h"
#include "layers/model.h"
#include "qat/io.h"

#define OBS_FLOATS (5 + 2 * QAT_OBS_MAX_WINDOW)

/* ---- writing -------------------------------------------------------------------- */


static void put_rng(qat__h5w *w, hid_t loc, const char *name, const qat_rng *r) {
    hsize_t two = 2;
    if (w->ok && H5LTmake_dataset(loc, name, 1, &two, H5T_NATIVE_ULLONG, r->s) < 0) qat__h5w_fail(w, name);
}

static void put_optim(qat__h5w *w, const char *name, const qat_optim *o) {
    if (!o || !o->n) return;
    hid_t g = qat__h5w_group(w, w->file, name);
    if (g < 0) return;
    qat__h5w_str(w, g, "kind", qat_optim_kind_str(o->cfg.kind));
    qat__h5w_i64(w, g, "steps", o->steps);
    qat__h5w_i64(w, g, "n", o->n);
    if (o->m) qat__h5w_floats(w, g, "m", 1, &o->n, o->m);
    if (o->v) qat__h5w_floats(w, g, "v", 1, &o->n, o->v);
    H5Gclose(g);
}

/* An activation quantizer: its observer's numbers and its current qparams. */
static void put_act(qat__h5w *w, hid_t g, const char *name, const qat__act_quant *a) {
    float v[OBS_FLOATS];
    const qat_observer *o = &a->obs;
    v[0] = o->min, v[1] = o->max, v[2] = o->state, v[3] = o->acc_min, v[4] = o->acc_max;
    memcpy(v + 5, o->win_min, sizeof o->win_min);
    memcpy(v + 5 + QAT_OBS_MAX_WINDOW, o->win_max, sizeof o->win_max);
    int64_t n = OBS_FLOATS;
    qat__h5w_floats(w, g, name, 1, &n, v);
    if (!w->ok) return;
    long long updates = o->updates, zp = a->q.zero_point[0];
    float scale = a->q.scale[0];
    if (H5LTset_attribute_long_long(g, name, "updates", &updates, 1) < 0 ||
        H5LTset_attribute_long_long(g, name, "zero_point", &zp, 1) < 0 ||
        H5LTset_attribute_float(g, name, "scale", &scale, 1) < 0)
        qat__h5w_fail(w, name);
}

static void write_all(qat__h5w *w, qat_model *m, const qat_optim *opt, const qat_optim *qopt,
                      const qat_train_state *ts) {
    qat__h5w_str(w, w->file, "format", QAT_CHECKPOINT_FORMAT);
    qat__h5w_i64(w, w->file, "version", QAT_CHECKPOINT_VERSION);
    qat__h5w_str(w, w->file, "producer", "qat " QAT_VERSION_STRING);
    qat__arch_write(w, m);
    if (ts && ts->config) qat__h5w_str(w, w->file, "config", ts->config);
    hid_t g = qat__h5w_group(w, w->file, "params");
    for (int i = 0; g >= 0 && i < m->n_param_tensors; i++) {
        const qat_tensor *t = m->param_list[i].tensor;
        qat__h5w_floats(w, g, m->param_list[i].name, t->rank, t->shape, t->data);
    }
    if (g >= 0) H5Gclose(g);
    g = qat__h5w_group(w, w->file, "buffers");
    for (int i = 0; g >= 0 && i < m->n_buffer_tensors; i++) {
        const qat_tensor *t = m->buffer_list[i].tensor;
        qat__h5w_floats(w, g, m->buffer_list[i].name, t->rank, t->shape, t->data);
    }
    if (g >= 0) H5Gclose(g);
    if (m->n_qparams) qat__h5w_floats(w, w->file, "lsq_scales", 1, &m->n_qparams, m->qparams);
    put_optim(w, "optim", opt);
    put_optim(w, "lsq_optim", qopt);
    g = qat__h5w_group(w, w->file, "state");
    if (g >= 0) {
        qat__h5w_i64(w, g, "step", ts ? ts->step : 0);
        qat__h5w_i64(w, g, "epoch", ts ? ts->epoch : 0);
        qat__h5w_i64(w, g, "prepared", m->prepared);
        qat__h5w_i64(w, g, "training", m->training);
        qat__h5w_i64(w, g, "fake_quant_on", m->fake_quant_on);
        qat__h5w_i64(w, g, "observers_frozen", m->observers_frozen);
        qat__h5w_i64(w, g, "bn_frozen", m->bn_frozen);
        put_rng(w, g, "model_rng", &m->rng);
        if (ts) put_rng(w, g, "shuffle_rng", &ts->shuffle_rng);
        if (ts && ts->best_epoch > 0) { /* the validation's best so far, for a resume's early stopping */
            qat__h5w_i64(w, g, "best_epoch", ts->best_epoch);
            qat__h5w_f32(w, g, "best_value", ts->best_value);
            qat__h5w_i64(w, g, "since_best", ts->since_best);
        }
        if (ts && ts->epoch_loss_steps > 0 && isfinite(ts->epoch_loss_sum)) { /* a resume inside the epoch goes on from it */
            qat__h5w_f64(w, g, "epoch_loss_sum", ts->epoch_loss_sum);
            qat__h5w_i64(w, g, "epoch_loss_steps", ts->epoch_loss_steps);
        }
        if (ts && ts->order && ts->n_order > 0 && w->ok) {
            hsize_t n = (hsize_t)ts->n_order;
            if (H5LTmake_dataset_int(g, "order", 1, &n, ts->order) < 0) qat__h5w_fail(w, "order");
        }
        H5Gclose(g);
    }
    if (m->prepared) {
        g = qat__h5w_group(w, w->file, "observers");
        for (int i = 0; g >= 0 && i < m->n_layers; i++) /* layer 0 is the input, named "input" */
            if (m->layers[i].aq) put_act(w, g, m->layers[i].name, m->layers[i].aq);
        if (g >= 0) H5Gclose(g);
    }
}

typedef struct {
    qat_model *m;
    const qat_optim *opt, *qopt;
    const qat_train_state *ts;
} save_args;

static void write_cb(qat__h5w *w, void *user) {
    save_args *a = user;
    write_all(w, a->m, a->opt, a->qopt, a->ts);
}

qat_status qat_checkpoint_save(qat_model *m, const qat_optim *opt, const qat_optim *qopt,
                               const qat_train_state *ts, const char *path) {
    if (!m) return QAT_ERR_ARG;
    if (!path || !m->built) return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "checkpoint: need a built model and a path");
    save_args a = {m, opt, qopt, ts};
    return qat__h5_write_atomic(m->ctx, path, write_cb, &a);
}

/* ---- reading --------------------------------------------------------------------
 * Every number is checked before the model, optimizer or loop uses it:
 * shapes exactly as the model has them, parameters and moments finite,
 * flags 0 or 1, counters >= 0, the sample order a permutation, observer
 * scales positive normal floats. A file that says otherwise is refused
 * with a message naming what is wrong. */

#define MAX_COUNT (1LL << 62) /* steps, epochs, observer updates: any sane run */

static bool all_finite(qat__h5r *r, const char *what, const float *v, int64_t n, bool nonnegative) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonnegative && v[i] < 0))
            return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s[%lld] is %g (want a finite%s number)", what, (long long)i,
                                 (double)v[i], nonnegative ? ", non-negative" : "");
    return true;
}

static void get_rng(qat__h5r *r, hid_t loc, const char *name, qat_rng *out) {
    uint64_t s[2];
    if (!qat__h5r_u64s(r, loc, name, 2, s)) return;
    if (s[0] == 0 && s[1] == 0) {
        qat__h5r_fail(r, QAT_ERR_FORMAT, "%s is all zero (not a valid generator state)", name);
        return;
    }
    out->s[0] = s[0], out->s[1] = s[1];
}

static void get_optim(qat__h5r *r, const char *name, qat_optim *o) {
    if (!o || !o->n || !r->ok) return;
    if (H5Lexists(r->file, name, H5P_DEFAULT) <= 0) {
        qat__h5r_fail(r, QAT_ERR_FORMAT, "no %s state in the checkpoint", name);
        return;
    }
    hid_t g = qat__h5r_group(r, r->file, name);
    if (g < 0) return;
    char kind[16] = "";
    if (qat__h5r_str(r, g, "kind", kind, sizeof kind) && strcmp(kind, qat_optim_kind_str(o->cfg.kind)))
        qat__h5r_fail(r, QAT_ERR_STATE, "optimizer differs from the checkpoint's (%s)", kind);
    if (r->ok && qat__h5r_i64(r, g, "n", 0, MAX_COUNT) != o->n) qat__h5r_fail(r, QAT_ERR_SHAPE, "%s has another size", name);
    int64_t steps = qat__h5r_i64(r, g, "steps", 0, MAX_COUNT);
    char what[64];
    snprintf(what, sizeof what, "%s/m", name);
    if (o->m && qat__h5r_floats(r, g, "m", 1, &o->n, o->m)) all_finite(r, what, o->m, o->n, false);
    snprintf(what, sizeof what, "%s/v", name);
    if (o->v && qat__h5r_floats(r, g, "v", 1, &o->n, o->v)) all_finite(r, what, o->v, o->n, true);
    if (r->ok) o->steps = steps;
    H5Gclose(g);
}

/* An activation quantizer's observer and current parameters, checked
 * against its type's storage range before they replace the model's. */
static void get_act(qat__h5r *r, hid_t g, const char *name, qat__act_quant *a) {
    float v[OBS_FLOATS];
    int64_t n = OBS_FLOATS;
    if (!qat__h5r_floats(r, g, name, 1, &n, v)) return;
    char what[96];
    snprintf(what, sizeof what, "observer %s", name);
    if (!all_finite(r, what, v, n, false)) return;
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0) {
        qat__h5r_fail(r, QAT_ERR_FORMAT, "cannot open observer %s", name);
        return;
    }
    long long updates = qat__h5r_i64(r, d, "updates", 0, MAX_COUNT);
    long long zp = qat__h5r_i64(r, d, "zero_point", a->q.qmin, a->q.qmax);
    float scale = qat__h5r_f32(r, d, "scale");
    H5Dclose(d);
    if (r->ok && !(isnormal(scale) && scale > 0))
        qat__h5r_fail(r, QAT_ERR_FORMAT, "observer %s: scale %g is not a positive normal number", name, (double)scale);
    if (!r->ok) return;
    qat_observer *o = &a->obs;
    o->min = v[0], o->max = v[1], o->state = v[2], o->acc_min = v[3], o->acc_max = v[4];
    memcpy(o->win_min, v + 5, sizeof o->win_min);
    memcpy(o->win_max, v + 5 + QAT_OBS_MAX_WINDOW, sizeof o->win_max);
    o->updates = updates;
    a->q.scale[0] = scale;
    a->q.zero_point[0] = (int32_t)zp;
}

/* Opens r->path and checks that it is a training checkpoint this build reads. */
static bool open_checked(qat__h5r *r) {
    return qat__h5r_open(r, QAT_CHECKPOINT_FORMAT, "qat training checkpoint", QAT_CHECKPOINT_VERSION, NULL);
}

/* Each named tensor of `list` from group `name`, which must hold exactly
 * those (no more, no fewer). */
static void get_tensors(qat__h5r *r, const char *name, const qat__named_tensor *list, int n, bool nonnegative_var) {
    hid_t g = qat__h5r_group(r, r->file, name);
    if (g < 0) return;
    H5G_info_t info;
    if (H5Gget_info(g, &info) < 0 || info.nlinks != (hsize_t)n)
        qat__h5r_fail(r, QAT_ERR_SHAPE, "the checkpoint has another number of %s tensors (a different model?)", name);
    for (int i = 0; r->ok && i < n; i++) {
        qat_tensor *t = list[i].tensor;
        if (!qat__h5r_floats(r, g, list[i].name, t->rank, t->shape, t->data)) break;
        static const char suffix[] = "running_var";
        size_t len = strlen(list[i].name), k = sizeof suffix - 1;
        bool var = nonnegative_var && len >= k && !strcmp(list[i].name + len - k, suffix);
        all_finite(r, list[i].name, t->data, t->numel, var);
    }
    H5Gclose(g);
}

/* The saved sample order: a permutation of 0..n-1 that fits ts->order. */
static void get_order(qat__h5r *r, hid_t g, qat_train_state *ts) {
    int64_t cap = ts->n_order, n = 0;
    ts->n_order = 0;
    if (!r->ok || !qat__h5r_has_dataset(g, "order")) return;
    if (!ts->order) {
        qat__h5r_fail(r, QAT_ERR_SHAPE, "the checkpoint has a sample order and the caller gave no room for it");
        return;
    }
    int rank = 0;
    int64_t dims[QAT_MAX_RANK] = {0};
    if (qat__h5r_shape(r, g, "order", QAT_MAX_RANK, &rank, dims) && rank == 1 && dims[0] > cap) {
        qat__h5r_fail(r, QAT_ERR_SHAPE, "was made with %lld training samples, more than the %lld ts->order has room "
                      "for", (long long)dims[0], (long long)cap);
        ts->n_order = dims[0]; /* the length it needs: the caller can say what differs */
        return;
    }
    if (!r->ok || !qat__h5r_i32s_upto(r, g, "order", cap, ts->order, &n)) return;
    uint8_t *seen = calloc((size_t)n + 1, 1);
    if (!seen) {
        qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory to check the sample order");
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t v = ts->order[i];
        if (v < 0 || v >= n || seen[v]) {
            qat__h5r_fail(r, QAT_ERR_FORMAT, "state/order is not a permutation of 0..%lld (element %lld is %d)",
                          (long long)n - 1, (long long)i, v);
            break;
        }
        seen[v] = 1;
    }
    free(seen);
    if (r->ok) ts->n_order = n;
}

static bool flag(qat__h5r *r, hid_t g, const char *name) { return qat__h5r_i64(r, g, name, 0, 1) != 0; }

static void read_all(qat__h5r *r, qat_model *m, qat_optim *opt, qat_optim *qopt, qat_train_state *ts) {
    get_tensors(r, "params", m->param_list, m->n_param_tensors, false);
    if (m->n_buffer_tensors) get_tensors(r, "buffers", m->buffer_list, m->n_buffer_tensors, true);
    if (m->n_qparams && qat__h5r_floats(r, r->file, "lsq_scales", 1, &m->n_qparams, m->qparams))
        all_finite(r, "lsq_scales", m->qparams, m->n_qparams, false);
    get_optim(r, "optim", opt);
    get_optim(r, "lsq_optim", qopt);
    hid_t g = qat__h5r_group(r, r->file, "state");
    if (g < 0) return;
    if (r->ok && flag(r, g, "prepared") != m->prepared)
        qat__h5r_fail(r, QAT_ERR_STATE, "%s", m->prepared ? "the checkpoint is of a float model, this model is prepared for QAT"
                                                  : "the checkpoint is of a QAT model: call qat_prepare first");
    bool training = flag(r, g, "training"), fq = flag(r, g, "fake_quant_on");
    bool obs_frozen = flag(r, g, "observers_frozen"), bn_frozen = flag(r, g, "bn_frozen");
    qat_rng rng = m->rng;
    get_rng(r, g, "model_rng", &rng);
    if (ts) {
        qat_train_state got = *ts;
        got.step = qat__h5r_i64(r, g, "step", 0, MAX_COUNT);
        got.epoch = qat__h5r_i64(r, g, "epoch", 0, MAX_COUNT);
        get_rng(r, g, "shuffle_rng", &got.shuffle_rng);
        got.best_epoch = 0, got.best_value = 0.0f, got.since_best = 0;
        if (qat__h5r_has_attr(g, "best_epoch")) {
            got.best_epoch = qat__h5r_i64(r, g, "best_epoch", 1, MAX_COUNT);
            got.best_value = qat__h5r_f32(r, g, "best_value");
            got.since_best = qat__h5r_i64(r, g, "since_best", 0, MAX_COUNT);
            if (r->ok && !isfinite(got.best_value)) qat__h5r_fail(r, QAT_ERR_FORMAT, "state/best_value is not finite");
        }
        got.epoch_loss_sum = 0, got.epoch_loss_steps = 0;
        if (qat__h5r_has_attr(g, "epoch_loss_steps")) {
            got.epoch_loss_steps = qat__h5r_i64(r, g, "epoch_loss_steps", 1, MAX_COUNT);
            got.epoch_loss_sum = qat__h5r_f64(r, g, "epoch_loss_sum");
            if (r->ok && !isfinite(got.epoch_loss_sum))
                qat__h5r_fail(r, QAT_ERR_FORMAT, "state/epoch_loss_sum is not finite");
            if (r->ok && got.epoch_loss_steps > got.step)
                qat__h5r_fail(r, QAT_ERR_FORMAT, "state/epoch_loss_steps (%lld) exceeds the steps taken (%lld)",
                              (long long)got.epoch_loss_steps, (long long)got.step);
        }
        get_order(r, g, &got);
        if (r->ok) *ts = got;
        else if (got.n_order > ts->n_order) ts->n_order = got.n_order; /* the length a longer saved order needs */
    }
    H5Gclose(g);
    if (m->prepared && r->ok) {
        g = qat__h5r_group(r, r->file, "observers");
        if (g < 0) return;
        for (int i = 0; r->ok && i < m->n_layers; i++) /* layer 0 is the input, named "input" */
            if (m->layers[i].aq) get_act(r, g, m->layers[i].name, m->layers[i].aq);
        H5Gclose(g);
    }
    /* the checkpoint's normalization replaces the model's (none when it has none) */
    qat_normalization *norm = malloc(sizeof *norm);
    if (!norm) {
        qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory for the normalization");
        return;
    }
    qat__arch_read_norm(r, m, norm);
    if (r->ok && qat_model_set_normalization(m, norm) != QAT_OK) qat__h5r_adopt(r, "");
    free(norm);
    if (!r->ok) return;
    m->training = training, m->fake_quant_on = fq, m->observers_frozen = obs_frozen, m->bn_frozen = bn_frozen;
    m->rng = rng;
}

qat_status qat_checkpoint_load(qat_model *m, qat_optim *opt, qat_optim *qopt, qat_train_state *ts,
                               const char *path) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = m->ctx;
    if (!path || !m->built) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: need a built model and a path");
    qat__h5r r = {ctx, path, -1, true};
    H5E_BEGIN_TRY {
        if (open_checked(&r)) read_all(&r, m, opt, qopt, ts);
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    return r.ok ? QAT_OK : qat_ctx_status(ctx);
}

/* Parameters, buffers and normalization only: what a warm start takes. */
static void read_weights(qat__h5r *r, qat_model *m) {
    get_tensors(r, "params", m->param_list, m->n_param_tensors, false);
    if (m->n_buffer_tensors) get_tensors(r, "buffers", m->buffer_list, m->n_buffer_tensors, true);
    qat_normalization *norm = r->ok ? malloc(sizeof *norm) : NULL;
    if (r->ok && !norm) qat__h5r_fail(r, QAT_ERR_NOMEM, "no memory for the normalization");
    if (!norm) return;
    qat__arch_read_norm(r, m, norm);
    if (r->ok && qat_model_set_normalization(m, norm) != QAT_OK) qat__h5r_adopt(r, "");
    free(norm);
}

qat_status qat_checkpoint_load_weights(qat_model *m, const char *path) {
    if (!m) return QAT_ERR_ARG;
    qat_ctx *ctx = m->ctx;
    if (!path || !m->built) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: need a built model and a path");
    /* all or nothing: a file that fails part way leaves the parameters and
     * buffers as they were (each is read straight into the model) */
    size_t n = (size_t)m->n_params * sizeof(float), nb = (size_t)m->n_buffers * sizeof(float);
    float *keep = malloc(n + nb + 1);
    if (!keep) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "checkpoint: out of memory");
    memcpy(keep, m->params, n);
    memcpy((char *)keep + n, m->buffers, nb);
    qat__h5r r = {ctx, path, -1, true};
    H5E_BEGIN_TRY {
        if (open_checked(&r)) read_weights(&r, m);
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    if (!r.ok) {
        memcpy(m->params, keep, n);
        memcpy(m->buffers, (char *)keep + n, nb);
    }
    free(keep);
    return r.ok ? QAT_OK : qat_ctx_status(ctx);
}

qat_status qat_checkpoint_info(qat_ctx *ctx, const char *path, int64_t *step, int64_t *epoch, bool *prepared) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !step || !epoch || !prepared) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: NULL argument");
    qat__h5r r = {ctx, path, -1, true};
    H5E_BEGIN_TRY {
        hid_t g = open_checked(&r) ? qat__h5r_group(&r, r.file, "state") : -1;
        if (g >= 0) {
            *step = qat__h5r_i64(&r, g, "step", 0, MAX_COUNT);
            *epoch = qat__h5r_i64(&r, g, "epoch", 0, MAX_COUNT);
            *prepared = flag(&r, g, "prepared");
            H5Gclose(g);
        }
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    return r.ok ? QAT_OK : qat_ctx_status(ctx);
}

qat_status qat_checkpoint_config(qat_ctx *ctx, const char *path, char *buf, size_t len) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !buf || !len) return qat_ctx_fail(ctx, QAT_ERR_ARG, "checkpoint: NULL argument");
    buf[0] = '\0';
    qat__h5r r = {ctx, path, -1, true};
    H5E_BEGIN_TRY {
        if (open_checked(&r) && qat__h5r_has_attr(r.file, "config")) qat__h5r_str(&r, r.file, "config", buf, len);
        if (r.file >= 0) H5Fclose(r.file);
    }
    H5E_END_TRY;
    return r.ok ? QAT_OK : qat_ctx_status(ctx);
}
