/* The input normalization's HDF5 group (h5norm.h). */
#include "h5norm.h"

#include <limits.h>
#include <string.h>

void qat__h5w_norm(qat__h5w *w, hid_t loc, const qat_normalization *n) {
    hid_t g = qat__h5w_group(w, loc, "normalization");
    if (g < 0) return;
    int64_t c = n->channels;
    qat__h5w_i64(w, g, "channels", n->channels);
    qat__h5w_f32(w, g, "divisor", n->divisor);
    qat__h5w_i64(w, g, "raw_uint8", n->raw_uint8);
    qat__h5w_floats(w, g, "mean", 1, &c, n->mean);
    qat__h5w_floats(w, g, "std", 1, &c, n->std);
    H5Gclose(g);
}

/* Dataset `name` of g: exactly [c] floats. */
static bool get_array(qat__h5r *r, hid_t g, const char *where, const char *name, int64_t c, float *out) {
    int rank = 0;
    int64_t len = 0;
    if (!qat__h5r_shape(r, g, name, 1, &rank, &len)) return false;
    if (rank != 1 || len != c)
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s/%s has %lld value(s), channels says %lld", where, name,
                             rank == 1 ? (long long)len : 1LL, (long long)c);
    return qat__h5r_floats(r, g, name, 1, &c, out);
}

bool qat__h5r_norm(qat__h5r *r, hid_t loc, const char *where, int rank, const int64_t *shape, qat_normalization *out) {
    memset(out, 0, sizeof *out);
    hid_t g = qat__h5r_group(r, loc, "normalization");
    if (g < 0) return false;
    long long c = qat__h5r_i64(r, g, "channels", LLONG_MIN, LLONG_MAX);
    if (r->ok && (c < 1 || c > QAT_NORM_MAX_CHANNELS))
        qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: channels = %lld is outside [1, %d]", where, c, QAT_NORM_MAX_CHANNELS);
    long long raw = qat__h5r_i64(r, g, "raw_uint8", LLONG_MIN, LLONG_MAX);
    if (r->ok && (raw < 0 || raw > 1))
        qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: raw_uint8 = %lld is outside [0, 1]", where, raw);
    float divisor = qat__h5r_f32(r, g, "divisor");
    if (r->ok && get_array(r, g, where, "mean", c, out->mean)) get_array(r, g, where, "std", c, out->std);
    H5Gclose(g);
    if (!r->ok) return memset(out, 0, sizeof *out), false;
    out->channels = (int)c, out->divisor = divisor, out->raw_uint8 = raw != 0;
    char msg[200];
    if (qat_normalization_check(out, rank, shape, msg, sizeof msg) != QAT_OK) {
        memset(out, 0, sizeof *out);
        return qat__h5r_fail(r, QAT_ERR_FORMAT, "%s: %s", where, msg);
    }
    return true;
}
