// What the float32 and the bf16 convolutions (kernels/cuda/conv1d.cu, conv1d_bf16.cu) share:
// the padding, the shape checks of the contract, the bias and its gradient (also the bf16
// fold's channel sums, kernels/cuda/bf16.cu), and the batch folded into time. The gradient is a
// channel sum in two deterministic stages (kernels/cuda/channel_sums.cuh).
#pragma once
#include "kernels/bf16.h"
#include "kernels/cuda/channel_sums.cuh"

namespace {

inline int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }

// The contract's shapes (kernels/conv1d.h); each library adds its own size limits.
inline void conv_check_contract(int B, int Cin, int Cout, int T, int K, int dilation) {
    SPK_ASSERT(B > 0 && Cin > 0 && Cout > 0 && T > 0);
    SPK_ASSERT(K > 0 && K % 2 == 1 && dilation > 0);
    SPK_ASSERT(T > conv_pad(K, dilation));  // reflect padding needs T > pad
}

// y[b, o, t] += bias[o]
__global__ void add_bias_kernel(float *y, const float *bias, size_t rows, int Cout, int T) {
    SPK_GRID_LOOP(i, rows * (size_t)T) y[i] += bias[(i / T) % Cout];
}

__global__ void bias_grad_sum_kernel(spk_fsum *sums, const float *dy, int B, int Cout, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    spk_channel_partial<1>(sums, B, Cout, T, spk_value_term{dy}, sh);
}

// y (B, Cout, T) += bias (Cout)
inline void conv_bias_forward(float *y, const float *bias, int B, int Cout, int T) {
    const size_t rows = (size_t)B * Cout;
    SPK_LAUNCH(add_bias_kernel, spk_grid(rows * T), y, bias, rows, Cout, T);
}

// dbias[o] += sum over b, t of dy[b, o, t]
inline void conv_bias_backward(float *dbias, const float *dy, int B, int Cout, int T) {
    const int S = spk_channel_splits(B, Cout, T);
    spk_fsum *sums = spk_channel_scratch(Cout, S, 1, 0, nullptr);
    SPK_LAUNCH(bias_grad_sum_kernel, spk_channel_grid(Cout, S), sums, dy, B, Cout, T);
    spk_channel_totals_add(dbias, sums, Cout, S);
}

// The batch folded into time: y[c, b*T + t] = x[b, c, t] for x (B, C, T) and y (C, B*T), in
// float or rounded to bf16 (the bf16 convolution's operands, bf16.cu; the float 1x1 weight
// gradient's, conv1d.cu).
__device__ __forceinline__ void fold_store(float *y, float v) { *y = v; }
__device__ __forceinline__ void fold_store(spk_bf16 *y, float v) { *y = spk_bf16_round(v); }

template <typename Out>
__global__ void fold_kernel(Out *y, const float *x, int B, int C, int T) {
    SPK_GRID_LOOP(i, (size_t)B * C * T) {
        const size_t t = i % T, bc = i / T, c = bc % C, b = bc / C;
        fold_store(&y[(c * B + b) * T + t], x[i]);
    }
}

template <typename Out>
inline void conv_fold(Out *y, const float *x, int B, int C, int T) {
    SPK_LAUNCH(fold_kernel<Out>, spk_grid((size_t)B * C * T), y, x, B, C, T);
}

}  // namespace
