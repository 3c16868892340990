/* The fit's choice: one bit width per fitted layer, least summed
 * sensitivity under a flash budget and, when the table has them, a cycle
 * budget (qat/fit.h). A multiple-choice knapsack with one or two
 * resources, written as a 0-1 integer linear program and solved exactly by
 * GLPK's branch and cut (glp_intopt: presolve, no gap allowed):
 *
 *   minimise   Σ_ik s(i,k) x(i,k)
 *   subject to Σ_k x(i,k) = 1                        for every layer i
 *              Σ_ik (flash(i,k) - min_k flash(i,k)) x(i,k) <= flash budget - least flash
 *              Σ_ik (cyc(i,k) - min_k cyc(i,k)) x(i,k)     <= cycle budget - least cycles
 *              x(i,k) = 0 where layer i's arena at k exceeds the arena allowance
 *
 * Each layer's costs are shifted by its least one, so the right-hand sides
 * are the slack; GLPK checks rows to a relative tolerance, so the answer is
 * checked again in exact integers and, should a budget be exceeded by that
 * tolerance, solved again with the right-hand side lowered by the excess.
 *
 * GLPK ends the process on an internal error (out of memory); its error
 * hook (glp_error_hook, the documented way out) frees GLPK's environment
 * and returns here instead, as QAT_ERR_NOMEM. GLPK's environment is
 * per thread; it is freed after each solve unless another user's
 * problems were alive in it before. */
#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "qat/fit.h"

static double sens(const qat_fit_table *t, int i, int k) { return t->layers[i].loss[k] - t->loss; }

/* Layer i's arena at width k under the plan the table counts. */
static int64_t arena_of(const qat_fit_table *t, int i, int k) {
    return t->small_ram ? t->layers[i].arena_small[k] : t->layers[i].arena[k];
}

static bool allowed(const qat_fit_table *t, int64_t arena, int i, int k) { return !arena || arena_of(t, i, k) <= arena; }

qat_fit_result qat_fit_predict(const qat_fit_table *t, const int *choice) {
    qat_fit_result r = {.flash = t->flash, .arena = 0, .cycles = t->has_cycles ? t->cycles : 0, .sensitivity = 0};
    for (int i = 0; i < t->n_layers; i++) {
        const qat_fit_layer *f = &t->layers[i];
        r.flash += f->flash[choice[i]] - t->flash;
        if (t->has_cycles) r.cycles += f->cycles[choice[i]];
        r.sensitivity += sens(t, i, choice[i]);
        if (arena_of(t, i, choice[i]) > r.arena) r.arena = arena_of(t, i, choice[i]);
    }
    if (!t->n_layers) r.arena = t->small_ram ? t->arena_small : t->arena;
    return r;
}

/* ---- the integer program ------------------------------------------------------------------------ */

typedef enum { LEAST_SENSITIVITY, LEAST_FLASH } goal;

typedef struct {
    const qat_fit_table *t;
    int64_t arena;          /* 0: any */
    int64_t flash, cycles;  /* budgets; INT64_MAX: none */
    double max_sens;        /* LEAST_FLASH: the sensitivity not to exceed; INFINITY: none */
} problem;

typedef struct {
    jmp_buf back;
} hook_state;

static void on_glpk_error(void *info) {
    hook_state *h = info;
    glp_free_env();
    longjmp(h->back, 1);
}

/* Each layer's least flash change and least cycles among its allowed
 * widths; false when a layer has none (the message names it). */
static bool minima(const problem *p, qat_ctx *ctx, int64_t *lo_flash, int64_t *lo_cycles) {
    const qat_fit_table *t = p->t;
    *lo_flash = t->flash, *lo_cycles = t->has_cycles ? t->cycles : 0;
    for (int i = 0; i < t->n_layers; i++) {
        const qat_fit_layer *f = &t->layers[i];
        int64_t mf = INT64_MAX, mc = INT64_MAX;
        for (int k = 0; k < f->n; k++)
            if (allowed(t, p->arena, i, k)) {
                if (f->flash[k] - t->flash < mf) mf = f->flash[k] - t->flash;
                if (f->cycles[k] < mc) mc = f->cycles[k];
            }
        if (mf == INT64_MAX) {
            int64_t least = arena_of(t, i, 0);
            for (int k = 1; k < f->n; k++) least = arena_of(t, i, k) < least ? arena_of(t, i, k) : least;
            return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: the generated C's arena is at least %lld bytes with layer %s "
                                "at any width, over the %lld bytes allowed", (long long)least, f->name,
                                (long long)p->arena), false;
        }
        *lo_flash += mf;
        if (t->has_cycles) *lo_cycles += mc;
    }
    return true;
}

/* Builds the program of p in GLPK and solves it (arrays: room for the
 * matrix's nonzeros, 1-based as GLPK's). */
static qat_status run_glpk(const problem *p, goal g, int64_t cut_flash, int64_t cut_cycles, qat_ctx *ctx, int *choice,
                           int *ia, int *ja, double *ar) {
    const qat_fit_table *t = p->t;
    int n = t->n_layers, cols = 0;
    for (int i = 0; i < n; i++) cols += t->layers[i].n;
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    /* rows: 1..n one width per layer; n+1 flash; n+2 cycles; n+3 sensitivity (LEAST_FLASH) */
    int r_flash = n + 1, r_cycles = n + 2, r_sens = n + 3;
    glp_add_rows(lp, n + 3);
    for (int i = 0; i < n; i++) glp_set_row_bnds(lp, i + 1, GLP_FX, 1.0, 1.0);
    glp_add_cols(lp, cols);
    int nz = 0, col = 0;
    int64_t lo_flash = t->flash, lo_cycles = t->has_cycles ? t->cycles : 0; /* the least of every layer: cost 0 */
    for (int i = 0; i < n; i++) {
        const qat_fit_layer *f = &t->layers[i];
        int64_t mf = INT64_MAX, mc = INT64_MAX;
        for (int k = 0; k < f->n; k++)
            if (allowed(t, p->arena, i, k)) {
                if (f->flash[k] < mf) mf = f->flash[k];
                if (f->cycles[k] < mc) mc = f->cycles[k];
            }
        for (int k = 0; k < f->n; k++) {
            int j = ++col;
            glp_set_col_kind(lp, j, GLP_BV);
            if (!allowed(t, p->arena, i, k)) glp_set_col_bnds(lp, j, GLP_FX, 0.0, 0.0);
            double df = (double)(f->flash[k] - mf), dc = t->has_cycles ? (double)(f->cycles[k] - mc) : 0.0;
            glp_set_obj_coef(lp, j, g == LEAST_SENSITIVITY ? sens(t, i, k) : df);
            ++nz, ia[nz] = i + 1, ja[nz] = j, ar[nz] = 1.0;
            if (df != 0.0) ++nz, ia[nz] = r_flash, ja[nz] = j, ar[nz] = df;
            if (dc != 0.0) ++nz, ia[nz] = r_cycles, ja[nz] = j, ar[nz] = dc;
            if (sens(t, i, k) != 0.0) ++nz, ia[nz] = r_sens, ja[nz] = j, ar[nz] = sens(t, i, k);
        }
        lo_flash += mf - t->flash; /* the caller checked that every layer has an allowed width */
        if (t->has_cycles) lo_cycles += mc;
    }
    if (p->flash == INT64_MAX) glp_set_row_bnds(lp, r_flash, GLP_FR, 0.0, 0.0);
    else glp_set_row_bnds(lp, r_flash, GLP_UP, 0.0, (double)(p->flash - lo_flash - cut_flash));
    if (p->cycles == INT64_MAX || !t->has_cycles) glp_set_row_bnds(lp, r_cycles, GLP_FR, 0.0, 0.0);
    else glp_set_row_bnds(lp, r_cycles, GLP_UP, 0.0, (double)(p->cycles - lo_cycles - cut_cycles));
    if (g == LEAST_FLASH && isfinite(p->max_sens)) glp_set_row_bnds(lp, r_sens, GLP_UP, 0.0, p->max_sens);
    else glp_set_row_bnds(lp, r_sens, GLP_FR, 0.0, 0.0);
    glp_load_matrix(lp, nz, ia, ja, ar);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF, parm.presolve = GLP_ON, parm.mip_gap = 0.0;
    int rc = glp_intopt(lp, &parm);
    qat_status st = QAT_OK;
    if (rc == 0 && glp_mip_status(lp) == GLP_OPT) {
        col = 0;
        for (int i = 0; i < n; i++) {
            choice[i] = -1;
            for (int k = 0; k < t->layers[i].n; k++)
                if (glp_mip_col_val(lp, ++col) > 0.5) choice[i] = k;
            if (choice[i] < 0) st = qat_ctx_fail(ctx, QAT_ERR_STATE, "fit: the solver (GLPK) chose no width for %s",
                                                 t->layers[i].name);
        }
    } else if (rc == 0 || rc == GLP_ENOPFS || rc == GLP_ENODFS) {
        st = QAT_ERR_ARG; /* no feasible choice */
    } else {
        st = qat_ctx_fail(ctx, QAT_ERR_STATE, "fit: the solver (GLPK) stopped with code %d", rc);
    }
    glp_delete_prob(lp);
    return st;
}

/* Solves p once, the right-hand sides lowered by cut_flash and
 * cut_cycles; choice gets the answer. QAT_OK, QAT_ERR_ARG when nothing is
 * feasible (no message: the caller words it), QAT_ERR_NOMEM. */
static qat_status solve_once(const problem *p, goal g, int64_t cut_flash, int64_t cut_cycles, qat_ctx *ctx,
                             int *choice) {
    size_t room = 1;
    for (int i = 0; i < p->t->n_layers; i++) room += 4 * (size_t)p->t->layers[i].n;
    int *ia = malloc(room * sizeof *ia), *ja = malloc(room * sizeof *ja);
    double *ar = malloc(room * sizeof *ar);
    if (!ia || !ja || !ar) return free(ia), free(ja), free(ar), qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: out of memory");
    int blocks = 0; /* GLPK's memory blocks alive before: another user's problems */
    glp_mem_usage(&blocks, NULL, NULL, NULL);
    hook_state h;
    if (setjmp(h.back)) {
        free(ia), free(ja), free(ar);
        return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: the solver (GLPK) failed: out of memory");
    }
    glp_error_hook(on_glpk_error, &h);
    qat_status st = run_glpk(p, g, cut_flash, cut_cycles, ctx, choice, ia, ja, ar);
    glp_error_hook(NULL, NULL);
    if (!blocks) glp_free_env(); /* nobody else's problem was alive: GLPK's memory goes back */
    free(ia), free(ja), free(ar);
    return st;
}

/* Solves p, its budgets checked in exact integers (see the top). */
static qat_status solve(const problem *p, goal g, qat_ctx *ctx, int *choice) {
    int64_t cut_flash = 0, cut_cycles = 0;
    for (int tries = 0; tries < 8; tries++) {
        qat_status st = solve_once(p, g, cut_flash, cut_cycles, ctx, choice);
        if (st != QAT_OK) return st;
        qat_fit_result r = qat_fit_predict(p->t, choice);
        int64_t over_f = p->flash == INT64_MAX ? 0 : r.flash - p->flash;
        int64_t over_c = p->cycles == INT64_MAX || !p->t->has_cycles ? 0 : r.cycles - p->cycles;
        if (over_f <= 0 && over_c <= 0) return QAT_OK;
        if (over_f > 0) cut_flash += over_f;
        if (over_c > 0) cut_cycles += over_c;
    }
    return qat_ctx_fail(ctx, QAT_ERR_STATE, "fit: the solver's answers kept exceeding the budgets");
}

/* Checks the table and the budgets, and words "nothing fits". */
static qat_status check(const problem *p, qat_ctx *ctx) {
    int64_t lo_flash, lo_cycles;
    if (!minima(p, ctx, &lo_flash, &lo_cycles)) return QAT_ERR_ARG;
    if (p->flash != INT64_MAX && p->flash < lo_flash)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: nothing fits %lld bytes of flash: the fewest the candidates allow is "
                            "%lld (constants of the generated C)", (long long)p->flash, (long long)lo_flash);
    if (p->t->has_cycles && p->cycles != INT64_MAX && p->cycles < lo_cycles)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: nothing fits %lld cycles: the fewest the candidates allow is %lld "
                            "(estimated Cortex-M4 cycles per inference)", (long long)p->cycles, (long long)lo_cycles);
    return QAT_OK;
}

qat_status qat_fit_solve(const qat_fit_table *t, int64_t flash, int64_t arena, int64_t cycles, qat_ctx *ctx,
                         int *choice, qat_fit_result *out) {
    if (!t || !ctx || !choice || !out || t->n_layers < 1 || flash < 0 || arena < 0 || cycles < 0) return QAT_ERR_ARG;
    problem p = {t, arena, flash, cycles && t->has_cycles ? cycles : INT64_MAX, INFINITY};
    qat_status st = check(&p, ctx);
    if (st == QAT_OK) {
        st = solve(&p, LEAST_SENSITIVITY, ctx, choice);
        if (st == QAT_ERR_ARG && !qat_ctx_error(ctx)[0])
            st = qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: nothing fits %lld bytes of flash and %lld cycles together",
                              (long long)flash, (long long)p.cycles);
    }
    if (st == QAT_OK) *out = qat_fit_predict(t, choice);
    return st;
}

/* The front point at budget b: the least sensitivity within b, and of the
 * choices with that sensitivity, the least flash. */
static qat_status point(const problem *base, int64_t b, qat_ctx *ctx, int *choice) {
    problem p = *base;
    p.flash = b;
    qat_status st = solve(&p, LEAST_SENSITIVITY, ctx, choice);
    if (st != QAT_OK) return st;
    int n = base->t->n_layers;
    int *tie = malloc((size_t)n * sizeof *tie);
    if (!tie) return qat_ctx_fail(ctx, QAT_ERR_NOMEM, "fit: out of memory");
    p.max_sens = qat_fit_predict(base->t, choice).sensitivity;
    p.max_sens += 1e-9 * (1.0 + fabs(p.max_sens)); /* the row's tolerance; the exact comparison follows */
    if (solve(&p, LEAST_FLASH, ctx, tie) == QAT_OK) {
        qat_fit_result a = qat_fit_predict(base->t, choice), c = qat_fit_predict(base->t, tie);
        if (c.sensitivity <= a.sensitivity && c.flash < a.flash) memcpy(choice, tie, (size_t)n * sizeof *tie);
    }
    qat_ctx_clear_error(ctx);
    free(tie);
    return QAT_OK;
}

int qat_fit_front(const qat_fit_table *t, int64_t arena, int64_t cycles, qat_ctx *ctx, int cap, int *choices,
                  qat_fit_result *points) {
    if (!t || !ctx || !choices || !points || cap < 2 || t->n_layers < 1 || arena < 0 || cycles < 0) return -1;
    int n = t->n_layers;
    problem p = {t, arena, INT64_MAX, cycles && t->has_cycles ? cycles : INT64_MAX, INFINITY};
    if (check(&p, ctx) != QAT_OK) return -1;
    /* the ends: the least flash possible, and the least sensitivity of all */
    int *c = choices;
    if (solve(&p, LEAST_FLASH, ctx, c) != QAT_OK) {
        if (!qat_ctx_error(ctx)[0]) qat_ctx_fail(ctx, QAT_ERR_ARG, "fit: no choice fits %lld cycles", (long long)cycles);
        return -1;
    }
    int64_t lo = qat_fit_predict(t, c).flash;
    if (point(&p, INT64_MAX, ctx, c) != QAT_OK) return -1;
    int64_t hi = qat_fit_predict(t, c).flash;
    int np = 0;
    for (int k = 0; k < cap; k++) { /* budgets evenly from lo to hi; a point found twice is kept once */
        int64_t b = k == cap - 1 ? hi : lo + (int64_t)((double)(hi - lo) * k / (cap - 1));
        int *at = choices + (size_t)np * (size_t)n;
        if (point(&p, b, ctx, at) != QAT_OK) return -1;
        qat_fit_result r = qat_fit_predict(t, at);
        if (np && r.flash == points[np - 1].flash) continue;
        points[np++] = r;
    }
    return np;
}
