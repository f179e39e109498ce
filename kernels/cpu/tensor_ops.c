// Layout helpers over (B, C, T) tensors; see kernels/tensor_ops.h.
#include "kernels/tensor_ops.h"

#include <string.h>

#include "kernels/spk_assert.h"

#define PAR_MIN 32768

void channel_slice_copy(float* dst, int dst_channels, const float* src, int src_channels, int B,
                        int C, int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    const size_t row = (size_t)C * T;  // channels of one sample are contiguous
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * row >= PAR_MIN)
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * dst_channels * T, src + (size_t)b * src_channels * T,
               sizeof(float) * row);
}

void channel_slice_add(float* dst, int dst_channels, const float* src, int src_channels, int B,
                       int C, int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    const size_t row = (size_t)C * T;
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * row >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        float* d = dst + (size_t)b * dst_channels * T;
        const float* s = src + (size_t)b * src_channels * T;
#pragma omp simd
        for (size_t i = 0; i < row; i++) d[i] += s[i];
    }
}

void time_repeat_forward(float* y, int y_channels, const float* s, int ld, int B, int C, int T) {
    SPK_ASSERT(C <= y_channels && C <= ld);
#pragma omp parallel for collapse(2) schedule(dynamic, 16) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float v = s[(size_t)b * ld + c];
            float* r = y + ((size_t)b * y_channels + c) * T;
            for (int t = 0; t < T; t++) r[t] = v;
        }
}

void time_repeat_backward(float* ds, int ld, const float* dy, int dy_channels, int B, int C,
                          int T) {
    SPK_ASSERT(C <= dy_channels && C <= ld);
#pragma omp parallel for collapse(2) schedule(dynamic, 16) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float* r = dy + ((size_t)b * dy_channels + c) * T;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int t = 0; t < T; t++) acc += r[t];
            ds[(size_t)b * ld + c] += acc;
        }
}

void vec_add(float* y, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(dynamic, 8192) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void vec_acc(float* y, const float* a, size_t n) {
#pragma omp parallel for simd schedule(dynamic, 8192) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += a[i];
}

void vec_zero(float* y, size_t n) {
#pragma omp parallel for schedule(dynamic, 8192) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = 0.0f;
}
