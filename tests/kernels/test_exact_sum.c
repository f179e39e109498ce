// Exact sums (kernels/exact_sum.h, kernels/exact_sum_math.h): the same bits whatever the order of
// the terms, their split into partial sums and the order of the merges (as ranks merge them: the
// bins' maximum, then the limbs' sums); within the stated error of the exact sum (an __int128
// reference); a large term after small ones or before them alike; Inf and NaN make NaN; 2^22
// terms of the largest digits without overflow; the float fast path's bin bound; the value's
// rounding; sums held as words, or as their one term, accumulate the same sums held in full. Then every
// backend's xsum ops give the CPU's bits.
#include "backends.h"
#include "exact_check.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/exact_sum_math.h"

#include <float.h>

// rows x n float terms over 2^-30..2^30 with both signs, a third of them cancelling an earlier
// row's term up to its last bits, and some exact zeros.
static float *terms(int rows, int64_t n) {
    float *x = alloc_f((size_t)rows * n);
    for (int r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            float v = ldexpf(rng_uniform(0.5f, 1.0f), rng_int(61) - 30) * (rng_int(2) ? 1.0f : -1.0f);
            if (r > 0 && rng_int(3) == 0) v = -x[(size_t)(r - 1) * n + i] * (1.0f + ldexpf(1.0f, -20));
            if (rng_int(17) == 0) v = 0.0f;
            x[(size_t)r * n + i] = v;
        }
    return x;
}

// The sums of rows x n terms, all in one call.
static xsum_t summed(const float *x, int rows, int64_t n) {
    xsum_t s = host_sums(n);
    xsum_add(s, x, rows, n, 1);
    return s;
}

// How ranks merge partial sums: raise both to the larger bin, add the limbs.
static void merge_as_ranks(xsum_t a, xsum_t b, int64_t n) {
    int8_t *max = (int8_t *)test_alloc((size_t)n);
    for (int64_t i = 0; i < n; i++) max[i] = a.bin[i] > b.bin[i] ? a.bin[i] : b.bin[i];
    xsum_raise_to(a, max, n);
    xsum_raise_to(b, max, n);
    for (int64_t i = 0; i < n; i++) {
        a.hi[i] += b.hi[i];
        a.lo[i] += b.lo[i];
    }
}

static void order_and_partition(void) {
    const int rows = 40;
    const int64_t n = 1031;
    const float *x = terms(rows, n);
    const xsum_t all = summed(x, rows, n);
    xsum_t rev = host_sums(n);  // rows one by one, last first
    for (int r = rows - 1; r >= 0; r--) xsum_add(rev, x + (size_t)r * n, 1, n, 1);
    check_true(same_sums(all, rev, n), "rows in reverse order: the same sums, bit for bit");
    for (int trial = 0; trial < 4; trial++) {  // rows dealt at random to 3 partial sums
        xsum_t part[3] = {host_sums(n), host_sums(n), host_sums(n)};
        for (int r = 0; r < rows; r++) xsum_add(part[rng_int(3)], x + (size_t)r * n, 1, n, 1);
        if (trial % 2) {
            xsum_merge(part[2], part[0], n);
            xsum_merge(part[2], part[1], n);
            check_true(same_sums(all, part[2], n), "3 partial sums merged: the same sums");
        } else {
            merge_as_ranks(part[1], part[2], n);
            merge_as_ranks(part[0], part[1], n);
            check_true(same_sums(all, part[0], n), "3 partial sums merged as ranks do: the same sums");
        }
    }
    float *y1 = alloc_f(n), *y2 = alloc_f(n);
    xsum_to_float(y1, all, n);
    for (int64_t i = 0; i < n; i++) y2[i] = (float)xsum_value_of(rev, i);
    check_true(memcmp(y1, y2, sizeof(float) * n) == 0, "xsum_to_float is the value rounded to float");
}

// The __int128 sum, in units of 2^-60, of rows x n float terms m 2^e (|m| < 2^24, -30 <= e <= 20).
static double exact_sum_of(const float *x, int rows, int64_t n, int64_t i, double *largest) {
    __int128 exact = 0;
    *largest = 0;
    for (int r = 0; r < rows; r++) {
        const float v = x[(size_t)r * n + i];
        exact += (__int128)ldexp((double)v, 60);
        *largest = fabs(v) > *largest ? fabs(v) : *largest;
    }
    return ldexp((double)exact, -60);
}

// Terms over 2^-53..2^20: within (terms) 2^-24 of the largest. Terms within 2^24 of each other
// (all in the largest's bin or the one below, at its top): kept whole, so the float is the
// exact sum's.
static void precision(void) {
    const int rows = 64;
    const int64_t n = 500;
    float *x = alloc_f((size_t)rows * n);
    for (size_t k = 0; k < (size_t)rows * n; k++)
        x[k] = ldexpf((float)(rng_int(1 << 24) - (1 << 23)), rng_int(51) - 30 - 23);
    xsum_t s = summed(x, rows, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double mx;
        const double want = exact_sum_of(x, rows, n, i, &mx);
        bad += fabs(xsum_value_of(s, i) - want) > rows * ldexp(mx, -24);
    }
    check_true(bad == 0, "every sum within (terms) 2^-24 of its largest term");
    for (size_t k = 0; k < (size_t)rows * n; k++)  // one bin: 2^-24 .. 2^0 (bin 7)
        x[k] = ldexpf((float)(rng_int(1 << 24) - (1 << 23)), rng_int(24) - 24 - 23);
    s = summed(x, rows, n);
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double mx;
        const double want = exact_sum_of(x, rows, n, i, &mx);
        bad += xsum_value_of(s, i) != want;
    }
    check_true(bad == 0, "terms of one bin: the exact sum");
}

static void raise_order(void) {
    const int64_t n = 64;
    float *small = rand_f((size_t)3 * n, -1e-9f, 1e-9f);
    float *big = rand_f(n, -1e6f, 1e6f);
    xsum_t a = host_sums(n), b = host_sums(n);
    xsum_add(a, small, 3, n, 1);
    xsum_add(a, big, 1, n, 1);
    xsum_add(b, big, 1, n, 1);
    xsum_add(b, small, 3, n, 1);
    check_true(same_sums(a, b, n), "a large term after small ones: the sums it would be before them");
}

static void nonfinite(void) {
    const int64_t n = 4;
    float x[2 * 4] = {1.0f, INFINITY, 2.0f, -3.0f, 5.0f, 6.0f, NAN, 1e-30f};
    xsum_t s = host_sums(n);
    xsum_add(s, x, 2, n, 1);
    float y[4];
    xsum_to_float(y, s, n);
    check_true(y[0] == 6.0f && isnan(y[1]) && isnan(y[2]) && y[3] == -3.0f, "Inf and NaN terms make the sum NaN");
    xsum_t t = host_sums(n);
    xsum_add(t, x, 1, n, 1);
    xsum_merge(t, s, n);
    xsum_to_float(y, t, n);
    check_true(isnan(y[1]) && isnan(y[2]) && y[0] == 7.0f, "merging keeps a NaN sum NaN");
    const int8_t all_nan[4] = {XSUM_BIN_NONFINITE, XSUM_BIN_NONFINITE, XSUM_BIN_NONFINITE, XSUM_BIN_NONFINITE};
    xsum_raise_to(t, all_nan, n);
    xsum_to_float(y, t, n);
    check_true(isnan(y[0]) && isnan(y[3]), "raising to the non-finite bin makes NaN");
}

// The largest digits (2^24 - 1 each) of a bin: XSUM_MAX_TERMS of them without overflow.
static void headroom(void) {
    const float v = -ldexpf(1.0f - ldexpf(1.0f, -24), -48);  // just below 2^-48: the top of bin 5
    const int64_t n = 1 << 12, reps = XSUM_MAX_TERMS / n;
    float *x = alloc_f(n);
    for (int64_t i = 0; i < n; i++) x[i] = v;
    xsum_t s = host_sums(1);
    for (int64_t r = 0; r < reps; r++) xsum_add(s, x, (int)n, 1, 1);
    check_true(xsum_value_of(s, 0) == (double)v * XSUM_MAX_TERMS, "2^22 terms of the largest digits add up exactly");
}

static void float_bins(void) {
    int bad = 0;
    for (int v = 0; v < 1024; v++) bad += (v * 2731 >> 16) != v / 24;
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t m = 0; m < (1u << 23); m += 0x3fff) {
            const uint32_t u = e << 23 | m;
            float f;
            memcpy(&f, &u, sizeof f);
            const int b = xsum_float_bin_bound(f), want = xsum_bin_of(fabs((double)f));
            bad += b < want || (e > 0 && b != want);
        }
    check_true(bad == 0, "the float bin bound is the bin for normal floats and never below it");
}

static void value_rounding(void) {
    int bad = 0;
    for (int k = 0; k < 20000; k++) {
        const int J = 1 + rng_int(30);
        const int64_t hi = (int64_t)(rng_u64() >> 12) - ((int64_t)1 << 51),
                      lo = (int64_t)(rng_u64() >> 12) - ((int64_t)1 << 51);
        const double want = ldexp((double)((__int128)hi * ((__int128)1 << 24) + lo), 24 * (J - 1) - 192);
        bad += xsum_value(J, hi, lo) != want;
    }
    check_true(bad == 0, "the value is hi 2^24 + lo rounded once to double, times the grid");
    check_true(xsum_value(0, 0, 0) == 0.0, "all-zero memory is the empty sum");
}

// Groups of rows: each group's float sum, in row order, is one term.
static void groups(void) {
    const int rows = 12, group = 4;
    const int64_t n = 700;
    const float *x = terms(rows, n);
    float *sums = alloc_f((size_t)rows / group * n);
    for (int g = 0; g < rows / group; g++)
        for (int64_t i = 0; i < n; i++) {
            float v = x[(size_t)g * group * n + i];
            for (int k = 1; k < group; k++) v += x[(size_t)(g * group + k) * n + i];
            sums[(size_t)g * n + i] = v;
        }
    xsum_t a = host_sums(n), b = host_sums(n);
    xsum_add(a, x, rows, n, group);
    xsum_add(b, sums, rows / group, n, 1);
    check_true(same_sums(a, b, n), "groups of 4 rows: each group's float sum is one term");
}

// The CPU's row deposit (kernels/cpu/exact_rows.h) takes one of three loops by what a row needs:
// the digits alone, the finite deposit, the general one. Each gives the bits of xsum_deposit term
// by term: rows into empty sums (every bin raised), rows that raise some bins, rows that raise
// none, and rows with a NaN or an Inf.
// terms() for every loop of the row deposit: row 2 raises no bin, the last two hold a NaN and an
// Inf.
static float *row_path_terms(int rows, int64_t n) {
    float *x = terms(rows, n);
    for (int64_t i = 0; i < n; i++) x[(size_t)2 * n + i] = ldexpf(x[(size_t)n + i], -30);
    x[(size_t)(rows - 2) * n + 17] = NAN;
    x[(size_t)(rows - 1) * n + 3] = -INFINITY;
    return x;
}

static void row_paths(void) {
    const int rows = 6;
    const int64_t n = 1000;
    const float *x = row_path_terms(rows, n);
    const xsum_t got = host_sums(n), want = host_sums(n);
    for (int r = 0; r < rows; r++) {
        xsum_add_row(got, x + (size_t)r * n, n);
        for (int64_t i = 0; i < n; i++) {
            int J = want.bin[i];
            xsum_deposit(&J, &want.hi[i], &want.lo[i], (double)x[(size_t)r * n + i]);
            want.bin[i] = (int8_t)J;
        }
        check_true(same_sums(got, want, n), cname("row %d: xsum_add_row gives xsum_deposit's bits", r));
    }
}

// One word a sum (the cross-rank exchange's form): up to 32 terms merge in any order to the sum's
// own value; past that, a merge whose limbs leave the word says so (XSUM_WORD_OVER) instead of
// wrapping; bins past 13 and non-finite sums likewise; a word's float is the sum's.
static void words(void) {
    const int rows = 32;
    const int64_t n = 1031;
    const float *x = terms(rows, n);
    const xsum_t all = summed(x, rows, n);
    xsum_t part[4] = {host_sums(n), host_sums(n), host_sums(n), host_sums(n)};
    for (int r = 0; r < rows; r++) xsum_add(part[rng_int(4)], x + (size_t)r * n, 1, n, 1);
    uint64_t *w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)n);
        xsum_to_words(w[k], part[k], n);
    }
    xsum_words_merge(w[3], w[0], n);  // ((3 + 0) + (2 + 1))
    xsum_words_merge(w[2], w[1], n);
    xsum_words_merge(w[3], w[2], n);
    float *y = alloc_f(n), *want = alloc_f(n);
    xsum_words_to_float(y, w[3], n);
    xsum_to_float(want, all, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += xsum_word_code(w[3][i]) != all.bin[i];
    check_true(bad == 0 && memcmp(y, want, sizeof(float) * n) == 0,
               "32 terms in 4 words merged: the sums' bins and floats, bit for bit");

    // 40 terms of the largest digits: two words of 20 fit, their merge does not.
    const double top = ldexp(1.0 - ldexp(1.0, -24), -48);  // just below 2^-48: the top of bin 5
    int J = 0;
    int64_t hi = 0, lo = 0;
    for (int k = 0; k < 20; k++) xsum_deposit(&J, &hi, &lo, top);
    const uint64_t half = xsum_word(J, hi, lo);
    check_true(xsum_word_code(half) == J && xsum_word_value(half) == 20 * top, "20 terms of the largest digits fit");
    check_true(xsum_word_code(xsum_word_merge(half, half)) == XSUM_WORD_OVER, "40 of them: the merge says OVER");
    check_true(xsum_word_code(xsum_word(J, (int64_t)1 << 29, 0)) == XSUM_WORD_OVER &&
                   xsum_word_code(xsum_word(14, 1, 0)) == XSUM_WORD_OVER,
               "limbs of 2^29 and bins past 13 do not fit a word");
    const uint64_t small = xsum_word(J - 1, 5, -7), big = xsum_word(J, -3, 9);
    int Jm = J - 1;
    int64_t mh = 5, ml = -7;
    xsum_merge_into(&Jm, &mh, &ml, J, -3, 9);
    const uint64_t m = xsum_word_merge(small, big);
    check_true(xsum_word_code(m) == Jm && xsum_word_limb(m, 30) == mh && xsum_word_limb(m, 0) == ml &&
                   xsum_word_merge(big, small) == m,
               "words of two bins merge as their sums do, either way round");

    const uint64_t nan = xsum_word(XSUM_BIN_NONFINITE, 0, 0), over = xsum_word_merge(half, half);
    const uint64_t q[3] = {xsum_word_merge(nan, over), xsum_word_merge(over, small), half};
    float f[3];
    const int64_t marked = xsum_words_to_float(f, q, 3);
    uint32_t bits;
    memcpy(&bits, &f[1], sizeof bits);
    check_true(isnan(f[0]) && bits == XSUM_OVER_BITS && f[2] == (float)(20 * top) && marked == 1,
               "non-finite absorbs OVER, OVER absorbs a sum; their floats: NaN, the OVER mark (counted)");
    memcpy(&bits, &f[0], sizeof bits);
    check_true(bits != XSUM_OVER_BITS, "a non-finite sum's NaN is not the OVER mark");
}

// Sums held as words (xsum_words): every loop of the row deposit (into empty words, raising
// none, raising some, non-finite terms), grouped rows, double terms and merged partial sums
// give the words of the same sums held in full, for 32 terms of the widest spread.
static void word_sums(void) {
    const int rows = 32;
    const int64_t n = 1000;
    const float *x = row_path_terms(rows, n);
    uint64_t *buf = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)n);
    const xsum_t got = xsum_words(buf), full = host_sums(n);
    xsum_zero(got, n);
    uint64_t *want = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)n);
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        xsum_add_row(got, x + (size_t)r * n, n);
        xsum_add_row(full, x + (size_t)r * n, n);
        xsum_to_words(want, full, n);
        bad += memcmp(buf, want, sizeof(uint64_t) * (size_t)n) != 0;
    }
    check_true(bad == 0, "32 rows into words: after each row, the words of the sums in full");

    const xsum_t g = xsum_words(buf), gf = host_sums(n);
    xsum_zero(g, n);
    xsum_add(g, x, 16, n, 4);  // groups of 4 rows, one term each
    xsum_add(gf, x, 16, n, 4);
    for (int64_t i = 0; i < 8; i++) {
        const double v = ldexp((double)x[i] + 0x1p-40, 60);  // double terms, past a float's bits
        xsum_add_one(xsum_at(g, i), v);
        xsum_add_one(xsum_at(gf, i), v);
    }
    const xsum_t part = host_sums(2 * n);  // two rows of partial sums merged into rows 1 and 0
    xsum_add(part, x + (size_t)16 * n, 1, 2 * n, 1);
    const int idx[2] = {1, 0};
    const int64_t half = n / 2;
    xsum_rows_add(g, part, idx, 2, half);
    xsum_rows_add(gf, part, idx, 2, half);
    xsum_to_words(want, gf, n);
    float *y = alloc_f(n), *yf = alloc_f(n);
    xsum_to_float(y, g, n);
    xsum_to_float(yf, gf, n);
    check_true(memcmp(buf, want, sizeof(uint64_t) * (size_t)n) == 0 && memcmp(y, yf, sizeof(float) * n) == 0 &&
                   xsum_value_of(g, 5) == xsum_value_of(gf, 5),
               "groups, double terms and merged partial sums: the words and floats of the sums in full");
}

// 2 and 4 ranks' terms meeting (xsum_terms_to_float, xsum_words_of_terms), 2^18 sums of random
// bits (every exponent: subnormals, Inf, NaN; a third of the terms a few bins below the first,
// and -0 + -0): the floats and words of the sums in full.
static void terms_of_random_bits(void) {
    const int64_t m = 1 << 18;
    float *p = alloc_f(4 * m), *y = alloc_f(m), *want = alloc_f(m);
    for (int64_t i = 0; i < 4 * m; i++) {
        const uint32_t bits = (uint32_t)rng_int(1 << 16) << 16 | (uint32_t)rng_int(1 << 16);
        memcpy(&p[i], &bits, sizeof bits);
        if (i >= m && i % 3 == 0) p[i] = ldexpf(p[i % m], -rng_int(80)) * (rng_int(2) ? -1.0f : 1.0f);
    }
    for (int j = 0; j < 4; j++) p[j * m + 5] = -0.0f;
    uint64_t *w = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)m);
    uint64_t *want_w = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)m);
    const float *t[4] = {p, p + m, p + 2 * m, p + 3 * m};
    for (int k = 2; k <= 4; k += 2) {
        const xsum_t full = host_sums(m);
        xsum_add(full, p, k, m, 1);
        xsum_to_float(want, full, m);
        xsum_to_words(want_w, full, m);
        xsum_terms_to_float(y, t, k, m);
        int same_words = 1;
        if (k == 4) {
            xsum_words_of_terms(w, t, k, m);
            same_words = memcmp(w, want_w, sizeof(uint64_t) * (size_t)m) == 0;
        }
        check_true(memcmp(y, want, sizeof(float) * (size_t)m) == 0 && same_words,
                   cname("%d terms of random bits: the floats (and words) of their sums in full", k));
    }
}

// Sums of one term each (xsum_ones), terms of every kind (zeros of both signs, the widest spread,
// Inf and NaN), after a row of zeros and with double terms that floats equal: the floats, words
// and values of the same sums in full; two ranks' terms meeting give the floats of their sums.
static void one_term_sums(void) {
    const int64_t n = 1000;
    float *x = row_path_terms(3, n);
    for (int64_t i = 0; i < 40; i++) x[i * 7] = i % 2 ? -0.0f : 0.0f;
    x[9] = INFINITY, x[11] = NAN, x[13] = -FLT_MAX, x[n + 13] = -FLT_MAX;
    float *buf = alloc_f(n);
    const xsum_t got = xsum_ones(buf), full = host_sums(n);
    xsum_zero(got, n);
    float *zeros = alloc_f(n);
    memset(zeros, 0, sizeof(float) * (size_t)n);
    zeros[5] = -0.0f;
    xsum_add_row(got, zeros, n);  // (a zero term changes nothing)
    xsum_add(got, x, 1, n - 8, 1);
    xsum_add(full, x, 1, n - 8, 1);
    for (int64_t i = n - 8; i < n; i++) {
        const double v = (double)x[i];  // double terms with a float's bits
        xsum_add_one(xsum_at(got, i), v);
        xsum_add_one(xsum_at(full, i), v);
    }
    uint64_t *w = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)n);
    uint64_t *want_w = (uint64_t *)test_alloc(sizeof(uint64_t) * (size_t)n);
    float *y = alloc_f(n), *want = alloc_f(n);
    xsum_to_words(w, got, n);
    xsum_to_words(want_w, full, n);
    xsum_to_float(y, got, n);
    xsum_to_float(want, full, n);
    int values = 1;
    for (int64_t i = 0; i < n; i++) {
        const double a = xsum_value_of(got, i), b = xsum_value_of(full, i);
        values &= a == b || (isnan(a) && isnan(b));
    }
    check_true(memcmp(w, want_w, sizeof(uint64_t) * (size_t)n) == 0 &&
                   memcmp(y, want, sizeof(float) * (size_t)n) == 0 && values,
               "one term a sum: the words, floats and values of the sums in full");

    const float *b = x + n;  // a second rank's terms
    xsum_add(full, b, 1, n, 1);
    xsum_to_float(want, full, n);
    xsum_terms_to_float(y, (const float *const[]){buf, b}, 2, n);
    check_true(memcmp(y, want, sizeof(float) * (size_t)n) == 0,
               "two ranks' terms meeting: the floats of their sums in full");
    terms_of_random_bits();
}

static void cpu_checks(void) {
    row_paths();
    groups();
    order_and_partition();
    precision();
    raise_order();
    nonfinite();
    headroom();
    float_bins();
    value_rounding();
    words();
    word_sums();
    one_term_sums();
}

// ---- every backend: the CPU's bits --------------------------------------------------------------
static void backend_checks(void) {
    const int rows = 12;
    const int64_t n = 3001;
    const float *x = terms(rows, n);
    const xsum_t want = summed(x, rows, n);
    float *wantf = alloc_f(n);
    xsum_to_float(wantf, want, n);

    xsum_t d = xsum_layout(dev_alloc(xsum_bytes(n)), n);
    float *dx = dev_f(x, (size_t)rows * n);
    g_be->xsum_add(d, dx, rows / 2, n, 1);
    g_be->xsum_add(d, dx + (size_t)rows / 2 * n, rows - rows / 2, n, 1);
    xsum_t got = host_sums(n);
    g_be->download(got.bin, d.bin, (size_t)n);
    g_be->download(got.hi, d.hi, sizeof(int64_t) * n);
    g_be->download(got.lo, d.lo, sizeof(int64_t) * n);
    check_true(same_sums(got, want, n), cname("[%s] xsum_add: the CPU's sums", g_be->name));
    float *df = dev_f(NULL, n);
    g_be->xsum_to_float(df, d, n);
    const float *gotf = dev_get(df, n);
    check_true(memcmp(gotf, wantf, sizeof(float) * n) == 0, cname("[%s] xsum_to_float: the CPU's floats", g_be->name));
    g_be->xsum_zero(d, n);
    g_be->xsum_to_float(df, d, n);
    check_true(max_abs(dev_get(df, n), n) == 0.0, cname("[%s] xsum_zero: empty sums", g_be->name));
    xsum_t want3 = host_sums(n);
    xsum_add(want3, x, rows, n, 3);
    g_be->xsum_add(d, dx, rows, n, 3);
    g_be->download(got.bin, d.bin, (size_t)n);
    g_be->download(got.hi, d.hi, sizeof(int64_t) * n);
    g_be->download(got.lo, d.lo, sizeof(int64_t) * n);
    check_true(same_sums(got, want3, n), cname("[%s] xsum_add in groups of 3: the CPU's sums", g_be->name));
    // rows of 3 sums of `want` merged into rows idx[j] of the sums above: xsum_merge's bits
    const int len = 3, nr = 400;
    int *idx = alloc_i(nr);
    for (int j = 0; j < nr; j++) idx[j] = (int)((j * 7 + 5) % (n / len));  // distinct rows
    xsum_t merged = host_sums(n);
    xsum_merge(merged, want3, n);
    for (int j = 0; j < nr; j++)
        xsum_merge(xsum_at(merged, (int64_t)idx[j] * len), xsum_at(want, (int64_t)j * len), len);
    xsum_t src = xsum_layout(dev_alloc(xsum_bytes(n)), n);
    g_be->upload(src.bin, want.bin, (size_t)n);
    g_be->upload(src.hi, want.hi, sizeof(int64_t) * n);
    g_be->upload(src.lo, want.lo, sizeof(int64_t) * n);
    g_be->xsum_rows_add(d, src, dev_i(idx, nr), nr, len);
    g_be->download(got.bin, d.bin, (size_t)n);
    g_be->download(got.hi, d.hi, sizeof(int64_t) * n);
    g_be->download(got.lo, d.lo, sizeof(int64_t) * n);
    check_true(same_sums(got, merged, n), cname("[%s] xsum_rows_add: xsum_merge's sums", g_be->name));
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_exact_sum", 17, cpu_checks, backend_checks); }
