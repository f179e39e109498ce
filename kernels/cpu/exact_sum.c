// Exact sums on the CPU (kernels/exact_sum.h's backend ops): loops over the sums, in parallel
// and vectorized (the deposit is branch-free), each sum's terms taken in row order by one thread.
#include "kernels/exact_sum.h"

#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/exact_rows.h"

#define PAR_MIN 16384

void xsum_zero(xsum_t s, int64_t n) {
    SPK_ASSERT(n >= 0);
    if (n == 0) return;
    if (s.word) {
        memset(s.word, 0, sizeof(uint64_t) * (size_t)n);
        return;
    }
    if (s.one) {
        memset(s.one, 0, sizeof(float) * (size_t)n);
        return;
    }
    memset(s.bin, 0, (size_t)n);
    memset(s.hi, 0, sizeof(int64_t) * (size_t)n);
    memset(s.lo, 0, sizeof(int64_t) * (size_t)n);
}

// Blocks of BLOCK sums stay in L1 while every row is added to them (GCC vectorizes the inner
// loop over the sums, not an outer one).
#define BLOCK 512

void xsum_add(xsum_t s, const float *x, int rows, int64_t n, int group) {
    SPK_ASSERT(n >= 0 && rows >= 0 && group > 0 && rows % group == 0);
    const int64_t blocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if (n * rows >= PAR_MIN)
    for (int64_t k = 0; k < blocks; k++) {
        const int64_t i0 = k * BLOCK, len = i0 + BLOCK < n ? BLOCK : n - i0;
        float sum[BLOCK];
        for (int r = 0; r < rows; r += group) {
            const float *xr = x + (size_t)r * n + i0;
            if (group > 1) {  // the group's rows, added in order
                for (int64_t i = 0; i < len; i++) sum[i] = xr[i];
                for (int g = 1; g < group; g++)
                    for (int64_t i = 0; i < len; i++) sum[i] += xr[(size_t)g * n + i];
                xr = sum;
            }
            xsum_add_row(xsum_at(s, i0), xr, len);
        }
    }
}

void xsum_to_float(float *y, xsum_t s, int64_t n) {
    if (s.word) {  // (never XSUM_WORD_OVER: words are merged only by the exchange)
        xsum_words_to_float(y, s.word, n);
        return;
    }
    if (s.one) {
        xsum_terms_to_float(y, (const float *const[]){s.one}, 1, n);
        return;
    }
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = (float)xsum_value(s.bin[i], s.hi[i], s.lo[i]);
}

void xsum_rows_add(xsum_t dst, xsum_t src, const int *idx, int n, int64_t len) {
    SPK_ASSERT(n >= 0 && len >= 0 && !src.word && !src.one && !dst.one);
#pragma omp parallel for schedule(static) if (n * len >= PAR_MIN)
    for (int j = 0; j < n; j++) {
        const xsum_t d = xsum_at(dst, (int64_t)idx[j] * len), s = xsum_at(src, (int64_t)j * len);
        for (int64_t i = 0; d.word && i < len; i++) {  // (the word's terms and src's: at most 32)
            int J;
            int64_t hi, lo;
            xsum_word_unpack(d.word[i], &J, &hi, &lo);
            xsum_merge_into(&J, &hi, &lo, s.bin[i], s.hi[i], s.lo[i]);
            d.word[i] = xsum_word_of_deposit(J, hi, lo);
        }
        for (int64_t i = 0; !d.word && i < len; i++) {
            int J = d.bin[i];
            xsum_merge_into(&J, &d.hi[i], &d.lo[i], s.bin[i], s.hi[i], s.lo[i]);
            d.bin[i] = (int8_t)J;
        }
    }
}
