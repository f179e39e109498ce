// Cross-rank exact sums (app/dist/exact_reduce.h), under mpiexec -n 1, 2, 4: a fixed set of 24
// "samples" (each a vector of float terms drawn from its index) dealt to the ranks, each rank
// adding its samples to its own sums; after the bucketed reduction (uneven buckets, progressed
// while others start), exact_reduce_now and exact_allreduce_host, every rank holds the sums of
// all 24 samples that it computes alone: the same bins and values (the limbs may be split
// otherwise). Buckets go combined, one int64 a sum, unless a rank's limbs are too large for that,
// then as hi and lo (the bytes say which). With floats out (host memory), the sums go as one word
// each, reduce-scattered, each rank rounds a share and the floats are gathered (6 bytes a sum on
// 2 ranks): the same floats as the sums' own rounding; a sum whose word overflows, on one rank
// or in a merge of two, is reduced in full afterwards, the same float. Buckets in flight while
// blocking reductions run between them, the ranks moving the buckets on at different moments, end the same (the second
// rounds start in bucket order on every rank). On host memory and through cpu-staged copies; a
// rank's NaN term makes that sum NaN everywhere.
#include "app/dist/exact_reduce.h"
#include "kernels/exact_sum.h"
#include "tests/dist/mpi_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLES 24
#define N       5000

// Sample s's terms: magnitudes over 2^-40..2^40 (several bins), both signs, some cancellation.
static void sample_terms(int s, float *x) {
    uint64_t r = 0x9E3779B97F4A7C15ull * (uint64_t)(s + 1);
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        const float m = (float)((r >> 40) & 0xffffff) / 16777216.0f + 0.5f;
        x[i] = ldexpf(m, (int)((r >> 8) % 81) - 40) * ((r & 1) ? -1.0f : 1.0f);
        if (s % 3 == 1) x[i] = -x[i] * (1.0f + ldexpf(1.0f, -18));  // near-cancels sample s - 1
    }
}

static xsum_t host_sums(int64_t n) { return xsum_layout(calloc(1, xsum_bytes(n)), n); }

// The same sums: bins and values (the bucketed reduction may leave the limbs split otherwise:
// hi 2^24 + lo combined, added, split again).
static int same(xsum_t a, xsum_t b, int64_t n) {
    int ok = !memcmp(a.bin, b.bin, (size_t)n);
    for (int64_t i = 0; i < n && ok; i++) {
        const double va = xsum_value_of(a, i), vb = xsum_value_of(b, i);
        ok = va == vb || (isnan(va) && isnan(vb));
    }
    return ok;
}

// This rank's sums of `be` (on the backend) -> host copy.
static xsum_t download(const spk_backend_t *be, xsum_t d, int64_t n) {
    xsum_t h = host_sums(n);
    be->download(h.bin, d.bin, (size_t)n);
    be->download(h.hi, d.hi, 8 * (size_t)n);
    be->download(h.lo, d.lo, 8 * (size_t)n);
    return h;
}

// Bytes as comm_allreduce_bytes and comm_scatter_bytes count them, per collective.
static int64_t ar(const comm_t *c, int64_t payload) { return 2 * payload * (c->size - 1) / c->size; }
static int64_t sc(const comm_t *c, int64_t whole) { return whole * (c->size - 1) / c->size; }

// Floats out: each y[i] is s[i]'s own rounding (bits; NaN as NaN).
static int same_floats(const float *y, xsum_t s, int64_t n) {
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        const float want = (float)xsum_value_of(s, i);
        ok = memcmp(&y[i], &want, sizeof want) == 0 || (isnan(y[i]) && isnan(want));
    }
    return ok;
}

// One term a sum on each rank (xsum_ones: sample `rank`), Inf, NaN, signed zeros and an overflow
// among them: the floats out are the rounding of the ranks' samples summed in full. On a power of
// two ranks the exchange halves recursively, the terms going as floats: on 2 ranks the bytes of
// a float allreduce.
static void check_one_term(const comm_t *c, exact_reduce_t *r, float *x, const int64_t *cuts) {
    xsum_t all = host_sums(N);
    float *mine = calloc(N, sizeof(float)), *y = calloc(N, sizeof(float));
    for (int s = 0; s < c->size; s++) {
        sample_terms(s, x);
        x[5] = x[6] = -0.0f;
        x[7] = s % 2 ? -0.0f : 0.0f;
        x[8] = s == c->size - 1 ? INFINITY : 1.0f;
        x[9] = s == 0 ? NAN : 2.0f;
        x[10] = 3.0e38f;
        xsum_add(all, x, 1, N, 1);
        if (s == c->rank) memcpy(mine, x, sizeof(float) * N);
    }
    const xsum_t one = xsum_ones(mine);
    int64_t want = 0;
    for (int b = 0; b < 3; b++) {
        exact_reduce_start(r, one, cuts[b], cuts[b + 1], y, 0);
        exact_reduce_progress(r);
        const int64_t n = cuts[b + 1] - cuts[b];
        want += c->size == 2 ? 4 * (n - (c->rank ? n - n / 2 : n / 2)) + sc(c, 4 * n) : sc(c, 8 * n) + sc(c, 4 * n);
    }
    exact_reduce_wait(r);
    want += ar(c, 8);  // (the count of overflowed words: none)
    EXPECT(same_floats(y, all, N), "rank %d of %d: one term a rank: floats out != the sums' rounding", c->rank,
           c->size);
    const int64_t bytes = exact_reduce_take_bytes(r);
    EXPECT(c->size == 1 || c->size > 2 || bytes == want, "one term a rank: %lld bytes sent, expected %lld",
           (long long)bytes, (long long)want);
    EXPECT(c->size < 4 || bytes < want, "one term a rank on %d ranks: %lld bytes sent, the words' %lld", c->size,
           (long long)bytes, (long long)want);
    free(all.bin);
    free(mine);
    free(y);
}

static void check_backend(const comm_t *c, const spk_backend_t *be) {
    float *x = malloc(sizeof(float) * N);
    xsum_t all = host_sums(N);  // every sample, on this rank alone
    for (int s = 0; s < SAMPLES; s++) {
        sample_terms(s, x);
        xsum_add(all, x, 1, N, 1);
    }
    // This rank's samples, twice: for the bucketed reduction and for exact_reduce_now.
    xsum_t mine[2];
    float *dx = be->alloc(sizeof(float) * N);
    for (int k = 0; k < 2; k++) {
        mine[k] = xsum_layout(be->alloc(xsum_bytes(N)), N);
        for (int s = c->rank; s < SAMPLES; s += c->size) {
            sample_terms(s, x);
            be->upload(dx, x, sizeof(float) * N);
            be->xsum_add(mine[k], dx, 1, N, 1);
        }
    }
    exact_reduce_t *r = exact_reduce_create(c, be, NULL, N);
    const int64_t cuts[4] = {0, 1000, 3500, N};
    int64_t want_bytes = 0;
    for (int b = 0; b < 3; b++) {
        exact_reduce_start(r, mine[0], cuts[b], cuts[b + 1], NULL, 0);
        exact_reduce_progress(r);
        want_bytes += ar(c, cuts[b + 1] - cuts[b] + 1) + ar(c, 8 * (cuts[b + 1] - cuts[b]));
    }
    exact_reduce_wait(r);
    exact_reduce_now(r, mine[1], N);
    const xsum_t got[2] = {download(be, mine[0], N), download(be, mine[1], N)};
    EXPECT(same(got[0], all, N), "[%s] rank %d of %d: bucketed reduction != all samples", be->name, c->rank, c->size);
    EXPECT(same(got[1], all, N), "[%s] rank %d of %d: exact_reduce_now != all samples", be->name, c->rank, c->size);
    for (int k = 0; k < 2; k++) free(got[k].bin);
    want_bytes += ar(c, N * 17);  // buckets combined (and their flags), then packed
    const int64_t bytes = exact_reduce_take_bytes(r);
    EXPECT(c->size == 1 || bytes == want_bytes, "[%s] %lld bytes sent, expected %lld", be->name, (long long)bytes,
           (long long)want_bytes);

    // Floats out: the same buckets end as the sums' floats (a rank's share rounded, then gathered).
    if (exact_reduce_floats(r)) {
        float *y = calloc(N, sizeof(float));
        xsum_t again = xsum_layout(be->alloc(xsum_bytes(N)), N);
        for (int s = c->rank; s < SAMPLES; s += c->size) {
            sample_terms(s, x);
            be->xsum_add(again, x, 1, N, 1);
        }
        int64_t want_f = 0;
        for (int b = 0; b < 3; b++) {
            exact_reduce_start(r, again, cuts[b], cuts[b + 1], y, 0);
            exact_reduce_progress(r);
            const int64_t n = cuts[b + 1] - cuts[b];
            want_f += sc(c, 8 * n) + sc(c, 4 * n);
        }
        exact_reduce_wait(r);
        want_f += ar(c, 8);  // the count of sums whose words overflowed (none)
        EXPECT(same_floats(y, all, N), "[%s] rank %d of %d: floats out != the sums' rounding", be->name, c->rank,
               c->size);
        const int64_t fbytes = exact_reduce_take_bytes(r);
        EXPECT(c->size == 1 || fbytes == want_f, "[%s] floats out: %lld bytes sent, expected %lld (6 a sum on 2 ranks)",
               be->name, (long long)fbytes, (long long)want_f);
        free(y);
        be->free(again.bin);
        check_one_term(c, r, x, cuts);
    }

    // Limbs too large to combine on one rank: that bucket goes as hi and lo, the same sums.
    xsum_t wide = host_sums(8), want = host_sums(8);
    for (int i = 0; i < 8; i++) {
        wide.bin[i] = want.bin[i] = 9;
        wide.hi[i] = c->rank == 0 && i == 3 ? ((int64_t)1 << 37) + 5 : 3 + c->rank;
        wide.lo[i] = c->rank + 1;
        for (int k = 0; k < c->size; k++) want.hi[i] += k == 0 && i == 3 ? ((int64_t)1 << 37) + 5 : 3 + k;
        want.lo[i] = (int64_t)c->size * (c->size + 1) / 2;
    }
    xsum_t dwide = xsum_layout(be->alloc(xsum_bytes(8)), 8);
    be->upload(dwide.bin, wide.bin, 8);
    be->upload(dwide.hi, wide.hi, 8 * 8);
    be->upload(dwide.lo, wide.lo, 8 * 8);
    exact_reduce_start(r, dwide, 0, 8, NULL, 0);
    exact_reduce_wait(r);
    const xsum_t gotw = download(be, dwide, 8);
    EXPECT(same(gotw, want, 8), "[%s] rank %d of %d: limbs too large to combine: wrong sums", be->name, c->rank,
           c->size);
    const int64_t wide_bytes = exact_reduce_take_bytes(r);
    EXPECT(c->size == 1 || wide_bytes == ar(c, 9) + ar(c, 16 * 8),
           "[%s] %lld bytes sent, expected %lld (hi and lo apart)", be->name, (long long)wide_bytes,
           (long long)(ar(c, 9) + ar(c, 16 * 8)));
    if (exact_reduce_floats(r)) {  // and as floats
        be->upload(dwide.bin, wide.bin, 8);
        be->upload(dwide.hi, wide.hi, 8 * 8);
        be->upload(dwide.lo, wide.lo, 8 * 8);
        float yw[8];
        exact_reduce_start(r, dwide, 0, 8, yw, 0);
        exact_reduce_wait(r);
        EXPECT(same_floats(yw, want, 8), "[%s] rank %d of %d: limbs too large to combine: wrong floats", be->name,
               c->rank, c->size);
        const int64_t redo = ar(c, 8) + ar(c, 17);  // sum 3 does not fit rank 0's word: counted, reduced in full
        const int64_t wb = exact_reduce_take_bytes(r);
        EXPECT(wb == sc(c, 8 * 8) + sc(c, 4 * 8) + redo, "[%s] a word too large: %lld bytes sent, expected %lld",
               be->name, (long long)wb, (long long)(sc(c, 8 * 8) + sc(c, 4 * 8) + redo));

        // Every rank's words fit, the odd sums' merges do not (more than 32 terms' worth).
        for (int i = 0; i < 8; i++) {
            wide.hi[i] = i % 2 ? 3 << 27 : 5;
            want.hi[i] = i % 2 ? (int64_t)c->size * (3 << 27) : 5 * c->size;
        }
        be->upload(dwide.bin, wide.bin, 8);
        be->upload(dwide.hi, wide.hi, 8 * 8);
        be->upload(dwide.lo, wide.lo, 8 * 8);
        exact_reduce_start(r, dwide, 0, 8, yw, 0);
        exact_reduce_wait(r);
        EXPECT(same_floats(yw, want, 8), "[%s] rank %d of %d: merges past a word: wrong floats", be->name, c->rank,
               c->size);
        const int64_t mb = exact_reduce_take_bytes(r), want_mb = sc(c, 8 * 8) + sc(c, 4 * 8) + ar(c, 8) + ar(c, 4 * 17);
        EXPECT(mb == want_mb, "[%s] merges past a word: %lld bytes sent, expected %lld", be->name, (long long)mb,
               (long long)want_mb);
    }
    free(gotw.bin);
    free(wide.bin);
    free(want.bin);
    be->free(dwide.bin);

    // Buckets in flight around blocking reductions (BatchNorm's, inside the backward): even ranks
    // move them on after a pause (their first rounds have arrived), odd ranks only at the wait.
    // Where floats out are taken, odd buckets end as floats, even ones as sums.
    float *y = calloc(N, sizeof(float));
    const int floats = exact_reduce_floats(r);
    xsum_t again = xsum_layout(be->alloc(xsum_bytes(N)), N);
    for (int s = c->rank; s < SAMPLES; s += c->size) {
        sample_terms(s, x);
        be->upload(dx, x, sizeof(float) * N);
        be->xsum_add(again, dx, 1, N, 1);
    }
    const int64_t many[7] = {0, 10, 700, 1900, 2000, 4200, N};
    xsum_t small = xsum_layout(be->alloc(xsum_bytes(6 * 4)), 6 * 4);
    for (int b = 0; b < 6; b++) {
        exact_reduce_start(r, again, many[b], many[b + 1], floats && b % 2 ? y : NULL, 0);
        if (c->rank % 2 == 0) {
            nanosleep(&(struct timespec){0, 2000000}, NULL);
            exact_reduce_progress(r);
        }
        float ones[4] = {1.0f, 2.0f, 0.5f, (float)c->rank};
        be->upload(dx, ones, sizeof ones);
        be->xsum_add(xsum_at(small, 4 * b), dx, 1, 4, 1);
        exact_reduce_now(r, xsum_at(small, 4 * b), 4);
    }
    exact_reduce_wait(r);
    const xsum_t got2 = download(be, again, N), sm = download(be, small, 6 * 4);
    int buckets_ok = 1;
    for (int b = 0; b < 6; b++) {
        const int64_t at = many[b], n = many[b + 1] - at;
        buckets_ok &=
            floats && b % 2 ? same_floats(y + at, xsum_at(all, at), n) : same(xsum_at(got2, at), xsum_at(all, at), n);
    }
    EXPECT(buckets_ok, "[%s] rank %d of %d: buckets around blocking reductions != all samples", be->name, c->rank,
           c->size);
    free(y);
    int small_ok = 1;
    for (int b = 0; b < 6; b++)
        small_ok &= xsum_value_of(sm, 4 * b) == c->size && xsum_value_of(sm, 4 * b + 1) == 2.0 * c->size &&
                    xsum_value_of(sm, 4 * b + 3) == c->size * (c->size - 1) / 2.0;
    EXPECT(small_ok, "[%s] rank %d of %d: the blocking reductions between buckets went wrong", be->name, c->rank,
           c->size);
    free(got2.bin);
    free(sm.bin);
    be->free(again.bin);
    be->free(small.bin);
    exact_reduce_take_bytes(r);

    // exact_allreduce_host, and a NaN on the last rank only
    xsum_t h = host_sums(3);
    const float v[3] = {1.0f, ldexpf(1.0f, -60), c->rank == c->size - 1 ? NAN : 2.0f};
    xsum_add(h, v, 1, 3, 1);
    exact_allreduce_host(c, h, 3);
    EXPECT(xsum_value_of(h, 0) == c->size && xsum_value_of(h, 1) == ldexp(c->size, -60) && isnan(xsum_value_of(h, 2)),
           "rank %d of %d: exact_allreduce_host gave %g %g %g", c->rank, c->size, xsum_value_of(h, 0),
           xsum_value_of(h, 1), xsum_value_of(h, 2));
    exact_reduce_free(r);
    for (int k = 0; k < 2; k++) be->free(mine[k].bin);
    be->free(dx);
    free(all.bin);
    free(h.bin);
    free(x);
}

int main(int argc, char **argv) { return mpi_test_main(argc, argv, "test_exact_reduce", check_backend); }
