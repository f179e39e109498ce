// Counter-based randomness. Every random draw in spkddp is a pure function of
// (seed, purpose, epoch, sample index, counter) -- never of the rank -- so a run reproduces
// on any world size and after a restart. The generator is SplitMix64 (Steele, Lea & Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014): a 64-bit state advanced
// by the golden-ratio increment and finalised by a 64-bit mixer.
#pragma once
#include <stdint.h>

typedef struct {
    uint64_t state;
} rng_t;

// Purposes keep independent streams apart even with the same seed and indices.
enum rng_purpose {
    RNG_PURPOSE_SHUFFLE = 1,  // epoch permutation of the sampler
    RNG_PURPOSE_INIT = 2,     // parameter initialisation
    RNG_PURPOSE_CROP = 3,     // per-sample crop offsets
    RNG_PURPOSE_SYNTH = 4,    // synthetic datasets
    // Augmentation (io/augment/augment.h): one stream per decision, so turning one kind on or off
    // leaves every other kind's draws unchanged.
    RNG_PURPOSE_AUGMENT = 5,        // whether a sample is augmented at all
    RNG_PURPOSE_SPEED = 6,          // speed factor
    RNG_PURPOSE_REVERB = 7,         // reverberation: whether, which impulse response
    RNG_PURPOSE_NOISE = 8,          // additive noise: whether, which category, entries, offsets, SNR
    RNG_PURPOSE_SPECAUG = 9,        // SpecAugment masks
    RNG_PURPOSE_CLASS_SAMPLE = 10,  // the classes a sharded head scores in a step (Partial FC)
    RNG_PURPOSE_BALANCED = 11,      // speaker-balanced epochs: each speaker's utterances, the groups
    RNG_PURPOSE_MODALITY = 12,      // modality dropout: which stream a training sample goes without
    RNG_PURPOSE_PICTURES = 13,      // picture augmentation: a sample's crop, flip, brightness and contrast
    RNG_PURPOSE_GEMM_CHECK = 14,    // the operands on which a GEMM's row tiles are checked (gemm_row_tiles.c)
};

uint64_t rng_mix64(uint64_t z);                                           // the SplitMix64 finaliser
rng_t rng_init(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b);  // stream keyed on 4 words
uint64_t rng_next_u64(rng_t *r);
void rng_skip(rng_t *r, uint64_t n);       // as n calls of rng_next_u64 (rng_uniform), at once
uint64_t rng_below(rng_t *r, uint64_t n);  // uniform in [0, n), unbiased (rejection)
double rng_uniform(rng_t *r);              // uniform in [0, 1), 53 bits
double rng_normal(rng_t *r);               // standard normal (Box-Muller, one value per call)
