/* Private to the autograd module: the tape's per-context state and the
 * kernels of its own ops. What modules that define ops of their own
 * use is in op_api.h. Prefix qat__. */
#ifndef QAT_AUTOGRAD_INTERNAL_H
#define QAT_AUTOGRAD_INTERNAL_H

#include "op_api.h"

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
void qat__im2col(const qat__conv_dims *d, const float *xn, float *col);
void qat__col2im_add(const qat__conv_dims *d, const float *col, float *gxn);
/* The shapes the SIMD im2col/col2im rows take (ops_conv_avx512.c,
 * ops_conv_avx2.c): stride 1 both ways (the register col2im), or stride 2
 * across with any stride down (the strided col2im); rows of at most 128
 * outputs (a kernel column's masks are kept in arrays). */
static inline bool qat__conv_rows_shape(const qat__conv_dims *d) {
    return ((d->sw == 1 && d->sh == 1) || d->sw == 2) && d->OW <= 128;
}
#if defined(__x86_64__) && defined(__GNUC__)
#define QAT__CONV_AVX512 1
bool qat__conv_avx512_fits(const qat__conv_dims *d); /* the CPU has it and the shapes suit */
void qat__im2col_avx512(const qat__conv_dims *d, const float *xn, float *col);
/* overwrite: gxn holds garbage and is written, not added to (as adding
 * into zeros, bit for bit) */
void qat__col2im_add_avx512(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite);
/* The same rows eight floats at a time with AVX2 (ops_conv_avx2.c), for
 * CPUs without AVX-512: the same shapes, arguments and bits. */
#define QAT__CONV_AVX2 1
bool qat__conv_avx2_fits(const qat__conv_dims *d);
void qat__im2col_avx2(const qat__conv_dims *d, const float *xn, float *col);
void qat__col2im_add_avx2(const qat__conv_dims *d, const float *col, float *gxn, bool overwrite);
#else
#define QAT__CONV_AVX512 0
#define QAT__CONV_AVX2 0
#endif

/* Row copies of the depthwise convolution (ops_conv_depthwise.c): rows
 * of several planes, each side with its own plane stride and row pitch;
 * dst row = src row (copy) or dst row += src row (add), width floats. The
 * AVX-512 versions (ops_conv_depthwise_avx512.c) do up to 16 floats of a
 * row in one masked load and store: the same bits. Nothing outside the
 * rows changes; the AVX2 ones rewrite up to 7 floats after a plane's
 * non-last row with their own values, so a plane's rows and gaps must be
 * the caller's alone (planes do not interleave). */
typedef struct {
    int64_t planes, rows;
    int64_t dplane, dpitch;
    int64_t splane, spitch;
    int64_t width;
} qat__rows;
typedef void (*qat__rows_fn)(const qat__rows *g, float *dst, const float *src);
void qat__rows_copy(const qat__rows *g, float *dst, const float *src);
void qat__rows_add(const qat__rows *g, float *dst, const float *src);
/* Planes far apart (a channel's planes, sample after sample) defeat the
 * hardware prefetcher: the SIMD rows ask for the rows of plane p +
 * QAT__ROWS_AHEAD, every step-th, while they copy plane p. */
#define QAT__ROWS_AHEAD 16
static inline void qat__rows_prefetch(const qat__rows *g, float *dst, const float *src, int64_t p, int64_t step) {
    if (p + QAT__ROWS_AHEAD >= g->planes) return;
    const float *s = src + (p + QAT__ROWS_AHEAD) * g->splane;
    const float *d = dst + (p + QAT__ROWS_AHEAD) * g->dplane;
    for (int64_t r = 0; r < g->rows; r += step) {
        __builtin_prefetch(s + r * g->spitch, 0, 3);
        __builtin_prefetch(d + r * g->dpitch, 1, 3);
    }
}
#if QAT__CONV_AVX512
void qat__rows_copy_avx512(const qat__rows *g, float *dst, const float *src);
void qat__rows_add_avx512(const qat__rows *g, float *dst, const float *src);
#endif
/* ... and with AVX2 (ops_conv_depthwise_avx2.c): 8 floats at a time, each
 * row's last ones by a masked load and a whole store of the destination's
 * own floats past the row (a masked store for a plane's last row and for
 * rows under 8 floats). */
#if QAT__CONV_AVX2
void qat__rows_copy_avx2(const qat__rows *g, float *dst, const float *src);
void qat__rows_add_avx2(const qat__rows *g, float *dst, const float *src);
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
/* The same rows eight outputs a step with AVX2 (ops_pool_avx2.c), for CPUs
 * without AVX-512: the same arguments and bits. */
#define QAT__POOL_AVX2 1
void qat__maxpool2_row_avx2(const float *r0, const float *r1, float *y, uint8_t *code, int64_t OW, bool spill);
void qat__maxpool2_row_bw_store_avx2(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW,
                                     bool spill);
void qat__maxpool2_row_bw_store_avx512(float *g0, int64_t W, const float *gy, const uint8_t *code, int64_t OW,
                                       bool spill);
#else
#define QAT__POOL_AVX512 0
#define QAT__POOL_AVX2 0
#endif

/* The BatchNorms' row loops (bn_rows.c): sums in double with 8
 * independent accumulators each, in a fixed order; level: the copy
 * (QAT__SIMD_FN) the op picked. */
void qat__bn_moments_row_at(qat__simd level, const float *x, float *z, int64_t n, float sc, float sh, double acc[2]);
/* One channel's mean and 1/std (training: from acc = Σz, Σz² over m
 * values, moving the running statistics; acc NULL: the running ones). */
void qat__bn_channel_stats(const double *acc, double m, float momentum, float eps, float *running_mean,
                           float *running_var, float *mu, float *invstd);
void qat__bn_normalize_row_at(qat__simd level, const float *z, float *y, int64_t n, float mu, float is, float g,
                              float bt);
void qat__bn_grad_sums_row_at(qat__simd level, const float *x, const float *dy, int64_t n, float sc, float sh,
                              float mu, float is, double acc[2]);
void qat__bn_grad_x_row_at(qat__simd level, const float *x, const float *dy, float *gx, int64_t n, float sc, float sh,
                           float mu, float is, float k, float a, float b, bool training, bool store);


#endif
