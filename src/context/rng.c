/* xoroshiro128+ seeded by splitmix64: small, fast, and its whole state is
 * two words that checkpoints can store. */
#include <math.h>

#include "qat/context.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A NULL generator is a caller's error: seeding it does nothing and it
 * draws zeros (no crash; these sit in inner loops, so no message). */
void qat_rng_seed(qat_rng *rng, uint64_t seed) {
    if (!rng) return;
    rng->s[0] = splitmix64(&seed);
    rng->s[1] = splitmix64(&seed);
    if (!rng->s[0] && !rng->s[1]) rng->s[1] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next64(qat_rng *rng) {
    uint64_t s0 = rng->s[0], s1 = rng->s[1], r = s0 + s1;
    s1 ^= s0;
    rng->s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
    rng->s[1] = rotl(s1, 37);
    return r;
}

uint32_t qat_rng_u32(qat_rng *rng) { return rng ? (uint32_t)(next64(rng) >> 32) : 0; }

/* 24 high bits: every value exactly representable, strictly below 1. */
float qat_rng_uniform(qat_rng *rng) { return rng ? (float)(next64(rng) >> 40) * (1.0f / 16777216.0f) : 0.0f; }

uint32_t qat_rng_below(qat_rng *rng, uint32_t n) {
    if (n == 0 || !rng) return 0;
    uint32_t limit = (uint32_t)(-n) % n; /* reject the short top slice */
    for (;;) {
        uint32_t r = qat_rng_u32(rng);
        if (r >= limit) return r % n;
    }
}

float qat_rng_normal(qat_rng *rng) {
    if (!rng) return 0.0f;
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    float u1 = 1.0f - qat_rng_uniform(rng), u2 = qat_rng_uniform(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}
