// kernels/norm.h on the device: one block per NORM_BLOCK elements sums its squares (each
// thread its strided 16 elements in order, then the block's fixed tree) into a partial, and
// one block sums the partials the same way. Bitwise the same run to run; not the CPU's order.
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void block_squares_kernel(double *part, const float *x, size_t n) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t begin = (size_t)blockIdx.x * NORM_BLOCK;
    double s = 0.0;
    for (size_t i = begin + threadIdx.x; i < begin + NORM_BLOCK && i < n; i += SPK_CUDA_THREADS)
        s += (double)x[i] * x[i];
    s = spk_block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_parts_kernel(double *out, const double *part, size_t blocks) {
    __shared__ double sh[SPK_CUDA_THREADS];
    double s = 0.0;
    for (size_t b = threadIdx.x; b < blocks; b += SPK_CUDA_THREADS) s += part[b];
    s = spk_block_sum(s, sh);
    if (threadIdx.x == 0) *out = s;
}

__global__ void scale_kernel(float *y, float a, size_t n) { SPK_GRID_LOOP(i, n) y[i] *= a; }

}  // namespace

extern "C" void vec_sum_squares_cuda(double *out, const float *x, size_t n) {
    const size_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    if (blocks == 0) {
        cudaCheck(cudaMemsetAsync(out, 0, sizeof(double), spk_cuda_stream_checked()));
        return;
    }
    SPK_ASSERT(blocks <= 0x7fffffffu);
    double *part = (double *)spk_cuda_scratch(blocks * sizeof(double));
    SPK_LAUNCH(block_squares_kernel, (unsigned)blocks, part, x, n);
    SPK_LAUNCH(sum_parts_kernel, 1, out, part, blocks);
}

extern "C" void vec_scale_cuda(float *y, float a, size_t n) {
    if (n) SPK_LAUNCH(scale_kernel, spk_grid(n), y, a, n);
}
