// Helpers of the kernel tests of the world-size-invariant mode: exact sums in host memory and
// their comparison, and the thread count a check runs with.
#pragma once
#include <omp.h>
#include <string.h>

#include "kernels/exact_sum.h"
#include "test_common.h"

// n empty sums in host memory (test buffers).
static xsum_t host_sums(int64_t n) {
    void *p = test_alloc(xsum_bytes(n));
    memset(p, 0, xsum_bytes(n));
    return xsum_layout(p, n);
}

static int same_sums(xsum_t a, xsum_t b, int64_t n) {
    return memcmp(a.bin, b.bin, (size_t)n) == 0 && memcmp(a.hi, b.hi, sizeof(int64_t) * (size_t)n) == 0 &&
           memcmp(a.lo, b.lo, sizeof(int64_t) * (size_t)n) == 0;
}

// The values of n sums, rounded to float (a test buffer).
static float *sums_to_floats(xsum_t s, int64_t n) {
    float *y = alloc_f((size_t)n);
    xsum_to_float(y, s, n);
    return y;
}

// Runs the next calls with this many OpenMP threads (returns the previous count).
static int with_threads(int n) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(n);
    return before;
}
