// Distributed sampler with PyTorch DistributedSampler semantics.
//   epoch order : a permutation of [0, N) from (seed, epoch) -- Fisher-Yates driven by
//                 rng_init(seed, RNG_PURPOSE_SHUFFLE, epoch, 0) -- or 0..N-1 without shuffle;
//                 identical on every rank, independent of the world size K.
//   padding     : the order is extended by wrapping around to total = ceil(N/K)*K, or cut to
//                 floor(N/K)*K with drop_last, so every rank gets total/K samples.
//   sharding    : rank r takes order positions r, r+K, r+2K, ...
//   balanced    : (sampler_balance) for metric-learning losses, each global batch is N speakers x M
//                 utterances instead: groups of M consecutive positions share a speaker and no
//                 speaker appears twice in a global batch (see sampler_balance).
// With per-rank batch B, step s of an epoch covers the global positions [s*K*B, (s+1)*K*B):
// a global batch is a contiguous slice of the epoch order, which is what makes positions
// counted in global samples meaningful across world sizes.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t num_samples;  // N, dataset size
    int world;            // K
    int rank;             // r
    uint64_t seed;
    int shuffle;
    int drop_last;
    int64_t epoch;     // epoch the order below belongs to (-1 before set_epoch)
    int64_t total;     // padded (or cut) epoch length, a multiple of world
    int64_t per_rank;  // total / world
    int64_t *order;    // (total,) global sample order of this epoch
    // sampler_balance's: the speaker of every sample, utterances per group (0: not balanced)
    // and the global batch
    const int32_t *labels;
    int64_t classes, per_speaker, global_batch;
    int64_t *spk_off, *spk_utts;  // (classes + 1), (N): every speaker's samples, in index order
    int64_t *pool, *groups;       // this epoch's shuffled utterances, and its groups' first positions there
} sampler_t;

void sampler_init(sampler_t *s, int64_t num_samples, int world, int rank, uint64_t seed, int shuffle, int drop_last);
void sampler_set_epoch(sampler_t *s, int64_t epoch);
// Number of steps per epoch with per-rank batch B (the last step may be short).
int64_t sampler_steps(const sampler_t *s, int64_t batch);
// Sample index at this rank's local position j (0 <= j < per_rank).
static inline int64_t sampler_local(const sampler_t *s, int64_t j) {
    return s->order[(int64_t)s->rank + (int64_t)s->world * j];
}
// Samples this rank takes in step `step` with per-rank batch B: writes up to B indices,
// returns how many (equal on every rank).
int sampler_batch(const sampler_t *s, int64_t step, int64_t batch, int64_t *out);
// The world-size-invariant mode's partition (docs/invariant.md): the same global batches, each
// cut into contiguous slices, rank r taking order positions [step K B + r B, step K B + (r + 1) B),
// so a group of consecutive positions stays on one rank whatever K (when it divides B). Only
// whole global batches: (step + 1) K B <= total. Writes B indices, returns B.
int sampler_batch_slice(const sampler_t *s, int64_t step, int64_t batch, int64_t *out);
// The invariant mode's epoch length: whole updates of `multiple` samples (a multiple of the
// world), by wrapping the order around as the default padding does, or cut to floor(N/multiple)
// with drop_last. Depends on N and `multiple` only, never on the world size. Returns the
// samples added (or, with drop_last, left out).
int64_t sampler_pad_to(sampler_t *s, int64_t multiple);
// Speaker-balanced epochs (metric learning: prototypical, GE2E, supervised contrastive). From
// (seed, epoch), each speaker's utterances are shuffled and cut into groups of M (a speaker with
// fewer than M has none; a remainder waits for another epoch's shuffle), the groups are shuffled,
// and each global batch takes the next N = global_batch / M groups of distinct speakers (a group
// whose speaker is already in the batch being made waits for the next one; batches the greedy
// order leaves short are completed with the epoch's groups again, from a cursor that moves on).
// Every epoch has the largest number b <= floor(groups / N) of global batches that distinct
// speakers can fill (sum over speakers of min(their groups, b) >= b N: a speaker with most of
// the data cannot fill batches alone); `total` becomes that many global batches, each rank takes contiguous slices of them
// (sampler_batch_slice), so the batches are the same on any number of ranks with the same
// global batch. Returns the number of speakers with at least M utterances; the caller refuses
// a run with fewer than N of them, or with no whole batch (total 0).
int64_t sampler_balance(sampler_t *s, const int32_t *labels, int64_t classes, int64_t per_speaker,
                        int64_t global_batch);
void sampler_free(sampler_t *s);
