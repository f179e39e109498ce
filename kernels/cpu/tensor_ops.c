// Layout helpers over (B, C, T) tensors; see kernels/tensor_ops.h.
#include "kernels/tensor_ops.h"

#include <string.h>

#include "kernels/base/spk_assert.h"

#define PAR_MIN 32768
#define TR_TILE 32  // batch_transpose: a 32x32 tile of x and of y stays in L1

void channel_slice_copy(float *dst, int dst_channels, const float *src, int src_channels, int B, int C, int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    const size_t row = (size_t)C * T;  // channels of one sample are contiguous
#pragma omp parallel for schedule(static) if ((size_t)B * row >= PAR_MIN)
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * dst_channels * T, src + (size_t)b * src_channels * T, sizeof(float) * row);
}

void channel_slice_add(float *dst, int dst_channels, const float *src, int src_channels, int B, int C, int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    const size_t row = (size_t)C * T;
#pragma omp parallel for schedule(static) if ((size_t)B * row >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *d = dst + (size_t)b * dst_channels * T;
        const float *s = src + (size_t)b * src_channels * T;
#pragma omp simd
        for (size_t i = 0; i < row; i++) d[i] += s[i];
    }
}

void time_repeat_forward(float *y, int y_channels, const float *s, int ld, int B, int C, int T) {
    SPK_ASSERT(C <= y_channels && (ld == 0 || C <= ld));  // ld = 0: one s for every sample
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float v = s[(size_t)b * ld + c];
            float *r = y + ((size_t)b * y_channels + c) * T;
            for (int t = 0; t < T; t++) r[t] = v;
        }
}

void time_repeat_backward(float *ds, int ld, const float *dy, int dy_channels, int B, int C, int T) {
    SPK_ASSERT(C <= dy_channels && C <= ld);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float *r = dy + ((size_t)b * dy_channels + c) * T;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int t = 0; t < T; t++) acc += r[t];
            ds[(size_t)b * ld + c] += acc;
        }
}

void batch_transpose(float *y, const float *x, int B, int R, int C) {
    // Tiled so the strided side (reads of x down a column) touches only TR_TILE cache lines
    // while the contiguous side streams; samples and row tiles are the parallel work items.
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * R * C >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int r0 = 0; r0 < R; r0 += TR_TILE) {
            const float *xb = x + (size_t)b * R * C;
            float *yb = y + (size_t)b * C * R;
            const int r1 = R - r0 < TR_TILE ? R : r0 + TR_TILE;
            for (int c0 = 0; c0 < C; c0 += TR_TILE) {
                const int c1 = C - c0 < TR_TILE ? C : c0 + TR_TILE;
                for (int c = c0; c < c1; c++) {
                    float *yr = yb + (size_t)c * R;
                    for (int r = r0; r < r1; r++) yr[r] = xb[(size_t)r * C + c];
                }
            }
        }
}

void vec_acc(float *y, const float *a, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += a[i];
}

void vec_zero(float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = 0.0f;
}

void rows_gather(float *dst, const float *src, const int *idx, int n, int E) {
#pragma omp parallel for schedule(static) if ((size_t)n * E >= 65536)
    for (int i = 0; i < n; i++) memcpy(dst + (size_t)i * E, src + (size_t)idx[i] * E, sizeof(float) * (size_t)E);
}

void rows_scatter_add(float *dst, const float *src, const int *idx, int n, int E) {
#pragma omp parallel for schedule(static) if ((size_t)n * E >= 65536)
    for (int i = 0; i < n; i++) {
        float *d = dst + (size_t)idx[i] * E;
        const float *s = src + (size_t)i * E;
        for (int e = 0; e < E; e++) d[e] += s[e];
    }
}

void vec_copy(float *y, const float *a, size_t n) {
    if (n) memcpy(y, a, sizeof(float) * n);  // memcpy with NULL is undefined even for 0 bytes
}
