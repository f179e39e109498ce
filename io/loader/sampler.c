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

int64_t sampler_pad_to(sampler_t *s, int64_t multiple) {
    SPK_ASSERT(multiple > 0 && multiple % s->world == 0 && s->per_speaker == 0);
    const int64_t n = s->num_samples, whole = n / multiple * multiple;
    s->total = s->drop_last || whole == n ? whole : whole + multiple;
    s->per_rank = s->total / s->world;
    free(s->order);
    s->order = mallocCheck((size_t)(s->total > n ? s->total : n) * sizeof(int64_t));
    return s->drop_last ? n - s->total : s->total - n;
}

static void shuffle(int64_t *a, int64_t n, rng_t *r) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(r, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

int64_t sampler_balance(sampler_t *s, const int32_t *labels, int64_t classes, int64_t per_speaker,
                        int64_t global_batch) {
    SPK_ASSERT(classes > 0 && per_speaker > 0 && global_batch % per_speaker == 0 && global_batch % s->world == 0);
    const int64_t N = s->num_samples, M = per_speaker;
    s->labels = labels;
    s->classes = classes;
    s->per_speaker = M;
    s->global_batch = global_batch;
    s->spk_off = callocCheck((size_t)classes + 1, sizeof(int64_t));
    s->spk_utts = mallocCheck((size_t)N * sizeof(int64_t));
    s->pool = mallocCheck((size_t)N * sizeof(int64_t));
    for (int64_t i = 0; i < N; i++) {
        SPK_ASSERT(labels[i] >= 0 && labels[i] < classes);
        s->spk_off[labels[i] + 1]++;
    }
    int64_t groups = 0, speakers = 0;
    for (int64_t c = 0; c < classes; c++) {
        groups += s->spk_off[c + 1] / M;
        speakers += s->spk_off[c + 1] >= M;
        s->spk_off[c + 1] += s->spk_off[c];
    }
    int64_t *fill = mallocCheck((size_t)classes * sizeof(int64_t));
    for (int64_t c = 0; c < classes; c++) fill[c] = s->spk_off[c];
    for (int64_t i = 0; i < N; i++) s->spk_utts[fill[labels[i]]++] = i;
    free(fill);
    s->groups = mallocCheck((size_t)(groups > 0 ? groups : 1) * sizeof(int64_t));
    const int64_t per_batch = global_batch / M;  // speakers in a global batch
    // At most floor(groups / N) batches, and no more than distinct speakers can fill: a speaker
    // gives a batch one group, so b batches need sum_c min(groups_c, b) >= b N.
    int64_t lo = 0, hi = speakers >= per_batch ? groups / per_batch : 0;
    while (lo < hi) {
        const int64_t b = lo + (hi - lo + 1) / 2;
        int64_t fill = 0;
        for (int64_t c = 0; c < classes && fill < b * per_batch; c++) {
            const int64_t g = (s->spk_off[c + 1] - s->spk_off[c]) / M;
            fill += g < b ? g : b;
        }
        if (fill >= b * per_batch)
            lo = b;
        else
            hi = b - 1;
    }
    const int64_t batches = lo;
    s->total = batches * global_batch;
    s->per_rank = s->total / s->world;
    free(s->order);
    s->order = mallocCheck((size_t)(s->total > 0 ? s->total : 1) * sizeof(int64_t));
    return speakers;
}

// The global batch being made: each speaker's last batch, the groups it holds, the order's end.
typedef struct {
    sampler_t *s;
    int64_t *in_batch;
    int64_t batch, taken, out;
} batch_fill_t;

// Group g (its first position in the pool) into the batch, unless its speaker is there already.
static int take_group(batch_fill_t *f, int64_t g) {
    const int64_t spk = f->s->labels[f->s->pool[g]];
    if (f->in_batch[spk] == f->batch) return 0;
    f->in_batch[spk] = f->batch;
    for (int64_t j = 0; j < f->s->per_speaker; j++) f->s->order[f->out++] = f->s->pool[g + j];
    f->taken++;
    return 1;
}

// A balanced epoch (sampler_balance): groups of M utterances of one speaker, N distinct speakers
// per global batch.
static void set_balanced_epoch(sampler_t *s, int64_t epoch) {
    const int64_t M = s->per_speaker, C = s->classes, per_batch = s->global_batch / M;
    int64_t ngroups = 0;
    for (int64_t c = 0; c < C; c++) {
        const int64_t b = s->spk_off[c], n = s->spk_off[c + 1] - b;
        for (int64_t i = 0; i < n; i++) s->pool[b + i] = s->spk_utts[b + i];
        rng_t r = rng_init(s->seed, RNG_PURPOSE_BALANCED, (uint64_t)epoch, (uint64_t)c + 1);
        shuffle(s->pool + b, n, &r);
        for (int64_t g = 0; g + M <= n; g += M) s->groups[ngroups++] = b + g;
    }
    rng_t r = rng_init(s->seed, RNG_PURPOSE_BALANCED, (uint64_t)epoch, 0);
    shuffle(s->groups, ngroups, &r);
    // Batches of distinct speakers: a group meeting its speaker in the batch being made waits
    // (in order) for the next batch.
    batch_fill_t f = {.s = s, .in_batch = mallocCheck((size_t)C * sizeof(int64_t))};
    int64_t *wait = mallocCheck((size_t)(ngroups > 0 ? ngroups : 1) * sizeof(int64_t));
    for (int64_t c = 0; c < C; c++) f.in_batch[c] = -1;
    int64_t waiting = 0, next = 0, wrap = 0;
    const int64_t batches = s->total / s->global_batch;
    for (f.batch = 0; f.batch < batches; f.batch++) {
        f.taken = 0;
        int64_t kept = 0;
        for (int64_t w = 0; w < waiting; w++)
            if (f.taken == per_batch || !take_group(&f, wait[w])) wait[kept++] = wait[w];
        waiting = kept;
        while (f.taken < per_batch && next < ngroups) {
            const int64_t g = s->groups[next++];
            if (!take_group(&f, g)) wait[waiting++] = g;
        }
        // The epoch's groups ran out (the greedy order strands some): repeat its groups from
        // where the last such batch left off (sampler_balance made sure there are enough speakers).
        for (int64_t k = 0; f.taken < per_batch; k++) {
            SPK_ASSERT(k < ngroups);
            take_group(&f, s->groups[wrap]);
            wrap = (wrap + 1) % ngroups;
        }
    }
    free(f.in_batch);
    free(wait);
    SPK_ASSERT(f.out == s->total);
    s->epoch = epoch;
}

void sampler_set_epoch(sampler_t *s, int64_t epoch) {
    if (s->per_speaker > 0) {
        set_balanced_epoch(s, epoch);
        return;
    }
    int64_t n = s->num_samples;
    for (int64_t i = 0; i < n; i++) s->order[i] = i;
    if (s->shuffle) {
        rng_t r = rng_init(s->seed, RNG_PURPOSE_SHUFFLE, (uint64_t)epoch, 0);
        shuffle(s->order, n, &r);
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
    int64_t **arrays[] = {&s->order, &s->spk_off, &s->spk_utts, &s->pool, &s->groups};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        free(*arrays[i]);
        *arrays[i] = NULL;
    }
}
