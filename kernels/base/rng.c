#include "kernels/base/rng.h"

#include <math.h>

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

uint64_t rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

rng_t rng_init(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b) {
    // Hash the key words one after another so (a, b) and (b, a) give different streams.
    uint64_t h = rng_mix64(seed + GOLDEN_GAMMA);
    h = rng_mix64(h ^ (purpose + GOLDEN_GAMMA));
    h = rng_mix64(h ^ (a + 2 * GOLDEN_GAMMA));
    h = rng_mix64(h ^ (b + 3 * GOLDEN_GAMMA));
    return (rng_t){.state = h};
}

uint64_t rng_next_u64(rng_t *r) {
    r->state += GOLDEN_GAMMA;
    return rng_mix64(r->state);
}

void rng_skip(rng_t *r, uint64_t n) { r->state += n * GOLDEN_GAMMA; }  // modulo 2^64, as n steps

uint64_t rng_below(rng_t *r, uint64_t n) {
    if (n <= 1) return 0;
    // Reject the top partial block so every value is equally likely.
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = rng_next_u64(r);
    } while (x >= limit);
    return x % n;
}

double rng_uniform(rng_t *r) { return (double)(rng_next_u64(r) >> 11) * 0x1.0p-53; }

double rng_normal(rng_t *r) {
    double u1 = 1.0 - rng_uniform(r);  // (0, 1]: log is finite
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
