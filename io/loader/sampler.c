#include "io/loader/sampler.h"

#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>

void sampler_init(sampler_t *s, int64_t num_samples, int world, int rank, uint64_t seed, int shuffle, int drop_last) {
    SPK_ASSERT(num_samples > 0 && world > 0 && rank >= 0 && rank < world);
    *s = (sampler_t){.num_samples = num_samples,
                     .world = world,
                     .rank = rank,
                     .seed = seed,
                     .shuffle = shuffle,
                     .drop_last = drop_last,
                     .epoch = -1};
    if (drop_last) {
        s->total = num_samples / world * world;
    } else {
        s->total = (num_samples + world - 1) / world * world;
    }
    s->per_rank = s->total / world;
    int64_t n = s->total > num_samples ? s->total : num_samples;
    s->order = mallocCheck((size_t)n * sizeof(int64_t));
}

void sampler_set_epoch(sampler_t *s, int64_t epoch) {
    int64_t n = s->num_samples;
    for (int64_t i = 0; i < n; i++) s->order[i] = i;
    if (s->shuffle) {
        rng_t r = rng_init(s->seed, RNG_PURPOSE_SHUFFLE, (uint64_t)epoch, 0);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
            int64_t t = s->order[i];
            s->order[i] = s->order[j];
            s->order[j] = t;
        }
    }
    // Wrap-around padding (the prefix repeats, as often as needed when total > 2N).
    for (int64_t i = n; i < s->total; i++) s->order[i] = s->order[i - n];
    s->epoch = epoch;
}

int64_t sampler_steps(const sampler_t *s, int64_t batch) {
    SPK_ASSERT(batch > 0);
    return (s->per_rank + batch - 1) / batch;
}

int sampler_batch(const sampler_t *s, int64_t step, int64_t batch, int64_t *out) {
    SPK_ASSERT(s->epoch >= 0);
    int64_t begin = step * batch;
    int64_t end = begin + batch < s->per_rank ? begin + batch : s->per_rank;
    int n = 0;
    for (int64_t j = begin; j < end; j++) out[n++] = sampler_local(s, j);
    return n;
}

int sampler_batch_slice(const sampler_t *s, int64_t step, int64_t batch, int64_t *out) {
    SPK_ASSERT(s->epoch >= 0 && batch > 0);
    const int64_t begin = (step * s->world + s->rank) * batch;
    SPK_ASSERT((step + 1) * s->world * batch <= s->total);
    for (int64_t j = 0; j < batch; j++) out[j] = s->order[begin + j];
    return (int)batch;
}

void sampler_free(sampler_t *s) {
    free(s->order);
    s->order = NULL;
}
