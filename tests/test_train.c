/* The trainer (qat/train.h), its metrics and the augmentation
 * (qat/data.h), on small seeded data sets made in memory: metrics by
 * hand, the ROC AUC against its definition, augmentation independent of
 * threads and batch splits, training that learns (classification,
 * regression, an autoencoder with anomaly labels), exact resume, the best
 * epoch and early stopping, a stop request, and the errors a bad set or
 * configuration gets. */
#include <stdlib.h>
#include <unistd.h>

#include "qat/export.h"
#include "qat/infer.h"
#include "qat/parallel.h"
#include "qat/train.h"
#include "test_util.h"

static char dir[256];

/* ---- metrics ------------------------------------------------------------------------------ */

static void test_metrics_by_hand(void) {
    qat_task task = {.kind = QAT_TASK_CLASSIFY, .topk = 2};
    qat_metrics m;
    CU_ASSERT_EQUAL_FATAL(qat_metrics_init(&m, &task, 4, 3), QAT_OK);
    /* predictions 1, 0 (a tie: the first), 2, 2; labels 1, 1, 2, 0 */
    const float out[12] = {0, 3, 1, 2, 2, 1, 0, 0, 5, 1, 2, 3};
    const int32_t labels[4] = {1, 1, 2, 0};
    CU_ASSERT_EQUAL(qat_metrics_add(&m, 2, 2, out + 6, labels + 2, NULL, NULL), QAT_OK); /* blocks in any order */
    CU_ASSERT_EQUAL(qat_metrics_add(&m, 0, 2, out, labels, NULL, NULL), QAT_OK);
    qat_metrics_finish(&m);
    CU_ASSERT_EQUAL(m.n, 4);
    CU_ASSERT_DOUBLE_EQUAL(m.accuracy, 0.5, 1e-12);
    /* top-2: sample 1 (label 1, outputs 2 2 1: class 0 ranks first on the tie, 1 second) in; sample 3
     * (label 0: 1 is below 3 and 2) out */
    CU_ASSERT_DOUBLE_EQUAL(m.topk_accuracy, 0.75, 1e-12);
    CU_ASSERT_EQUAL(m.predictions[0], 1);
    CU_ASSERT_EQUAL(m.predictions[1], 0);
    CU_ASSERT_EQUAL(m.predictions[3], 2);
    const int64_t confusion[9] = {0, 0, 1, 1, 1, 0, 0, 0, 1};
    CU_ASSERT_EQUAL(memcmp(m.confusion, confusion, sizeof confusion), 0);
    double loss = 0; /* -log softmax at the label, by hand */
    for (int i = 0; i < 4; i++) {
        double z = 0;
        for (int k = 0; k < 3; k++) z += exp(out[i * 3 + k]);
        loss += log(z) - out[i * 3 + labels[i]];
    }
    CU_ASSERT_DOUBLE_EQUAL(m.loss, loss / 4, 1e-9);
    bool higher;
    CU_ASSERT_DOUBLE_EQUAL(qat_metrics_get(&m, "top2", &higher), 0.75, 1e-12);
    CU_ASSERT(higher);
    qat_metrics_get(&m, "loss", &higher);
    CU_ASSERT(!higher);
    CU_ASSERT(isnan(qat_metrics_get(&m, "top3", NULL)));
    CU_ASSERT_EQUAL(qat_metrics_add(&m, 3, 2, out, labels, NULL, NULL), QAT_ERR_ARG); /* past the end */
    qat_metrics_free(&m);
    /* regression: per-sample errors, the MSE over every element, and the AUC of the errors */
    task.kind = QAT_TASK_AUTOENCODER;
    CU_ASSERT_EQUAL_FATAL(qat_metrics_init(&m, &task, 3, 2), QAT_OK);
    const float o[6] = {1, 2, 0, 0, 3, 3}, t[6] = {1, 0, 0, 1, 0, 3};
    const uint8_t anomaly[3] = {1, 0, 1};
    CU_ASSERT_EQUAL(qat_metrics_add(&m, 0, 3, o, NULL, t, anomaly), QAT_OK);
    qat_metrics_finish(&m);
    CU_ASSERT_DOUBLE_EQUAL(m.errors[0], 2.0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(m.errors[1], 0.5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(m.errors[2], 4.5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(m.mse, 14.0 / 6.0, 1e-9);
    CU_ASSERT(m.has_auc);
    CU_ASSERT_DOUBLE_EQUAL(m.auc, 1.0, 1e-12); /* both anomalies above the normal sample */
    qat_metrics_free(&m);
}

/* The AUC against its definition: P(score of a positive > score of a
 * negative) + P(equal) / 2, over every pair. */
static void test_roc_auc(void) {
    const float s1[4] = {0.1f, 0.4f, 0.35f, 0.8f};
    const uint8_t y1[4] = {0, 0, 1, 1};
    CU_ASSERT_DOUBLE_EQUAL(qat_roc_auc(s1, y1, 4), 0.75, 1e-12); /* scikit-learn's example */
    const float ties[4] = {1, 1, 1, 1};
    CU_ASSERT_DOUBLE_EQUAL(qat_roc_auc(ties, y1, 4), 0.5, 1e-12);
    const uint8_t one_class[4] = {1, 1, 1, 1};
    CU_ASSERT(isnan(qat_roc_auc(s1, one_class, 4)));
    qat_rng rng;
    qat_rng_seed(&rng, 7);
    enum { N = 300 };
    float s[N];
    uint8_t y[N];
    for (int i = 0; i < N; i++) {
        y[i] = qat_rng_uniform(&rng) < 0.3f;
        s[i] = (float)(int)(10 * qat_rng_uniform(&rng)) + (y[i] ? 2.0f : 0.0f); /* many ties */
    }
    double pairs = 0, wins = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (y[i] && !y[j]) pairs++, wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    CU_ASSERT_DOUBLE_EQUAL(qat_roc_auc(s, y, N), wins / pairs, 1e-12);
}

/* ---- augmentation -------------------------------------------------------------------------- */

static void test_augmentation(void) {
    enum { N = 40, C = 2, H = 5, W = 6, E = C * H * W };
    const int64_t shape[3] = {C, H, W};
    static float x[N * E], a[N * E], b[N * E], scratch[4 * E];
    qat_rng rng;
    qat_rng_seed(&rng, 3);
    for (int i = 0; i < N * E; i++) x[i] = 1.0f + qat_rng_uniform(&rng); /* never 0: padding shows */
    qat_ctx *ctx = qat_ctx_new();
    qat_augment aug = {.crop_pad = 2, .hflip = true, .noise = 0.0f};
    CU_ASSERT_EQUAL(qat_augment_check(ctx, &aug, 3, shape), QAT_OK);
    memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
    qat_augment_batch(ctx, &aug, 9, 100, N, 3, shape, a, scratch);
    /* the same samples in two calls (a batch split between two processes), on two threads */
    qat_pool *pool = qat_pool_new(2, NULL);
    qat_ctx_set_pool(ctx, pool);
    qat_augment_batch(ctx, &aug, 9, 100, 13, 3, shape, b, scratch);
    qat_augment_batch(ctx, &aug, 9, 113, N - 13, 3, shape, b + 13 * E, scratch);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* each sample is its original shifted by (dy, dx) in [-2, 2] and maybe mirrored, zeros entering */
    int changed = 0, flipped = 0;
    for (int i = 0; i < N; i++) {
        const float *s = x + i * E, *d = a + i * E;
        bool found = false;
        for (int dy = -2; dy <= 2 && !found; dy++)
            for (int dx = -2; dx <= 2 && !found; dx++)
                for (int f = 0; f < 2 && !found; f++) {
                    bool ok = true;
                    for (int c = 0; c < C && ok; c++)
                        for (int y = 0; y < H && ok; y++)
                            for (int z = 0; z < W && ok; z++) {
                                int sy = y + dy, sz = (f ? W - 1 - z : z) + dx;
                                float want = sy >= 0 && sy < H && sz >= 0 && sz < W ? s[(c * H + sy) * W + sz] : 0.0f;
                                ok = d[(c * H + y) * W + z] == want;
                            }
                    if (ok) found = true, changed += dy || dx || f, flipped += f;
                }
        CU_ASSERT(found);
    }
    CU_ASSERT(changed > N / 2 && flipped > 5 && flipped < N - 5);
    /* another seed, other draws; a key decides a sample whatever its place in the batch */
    memcpy(b, x, sizeof x);
    qat_augment_batch(ctx, &aug, 10, 100, N, 3, shape, b, scratch);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* time shift on [1, T, F] and noise: zeros enter at one end; the noise has the asked spread */
    const int64_t seq[3] = {1, 10, 12};
    qat_augment ts = {.time_shift = 3};
    memcpy(b, x, sizeof x);
    qat_augment_batch(ctx, &ts, 1, 0, 4, 3, seq, b, scratch);
    for (int i = 0; i < 4; i++) {
        int s = 99;
        for (int k = -3; k <= 3 && s == 99; k++) {
            bool ok = true;
            for (int t = 0; t < 10 && ok; t++)
                for (int f = 0; f < 12 && ok; f++)
                    ok = b[i * 120 + t * 12 + f] == (t - k >= 0 && t - k < 10 ? x[i * 120 + (t - k) * 12 + f] : 0.0f);
            if (ok) s = k;
        }
        CU_ASSERT(s != 99);
    }
    qat_augment noise = {.noise = 0.5f};
    memcpy(b, x, sizeof x);
    qat_augment_batch(ctx, &noise, 1, 0, N, 3, shape, b, scratch);
    double sq = 0;
    for (int i = 0; i < N * E; i++) sq += (b[i] - x[i]) * (b[i] - x[i]);
    CU_ASSERT(fabs(sqrt(sq / (N * E)) - 0.5) < 0.05);
    /* what cannot apply is refused with the reason */
    const int64_t flat[1] = {30};
    CU_ASSERT_EQUAL(qat_augment_check(ctx, &aug, 1, flat), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "need image samples"));
    qat_ctx_clear_error(ctx);
    qat_augment big = {.time_shift = 10};
    CU_ASSERT_EQUAL(qat_augment_check(ctx, &big, 3, seq), QAT_ERR_ARG);
    qat_ctx_free(ctx);
    qat_pool_free(pool);
}

/* ---- training ---------------------------------------------------------------------------- */

/* Three classes of 1x6x6 uint8 images: a bright 2x2 block in a class's
 * corner, at a jittered place, on noise; labels [n]. */
typedef struct {
    uint8_t x[600 * 36];
    int32_t y[600];
} image_set;

static void make_images(image_set *s, int n, uint64_t seed) {
    qat_rng rng;
    qat_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        int c = (int)qat_rng_below(&rng, 3), r0 = c == 2 ? 3 : 0, c0 = c == 1 ? 3 : 0;
        r0 += (int)qat_rng_below(&rng, 2), c0 += (int)qat_rng_below(&rng, 2);
        for (int p = 0; p < 36; p++) s->x[i * 36 + p] = (uint8_t)(qat_rng_below(&rng, 60));
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) s->x[i * 36 + (r0 + dy) * 6 + c0 + dx] = (uint8_t)(180 + qat_rng_below(&rng, 60));
        s->y[i] = c;
    }
}

static const char *const tiny_cnn = "input shape=1,6,6\n"
                                    "conv2d c1 input out=4 kernel=3 pad=1\n"
                                    "relu r1 c1\n"
                                    "maxpool2d p1 r1 kernel=2\n"
                                    "flatten f p1\n"
                                    "linear fc f out=3\n";

static qat_model *model_of(qat_ctx *ctx, const char *text, uint64_t seed) {
    qat_model *m = qat_model_new(ctx);
    CU_ASSERT_FATAL(m != NULL);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(m, text, "test"), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_model_build(m, seed), QAT_OK);
    return m;
}

static qat_dataset *image_dataset(qat_ctx *ctx, image_set *tr, image_set *te, double val) {
    make_images(tr, 600, 1), make_images(te, 300, 2);
    qat_array_split a = {.n = 600, .x_dtype = QAT_DT_U8, .x_rank = 3, .x_shape = {1, 6, 6}, .x = tr->x,
                         .y_dtype = QAT_DT_I32, .y = tr->y};
    qat_array_split b = a;
    b.n = 300, b.x = te->x, b.y = te->y;
    qat_dataset_options opt = qat_dataset_defaults();
    opt.val_fraction = val, opt.val_seed = 5;
    qat_dataset *d = NULL;
    qat_status st = qat_dataset_from_arrays(ctx, &a, NULL, &b, &opt, &d);
    if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
    CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
    return d;
}

static qat_train_config config(qat_dataset *d) {
    qat_train_config c = qat_train_defaults();
    c.data = d, c.epochs = 3, c.batch = 32, c.optim.lr = 0.01f, c.qat = true, c.task.topk = 2;
    return c;
}

/* QAT on the images: learns; the normalization is the data's (in [0, 1]
 * units: uint8 divided by 255); the integer program agrees with the
 * fake-quantized model; 1 and 2 threads give the same bits. */
static void test_trainer_learns_images(void) {
    static image_set tr, te;
    uint8_t *state[2] = {NULL, NULL};
    size_t bytes[2] = {0, 0};
    double acc[2] = {0, 0};
    for (int threads = 1; threads <= 2; threads++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_pool *pool = qat_pool_new(threads, NULL);
        qat_ctx_set_pool(ctx, pool);
        qat_dataset *d = image_dataset(ctx, &tr, &te, 0);
        qat_model *m = model_of(ctx, tiny_cnn, 3);
        qat_train_config c = config(d);
        c.augment = (qat_augment){.crop_pad = 1, .noise = 2.0f};
        qat_trainer *t;
        CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
        qat_status st = qat_trainer_run(t);
        if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
        const qat_train_result *r = qat_trainer_result(t);
        acc[threads - 1] = r->test.accuracy;
        CU_ASSERT(r->test.accuracy > 0.9);
        CU_ASSERT(r->has_test_float && r->test_float.accuracy > 0.9);
        CU_ASSERT_EQUAL(r->steps, 3 * 19);
        const qat_normalization *nm = qat_model_normalization(m);
        CU_ASSERT_FATAL(nm != NULL);
        double sum = 0, sq = 0;
        for (int i = 0; i < 600 * 36; i++) sum += tr.x[i] / 255.0, sq += (tr.x[i] / 255.0) * (tr.x[i] / 255.0);
        double mean = sum / (600 * 36), sd = sqrt(sq / (600 * 36) - mean * mean);
        CU_ASSERT(nm->channels == 1 && nm->divisor == 255.0f && nm->raw_uint8);
        CU_ASSERT(fabs(nm->mean[0] - mean) < 1e-6 && fabs(nm->std[0] - sd) < 1e-6);
        bytes[threads - 1] = qat_model_state_bytes(m, NULL, 0);
        state[threads - 1] = malloc(bytes[threads - 1]);
        qat_model_state_bytes(m, state[threads - 1], bytes[threads - 1]);
        if (threads == 1) { /* the integer program on raw pixels */
            qat_ctx *pctx = qat_ctx_new();
            qat_qmodel q;
            CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
            qat_engine *e = qat_engine_new(pctx, &q, QAT_ENGINE_INT, 50);
            qat_task task = {.kind = QAT_TASK_CLASSIFY};
            qat_engine_eval how = {.batch = 50};
            qat_metrics mi;
            CU_ASSERT_EQUAL_FATAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, &task, &how, &mi), QAT_OK);
            int64_t agree = 0;
            for (int64_t i = 0; i < mi.n; i++) agree += mi.predictions[i] == r->test.predictions[i];
            CU_ASSERT(agree >= mi.n - 3);
            CU_ASSERT(fabs(mi.accuracy - r->test.accuracy) < 0.02);
            qat_metrics_free(&mi);
            /* misuse: a NULL argument, a batch above the engine's, the wrong task for the data */
            CU_ASSERT_EQUAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, NULL, &how, &mi), QAT_ERR_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(pctx), "NULL task"));
            qat_ctx_clear_error(pctx);
            CU_ASSERT_EQUAL(qat_engine_evaluate(pctx, e, &q, NULL, QAT_SPLIT_TEST, &task, &how, &mi), QAT_ERR_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(pctx), "NULL data set"));
            qat_ctx_clear_error(pctx);
            qat_engine_eval big = {.batch = 51};
            CU_ASSERT_EQUAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, &task, &big, &mi), QAT_ERR_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(pctx), "batch 51 is more than the engine's max_batch 50"));
            qat_ctx_clear_error(pctx);
            qat_engine_eval dflt = {0}; /* batch 0: 64, but at most the engine's 50 */
            CU_ASSERT_EQUAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, &task, &dflt, &mi), QAT_OK);
            qat_metrics_free(&mi);
            qat_task regress = {.kind = QAT_TASK_REGRESS};
            CU_ASSERT_EQUAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, &regress, &how, &mi), QAT_ERR_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(pctx), "the regress task needs float targets in y; the test "
                                          "split has class labels"));
            qat_metrics_free(&mi);
            qat_engine_free(e);
            qat_ctx_free(pctx);
        }
        qat_trainer_free(t);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
        qat_pool_free(pool);
    }
    CU_ASSERT_EQUAL(bytes[0], bytes[1]);
    CU_ASSERT(state[0] && state[1] && memcmp(state[0], state[1], bytes[0]) == 0);
    CU_ASSERT_EQUAL(acc[0], acc[1]);
    free(state[0]), free(state[1]);
}

/* Stopped part way (stop_after), then resumed: the same state, bit for
 * bit, as a run that never stopped; a stop request saves and says so. */
static void test_resume_and_stop(void) {
    static image_set tr, te;
    char full[300], part[300], stopped[300];
    snprintf(full, sizeof full, "%s/full.ckpt.h5", dir);
    snprintf(part, sizeof part, "%s/part.ckpt.h5", dir);
    snprintf(stopped, sizeof stopped, "%s/stopped.ckpt.h5", dir);
    uint8_t *st[2];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_dataset *d = image_dataset(ctx, &tr, &te, 0);
        qat_model *m = model_of(ctx, tiny_cnn, 3);
        qat_train_config c = config(d);
        c.augment = (qat_augment){.hflip = true};
        c.float_epochs = 1;
        c.out = k ? part : full;
        c.limit_test = 50;
        qat_trainer *t;
        if (k) { /* two legs: stop at step 30 (in the QAT epochs), resume in a fresh process state */
            c.stop_after = 30;
            CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
            CU_ASSERT_EQUAL_FATAL(qat_trainer_run(t), QAT_OK);
            CU_ASSERT(qat_trainer_result(t)->stopped);
            qat_trainer_free(t);
            qat_dataset_free(d);
            qat_ctx_free(ctx);
            ctx = qat_ctx_new();
            d = image_dataset(ctx, &tr, &te, 0);
            m = model_of(ctx, tiny_cnn, 3);
            c.data = d, c.stop_after = 0, c.resume = part;
        }
        CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
        qat_status s = qat_trainer_run(t);
        if (s != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL_FATAL(s, QAT_OK);
        n[k] = qat_model_state_bytes(m, NULL, 0);
        st[k] = malloc(n[k]);
        qat_model_state_bytes(m, st[k], n[k]);
        qat_trainer_free(t);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
    CU_ASSERT(n[0] == n[1] && memcmp(st[0], st[1], n[0]) == 0);
    free(st[0]), free(st[1]);
    /* a stop request: one step, the checkpoint written, the run marked interrupted */
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = image_dataset(ctx, &tr, &te, 0);
    qat_model *m = model_of(ctx, tiny_cnn, 3);
    qat_train_config c = config(d);
    volatile int stop = 1;
    c.stop = &stop, c.out = stopped;
    qat_trainer *t;
    CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_EQUAL(qat_trainer_run(t), QAT_OK);
    CU_ASSERT(qat_trainer_result(t)->interrupted && qat_trainer_result(t)->steps == 1);
    int64_t step, epoch;
    bool prepared;
    CU_ASSERT_EQUAL(qat_checkpoint_info(ctx, stopped, &step, &epoch, &prepared), QAT_OK);
    CU_ASSERT_EQUAL(step, 1);
    qat_trainer_free(t);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

/* The best epoch on a val split carved from train (best_out written),
 * early stopping when the metric stops improving. */
static void test_best_epoch_and_early_stop(void) {
    static image_set tr, te;
    char best[300];
    snprintf(best, sizeof best, "%s/best.ckpt.h5", dir);
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = image_dataset(ctx, &tr, &te, 0.2);
    CU_ASSERT_EQUAL(qat_dataset_info(d, QAT_SPLIT_VAL)->n, 120);
    qat_model *m = model_of(ctx, tiny_cnn, 3);
    qat_train_config c = config(d);
    c.best_out = best, c.epochs = 2, c.qat = false;
    qat_trainer *t;
    CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_trainer_run(t), QAT_OK);
    CU_ASSERT(qat_trainer_result(t)->best_epoch >= 1);
    CU_ASSERT_EQUAL(access(best, R_OK), 0);
    qat_trainer_free(t);
    /* a learning rate too small to move the loss's 4th digit: no better epoch, a stop after `patience` */
    m = model_of(ctx, tiny_cnn, 4);
    c = config(d);
    c.epochs = 10, c.patience = 2, c.optim.lr = 1e-7f, c.qat = false, c.metric = "accuracy";
    CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_EQUAL_FATAL(qat_trainer_run(t), QAT_OK);
    CU_ASSERT(qat_trainer_result(t)->early_stopped);
    CU_ASSERT_EQUAL(qat_trainer_result(t)->epochs_done, 3);
    qat_trainer_free(t);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

/* An autoencoder on 8 features: normal samples on a 2-dimensional
 * subspace, anomalies off it; the test split's anomaly labels give an
 * AUC near 1, in float, fake-quantized and integer evaluation. And a
 * regression on the same features. */
static void test_autoencoder_and_regression(void) {
    enum { NTR = 800, NTE = 400, F = 8 };
    static float xtr[NTR * F], xte[NTE * F], xclean[NTE * F], ytr[NTR * 2], yte[NTE * 2];
    static uint8_t anomaly[NTE];
    qat_rng rng;
    qat_rng_seed(&rng, 11);
    float basis[2][F];
    for (int k = 0; k < 2; k++)
        for (int f = 0; f < F; f++) basis[k][f] = qat_rng_normal(&rng);
    for (int i = 0; i < NTR + NTE; i++) {
        bool test = i >= NTR, anom = test && qat_rng_uniform(&rng) < 0.3f;
        float a = qat_rng_normal(&rng), b = qat_rng_normal(&rng), *x = test ? xte + (i - NTR) * F : xtr + i * F;
        for (int f = 0; f < F; f++) {
            x[f] = a * basis[0][f] + b * basis[1][f] + 0.05f * qat_rng_normal(&rng);
            if (test) xclean[(i - NTR) * F + f] = x[f]; /* the regression's test inputs: no anomalies */
            if (anom) x[f] += 1.5f * qat_rng_normal(&rng);
        }
        float *y = test ? yte + (i - NTR) * 2 : ytr + i * 2;
        y[0] = a, y[1] = a - b;
        if (test) anomaly[i - NTR] = anom;
    }
    for (int task = 0; task < 2; task++) {
        qat_ctx *ctx = qat_ctx_new();
        qat_array_split a = {.n = NTR, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {F}, .x = xtr};
        qat_array_split b = {.n = NTE, .x_dtype = QAT_DT_F32, .x_rank = 1, .x_shape = {F}, .x = xte, .anomaly = anomaly};
        if (task == 1) {
            a.y_dtype = b.y_dtype = QAT_DT_F32, a.y_rank = b.y_rank = 1, a.y_shape[0] = b.y_shape[0] = 2;
            a.y = ytr, b.y = yte, b.anomaly = NULL, b.x = xclean;
        }
        qat_dataset *d;
        CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a, NULL, &b, NULL, &d), QAT_OK);
        qat_model *m = model_of(ctx, task ? "input shape=8\nlinear h input out=16\nrelu r h\nlinear o r out=2\n"
                                          : "input shape=8\nlinear e input out=2\nlinear o e out=8\n", 5);
        qat_train_config c = config(d);
        c.task.kind = task ? QAT_TASK_REGRESS : QAT_TASK_AUTOENCODER;
        c.epochs = 8, c.optim.lr = 0.01f;
        qat_trainer *t;
        CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
        qat_status st = qat_trainer_run(t);
        if (st != QAT_OK) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_EQUAL_FATAL(st, QAT_OK);
        const qat_train_result *r = qat_trainer_result(t);
        if (task == 0) {
            CU_ASSERT(r->test.has_auc && r->test.auc > 0.9);
            CU_ASSERT(r->has_test_float && r->test_float.auc > 0.9);
            printf(" [autoencoder: AUC fake %.4f, float %.4f", r->test.auc, r->test_float.auc);
            qat_ctx *pctx = qat_ctx_new();
            qat_qmodel q;
            CU_ASSERT_EQUAL_FATAL(qat_qmodel_lower(m, 0, NULL, pctx, &q), QAT_OK);
            qat_engine *e = qat_engine_new(pctx, &q, QAT_ENGINE_INT, 100);
            qat_task k = {.kind = QAT_TASK_AUTOENCODER};
            qat_engine_eval how = {.batch = 100};
            qat_metrics mi;
            CU_ASSERT_EQUAL_FATAL(qat_engine_evaluate(pctx, e, &q, d, QAT_SPLIT_TEST, &k, &how, &mi), QAT_OK);
            printf(", int %.4f]", mi.auc);
            CU_ASSERT(mi.has_auc && fabs(mi.auc - r->test.auc) < 0.01);
            qat_metrics_free(&mi);
            qat_engine_free(e);
            qat_ctx_free(pctx);
        } else {
            printf(" [regression: MSE fake %.4f, float %.4f]", r->test.mse, r->test_float.mse);
            CU_ASSERT(r->test.mse < 0.05); /* targets of variance 1 and 2 */
        }
        qat_trainer_free(t);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
}

/* What the trainer refuses, each with its reason. */
static void test_trainer_refusals(void) {
    static image_set tr, te;
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = image_dataset(ctx, &tr, &te, 0);
    qat_trainer *t = NULL;
    struct {
        const char *model, *want;
    } cases[] = {
        {"input shape=1,6,6\nflatten f input\nlinear fc f out=2\n", "label 2 at row"},
        {"input shape=1,5,6\nflatten f input\nlinear fc f out=3\n", "the data's samples are [1, 6, 6], the model's input is [1, 5, 6]"},
        {"input shape=1,6,6\nconv2d c input out=3 kernel=3\n", "output is a vector of logits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        qat_model *m = model_of(ctx, cases[i].model, 1);
        qat_train_config c = config(d);
        CU_ASSERT_NOT_EQUAL(qat_trainer_new(m, &c, &t), QAT_OK);
        if (!strstr(qat_ctx_error(ctx), cases[i].want)) printf("\n  %s\n", qat_ctx_error(ctx));
        CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), cases[i].want));
        qat_ctx_clear_error(ctx);
    }
    qat_model *m = model_of(ctx, tiny_cnn, 1);
    qat_train_config c = config(d);
    c.best_out = "x.ckpt.h5";
    CU_ASSERT_NOT_EQUAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "needs a val split"));
    qat_ctx_clear_error(ctx);
    c = config(d);
    const float w[2] = {1, 2};
    c.task.class_weights = w, c.task.n_class_weights = 2;
    CU_ASSERT_NOT_EQUAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "2 class weights for a model of 3 classes"));
    qat_ctx_clear_error(ctx);
    c = config(d);
    c.task.kind = QAT_TASK_REGRESS;
    CU_ASSERT_NOT_EQUAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "needs float targets in y"));
    qat_ctx_clear_error(ctx);
    c = config(d);
    c.metric = "auc";
    CU_ASSERT_NOT_EQUAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "no metric \"auc\""));
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

/* Calls a program can get wrong: NULLs refused (never a crash), the
 * configuration checked by qat_trainer_new, a model not built, a second
 * run; each with its reason on the context. */
static void test_api_misuse(void) {
    static image_set tr, te;
    qat_ctx *ctx = qat_ctx_new();
    qat_dataset *d = image_dataset(ctx, &tr, &te, 0);
    CU_ASSERT_EQUAL(qat_trainer_steps_per_epoch(NULL), 0);
    CU_ASSERT_EQUAL(qat_trainer_train_samples(NULL), 0);
    CU_ASSERT_PTR_NULL(qat_trainer_result(NULL));
    CU_ASSERT_EQUAL(qat_metrics_init(NULL, &(qat_task){0}, 4, 3), QAT_ERR_ARG);
    qat_metrics mt;
    CU_ASSERT_EQUAL_FATAL(qat_metrics_init(&mt, &(qat_task){.kind = QAT_TASK_CLASSIFY}, 4, 3), QAT_OK);
    const float o[3] = {0, 1, 0};
    CU_ASSERT_EQUAL(qat_metrics_add(&mt, 0, 1, o, NULL, NULL, NULL), QAT_ERR_ARG); /* no labels */
    CU_ASSERT_EQUAL(qat_metrics_add(NULL, 0, 1, o, (int32_t[]){1}, NULL, NULL), QAT_ERR_ARG);
    CU_ASSERT_EQUAL(qat_metrics_add(&mt, 0, 1, o, (int32_t[]){1}, NULL, NULL), QAT_OK);
    qat_metrics_free(&mt);
    qat_metrics_finish(NULL);

    qat_model *m = model_of(ctx, tiny_cnn, 1);
    qat_train_config c = config(d);
    qat_trainer *t = NULL;
    CU_ASSERT_EQUAL(qat_trainer_new(m, NULL, &t), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "qat_trainer_new: NULL cfg"));
    qat_ctx_clear_error(ctx);
    c.qcfg.wbits = 1;
    CU_ASSERT_EQUAL(qat_trainer_new(m, &c, &t), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "bit widths must be 2..16 (weights 1"));
    qat_ctx_clear_error(ctx);
    c = config(d);
    c.task.kind = (qat_task_kind)9;
    CU_ASSERT_EQUAL(qat_trainer_new(m, &c, &t), QAT_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "unknown task kind 9"));
    qat_ctx_clear_error(ctx);
    qat_model *raw = qat_model_new(ctx);
    CU_ASSERT_EQUAL_FATAL(qat_model_from_text(raw, tiny_cnn, "test"), QAT_OK);
    c = config(d);
    CU_ASSERT_EQUAL(qat_trainer_new(raw, &c, &t), QAT_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "not built yet"));
    qat_ctx_clear_error(ctx);
    c.epochs = 1;
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/misuse.ckpt.h5", dir);
    c.out = ckpt;
    CU_ASSERT_EQUAL_FATAL(qat_trainer_new(m, &c, &t), QAT_OK);
    CU_ASSERT_EQUAL(qat_trainer_run(t), QAT_OK);
    int64_t steps = qat_trainer_result(t)->steps;
    /* the model its checkpoint rebuilds has the trained one's state, bit for bit, before any forward */
    qat_model *back = NULL;
    CU_ASSERT_EQUAL_FATAL(qat_checkpoint_model(ctx, ckpt, &back, NULL, 0), QAT_OK);
    size_t nb = qat_model_state_bytes(m, NULL, 0);
    uint8_t *sa = malloc(nb), *sb = malloc(nb);
    CU_ASSERT_FATAL(sa && sb);
    CU_ASSERT_EQUAL(qat_model_state_bytes(back, NULL, 0), nb);
    qat_model_state_bytes(m, sa, nb), qat_model_state_bytes(back, sb, nb);
    CU_ASSERT_EQUAL(memcmp(sa, sb, nb), 0);
    free(sa), free(sb);
    CU_ASSERT_EQUAL(qat_trainer_run(t), QAT_ERR_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), "this trainer has run once"));
    CU_ASSERT_EQUAL(qat_trainer_result(t)->steps, steps);
    qat_trainer_free(t);
    qat_dataset_free(d);
    qat_ctx_free(ctx);
}

/* qat_data_check_units against hand-computed statistics: two channels of
 * 4 values a sample, channel c alternating lo[c] and hi[c] (mean (lo +
 * hi) / 2, population std (hi - lo) / 2), against a normalization made
 * for channel 0 at mean 2, std 2 and channel 1 at 12, 2 (pooled: 7,
 * sqrt(29) = 5.385). */
static void test_units_check(void) {
    enum { N = 6, C = 2, P = 4 };
    static float x[N * C * P];
    static uint8_t lab[N];
    static const struct {
        float lo[C], hi[C];
        int channels; /* nm's: 2, or 1 (pooled) */
        float std0;   /* nm's std[0] (2, or the constant channel's stand-in, 1) */
        bool ok;
        const char *msg;
    } cases[] = {
        {{0, 10}, {4, 14}, 2, 2, true, NULL},
        {{0, 10}, {4 * 31.9f, 14}, 2, 2, true, NULL}, /* std 63.8 = 31.9 times 2 (mean 63.8: 30.9 stds away) */
        {{0, 10}, {4 * 32.1f, 14}, 2, 2, false,
         "train: channel 0 of the data has mean 64.2 and standard deviation 64.2 (of x / 1), where the model's "
         "normalization was made for 2 and 2 ("},
        {{0, 12 - 2 / 31.9f}, {4, 12 + 2 / 31.9f}, 2, 2, true, NULL}, /* 31.9 times narrower */
        {{0, 12 - 2 / 32.1f}, {4, 12 + 2 / 32.1f}, 2, 2, false, "channel 1 of the data has mean 12 and standard "
                                                                "deviation 0.06231"},
        {{0, 10 + 63.8f}, {4, 14 + 63.8f}, 2, 2, true, NULL}, /* moved 31.9 stds */
        {{0, 10 + 64.2f}, {4, 14 + 64.2f}, 2, 2, false, "channel 1 of the data has mean 76.2 and standard deviation 2"},
        {{0, 10}, {4, 14}, 1, 5.385f, true, NULL},
        {{0, 400}, {160, 560}, 1, 5.385f, false, "the data's channels, pooled, has mean 280 and standard deviation 215.4"},
        {{1.99f, 10}, {2.01f, 14}, 2, 1, true, NULL},      /* std 0.01 against the stand-in 1: the mean alone */
        {{1.99f, 10}, {2.01f, 14}, 2, 1.01f, false, "channel 0 of the data has mean 2 and standard deviation 0.01"},
        {{0, 10 * 255.0f}, {4, 14 * 255.0f}, 2, 2, false, "values in 0..255 where the model was trained on floats "
                                                          "near 0..1?"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        for (int i = 0; i < N; i++)
            for (int c = 0; c < C; c++)
                for (int p = 0; p < P; p++) x[(i * C + c) * P + p] = p % 2 ? cases[k].hi[c] : cases[k].lo[c];
        qat_normalization nm = {.channels = 2, .divisor = 1.0f, .mean = {2.0f, 12.0f}, .std = {cases[k].std0, 2.0f}};
        if (cases[k].channels == 1) nm.channels = 1, nm.mean[0] = 7.0f, nm.std[0] = cases[k].std0;
        qat_ctx *ctx = qat_ctx_new();
        qat_array_split a = {.n = N, .x_dtype = QAT_DT_F32, .x_rank = 3, .x_shape = {C, 2, 2}, .x = x,
                             .y_dtype = QAT_DT_U8, .y = lab};
        qat_dataset *d;
        CU_ASSERT_EQUAL_FATAL(qat_dataset_from_arrays(ctx, &a, NULL, &a, NULL, &d), QAT_OK);
        bool refused = !cases[k].ok;
        qat_status st = qat_data_check_units(ctx, d, QAT_SPLIT_TRAIN, 0, &nm, &refused);
        CU_ASSERT_EQUAL(st, cases[k].ok ? QAT_OK : QAT_ERR_ARG);
        CU_ASSERT_EQUAL(refused, !cases[k].ok);
        if (cases[k].msg && !strstr(qat_ctx_error(ctx), cases[k].msg))
            printf("\n  case %zu: %s\n", k, qat_ctx_error(ctx));
        if (cases[k].msg) CU_ASSERT_PTR_NOT_NULL(strstr(qat_ctx_error(ctx), cases[k].msg));
        CU_ASSERT_EQUAL(qat_data_check_units(ctx, d, QAT_SPLIT_TRAIN, 0, NULL, &refused), QAT_OK); /* none */
        CU_ASSERT(!refused);
        /* a failure to read is not a refusal */
        CU_ASSERT_EQUAL(qat_data_check_units(ctx, d, QAT_SPLIT_VAL, 0, &nm, &refused), QAT_ERR_ARG);
        CU_ASSERT(!refused);
        qat_dataset_free(d);
        qat_ctx_free(ctx);
    }
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "/tmp/qat-test-train-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) return 1;
    const qat_test_case cases[] = {
        {"metrics: accuracy, top-k, confusion, loss, errors, by hand", test_metrics_by_hand},
        {"metrics: the ROC AUC is the pairwise definition, ties half", test_roc_auc},
        {"augmentation: per-sample draws, independent of threads and splits; shapes refused", test_augmentation},
        {"trainer: QAT learns images; data normalization; int agrees; threads give the same bits",
         test_trainer_learns_images},
        {"trainer: stop and resume is bit-identical; a stop request saves", test_resume_and_stop},
        {"trainer: the best val epoch is saved; early stopping", test_best_epoch_and_early_stop},
        {"trainer: autoencoder AUC in float, fake and int; regression", test_autoencoder_and_regression},
        {"trainer: refusals name the reason", test_trainer_refusals},
        {"trainer, metrics, engine evaluation: NULLs, configuration, an unbuilt model, a second run refused",
         test_api_misuse},
        {"units: data far from the normalization's spread or mean refused, with the figures", test_units_check},
        {NULL, NULL},
    };
    int rc = qat_test_main("train", cases, argc, argv);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return rc;
}
