// bf16 conversions (kernels/bf16.h): grid-stride loops over the same SPK_HD rounding as the CPU.
#include "kernels/cuda/conv1d_common.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void from_f32_kernel(spk_bf16 *y, const float *x, size_t n) {
    SPK_GRID_LOOP(i, n) y[i] = spk_bf16_round(x[i]);
}

__global__ void to_f32_kernel(float *y, const spk_bf16 *x, size_t n) {
    SPK_GRID_LOOP(i, n) y[i] = spk_bf16_to_f32(x[i]);
}

__global__ void slice_kernel(spk_bf16 *y, size_t yc, size_t yb, const float *x, int ldc, const float *add, int B, int C,
                             int T) {
    SPK_GRID_LOOP(i, (size_t)B * C * T) {
        const size_t t = i % T, bc = i / T, c = bc % C, b = bc / C;
        const float v = x[(b * ldc + c) * T + t];
        y[c * yc + b * yb + t] = spk_bf16_round(add ? v + add[i] : v);
    }
}

}  // namespace

extern "C" void bf16_from_f32_cuda(spk_bf16 *y, const float *x, size_t n) {
    if (n) SPK_LAUNCH(from_f32_kernel, spk_grid(n), y, x, n);
}

extern "C" void bf16_to_f32_cuda(float *y, const spk_bf16 *x, size_t n) {
    if (n) SPK_LAUNCH(to_f32_kernel, spk_grid(n), y, x, n);
}

extern "C" void bf16_fold_from_f32_cuda(spk_bf16 *y, float *sums, const float *x, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    conv_fold(y, x, B, C, T);
    if (sums) conv_bias_backward(sums, x, B, C, T);  // the bias gradient's sum
}

extern "C" void bf16_slice_from_f32_cuda(spk_bf16 *y, size_t yc, size_t yb, const float *x, int ldc, const float *add,
                                         int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ldc >= C);
    SPK_LAUNCH(slice_kernel, spk_grid((size_t)B * C * T), y, yc, yb, x, ldc, add, B, C, T);
}
