/* The memory plan of an integer program (qat_plan_program): every tensor
 * at an offset in one arena, from the tensors' lifetimes, and each op's
 * prepared constants and working memory.
 *
 * Lifetimes: a tensor lives from the op that makes it to the last op that
 * reads it (the output, to the end). Views and in-place ops merge tensors
 * into one buffer: flatten's output is its input's bytes, and ReLU, a
 * lookup table, add and a max pool of disjoint windows may write over an
 * input that no later op reads.
 * Buffers are then placed greedily, largest first, each at the lowest
 * offset that no buffer alive at the same time occupies — TFLite's
 * "greedy by size" planner. A buffer a max pool wrote over holds only the
 * pooled map after that op: a buffer that lives only later may use the
 * rest of its bytes. Offsets are planned for one sample and scaled
 * by the batch: every tensor keeps its samples one after another.
 *
 * A batch of more than one sample may run in chunks (kernels.h: the whole
 * program on one chunk, then the next), with the input's and the output's
 * buffers in the arena for every sample: chunk k's output is written
 * while a later chunk's input is still unread. So for max_batch > 1 the
 * input's buffer lives to the end and the output's from the start, and the
 * two never share bytes. One sample (the C generator's plan, the quoted
 * figures) keeps the tighter lifetimes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "plan_rules.h"
#include "qat/runtime.h"
#include "subchannel.h"

#define ALIGN 16 /* per-sample offsets: SIMD rows start on 16 bytes */

typedef struct {
    int first, last;  /* lifetime in op indices (-1: the input, before every op) */
    int64_t size;     /* bytes per sample */
    int64_t offset;   /* placed, bytes per sample; -1 before placement */
    int shrink;       /* a max pool written over this buffer at op `shrink` leaves only its first `after`
                         bytes in use from then on (-2: the size holds for the whole lifetime) */
    int64_t after;
} buffer;

#define NO_SHRINK (-2)

/* x's bytes in use while `other` lives: after its shrink, only `after`. */
static int64_t size_beside(const buffer *x, const buffer *other) {
    return x->shrink != NO_SHRINK && other->first > x->shrink ? x->after : x->size;
}

static int root(const int *parent, int t) {
    while (parent[t] != t) t = parent[t];
    return t;
}

/* Can op i write its output over input t? Element-wise ops whose output
 * has t's size, max pools that never overtake their reads, and with the
 * small plan depthwise and pointwise convolutions (plan_rules.h), when
 * nothing reads t's buffer after op i and t is not the model input (the
 * caller's data). */
static bool in_place(const qat_qmodel *q, const qat_qop *op, int i, int t, const int *parent, const buffer *b,
                     bool small) {
    bool elementwise = op->kind == QAT_QOP_RELU || op->kind == QAT_QOP_LUT || op->kind == QAT_QOP_ADD;
    if (!elementwise && !qat__pool_disjoint(op) && !(small && qat__conv_over_input(q, op))) return false;
    if (small && (qat__fused_pool(q, i) >= 0 || (i > 0 && qat__fused_pool(q, i - 1) == i)))
        return false; /* a fused pair: the convolution writes the pool's output, in bytes of its own */
    int r = root(parent, t);
    return r != root(parent, q->input) && b[r].last == i &&
           (!elementwise || qat_qtensor_numel(&q->tensors[t]) == qat_qtensor_numel(&q->tensors[op->output]));
}

/* Merges the tensors into buffers (views and in-place writes share one).
 * Each tensor's last reader is found first: an op may write over an input
 * only when no later op reads that input's buffer. */
static void merge(const qat_qmodel *q, int *parent, buffer *b, bool chunked, bool input_outside, bool small) {
    int n = q->n_tensors;
    for (int t = 0; t < n; t++) {
        parent[t] = t;
        b[t] = (buffer){.first = t == q->input ? -1 : q->n_ops, .last = -1, .offset = -1,
                        .size = qat__round_up(qat_qtensor_numel(&q->tensors[t]), ALIGN), .shrink = NO_SHRINK};
    }
    for (int i = 0; i < q->n_ops; i++) {
        b[q->ops[i].output].first = i;
        for (int j = 0; j < q->ops[i].n_inputs; j++)
            if (b[q->ops[i].inputs[j]].last < i) b[q->ops[i].inputs[j]].last = i;
    }
    b[q->output].last = q->n_ops; /* the caller reads the output after the last op */
    if (input_outside) b[q->input].size = 0; /* the caller's memory */
    for (int i = 0; small && i < q->n_ops; i++) { /* a fused convolution writes its pool's output itself */
        int j = qat__fused_pool(q, i);
        if (j < 0) continue;
        b[q->ops[i].output].size = 0;
        b[q->ops[j].output].first = i;
    }
    for (int t = 0; t < n; t++)
        if (b[t].last < b[t].first) b[t].last = b[t].first; /* made and never read: still written */
    /* b[root] holds its buffer's whole lifetime as tensors join it */
    for (int i = 0; i < q->n_ops; i++) {
        const qat_qop *op = &q->ops[i];
        int into = -1;
        if (op->kind == QAT_QOP_FLATTEN) into = op->inputs[0];
        for (int j = 0; into < 0 && j < op->n_inputs; j++)
            if (in_place(q, op, i, op->inputs[j], parent, b, small)) into = op->inputs[j];
        if (into < 0) continue;
        int r = root(parent, into), out = op->output; /* the output joins its input's buffer */
        parent[out] = r;
        if (b[r].shrink == NO_SHRINK && b[out].size < b[r].size)
            b[r].shrink = i, b[r].after = b[out].size; /* the smaller output is all that is left of it */
        else if (b[r].shrink != NO_SHRINK && b[r].after < b[out].size)
            b[r].after = b[out].size;
        if (b[r].size < b[out].size) b[r].size = b[out].size;
        if (b[r].last < b[out].last) b[r].last = b[out].last;
        if (b[r].first > b[out].first) b[r].first = b[out].first;
    }
    if (chunked) {
        b[root(parent, q->input)].last = q->n_ops;
        b[root(parent, q->output)].first = -1;
    }
}

/* Greedy by size: largest first, lowest offset that fits beside every
 * placed buffer whose lifetime overlaps. Returns the bytes per sample. */
static int64_t place(int n, const int *parent, buffer *b, int *order) {
    int m = 0;
    for (int t = 0; t < n; t++)
        if (parent[t] == t) order[m++] = t;
    /* insertion sort, largest first, ties by id: a few hundred buffers */
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && (b[order[j]].size > b[order[j - 1]].size ||
                                  (b[order[j]].size == b[order[j - 1]].size && order[j] < order[j - 1]));
             j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int64_t top = 0;
    for (int i = 0; i < m; i++) {
        buffer *x = &b[order[i]];
        int64_t off = 0;
        for (bool moved = true; moved;) { /* restart after every move: placed buffers are unsorted */
            moved = false;
            for (int j = 0; j < i; j++) {
                const buffer *y = &b[order[j]];
                bool live = x->first <= y->last && y->first <= x->last;
                int64_t xs = size_beside(x, y), ys = size_beside(y, x);
                if (live && off < y->offset + ys && y->offset < off + xs) off = y->offset + ys, moved = true;
            }
        }
        x->offset = off;
        if (off + x->size > top) top = off + x->size;
    }
    return top;
}

/* What the runtime cannot run, in words (NULL: it can). */
static const char *unsupported(const qat_qmodel *q, const qat_qop *op, char *why, size_t len) {
    const qat_qtensor *out = &q->tensors[op->output];
    if (!out->q.is_signed || out->q.bits > 8) {
        snprintf(why, len, "its output is %c%d: the integer runtime runs signed 2..8-bit activations",
                 out->q.is_signed ? 'i' : 'u', out->q.bits);
        return why;
    }
    if (op->kind == QAT_QOP_GLOBAL_AVGPOOL) { /* the sum of |x - zp| <= 255 over H·W */
        const qat_qtensor *in = &q->tensors[op->inputs[0]];
        if (in->shape[1] * in->shape[2] * 255 > INT32_MAX)
            return snprintf(why, len, "it sums %lld values, too many for an int32 accumulator",
                            (long long)(in->shape[1] * in->shape[2])), why;
    }
    if (op->kind != QAT_QOP_LINEAR && op->kind != QAT_QOP_CONV2D) return NULL;
    if (op->wq.bits > 8) return snprintf(why, len, "its weights are wider than 8 bits"), why;
    if (qat_qop_subchannel(op)) return NULL; /* its bounds are qat_qmodel_check's (docs/subchannel.md) */
    /* |x - zp| <= 255 and |w - zp| <= 255: the sum and bias must stay in int32 */
    int64_t K = op->wq.shape[1] * (op->wq.rank == 4 ? op->wq.shape[2] * op->wq.shape[3] : 1), bias = 0;
    for (int64_t o = 0; o < op->wq.shape[0]; o++) bias = llabs(op->bias[o]) > bias ? llabs(op->bias[o]) : bias;
    if (K * 255 * 255 + bias > INT32_MAX)
        return snprintf(why, len, "it sums %lld products, too many for an int32 accumulator", (long long)K), why;
    return NULL;
}

/* Bytes of op i's constants, and of the working memory it needs for a
 * batch of B samples (qat__op_geom gives the layouts). A linear or conv2d
 * op has room for either path (run.c's header, then the int16 or the int8
 * layout), so the plan is the same whatever the CPU. */
static int64_t const_size(const qat_qmodel *q, const qat__op_geom *g, const qat_qop *op, int max_batch) {
    switch (op->kind) {
    case QAT_QOP_LUT: return qat__round_up(op->table_len, 64);
    case QAT_QOP_ADD: return QAT_ADD_TABLE_BYTES;
    case QAT_QOP_LINEAR:
    case QAT_QOP_CONV2D: {
        if (qat_qop_subchannel(op)) return 64 + qat__sc_const_bytes(op); /* run.c's header, subchannel.c's layout */
        int64_t w16 = g->depthwise ? qat__round_up(g->O * g->kk * (int64_t)sizeof(int16_t), 64) +
                                         qat__dw_quads_bytes(g->O, op->kh, op->kw) /* run.c: after w16 */
                                   : qat__round_up(qat__round_up(g->O, QAT_WROWS) * g->Kp * (int64_t)sizeof(int16_t), 64);
        if (qat__direct_fits(op, g) && qat__direct_const_bytes(op, g) > w16) w16 = qat__direct_const_bytes(op, g);
        if (qat__dw_lanes_fits(op, g) && qat__dw_lanes_const_bytes(g) > w16) w16 = qat__dw_lanes_const_bytes(g);
        if (qat__wino_fits(op, g) && qat__wino_const_bytes(g) > w16) w16 = qat__wino_const_bytes(g);
        qat__i8_geom i8;
        qat__i8_geometry(q, op, g, max_batch, &i8);
        return 64 + (w16 > i8.const_bytes ? w16 : i8.const_bytes);
    }
    case QAT_QOP_MAXPOOL2D:
    case QAT_QOP_AVGPOOL2D:
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_CONCAT:
    case QAT_QOP_GLOBAL_AVGPOOL:
    case QAT_QOP_MUL:
    case QAT_QOP_KIND_COUNT: break; /* no constants */
    }
    return 0;
}

static int64_t scratch_size(const qat__op_geom *g, const qat_qop *op, const qat_qmodel *q, int max_batch) {
    const qat_qtensor *in = &q->tensors[op->inputs[0]];
    int64_t s16 = 0;
    switch (op->kind) {
    case QAT_QOP_LINEAR:
        s16 = qat__round_up((g->Kp * g->Pp + QAT_IM2COL_CHUNK) * (int64_t)sizeof(int16_t), 64);
        if (qat_qop_subchannel(op)) return s16; /* no int8 path */
        break;
    case QAT_QOP_CONV2D: {
        int64_t xpad = qat__round_up((g->C * g->Hp * g->Wp + QAT_IM2COL_CHUNK) * (int64_t)sizeof(int16_t), 64);
        int64_t cols = qat__round_up((g->Kp * g->Pp + QAT_IM2COL_CHUNK) * (int64_t)sizeof(int16_t), 64);
        if (qat_qop_subchannel(op)) return xpad + cols; /* sub-channel: im2col for every conv, no int8 path */
        /* depthwise: the AVX2 kernel's tap pairs (or the AVX-VNNI level's quads) and grid after the planes */
        int64_t taps = qat__round_up(QAT_DW_SCRATCH_BYTES(g->Hp, g->Wp), 64);
        s16 = g->depthwise ? xpad + taps : xpad + cols;
        if (qat__direct_fits(op, g) && qat__direct_scratch_bytes(op, g) > s16) s16 = qat__direct_scratch_bytes(op, g);
        int B = qat__direct_batch(op, g, max_batch);
        if (qat__direct_fits(op, g) && B > 1 && qat__direct_batch_scratch_bytes(g, B) > s16)
            s16 = qat__direct_batch_scratch_bytes(g, B);
        if (qat__dw_lanes_fits(op, g) && qat__dw_lanes_scratch_bytes(g) > s16) s16 = qat__dw_lanes_scratch_bytes(g);
        if (qat__wino_fits(op, g) && qat__wino_scratch_bytes(g) > s16) s16 = qat__wino_scratch_bytes(g);
        break;
    }
    case QAT_QOP_MAXPOOL2D: return qat__round_up(in->shape[1] / 2 * in->shape[2], 64);
    case QAT_QOP_AVGPOOL2D:
    case QAT_QOP_FLATTEN:
    case QAT_QOP_RELU:
    case QAT_QOP_ADD:
    case QAT_QOP_CONCAT:
    case QAT_QOP_GLOBAL_AVGPOOL:
    case QAT_QOP_LUT:
    case QAT_QOP_MUL:
    case QAT_QOP_KIND_COUNT: return 0; /* no scratch */
    }
    qat__i8_geom i8;
    qat__i8_geometry(q, op, g, max_batch, &i8);
    return s16 > i8.scratch ? s16 : i8.scratch;
}

void qat__op_geometry(const qat_qmodel *q, const qat_qop *op, int max_batch, qat__op_geom *g) {
    memset(g, 0, sizeof *g);
    const qat_qtensor *in = &q->tensors[op->inputs[0]], *out = &q->tensors[op->output];
    if (op->kind == QAT_QOP_LINEAR) {
        g->O = (int)op->wq.shape[0], g->K = (int)op->wq.shape[1], g->groups = 1, g->Og = g->O;
        g->Kp = (int)qat__round_up(g->K, QAT_KPAD), g->Pp = (int)qat__round_up(max_batch, QAT_PPAD);
        return;
    }
    if (op->kind != QAT_QOP_CONV2D) return;
    g->C = (int)in->shape[0], g->H = (int)in->shape[1], g->W = (int)in->shape[2];
    g->O = (int)out->shape[0], g->OH = (int)out->shape[1], g->OW = (int)out->shape[2];
    g->groups = op->groups, g->Og = g->O / op->groups, g->kk = op->kh * op->kw;
    g->K = g->C / op->groups * g->kk;
    g->Kp = (int)qat__round_up(g->K, QAT_KPAD);
    g->Hp = g->H + 2 * op->pad_h, g->Wp = g->W + 2 * op->pad_w;
    g->Pp = (int)qat__round_up((int64_t)g->OH * g->OW, QAT_PPAD);
    g->depthwise = g->C / op->groups == 1 && op->groups > 1;
}

qat_status qat_plan_program(const qat_qmodel *q, int max_batch, int64_t *offsets, qat_plan *plan, char *msg,
                            size_t len) {
    return qat_plan_program_flags(q, max_batch, 0, offsets, plan, msg, len);
}

qat_status qat_plan_program_flags(const qat_qmodel *q, int max_batch, unsigned flags, int64_t *offsets, qat_plan *plan,
                                  char *msg, size_t len) {
    if (msg && len) msg[0] = '\0';
    if (!q || !offsets || !plan || max_batch < 1) {
        if (msg && len) snprintf(msg, len, "plan: need a program, offsets and max_batch >= 1");
        return QAT_ERR_ARG;
    }
    qat_status st = qat_qmodel_check(q, msg, len);
    if (st != QAT_OK) return st;
    const qat_qtensor *in = &q->tensors[q->input];
    if (!in->q.is_signed || in->q.bits > 8) {
        if (msg && len) snprintf(msg, len, "the input is %c%d: the integer runtime runs signed 2..8-bit activations",
                                 in->q.is_signed ? 'i' : 'u', in->q.bits);
        return QAT_ERR_UNSUPPORTED;
    }
    char why[160];
    for (int i = 0; i < q->n_ops; i++)
        if (unsupported(q, &q->ops[i], why, sizeof why)) {
            if (msg && len) snprintf(msg, len, "op %d (%s %s): %s", i, qat_qop_kind_str(q->ops[i].kind), q->ops[i].name, why);
            return QAT_ERR_UNSUPPORTED;
        }
    int n = q->n_tensors;
    int *parent = malloc((size_t)n * sizeof *parent), *order = malloc((size_t)n * sizeof *order);
    buffer *b = malloc((size_t)n * sizeof *b);
    if (!parent || !order || !b) {
        free(parent), free(order), free(b);
        if (msg && len) snprintf(msg, len, "plan: out of memory");
        return QAT_ERR_NOMEM;
    }
    merge(q, parent, b, max_batch > 1, flags & QAT_PLAN_INPUT_OUTSIDE, flags & QAT_PLAN_SMALL);
    int64_t per_sample = place(n, parent, b, order);
    *plan = (qat_plan){.max_batch = max_batch, .offset = offsets, .const_offset = offsets + n,
                       .peak_activation_bytes = per_sample, .arena_bytes = per_sample * max_batch};
    for (int t = 0; t < n; t++) offsets[t] = b[root(parent, t)].offset * max_batch;
    for (int i = 0; i < q->n_ops; i++) {
        qat__op_geom g;
        qat__op_geometry(q, &q->ops[i], max_batch, &g);
        plan->const_offset[i] = plan->const_bytes;
        plan->const_bytes += const_size(q, &g, &q->ops[i], max_batch);
        int64_t s = scratch_size(&g, &q->ops[i], q, max_batch);
        if (s > plan->scratch_bytes) plan->scratch_bytes = s;
    }
    int64_t sub;
    plan->scratch_bytes = qat__round_up(plan->scratch_bytes, 64) + qat__chunk_scratch(per_sample, max_batch, n, &sub);
    free(parent), free(order), free(b);
    return QAT_OK;
}
