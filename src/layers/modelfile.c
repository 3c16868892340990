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
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAX_LINE 1024
#define MAX_FILE (1 << 20)
#define MAX_TOKENS 32

typedef struct {
    qat_model *m;
    const char *origin;
    int line;
    int *ranks;
    int64_t (*shapes)[3];
    int cap;
    int64_t act_bytes; /* float32 bytes of the outputs so far, one sample (the input's included) */
} parser;

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
static qat_status fail(parser *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qat_ctx_fail(p->m->ctx, QAT_ERR_FORMAT, "%s:%d: %s", p->origin, p->line, msg);
}

/* A whole-number value in [lo, hi]. */
static bool number(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool real(const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* "5" or "10x4": one or two whole numbers in [lo, hi]. */
static bool pair(const char *text, long lo, long hi, int *a, int *b) {
    char buf[64];
    if (strlen(text) >= sizeof buf) return false;
    strcpy(buf, text);
    char *x = strchr(buf, 'x');
    long va, vb;
    if (x) *x = '\0';
    if (!number(buf, lo, hi, &va) || (x && !number(x + 1, lo, hi, &vb))) return false;
    *a = (int)va, *b = x ? (int)vb : (int)va;
    return true;
}

/* The line's key=value fields, each used at most once and known to the kind. */
typedef struct {
    const char *key[MAX_TOKENS], *val[MAX_TOKENS];
    bool used[MAX_TOKENS];
    int n;
} fields;

static const char *get(fields *f, const char *key) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->key[i], key)) return f->used[i] = true, f->val[i];
    return NULL;
}

static qat_status leftovers(parser *p, fields *f, const char *kind, const char *known) {
    for (int i = 0; i < f->n; i++)
        if (!f->used[i]) return fail(p, "%s: unknown key \"%s\" (%s)", kind, f->key[i], known[0] ? known : "it takes none");
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

static qat_status conv(parser *p, const char *name, int x, fields *f) {
    const char *v;
    long out = 0, in = 0;
    qat_conv2d_spec s = {.stride_h = 1, .stride_w = 1, .groups = 1, .bias = true};
    if (!(v = get(f, "out")) || !number(v, 1, 1 << 20, &out)) return fail(p, "conv2d %s: out=N (channels) is required", name);
    if (!(v = get(f, "kernel")) || !pair(v, 1, 64, &s.kh, &s.kw)) return fail(p, "conv2d %s: kernel=K or kernel=KHxKW (1..64) is required", name);
    if ((v = get(f, "stride")) && !pair(v, 1, 64, &s.stride_h, &s.stride_w)) return fail(p, "conv2d %s: stride=S or SHxSW (1..64)", name);
    if ((v = get(f, "pad")) && !pair(v, 0, 64, &s.pad_h, &s.pad_w)) return fail(p, "conv2d %s: pad=P or PHxPW (0..64)", name);
    if ((v = get(f, "bias")) && strcmp(v, "true") && strcmp(v, "false")) return fail(p, "conv2d %s: bias=true|false", name);
    if (v) s.bias = !strcmp(v, "true");
    if (p->ranks[x] != 3) return fail(p, "conv2d %s: its input %s is not [C, H, W]", name, p->m->layers[x].name);
    s.in = (int)p->shapes[x][0], s.out = (int)out;
    if ((v = get(f, "in")) && (!number(v, 1, 1 << 20, &in) || in != s.in))
        return fail(p, "conv2d %s: in=%s, but its input has %d channels", name, v, s.in);
    long groups = 1;
    if ((v = get(f, "groups")) && strcmp(v, "depthwise") && !number(v, 1, 1 << 20, &groups))
        return fail(p, "conv2d %s: groups=G or groups=depthwise", name);
    s.groups = v && !strcmp(v, "depthwise") ? s.in : (int)groups;
    return qat_layer_conv2d(p->m, name, x, &s) < 0 ? qat_ctx_status(p->m->ctx) : QAT_OK;
}

static qat_status linear(parser *p, const char *name, int x, fields *f) {
    const char *v;
    long out = 0, in = 0;
    bool bias = true;
    if (!(v = get(f, "out")) || !number(v, 1, 1 << 24, &out)) return fail(p, "linear %s: out=N (features) is required", name);
    if ((v = get(f, "bias")) && strcmp(v, "true") && strcmp(v, "false")) return fail(p, "linear %s: bias=true|false", name);
    if (v) bias = !strcmp(v, "true");
    if (p->ranks[x] != 1) return fail(p, "linear %s: its input %s is not a vector (flatten it first)", name, p->m->layers[x].name);
    int features = (int)p->shapes[x][0];
    if ((v = get(f, "in")) && (!number(v, 1, 1 << 24, &in) || in != features))
        return fail(p, "linear %s: in=%s, but its input has %d features", name, v, features);
    return qat_layer_linear(p->m, name, x, features, (int)out, bias) < 0 ? qat_ctx_status(p->m->ctx) : QAT_OK;
}

static qat_status pool(parser *p, qat_layer_kind kind, const char *name, int x, fields *f) {
    const char *v, *k = qat_layer_kind_str(kind);
    qat_pool2d_spec s = {0};
    if (!(v = get(f, "kernel")) || !pair(v, 1, 64, &s.kh, &s.kw)) return fail(p, "%s %s: kernel=K or KHxKW (1..64) is required", k, name);
    if ((v = get(f, "stride")) && !pair(v, 1, 64, &s.stride_h, &s.stride_w)) return fail(p, "%s %s: stride=S or SHxSW (1..64)", k, name);
    if ((v = get(f, "pad")) && !pair(v, 0, 32, &s.pad_h, &s.pad_w)) return fail(p, "%s %s: pad=P or PHxPW", k, name);
    int id = kind == QAT_LAYER_MAXPOOL2D ? qat_layer_maxpool2d(p->m, name, x, &s) : qat_layer_avgpool2d(p->m, name, x, &s);
    return id < 0 ? qat_ctx_status(p->m->ctx) : QAT_OK;
}

static qat_status batchnorm(parser *p, const char *name, int x, fields *f) {
    const char *v;
    double momentum = 0.1, eps = 1e-5;
    if ((v = get(f, "momentum")) && !real(v, 0, 1, &momentum)) return fail(p, "batchnorm %s: momentum in [0, 1]", name);
    if ((v = get(f, "eps")) && !real(v, 1e-30, 1, &eps)) return fail(p, "batchnorm %s: eps in (0, 1]", name);
    int id = qat_layer_batchnorm(p->m, name, x, (int)p->shapes[x][0], (float)momentum, (float)eps);
    return id < 0 ? qat_ctx_status(p->m->ctx) : QAT_OK;
}

/* One layer line: kind, name, inputs, fields. */
static qat_status layer_line(parser *p, int nt, char **tok) {
    qat_model *m = p->m;
    qat_layer_kind kind = qat_layer_kind_from_str(tok[0]);
    if (kind == QAT_LAYER_KIND_COUNT || kind == QAT_LAYER_INPUT || kind == QAT_LAYER_CUSTOM)
        return fail(p, "unknown layer kind \"%s\" (linear, conv2d, batchnorm, relu, relu6, maxpool2d, avgpool2d, "
                    "global_avgpool, flatten, dropout, add, concat, sigmoid, tanh, hardswish)", tok[0]);
    if (nt < 3) return fail(p, "%s: want \"%s NAME INPUT[,INPUT...] [key=value ...]\"", tok[0], tok[0]);
    const char *name = tok[1];
    char why[256];
    if (!qat_name_valid(name, why, sizeof why)) return fail(p, "%s: bad layer name: %s", tok[0], why);
    if (qat_model_find_layer(m, name) >= 0) return fail(p, "%s %s: a layer of that name is defined above", tok[0], name);
    int ids[QAT_CUSTOM_MAX_INPUTS], n = 0;
    qat_status st = inputs(p, tok[2], ids, &n);
    if (st != QAT_OK) return st;
    fields f = {.n = 0};
    for (int i = 3; i < nt; i++) {
        char *eq = strchr(tok[i], '=');
        if (!eq || eq == tok[i]) return fail(p, "%s %s: \"%s\" is not key=value", tok[0], name, tok[i]);
        *eq = '\0';
        if (get(&f, tok[i])) return fail(p, "%s %s: key \"%s\" given twice", tok[0], name, tok[i]);
        f.key[f.n] = tok[i], f.val[f.n] = eq + 1, f.used[f.n] = false, f.n++;
    }
    int want = kind == QAT_LAYER_ADD ? 2 : kind == QAT_LAYER_CONCAT ? -1 : 1;
    if (want > 0 && n != want) return fail(p, "%s %s: takes %d input%s, has %d", tok[0], name, want, want > 1 ? "s" : "", n);
    const char *known = "";
    const char *v;
    switch (kind) {
    case QAT_LAYER_CONV2D: st = conv(p, name, ids[0], &f), known = "out, kernel, stride, pad, groups, bias, in"; break;
    case QAT_LAYER_LINEAR: st = linear(p, name, ids[0], &f), known = "out, bias, in"; break;
    case QAT_LAYER_MAXPOOL2D:
    case QAT_LAYER_AVGPOOL2D: st = pool(p, kind, name, ids[0], &f), known = "kernel, stride, pad"; break;
    case QAT_LAYER_BATCHNORM: st = batchnorm(p, name, ids[0], &f), known = "momentum, eps"; break;
    case QAT_LAYER_DROPOUT: {
        double prob = 0.5;
        if ((v = get(&f, "p")) && !real(v, 0, 0.999999, &prob)) return fail(p, "dropout %s: p in [0, 1)", name);
        st = qat_layer_dropout(m, name, ids[0], (float)prob) < 0 ? qat_ctx_status(m->ctx) : QAT_OK, known = "p";
        break;
    }
    case QAT_LAYER_ADD: st = qat_layer_add(m, name, ids[0], ids[1]) < 0 ? qat_ctx_status(m->ctx) : QAT_OK; break;
    case QAT_LAYER_CONCAT: st = qat_layer_concat(m, name, n, ids) < 0 ? qat_ctx_status(m->ctx) : QAT_OK; break;
    default: st = qat__append(m, kind, name, 1, ids) ? QAT_OK : qat_ctx_status(m->ctx); break;
    }
    if (st != QAT_OK) {
        if (qat_ctx_status(m->ctx) != QAT_OK && !strstr(qat_ctx_error(m->ctx), p->origin))
            qat_ctx_error_prefix(m->ctx, "%s:%d: ", p->origin, p->line);
        return st;
    }
    if ((st = leftovers(p, &f, tok[0], known)) != QAT_OK) return st;
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
        if (rank == 3 || !number(t, 1, 1 << 24, &v)) return fail(p, "input: shape is 1 or 3 whole numbers in 1..2^24");
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
        size_t ctl = 0; /* text: tabs and CR aside, no control character reaches a name or a message */
        while (ctl < n && ((unsigned char)s[ctl] >= 0x20 || s[ctl] == '\t' || s[ctl] == '\r') && s[ctl] != 0x7f) ctl++;
        if (n >= sizeof buf) st = fail(&p, "line longer than %d characters", MAX_LINE - 1);
        else if (ctl < n) st = fail(&p, "control character 0x%02x at column %zu (a model file is text)", (unsigned char)s[ctl], ctl + 1);
        else memcpy(buf, s, n), buf[n] = '\0', st = line(&p, buf);
        s += n + (nl ? 1 : 0);
    }
    if (st == QAT_OK && m->n_layers < 2) st = qat_ctx_fail(m->ctx, QAT_ERR_FORMAT, "%s: no layers", p.origin);
    free(p.ranks), free(p.shapes);
    return st;
}

/* A model file's text: a regular file of at most MAX_FILE bytes, without
 * NUL. Opened non-blocking and checked with fstat before any read: a FIFO
 * would block a plain open or read until a writer came, a directory would
 * read as empty ("no layers"), a device could be endless. */
qat_status qat_model_file_text(qat_ctx *ctx, const char *path, char **text, size_t *len) {
    if (!ctx) return QAT_ERR_ARG;
    if (!path || !text || !len) return qat_ctx_fail(ctx, QAT_ERR_ARG, "model file: no path");
    *text = NULL, *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    qat_status s = QAT_OK;
    if (fstat(fd, &st) != 0) s = qat_ctx_fail(ctx, QAT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: not a regular file (%s): a model file is a text file", path,
                         S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                                           : "not a file");
    else if (st.st_size > MAX_FILE) s = qat_ctx_fail(ctx, QAT_ERR_FORMAT, "%s: larger than %d bytes", path, MAX_FILE);
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
