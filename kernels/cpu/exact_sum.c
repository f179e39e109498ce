// Exact sums on the CPU (kernels/exact_sum.h): loops over the sums, in parallel and vectorized
// (the deposit is branch-free), each sum's terms taken in row order by one thread.
#include "kernels/exact_sum.h"

#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/exact_rows.h"

#define PAR_MIN 16384

static size_t bin_bytes(int64_t n) { return ((size_t)n + 63) & ~(size_t)63; }

size_t xsum_bytes(int64_t n) { return bin_bytes(n) + 2 * sizeof(int64_t) * (size_t)n; }

xsum_t xsum_layout(void *buf, int64_t n) {
    char *p = buf;
    int64_t *limbs = (int64_t *)(p + bin_bytes(n));
    return (xsum_t){(int8_t *)p, limbs, limbs + n};
}

void xsum_zero(xsum_t s, int64_t n) {
    SPK_ASSERT(n >= 0);
    if (n == 0) return;
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

void xsum_add_doubles(xsum_t s, const double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) xsum_add_one(xsum_at(s, i), v[i]);
}

void xsum_to_float(float *y, xsum_t s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = (float)xsum_value(s.bin[i], s.hi[i], s.lo[i]);
}

void xsum_raise_to(xsum_t s, const int8_t *bin, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int J = s.bin[i];
        xsum_raise(&J, &s.hi[i], &s.lo[i], bin[i]);
        s.bin[i] = (int8_t)J;
    }
}

void xsum_merge(xsum_t dst, xsum_t src, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int J = dst.bin[i], K = src.bin[i];
        int64_t shi = src.hi[i], slo = src.lo[i];
        const int to = J > K ? J : K;
        xsum_raise(&J, &dst.hi[i], &dst.lo[i], to);
        xsum_raise(&K, &shi, &slo, to);
        dst.bin[i] = (int8_t)to;
        dst.hi[i] = (int64_t)((uint64_t)dst.hi[i] + (uint64_t)shi);
        dst.lo[i] = (int64_t)((uint64_t)dst.lo[i] + (uint64_t)slo);
    }
}

double xsum_value_of(xsum_t s, int64_t i) { return xsum_value(s.bin[i], s.hi[i], s.lo[i]); }
