/* Private to the autograd module and the modules built on it: the tape
 * node, the tape's per-context state, and helpers every op uses. Prefix
 * qat__. */
#ifndef QAT_AUTOGRAD_INTERNAL_H
#define QAT_AUTOGRAD_INTERNAL_H

#include "qat/autograd.h"

#define QAT__ALIGN QAT_CTX_ALIGN

/* For the few streaming loops that are bound by instructions, not memory
 * (fake quantization): copies built for AVX-512 and AVX2 beside the
 * baseline one, the CPU's best picked at load time. ISO C mode keeps
 * floating-point contraction off, so every copy computes the same IEEE
 * results. Off under AddressSanitizer, whose runtime does not take the
 * ifunc resolvers this needs. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define QAT__SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QAT__SIMD_CLONES
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

/* A block of step memory given back before the step ends. */
typedef struct {
    float *p;
    size_t bytes;
} qat__block;

/* Step memory recycled within a step: the gradient of an op's output once
 * its op's backward has run, and (grad off) a model layer's value once
 * its last reader has run. 16 blocks hold the widest frontier of the
 * models we know (a residual stage keeps three or four tensors alive). */
#define QAT__GRAD_POOL 16

/* The tape's state on a context (qat_ctx_step_state): made on first use,
 * reset with the step, freed with the context. */
typedef struct {
    qat__block pool[QAT__GRAD_POOL]; /* step memory free for gradients */
    int n_pool;
    qat_node *tape;           /* most recent node; walk ->prev */
    bool grad_enabled;
    bool backward_done;       /* this step's tape has been consumed */
} qat__tape;
/* The context's tape state, made if it has none (NULL + the error on ctx
 * when out of memory); qat__tape_peek never makes it (NULL: none yet). */
qat__tape *qat__tape_of(qat_ctx *ctx);
static inline qat__tape *qat__tape_peek(const qat_ctx *ctx) { return (qat__tape *)qat_ctx_step_state(ctx); }


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
/* A conv2d's sizes, and its im2col / col2im for one sample and one group:
 * col [C*KH*KW, OH*OW] of xn [C, H, W], and the adjoint that adds col into
 * gxn. C and O count one group's channels (all of them when G == 1): the
 * tensors have G*C input and G*O output channels. The portable versions
 * live in ops_conv.c. At stride 1, or 2 across, with rows of up to 128
 * outputs, AVX-512 ones (ops_conv_avx512.c) copy rows 16 floats at a time
 * with masked loads (stride 2: a permute picks every other input), and
 * col2im adds in the portable per-element order: the same bits. */
typedef struct {
    int64_t N, C, H, W, O, KH, KW, OH, OW;
    int64_t sh, sw, ph, pw; /* strides and zero padding, height and width */
    int64_t G;              /* groups */
} qat__conv_dims;
/* db[o] += Σ over samples and pixels of gy [N, O, OHW]: 8 float lanes
 * within a plane, double across planes (ops_conv.c); channels over the
 * context's pool. */
void qat__conv_bias_grad(qat_ctx *ctx, int64_t N, int64_t O, int64_t OHW, const float *gy, float *gb);
/* The depthwise case (G == input channels > 1, any multiplier O): direct
 * kernels, no im2col (ops_conv_depthwise.c). Inputs checked by the caller;
 * records its own node. */
qat_tensor *qat__conv2d_depthwise(qat_ctx *ctx, const char *name, qat_tensor *x, qat_tensor *w,
                                  qat_tensor *b, const qat__conv_dims *d);
#if defined(__x86_64__) && defined(__GNUC__)
/* The run-time checks every AVX-512 path asks (ops_pool_avx512.c). */
bool qat__have_avx512f(void);
bool qat__have_avx512bw(void); /* and VL */
#endif
void qat__im2col(const qat__conv_dims *d, const float *xn, float *col);
void qat__col2im_add(const qat__conv_dims *d, const float *col, float *gxn);
#if defined(__x86_64__) && defined(__GNUC__)
#define QAT__CONV_AVX512 1
bool qat__conv_avx512_fits(const qat__conv_dims *d); /* the CPU has it and the shapes suit */
void qat__im2col_avx512(const qat__conv_dims *d, const float *xn, float *col);
/* overwrite: gxn holds garbage and is written, not added to (as adding
 * into zeros, bit for bit) */
void qat__col2im_add_avx512(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite);
#else
#define QAT__CONV_AVX512 0
#endif

/* Row copies of the depthwise convolution (ops_conv_depthwise.c): rows
 * of several planes, each side with its own plane stride and row pitch;
 * dst row = src row (copy) or dst row += src row (add), width floats. The
 * AVX-512 versions (ops_conv_depthwise_avx512.c) do up to 16 floats of a
 * row in one masked load and store: the same bits. */
typedef struct {
    int64_t planes, rows;
    int64_t dplane, dpitch;
    int64_t splane, spitch;
    int64_t width;
} qat__rows;
typedef void (*qat__rows_fn)(const qat__rows *g, float *dst, const float *src);
void qat__rows_copy(const qat__rows *g, float *dst, const float *src);
void qat__rows_add(const qat__rows *g, float *dst, const float *src);
#if QAT__CONV_AVX512
void qat__rows_copy_avx512(const qat__rows *g, float *dst, const float *src);
void qat__rows_add_avx512(const qat__rows *g, float *dst, const float *src);
#endif

/* 2x2 / stride-2 max pooling of one output row from input rows r0, r1:
 * values and window codes (0..3, row-major; the first maximum wins), and
 * the backward that stores a row pair of a gradient not yet written. The
 * portable versions live in ops_pool.c; on x86-64 with GCC or clang,
 * AVX-512 ones (ops_pool_avx512.c) give the same bits. */
/* spill: the caller writes the memory right after this row next (the
 * next row of its range), so a vector version may store whole vectors
 * past the row's end instead of masked ones (slow on some CPUs); the
 * portable versions ignore it. */
void qat__maxpool2_row(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW, bool spill);
void qat__maxpool2_row_bw_store(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW, bool spill);
#if defined(__x86_64__) && defined(__GNUC__)
#define QAT__POOL_AVX512 1
void qat__maxpool2_row_avx512(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW, bool spill);
void qat__maxpool2_row_bw_store_avx512(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW,
                                       bool spill);
#else
#define QAT__POOL_AVX512 0
#endif

/* Batch normalisation of x·scale[c] (+ shift[c], shift may be NULL): the
 * folded BatchNorm of QAT as one op (ops_batchnorm_scaled.c); the forward
 * values equal qat_mul, qat_add and qat_batchnorm's to the bit. */
qat_tensor *qat__batchnorm_scaled(qat_ctx *ctx, qat_tensor *x, qat_tensor *scale, qat_tensor *shift, qat_tensor *gamma,
                                  qat_tensor *beta, float *running_mean, float *running_var, float momentum, float eps,
                                  bool training);

/* qat_clamp (a ReLU when lo = 0, hi = +inf) written over x, for a caller
 * that knows x has no other reader; a new tensor when x's producer needs
 * it for backward (ops_elementwise.c). */
qat_tensor *qat__clamp_over(qat_ctx *ctx, qat_tensor *x, float lo, float hi);

/* The BatchNorms' row loops (bn_rows.c): sums in double with 8
 * independent accumulators each, in a fixed order. */
void qat__bn_moments_row(const float *x, float *z, int64_t n, float sc, float sh, double acc[2]);
/* One channel's mean and 1/std (training: from acc = Σz, Σz² over m
 * values, moving the running statistics; acc NULL: the running ones). */
void qat__bn_channel_stats(const double *acc, double m, float momentum, float eps, float *running_mean,
                           float *running_var, float *mu, float *invstd);
void qat__bn_normalize_row(const float *z, float *y, int64_t n, float mu, float is, float g, float bt);
void qat__bn_grad_sums_row(const float *x, const float *dy, int64_t n, float sc, float sh, float mu, float is,
                           double acc[6]);
void qat__bn_grad_x_row(const float *x, const float *dy, float *gx, int64_t n, float sc, float sh, float mu, float is,
                        float k, float a, float b, bool training, bool store);

/* True when t exists and wants a gradient. */
static inline bool qat__wants_grad(const qat_tensor *t) { return t && t->requires_grad; }

#endif
