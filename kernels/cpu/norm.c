#include "kernels/norm.h"

#include <stdlib.h>

#include "kernels/base/check.h"

#define PAR_MIN 32768  // below this many elements, threading costs more than it saves

void vec_sum_squares(double *out, const float *x, size_t n) {
    const size_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *part = mallocCheck((blocks ? blocks : 1) * sizeof(double));
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t b = 0; b < blocks; b++) {
        const size_t end = (b + 1) * NORM_BLOCK < n ? (b + 1) * NORM_BLOCK : n;
        double s = 0.0;
        for (size_t i = b * NORM_BLOCK; i < end; i++) s += (double)x[i] * x[i];
        part[b] = s;
    }
    double total = 0.0;
    for (size_t b = 0; b < blocks; b++) total += part[b];
    free(part);
    *out = total;
}

void vec_scale(float *y, float a, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] *= a;
}
