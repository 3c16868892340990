/* Engine overhead: forward+backward of linear(784→256)→relu→linear(256→10)→
 * cross-entropy at batch 64, once through the autograd engine and once as
 * hand-written calls to cblas_sgemm with the same elementwise loops (the
 * llm.c way). Reports both rates and the engine's overhead in percent.
 * Usage: bench_engine_overhead [--iters N] [--threads T] */
#include "bench_util.h"
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "bench_util.h"
#include "qat/autograd.h"

enum { B = 64, IN = 784, HID = 256, OUT = 10 };

typedef struct {
    float *x, *w1, *b1, *w2, *b2;      /* inputs and parameters */
    float *gw1, *gb1, *gw2, *gb2;      /* gradients (accumulated) */
    float *h, *logits, *dlogits, *dh;  /* activations */
    int32_t *labels;
} bare;

/* One training step's worth of float work, written out by hand. */
static float bare_step(bare *m) {
    for (int r = 0; r < B; r++) memcpy(m->h + r * HID, m->b1, HID * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, HID, IN, 1, m->x, IN, m->w1, IN, 1, m->h, HID);
    for (int i = 0; i < B * HID; i++) m->h[i] = m->h[i] > 0 ? m->h[i] : 0;
    for (int r = 0; r < B; r++) memcpy(m->logits + r * OUT, m->b2, OUT * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OUT, HID, 1, m->h, HID, m->w2, HID, 1, m->logits, OUT);
    double loss = 0;
    for (int r = 0; r < B; r++) {
        float *l = m->logits + r * OUT, *d = m->dlogits + r * OUT, mx = l[0];
        for (int k = 1; k < OUT; k++) mx = l[k] > mx ? l[k] : mx;
        double z = 0;
        for (int k = 0; k < OUT; k++) z += (d[k] = expf(l[k] - mx));
        for (int k = 0; k < OUT; k++) d[k] = d[k] / (float)z / B;
        d[m->labels[r]] -= 1.0f / B;
        loss += log(z) + mx - l[m->labels[r]];
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, HID, B, 1, m->dlogits, OUT, m->h, HID, 1, m->gw2, HID);
    for (int r = 0; r < B; r++)
        for (int k = 0; k < OUT; k++) m->gb2[k] += m->dlogits[r * OUT + k];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, HID, OUT, 1, m->dlogits, OUT, m->w2, HID, 0, m->dh, HID);
    for (int i = 0; i < B * HID; i++) m->dh[i] = m->h[i] > 0 ? m->dh[i] : 0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, HID, IN, B, 1, m->dh, HID, m->x, IN, 1, m->gw1, IN);
    for (int r = 0; r < B; r++)
        for (int k = 0; k < HID; k++) m->gb1[k] += m->dh[r * HID + k];
    return (float)(loss / B);
}

int main(int argc, char **argv) {
    int iters = 3000, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            printf("usage: %s [--iters N] [--threads T]\n", argv[0]);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (iters < 10 || threads < 1) {
        fprintf(stderr, "bench_engine_overhead: --iters >= 10 and --threads >= 1\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    qat_ctx *ctx = qat_ctx_new();
    qat_rng rng;
    qat_rng_seed(&rng, 1);
    int64_t sx[2] = {B, IN}, sw1[2] = {HID, IN}, sb1[1] = {HID}, sw2[2] = {OUT, HID}, sb2[1] = {OUT};
    qat_tensor *x = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, sx, false);
    qat_tensor *w1 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, sw1, true);
    qat_tensor *b1 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, sb1, true);
    qat_tensor *w2 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 2, sw2, true);
    qat_tensor *b2 = qat_tensor_new(ctx, QAT_MEM_PERSIST, 1, sb2, true);
    if (!ctx || !b2) {
        fprintf(stderr, "bench_engine_overhead: %s\n", qat_ctx_error(ctx));
        return 1;
    }
    qat_tensor *all[5] = {x, w1, b1, w2, b2};
    for (int t = 0; t < 5; t++)
        for (int64_t i = 0; i < all[t]->numel; i++) all[t]->data[i] = 0.1f * (qat_rng_uniform(&rng) - 0.5f);
    int32_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = (int32_t)qat_rng_below(&rng, OUT);

    bare m = {.x = x->data, .w1 = w1->data, .b1 = b1->data, .w2 = w2->data, .b2 = b2->data,
              .labels = labels};
    m.gw1 = calloc(HID * IN, 4), m.gb1 = calloc(HID, 4), m.gw2 = calloc(OUT * HID, 4);
    m.gb2 = calloc(OUT, 4), m.h = calloc(B * HID, 4), m.logits = calloc(B * OUT, 4);
    m.dlogits = calloc(B * OUT, 4), m.dh = calloc(B * HID, 4);

    /* Alternate rounds so both see the same machine state; keep the best. */
    double best_engine = 1e30, best_bare = 1e30, le = 0, lb = 0;
    int rounds = 5, per = iters / rounds;
    for (int r = 0; r < rounds + 1; r++) { /* round 0 warms up */
        double t0 = bench_now();
        for (int i = 0; i < per; i++) {
            qat_tensor *h = qat_relu(ctx, qat_linear(ctx, x, w1, b1));
            qat_tensor *loss = qat_cross_entropy(ctx, qat_linear(ctx, h, w2, b2), labels);
            if (qat_backward(ctx, loss) != QAT_OK) {
                fprintf(stderr, "bench_engine_overhead: %s\n", qat_ctx_error(ctx));
                return 1;
            }
            le = loss->data[0];
            qat_ctx_step_reset(ctx);
        }
        double t1 = bench_now();
        for (int i = 0; i < per; i++) lb = bare_step(&m);
        double t2 = bench_now();
        if (r > 0) {
            best_engine = fmin(best_engine, t1 - t0);
            best_bare = fmin(best_bare, t2 - t1);
        }
    }
    double se = per * B / best_engine, sb = per * B / best_bare;
    printf("engine overhead benchmark: MLP 784-256-10, batch %d, %d threads, OPENBLAS_CORETYPE=%s (OpenBLAS core %s)\n",
           B, threads, bench_coretype(), qat_blas_core());
    printf("  engine    %9.0f samples/s  (loss %.4f)\n", se, le);
    printf("  bare sgemm%9.0f samples/s  (loss %.4f)\n", sb, lb);
    printf("  overhead  %+.1f %%\n", 100.0 * (best_engine / best_bare - 1.0));
    printf("  peak RSS  %.1f MiB, step arena peak %.2f MiB\n", bench_peak_rss_mib(),
           (double)qat_ctx_step_peak_bytes(ctx) / (1 << 20));
    free(m.gw1), free(m.gb1), free(m.gw2), free(m.gb2), free(m.h), free(m.logits);
    free(m.dlogits), free(m.dh);
    qat_ctx_free(ctx);
    return fabs(le - lb) < 1e-3 ? 0 : 1; /* both computed the same loss */
}
