/* Contexts: two arenas (persistent and per-step), the tape head, grad mode
 * and the sticky error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define QAT__CHUNK_MIN ((size_t)1 << 20)

static size_t align_up(size_t n) { return (n + QAT__ALIGN - 1) & ~(size_t)(QAT__ALIGN - 1); }
static size_t header_size(void) { return align_up(sizeof(qat__chunk)); }

static qat__chunk *chunk_new(qat__arena *a, size_t payload) {
    qat__chunk *c = aligned_alloc(QAT__ALIGN, header_size() + payload);
    if (!c) return NULL;
    c->next = NULL;
    c->size = payload;
    c->used = 0;
    a->total += payload;
    a->mallocs++;
    return c;
}

void *qat__arena_alloc(qat__arena *a, size_t bytes) {
    bytes = align_up(bytes ? bytes : 1);
    if (!a->head || a->head->size - a->head->used < bytes) {
        size_t want = bytes > QAT__CHUNK_MIN ? bytes : QAT__CHUNK_MIN;
        qat__chunk *c = chunk_new(a, want);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
    }
    char *p = (char *)a->head + header_size() + a->head->used;
    a->head->used += bytes;
    a->in_use += bytes;
    if (a->in_use > a->peak) a->peak = a->in_use;
    return p; /* not zeroed: callers that need zeros say so */
}

/* Reset keeps memory. If the step needed several chunks, they are merged
 * into one chunk of the high-water size, so from the next step on one
 * chunk serves the whole step and the loop does no malloc. */
void qat__arena_reset(qat__arena *a) {
    if (a->head && a->head->next) {
        size_t want = a->peak + QAT__ALIGN * 64;
        qat__arena_free(a);
        a->head = chunk_new(a, want); /* NULL is fine: the next alloc retries */
    }
    for (qat__chunk *c = a->head; c; c = c->next) c->used = 0;
    a->in_use = 0;
}

void qat__arena_free(qat__arena *a) {
    qat__chunk *c = a->head;
    while (c) {
        qat__chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->total = 0;
    a->in_use = 0;
}

qat_ctx *qat_ctx_new(void) {
    qat_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->grad_enabled = true;
    return ctx;
}

void qat_ctx_free(qat_ctx *ctx) {
    if (!ctx) return;
    qat__arena_free(&ctx->step);
    qat__arena_free(&ctx->persist);
    free(ctx);
}

qat_status qat_ctx_status(const qat_ctx *ctx) { return ctx ? ctx->status : QAT_ERR_ARG; }
const char *qat_ctx_error(const qat_ctx *ctx) { return ctx ? ctx->msg : "NULL context"; }

void qat_ctx_clear_error(qat_ctx *ctx) {
    if (!ctx) return;
    ctx->status = QAT_OK;
    ctx->msg[0] = '\0';
}

qat_status qat_ctx_fail(qat_ctx *ctx, qat_status s, const char *fmt, ...) {
    if (!ctx) return s;
    if (ctx->status == QAT_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
        va_end(ap);
        ctx->status = s;
    }
    return s;
}

void qat__error_prefix(qat_ctx *ctx, const char *fmt, ...) {
    if (!ctx || ctx->status == QAT_OK) return;
    char prefix[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t np = strlen(prefix), nm = strlen(ctx->msg), cap = sizeof ctx->msg - 1;
    if (np > cap) np = cap;
    if (np + nm > cap) nm = cap - np; /* the tail of a long message gives way */
    memmove(ctx->msg + np, ctx->msg, nm);
    memcpy(ctx->msg, prefix, np);
    ctx->msg[np + nm] = '\0';
}

void qat_ctx_step_reset(qat_ctx *ctx) {
    if (!ctx) return;
    qat__arena_reset(&ctx->step);
    ctx->n_pool = 0;
    ctx->tape = NULL;
    ctx->backward_done = false;
}

void qat_ctx_step_trim(qat_ctx *ctx) {
    if (!ctx) return;
    qat_ctx_step_reset(ctx);
    qat__arena_free(&ctx->step); /* keeps the high-water figure */
}

void qat_ctx_set_grad_enabled(qat_ctx *ctx, bool enabled) {
    if (ctx) ctx->grad_enabled = enabled;
}
bool qat_ctx_grad_enabled(const qat_ctx *ctx) { return ctx && ctx->grad_enabled; }
size_t qat_ctx_step_peak_bytes(const qat_ctx *ctx) { return ctx ? ctx->step.peak : 0; }
size_t qat_ctx_persist_bytes(const qat_ctx *ctx) { return ctx ? ctx->persist.total : 0; }
size_t qat_ctx_step_mallocs(const qat_ctx *ctx) { return ctx ? ctx->step.mallocs : 0; }

void *qat_ctx_alloc(qat_ctx *ctx, qat_mem where, size_t bytes) {
    if (!ctx) return NULL;
    void *p = qat__arena_alloc(where == QAT_MEM_STEP ? &ctx->step : &ctx->persist, bytes);
    if (!p) qat_ctx_fail(ctx, QAT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    else memset(p, 0, bytes);
    return p;
}

void *qat__step_alloc(qat_ctx *ctx, size_t bytes) { return qat_ctx_alloc(ctx, QAT_MEM_STEP, bytes); }

void *qat__step_scratch(qat_ctx *ctx, size_t bytes) {
    void *p = qat__arena_alloc(&ctx->step, bytes);
    if (!p) qat_ctx_fail(ctx, QAT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    return p;
}

/* The pool: the smallest released block of at least `bytes` is taken,
 * unless it is more than twice too large (a per-channel vector would
 * otherwise take an activation's block, and the next activation would
 * find none). */
float *qat__step_recycled(qat_ctx *ctx, size_t bytes) {
    int best = -1;
    for (int i = 0; i < ctx->n_pool; i++)
        if (ctx->pool[i].bytes >= bytes && ctx->pool[i].bytes / 2 <= bytes &&
            (best < 0 || ctx->pool[i].bytes < ctx->pool[best].bytes))
            best = i;
    if (best < 0) return qat__step_scratch(ctx, bytes);
    float *p = ctx->pool[best].p;
    ctx->pool[best] = ctx->pool[--ctx->n_pool];
    return p;
}

/* A full pool drops its smallest block (it stays in the arena, unused,
 * until the step ends). */
void qat__step_release(qat_ctx *ctx, float *p, size_t bytes) {
    if (!p) return;
    if (ctx->n_pool < QAT__GRAD_POOL) {
        ctx->pool[ctx->n_pool++] = (qat__block){p, bytes};
        return;
    }
    int small = 0;
    for (int i = 1; i < QAT__GRAD_POOL; i++)
        if (ctx->pool[i].bytes < ctx->pool[small].bytes) small = i;
    if (ctx->pool[small].bytes < bytes) ctx->pool[small] = (qat__block){p, bytes};
}

void qat_ctx_set_pool(qat_ctx *ctx, qat_pool *pool) {
    if (ctx) ctx->threads = pool;
}
qat_pool *qat_ctx_pool(const qat_ctx *ctx) { return ctx ? ctx->threads : NULL; }

void qat_ctx_set_reducer(qat_ctx *ctx, const qat_reducer *r) {
    if (!ctx) return;
    ctx->has_reducer = r && r->sum && r->minmax;
    ctx->reducer = ctx->has_reducer ? *r : (qat_reducer){0};
}
bool qat_ctx_has_reducer(const qat_ctx *ctx) { return ctx && ctx->has_reducer; }

qat_status qat__reduce_sum(qat_ctx *ctx, double *v, int64_t n) {
    if (!ctx->has_reducer || n <= 0) return QAT_OK;
    char msg[256] = "";
    qat_status st = ctx->reducer.sum(ctx->reducer.user, v, n, msg, sizeof msg);
    if (st != QAT_OK) qat_ctx_fail(ctx, st, "reducer (sum of %lld values): %s", (long long)n, msg[0] ? msg : qat_status_str(st));
    return st;
}

qat_status qat__reduce_minmax(qat_ctx *ctx, float *lo, float *hi, int64_t n) {
    if (!ctx->has_reducer || n <= 0) return QAT_OK;
    char msg[256] = "";
    qat_status st = ctx->reducer.minmax(ctx->reducer.user, lo, hi, n, msg, sizeof msg);
    if (st != QAT_OK)
        qat_ctx_fail(ctx, st, "reducer (min/max of %lld ranges): %s", (long long)n, msg[0] ? msg : qat_status_str(st));
    return st;
}

typedef struct {
    qat__range_fn fn;
    void *user;
    int64_t n, grain;
} range_job;

static void range_task(void *u, int64_t t, int worker) {
    const range_job *j = u;
    (void)worker;
    int64_t i0 = t * j->grain, i1 = i0 + j->grain < j->n ? i0 + j->grain : j->n;
    j->fn(j->user, i0, i1);
}

void qat__par_range(qat_ctx *ctx, int64_t n, int64_t grain, qat__range_fn fn, void *user) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n <= grain) {
        fn(user, 0, n);
        return;
    }
    range_job j = {fn, user, n, grain};
    qat__par(ctx, (n + grain - 1) / grain, range_task, &j);
}
