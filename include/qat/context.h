/* qat/context.h — the context every allocating module works in: two
 * arenas (persistent and per-step), the sticky error, the thread pool and
 * the reducer a computation may use, and the random-number generator.
 *
 * It sits on core and below autograd: data sets, observers, lowering and
 * the tools report errors and take memory here without depending on the
 * tape. Core itself stays free of allocation and libm (the device
 * runtime is built from it), so the context is its own module.
 *
 * Errors: a function that fails records the first error (status and a
 * one-line message) on its context and returns the status; the error
 * sticks until qat_ctx_clear_error. The library never exits or aborts. */
#ifndef QAT_CONTEXT_H
#define QAT_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qat/core.h"
#include "qat/parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- context ---------------------------------------------------------------- */

typedef struct qat_ctx qat_ctx;

typedef enum {
    QAT_MEM_PERSIST = 0, /* lives until qat_ctx_free: parameters, state */
    QAT_MEM_STEP = 1     /* lives until qat_ctx_step_reset: activations, graph */
} qat_mem;

QAT_API qat_ctx *qat_ctx_new(void); /* NULL only when out of memory */
QAT_API void qat_ctx_free(qat_ctx *ctx); /* accepts NULL */

QAT_API qat_status qat_ctx_status(const qat_ctx *ctx);
QAT_API const char *qat_ctx_error(const qat_ctx *ctx); /* "" when none */
QAT_API void qat_ctx_clear_error(qat_ctx *ctx);
/* Records an error (first one wins) and returns its status: for layers and
 * tools built on the library that want the same error channel. */
QAT_API qat_status qat_ctx_fail(qat_ctx *ctx, qat_status s, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Puts printf-formatted text in front of the recorded error's message
 * (the caller's context: "layer conv1: "); nothing without an error. The
 * message's tail gives way when the whole does not fit. */
QAT_API void qat_ctx_error_prefix(qat_ctx *ctx, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Frees every QAT_MEM_STEP allocation (and the step state of the modules
 * built on the context: autograd's tape). Keeps the arena's memory. */
QAT_API void qat_ctx_step_reset(qat_ctx *ctx);
/* qat_ctx_step_reset, and the arena's memory given back to the system:
 * when training is over and other work (saving a checkpoint, evaluating)
 * should not sit on top of the training step's high-water mark. The next
 * step allocates again. */
QAT_API void qat_ctx_step_trim(qat_ctx *ctx);

/* Bytes: high-water mark of the step arena, and persistent bytes held. */
QAT_API size_t qat_ctx_step_peak_bytes(const qat_ctx *ctx);
QAT_API size_t qat_ctx_persist_bytes(const qat_ctx *ctx);
/* Number of malloc calls made for the step arena so far (tests use it to
 * prove that the training loop stops allocating once warm). */
QAT_API size_t qat_ctx_step_mallocs(const qat_ctx *ctx);

/* Raw memory from the context, 64-byte aligned, zeroed. NULL + error on OOM. */
QAT_API void *qat_ctx_alloc(qat_ctx *ctx, qat_mem where, size_t bytes);
/* The same, not zeroed: for memory the caller overwrites completely. */
QAT_API void *qat_ctx_alloc_uninit(qat_ctx *ctx, qat_mem where, size_t bytes);
#define QAT_CTX_ALIGN 64

/* The step state of a module built on the context (autograd's tape and
 * grad mode), one per context: the module makes it on first use and hands
 * it over with the function that resets it at every step reset and the
 * one that frees it with the context. Applications never need these. */
QAT_API void *qat_ctx_step_state(const qat_ctx *ctx);
QAT_API void qat_ctx_set_step_state(qat_ctx *ctx, void *state, void (*reset)(void *state), void (*free_fn)(void *state));

/* Threads: a context given a pool (qat/parallel.h; the caller owns it,
 * and it must outlive the context's use of it) splits its ops' work over
 * it; NULL (the default) runs everything on the calling thread. The
 * results are the same bits whatever the pool's size. */
QAT_API void qat_ctx_set_pool(qat_ctx *ctx, qat_pool *pool);
QAT_API qat_pool *qat_ctx_pool(const qat_ctx *ctx);
/* Data-parallel training: with a reducer (qat/parallel.h; copied, its
 * user pointer must stay valid), the observers of models on this context
 * and BatchNorm in training reduce their batch statistics through it, so
 * that every process sees the global batch's. NULL removes it. */
QAT_API void qat_ctx_set_reducer(qat_ctx *ctx, const qat_reducer *reducer);
QAT_API bool qat_ctx_has_reducer(const qat_ctx *ctx);
/* The reducer's sum and min/max over n values in place; without a reducer
 * they do nothing. A reducer's error is recorded on ctx and returned. */
QAT_API qat_status qat_ctx_reduce_sum(qat_ctx *ctx, double *v, int64_t n);
QAT_API qat_status qat_ctx_reduce_minmax(qat_ctx *ctx, float *lo, float *hi, int64_t n);

/* ---- random numbers: state passed in, never global -------------------------- */

typedef struct {
    uint64_t s[2]; /* xoroshiro128+ state; any value but {0,0} */
} qat_rng;

QAT_API void qat_rng_seed(qat_rng *rng, uint64_t seed);
QAT_API uint32_t qat_rng_u32(qat_rng *rng);
QAT_API float qat_rng_uniform(qat_rng *rng);              /* [0, 1) */
QAT_API uint32_t qat_rng_below(qat_rng *rng, uint32_t n); /* [0, n), unbiased */
QAT_API float qat_rng_normal(qat_rng *rng);               /* N(0, 1) */

#ifdef __cplusplus
}
#endif
#endif
