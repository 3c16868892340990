/* qat's data-parallel glue: the processes of an `mpirun -np N
 * qat train ...` job, and the reductions the training loop needs.
 *
 * The library knows nothing of MPI: it reduces observer ranges and
 * BatchNorm sums through a qat_reducer (qat/parallel.h), which dist
 * implements with MPI_Allreduce; the gradient block is all-reduced here,
 * once per step. Built without MPI (or run without mpirun: no
 * OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK in the environment), a job
 * is one process of rank 0 and every function is a no-op. See
 * docs/parallel.md. */
#ifndef QAT_TOOL_DIST_H
#define QAT_TOOL_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat/parallel.h"

typedef struct {
    int rank, size; /* 0, 1 without MPI */
    bool mpi;       /* MPI was initialised (and must be finalised) */
    char msg[256];  /* the last error */
    /* the watchdog (docs/parallel.md, "A silent rank"): */
    double timeout_s;      /* a collective may wait this long (DIST_TIMEOUT_S; 0: forever) */
    long long collectives; /* collectives entered so far */
    const char *ckpt_note; /* rank 0: "; the last complete checkpoint is ..." ("" before any), or NULL */
    const char *out_path;  /* the checkpoint rank 0 writes (--out), or NULL */
    int err_fd;            /* where the watchdog's message goes (a muted rank's own stderr) */
} dist;

/* The processes of the MPI job this one was launched in, from the
 * launcher's environment (1 outside one; 2 for a PMIx launch's rank
 * above 0, which names no size): only train runs as a job. */
int dist_launched_ranks(void);

/* The default collective timeout, seconds (train --mpi-timeout S). Long
 * enough for any wait of a healthy job (rank 0 saving a checkpoint while
 * the others wait at the next step: seconds), short enough that a job
 * with a stopped rank ends within minutes. */
#define DIST_TIMEOUT_S 300.0

/* Joins the job when launched by mpirun (MPI_Init_thread, FUNNELED: only
 * the main thread calls MPI; the pool's threads never do). 0, or 1 with
 * d->msg set. */
int dist_init(dist *d, int *argc, char ***argv);
void dist_finalize(dist *d);
/* Ends every process of the job with status rc (MPI_Abort): one process's
 * error must not leave the others waiting in a collective. Returns rc
 * when there is no job to end. */
int dist_abort(dist *d, int rc);

/* The reducer for qat_ctx_set_reducer: sums with MPI_SUM; ranges with one
 * MPI_MIN over [lo, -hi] (min of -hi is -max: exact). */
qat_reducer dist_reducer(dist *d);
/* v[i] summed over the job, in place (MPI_FLOAT, MPI_SUM): the gradient
 * block. 0, or 1 with d->msg set. */
int dist_sum_floats(dist *d, float *v, int64_t n);
int dist_sum_i64(dist *d, int64_t *v, int n);
/* Are these bytes the same on every process? An MPI_BAND and an MPI_BOR
 * of them as 64-bit words agree exactly when they are: no hash, no
 * collision. 1 same, 0 different, -1 error. */
int dist_identical(dist *d, const void *bytes, size_t n);
/* Waits for every process. */
void dist_barrier(dist *d);
/* The processes' agreement on whether their setup went well: each calls it
 * exactly once, with its own status rc (0: ready to train), before any
 * other collective. *first is the lowest rank whose rc is not 0 (size if
 * none) and *first_rc its status; so every process learns, together,
 * whether the job goes on and which rank's refusal is the one to report.
 * A refusal that every rank meets alike (an option, the data, an output
 * path) then ends the job with one message and no MPI_Abort. 0, or 1 with
 * d->msg set (the collective itself failed). */
int dist_agree(dist *d, int rc, int *first, int *first_rc);

/* Every collective above waits at most d->timeout_s (set it after
 * dist_init; dist_init sets DIST_TIMEOUT_S): each is non-blocking
 * (MPI_Iallreduce, MPI_Ibarrier) and polled against a deadline, and while
 * it waits it answers the other ranks' watchdog queries. When the
 * deadline passes, the rank asks every other rank whether it is waiting
 * too (point-to-point, a second at most for the answers): the ranks that
 * do not answer are the silent ones (stopped, hung, cut off, or still
 * computing after the whole timeout). The lowest rank that answered
 * prints one line naming the silent rank(s), the collective and the last
 * complete checkpoint, and ends the job with MPI_Abort. */

#endif
