/* MPI for qat train (dist.h). Compiled with QAT_HAVE_MPI when CMake
 * found an MPI; otherwise the single-process stubs at the end. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Launched by an MPI launcher? (OpenMPI sets OMPI_COMM_WORLD_SIZE, MPICH
 * and PMIx-based ones PMI_SIZE or PMIX_RANK.) A plain run does not
 * initialise MPI at all: no singleton daemon, no delay, no MPI in its
 * valgrind report. */
static bool launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
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

int dist_init(dist *d, int *argc, char ***argv) {
    *d = (dist){.rank = 0, .size = 1};
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
    (void)user;
    if (n > INT32_MAX) return snprintf(msg, len, "too many values"), QAT_ERR_ARG;
    return mpi_status(MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce",
                      msg, len);
}

static qat_status reduce_minmax(void *user, float *lo, float *hi, int64_t n, char *msg, size_t len) {
    (void)user;
    float buf[64], *b = n <= 32 ? buf : malloc((size_t)(2 * n) * sizeof *b);
    if (!b || n > INT32_MAX / 2) return snprintf(msg, len, "out of memory"), QAT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) b[i] = lo[i], b[n + i] = -hi[i];
    qat_status st = mpi_status(MPI_Allreduce(MPI_IN_PLACE, b, (int)(2 * n), MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD),
                               "MPI_Allreduce", msg, len);
    for (int64_t i = 0; st == QAT_OK && i < n; i++) lo[i] = b[i], hi[i] = -b[n + i];
    if (b != buf) free(b);
    return st;
}

qat_reducer dist_reducer(dist *d) { return (qat_reducer){.sum = reduce_sum, .minmax = reduce_minmax, .user = d}; }

int dist_sum_floats(dist *d, float *v, int64_t n) {
    if (!d->mpi || d->size == 1) return 0;
    if (n > INT32_MAX) return snprintf(d->msg, sizeof d->msg, "gradient block too large for one MPI call"), 1;
    return mpi_status(MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Allreduce of the gradients", d->msg, sizeof d->msg) != QAT_OK;
}

int dist_sum_i64(dist *d, int64_t *v, int n) {
    if (!d->mpi || d->size == 1) return 0;
    return mpi_status(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce",
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
    int rc = MPI_Allreduce(MPI_IN_PLACE, band, (int)words, MPI_UINT64_T, MPI_BAND, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, bor, (int)words, MPI_UINT64_T, MPI_BOR, MPI_COMM_WORLD);
    int same = mpi_status(rc, "MPI_Allreduce", d->msg, sizeof d->msg) != QAT_OK ? -1
                                                                             : !memcmp(band, bor, words * sizeof *band);
    free(band);
    return same;
}

void dist_barrier(dist *d) {
    if (d->mpi && d->size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

#else /* no MPI: one process */

int dist_init(dist *d, int *argc, char ***argv) {
    (void)argc, (void)argv;
    *d = (dist){.rank = 0, .size = 1};
    if (launched()) {
        snprintf(d->msg, sizeof d->msg, "launched by mpirun, but this qat was built without MPI "
                 "(install libopenmpi-dev and rebuild: scripts/setup-deps.sh)");
        return 1;
    }
    return 0;
}
void dist_finalize(dist *d) { (void)d; }
int dist_abort(dist *d, int rc) { return (void)d, rc; }
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
