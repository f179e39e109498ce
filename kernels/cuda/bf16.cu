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
