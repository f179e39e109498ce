// The exact sums' host helpers (kernels/exact_sum.h): their memory layout, and the raises,
// merges and reads of sums in host memory that the cross-rank reduction, the models and the
// trainer use whatever the backend (the backends' ops: kernels/cpu/exact_sum.c,
// kernels/cuda/exact_sum.cu).
#include "kernels/exact_sum.h"

#include "kernels/base/spk_assert.h"
#include "kernels/exact_sum_math.h"

#include <string.h>

#define PAR_MIN 16384

static size_t bin_bytes(int64_t n) { return ((size_t)n + 63) & ~(size_t)63; }

size_t xsum_bytes(int64_t n) { return bin_bytes(n) + 2 * sizeof(int64_t) * (size_t)n; }

xsum_t xsum_layout(void *buf, int64_t n) {
    char *p = buf;
    int64_t *limbs = (int64_t *)(p + bin_bytes(n));
    return (xsum_t){(int8_t *)p, limbs, limbs + n, NULL, NULL};
}

void xsum_raise_to(xsum_t s, const int8_t *bin, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int J = s.bin[i];
        xsum_raise(&J, &s.hi[i], &s.lo[i], bin[i]);
        s.bin[i] = (int8_t)J;
    }
}

int xsum_fit_combined(xsum_t s, int64_t n, int ranks) {
    uint64_t max_hi = 0, max_lo = 0;
#pragma omp parallel for simd schedule(static) reduction(max : max_hi, max_lo) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const uint64_t h = s.hi[i] < 0 ? 0 - (uint64_t)s.hi[i] : (uint64_t)s.hi[i];
        const uint64_t l = s.lo[i] < 0 ? 0 - (uint64_t)s.lo[i] : (uint64_t)s.lo[i];
        max_hi = h > max_hi ? h : max_hi;
        max_lo = l > max_lo ? l : max_lo;
    }
    return xsum_combinable(max_hi, max_lo, ranks);
}

void xsum_raise_combine(xsum_t s, const int8_t *bin, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int J = s.bin[i];
        int64_t hi = s.hi[i], lo = s.lo[i];
        xsum_raise(&J, &hi, &lo, bin[i]);
        s.bin[i] = (int8_t)J;
        s.hi[i] = xsum_combine(hi, lo);
    }
}

void xsum_split_combined(xsum_t s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) xsum_split(s.hi[i], &s.hi[i], &s.lo[i]);
}

void xsum_merge(xsum_t dst, xsum_t src, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int J = dst.bin[i];
        xsum_merge_into(&J, &dst.hi[i], &dst.lo[i], src.bin[i], src.hi[i], src.lo[i]);
        dst.bin[i] = (int8_t)J;
    }
}

double xsum_value_of(xsum_t s, int64_t i) {
    return s.word  ? xsum_word_value(s.word[i])
           : s.one ? xsum_word_value(xsum_word_of_term(s.one[i]))
                   : xsum_value(s.bin[i], s.hi[i], s.lo[i]);
}

void xsum_to_words(uint64_t *w, xsum_t s, int64_t n) {
    if (s.word) {
        if (w != s.word) memcpy(w, s.word, sizeof *w * (size_t)n);
        return;
    }
    if (s.one) {
        xsum_words_of_terms(w, (const float *const[]){s.one}, 1, n);
        return;
    }
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) w[i] = xsum_word(s.bin[i], s.hi[i], s.lo[i]);
}

void xsum_words_merge(uint64_t *inout, const uint64_t *in, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) inout[i] = xsum_word_merge(inout[i], in[i]);
}

// sum if finite, else the NaN of xsum_value's, selected by a mask.
static float finite_or_nan(float sum, int finite) {
    const float nan = (float)NAN;
    const uint32_t keep = 0u - (uint32_t)finite;
    uint32_t y, q;
    memcpy(&y, &sum, sizeof y);
    memcpy(&q, &nan, sizeof q);
    y = (y & keep) | (q & ~keep);
    float out;
    memcpy(&out, &y, sizeof out);
    return out;
}

// Sums of float terms rounded to float, as their words round (xsum_words_to_float) without the
// words: each term cut toward zero at the grid of the largest one's bin (xsum_add_digits' digits;
// the largest is kept whole), the cuts added in double (exactly: below 2^50 grid steps), rounded
// once to float; -0 + 0.0 reads as +0, and a non-finite term gives xsum_value's NaN.
// Branch-free: loops of them vectorize.
static float cuts_rounded(double cuts, int J, int finite) {
    return finite_or_nan((float)(cuts * xsum_pow2(XSUM_BIN_BITS * (J - 1) - XSUM_BIN_BIAS) + 0.0), finite);
}

// A sum of the one term a: a itself, -0 as +0, the NaN of xsum_value's if not finite.
static float value_of_1(float a) {
    int finite;
    const float x = xsum_finite_or_zero(a, &finite);
    return finite_or_nan(x + 0.0f, finite);
}

static float value_of_2(float a, float b) {
    int fa, fb;
    const double ua = (double)xsum_finite_or_zero(a, &fa), ub = (double)xsum_finite_or_zero(b, &fb);
    const double ma = fabs(ua), mb = fabs(ub);
    const int finite = fa & fb, J = xsum_bin_of(ma > mb ? ma : mb);  // the larger one's bin
    const double up = xsum_grid_scale(J);
    return cuts_rounded(trunc(ua * up) + trunc(ub * up), J, finite);
}

static float value_of_4(float a, float b, float c, float d) {
    int finite;
    double ua, ub, uc, ud;
    const int J = xsum_4_terms_bin(a, b, c, d, &ua, &ub, &uc, &ud, &finite);
    const double up = xsum_grid_scale(J);
    return cuts_rounded((trunc(ua * up) + trunc(ub * up)) + (trunc(uc * up) + trunc(ud * up)), J, finite);
}

// One block of the ops below: out[i] for the terms t[0..k)[i].
typedef void terms_block_fn(void *out, const float *const *t, int k, int64_t n);

static void floats_block(void *out, const float *const *t, int k, int64_t n) {
    float *restrict y = out;
    const float *restrict a = t[0], *restrict b = t[k > 1 ? 1 : 0];
    if (k == 4) {
        const float *restrict c = t[2], *restrict d = t[3];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = value_of_4(a[i], b[i], c[i], d[i]);
    } else if (k == 2) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = value_of_2(a[i], b[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = value_of_1(a[i]);
    }
}

static void words_block(void *out, const float *const *t, int k, int64_t n) {
    uint64_t *restrict w = out;
    const float *restrict a = t[0];
    if (k == 4) {
        const float *restrict b = t[1], *restrict c = t[2], *restrict d = t[3];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) w[i] = xsum_word_of_4_terms(a[i], b[i], c[i], d[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) w[i] = xsum_word_of_term(a[i]);
    }
}

#define TERMS_BLOCK 4096

// Blocks of out (unit bytes an element), in parallel.
static void by_blocks(terms_block_fn *block, size_t unit, void *out, const float *const *t, int k, int64_t n) {
    const int64_t blocks = (n + TERMS_BLOCK - 1) / TERMS_BLOCK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (int64_t q = 0; q < blocks; q++) {
        const int64_t i0 = q * TERMS_BLOCK, len = i0 + TERMS_BLOCK < n ? TERMS_BLOCK : n - i0;
        const float *tb[4];
        for (int j = 0; j < k; j++) tb[j] = t[j] + i0;
        block((char *)out + unit * (size_t)i0, tb, k, len);
    }
}

void xsum_words_of_terms(uint64_t *w, const float *const *t, int k, int64_t n) {
    SPK_ASSERT(k == 1 || k == 4);
    by_blocks(words_block, sizeof *w, w, t, k, n);
}

void xsum_terms_to_float(float *y, const float *const *t, int k, int64_t n) {
    SPK_ASSERT(k == 1 || k == 2 || k == 4);
    by_blocks(floats_block, sizeof *y, y, t, k, n);
}

int64_t xsum_words_to_float(float *y, const uint64_t *w, int64_t n) {
    // Every word as a finite one first (the codes past 13 keep no limbs: 0 here), a loop that
    // vectorizes, which xsum_word_value's mapping of XSUM_WORD_NONFINITE kept it from (3.1M
    // words on one core: 15.7-19.0 -> 6.5-7.5 ms); then the rare marked words, if any.
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)xsum_value(xsum_word_code(w[i]), xsum_word_limb(w[i], 30), xsum_word_limb(w[i], 0));
    int64_t marked = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : marked) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) marked += xsum_word_code(w[i]) >= XSUM_WORD_OVER;
    if (!marked) return 0;
    const uint32_t over_bits = XSUM_OVER_BITS;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        const int code = xsum_word_code(w[i]);
        if (code == XSUM_WORD_OVER) {
            memcpy(&y[i], &over_bits, sizeof y[i]);
            k++;
        }
        if (code == XSUM_WORD_NONFINITE) y[i] = (float)xsum_word_value(w[i]);
    }
    return k;
}
