/* qat/fit.h — a weight precision per layer, chosen to fit a device's
 * flash and RAM (docs/fit.md; the `qat fit` command drives it).
 *
 * The measurement takes a trained QAT model (qat_checkpoint_model) and,
 * for every Linear/Conv whose weights the choice may change and every
 * candidate bit width, re-prepares that layer alone at those bits
 * (qat_prepare_layer: min-max weight scales from the trained weights, its
 * activation's observed range kept) and records
 *   - the calibration loss and metric (qat_model_evaluate, eval mode, the
 *     rest of the model at its trained precision): the sensitivity is the
 *     loss increase over the model as trained;
 *   - the generated C's constant bytes and arena (qat_codegen_generate on
 *     the lowered program): exact, since the generator is the one that
 *     builds the firmware.
 * Constants are additive over layers (each op stores its own), so a
 * configuration's flash is the trained model's plus each layer's change;
 * its arena is taken as the largest of its layers' measured arenas (an
 * op's scratch for unpacking packed weights is the only part that moves
 * with weight bits), with the default plan or the small-RAM one (both are
 * measured; table.small_ram says which the choice counts). The final
 * build is checked on the linked binary.
 *
 * Cycles are the caller's to fill (the qat tool measures them on a
 * Cortex-M4 build under qemu, each fitted layer's op at each width:
 * layers[i].cycles[k], the rest of the program in t.cycles, has_cycles);
 * they are additive over ops too.
 *
 * The choice minimises the summed sensitivity (HAWQ's additive model)
 * under the flash budget and, with cycles, a cycle budget, exactly: a
 * multiple-choice knapsack written as a 0-1 integer program and solved by
 * GLPK's branch and cut. The same solver gives the Pareto front of flash
 * against predicted loss.
 *
 *     qat_fit_table t;
 *     qat_fit_measure(m, &(qat_fit_data){d, QAT_SPLIT_VAL, 0, &task}, (int[]){2, 4, 8}, 3, ctx, &t);
 *     int choice[t.n_layers];  qat_fit_result r;
 *     qat_fit_solve(&t, 30000, 4096, 0, ctx, choice, &r);   // t.layers[i].bits[choice[i]]
 */
#ifndef QAT_FIT_H
#define QAT_FIT_H

#include "qat/layers.h"
#include "qat/train.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QAT_FIT_MAX_CHOICES 8 /* candidate bit widths per layer */

/* The calibration data: a split (its first `limit` samples; 0: all). */
typedef struct {
    qat_dataset *data;
    qat_split split;
    int64_t limit;
    const qat_task *task;
} qat_fit_data;

/* One layer whose weight bits the choice sets. */
typedef struct {
    int layer;                            /* the model's layer id */
    const char *name;                     /* the layer's name (the model's string) */
    int64_t weights;                      /* its weight elements */
    int n;                                /* candidates */
    int bits[QAT_FIT_MAX_CHOICES];        /* ascending */
    double loss[QAT_FIT_MAX_CHOICES];     /* calibration loss, this layer alone at bits[k] */
    double metric[QAT_FIT_MAX_CHOICES];   /* accuracy (classify) or mse, the same way */
    int64_t flash[QAT_FIT_MAX_CHOICES];   /* the generated C's constant bytes then */
    int64_t arena[QAT_FIT_MAX_CHOICES];   /* and its arena (the default plan) */
    int64_t arena_small[QAT_FIT_MAX_CHOICES]; /* its arena with the small-RAM plan (qat_codegen_options) */
    int64_t cycles[QAT_FIT_MAX_CHOICES];  /* its op's estimated cycles per inference (has_cycles; the caller's) */
    int trained;                          /* index of the bits it was trained at (-1: not a candidate) */
    qat_prepare_config config;            /* the configuration it was trained with */
} qat_fit_layer;

typedef struct {
    int n_layers;
    qat_fit_layer *layers;                /* [n_layers], in ctx */
    double loss, metric;                  /* the model as trained */
    int64_t flash, arena, arena_small;    /* its generated C's constants and arena (both plans) */
    bool metric_higher;                   /* accuracy: higher is better; mse: lower */
    bool small_ram;                       /* which plan's arenas the choice counts (the caller sets it) */
    bool has_cycles;                      /* layers[i].cycles and cycles are filled (the caller's) */
    int64_t cycles;                       /* the cycles of every op that is not a fitted layer's */
} qat_fit_table;

/* Measures m (prepared, trained: every activation observer has seen
 * data; min-max weights, not LSQ) for candidate weight bits bits[0..n)
 * (2..8, ascending, at most QAT_FIT_MAX_CHOICES), on every Linear/Conv
 * whose precision the model file did not set; m is as it was after.
 * Progress (may be NULL) is told each measurement (done, total). The
 * table lives in ctx. QAT_ERR_ARG, _UNSUPPORTED (LSQ, a program the C
 * generator cannot express), or the evaluation's error. */
QAT_API qat_status qat_fit_measure(qat_model *m, const qat_fit_data *d, const int *bits, int n, qat_ctx *ctx,
                                   void (*progress)(void *user, int done, int total), void *user,
                                   qat_fit_table *out);

/* A configuration's predicted figures. */
typedef struct {
    int64_t flash, arena;                 /* constants and arena, as the table predicts them */
    int64_t cycles;                       /* estimated cycles per inference (0 without has_cycles) */
    double sensitivity;                   /* summed loss increase over the model as trained */
} qat_fit_result;

/* The choice (choice[i]: an index into layers[i].bits) of least summed
 * sensitivity whose constants fit flash bytes and, when the table has
 * cycles and cycles > 0, whose predicted cycles fit cycles, using only
 * candidates whose arena fits arena bytes (0: any). QAT_ERR_ARG when
 * nothing fits (the message gives the least flash or cycles possible),
 * QAT_ERR_NOMEM. */
QAT_API qat_status qat_fit_solve(const qat_fit_table *t, int64_t flash, int64_t arena, int64_t cycles, qat_ctx *ctx,
                                 int *choice, qat_fit_result *out);

/* The Pareto front of flash against summed sensitivity under the arena
 * and cycle limits (0: none), at most cap points: the best choice within
 * cap budgets spread evenly from the least flash possible to the flash of
 * the least sensitivity (both ends kept, a point found twice kept once;
 * of equally sensitive choices the one of least flash), smallest flash
 * first: each point's choice goes to choices[k * n_layers + i]. Returns
 * the number of points, or -1 (the error on ctx). */
QAT_API int qat_fit_front(const qat_fit_table *t, int64_t arena, int64_t cycles, qat_ctx *ctx, int cap, int *choices,
                          qat_fit_result *points);

/* The predicted figures of any choice. */
QAT_API qat_fit_result qat_fit_predict(const qat_fit_table *t, const int *choice);

/* Puts m's fitted layers at a choice's bits (qat_prepare_layer), to
 * evaluate it; choice NULL: back to the bits each was trained at. */
QAT_API qat_status qat_fit_apply(qat_model *m, const qat_fit_table *t, const int *choice);

#ifdef __cplusplus
}
#endif
#endif
