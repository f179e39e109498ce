// The CPU kernels' deposit loops into exact sums (kernels/exact_sum.h): one row of terms at a
// time on the calling thread, vectorized (the deposit is branch-free). Kernels that compute
// per-sample contributions (conv1d, gemm, batchnorm, aam_softmax) add them with these.
#pragma once
#include <math.h>
#include <stdint.h>

#include "kernels/base/spk_assert.h"
#include "kernels/exact_sum.h"
#include "kernels/exact_sum_math.h"

// Sums held as words (kernels/exact_sum_math.h), in loops that vectorize, with the bits of
// xsum_word_deposit. A first pass says which loop the row needs: into empty words, each term's
// digits at its own bin (an update's first term); where no term raises its word's bin, the
// digits added to the limbs; else the finite deposit (xsum_deposit_finite) written out on the
// word's fields; where a term or a word is not finite, the general deposit.
static inline void xsum_add_row_words(uint64_t *restrict w, const float *restrict x, int64_t n) {
    int special = 0, used = 0, raise = 0;
#pragma omp simd reduction(| : special, used, raise)
    for (int64_t i = 0; i < n; i++) {
        const int code = xsum_word_code(w[i]);
        special |= (code >= XSUM_WORD_OVER) | !(fabsf(x[i]) <= 3.4028235e38f);
        used |= w[i] != 0;
        raise |= xsum_float_bin_bound(x[i]) > code;
    }
    int fit = 1;
    if (special) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) w[i] = xsum_word_deposit(w[i], (double)x[i]);
    } else if (!used) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) w[i] = xsum_word_of_term(x[i]);
    } else if (!raise) {
#pragma omp simd reduction(& : fit)
        for (int64_t i = 0; i < n; i++) {
            int64_t hi = xsum_word_limb(w[i], 30), lo = xsum_word_limb(w[i], 0);
            xsum_add_digits(xsum_word_code(w[i]), &hi, &lo, (double)x[i]);
            fit &= xsum_word_limbs_fit(hi, lo);
            w[i] = xsum_word_pack(xsum_word_code(w[i]), hi, lo);
        }
    } else {  // (xsum_deposit_finite on the word's fields, written out: its int8 bin keeps it scalar)
#pragma omp simd reduction(& : fit)
        for (int64_t i = 0; i < n; i++) {
            const double v = (double)x[i];
            const int j0 = xsum_word_code(w[i]), b = xsum_bin_of(fabs(v)), j1 = b > j0 ? b : j0;
            int64_t hi = xsum_word_limb(w[i], 30), lo = xsum_word_limb(w[i], 0);
            xsum_raise_limbs(j0, j1, &hi, &lo);
            xsum_add_digits(j1, &hi, &lo, v);
            fit &= xsum_word_limbs_fit(hi, lo);
            w[i] = xsum_word_pack(j1, hi, lo);
        }
    }
    SPK_ASSERT(fit);  // (at most 32 terms a word: model_plan_update)
}

// Sums of one term each (kernels/exact_sum.h): every sum takes x[i], which it holds as it is,
// if it is still empty; a zero term changes nothing, and a sum that already holds a term other
// than zero fails the assertion (the caller's count of terms is wrong).
static inline void xsum_add_row_one(float *restrict t, const float *restrict x, int64_t n) {
    int fit = 1;
#pragma omp simd reduction(& : fit)
    for (int64_t i = 0; i < n; i++) {
        fit &= (t[i] == 0.0f) | (x[i] == 0.0f);
        t[i] = t[i] == 0.0f ? x[i] : t[i];
    }
    SPK_ASSERT(fit);  // (one term a sum on this rank: model_plan_update)
}

// s[i] += x[i], i < n. Two passes: whether any term needs its sum's bin raised, or is not finite
// (or meets a sum that is not), then the digits alone (as after a row's first terms: no bin to
// store or raise), the finite deposit, or the general one.
static inline void xsum_add_row(xsum_t s, const float *x, int64_t n) {
    if (s.word) {
        xsum_add_row_words(s.word, x, n);
        return;
    }
    if (s.one) {
        xsum_add_row_one(s.one, x, n);
        return;
    }
    int8_t *restrict bin = s.bin;
    int64_t *restrict hi = s.hi, *restrict lo = s.lo;
    const float *restrict xr = x;
    int raise = 0, special = 0;
#pragma omp simd reduction(| : raise, special)
    for (int64_t i = 0; i < n; i++) {
        raise |= xsum_float_bin_bound(xr[i]) > bin[i];
        special |= (bin[i] == XSUM_BIN_NONFINITE) | !(fabsf(xr[i]) <= 3.4028235e38f);
    }
    if (!raise && !special) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) xsum_add_digits(bin[i], &hi[i], &lo[i], (double)xr[i]);
    } else if (!special) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) xsum_deposit_finite(&bin[i], &hi[i], &lo[i], (double)xr[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            int J = bin[i];
            int64_t h = hi[i], l = lo[i];
            xsum_deposit(&J, &h, &l, (double)xr[i]);
            bin[i] = (int8_t)J;
            hi[i] = h;
            lo[i] = l;
        }
    }
}

// s[0] += v (one sum, one term).
static inline void xsum_add_one(xsum_t s, double v) {
    if (s.word) {
        s.word[0] = xsum_word_deposit(s.word[0], v);
        return;
    }
    if (s.one) {
        const float x = (float)v;
        SPK_ASSERT((double)x == v || v != v);  // (float terms only: model_plan_update)
        xsum_add_row_one(s.one, &x, 1);
        return;
    }
    int J = s.bin[0];
    xsum_deposit(&J, s.hi, s.lo, v);
    s.bin[0] = (int8_t)J;
}

// A channel's two per-sample sums by groups (BatchNorm's, kernels/cpu/batchnorm*.c): sample b's
// s1 and s2 join g1 and g2, its group's samples so far added in order; at the group's last
// sample they go into sums[c] and sums[C + c] as one term each. Returns whether they did.
static inline int xsum_add_group_pair(xsum_t sums, int c, int C, int b, int group, double s1, double s2, double *g1,
                                      double *g2) {
    *g1 = b % group ? *g1 + s1 : s1;
    *g2 = b % group ? *g2 + s2 : s2;
    if (b % group != group - 1) return 0;
    xsum_add_one(xsum_at(sums, c), *g1);
    xsum_add_one(xsum_at(sums, C + c), *g2);
    return 1;
}
