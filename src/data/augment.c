/* Augmentation of training batches: random crop with zero padding,
 * horizontal flip, time shift and additive Gaussian noise, each sample
 * from a generator of its own (qat/data.h says why). */
#include <math.h>
#include <string.h>

#include "qat/data.h"
#include "qat/parallel.h"

bool qat_augment_on(const qat_augment *a) {
    return a && (a->crop_pad > 0 || a->hflip || a->time_shift > 0 || a->noise > 0.0f);
}

qat_status qat_augment_check(qat_ctx *ctx, const qat_augment *a, int rank, const int64_t *shape) {
    if (!a || !qat_augment_on(a)) return QAT_OK;
    bool image = rank == 3;
    if (a->crop_pad < 0 || a->crop_pad > QAT_AUGMENT_MAX_PAD)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "augmentation: crop padding %d outside 0..%d", a->crop_pad,
                            QAT_AUGMENT_MAX_PAD);
    if ((a->crop_pad > 0 || a->hflip) && !image)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "augmentation: random crop and flip need image samples [C, H, W]; "
                            "these are [%lld]", (long long)shape[0]);
    int64_t axis = image ? shape[1] : shape[0]; /* the time axis */
    if (a->time_shift < 0 || a->time_shift >= axis)
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "augmentation: a time shift of %d needs a time axis longer than it "
                            "(it has %lld)", a->time_shift, (long long)axis);
    if (!(a->noise >= 0.0f) || !isfinite(a->noise))
        return qat_ctx_fail(ctx, QAT_ERR_ARG, "augmentation: noise %g is not a finite number >= 0", (double)a->noise);
    return QAT_OK;
}

/* The generator of one sample: the run's seed and the sample's key mixed
 * (splitmix64's odd constants) so that neighbouring keys start far apart. */
static qat_rng sample_rng(uint64_t seed, int64_t key) {
    qat_rng r;
    qat_rng_seed(&r, seed * 0xD1B54A32D192ED03ull ^ ((uint64_t)key * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull));
    return r;
}

/* dst[c][i][j] = src[c][i + dy][j + dx] where that is inside, 0 outside;
 * flip mirrors j. */
static void shift_plane(const float *src, float *dst, int64_t C, int64_t H, int64_t W, int64_t dy, int64_t dx,
                        bool flip) {
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < H; i++) {
            float *d = dst + (c * H + i) * W;
            int64_t si = i + dy;
            if (si < 0 || si >= H) {
                memset(d, 0, (size_t)W * sizeof *d);
                continue;
            }
            const float *s = src + (c * H + si) * W;
            for (int64_t j = 0; j < W; j++) {
                int64_t sj = (flip ? W - 1 - j : j) + dx;
                d[j] = sj >= 0 && sj < W ? s[sj] : 0.0f;
            }
        }
}

/* Gaussian-like noise, fast enough to add to every element of a batch
 * (Box-Muller's log and cosine cost 15-30 ns an element, a fifth of a
 * LeNet step): z is the sum of the 8 bytes of a xorshift64* output,
 * centred and scaled, an Irwin-Hall sum of 8 uniform bytes with mean 0
 * and variance 1 (bounded at +-4.9), whose density is within 0.3 % of
 * N(0, 1)'s at its centre. Eight xorshift generators run side by side,
 * element e drawing from generator e % 8 (independent chains, so the
 * loop is not one long dependency), each seeded from the sample's own
 * generator: the noise is as reproducible as the rest. */
enum { NOISE_LANES = 8 };

static inline float noise_of(uint64_t *s, float k) {
    uint64_t v = *s;
    v ^= v >> 12, v ^= v << 25, v ^= v >> 27;
    *s = v;
    v *= 0x2545F4914F6CDD1Dull;
    v = (v & 0x00FF00FF00FF00FFull) + ((v >> 8) & 0x00FF00FF00FF00FFull); /* 4 sums of 2 bytes, 16 bits each */
    int sum = (int)((v * 0x0001000100010001ull) >> 48);                  /* their total, 0..2040 */
    return k * (float)(sum - 1020);
}

static void add_noise(qat_rng *r, float *x, int64_t n, float scale) {
    uint64_t s[NOISE_LANES];
    for (int l = 0; l < NOISE_LANES; l++) s[l] = ((uint64_t)qat_rng_u32(r) << 32 | qat_rng_u32(r)) | 1; /* never 0 */
    const float k = scale / 209.02332f; /* sqrt(8 * (256^2 - 1) / 12) */
    int64_t e = 0;
    for (; e + NOISE_LANES <= n; e += NOISE_LANES)
        for (int l = 0; l < NOISE_LANES; l++) x[e + l] += noise_of(&s[l], k);
    for (int l = 0; e < n; e++, l++) x[e] += noise_of(&s[l], k);
}

typedef struct {
    const qat_augment *a;
    uint64_t seed;
    int64_t first_key, n, numel, C, H, W;
    float *x, *scratch;
} aug_job;

enum { AUG_CHUNK = 16 };

static void aug_task(void *user, int64_t task, int worker) {
    const aug_job *j = user;
    const qat_augment *a = j->a;
    float *tmp = j->scratch + (int64_t)worker * j->numel;
    int64_t i1 = (task + 1) * AUG_CHUNK < j->n ? (task + 1) * AUG_CHUNK : j->n;
    for (int64_t i = task * AUG_CHUNK; i < i1; i++) {
        qat_rng r = sample_rng(j->seed, j->first_key + i);
        float *x = j->x + i * j->numel;
        /* the draws in a fixed order, each only when its transformation is on */
        int64_t dy = 0, dx = 0;
        bool flip = false;
        if (a->crop_pad > 0) {
            dy = (int64_t)qat_rng_below(&r, (uint32_t)(2 * a->crop_pad + 1)) - a->crop_pad;
            dx = (int64_t)qat_rng_below(&r, (uint32_t)(2 * a->crop_pad + 1)) - a->crop_pad;
        }
        if (a->hflip) flip = qat_rng_u32(&r) >> 31;
        if (a->time_shift > 0) /* a shift by s moves content forward: dst[t] = src[t - s] */
            dy -= (int64_t)qat_rng_below(&r, (uint32_t)(2 * a->time_shift + 1)) - a->time_shift;
        if (dy || dx || flip) {
            memcpy(tmp, x, (size_t)j->numel * sizeof *x);
            if (j->H > 0) shift_plane(tmp, x, j->C, j->H, j->W, dy, dx, flip);
            else shift_plane(tmp, x, 1, 1, j->numel, 0, dy, false); /* [F]: the shift runs along F */
        }
        if (a->noise > 0.0f) add_noise(&r, x, j->numel, a->noise);
    }
}

void qat_augment_batch(qat_ctx *ctx, const qat_augment *a, uint64_t seed, int64_t first_key, int64_t n, int rank,
                       const int64_t *shape, float *x, float *scratch) {
    if (!qat_augment_on(a) || n <= 0) return;
    aug_job j = {.a = a, .seed = seed, .first_key = first_key, .n = n, .x = x, .scratch = scratch};
    if (rank == 3) j.C = shape[0], j.H = shape[1], j.W = shape[2], j.numel = j.C * j.H * j.W;
    else j.numel = shape[0]; /* H = 0: a sequence of features */
    qat_pool_run(qat_ctx_pool(ctx), (n + AUG_CHUNK - 1) / AUG_CHUNK, aug_task, &j);
}
