/* The training metrics log (qat train --log FILE.csv): what `plot`
 * draws.
 *
 * One CSV file, a header line, then two kinds of rows (the first column
 * says which; empty fields are "not known here"):
 *   step   every N steps: the mean loss since the previous row, the learning
 *          rate, samples/s since the previous row, the QAT phase, and each
 *          quantization point's observed range and scale;
 *   epoch  after every epoch: the mean loss of the epoch, then the test
 *          figure of the float weights, of the fake-quantized model and of
 *          the integer program (lowered in memory and run by the int
 *          engine): a classifier's accuracy in the acc_ columns, the mean
 *          squared error of a regression or an autoencoder in the mse_
 *          ones (the task's other three stay empty); and the points again.
 * Columns: kind,step,epoch,loss,lr,samples_per_s,fake_quant,observers_frozen,
 * acc_float,acc_fake_quant,acc_int,mse_float,mse_fake_quant,mse_int, then
 * <point>.min,<point>.max,<point>.scale for every point the QAT pass
 * places (named before it runs, so a run's float epochs have the columns
 * too, empty). Logs written before the mse_ columns existed are read as
 * if those were empty. */
#ifndef QAT_TOOL_METRICS_LOG_H
#define QAT_TOOL_METRICS_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "qat/data.h"
#include "qat/layers.h"
#include "qat/train.h"

typedef struct {
    FILE *f;
    int n_points;
    int *points;             /* layer ids of the quantization points */
    long every;              /* a step row every `every` steps */
    int64_t steps_per_epoch;
    double loss_sum;         /* since the last step row */
    int64_t loss_n, samples;
    double last_time;
    bool measuring;          /* the run logs: epochs are measured (f: and written here) */
    const char *path;        /* metrics_log_open's, until metrics_log_start */
    char *header;            /* this run's header line, until metrics_log_start */
    int64_t resume_step;
    bool append;             /* a resume continues the file */
} metrics_log;

/* Makes ready to log the run of model m (built), whose QAT configuration
 * is qcfg (NULL: a float run), to path, and checks what it can without
 * writing: a resume (resume_step: the checkpoint's step; -1: not a
 * resume) continues an existing log only if its header is this run's.
 * 0, or a message in err and the exit status: EXIT_USAGE when the file
 * is another run's log, 1 otherwise. */
int metrics_log_open(metrics_log *g, const char *path, int64_t resume_step, const qat_model *m,
                     const qat_prepare_config *qcfg, long every, int64_t steps_per_epoch, char *err, size_t len);
/* Once the run starts (after an MPI job's ranks agree): a resume's log
 * loses its rows past resume_step (a run that went on past its last
 * checkpoint and died: the resumed run measures those steps again) and a
 * last row cut short, and is appended to; otherwise the file is started
 * afresh. Rows go out a line at a time. 0, or a message in err and -1. */
int metrics_log_start(metrics_log *g, char *err, size_t len);
/* After a step: step is the number of steps done, b its samples. */
void metrics_log_step(metrics_log *g, const qat_model *m, int64_t step, double loss, float lr, int64_t b);
/* After an epoch: its mean loss and the test metrics already measured
 * (the fake-quantized model's once QAT runs); measures the others (each
 * process its share, with dist). A log that is measuring without a file
 * (an MPI rank > 0: metrics_log_follow) measures the same way and writes
 * nothing: an evaluation can touch the model's state (weight scales are
 * recomputed when fake quantization is switched on), so every rank must
 * run it for the ranks to stay equal. */
void metrics_log_epoch(metrics_log *g, qat_model *m, int64_t step, long epoch, double loss, const qat_metrics *test,
                       qat_dataset *data, int64_t limit, const qat_train_dist *dist);
/* A log on a process that does not write it: metrics_log_epoch measures. */
void metrics_log_follow(metrics_log *g);
/* Flushes and closes (accepts a log never opened); -1 on a write error. */
int metrics_log_close(metrics_log *g);

/* ---- reading it (metrics_log_read.c) ---------------------------------------- */

/* The fixed columns, in order; the points' (min, max, scale) follow. */
enum {
    C_KIND, C_STEP, C_EPOCH, C_LOSS, C_LR, C_RATE, C_FQ, C_FROZEN, C_ACC_FLOAT, C_ACC_FAKE, C_ACC_INT,
    C_MSE_FLOAT, C_MSE_FAKE, C_MSE_INT, C_FIXED
};

typedef struct {
    int n_cols, n_points; /* n_cols: of the rows in memory, this layout's */
    int file_cols;        /* of the file's rows: n_cols - 3 for a log without the mse_ columns */
    char **names;     /* [n_points]: point names (the header's "<name>.min" without ".min") */
    int n_rows, cap;
    bool *is_epoch;   /* [n_rows] */
    double *v;        /* [n_rows][n_cols], NAN where empty (and in column C_KIND) */
} metrics_log_data;

/* Reads a log whole: 0, or -1 with a message naming the file, the line
 * and the field in err. metrics_log_free afterwards either way. */
int metrics_log_read(const char *path, metrics_log_data *d, char *err, size_t len);
void metrics_log_free(metrics_log_data *d);
/* The value at row r, column c. */
double *metrics_log_cell(const metrics_log_data *d, int r, int c);

#endif
