// The bias of a convolution over (B, Cout, T) and its gradient, shared by the float32 and the
// bf16 convolutions (kernels/cuda/conv1d.cu, conv1d_bf16.cu).
#pragma once
#include "kernels/cuda/launch.cuh"

namespace {

// y[b, o, t] += bias[o]
__global__ void add_bias_kernel(float* y, const float* bias, size_t rows, int Cout, int T) {
    SPK_GRID_LOOP(i, rows * (size_t)T) y[i] += bias[(i / T) % Cout];
}

// dbias[o] += sum_{b,t} dy[b, o, t]; one block per output channel.
__global__ void bias_grad_kernel(float* dbias, const float* dy, int B, int Cout, int T) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int o = blockIdx.x;
    const size_t n = (size_t)B * T;
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += SPK_CUDA_THREADS) {
        const size_t b = i / T, t = i - b * T;
        acc += dy[(b * Cout + o) * T + t];
    }
    const double s = spk_block_sum(acc, sh);
    if (threadIdx.x == 0) dbias[o] += (float)s;
}

}  // namespace
