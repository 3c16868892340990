/* A small fork-join pool on pthreads (qat/parallel.h).
 *
 * Why not OpenMP: libgomp keeps one process-wide team that no caller
 * owns, clang builds (the fuzz targets) would need libomp besides, and
 * its spinning is tuned by environment variables the library cannot
 * scope. Here the pool is an object: its threads live and die with it.
 *
 * One loop at a time: the caller publishes (fn, user, n_tasks), bumps the
 * generation, and runs tasks itself; tasks are handed out by an atomic
 * counter, and the caller waits only for the workers that joined the loop
 * (see the state word below), so a worker that the OS descheduled (a
 * shared machine) holds up no one: with no core free, T threads run
 * about as fast as one, not slower. Between loops a worker spins briefly
 * — a training step's loops come microseconds apart, and a sleep/wake
 * through the kernel costs more than a small loop — then sleeps on a
 * condition variable. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "qat/parallel.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spins before sleeping: about 30-60 µs of pause instructions. */
#define SPIN_ROUNDS 1024

/* The loop's state in one word: the generation (bumped for every loop),
 * a CLOSED bit, and the number of workers inside the loop. A worker joins
 * only an open loop of a generation it has not seen (a compare-and-swap
 * that adds one); the caller, once every task is handed out, closes the
 * loop and waits for the workers inside it alone. A worker the OS has
 * descheduled (this machine is shared) is never waited for: it finds the
 * loop closed when it wakes, and the caller has run its tasks. */
#define ACTIVE_MASK ((uint_fast64_t)0xFFFF)
#define CLOSED ((uint_fast64_t)1 << 16)
#define GEN_SHIFT 17

struct qat_pool {
    int n;                 /* threads in all, the caller's included */
    pthread_t *threads;    /* [n - 1] workers */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint_fast64_t state; /* generation, CLOSED, workers inside */
    atomic_int_fast64_t next;   /* the next task to hand out */
    atomic_bool busy;           /* a loop is running (nested calls run inline) */
    int sleepers;               /* workers waiting on wake (under mu) */
    bool caller_waits;          /* the caller sleeps on done (under mu) */
    bool stop;
    qat_task_fn fn;
    void *user;
    int64_t n_tasks;
    double seconds;             /* wall time inside qat_pool_run, and the loops run */
    int64_t loops;
    struct worker_arg {
        qat_pool *pool;
        int index;
    } *args;
};

static void run_tasks(qat_pool *p, int worker) {
    int64_t t;
    while ((t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->n_tasks) p->fn(p->user, t, worker);
}

static uint_fast64_t gen_of(uint_fast64_t s) { return s >> GEN_SHIFT; }

static void *worker_main(void *arg) {
    struct worker_arg *a = arg;
    qat_pool *p = a->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
        if (gen_of(s) == seen) { /* wait for a new loop: spin, then sleep */
            for (int spins = 0; gen_of(s) == seen && spins < SPIN_ROUNDS; spins++) {
                CPU_RELAX();
                s = atomic_load_explicit(&p->state, memory_order_acquire);
            }
            if (gen_of(s) == seen) {
                pthread_mutex_lock(&p->mu);
                while (gen_of(s = atomic_load_explicit(&p->state, memory_order_acquire)) == seen && !p->stop) {
                    p->sleepers++;
                    pthread_cond_wait(&p->wake, &p->mu);
                    p->sleepers--;
                }
                bool stop = p->stop;
                pthread_mutex_unlock(&p->mu);
                if (stop) return NULL;
            }
        }
        if (s & CLOSED) { /* missed it: the caller ran the tasks */
            seen = gen_of(s);
            continue;
        }
        if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acquire, memory_order_relaxed))
            continue; /* the state moved: look again */
        seen = gen_of(s);
        run_tasks(p, a->index);
        uint_fast64_t before = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel);
        if ((before & ACTIVE_MASK) == 1 && (before & CLOSED)) { /* the last one out of a closed loop */
            pthread_mutex_lock(&p->mu);
            if (p->caller_waits) pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

qat_pool *qat_pool_new(int threads, qat_status *status) {
    qat_status st = QAT_OK;
    qat_pool *p = NULL;
    if (threads < 1 || threads > QAT_POOL_MAX) {
        st = QAT_ERR_ARG;
        goto out;
    }
    p = calloc(1, sizeof *p);
    if (!p || (threads > 1 && (!(p->threads = calloc((size_t)threads - 1, sizeof *p->threads)) ||
                               !(p->args = calloc((size_t)threads - 1, sizeof *p->args))))) {
        if (p) free(p->threads), free(p->args);
        free(p);
        p = NULL;
        st = QAT_ERR_NOMEM;
        goto out;
    }
    p->n = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->state, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->busy, false);
    for (int i = 0; i < threads - 1; i++) {
        p->args[i] = (struct worker_arg){p, i + 1};
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
            st = QAT_ERR_STATE; /* the ones started are joined by qat_pool_free */
            qat_pool_free(p);
            p = NULL;
            goto out;
        }
        p->n++;
    }
    /* the tasks call sgemm on blocks they own: OpenBLAS's own threads
     * would multiply the pool's (T tasks × B threads on T cores) */
    if (threads > 1) openblas_set_num_threads(1);
out:
    if (status) *status = st;
    return p;
}

void qat_pool_free(qat_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->args);
    free(p);
}

int qat_pool_threads(const qat_pool *p) { return p ? p->n : 1; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void qat_pool_stats(const qat_pool *p, double *seconds, int64_t *loops) {
    if (seconds) *seconds = p ? p->seconds : 0;
    if (loops) *loops = p ? p->loops : 0;
}

static void run_loop(qat_pool *p, int64_t n_tasks, qat_task_fn fn, void *user);

void qat_pool_run(qat_pool *p, int64_t n_tasks, qat_task_fn fn, void *user) {
    if (n_tasks <= 0) return;
    bool expected = false;
    if (!p || !atomic_compare_exchange_strong_explicit(&p->busy, &expected, true, memory_order_acquire,
                                                       memory_order_relaxed)) {
        for (int64_t t = 0; t < n_tasks; t++) fn(user, t, 0); /* no pool, or nested: inline */
        return;
    }
    if (n_tasks == 1) { /* one task: nothing to split, and not counted */
        fn(user, 0, 0);
        atomic_store_explicit(&p->busy, false, memory_order_release);
        return;
    }
    double t0 = now();
    if (p->n == 1)
        for (int64_t t = 0; t < n_tasks; t++) fn(user, t, 0);
    else
        run_loop(p, n_tasks, fn, user);
    p->seconds += now() - t0;
    p->loops++;
    atomic_store_explicit(&p->busy, false, memory_order_release);
}

static void run_loop(qat_pool *p, int64_t n_tasks, qat_task_fn fn, void *user) {
    p->fn = fn, p->user = user, p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    /* a new generation, open, no worker inside (the last loop ended with none) */
    uint_fast64_t gen = gen_of(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1;
    atomic_store_explicit(&p->state, gen << GEN_SHIFT, memory_order_release);
    pthread_mutex_lock(&p->mu);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    /* every task is handed out: close the loop, then wait for the workers inside */
    uint_fast64_t s = atomic_fetch_or_explicit(&p->state, CLOSED, memory_order_acq_rel) | CLOSED;
    for (int spins = 0; (s & ACTIVE_MASK) && spins < SPIN_ROUNDS * 4; spins++) {
        CPU_RELAX();
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
    if (s & ACTIVE_MASK) {
        pthread_mutex_lock(&p->mu);
        p->caller_waits = true;
        while (atomic_load_explicit(&p->state, memory_order_acquire) & ACTIVE_MASK) pthread_cond_wait(&p->done, &p->mu);
        p->caller_waits = false;
        pthread_mutex_unlock(&p->mu);
    }
}
