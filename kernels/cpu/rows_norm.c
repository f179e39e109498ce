// Row L2 normalisation (kernels/rows_norm.h): rows in parallel, each row's sums in fixed lanes
// of doubles (SPK_LANE_SUM), so a row gives the same bits wherever it sits and on any thread.
#include "kernels/rows_norm.h"

#include <math.h>
#include <stddef.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/rows.h"

#define PAR_MIN 32768  // below this many elements, threading costs more than it saves

void rows_normalize_forward(float *z, float *norm, const float *x, int B, int E, float eps) {
    SPK_ASSERT(B > 0 && E > 0 && eps > 0.0f);
#pragma omp parallel for schedule(static) if ((size_t)B * E >= PAR_MIN)
    for (int i = 0; i < B; i++) {
        const float *xi = x + (size_t)i * E;
        float *zi = z + (size_t)i * E;
        double ss;
        SPK_LANE_SUM(ss, double, j, E, (double)xi[j] * xi[j]);
        const float n = (float)sqrt(ss);
        norm[i] = n;
        const float d = n < eps ? eps : n;  // a NaN norm stays NaN, as clamp_min
#pragma omp simd
        for (int j = 0; j < E; j++) zi[j] = xi[j] / d;
    }
}

void rows_normalize_backward(float *dx, const float *dz, const float *z, const float *norm, int B, int E, float eps) {
    SPK_ASSERT(B > 0 && E > 0 && eps > 0.0f);
#pragma omp parallel for schedule(static) if ((size_t)B * E >= PAR_MIN)
    for (int i = 0; i < B; i++) {
        const float *dzi = dz + (size_t)i * E, *zi = z + (size_t)i * E;
        float *dxi = dx + (size_t)i * E;
        const float n = norm[i];
        if (n < eps) {  // the denominator is the constant eps
#pragma omp simd
            for (int j = 0; j < E; j++) dxi[j] += dzi[j] / eps;
            continue;
        }
        double zdz;
        SPK_LANE_SUM(zdz, double, j, E, (double)zi[j] * dzi[j]);
        const float d = (float)zdz;
#pragma omp simd
        for (int j = 0; j < E; j++) dxi[j] += (dzi[j] - zi[j] * d) / n;
    }
}
