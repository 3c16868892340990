/* Contexts: two arenas (persistent and per-step), the sticky error, the
 * pool and reducer, and the step state of the module above (the tape). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qat/context.h"

#define QAT__ALIGN QAT_CTX_ALIGN
#define QAT__CHUNK_MIN ((size_t)1 << 20)

/* A chain of malloc'd chunks handed out by bumping an offset. */
typedef struct qat__chunk {
    struct qat__chunk *next;
    size_t size, used;
    /* payload follows, aligned */
} qat__chunk;

typedef struct {
    qat__chunk *head;   /* the chunk being filled */
    size_t in_use;      /* bytes handed out since the last reset */
    size_t peak;        /* high-water of in_use */
    size_t total;       /* bytes held in all chunks */
    size_t mallocs;     /* chunk allocations so far */
} qat__arena;

struct qat_ctx {
    qat__arena persist, step;
    qat_status status;
    char msg[512];
    qat_pool *threads;        /* borrowed; NULL: one thread */
    qat_reducer reducer;      /* across processes; has_reducer false: none */
    bool has_reducer;
    void *step_state;         /* the module above's (autograd's tape); owned */
    void (*step_state_reset)(void *);
    void (*step_state_free)(void *);
};

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

static void *arena_alloc(qat__arena *a, size_t bytes) {
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
static void arena_free(qat__arena *a);

static void arena_reset(qat__arena *a) {
    if (a->head && a->head->next) {
        size_t want = a->peak + QAT__ALIGN * 64;
        arena_free(a);
        a->head = chunk_new(a, want); /* NULL is fine: the next alloc retries */
    }
    for (qat__chunk *c = a->head; c; c = c->next) c->used = 0;
    a->in_use = 0;
}

static void arena_free(qat__arena *a) {
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
    return ctx;
}

void qat_ctx_free(qat_ctx *ctx) {
    if (!ctx) return;
    if (ctx->step_state_free) ctx->step_state_free(ctx->step_state);
    arena_free(&ctx->step);
    arena_free(&ctx->persist);
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

void qat_ctx_error_prefix(qat_ctx *ctx, const char *fmt, ...) {
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
    arena_reset(&ctx->step);
    if (ctx->step_state_reset) ctx->step_state_reset(ctx->step_state);
}

void qat_ctx_step_trim(qat_ctx *ctx) {
    if (!ctx) return;
    qat_ctx_step_reset(ctx);
    arena_free(&ctx->step); /* keeps the high-water figure */
}

size_t qat_ctx_step_peak_bytes(const qat_ctx *ctx) { return ctx ? ctx->step.peak : 0; }
size_t qat_ctx_persist_bytes(const qat_ctx *ctx) { return ctx ? ctx->persist.total : 0; }
size_t qat_ctx_step_mallocs(const qat_ctx *ctx) { return ctx ? ctx->step.mallocs : 0; }

void *qat_ctx_alloc(qat_ctx *ctx, qat_mem where, size_t bytes) {
    if (!ctx) return NULL;
    void *p = arena_alloc(where == QAT_MEM_STEP ? &ctx->step : &ctx->persist, bytes);
    if (!p) qat_ctx_fail(ctx, QAT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    else memset(p, 0, bytes);
    return p;
}

void *qat_ctx_alloc_uninit(qat_ctx *ctx, qat_mem where, size_t bytes) {
    if (!ctx) return NULL;
    void *p = arena_alloc(where == QAT_MEM_STEP ? &ctx->step : &ctx->persist, bytes);
    if (!p) qat_ctx_fail(ctx, QAT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *qat_ctx_step_state(const qat_ctx *ctx) { return ctx ? ctx->step_state : NULL; }

void qat_ctx_set_step_state(qat_ctx *ctx, void *state, void (*reset)(void *), void (*free_fn)(void *)) {
    if (!ctx) return;
    if (ctx->step_state_free && ctx->step_state != state) ctx->step_state_free(ctx->step_state);
    ctx->step_state = state;
    ctx->step_state_reset = reset;
    ctx->step_state_free = free_fn;
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

qat_status qat_ctx_reduce_sum(qat_ctx *ctx, double *v, int64_t n) {
    if (!ctx || !ctx->has_reducer || n <= 0) return QAT_OK;
    char msg[256] = "";
    qat_status st = ctx->reducer.sum(ctx->reducer.user, v, n, msg, sizeof msg);
    if (st != QAT_OK) qat_ctx_fail(ctx, st, "reducer (sum of %lld values): %s", (long long)n, msg[0] ? msg : qat_status_str(st));
    return st;
}

qat_status qat_ctx_reduce_minmax(qat_ctx *ctx, float *lo, float *hi, int64_t n) {
    if (!ctx || !ctx->has_reducer || n <= 0) return QAT_OK;
    char msg[256] = "";
    qat_status st = ctx->reducer.minmax(ctx->reducer.user, lo, hi, n, msg, sizeof msg);
    if (st != QAT_OK)
        qat_ctx_fail(ctx, st, "reducer (min/max of %lld ranges): %s", (long long)n, msg[0] ? msg : qat_status_str(st));
    return st;
}
