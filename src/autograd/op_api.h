/* Autograd's interface for the modules that define differentiable ops of
 * their own: record a node on the tape, get gradient buffers, take step
 * memory, run parallel loops. The tape itself stays private (internal.h).
 * Shared with: src/fakequant src/layers src/optim
 * Prefix qat__. */
#ifndef QAT_AUTOGRAD_OP_API_H
#define QAT_AUTOGRAD_OP_API_H

#include "qat/autograd.h"

#define QAT__ALIGN QAT_CTX_ALIGN

/* For the few streaming loops that are bound by instructions, not memory
 * (fake quantization, BatchNorm rows, the optimizers): copies built for
 * AVX-512 and AVX2 (with FMA, so that fmaf is one instruction) beside the
 * baseline one, from one body. The op picks the copy once, by
 * qat__simd_level() (what QAT_MAX_ISA allows and the CPU has), and passes
 * it to the loops it runs, so a test can run each copy on one machine.
 * ISO C mode keeps floating-point contraction off and fmaf is exact: every
 * copy computes the same IEEE results.
 *
 *     QAT__SIMD_FN(static, name, (a, b), const float *a, int64_t b) { ...body... }
 *
 * defines name_at(qat__simd level, const float *a, int64_t b), which runs
 * the body built for that level. The body returns void. */
typedef enum { QAT__SIMD_BASE, QAT__SIMD_AVX2, QAT__SIMD_AVX512 } qat__simd;
static inline qat__simd qat__simd_level(void) {
    return qat_isa_allowed(QAT_ISA_AVX512) ? QAT__SIMD_AVX512
           : qat_isa_allowed(QAT_ISA_AVX2) ? QAT__SIMD_AVX2
                                           : QAT__SIMD_BASE;
}
#define QAT__SIMD_FN(storage, name, args, ...) QAT__SIMD_FN_ATTR(, storage, name, args, __VA_ARGS__)
/* The same with attributes (attr) on the body and every copy. */
#if defined(__x86_64__) && defined(__GNUC__)
#define QAT__SIMD_FN_ATTR(attr, storage, name, args, ...)                                                   \
    static inline __attribute__((always_inline)) attr void name##_body(__VA_ARGS__);                       \
    __attribute__((target("avx512f"))) attr static void name##_avx512(__VA_ARGS__) { name##_body args; }   \
    __attribute__((target("avx2,fma"))) attr static void name##_avx2(__VA_ARGS__) { name##_body args; }    \
    attr static void name##_base(__VA_ARGS__) { name##_body args; }                                        \
    storage void name##_at(qat__simd level, __VA_ARGS__) {                                                 \
        if (level == QAT__SIMD_AVX512) name##_avx512 args;                                                 \
        else if (level == QAT__SIMD_AVX2) name##_avx2 args;                                                \
        else name##_base args;                                                                             \
    }                                                                                                      \
    static inline __attribute__((always_inline)) attr void name##_body(__VA_ARGS__)
#else
#define QAT__SIMD_FN_ATTR(attr, storage, name, args, ...)                                                   \
    static inline attr void name##_body(__VA_ARGS__);                                                      \
    storage void name##_at(qat__simd level, __VA_ARGS__) {                                                 \
        (void)level;                                                                                       \
        name##_body args;                                                                                  \
    }                                                                                                      \
    static inline attr void name##_body(__VA_ARGS__)
#endif

typedef void (*qat__backward_fn)(qat_ctx *ctx, qat_node *node);

/* One recorded op. Inputs are tensors the op read; out is what it made.
 * saved points to op-specific step memory (masks, im2col buffers, ...). */
struct qat_node {
    qat__backward_fn backward;
    const char *name;
    qat_tensor *out;
    qat_tensor *in[3];
    void *saved;
    float f[4];
    int64_t i[4];
    qat_node *prev;
    /* The backward never reads out->data, and out is no view of another
     * tensor: an op with out as its only reader may write over it (the
     * activation quantizers of the QAT pass do). Set by the ops that
     * qualify; false, the safe default, elsewhere. */
    bool out_free;
};

/* ---- threads (the pool) and reductions across processes ----
 * Every parallel loop is cut into tasks by the problem's size alone (never
 * by the thread count), so results do not depend on how many threads run
 * them. Tasks must not allocate from the context (the arena is not
 * thread-safe): scratch is taken before the loop, one block per worker. */
static inline int qat__workers(const qat_ctx *ctx) { return qat_pool_threads(qat_ctx_pool(ctx)); }
static inline void qat__par(qat_ctx *ctx, int64_t n_tasks, qat_task_fn fn, void *user) {
    qat_pool_run(qat_ctx_pool(ctx), n_tasks, fn, user);
}
/* Tasks of `grain` items each over n items (at least 1 task). */
static inline int64_t qat__n_tasks(int64_t n, int64_t grain) { return n <= grain ? 1 : (n + grain - 1) / grain; }
/* fn(user, i0, i1) over [0, n) in tasks of `grain` items (the last may be
 * shorter), on the context's pool. */
typedef void (*qat__range_fn)(void *user, int64_t i0, int64_t i1);
void qat__par_range(qat_ctx *ctx, int64_t n, int64_t grain, qat__range_fn fn, void *user);
/* Element-wise loops: tasks of this many floats (a multiple of 64, so that
 * every task but the last starts on a cache line and a whole mask byte). */
#define QAT__GRAIN ((int64_t)1 << 12)

/* Step-arena allocation; records QAT_ERR_NOMEM on failure. Zeroed. */
void *qat__step_alloc(qat_ctx *ctx, size_t bytes);
/* Step-arena memory the caller overwrites completely: not zeroed. */
void *qat__step_scratch(qat_ctx *ctx, size_t bytes);
/* Float step memory from the recycled blocks when one is large enough,
 * else new (not zeroed either way); and the giving back of a block no one
 * reads any more (NULL is ignored). */
float *qat__step_recycled(qat_ctx *ctx, size_t bytes);
void qat__step_release(qat_ctx *ctx, float *p, size_t bytes);
/* A new contiguous step tensor (no grad yet) whose data the op overwrites:
 * not zeroed. */
qat_tensor *qat__new_out(qat_ctx *ctx, int rank, const int64_t *shape);
/* NULL-propagation guard: true when every non-optional input is present. */
bool qat__inputs_ok(qat_ctx *ctx, const char *op, int n, qat_tensor *const *ts);
/* Records an op on the tape if any input requires grad and grad mode is on.
 * Returns the node (to fill saved state) or NULL when nothing is recorded. */
qat_node *qat__record(qat_ctx *ctx, const char *name, qat__backward_fn fn, qat_tensor *out,
                      qat_tensor *a, qat_tensor *b, qat_tensor *c);
/* The same for an op with n inputs (concat, custom ops): recorded when any
 * of them wants a gradient. in[0..2] hold the first three; the op keeps
 * the whole list in its saved state. */
qat_node *qat__record_n(qat_ctx *ctx, const char *name, qat__backward_fn fn, qat_tensor *out, int n,
                        qat_tensor *const *ins);
/* The gradient buffer of t, allocated zeroed in the step arena if absent. */
float *qat__grad(qat_ctx *ctx, qat_tensor *t);
/* The gradient buffer of t for an op that can either store or add: when t
 * is a step tensor with no gradient yet, the buffer comes unzeroed and
 * *store is set (the op writes every element); otherwise the op adds. */
float *qat__grad_dst(qat_ctx *ctx, qat_tensor *t, bool *store);
/* For an elementwise op whose input gradient is its output gradient
 * masked or scaled: when the input is a step tensor with no gradient yet,
 * out's gradient buffer becomes in's (out's is cleared: its producer has
 * used it) and is returned, for the op to finish in place. NULL otherwise:
 * then the op adds into qat__grad(in). Saves a zeroed buffer and a pass. */
float *qat__grad_reuse(qat_tensor *in, qat_tensor *out);

/* True when t exists and wants a gradient. */
static inline bool qat__wants_grad(const qat_tensor *t) { return t && t->requires_grad; }

#if defined(__x86_64__) && defined(__GNUC__)
/* The run-time checks every AVX-512 path asks (ops_pool_avx512.c). */
bool qat__have_avx512f(void);
bool qat__have_avx512bw(void); /* and VL */
#endif

/* Batch normalisation of x·scale[c] (+ shift[c], shift may be NULL): the
 * folded BatchNorm of QAT as one op (ops_batchnorm.c); the forward
 * values equal qat_mul, qat_add and qat_batchnorm's to the bit. */
qat_tensor *qat__batchnorm_scaled(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale, qat_tensor *shift, qat_tensor *gamma,
                                  qat_tensor *beta, float *running_mean, float *running_var, float momentum, float eps,
                                  bool training);

/* qat_clamp (a ReLU when lo = 0, hi = +inf) written over x, for a caller
 * that knows x has no other reader; a new tensor when x's producer needs
 * it for backward (ops_elementwise.c). */
qat_tensor *qat__clamp_over(qat_ctx *ctx, qat_tensor *x, float lo, float hi);

#endif
