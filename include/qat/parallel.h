/* qat/parallel.h — threads within a process, and the hook through which
 * statistics are reduced across processes (data-parallel training).
 *
 * A pool is a caller-owned object: T threads (the caller's own plus T - 1
 * workers) that run the tasks of one parallel loop at a time. A context
 * that is given a pool (qat_ctx_set_pool in qat/autograd.h) splits its
 * ops' work over it: the per-sample im2col/col2im and sgemm loops of the
 * convolutions, pooling, element-wise ops, fake quantization and the
 * observers' ranges, BatchNorm's channels, the linear layers' sgemm by
 * blocks of rows; the optimizer (qat_optim_set_pool) and the integer
 * engine (over the batch) use it too. The library keeps no pool of its
 * own and starts no thread unless given one.
 *
 * Results do not depend on the number of threads: every loop is cut into
 * tasks by the size of the problem alone, never by the thread count, and
 * a reduction adds its tasks' partial results in task order. One thread
 * and eight give the same bits (docs/parallel.md has the list of where
 * the cut itself changed bits relative to the loops before threading).
 *
 * OpenBLAS: the pool's tasks call sgemm on their own blocks, so OpenBLAS
 * must not start threads of its own inside them, or T tasks would each
 * start B threads on T cores. qat_pool_new therefore sets OpenBLAS to one
 * thread (openblas_set_num_threads(1)) when T > 1; see qat_set_threads.
 *
 * The reducer is the hook for data-parallel training across processes:
 * a context given one (qat_ctx_set_reducer) reduces the statistics that
 * must be global — the observers' batch ranges (min, max) and
 * BatchNorm's batch sums in training (synchronized BatchNorm) — through
 * the caller's functions, e.g. MPI_Allreduce in the qat tool. The library
 * itself knows nothing of MPI. */
#ifndef QAT_PARALLEL_H
#define QAT_PARALLEL_H

#include <stdint.h>

#include "qat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qat_pool qat_pool;

/* A pool of `threads` threads in all (1..QAT_POOL_MAX): the caller's
 * thread and threads - 1 workers, started here. NULL when the threads
 * cannot be started or threads is out of range; *status (may be NULL)
 * says which. One caller thread at a time may run loops on a pool. */
#define QAT_POOL_MAX 256
QAT_API qat_pool *qat_pool_new(int threads, qat_status *status);
/* Stops and joins the workers. Accepts NULL. No context may use it after. */
QAT_API void qat_pool_free(qat_pool *pool);
/* Its thread count; 1 for NULL. */
QAT_API int qat_pool_threads(const qat_pool *pool);

/* Runs fn(user, task, worker) for every task in [0, n_tasks), spread
 * over the pool's threads (worker in [0, threads): which thread, for
 * per-thread scratch memory; the task alone decides what is computed).
 * Returns when all have run. NULL pool, one thread, one task, or a call
 * from inside a task: the tasks run in order on the calling thread. */
typedef void (*qat_task_fn)(void *user, int64_t task, int worker);
QAT_API void qat_pool_run(qat_pool *pool, int64_t n_tasks, qat_task_fn fn, void *user);

/* Wall time spent in qat_pool_run's loops of two tasks or more since the
 * pool was made, and their count (NULL pool: 0): with one thread, the
 * share of a run that more threads would split, which bounds what they
 * can gain (Amdahl). */
QAT_API void qat_pool_stats(const qat_pool *pool, double *seconds, int64_t *loops);

/* ---- reducing statistics across processes ------------------------------------ */

/* Each function reduces in place over every participant (every process
 * of the data-parallel job) and must leave the same values on all of
 * them; every participant calls it at the same point with the same n.
 * Returns QAT_OK, or an error status (the op that asked then fails with
 * the message written into msg, NUL-terminated, at most msg_len bytes). */
typedef struct {
    /* v[i] = Σ over participants of v[i] (doubles: BatchNorm's sums) */
    qat_status (*sum)(void *user, double *v, int64_t n, char *msg, size_t msg_len);
    /* lo[i] = min over participants, hi[i] = max (observers' ranges);
     * never NaN; an empty batch contributes +inf, -inf */
    qat_status (*minmax)(void *user, float *lo, float *hi, int64_t n, char *msg, size_t msg_len);
    void *user;
} qat_reducer;

#ifdef __cplusplus
}
#endif
#endif
