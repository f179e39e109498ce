// The per-element math of exact sums (kernels/exact_sum.h), shared by the CPU and CUDA kernels
// and by the host code that reduces sums across ranks, so every place runs the same integer
// expressions.
//
// A sum is three numbers: a bin J (int8) and two int64 limbs, hi and lo:
//   value = hi * 2^(24 J - 192) + lo * 2^(24 (J - 1) - 192)
// Bins are fixed slices of the exponent range, 24 bits wide (a float's significand): bin b holds
// the magnitudes in [2^(24 b - 192), 2^(24 b - 168)) (bin 0 also everything smaller). J is the
// bin of the largest term so far; every term t is cut at the grid 2^(24 (J - 1) - 192), toward
// zero, into two 24-bit digits (hi and lo) that are added to the limbs. Because the grid of bin
// J + 1 is 2^24 times coarser and the digits are absolute (truncation of |t| at a power of two),
// raising J by one is exact bookkeeping: lo <- hi, hi <- 0 gives what the terms would have
// deposited had the larger bin been known from the start. So the sum does not depend on the
// order of the terms, on how they were split between partial sums, or on when the bin was
// raised: partial sums are merged by raising both to the larger bin and adding the limbs
// (integer addition, associative).
// Precision: a term keeps its bits down to 2^-24 of its sum's bin, so float terms in the bin of
// the largest are kept whole and the error of n terms is below n * 2^-24 of the largest, the
// order of a float sum's own rounding. Headroom: digits are < 2^24, so 2^22 terms
// (XSUM_MAX_TERMS) leave hi 2^24 + lo far inside int64. Why 24 bits: up to 32 terms' limbs fit
// 30 bits each, so a sum with its bin is one 64-bit word (xsum_word) that ranks merge without
// agreeing the bins first; and after the bins are agreed, hi 2^24 + lo is one int64 while fewer
// than 2^15 terms meet (xsum_combine): 8 bytes a sum instead of 16 (app/dist/exact_reduce.c).
// A non-finite term makes the bin XSUM_BIN_NONFINITE for good (the value is then NaN); merging
// keeps it, as bins merge by their maximum.
//
// All-zero memory is the empty sum (J = 0, value 0).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/spk_hd.h"

#define XSUM_BIN_BITS      24
#define XSUM_BIN_BIAS      192  // bin b starts at 2^(24 b - 192)
#define XSUM_BIN_NONFINITE 127
#define XSUM_MAX_TERMS     (1 << 22)  // per sum, over all partial sums merged into it

// The bin of a finite magnitude a >= 0: floor((log2(a) + 192) / 24), 0 below 2^-192. From the
// exponent bits, so it vectorizes (subnormals are far below 2^-192: bin 0).
SPK_HD int xsum_bin_of(double a) {
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    const int e = (int)(bits >> 52);      // biased exponent; a >= 0 has no sign bit
    return e < 831 ? 0 : (e - 831) / 24;  // 831 = 1023 - 192
}

// 2^e for -1022 <= e <= 1023, from the exponent bits.
SPK_HD double xsum_pow2(int e) {
    const uint64_t bits = (uint64_t)(1023 + e) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

// 2^(216 - 24 J): a magnitude of bin <= J times this is below 2^48, in units of the grid.
SPK_HD double xsum_grid_scale(int J) { return xsum_pow2(216 - 24 * J); }

// Adds the digits of v, whose magnitude is in a bin <= J, at the grid of bin J to hi and lo:
// s = |v| 2^(216 - 24 J) < 2^48 is cut into dh 2^24 + dl + a fraction below the grid.
// Limbs are updated in unsigned arithmetic (wraparound, never undefined); they stay within
// XSUM_MAX_TERMS digits while the bin is finite, and do not matter once it is not.
SPK_HD void xsum_add_digits(int J, int64_t *hi, int64_t *lo, double v) {
    const double s = fabs(v) * xsum_grid_scale(J);
    const int64_t dh = (int64_t)(s * 0x1p-24);              // < 2^24
    const int64_t dl = (int64_t)(s - (double)dh * 0x1p24);  // an exact difference, < 2^24
    const uint64_t neg = v < 0.0 ? ~(uint64_t)0 : 0;        // (x ^ neg) - neg = -x
    *hi = (int64_t)((uint64_t)*hi + (((uint64_t)dh ^ neg) - neg));
    *lo = (int64_t)((uint64_t)*lo + (((uint64_t)dl ^ neg) - neg));
}

// The limbs of a sum raised from bin j0 to j1 >= j0: by one bin lo <- hi, by more (or to the
// non-finite bin) both are empty. Branch-free.
SPK_HD void xsum_raise_limbs(int j0, int j1, int64_t *hi, int64_t *lo) {
    const int64_t h0 = *hi;
    *lo = j1 == j0 ? *lo : (j1 == j0 + 1 && j1 != XSUM_BIN_NONFINITE ? h0 : 0);
    *hi = j1 == j0 ? h0 : 0;
}

// Adds v (a float or double term) to the sum (J, hi, lo), raising the bin when v needs it:
// branch-free, so loops vectorize.
SPK_HD void xsum_deposit(int *J, int64_t *hi, int64_t *lo, double v) {
    const int finite = fabs(v) <= 1.7976931348623157e308;  // false for Inf and NaN
    const int j0 = *J, b = xsum_bin_of(finite ? fabs(v) : 0.0);
    const int j1 = finite ? (b > j0 ? b : j0) : XSUM_BIN_NONFINITE;
    xsum_raise_limbs(j0, j1, hi, lo);
    // Once non-finite the sum stays so and its limbs no longer matter: nothing is added (a finite
    // term at bin 0's grid could exceed the int64 range, which C leaves undefined).
    const int keep = j1 < XSUM_BIN_NONFINITE;
    xsum_add_digits(keep ? j1 : 0, hi, lo, keep ? v : 0.0);
    *J = j1;
}

// xsum_deposit for a finite v into a sum whose bin is finite, without the non-finite cases,
// which keep the general deposit from vectorizing well (a loop of these runs about 3 times
// faster). The same bits.
SPK_HD void xsum_deposit_finite(int8_t *J, int64_t *hi, int64_t *lo, double v) {
    const int j0 = *J, b = xsum_bin_of(fabs(v)), j1 = b > j0 ? b : j0;
    xsum_raise_limbs(j0, j1, hi, lo);
    xsum_add_digits(j1, hi, lo, v);
    *J = (int8_t)j1;
}

// Raises the sum (J, hi, lo) to bin `to` >= J (an agreed maximum): the lowest limbs drop.
SPK_HD void xsum_raise(int *J, int64_t *hi, int64_t *lo, int to) {
    if (to <= *J) return;
    xsum_raise_limbs(*J, to, hi, lo);
    *J = to;
}

// (J, hi, lo) += (K, khi, klo): both raised to the larger bin, the limbs added (wrapping, as
// deposits do). A merge of two partial sums.
SPK_HD void xsum_merge_into(int *J, int64_t *hi, int64_t *lo, int K, int64_t khi, int64_t klo) {
    const int to = *J > K ? *J : K;
    xsum_raise(J, hi, lo, to);
    xsum_raise(&K, &khi, &klo, to);
    *hi = (int64_t)((uint64_t)*hi + (uint64_t)khi);
    *lo = (int64_t)((uint64_t)*lo + (uint64_t)klo);
}

// d (the limbs' integer, rounded once to double) scaled by the grid of bin J (exact); NaN when a
// term was not finite. Branch-free.
SPK_HD double xsum_scaled(int J, double d) {
    return J == XSUM_BIN_NONFINITE
               ? NAN
               : d * xsum_pow2(XSUM_BIN_BITS * ((J < XSUM_BIN_NONFINITE ? J : 1) - 1) - XSUM_BIN_BIAS);
}

// The sum's value in double: hi 2^24 + lo rounded once (both are exact doubles below 2^53), then
// scaled by the grid.
SPK_HD double xsum_value(int J, int64_t hi, int64_t lo) { return xsum_scaled(J, (double)hi * 0x1p24 + (double)lo); }

// The limbs of a sum as one integer, hi 2^24 + lo (wrapping; exact while it is below 2^63 in
// magnitude, xsum_combinable), and back: lo in [0, 2^24), hi the rest. Combined sums of one bin
// add as integers: ranks that agreed the bins exchange one int64 a sum.
SPK_HD int64_t xsum_combine(int64_t hi, int64_t lo) { return (int64_t)(((uint64_t)hi << 24) + (uint64_t)lo); }
SPK_HD void xsum_split(int64_t c, int64_t *hi, int64_t *lo) {
    *lo = (int64_t)((uint64_t)c & 0xffffff);
    *hi = (c - *lo) / 0x1000000;  // exact: c - lo is a multiple of 2^24
}
// Whether `ranks` partial sums whose limbs are all within these bounds add up, combined, inside
// int64 at every step of any reduction order: |hi 2^24 + lo| < 2^63 / ranks each.
SPK_HD int xsum_combinable(uint64_t max_abs_hi, uint64_t max_abs_lo, int ranks) {
    int shift = 0;  // ceil(log2(ranks))
    while ((1LL << shift) < ranks) shift++;
    return shift < 38 && max_abs_hi < (1ULL << (38 - shift)) && max_abs_lo < (1ULL << (62 - shift));
}

// ---- float terms, for the CPU's vectorized fast path ----------------------------------------
// The bin of a float from its bits, as xsum_bin_of((double)x) (a float's double exponent is its
// own + 896, and (v * 2731) >> 16 == v / 24 for 0 <= v < 1024), but 2 for float subnormals, which
// are in bin 1 or 2: never below the true bin, so a bin test with it never misses a raise.
SPK_HD int xsum_float_bin_bound(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const int b = ((int)((u >> 23) & 0xff) + 65) * 2731 >> 16;
    return (u & 0x7fffffffu) ? b : 0;
}

// ---- one sum in one 64-bit word, for the cross-rank exchange --------------------------------
// While at most 32 terms meet in a sum its limbs stay below 2^29 in magnitude (digits are below
// 2^24), and float terms' bins are at most 13, so a sum fits one word: the bin in bits 60-63,
// hi in 30-59 and lo in 0-29 (two's complement). Words merge as the sums do (xsum_word_merge:
// both raised to the larger bin, the limbs added), so ranks reduce them directly, one word a
// sum, without agreeing the bins first (app/dist/exact_reduce.c). A sum that does not fit, or a
// merge whose limbs leave the range, becomes XSUM_WORD_OVER, which absorbs every merge (below
// XSUM_WORD_NONFINITE, which absorbs it): the exchange then reduces that sum in full.
#define XSUM_WORD_OVER      14
#define XSUM_WORD_NONFINITE 15
#define XSUM_WORD_LIMB      ((int64_t)1 << 29)  // |hi|, |lo| below this
#define XSUM_WORD_MASK      ((UINT64_C(1) << 30) - 1)

SPK_HD int xsum_word_limbs_fit(int64_t hi, int64_t lo) {  // (& rather than &&: loops of it vectorize)
    return (hi > -XSUM_WORD_LIMB) & (hi < XSUM_WORD_LIMB) & (lo > -XSUM_WORD_LIMB) & (lo < XSUM_WORD_LIMB);
}

// A word from a code (a bin up to 13, OVER or NONFINITE) and limbs that fit (ignored past 13).
SPK_HD uint64_t xsum_word_pack(int code, int64_t hi, int64_t lo) {
    const uint64_t keep = XSUM_WORD_MASK & (0 - (uint64_t)(code < XSUM_WORD_OVER));  // (a mask: loops vectorize)
    return (uint64_t)code << 60 | ((uint64_t)hi & keep) << 30 | ((uint64_t)lo & keep);
}

// The word of the sum (J, hi, lo).
SPK_HD uint64_t xsum_word(int J, int64_t hi, int64_t lo) {
    const int code = J == XSUM_BIN_NONFINITE                             ? XSUM_WORD_NONFINITE
                     : J < XSUM_WORD_OVER && xsum_word_limbs_fit(hi, lo) ? J
                                                                         : XSUM_WORD_OVER;
    return xsum_word_pack(code, hi, lo);
}

SPK_HD int xsum_word_code(uint64_t w) { return (int)(w >> 60); }
// A limb's field (shift 30: hi, 0: lo), sign-extended.
SPK_HD int64_t xsum_word_limb(uint64_t w, int shift) {
    const uint64_t f = (w >> shift) & XSUM_WORD_MASK;
    return (int64_t)(f ^ (UINT64_C(1) << 29)) - XSUM_WORD_LIMB;
}

// a + b, each raised to the larger code's bin (XSUM_WORD_OVER and NONFINITE absorb). Branch-free.
SPK_HD uint64_t xsum_word_merge(uint64_t a, uint64_t b) {
    const int ja = xsum_word_code(a), jb = xsum_word_code(b), j = ja > jb ? ja : jb;
    int64_t ah = xsum_word_limb(a, 30), al = xsum_word_limb(a, 0);
    int64_t bh = xsum_word_limb(b, 30), bl = xsum_word_limb(b, 0);
    xsum_raise_limbs(ja, j, &ah, &al);  // (codes past 13 keep no limbs: xsum_word_pack)
    xsum_raise_limbs(jb, j, &bh, &bl);
    const int64_t hi = ah + bh, lo = al + bl;
    return xsum_word_pack(j < XSUM_WORD_OVER && !xsum_word_limbs_fit(hi, lo) ? XSUM_WORD_OVER : j, hi, lo);
}

// The value of a word that is not XSUM_WORD_OVER, as xsum_value gives its sum's (NaN when
// non-finite).
SPK_HD double xsum_word_value(uint64_t w) {
    const int j = xsum_word_code(w);
    return xsum_value(j == XSUM_WORD_NONFINITE ? XSUM_BIN_NONFINITE : j, xsum_word_limb(w, 30), xsum_word_limb(w, 0));
}

// ---- sums held as words, for accumulation (kernels/exact_sum.h) ------------------------------
// The sum's bin, or XSUM_BIN_NONFINITE for the codes past the bins (a word held locally is never
// XSUM_WORD_OVER: see below).
SPK_HD int xsum_word_bin(uint64_t w) {
    const int code = xsum_word_code(w);
    return code < XSUM_WORD_OVER ? code : XSUM_BIN_NONFINITE;
}

// The sum (J, hi, lo) a word holds.
SPK_HD void xsum_word_unpack(uint64_t w, int *J, int64_t *hi, int64_t *lo) {
    *J = xsum_word_bin(w);
    *hi = xsum_word_limb(w, 30);
    *lo = xsum_word_limb(w, 0);
}

// The word of a sum just deposited to. Its limbs fit while the word has taken at most 32 terms,
// which the caller guarantees; a bin past the words' (a double term above 2^144, beyond float's
// range) or limbs that do not fit make the sum non-finite, never XSUM_WORD_OVER, whose terms
// would be lost.
SPK_HD uint64_t xsum_word_of_deposit(int J, int64_t hi, int64_t lo) {
    return xsum_word(J < XSUM_WORD_OVER && xsum_word_limbs_fit(hi, lo) ? J : XSUM_BIN_NONFINITE, hi, lo);
}

// x if finite, else 0 (and *finite says which), on the bits: GCC vectorizes loops of it where
// it does not a select on a float comparison.
SPK_HD float xsum_finite_or_zero(float x, int *finite) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    *finite = (b & 0x7f800000u) != 0x7f800000u;
    b &= 0u - (uint32_t)*finite;
    float y;
    memcpy(&y, &b, sizeof y);
    return y;
}

// A float term x as its sum's exact deposits take it: its value in *u if finite (else 0, and
// *finite cleared), and its bin. A float is kept whole at its own bin's grid and at any larger
// bin's that its bits reach (all of them at the grid of the bin above, none two bins up).
SPK_HD int xsum_term_bin(float x, double *u, int *finite) {
    int f;
    *u = (double)xsum_finite_or_zero(x, &f);
    *finite &= f;
    return xsum_bin_of(fabs(*u));
}

// The word of a sum of one float term x; non-finite if x is (float bins are at most 13, so
// J | 15 is the non-finite code). Branch-free.
SPK_HD uint64_t xsum_word_of_term(float x) {
    int finite = 1;
    double u;
    const int J = xsum_term_bin(x, &u, &finite);
    int64_t hi = 0, lo = 0;
    xsum_add_digits(J, &hi, &lo, u);
    return xsum_word_pack(J | (XSUM_WORD_NONFINITE & -(1 - finite)), hi, lo);
}

// xsum_term_bin of the four terms a, b, c and d of a sum (*finite: whether all are): the largest
// one's bin, which is the sum's.
SPK_HD int xsum_4_terms_bin(float a, float b, float c, float d, double *ua, double *ub, double *uc, double *ud,
                            int *finite) {
    int fa, fb, fc, fd;
    *ua = (double)xsum_finite_or_zero(a, &fa), *ub = (double)xsum_finite_or_zero(b, &fb);
    *uc = (double)xsum_finite_or_zero(c, &fc), *ud = (double)xsum_finite_or_zero(d, &fd);
    *finite = fa & fb & fc & fd;
    // bins grow with the magnitude: the largest one's, computed once (a select, which vectorizes)
    const double mab = fabs(*ua) > fabs(*ub) ? fabs(*ua) : fabs(*ub),
                 mcd = fabs(*uc) > fabs(*ud) ? fabs(*uc) : fabs(*ud);
    return xsum_bin_of(mab > mcd ? mab : mcd);
}

// The word of the sum of the float terms a, b, c and d, as deposits would leave it. Branch-free.
SPK_HD uint64_t xsum_word_of_4_terms(float a, float b, float c, float d) {
    int finite;
    double ua, ub, uc, ud;
    const int J = xsum_4_terms_bin(a, b, c, d, &ua, &ub, &uc, &ud, &finite);
    int64_t hi = 0, lo = 0;
    xsum_add_digits(J, &hi, &lo, ua);
    xsum_add_digits(J, &hi, &lo, ub);
    xsum_add_digits(J, &hi, &lo, uc);
    xsum_add_digits(J, &hi, &lo, ud);
    return xsum_word_pack(J | (XSUM_WORD_NONFINITE & -(1 - finite)), hi, lo);
}

// w + v: the word's sum, the deposit (xsum_deposit), the word again. Branch-free.
SPK_HD uint64_t xsum_word_deposit(uint64_t w, double v) {
    int J;
    int64_t hi, lo;
    xsum_word_unpack(w, &J, &hi, &lo);
    xsum_deposit(&J, &hi, &lo, v);
    return xsum_word_of_deposit(J, hi, lo);
}
