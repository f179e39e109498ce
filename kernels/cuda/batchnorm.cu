// BatchNorm1d (kernels/batchnorm.h) with our own kernels rather than cuDNN's, so the saved
// statistics are exactly the CPU's (mean and rstd = 1/sqrt(biased var + eps)), the running
// variance is the unbiased one, weight/bias may be NULL and the backward accumulates. The
// per-element math is the shared SPK_HD helpers of kernels/elementwise_math.h.
//
// Channel sums run in two deterministic stages (kernels/cuda/channel_sums.cuh), compensated
// fp32. Statistics are two-pass like the CPU: the mean, then squared deviations from the float
// mean; a per-channel kernel finishes them, an elementwise one applies them.
// The world-size-invariant kernels (below) sum each sample in double by one block per channel
// and add the per-sample sums to exact sums.
#include "kernels/cuda/batchnorm_common.cuh"
#include "kernels/cuda/conv1d_common.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

// The BatchNorm's input: x, or relu(x) when x is the ReLU's input (relu_in), taken as it is read.
__device__ __forceinline__ float bn_in(float v, bool relu_in) { return relu_in ? spk_relu(v) : v; }

struct in_term {  // the input
    const float *x;
    bool relu_in;
    __device__ void operator()(size_t o, float *v) const { v[0] = bn_in(x[o], relu_in); }
};

struct dev_term {  // (x - mean)^2 with the mean from the first pass's partials
    const float *x;
    float mu;
    bool relu_in;
    __device__ void operator()(size_t o, float *v) const {
        const float d = bn_in(x[o], relu_in) - mu;
        v[0] = d * d;
    }
};

struct grad_term {  // dy, dy * xhat
    const float *dy, *x;
    float mu, rs;
    bool relu_in;
    __device__ void operator()(size_t o, float *v) const {
        v[0] = dy[o];
        v[1] = dy[o] * ((bn_in(x[o], relu_in) - mu) * rs);
    }
};

// The channel's mean as the CPU forms it: the sum over N, rounded to float once.
__device__ __forceinline__ float channel_mean(const spk_fsum *sums, int c, int S, size_t N) {
    return (float)(spk_fsum_double(spk_channel_total(sums, c, S, 1, 0)) / (double)N);
}

__global__ void bn_sum_kernel(spk_fsum *sums, const float *x, int B, int C, int T, bool relu_in) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    spk_channel_partial<1>(sums, B, C, T, in_term{x, relu_in}, sh);
}

__global__ void bn_dev_kernel(spk_fsum *devs, const spk_fsum *sums, const float *x, int B, int C, int T, bool relu_in) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const float mu = channel_mean(sums, blockIdx.x, gridDim.y, (size_t)B * T);
    spk_channel_partial<1>(devs, B, C, T, dev_term{x, mu, relu_in}, sh);
}

// One thread per channel: the statistics, saved and folded into the running ones.
__global__ void bn_stats_kernel(float *mean, float *rstd, float *running_mean, float *running_var, const spk_fsum *sums,
                                const spk_fsum *devs, int C, int S, size_t N, float eps, float momentum) {
    SPK_GRID_LOOP(c, (size_t)C) {
        const float mu = channel_mean(sums, (int)c, S, N);
        const double var = spk_fsum_double(spk_channel_total(devs, (int)c, S, 1, 0)) / (double)N;  // biased
        const float rs = spk_bn_rstd((float)var, eps);
        spk_bn_save_stats(mean, rstd, running_mean, running_var, (int)c, mu, rs, var, N, momentum);
    }
}

// y may alias x: each element is read, then written, by one thread.
__global__ void bn_apply_kernel(float *y, const float *x, const float *mean, const float *rstd, const float *weight,
                                const float *bias, size_t n, int C, int T, bool relu_in) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)((i / T) % C);
        const float wc = weight ? weight[c] : 1.0f;
        const float bc = bias ? bias[c] : 0.0f;
        y[i] = spk_bn_apply(bn_in(x[i], relu_in), mean[c], spk_bn_scale(rstd[c], wc), bc);
    }
}

__global__ void bn_infer_kernel(float *y, const float *x, const float *running_mean, const float *running_var,
                                const float *weight, const float *bias, size_t n, int C, int T, float eps) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)((i / T) % C);
        const float rs = spk_bn_rstd(running_var[c], eps);
        const float wc = weight ? weight[c] : 1.0f;
        const float bc = bias ? bias[c] : 0.0f;
        y[i] = spk_bn_apply(x[i], running_mean[c], spk_bn_scale(rs, wc), bc);
    }
}

__global__ void bn_grad_sum_kernel(spk_fsum *sums, const float *dy, const float *x, const float *mean,
                                   const float *rstd, int B, int C, int T, bool relu_in) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    spk_channel_partial<2>(sums, B, C, T, grad_term{dy, x, mean[c], rstd[c], relu_in}, sh);
}

// The input gradient at offset i of channel c (the BatchNorm's input relu(x) with relu_in).
__device__ __forceinline__ float bn_dx_at(size_t i, int c, const float *dy, const float *x, const float *weight,
                                          const float *mean, const float *rstd, const float *means, bool relu_in) {
    const float wc = weight ? weight[c] : 1.0f, rs = rstd[c];
    return spk_bn_dx(dy[i], (bn_in(x[i], relu_in) - mean[c]) * rs, wc, rs, means[2 * c], means[2 * c + 1]);
}

// dx += the input gradient; RELU_SET: dx = it where x (a ReLU's input or output) > 0, else 0.
template <bool RELU_SET>
__global__ void bn_dx_kernel(float *dx, const float *dy, const float *x, const float *weight, const float *mean,
                             const float *rstd, const float *means, size_t n, int C, int T) {
    SPK_GRID_LOOP(i, n) {
        const float g = bn_dx_at(i, (int)((i / T) % C), dy, x, weight, mean, rstd, means, RELU_SET);
        if (RELU_SET)
            dx[i] = spk_relu_grad(0.0f + g, x[i]);
        else
            dx[i] += g;
    }
}

// The ReLU-masked input gradient as a term of channel sums (its bias sums) that also stores it
// rounded into the folded dxh: the channel grid visits every position once.
struct relu_dx_bf16_term {
    spk_bf16 *dxh;
    size_t yc, yb;  // dxh's strides of a channel and of a sample
    const float *dy, *x, *weight, *mean, *rstd, *means;
    int B, C, T;
    __device__ void operator()(size_t o, float *v) const {
        const int c = blockIdx.x;
        const size_t b = o / ((size_t)C * T), t = o % T;
        v[0] = spk_relu_grad(0.0f + bn_dx_at(o, c, dy, x, weight, mean, rstd, means, true), x[o]);
        dxh[c * yc + b * yb + t] = spk_bf16_round(v[0]);
    }
};

__global__ void bn_relu_dx_bf16_kernel(spk_fsum *part, relu_dx_bf16_term term) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    spk_channel_partial<1>(part, term.B, term.C, term.T, term, sh);
}

}  // namespace

namespace {

void forward_train(float *y, float *mean, float *rstd, float *running_mean, float *running_var, const float *x,
                   const float *weight, const float *bias, int B, int C, int T, float eps, float momentum,
                   bool relu_in) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    // PyTorch: "Expected more than 1 value per channel when training"
    SPK_ASSERT((size_t)B * T > 1);
    const int S = spk_channel_splits(B, C, T);
    spk_fsum *sums = spk_channel_scratch(C, S, 2, 0, nullptr);
    spk_fsum *devs = sums + (size_t)C * S;
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(bn_sum_kernel, spk_channel_grid(C, S), sums, x, B, C, T, relu_in);
    SPK_LAUNCH(bn_dev_kernel, spk_channel_grid(C, S), devs, sums, x, B, C, T, relu_in);
    SPK_LAUNCH(bn_stats_kernel, spk_grid((size_t)C), mean, rstd, running_mean, running_var, sums, devs, C, S,
               (size_t)B * T, eps, momentum);
    SPK_LAUNCH(bn_apply_kernel, spk_grid(n), y, x, mean, rstd, weight, bias, n, C, T, relu_in);
}

}  // namespace

extern "C" void batchnorm1d_forward_train_cuda(float *y, float *mean, float *rstd, float *running_mean,
                                               float *running_var, const float *x, const float *weight,
                                               const float *bias, int B, int C, int T, float eps, float momentum) {
    forward_train(y, mean, rstd, running_mean, running_var, x, weight, bias, B, C, T, eps, momentum, false);
}

extern "C" void batchnorm1d_relu_forward_train_cuda(float *y, float *mean, float *rstd, float *running_mean,
                                                    float *running_var, const float *x, const float *weight,
                                                    const float *bias, int B, int C, int T, float eps, float momentum) {
    SPK_ASSERT(y != x);
    forward_train(y, mean, rstd, running_mean, running_var, x, weight, bias, B, C, T, eps, momentum, true);
}

extern "C" void batchnorm1d_forward_infer_cuda(float *y, const float *x, const float *running_mean,
                                               const float *running_var, const float *weight, const float *bias, int B,
                                               int C, int T, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t n = (size_t)B * C * T;
    SPK_LAUNCH(bn_infer_kernel, spk_grid(n), y, x, running_mean, running_var, weight, bias, n, C, T, eps);
}

namespace {

// The backward's first stage: dweight, dbias += the sums of dy * xhat and dy, and their means
// over the batch, (C, 2), in scratch after the sums' S partials per channel (sums, spent then).
struct grad_stage {
    spk_fsum *sums;
    float *means;
    int S;
};

grad_stage grad_means(float *dweight, float *dbias, const float *dy, const float *x, const float *mean,
                      const float *rstd, int B, int C, int T, bool relu_in) {
    grad_stage g{nullptr, nullptr, spk_channel_splits(B, C, T)};
    g.sums = spk_channel_scratch(C, g.S, 2, 2 * (size_t)C, &g.means);
    SPK_LAUNCH(bn_grad_sum_kernel, spk_channel_grid(C, g.S), g.sums, dy, x, mean, rstd, B, C, T, relu_in);
    SPK_LAUNCH(bn_grad_finish_kernel, spk_rows_grid((size_t)C), dweight, dbias, g.means, g.sums, g.S, (size_t)B * T);
    return g;
}

template <bool RELU_SET>
void backward(float *dx, float *dweight, float *dbias, const float *dy, const float *x, const float *weight,
              const float *mean, const float *rstd, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    if (!dx && !dweight && !dbias) return;
    const grad_stage g = grad_means(dweight, dbias, dy, x, mean, rstd, B, C, T, RELU_SET);
    const size_t n = (size_t)B * C * T;
    if (dx) SPK_LAUNCH(bn_dx_kernel<RELU_SET>, spk_grid(n), dx, dy, x, weight, mean, rstd, g.means, n, C, T);
}

}  // namespace

extern "C" void batchnorm1d_backward_cuda(float *dx, float *dweight, float *dbias, const float *dy, const float *x,
                                          const float *weight, const float *mean, const float *rstd, int B, int C,
                                          int T) {
    backward<false>(dx, dweight, dbias, dy, x, weight, mean, rstd, B, C, T);
}

extern "C" void batchnorm1d_relu_backward_cuda(float *dx, float *dsum, float *dweight, float *dbias, const float *dy,
                                               const float *x, const float *weight, const float *mean,
                                               const float *rstd, int B, int C, int T) {
    backward<true>(dx, dweight, dbias, dy, x, weight, mean, rstd, B, C, T);
    if (dsum) conv_bias_backward(dsum, dx, B, C, T);  // as conv1d_backward_cuda adds it
}

extern "C" void batchnorm1d_relu_backward_bf16_cuda(spk_bf16 *dxh, size_t yc, size_t yb, float *dsum, float *dweight,
                                                    float *dbias, const float *dy, const float *x, const float *weight,
                                                    const float *mean, const float *rstd, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && dxh);
    const grad_stage g = grad_means(dweight, dbias, dy, x, mean, rstd, B, C, T, true);
    // the gradient sums are spent (stream order): their head holds the dx sums' partials
    const relu_dx_bf16_term term{dxh, yc, yb, dy, x, weight, mean, rstd, g.means, B, C, T};
    SPK_LAUNCH(bn_relu_dx_bf16_kernel, spk_channel_grid(C, g.S), g.sums, term);
    if (dsum) spk_channel_totals_add(dsum, g.sums, C, g.S);
}

// ---- the world-size-invariant mode (kernels/batchnorm.h) ----------------------------------------
// One block per channel; each sample's sums over time by the block's fixed tree (in double),
// added to the exact sums by thread 0 in sample order (the order does not matter to them).

namespace {

// Flat position i of channel c's N = B*T -> its offset in (B, C, T).
__device__ __forceinline__ size_t bn_offset(size_t i, int c, int C, int T) {
    const size_t b = i / T, t = i - b * T;
    return (b * C + c) * T + t;
}

// Sample b's block sums s1, s2 of channel c, collected over its group (bn_group_add), which thread
// 0 adds to the sums (and d1, d2 unless empty) at the group's last sample.
__device__ __forceinline__ void add_group(xsum_t sums, xsum_t d1, xsum_t d2, int c, int C, int b, int group, double s1,
                                          double s2, double *g1, double *g2, double *sh) {
    const double t1 = spk_block_sum(s1, sh), t2 = spk_block_sum(s2, sh);
    bn_group_add(sums, d1, d2, c, C, b, group, t1, t2, g1, g2, threadIdx.x == 0);
}

__global__ void bn_stats_partial_kernel(xsum_t sums, const float *x, const float *shift, int B, int C, int T,
                                        int group) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const double sft = shift ? shift[c] : 0.0f;
    double g1 = 0.0, g2 = 0.0;  // a group's sums, samples in order (thread 0's)
    for (int b = 0; b < B; b++) {
        const float *r = x + ((size_t)b * C + c) * T;
        double s1 = 0.0, s2 = 0.0;
        SPK_ROW_LOOP(t, T) {
            const double d = (double)r[t] - sft;
            s1 += d;
            s2 += d * d;
        }
        add_group(sums, xsum_none(), xsum_none(), c, C, b, group, s1, s2, &g1, &g2, sh);
    }
}

__global__ void bn_forward_global_kernel(float *y, float *mean, float *rstd, float *running_mean, float *running_var,
                                         const float *x, const float *weight, const float *bias, xsum_t sums, int64_t N,
                                         int B, int C, int T, float eps, float momentum) {
    const int c = blockIdx.x;
    const bn_global_stat_t st = bn_global_stat(sums, c, C, running_mean, N, eps);
    __syncthreads();  // every thread has read running_mean[c] before thread 0 updates it
    if (threadIdx.x == 0)
        spk_bn_save_stats(mean, rstd, running_mean, running_var, c, st.mu, st.rs, st.var, (size_t)N, momentum);
    const float sc = spk_bn_scale(st.rs, weight ? weight[c] : 1.0f);
    const float bc = bias ? bias[c] : 0.0f;
    for (size_t i = threadIdx.x; i < (size_t)B * T; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        y[o] = spk_bn_apply(x[o], st.mu, sc, bc);
    }
}

__global__ void bn_backward_partial_kernel(xsum_t sums, xsum_t dweight, xsum_t dbias, const float *dy, const float *x,
                                           const float *mean, const float *rstd, int B, int C, int T, int group) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const float mu = mean[c], rs = rstd[c];
    double g1 = 0.0, g2 = 0.0;
    for (int b = 0; b < B; b++) {
        const size_t base = ((size_t)b * C + c) * T;
        double s1 = 0.0, s2 = 0.0;
        SPK_ROW_LOOP(t, T) {
            const float g = dy[base + t];
            s1 += g;
            s2 += g * ((x[base + t] - mu) * rs);
        }
        add_group(sums, dbias, dweight, c, C, b, group, s1, s2, &g1, &g2, sh);
    }
}

__global__ void bn_backward_global_kernel(float *dx, int relu_set, const float *dy, const float *x, const float *weight,
                                          const float *mean, const float *rstd, xsum_t sums, int64_t N, int B, int C,
                                          int T) {
    const int c = blockIdx.x;
    const float mu = mean[c], rs = rstd[c];
    const float wc = weight ? weight[c] : 1.0f;
    const float mdy = bn_xsum_mean(sums, c, N), mdyx = bn_xsum_mean(sums, C + c, N);
    for (size_t i = threadIdx.x; i < (size_t)B * T; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        const float g = spk_bn_dx(dy[o], (bn_in(x[o], relu_set) - mu) * rs, wc, rs, mdy, mdyx);
        dx[o] = relu_set ? spk_relu_grad(0.0f + g, x[o]) : dx[o] + g;  // bn_dx_kernel's two forms
    }
}

}  // namespace

extern "C" void batchnorm1d_stats_partial_cuda(xsum_t sums, const float *x, const float *shift, int B, int C, int T,
                                               int group) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && group > 0 && B % group == 0);
    SPK_LAUNCH(bn_stats_partial_kernel, spk_rows_grid((size_t)C), sums, x, shift, B, C, T, group);
}

extern "C" void batchnorm1d_forward_global_cuda(float *y, float *mean, float *rstd, float *running_mean,
                                                float *running_var, const float *x, const float *weight,
                                                const float *bias, xsum_t sums, int64_t N, int B, int C, int T,
                                                float eps, float momentum) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && N > 1);
    SPK_LAUNCH(bn_forward_global_kernel, spk_rows_grid((size_t)C), y, mean, rstd, running_mean, running_var, x, weight,
               bias, sums, N, B, C, T, eps, momentum);
}

extern "C" void batchnorm1d_backward_partial_cuda(xsum_t sums, xsum_t dweight, xsum_t dbias, const float *dy,
                                                  const float *x, const float *mean, const float *rstd, int B, int C,
                                                  int T, int group) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && group > 0 && B % group == 0);
    SPK_LAUNCH(bn_backward_partial_kernel, spk_rows_grid((size_t)C), sums, dweight, dbias, dy, x, mean, rstd, B, C, T,
               group);
}

extern "C" void batchnorm1d_backward_global_cuda(float *dx, int relu_set, const float *dy, const float *x,
                                                 const float *weight, const float *mean, const float *rstd, xsum_t sums,
                                                 int64_t N, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && N > 0);
    SPK_LAUNCH(bn_backward_global_kernel, spk_rows_grid((size_t)C), dx, relu_set, dy, x, weight, mean, rstd, sums, N, B,
               C, T);
}
