/* The fit's choice: a multiple-choice knapsack over the fitted layers
 * (one bit width each), least summed sensitivity under a flash budget,
 * solved exactly by dynamic programming over bytes (qat/fit.h).
 *
 * Each layer i's choice k changes the constants by d[i][k] bytes against
 * the model as trained; shifting by the layer's smallest change makes
 * every cost c[i][k] = d[i][k] - min_k d[i][k] >= 0, and the budget
 * becomes C = flash - (trained flash + sum of the minima). best[i][c] is
 * the least sensitivity of layers 0..i at a total shifted cost of exactly
 * c; the answer is the least over c <= C. The table has (layers) x
 * (sum of the largest costs + 1) entries; beyond 2^28 the costs are
 * counted in units of u bytes, rounded up, which keeps every answer within
 * the budget (and may miss a choice within u bytes per layer of it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qat/fit.h"

#define MAX_CELLS ((int64_t)1 << 28)
#define NONE 255

typedef struct {
    int n;                 /* layers */
    int64_t unit, span;    /* bytes per cost unit; costs 0..span */
    int64_t base;          /* trained flash plus the minima: the flash of cost 0 */
    int64_t *cost;         /* [n][QAT_FIT_MAX_CHOICES] in units; -1: the choice is not allowed (arena) */
    double *best;          /* [span + 1]: after the last layer */
    uint8_t *pick;         /* [n][span + 1]: the choice of layer i at total cost c, NONE if unreachable */
} table;

static double sens(const qat_fit_table *t, int i, int k) { return t->layers[i].loss[k] - t->loss; }

/* Layer i's arena at width k under the plan the table counts. */
static int64_t arena_of(const qat_fit_table *t, int i, int k) {
    return t->small_ram ? t->layers[i].arena_small[k] : t->layers[i].arena[k];
}

static void table_free(table *b) { free(b->cost), free(b->best), free(b->pick); }

/* Fills the dynamic programme of t under the arena limit. */
static qat_status build(const qat_fit_table *t, int64_t arena, qat_ctx *ctx, table *b) {
    memset(b, 0, sizeof *b);
    int n = b->n = t->n_layers;
    b->cost = calloc((size_t)n * QAT_FIT_MAX_CHOICES, sizeof *b->cost);
    if (!b->cost) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: out of memory");
    int64_t *lo = b->cost; /* each layer's smallest allowed change, kept in its row's last slot until shifted */
    int64_t total = 0, base = t->flash;
    for (int i = 0; i < n; i++) {
        const qat_fit_layer *f = &t->layers[i];
        int64_t min = INT64_MAX, max = INT64_MIN;
        for (int k = 0; k < f->n; k++) {
            bool ok = !arena || arena_of(t, i, k) <= arena;
            int64_t d = f->flash[k] - t->flash;
            lo[i * QAT_FIT_MAX_CHOICES + k] = ok ? d : INT64_MIN;
            if (ok) min = d < min ? d : min, max = d > max ? d : max;
        }
        if (min == INT64_MAX) {
            int64_t least = arena_of(t, i, 0);
            for (int k = 1; k < f->n; k++) least = arena_of(t, i, k) < least ? arena_of(t, i, k) : least;
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: the generated C's arena is at least %lld bytes with layer %s "
                                "at any width, over the %lld bytes allowed", (long long)least, f->name, (long long)arena);
        }
        for (int k = 0; k < f->n; k++) {
            int64_t *c = &b->cost[i * QAT_FIT_MAX_CHOICES + k];
            *c = *c == INT64_MIN ? -1 : *c - min;
        }
        base += min, total += max - min;
    }
    b->base = base, b->unit = 1;
    while ((total / b->unit + 1) * n > MAX_CELLS) b->unit *= 2;
    for (int64_t j = 0; j < (int64_t)n * QAT_FIT_MAX_CHOICES; j++)
        if (b->cost[j] > 0) b->cost[j] = (b->cost[j] + b->unit - 1) / b->unit;
    int64_t span = b->span = (total + b->unit - 1) / b->unit;
    double *cur = malloc((size_t)(span + 1) * sizeof *cur), *next = malloc((size_t)(span + 1) * sizeof *next);
    b->pick = malloc((size_t)n * (size_t)(span + 1));
    if (!cur || !next || !b->pick) return free(cur), free(next), qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: out of memory");
    for (int64_t c = 0; c <= span; c++) cur[c] = c ? INFINITY : 0.0;
    for (int i = 0; i < n; i++) {
        uint8_t *pick = b->pick + (size_t)i * (size_t)(span + 1);
        for (int64_t c = 0; c <= span; c++) {
            next[c] = INFINITY, pick[c] = NONE;
            for (int k = 0; k < t->layers[i].n; k++) {
                int64_t w = b->cost[i * QAT_FIT_MAX_CHOICES + k];
                if (w < 0 || w > c || isinf(cur[c - w])) continue;
                double v = cur[c - w] + sens(t, i, k);
                if (v < next[c]) next[c] = v, pick[c] = (uint8_t)k;
            }
        }
        double *s = cur;
        cur = next, next = s;
    }
    free(next);
    b->best = cur;
    return QAT_OK;
}

/* The choices that reach total cost c exactly. */
static void trace(const table *b, int64_t c, int *choice) {
    for (int i = b->n - 1; i >= 0; i--) {
        int k = b->pick[(size_t)i * (size_t)(b->span + 1) + (size_t)c];
        choice[i] = k;
        c -= b->cost[i * QAT_FIT_MAX_CHOICES + k];
    }
}

qat_fit_result qat_fit_predict(const qat_fit_table *t, const int *choice) {
    qat_fit_result r = {.flash = t->flash, .arena = 0, .sensitivity = 0};
    for (int i = 0; i < t->n_layers; i++) {
        const qat_fit_layer *f = &t->layers[i];
        r.flash += f->flash[choice[i]] - t->flash;
        r.sensitivity += sens(t, i, choice[i]);
        if (arena_of(t, i, choice[i]) > r.arena) r.arena = arena_of(t, i, choice[i]);
    }
    if (!t->n_layers) r.arena = t->small_ram ? t->arena_small : t->arena;
    return r;
}

qat_status qat_fit_solve(const qat_fit_table *t, int64_t flash, int64_t arena, qat_ctx *ctx, int *choice,
                         qat_fit_result *out) {
    if (!t || !ctx || !choice || !out || t->n_layers < 1) return QAT_ERR_ARG;
    table b;
    qat_status st = build(t, arena, ctx, &b);
    if (st == QAT_OK && flash < b.base)
        st = qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: nothing fits %lld bytes of flash: the fewest the candidates allow is "
                          "%lld (constants of the generated C)", (long long)flash, (long long)b.base);
    if (st == QAT_OK) {
        int64_t cap = (flash - b.base) / b.unit, at = -1;
        if (cap > b.span) cap = b.span;
        for (int64_t c = 0; c <= cap; c++)
            if (!isinf(b.best[c]) && (at < 0 || b.best[c] < b.best[at])) at = c;
        trace(&b, at, choice);
        *out = qat_fit_predict(t, choice);
    }
    table_free(&b);
    return st;
}

int qat_fit_front(const qat_fit_table *t, int64_t arena, qat_ctx *ctx, int cap, int *choices, qat_fit_result *points) {
    if (!t || !ctx || !choices || !points || cap < 2 || t->n_layers < 1) return -1;
    table b;
    if (build(t, arena, ctx, &b) != QAT_OK) return table_free(&b), -1;
    int64_t *front = malloc((size_t)(b.span + 1) * sizeof *front), count = 0;
    if (!front) return table_free(&b), qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: out of memory"), -1;
    double least = INFINITY;
    for (int64_t c = 0; c <= b.span; c++) /* a point: less sensitivity than every cheaper one */
        if (b.best[c] < least) least = b.best[c], front[count++] = c;
    int n = count < cap ? (int)count : cap;
    for (int k = 0; k < n; k++) { /* evenly over the front, both ends kept */
        int64_t at = n == 1 ? 0 : (int64_t)((double)k * (double)(count - 1) / (double)(n - 1) + 0.5);
        trace(&b, front[at], choices + (size_t)k * (size_t)t->n_layers);
        points[k] = qat_fit_predict(t, choices + (size_t)k * (size_t)t->n_layers);
    }
    free(front);
    table_free(&b);
    return n;
}
