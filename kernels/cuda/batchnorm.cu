// BatchNorm1d (kernels/batchnorm.h) with our own kernels rather than cuDNN's, so the saved
// statistics are exactly the CPU's (mean and rstd = 1/sqrt(biased var + eps)), the running
// variance is the unbiased one, weight/bias may be NULL and the backward accumulates. The
// per-element math is the shared SPK_HD helpers of kernels/elementwise_math.h.
//
// Channel sums run in two deterministic stages (kernels/cuda/channel_sums.cuh), compensated
// fp32. Statistics are two-pass like the CPU: the mean, then squared deviations from the float
// mean; a per-channel kernel finishes them, an elementwise one applies them.
#include "kernels/cuda/channel_sums.cuh"

namespace {

struct dev_term {  // (x - mean)^2 with the mean from the first pass's partials
    const float* x;
    float mu;
    __device__ void operator()(size_t o, float* v) const {
        const float d = x[o] - mu;
        v[0] = d * d;
    }
};

struct grad_term {  // dy, dy * xhat
    const float *dy, *x;
    float mu, rs;
    __device__ void operator()(size_t o, float* v) const {
        v[0] = dy[o];
        v[1] = dy[o] * ((x[o] - mu) * rs);
    }
};

// The channel's mean as the CPU forms it: the sum over N, rounded to float once.
__device__ __forceinline__ float channel_mean(const spk_fsum* sums, int c, int S, size_t N) {
    return (float)(spk_fsum_double(spk_channel_total(sums, c, S, 1, 0)) / (double)N);
}

__global__ void bn_sum_kernel(spk_fsum* sums, const float* x, int B, int C, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    spk_channel_partial<1>(sums, B, C, T, spk_value_term{x}, sh);
}

__global__ void bn_dev_kernel(spk_fsum* devs, const spk_fsum* sums, const float* x, int B, int C, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const float mu = channel_mean(sums, blockIdx.x, gridDim.y, (size_t)B * T);
    spk_channel_partial<1>(devs, B, C, T, dev_term{x, mu}, sh);
}

// One thread per channel: the statistics, saved and folded into the running ones.
__global__ void bn_stats_kernel(float* mean, float* rstd, float* running_mean, float* running_var,
                                const spk_fsum* sums, const spk_fsum* devs, int C, int S, size_t N, float eps,
                                float momentum) {
    SPK_GRID_LOOP(c, (size_t)C) {
        const float mu = channel_mean(sums, (int)c, S, N);
        const double var = spk_fsum_double(spk_channel_total(devs, (int)c, S, 1, 0)) / (double)N;  // biased
        const float rs = spk_bn_rstd((float)var, eps);
        spk_bn_save_stats(mean, rstd, running_mean, running_var, (int)c, mu, rs, var, N, momentum);
    }
}

// y may alias x: each element is read, then written, by one thread.
__global__ void bn_apply_kernel(float* y, const float* x, const float* mean, const float* rstd,
                                const float* weight, const float* bias, size_t n, int C, int T) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)((i / T) % C);
        const float wc = weight ? weight[c] : 1.0f;
        const float bc = bias ? bias[c] : 0.0f;
        y[i] = spk_bn_apply(x[i], mean[c], spk_bn_scale(rstd[c], wc), bc);
    }
}

__global__ void bn_infer_kernel(float* y, const float* x, const float* running_mean,
                                const float* running_var, const float* weight, const float* bias,
                                size_t n, int C, int T, float eps) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)((i / T) % C);
        const float rs = spk_bn_rstd(running_var[c], eps);
        const float wc = weight ? weight[c] : 1.0f;
        const float bc = bias ? bias[c] : 0.0f;
        y[i] = spk_bn_apply(x[i], running_mean[c], spk_bn_scale(rs, wc), bc);
    }
}

__global__ void bn_grad_sum_kernel(spk_fsum* sums, const float* dy, const float* x, const float* mean,
                                   const float* rstd, int B, int C, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    spk_channel_partial<2>(sums, B, C, T, grad_term{dy, x, mean[c], rstd[c]}, sh);
}

// One thread per channel: dbias += sum dy, dweight += sum dy xhat, and their means for dx.
__global__ void bn_grad_finish_kernel(float* dweight, float* dbias, float* means, const spk_fsum* sums, int C,
                                      int S, size_t N) {
    SPK_GRID_LOOP(c, (size_t)C) {
        const double sdy = spk_fsum_double(spk_channel_total(sums, (int)c, S, 2, 0));
        const double sdyx = spk_fsum_double(spk_channel_total(sums, (int)c, S, 2, 1));
        if (dbias) dbias[c] += (float)sdy;
        if (dweight) dweight[c] += (float)sdyx;
        means[2 * c] = (float)(sdy / (double)N);
        means[2 * c + 1] = (float)(sdyx / (double)N);
    }
}

__global__ void bn_dx_kernel(float* dx, const float* dy, const float* x, const float* weight, const float* mean,
                             const float* rstd, const float* means, size_t n, int C, int T) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)((i / T) % C);
        const float wc = weight ? weight[c] : 1.0f, rs = rstd[c];
        dx[i] += spk_bn_dx(dy[i], (x[i] - mean[c]) * rs, wc, rs, means[2 * c], means[2 * c + 1]);
    }
}

}  // namespace

extern "C" void batchnorm1d_forward_train_cuda(float* y, float* mean, float* rstd,
                                               float* running_mean, float* running_var,
                                               const float* x, const float* weight,
                                               const float* bias, int B, int C, int T, float eps,
                                               float momentum) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    // PyTorch: "Expected more than 1 value per channel when training"
    SPK_ASSERT((size_t)B * T > 1);
    const int S = spk_channel_splits(B, C, T);
    spk_fsum* sums = spk_channel_scratch(C, S, 2, 0, nullptr);
    spk_fsum* devs = sums + (size_t)C * S;
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(bn_sum_kernel, spk_channel_grid(C, S), sums, x, B, C, T);
    SPK_LAUNCH(bn_dev_kernel, spk_channel_grid(C, S), devs, sums, x, B, C, T);
    SPK_LAUNCH(bn_stats_kernel, spk_grid((size_t)C), mean, rstd, running_mean, running_var, sums, devs, C, S,
               (size_t)B * T, eps, momentum);
    SPK_LAUNCH(bn_apply_kernel, spk_grid(n), y, x, mean, rstd, weight, bias, n, C, T);
}

extern "C" void batchnorm1d_forward_infer_cuda(float* y, const float* x, const float* running_mean,
                                               const float* running_var, const float* weight,
                                               const float* bias, int B, int C, int T, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(bn_infer_kernel, spk_grid(n), y, x, running_mean, running_var, weight, bias, n, C, T,
               eps);
}

extern "C" void batchnorm1d_backward_cuda(float* dx, float* dweight, float* dbias, const float* dy,
                                          const float* x, const float* weight, const float* mean,
                                          const float* rstd, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    if (!dx && !dweight && !dbias) return;
    const int S = spk_channel_splits(B, C, T);
    float* means = nullptr;  // (C, 2): mean dy, mean dy * xhat
    spk_fsum* sums = spk_channel_scratch(C, S, 2, 2 * (size_t)C, &means);
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(bn_grad_sum_kernel, spk_channel_grid(C, S), sums, dy, x, mean, rstd, B, C, T);
    SPK_LAUNCH(bn_grad_finish_kernel, spk_grid((size_t)C), dweight, dbias, means, sums, C, S, (size_t)B * T);
    if (dx) SPK_LAUNCH(bn_dx_kernel, spk_grid(n), dx, dy, x, weight, mean, rstd, means, n, C, T);
}
