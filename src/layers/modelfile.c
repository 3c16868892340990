#define _POSIX_C_SOURCE 200809L
/* Model files (docs/model-format.md): one layer per line,
 *
 *     <kind> <name> <input>[,<input>...] [key=value ...]
 *
 * after an `input shape=C,H,W` (or `shape=F`) line. Input channels and
 * features are inferred from the shapes, so a line says only what a
 * reader needs. Errors name the file, the line and the field. Files are
 * hostile input: lines and files have a size limit, every number a range. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/regular.h"
#include "internal.h"
#include "op.h"

#define MAX_LINE 1024
#define MAX_FILE (1 << 20)
#define MAX_TOKENS 32

typedef qat__qnet parser;

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
qat_status qat__qnet_fail(parser *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qat_ctx_fail(p->m->ctx, QAT_ERR_FORMAT, "%s:%d: %s", p->origin, p->line, msg);
}

#define fail qat__qnet_fail

bool qat__qnet_int(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool qat__qnet_real(const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

bool qat__qnet_pair(const char *text, long lo, long hi, int *a, int *b) {
    char buf[64];
    if (strlen(text) >= sizeof buf) return false;
    strcpy(buf, text);
    char *x = strchr(buf, 'x');
    long va, vb;
    if (x) *x = '\0';
    if (!qat__qnet_int(buf, lo, hi, &va) || (x && !qat__qnet_int(x + 1, lo, hi, &vb))) return false;
    *a = (int)va, *b = x ? (int)vb : (int)va;
    return true;
}

const char *qat__qnet_get(parser *p, const char *key) {
    for (int i = 0; i < p->n_fields; i++)
        if (!strcmp(p->key[i], key)) return p->used[i] = true, p->val[i];
    return NULL;
}

qat_status qat__qnet_need(parser *p, const char *v, const char *kind, const char *name, const char *want) {
    return v ? fail(p, "%s %s: %s, not \"%s\"", kind, name, want, v) : fail(p, "%s %s: %s is required", kind, name, want);
}

qat_status qat__qnet_added(parser *p, int id) { return id < 0 ? qat_ctx_status(p->m->ctx) : QAT_OK; }

static qat_status leftovers(parser *p, const char *kind, const char *known) {
    for (int i = 0; i < p->n_fields; i++)
        if (!p->used[i]) return fail(p, "%s: unknown key \"%s\" (%s)", kind, p->key[i], known[0] ? known : "it takes none");
    return QAT_OK;
}

/* Every key of the line is one of known ("a, b, c"), checked before the
 * kind reads any: a misspelt key is named as such, not as a missing one.
 * The precision keys have their own messages (precision_keys). */
static qat_status unknown_keys(parser *p, const char *kind, const char *known) {
    for (int i = 0; i < p->n_fields; i++) {
        size_t n = strlen(p->key[i]);
        if (!strcmp(p->key[i], "wbits") || !strcmp(p->key[i], "abits") || !strcmp(p->key[i], "granularity")) continue;
        bool found = false;
        for (const char *at = known; !found && (at = strstr(at, p->key[i])); at += n)
            found = (at == known || at[-1] == ' ') && (at[n] == ',' || at[n] == '\0');
        if (!found) return fail(p, "%s: unknown key \"%s\" (%s)", kind, p->key[i], known[0] ? known : "it takes none");
    }
    return QAT_OK;
}

/* The shape of layer `id` (already added): from its inputs', checked. */
static qat_status shape_of(parser *p, int id) {
    qat_model *m = p->m;
    if (id >= p->cap) {
        int cap = 2 * id + 16;
        int *r = realloc(p->ranks, (size_t)cap * sizeof *r);
        if (r) p->ranks = r;
        int64_t(*s)[3] = realloc(p->shapes, (size_t)cap * sizeof *s);
        if (s) p->shapes = s;
        if (!r || !s) return qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "%s: out of memory", p->origin);
        p->cap = cap;
    }
    memset(p->shapes[id], 0, sizeof p->shapes[id]);
    qat_status st = qat__layer_shape(m, &m->layers[id], p->ranks, p->shapes, &p->ranks[id], p->shapes[id]);
    if (st == QAT_OK) { /* the total so far against the limit, before anything is allocated for it */
        p->act_bytes += 4 * qat__shape_numel(p->ranks[id], p->shapes[id]);
        st = qat__check_activation_bytes(m, p->act_bytes);
    }
    if (st != QAT_OK) qat_ctx_error_prefix(m->ctx, "%s:%d: ", p->origin, p->line);
    return st;
}

/* The ids of the comma-separated layer names in text. */
static qat_status inputs(parser *p, const char *text, int *ids, int *n) {
    char buf[MAX_LINE];
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == QAT_CUSTOM_MAX_INPUTS) return fail(p, "more than %d inputs", QAT_CUSTOM_MAX_INPUTS);
        int id = qat_model_find_layer(p->m, t);
        if (id < 0) return fail(p, "input \"%s\" is not a layer defined above", t);
        ids[(*n)++] = id;
    }
    return *n ? QAT_OK : fail(p, "no input");
}

/* A kind whose keys are its attributes: each in its range (its default
 * when absent), then the layer. */
static qat_status attributes(parser *p, const qat__op_kind *op, const char *name, int n, const int *ids) {
    float a[QAT__MAX_ATTRS];
    for (int i = 0; i < op->n_attrs; i++) {
        const qat__attr *at = &op->attrs[i];
        const char *v = qat__qnet_get(p, at->key);
        double d = at->def;
        if (v && !qat__qnet_real(v, at->lo, at->hi, &d))
            return fail(p, "%s %s: %s in [%g, %g]", op->name, name, at->key, (double)at->lo, (double)at->hi);
        a[i] = (float)d;
    }
    return qat__qnet_added(p, qat__add_layer(p->m, op->kind, name, n, ids, a));
}

/* The keys a kind takes, for messages: its own list, or its attributes'. */
static const char *keys_of(const qat__op_kind *op, char *buf, size_t len) {
    buf[0] = '\0';
    int at = op->keys ? snprintf(buf, len, "%s", op->keys) : 0;
    for (int i = 0; !op->keys && i < op->n_attrs && at < (int)len; i++)
        at += snprintf(buf + at, len - (size_t)at, "%s%s", i ? ", " : "", op->attrs[i].key);
    const char *prec = op->weighted ? "wbits, abits, granularity" : op->requantizes ? "abits" : "";
    if (prec[0] && at < (int)len) snprintf(buf + at, len - (size_t)at, "%s%s", at ? ", " : "", prec);
    return buf;
}

/* "linear, conv2d, ...": the kinds a line can declare, in the enum's order. */
static void kinds_list(char *buf, size_t len) {
    buf[0] = '\0';
    for (int k = 0, at = 0, n = 0; k < QAT_LAYER_KIND_COUNT && at < (int)len; k++)
        if (qat__op((qat_layer_kind)k)->in_files)
            at += snprintf(buf + at, len - (size_t)at, "%s%s", n++ ? ", " : "", qat__op((qat_layer_kind)k)->name);
}

/* The precision keys any line of a quantized kind may carry (wbits=,
 * abits=, granularity=), for layer id just added. */
static qat_status precision_keys(parser *p, const char *kind, const char *name, int id) {
    const char *w = qat__qnet_get(p, "wbits"), *a = qat__qnet_get(p, "abits"), *g = qat__qnet_get(p, "granularity");
    if (!w && !a && !g) return QAT_OK;
    qat_layer_precision prec = {0};
    long v;
    if (w && !qat__qnet_int(w, 2, 16, &v)) return fail(p, "%s %s: wbits=N, N in 2..16", kind, name);
    if (w) prec.wbits = (int)v;
    if (a && !qat__qnet_int(a, 2, 16, &v)) return fail(p, "%s %s: abits=N, N in 2..16", kind, name);
    if (a) prec.abits = (int)v;
    if (g) {
        prec.has_granularity = true;
        if (!strcmp(g, "tensor")) prec.granularity = QAT_GRAN_TENSOR;
        else if (!strcmp(g, "channel")) prec.granularity = QAT_GRAN_CHANNEL;
        else if (!strncmp(g, "block:", 6) && qat__qnet_int(g + 6, 1, QAT_MAX_BLOCK, &v))
            prec.granularity = QAT_GRAN_BLOCK, prec.block = (int)v;
        else return fail(p, "%s %s: granularity=tensor, channel or block:N (N in 1..%d)", kind, name, QAT_MAX_BLOCK);
    }
    qat_model *m = p->m;
    qat_status st = qat_model_set_layer_precision(m, m->layers[id].name, &prec);
    if (st != QAT_OK) qat_ctx_error_prefix(m->ctx, "%s:%d: ", p->origin, p->line);
    return st;
}

/* One layer line: kind, name, inputs, fields. */
static qat_status layer_line(parser *p, int nt, char **tok) {
    qat_model *m = p->m;
    qat_layer_kind kind = qat_layer_kind_from_str(tok[0]);
    const qat__op_kind *op = qat__op(kind);
    if (!op || !op->in_files) {
        char kinds[512];
        kinds_list(kinds, sizeof kinds);
        return fail(p, "unknown layer kind \"%s\" (%s)", tok[0], kinds);
    }
    if (nt < 3) return fail(p, "%s: want \"%s NAME INPUT[,INPUT...] [key=value ...]\"", tok[0], tok[0]);
    const char *name = tok[1];
    char why[256];
    if (!qat_name_valid(name, why, sizeof why)) return fail(p, "%s: bad layer name: %s", tok[0], why);
    if (qat_model_find_layer(m, name) >= 0) return fail(p, "%s %s: a layer of that name is defined above", tok[0], name);
    int ids[QAT_CUSTOM_MAX_INPUTS], n = 0;
    qat_status st = inputs(p, tok[2], ids, &n);
    if (st != QAT_OK) return st;
    p->n_fields = 0;
    for (int i = 3; i < nt; i++) {
        char *eq = strchr(tok[i], '=');
        if (!eq || eq == tok[i]) return fail(p, "%s %s: \"%s\" is not key=value", tok[0], name, tok[i]);
        *eq = '\0';
        if (qat__qnet_get(p, tok[i])) return fail(p, "%s %s: key \"%s\" given twice", tok[0], name, tok[i]);
        p->key[p->n_fields] = tok[i], p->val[p->n_fields] = eq + 1, p->used[p->n_fields] = false, p->n_fields++;
    }
    if (op->min_inputs == op->max_inputs && n != op->min_inputs)
        return fail(p, "%s %s: takes %d input%s, has %d", tok[0], name, op->min_inputs, op->min_inputs > 1 ? "s" : "", n);
    p->kind = kind;
    char keys[256], head[2 * MAX_LINE];
    keys_of(op, keys, sizeof keys);
    snprintf(head, sizeof head, "%s %s", tok[0], name);
    if ((st = unknown_keys(p, head, keys)) != QAT_OK) return st; /* a misspelt key before a missing one */
    st = op->parse ? op->parse(p, name, n, ids) : attributes(p, op, name, n, ids);
    if (st != QAT_OK) {
        if (qat_ctx_status(m->ctx) != QAT_OK && !strstr(qat_ctx_error(m->ctx), p->origin))
            qat_ctx_error_prefix(m->ctx, "%s:%d: ", p->origin, p->line);
        return st;
    }
    if ((st = precision_keys(p, tok[0], name, m->n_layers - 1)) != QAT_OK) return st;
    if ((st = leftovers(p, head, keys)) != QAT_OK) return st;
    return shape_of(p, m->n_layers - 1);
}

static qat_status input_line(parser *p, int nt, char **tok) {
    if (p->m->in_rank) return fail(p, "a second input line");
    if (nt != 2 || strncmp(tok[1], "shape=", 6)) return fail(p, "input: want \"input shape=C,H,W\" or \"input shape=F\"");
    int64_t s[3];
    int rank = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", tok[1] + 6);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (rank == 3 || !qat__qnet_int(t, 1, 1 << 24, &v)) return fail(p, "input: shape is 1 or 3 whole numbers in 1..2^24");
        s[rank++] = v;
    }
    if (rank != 1 && rank != 3) return fail(p, "input: shape is [C, H, W] (3 numbers) or [F] (1)");
    qat_status st = qat_model_set_input_shape(p->m, rank, s);
    if (st != QAT_OK) return st;
    p->ranks[0] = rank;
    memset(p->shapes[0], 0, sizeof p->shapes[0]);
    memcpy(p->shapes[0], s, (size_t)rank * sizeof *s);
    p->act_bytes = 4 * qat__shape_numel(rank, s);
    if ((st = qat__check_activation_bytes(p->m, p->act_bytes)) != QAT_OK) qat_ctx_error_prefix(p->m->ctx, "%s:%d: ", p->origin, p->line);
    return st;
}

static qat_status line(parser *p, char *text) {
    char *hash = strchr(text, '#');
    if (hash) *hash = '\0';
    char *tok[MAX_TOKENS];
    int nt = 0;
    for (char *save = NULL, *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (nt == MAX_TOKENS) return fail(p, "more than %d fields", MAX_TOKENS);
        tok[nt++] = t;
    }
    if (!nt) return QAT_OK;
    if (!strcmp(tok[0], "input")) return input_line(p, nt, tok);
    if (!p->m->in_rank) return fail(p, "the first line must be \"input shape=...\"");
    if (!strcmp(tok[0], "output")) {
        if (nt != 2) return fail(p, "output: want \"output NAME\"");
        int id = qat_model_find_layer(p->m, tok[1]);
        if (id < 1) return fail(p, "output: \"%s\" is not a layer defined above", tok[1]);
        return qat_model_set_output(p->m, id);
    }
    return layer_line(p, nt, tok);
}

qat_status qat_model_from_text(qat_model *m, const char *text, const char *origin) {
    if (!m) return QAT_ERR_ARG;
    if (!text) return qat_ctx_fail(m->ctx, QAT_ERR_ARG, "model file: no text");
    if (m->n_layers != 1 || m->built)
        return qat_ctx_fail(m->ctx, QAT_ERR_STATE, "model file: load into a new model (it has layers already)");
    parser p = {.m = m, .origin = origin ? origin : "model", .cap = 64};
    p.ranks = malloc((size_t)p.cap * sizeof *p.ranks);
    p.shapes = malloc((size_t)p.cap * sizeof *p.shapes);
    qat_status st = p.ranks && p.shapes ? QAT_OK : qat_ctx_fail(m->ctx, QAT_ERR_NOMEM, "model file: out of memory");
    for (const char *s = text; st == QAT_OK && *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        p.line++;
        char buf[MAX_LINE];
        uint32_t cp; /* text: tabs and CR aside, no control character reaches a name or a message */
        size_t ctl = n < sizeof buf ? qat_text_check(s, n, true, &cp) : n;
        unsigned char c = ctl < n ? (unsigned char)s[ctl] : 0;
        if (n >= sizeof buf) st = fail(&p, "line longer than %d characters", MAX_LINE - 1);
        else if (ctl < n && c < 0x80) st = fail(&p, "control character 0x%02x at column %zu (a model file is text)", c, ctl + 1);
        else if (ctl < n && cp == c) st = fail(&p, "byte 0x%02x at column %zu is not UTF-8 (a model file is text)", c, ctl + 1);
        else if (ctl < n) st = fail(&p, "control character U+%04X at column %zu (a model file is text)", (unsigned)cp, ctl + 1);
        else memcpy(buf, s, n), buf[n] = '\0', st = line(&p, buf);
        s += n + (nl ? 1 : 0);
    }
    if (st == QAT_OK && m->n_layers < 2) st = qat_ctx_fail(m->ctx, QAT_ERR_FORMAT, "%s: no layers", p.origin);
    free(p.ranks), free(p.shapes);
    return st;
}

/* A model file's text: a regular file (core/regular.h: a FIFO, a
 * directory or a device refused before any read) of at most MAX_FILE
 * bytes, without NUL. */
qat_status qat_model_file_text(qat_ctx *ctx, const char *path, char **text, size_t *len) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !text || !len) return qat_ctx_fail(ctx, QAT_ERR_ARG, "model file: no path");
    *text = NULL, *len = 0;
    char why[160];
    int fd;
    int64_t size = 0;
    qat_status s = qat__open_regular(path, &fd, &size, why, sizeof why);
    if (s == QAT_ERR_FORMAT) return qat_ctx_fail(ctx, s, "%s: %s: a model file is a text file", path, why);
    if (s != QAT_OK) return qat_ctx_fail(ctx, s, "%s: %s", path, why);
    if (size > MAX_FILE) s = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: larger than %d bytes", path, MAX_FILE);
    char *buf = s == QAT_OK ? malloc(MAX_FILE + 1) : NULL;
    if (s == QAT_OK && !buf) s = qat_ctx_fail(ctx, QAT_ERR_NOMEM, "%s: out of memory", path);
    size_t n = 0;
    while (s == QAT_OK && n <= MAX_FILE) { /* the size may have changed since fstat: read to the end, bounded */
        ssize_t k = read(fd, buf + n, MAX_FILE + 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) s = qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    if (s == QAT_OK && n > MAX_FILE) s = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: larger than %d bytes", path, MAX_FILE);
    if (s == QAT_OK && memchr(buf, '\0', n)) s = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: not a text file (a NUL byte)", path);
    if (s != QAT_OK) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *text = buf, *len = n;
    return QAT_OK;
}

qat_status qat_model_from_file(qat_model *m, const char *path) {
    if (!m) return QAT_ERR_ARG;
    char *text = NULL;
    size_t n = 0;
    qat_status st = qat_model_file_text(m->ctx, path, &text, &n);
    if (st == QAT_OK) st = qat_model_from_text(m, text, path);
    free(text);
    return st;
}
