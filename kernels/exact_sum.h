// Exact sums: n accumulators whose result does not depend on the order in which terms are
// added, on how the terms are split into partial sums, or on how partial sums are merged (the
// world-size-invariant mode sums every per-sample contribution this way). The representation
// and its error bound are in kernels/exact_sum_math.h: a bin (int8) and two int64 limbs per
// sum, all-zero memory being the empty sum.
//
// Partial sums on different ranks are merged in two integer collectives: the maximum of the
// bins (int8 MAX), every sum raised to it (xsum_raise_to), then the sum of the limbs (int64 SUM).
// Integer addition is associative, so MPI and NCCL give the same bits whatever their
// algorithm, the number of ranks or the bucket sizes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/spk_hd.h"

// A sum is held in full (bin, hi, lo) or, where it takes at most 32 terms in all (over every
// rank), as the one word of the cross-rank exchange (word; bin, hi and lo NULL): 8 bytes a sum
// instead of 17, the same values (xsum_word_deposit). Where besides this rank gives it one float
// term, it is held as that term (one; the others NULL): 4 bytes, the term itself, its sum's value
// (a single float term is kept whole; -0 reads as +0 and a non-finite term as NaN, as in full),
// and the exchange sends those floats before any word (app/dist/exact_reduce.c). A second term
// that is not zero fails an assertion, as does a double term that no float equals. Only the
// CPU's kernels take words and terms, and only xsum_add, xsum_add_row, xsum_add_one, xsum_zero,
// xsum_to_float, xsum_to_words, xsum_value_of and xsum_rows_add (as its destination, words only).
typedef struct {
    int8_t *bin;     // (n)
    int64_t *hi;     // (n)
    int64_t *lo;     // (n)
    uint64_t *word;  // (n) instead of the three
    float *one;      // (n) instead of the three: each sum's one term
} xsum_t;

// One sum held by value, for host code (losses, test reductions).
typedef struct {
    int8_t bin;
    int64_t hi, lo;
} xsum_cell_t;

// Bytes for n sums laid out by xsum_layout: [bin (n, padded to 64)][hi (n)][lo (n)]
// (kernels/exact_sum.c, as the host helpers below).
size_t xsum_bytes(int64_t n);
xsum_t xsum_layout(void *buf, int64_t n);
// The sums [off, off + n) of s.
SPK_HD xsum_t xsum_at(xsum_t s, int64_t off) {
    if (s.word) {
        xsum_t v = {NULL, NULL, NULL, s.word + off, NULL};
        return v;
    }
    if (s.one) {
        xsum_t v = {NULL, NULL, NULL, NULL, s.one + off};
        return v;
    }
    xsum_t v = {s.bin + off, s.hi + off, s.lo + off, NULL, NULL};
    return v;
}
SPK_HD xsum_t xsum_cell(xsum_cell_t *c) {
    xsum_t v = {&c->bin, &c->hi, &c->lo, NULL, NULL};
    return v;
}
// The empty view (a gradient that is not wanted), and the test for it.
SPK_HD xsum_t xsum_none(void) {
    xsum_t s = {NULL, NULL, NULL, NULL, NULL};
    return s;
}
SPK_HD int xsum_empty(xsum_t s) { return s.bin == NULL && s.word == NULL && s.one == NULL; }
// n sums held as words in buf (8 n bytes, all-zero being the empty sums).
SPK_HD xsum_t xsum_words(uint64_t *buf) {
    xsum_t s = {NULL, NULL, NULL, buf, NULL};
    return s;
}
// n sums of one term each, held as the terms in buf (4 n bytes, zeroed by xsum_zero).
SPK_HD xsum_t xsum_ones(float *buf) {
    xsum_t s = {NULL, NULL, NULL, NULL, buf};
    return s;
}

// ---- backend ops (every backend implements these on its own memory) ------------------------
void xsum_zero(xsum_t s, int64_t n);
// s[i] += x[r * n + i] for every row r < rows: each group of `group` consecutive rows (rows is a
// multiple) is summed in float, in row order, and that sum is one term (group 1: every row).
void xsum_add(xsum_t s, const float *x, int rows, int64_t n, int group);
// y[i] = the value of s[i], rounded to float (NaN when a term was not finite).
void xsum_to_float(float *y, xsum_t s, int64_t n);
// Row idx[j] of dst += row j of src (partial sums merged), for j < n, rows of len sums; the idx
// (backend memory) are distinct.
void xsum_rows_add(xsum_t dst, xsum_t src, const int *idx, int n, int64_t len);

// ---- host memory only (kernels/exact_sum.c: the cross-rank reduction, the models, the trainer) ----
// Raises s[i] to bin[i] (>= its own: the maximum over all partial sums).
void xsum_raise_to(xsum_t s, const int8_t *bin, int64_t n);
// Whether `ranks` partial sums like these may be exchanged combined (xsum_combinable): checked
// before the bins are raised, which only shrinks the limbs.
int xsum_fit_combined(xsum_t s, int64_t n, int ranks);
// Raises s[i] to bin[i] and leaves hi[i] = hi 2^24 + lo (xsum_combine): the one integer ranks add.
void xsum_raise_combine(xsum_t s, const int8_t *bin, int64_t n);
// Undoes xsum_raise_combine on the added integers: the limbs again, the same values.
void xsum_split_combined(xsum_t s, int64_t n);
// dst[i] += src[i] (a merge of two partial sums).
void xsum_merge(xsum_t dst, xsum_t src, int64_t n);
// The value of one sum, correctly rounded to double.
double xsum_value_of(xsum_t s, int64_t i);

// ---- the one-word form (kernels/exact_sum_math.h), host memory -----------------------------
// The bits of the float that stands for a sum whose word is XSUM_WORD_OVER: a NaN that no
// sum's rounding gives (a non-finite sum rounds to the default NaN).
#define XSUM_OVER_BITS 0x7fc0beefu
// w[i] = s[i] as one word (XSUM_WORD_OVER where it does not fit).
void xsum_to_words(uint64_t *w, xsum_t s, int64_t n);
// Sums of k float terms each (ranks' terms meeting in the exchange), term j of sum i being
// t[j][i]: w[i] = the sum's word (k = 1 or 4); y[i] = the sum rounded to float, as xsum_to_float
// rounds it (k = 1, 2 or 4).
void xsum_words_of_terms(uint64_t *w, const float *const *t, int k, int64_t n);
void xsum_terms_to_float(float *y, const float *const *t, int k, int64_t n);
// inout[i] = the merge of inout[i] and in[i] (the cross-rank reduction's operator).
void xsum_words_merge(uint64_t *inout, const uint64_t *in, int64_t n);
// y[i] = w[i]'s value rounded to float, as xsum_to_float rounds its sum, or the NaN of
// XSUM_OVER_BITS where w[i] is XSUM_WORD_OVER. Returns how many are.
int64_t xsum_words_to_float(float *y, const uint64_t *w, int64_t n);
