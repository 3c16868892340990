/* MPI for qat train (dist.h). Compiled with QAT_HAVE_MPI when CMake
 * found an MPI; otherwise the single-process stubs at the end. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Launched by an MPI launcher? (OpenMPI sets OMPI_COMM_WORLD_SIZE, MPICH
 * and PMIx-based ones PMI_SIZE or PMIX_RANK.) A plain run does not
 * initialise MPI at all: no singleton daemon, no delay, no MPI in its
 * valgrind report. */
static bool launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int dist_launched_ranks(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    long n = v ? strtol(v, NULL, 10) : 1;
    if (n > 1) return n < 1 << 20 ? (int)n : 1 << 20;
    if (v) return 1;
    /* a PMIx launch names the rank only: a rank above 0 is not alone */
    const char *r = getenv("PMIX_RANK");
    return r && strtol(r, NULL, 10) > 0 ? 2 : 1;
}

#ifdef QAT_HAVE_MPI
#include <mpi.h>

static qat_status mpi_status(int rc, const char *what, char *msg, size_t len) {
    if (rc == MPI_SUCCESS) return QAT_OK;
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    snprintf(msg, len, "%s: %.*s", what, n, s);
    return QAT_ERR_IO;
}

/* ---- the watchdog ------------------------------------------------------------------ */

enum { TAG_QUERY = 0x7a71, TAG_REPLY = 0x7a72 }; /* point-to-point on MPI_COMM_WORLD: the job sends no other */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pause_us(long us) {
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

/* Answers the queries of ranks whose watchdog fired: "I am waiting in a
 * collective too". Marks who asked in heard (may be NULL). */
static void answer_queries(dist *d, char *heard) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag) return;
        long long q = 0, me = d->collectives;
        MPI_Recv(&q, 1, MPI_LONG_LONG, st.MPI_SOURCE, TAG_QUERY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&me, 1, MPI_LONG_LONG, st.MPI_SOURCE, TAG_REPLY, MPI_COMM_WORLD); /* to a live rank: returns */
        if (heard) heard[st.MPI_SOURCE] = 1;
    }
}

/* The deadline passed in `what`: find the silent ranks, and end the job
 * (never returns). */
static void fire(dist *d, const char *what, double waited) {
    int n = d->size;
    char *heard = calloc((size_t)n, 1);
    long long *qbuf = calloc((size_t)n, sizeof *qbuf);
    MPI_Request *reqs = calloc((size_t)n, sizeof *reqs);
    if (!heard || !qbuf || !reqs) MPI_Abort(MPI_COMM_WORLD, 1);
    heard[d->rank] = 1;
    for (int r = 0; r < n; r++) /* never waited for: a stopped rank never receives it */
        if (r != d->rank) qbuf[r] = d->collectives, MPI_Isend(&qbuf[r], 1, MPI_LONG_LONG, r, TAG_QUERY, MPI_COMM_WORLD, &reqs[r]);
    const double grace = 1.0; /* a rank waiting in a collective answers within a millisecond */
    int count = 1;
    for (double t0 = now_s(); count < n && now_s() - t0 < grace; pause_us(1000)) {
        int flag = 0;
        MPI_Status st;
        while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, MPI_COMM_WORLD, &flag, &st) == MPI_SUCCESS && flag) {
            long long r = 0;
            MPI_Recv(&r, 1, MPI_LONG_LONG, st.MPI_SOURCE, TAG_REPLY, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            heard[st.MPI_SOURCE] = 1;
        }
        answer_queries(d, heard); /* a rank whose watchdog fired too is waiting: heard */
        count = 0;
        for (int r = 0; r < n; r++) count += heard[r];
    }
    int printer = 0;
    while (!heard[printer]) printer++;
    if (printer == d->rank) {
        char silent[200] = "", line[1200];
        for (int r = 0; r < n; r++)
            if (!heard[r]) {
                size_t k = strlen(silent);
                snprintf(silent + k, sizeof silent - k, "%s%d", k ? ", " : "", r);
            }
        char note[700];
        if (!heard[0]) /* rank 0, which writes the checkpoints, is silent: what is on disk is whole */
            snprintf(note, sizeof note, d->out_path ? "; rank 0 writes the checkpoints: %.400s holds the last complete "
                     "one (saves are atomic)\n" : "; no checkpoint is written (no --out)%.0s\n",
                     d->out_path ? d->out_path : "");
        else if (d->ckpt_note && d->ckpt_note[0])
            snprintf(note, sizeof note, "%s", d->ckpt_note);
        else
            snprintf(note, sizeof note, "; %s\n", d->out_path ? "no checkpoint written yet" : "no checkpoint is written (no --out)");
        int len = snprintf(line, sizeof line, "\nqat: rank %d: %s %s silent: waited %.1f s for %s "
                           "(collective %lld; the timeout is %g s, --mpi-timeout): stopped, hung or cut off; ending the "
                           "job%s", d->rank, n - count == 1 ? "rank" : "ranks", count == n ? "none" : silent, waited,
                           what, d->collectives, d->timeout_s, note);
        ssize_t w = write(d->err_fd, line, len > 0 && len < (int)sizeof line ? (size_t)len : sizeof line - 1);
        (void)w;
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (double t0 = now_s(); now_s() - t0 < 5.0; pause_us(1000)) answer_queries(d, NULL); /* the printer aborts */
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return */
}

/* Waits for a non-blocking collective until it completes or the deadline
 * passes. It spins on MPI_Test for the first 10 ms (a step's collective
 * completes in microseconds to milliseconds: no added latency), then
 * polls every 200 us, answering watchdog queries every millisecond. */
static int wait_req(dist *d, MPI_Request *req, const char *what) {
    d->collectives++;
    double start = now_s(), last_answer = start;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
        double t = now_s();
        if (t - last_answer > 0.001) answer_queries(d, NULL), last_answer = t;
        if (d->timeout_s > 0 && t - start > d->timeout_s) fire(d, what, t - start);
        if (t - start > 0.01) pause_us(200);
    }
}

static int allreduce(dist *d, void *buf, int n, MPI_Datatype type, MPI_Op op, const char *what) {
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, op, MPI_COMM_WORLD, &req);
    return rc == MPI_SUCCESS ? wait_req(d, &req, what) : rc;
}

int dist_init(dist *d, int *argc, char ***argv) {
    *d = (dist){.rank = 0, .size = 1, .timeout_s = DIST_TIMEOUT_S, .err_fd = 2};
    if (!launched()) return 0;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(d->msg, sizeof d->msg, "MPI_Init_thread failed");
        return 1;
    }
    d->mpi = true;
    /* errors come back as codes (and messages), not as a silent abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (provided < MPI_THREAD_FUNNELED) {
        snprintf(d->msg, sizeof d->msg, "the MPI library gives no MPI_THREAD_FUNNELED support");
        return 1;
    }
    return 0;
}

void dist_finalize(dist *d) {
    if (d->mpi) MPI_Finalize();
    d->mpi = false;
}

int dist_abort(dist *d, int rc) {
    if (d->mpi && d->size > 1) {
        fflush(stdout), fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    return rc;
}

static qat_status reduce_sum(void *user, double *v, int64_t n, char *msg, size_t len) {
    if (n > INT32_MAX) return snprintf(msg, len, "too many values"), QAT_ERR_ARG;
    return mpi_status(allreduce(user, v, (int)n, MPI_DOUBLE, MPI_SUM, "an all-reduce of BatchNorm statistics"),
                      "MPI_Iallreduce", msg, len);
}

static qat_status reduce_minmax(void *user, float *lo, float *hi, int64_t n, char *msg, size_t len) {
    float buf[64], *b = n <= 32 ? buf : malloc((size_t)(2 * n) * sizeof *b);
    if (!b || n > INT32_MAX / 2) return snprintf(msg, len, "out of memory"), QAT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) b[i] = lo[i], b[n + i] = -hi[i];
    qat_status st = mpi_status(allreduce(user, b, (int)(2 * n), MPI_FLOAT, MPI_MIN, "an all-reduce of observer ranges"),
                               "MPI_Iallreduce", msg, len);
    for (int64_t i = 0; st == QAT_OK && i < n; i++) lo[i] = b[i], hi[i] = -b[n + i];
    if (b != buf) free(b);
    return st;
}

qat_reducer dist_reducer(dist *d) { return (qat_reducer){.sum = reduce_sum, .minmax = reduce_minmax, .user = d}; }

int dist_sum_floats(dist *d, float *v, int64_t n) {
    if (!d->mpi || d->size == 1) return 0;
    if (n > INT32_MAX) return snprintf(d->msg, sizeof d->msg, "gradient block too large for one MPI call"), 1;
    return mpi_status(allreduce(d, v, (int)n, MPI_FLOAT, MPI_SUM, "the all-reduce of the gradients"),
                      "MPI_Iallreduce of the gradients", d->msg, sizeof d->msg) != QAT_OK;
}

int dist_sum_i64(dist *d, int64_t *v, int n) {
    if (!d->mpi || d->size == 1) return 0;
    return mpi_status(allreduce(d, v, n, MPI_INT64_T, MPI_SUM, "an all-reduce of evaluation counts"), "MPI_Iallreduce",
                      d->msg, sizeof d->msg) != QAT_OK;
}

int dist_identical(dist *d, const void *bytes, size_t n) {
    if (!d->mpi || d->size == 1) return 1;
    size_t words = (n + 7) / 8;
    uint64_t *band = calloc(2 * words + 1, sizeof *band);
    if (!band) return snprintf(d->msg, sizeof d->msg, "out of memory"), -1;
    uint64_t *bor = band + words;
    memcpy(band, bytes, n);
    memcpy(bor, bytes, n);
    int rc = allreduce(d, band, (int)words, MPI_UINT64_T, MPI_BAND, "the comparison of the ranks' states");
    if (rc == MPI_SUCCESS) rc = allreduce(d, bor, (int)words, MPI_UINT64_T, MPI_BOR, "the comparison of the ranks' states");
    int same = mpi_status(rc, "MPI_Iallreduce", d->msg, sizeof d->msg) != QAT_OK ? -1
                                                                              : !memcmp(band, bor, words * sizeof *band);
    free(band);
    return same;
}

void dist_barrier(dist *d) {
    if (!d->mpi || d->size == 1) return;
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS) wait_req(d, &req, "a barrier");
}

int dist_agree(dist *d, int rc, int *first, int *first_rc) {
    *first = rc ? d->rank : d->size, *first_rc = rc;
    if (!d->mpi || d->size == 1) return 0;
    /* MINLOC on (key, rc) pairs: the smallest key, and the rc paired with
     * it (the keys of failed ranks are their distinct rank numbers) */
    int pair[2] = {*first, rc};
    if (mpi_status(allreduce(d, pair, 1, MPI_2INT, MPI_MINLOC, "the ranks' agreement that they are ready to train"),
                   "MPI_Iallreduce", d->msg, sizeof d->msg) != QAT_OK)
        return 1;
    *first = pair[0], *first_rc = pair[1];
    return 0;
}

#else /* no MPI: one process */

int dist_init(dist *d, int *argc, char ***argv) {
    (void)argc, (void)argv;
    *d = (dist){.rank = 0, .size = 1, .timeout_s = DIST_TIMEOUT_S, .err_fd = 2};
    if (launched()) {
        snprintf(d->msg, sizeof d->msg, "launched by mpirun, but this qat was built without MPI "
                 "(install libopenmpi-dev and rebuild: scripts/setup-deps.sh)");
        return 1;
    }
    return 0;
}
void dist_finalize(dist *d) { (void)d; }
int dist_abort(dist *d, int rc) { return (void)d, rc; }
int dist_agree(dist *d, int rc, int *first, int *first_rc) {
    *first = rc ? d->rank : d->size, *first_rc = rc;
    return 0;
}
static qat_status no_sum(void *u, double *v, int64_t n, char *m, size_t l) { return (void)u, (void)v, (void)n, (void)m, (void)l, QAT_OK; }
static qat_status no_minmax(void *u, float *a, float *b, int64_t n, char *m, size_t l) {
    return (void)u, (void)a, (void)b, (void)n, (void)m, (void)l, QAT_OK;
}
qat_reducer dist_reducer(dist *d) { return (qat_reducer){.sum = no_sum, .minmax = no_minmax, .user = d}; }
int dist_sum_floats(dist *d, float *v, int64_t n) { return (void)d, (void)v, (void)n, 0; }
int dist_sum_i64(dist *d, int64_t *v, int n) { return (void)d, (void)v, (void)n, 0; }
int dist_identical(dist *d, const void *bytes, size_t n) { return (void)d, (void)bytes, (void)n, 1; }
void dist_barrier(dist *d) { (void)d; }
#endif
