/* The fit (qat/fit.h): the knapsack's answer is the brute-force optimum,
 * the front is the brute force's non-dominated set, and the measured
 * table predicts the generated C's constants exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qat/codegen.h"
#include "qat/export.h"
#include "qat/fit.h"
#include "qat/train.h"
#include "test_util.h"

/* A random table: n layers, each with up to 4 widths, flash changes and
 * sensitivities drawn at random (a sensitivity may be negative). */
static qat_fit_table random_table(qat_rng *rng, qat_fit_layer *L, int n) {
    qat_fit_table t = {.n_layers = n, .layers = L, .loss = 1.0, .flash = 5000, .arena = 300};
    for (int i = 0; i < n; i++) {
        qat_fit_layer *f = &L[i];
        memset(f, 0, sizeof *f);
        f->n = 1 + (int)qat_rng_below(rng, 4);
        f->trained = f->n - 1;
        for (int k = 0; k < f->n; k++) {
            f->bits[k] = 2 + 2 * k;
            f->flash[k] = t.flash - (int64_t)qat_rng_below(rng, 700) * (f->n - 1 - k) / 2;
            f->loss[k] = t.loss + (qat_rng_uniform(rng) - 0.1) * (f->n - k);
            f->arena[k] = 300 + (int64_t)qat_rng_below(rng, 60);
            f->cycles[k] = 1000 + (int64_t)qat_rng_below(rng, 4000) * (k + 1);
        }
    }
    return t;
}

/* Every choice of t, by counting: calls visit(choice) for each. */
static void enumerate(const qat_fit_table *t, int *choice, int i, void (*visit)(const qat_fit_table *, const int *, void *),
                      void *user) {
    if (i >= t->n_layers || i >= 6) {
        visit(t, choice, user);
        return;
    }
    for (int k = 0; k < t->layers[i].n; k++) {
        choice[i] = k;
        enumerate(t, choice, i + 1, visit, user);
    }
}

typedef struct {
    int64_t flash, arena, cycles; /* cycles 0: no cycle budget */
    double best;
    int64_t min_flash;
} brute;

static void best_visit(const qat_fit_table *t, const int *choice, void *user) {
    brute *b = user;
    qat_fit_result r = qat_fit_predict(t, choice);
    if (b->arena) /* a choice is allowed only where each layer's own arena fits */
        for (int i = 0; i < t->n_layers; i++)
            if (t->layers[i].arena[choice[i]] > b->arena) return;
    if (r.flash < b->min_flash) b->min_flash = r.flash;
    if (r.flash <= b->flash && (!b->cycles || r.cycles <= b->cycles) && r.sensitivity < b->best) b->best = r.sensitivity;
}

/* 300 random tables and budgets (every other one with a cycle budget
 * too): the solver's sensitivity is the brute force's least within the
 * budgets, its flash and cycles fit, and budgets nothing meets are
 * refused. */
static void test_solve_is_the_optimum(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 17);
    qat_fit_layer L[6];
    int choice[6], all[6], cycle_bound = 0;
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)qat_rng_below(&rng, 6);
        qat_fit_table t = random_table(&rng, L, n);
        brute b = {.flash = 5000 - (int64_t)qat_rng_below(&rng, 1500), .arena = trial % 3 ? 0 : 340, .best = INFINITY,
                   .min_flash = INT64_MAX};
        if (trial % 2) {
            t.has_cycles = true, t.cycles = 20000;
            b.cycles = t.cycles + (int64_t)n * (1000 + (int64_t)qat_rng_below(&rng, 9000));
        }
        enumerate(&t, all, 0, best_visit, &b);
        qat_fit_result r;
        qat_status st = qat_fit_solve(&t, b.flash, b.arena, b.cycles, ctx, choice, &r);
        if (b.min_flash == INT64_MAX) { /* some layer fits the arena at no width */
            CU_ASSERT_EQUAL(st, QAT_ERR_ARG);
        } else if (isinf(b.best)) {
            CU_ASSERT_EQUAL(st, QAT_ERR_ARG);
            CU_ASSERT(strstr(qat_ctx_error(ctx), "nothing fits") != NULL);
        } else {
            CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
            CU_ASSERT(r.flash <= b.flash);
            CU_ASSERT(!b.cycles || r.cycles <= b.cycles);
            if (b.cycles) { /* does the cycle budget change the answer? */
                brute free_b = {.flash = b.flash, .arena = b.arena, .best = INFINITY, .min_flash = INT64_MAX};
                enumerate(&t, all, 0, best_visit, &free_b);
                cycle_bound += free_b.best < b.best - 1e-12;
            }
            CU_ASSERT(fabs(r.sensitivity - b.best) < 1e-9);
            qat_fit_result again = qat_fit_predict(&t, choice);
            CU_ASSERT(again.flash == r.flash && again.sensitivity == r.sensitivity);
        }
        qat_ctx_clear_error(ctx);
    }
    CU_ASSERT(cycle_bound > 0); /* the cycle budget decided some answers: it is a constraint */
    qat_ctx_free(ctx);
}

typedef struct {
    const qat_fit_result *p;
    int np;
    bool dominated; /* some choice is strictly better than a front point in one figure and no worse in the other */
} front_check;

static void front_visit(const qat_fit_table *t, const int *choice, void *user) {
    front_check *f = user;
    qat_fit_result r = qat_fit_predict(t, choice);
    for (int k = 0; k < f->np; k++)
        if ((r.flash <= f->p[k].flash && r.sensitivity < f->p[k].sensitivity - 1e-12) ||
            (r.flash < f->p[k].flash && r.sensitivity <= f->p[k].sensitivity - 1e-12))
            f->dominated = true;
}

/* The front's points: flash ascending, sensitivity descending, none
 * dominated by any choice; the first is the least flash, the last the
 * least sensitivity of all. */
static void test_front_is_non_dominated(void) {
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 29);
    qat_fit_layer L[6];
    int all[6], choices[12 * 6];
    qat_fit_result p[12];
    for (int trial = 0; trial < 100; trial++) {
        int n = 1 + (int)qat_rng_below(&rng, 5);
        qat_fit_table t = random_table(&rng, L, n);
        int np = qat_fit_front(&t, 0, 0, ctx, 12, choices, p);
        CU_ASSERT_FATAL(np >= 1 && np <= 12);
        for (int k = 1; k < np; k++) CU_ASSERT(p[k].flash > p[k - 1].flash && p[k].sensitivity < p[k - 1].sensitivity);
        front_check f = {p, np, false};
        enumerate(&t, all, 0, front_visit, &f);
        CU_ASSERT(!f.dominated);
        brute b = {.flash = INT64_MAX, .best = INFINITY, .min_flash = INT64_MAX};
        enumerate(&t, all, 0, best_visit, &b);
        CU_ASSERT(p[0].flash == b.min_flash && fabs(p[np - 1].sensitivity - b.best) < 1e-9);
    }
    qat_ctx_free(ctx);
}

/* The generated C's constant bytes of m as it stands. */
static int64_t c_flash(qat_model *m) {
    qat_ctx *pctx = qat_ctx_new();
    qat_qmodel q;
    int64_t bytes = -1;
    if (qat_qmodel_lower(m, 0, NULL, pctx, &q) == QAT_OK) {
        qat_codegen_source s;
        if (qat_codegen_generate(&q, "m", &s, NULL, 0) == QAT_OK) bytes = s.info.weight_bytes;
        qat_codegen_source_free(&s);
    }
    qat_ctx_free(pctx);
    return bytes;
}

#define NS 256
#define IN 24

/* A small net trained briefly at W8A8 on a seeded set: the table's
 * trained-width entries equal the model as trained, every choice's
 * predicted flash equals the generated C's with that choice applied (the
 * constants are additive), narrower weights cost fewer bytes, and
 * applying NULL gives back the trained model's loss exactly. */
static void test_measure_predicts_the_c(void) {
    static float x[NS * IN];
    static int32_t y[NS];
    qat_rng rng;
    qat_rng_seed(&rng, 5);
    for (int i = 0; i < NS; i++) {
        y[i] = (int32_t)qat_rng_below(&rng, 3);
        for (int j = 0; j < IN; j++) x[i * IN + j] = qat_rng_normal(&rng) + (j % 3 == y[i] ? 1.5f : 0.0f);
    }
    qat_ctx *ctx = qat_ctx_new();
    qat_array_split s = {.n = NS, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {IN}, .x = x, .y_dtype = QAT_DT_I32,
                         .y = y};
    qat_dataset *d = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &s, NULL, &s, NULL, &d), QAT_OK);
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, "input shape=24\nlinear fc1 input out=32\nrelu r1 fc1\n"
                                              "linear fc2 r1 out=16 wbits=6\nrelu r2 fc2\nlinear fc3 r2 out=3\n", "t"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, 2), QAT_OK);
    qat_train_config c = qat_train_defaults();
    c.data = d, c.epochs = 2, c.batch = 32, c.qat = true, c.optim.lr = 0.01f;
    qat_trainer *tr = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &tr), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_trainer_run(tr), QAT_OK);
    qat_trainer_free(tr);
    qat_task task = {.kind = QAT_TASK_CLASSIFY};
    qat_fit_table t;
    int bits[] = {2, 4, 8};
    CU_ASSERT_EQUAL_FATAL(qat_fit_measure(m, &(qat_fit_data){d, QAT_SPLIT_TRAIN, 0, &task}, bits, 3, ctx, NULL, NULL, &t),
                          QAT_OK);
    CU_ASSERT_EQUAL_FATAL(t.n_layers, 2); /* fc2's bits are the model file's */
    CU_ASSERT(!strcmp(t.layers[0].name, "fc1") && !strcmp(t.layers[1].name, "fc3"));
    CU_ASSERT_EQUAL(t.flash, c_flash(m));
    for (int i = 0; i < 2; i++) {
        const qat_fit_layer *f = &t.layers[i];
        CU_ASSERT_EQUAL(f->trained, 2);
        CU_ASSERT(f->flash[2] == t.flash && f->loss[2] == t.loss);
        CU_ASSERT(f->flash[0] < f->flash[1] && f->flash[1] < f->flash[2]);
        for (int k = 0; k < 3; k++) CU_ASSERT(f->arena_small[k] > 0 && f->arena_small[k] <= f->arena[k]);
    }
    CU_ASSERT(t.layers[0].flash[0] <= t.flash - 32 * 24 / 2); /* fc1 at 2 bits: over half its 768 bytes gone (rows padded to words) */
    for (int a = 0; a < 3; a++) /* every choice: the prediction is the generated C's */
        for (int b = 0; b < 3; b++) {
            int choice[2] = {a, b};
            CU_ASSERT_EQUAL_FATAL(qat_fit_apply(m, &t, choice), QAT_OK);
            CU_ASSERT_EQUAL(c_flash(m), qat_fit_predict(&t, choice).flash);
        }
    CU_ASSERT_EQUAL_FATAL(qat_fit_apply(m, &t, NULL), QAT_OK);
    qat_metrics mt;
    CU_ASSERT_EQUAL_FATAL(qat_model_evaluate(m, d, QAT_SPLIT_TRAIN, 0, &task, NULL, &mt), QAT_OK);
    CU_ASSERT(mt.loss == t.loss);
    qat_metrics_free(&mt);
    int bad[] = {4, 3};
    CU_ASSERT_EQUAL(qat_fit_measure(m, &(qat_fit_data){d, QAT_SPLIT_TRAIN, 0, &task}, bad, 2, ctx, NULL, NULL, &t),
                    QAT_ERR_ARG);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const qat_test_case cases[] = {
        {"the knapsack's choice is the brute-force optimum under flash and arena", test_solve_is_the_optimum},
        {"the front is non-dominated, from the least flash to the least sensitivity", test_front_is_non_dominated},
        {"the measured table predicts the generated C's constants exactly", test_measure_predicts_the_c},
        {NULL, NULL},
    };
    return qat_test_main("fit", cases, argc, argv);
}
