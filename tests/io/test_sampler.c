// Sampler: disjoint, covering, equal counts, wrap padding, drop_last, per-epoch reshuffle,
// and the same global order whatever the world size; the invariant mode's contiguous slices of
// the same global batches; speaker-balanced epochs.
#include "io/loader/sampler.h"
#include "kernels/base/rng.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>

static void check_epoch(int64_t N, int K, int drop_last, int64_t epoch) {
    sampler_t ref;
    sampler_init(&ref, N, 1, 0, 42, 1, 0);
    sampler_set_epoch(&ref, epoch);  // the world-size-free permutation

    int64_t total = drop_last ? N / K * K : (N + K - 1) / K * K;
    int64_t *seen = calloc((size_t)N, sizeof(int64_t));
    int64_t per_rank = -1;
    for (int r = 0; r < K; r++) {
        sampler_t s;
        sampler_init(&s, N, K, r, 42, 1, drop_last);
        sampler_set_epoch(&s, epoch);
        EXPECT(s.total == total, "N=%lld K=%d total %lld want %lld", (long long)N, K, (long long)s.total,
               (long long)total);
        if (per_rank < 0) per_rank = s.per_rank;
        EXPECT(s.per_rank == per_rank && s.per_rank * K == total, "unequal shard sizes N=%lld K=%d", (long long)N, K);
        for (int64_t j = 0; j < s.per_rank; j++) {
            int64_t pos = r + (int64_t)K * j, idx = sampler_local(&s, j);
            EXPECT(idx >= 0 && idx < N, "index out of range");
            // Position p of the padded order is the permutation at p mod N (wrap-around).
            EXPECT(idx == ref.order[pos % N], "N=%lld K=%d r=%d pos %lld: %lld != %lld", (long long)N, K, r,
                   (long long)pos, (long long)idx, (long long)ref.order[pos % N]);
            if (idx >= 0 && idx < N) seen[idx]++;
        }
        // Batches: every rank gets the same count at every step, and they tile the shard.
        int64_t B = 3, got = 0, buf[3];
        for (int64_t st = 0; st < sampler_steps(&s, B); st++) {
            int n = sampler_batch(&s, st, B, buf);
            EXPECT(n == ((st + 1) * B <= s.per_rank ? B : s.per_rank - st * B), "batch size at step %lld",
                   (long long)st);
            for (int i = 0; i < n; i++) EXPECT(buf[i] == sampler_local(&s, got + i), "batch content");
            got += n;
        }
        EXPECT(got == s.per_rank, "batches cover the shard");
        sampler_free(&s);
    }
    // Covering: without drop_last every sample appears, duplicates only from padding.
    int64_t dup = 0, missing = 0;
    for (int64_t i = 0; i < N; i++) {
        if (seen[i] == 0) missing++;
        if (seen[i] > 1) dup += seen[i] - 1;
    }
    if (!drop_last)
        EXPECT(missing == 0 && dup == total - N, "N=%lld K=%d missing %lld dup %lld", (long long)N, K,
               (long long)missing, (long long)dup);
    else
        EXPECT(dup == 0 && missing == N - total, "drop_last N=%lld K=%d", (long long)N, K);
    free(seen);
    sampler_free(&ref);
}

// Slices: step s's global batch is the same samples as the strided partition's, each rank
// holding a contiguous run of the epoch order.
static void check_slices(int64_t N, int K, int64_t B) {
    const int64_t steps = N / (K * B);
    for (int64_t st = 0; st < steps; st++) {
        int64_t slices[64], strided[64];
        for (int r = 0; r < K; r++) {
            sampler_t s;
            sampler_init(&s, N, K, r, 9, 1, 0);
            sampler_set_epoch(&s, 2);
            EXPECT(sampler_batch_slice(&s, st, B, slices + r * B) == B, "a slice holds B samples");
            for (int64_t j = 0; j < B; j++)
                EXPECT(slices[r * B + j] == s.order[st * K * B + r * B + j],
                       "N=%lld K=%d slice of rank %d is contiguous", (long long)N, K, r);
            sampler_batch(&s, st, B, strided + r * B);
            sampler_free(&s);
        }
        int64_t a = 0, b = 0;  // the same set: equal sums of indices and of their squares
        for (int64_t i = 0; i < K * B; i++) {
            a += slices[i] * (slices[i] + 7) - strided[i] * (strided[i] + 7);
            b += slices[i] - strided[i];
        }
        EXPECT(a == 0 && b == 0, "N=%lld K=%d step %lld: the slices are the global batch", (long long)N, K,
               (long long)st);
    }
}

// The invariant mode's epochs (sampler_pad_to): whole global batches of G = K B, the order
// wrapped around to fill the last one (every sample seen) or cut with drop_last; the same total
// and the same global batches on every world size that divides G.
static void check_pad_to(int64_t N, int64_t G, int drop_last) {
    const int64_t want = drop_last ? N / G * G : (N + G - 1) / G * G;
    const int Ks[] = {1, 2, 4};
    int64_t *first = NULL;
    for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++) {
        const int K = Ks[k];
        const int64_t B = G / K;
        int64_t *got = malloc((size_t)(want > 0 ? want : 1) * sizeof(int64_t));
        for (int r = 0; r < K; r++) {
            sampler_t s;
            sampler_init(&s, N, K, r, 11, 1, drop_last);
            const int64_t moved = sampler_pad_to(&s, G);
            sampler_set_epoch(&s, 1);
            EXPECT(s.total == want && s.per_rank * K == want, "N=%lld G=%lld K=%d: total %lld, want %lld", (long long)N,
                   (long long)G, K, (long long)s.total, (long long)want);
            EXPECT(moved == (drop_last ? N - want : want - N), "N=%lld G=%lld: %lld samples moved", (long long)N,
                   (long long)G, (long long)moved);
            for (int64_t st = 0; (st + 1) * G <= s.total; st++) sampler_batch_slice(&s, st, B, got + st * G + r * B);
            sampler_free(&s);
        }
        if (!first) {
            first = got;
            int64_t *seen = calloc((size_t)N, sizeof(int64_t)), missed = 0;
            for (int64_t i = 0; i < want; i++) seen[first[i]]++;
            for (int64_t i = 0; i < N; i++) missed += seen[i] == 0;
            EXPECT(drop_last || missed == 0, "N=%lld G=%lld: %lld samples never seen", (long long)N, (long long)G,
                   (long long)missed);
            free(seen);
        } else {
            EXPECT(memcmp(first, got, (size_t)want * sizeof(int64_t)) == 0,
                   "N=%lld G=%lld: %d ranks see other global batches than one rank", (long long)N, (long long)G, K);
            free(got);
        }
    }
    free(first);
}

// Balanced epochs: `classes` speakers with 1 + (c * 7) % 9 utterances each (some fewer than M),
// global batches of GB = N x M. On K = 1, 2, 4 ranks: the same global order; whole batches only,
// as many as the groups allow; each batch N distinct speakers in runs of M; no sample twice in an
// epoch unless the wrap-around was needed; another epoch, another order.
static void check_balanced(int64_t classes, int64_t M, int64_t GB) {
    int64_t N = 0;
    for (int64_t c = 0; c < classes; c++) N += 1 + (c * 7) % 9;
    int32_t *labels = malloc((size_t)N * sizeof(int32_t));
    int64_t groups = 0, speakers = 0, i = 0;
    for (int64_t c = 0; c < classes; c++) {
        const int64_t n = 1 + (c * 7) % 9;
        groups += n / M;
        speakers += n >= M;
        for (int64_t j = 0; j < n; j++) labels[i++] = (int32_t)c;
    }
    // shuffle the labels' positions: speakers are not stored in runs
    rng_t r = rng_init(3, 99, 0, 0);
    for (int64_t j = N - 1; j > 0; j--) {
        int64_t k = (int64_t)rng_below(&r, (uint64_t)j + 1);
        int32_t t = labels[j];
        labels[j] = labels[k];
        labels[k] = t;
    }
    const int64_t batches = speakers >= GB / M ? groups / (GB / M) : 0;
    int64_t *ref[2] = {NULL, NULL};  // each epoch's order on the first world size
    const int Ks[] = {1, 2, 4};
    for (int e = 0; e < 2; e++)
        for (size_t kk = 0; kk < 3; kk++) {
            const int K = Ks[kk];
            if (GB % K || (GB / K) % M) continue;
            sampler_t s;
            sampler_init(&s, N, K, K - 1, 11, 1, 0);
            EXPECT(sampler_balance(&s, labels, classes, M, GB) == speakers, "speakers with M utterances");
            sampler_set_epoch(&s, e);
            EXPECT(s.total == batches * GB && s.per_rank * K == s.total, "balanced: %lld batches, total %lld",
                   (long long)batches, (long long)s.total);
            if (!ref[e]) {
                ref[e] = malloc((size_t)(s.total + 1) * sizeof(int64_t));
                memcpy(ref[e], s.order, (size_t)s.total * sizeof(int64_t));
            }
            EXPECT(memcmp(ref[e], s.order, (size_t)s.total * sizeof(int64_t)) == 0, "K=%d: the same balanced order", K);
            int64_t *count = calloc((size_t)N, sizeof(int64_t)), repeats = 0;
            for (int64_t b = 0; b < batches; b++) {
                for (int64_t g = 0; g < GB / M; g++) {
                    const int64_t *run = s.order + b * GB + g * M;
                    for (int64_t j = 0; j < M; j++) {
                        EXPECT(labels[run[j]] == labels[run[0]], "a group is one speaker");
                        repeats += count[run[j]]++ > 0;
                    }
                    for (int64_t h = 0; h < g; h++)
                        EXPECT(labels[s.order[b * GB + h * M]] != labels[run[0]], "speakers distinct in a batch");
                }
                int64_t slice[64];
                EXPECT(sampler_batch_slice(&s, b, GB / K, slice) == GB / K, "slice size");
                EXPECT(memcmp(slice, s.order + b * GB + (K - 1) * (GB / K), (size_t)(GB / K) * sizeof(int64_t)) == 0,
                       "the last rank's slice");
            }
            EXPECT(repeats <= GB, "at most one batch of wrapped groups (%lld repeats)", (long long)repeats);
            free(count);
            sampler_free(&s);
        }
    EXPECT(batches == 0 || memcmp(ref[0], ref[1], (size_t)(batches * GB) * sizeof(int64_t)) != 0, "epochs differ");
    free(ref[0]);
    free(ref[1]);
    free(labels);
}

// One speaker with most of the data: batches are capped by what distinct speakers can fill
// (sum over speakers of min(groups, b) >= b N), and the repeated groups do not pile up.
static void check_skewed(void) {
    enum { S = 6, M = 2, GB = 8 };  // N = 4 speakers a batch
    const int64_t n[S] = {40, 4, 4, 4, 2, 2};
    int64_t N = 0;
    for (int c = 0; c < S; c++) N += n[c];
    int32_t *labels = malloc((size_t)N * sizeof(int32_t));
    for (int c = 0, i = 0; c < S; c++)
        for (int64_t j = 0; j < n[c]; j++) labels[i++] = c;
    sampler_t s;
    sampler_init(&s, N, 1, 0, 5, 1, 0);
    sampler_balance(&s, labels, S, M, GB);
    // groups per speaker 20, 2, 2, 2, 1, 1: b batches need min(20, b) + 3 min(2, b) + 2 min(1, b)
    // >= 4 b: 10 >= 8 at b = 2, 11 < 12 at b = 3 (though floor(28 / 4) = 7)
    EXPECT(s.total == 2 * GB, "skewed speakers: %lld samples, want 2 batches", (long long)s.total);
    sampler_set_epoch(&s, 0);
    for (int64_t b = 0; b * GB < s.total; b++)
        for (int g = 0; g < GB / M; g++)
            for (int h = 0; h < g; h++)
                EXPECT(labels[s.order[b * GB + h * M]] != labels[s.order[b * GB + g * M]], "distinct speakers");
    sampler_free(&s);
    free(labels);
}

int main(void) {
    check_skewed();
    check_balanced(20, 2, 8);
    check_balanced(20, 3, 12);
    check_balanced(40, 4, 16);
    check_balanced(5, 2, 16);  // fewer speakers than a batch needs: no batches
    check_slices(100, 1, 16);
    check_slices(100, 2, 8);
    check_slices(100, 4, 4);
    check_slices(37, 3, 5);
    for (int dl = 0; dl < 2; dl++) {
        check_pad_to(100, 16, dl);
        check_pad_to(96, 16, dl);
        check_pad_to(37, 8, dl);
        check_pad_to(20, 8, dl);
    }
    check_pad_to(5, 8, 0);  // one global batch larger than the data: the order wraps
    const int64_t Ns[] = {1, 2, 7, 16, 128, 1001};
    const int Ks[] = {1, 2, 3, 4, 8};
    for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof Ks[0]; b++)
            for (int dl = 0; dl < 2; dl++) {
                if (dl && Ns[a] < Ks[b]) continue;  // nothing left to train on
                check_epoch(Ns[a], Ks[b], dl, 0);
                check_epoch(Ns[a], Ks[b], dl, 3);
            }

    // Reshuffle: a new epoch gives a different order, the same epoch the same one.
    sampler_t s, t;
    sampler_init(&s, 100, 2, 0, 7, 1, 0);
    sampler_init(&t, 100, 2, 0, 7, 1, 0);
    sampler_set_epoch(&s, 0);
    sampler_set_epoch(&t, 0);
    EXPECT(memcmp(s.order, t.order, 100 * sizeof(int64_t)) == 0, "same epoch, same order");
    sampler_set_epoch(&t, 1);
    EXPECT(memcmp(s.order, t.order, 100 * sizeof(int64_t)) != 0, "epochs 0 and 1 have the same order");
    int fixed = 0;
    for (int i = 0; i < 100; i++) fixed += s.order[i] == i;
    EXPECT(fixed < 10, "shuffle left %d of 100 in place", fixed);
    // Without shuffle the order is the identity.
    sampler_t u;
    sampler_init(&u, 10, 3, 1, 7, 0, 0);
    sampler_set_epoch(&u, 5);
    for (int i = 0; i < 10; i++) EXPECT(u.order[i] == i, "no-shuffle order");
    EXPECT(u.order[10] == 0 && u.order[11] == 1, "wrap padding of the no-shuffle order");
    sampler_free(&s);
    sampler_free(&t);
    sampler_free(&u);

    // rng_below is uniform enough: chi-square over 10 buckets, 100k draws.
    rng_t r = rng_init(1, 2, 3, 4);
    int64_t bucket[10] = {0};
    for (int i = 0; i < 100000; i++) bucket[rng_below(&r, 10)]++;
    double chi = 0;
    for (int i = 0; i < 10; i++) chi += (bucket[i] - 10000.0) * (bucket[i] - 10000.0) / 10000.0;
    EXPECT(chi < 30.0, "chi-square %.1f (9 dof; p < 0.001 above 27.9)", chi);
    return test_report("test_sampler");
}
