// BatchNorm1d (kernels/batchnorm.h) with our own kernels rather than cuDNN's, so the saved
// statistics are exactly the CPU's (mean and rstd = 1/sqrt(biased var + eps)), the running
// variance is the unbiased one, weight/bias may be NULL and the backward accumulates. The
// per-element math is the shared SPK_HD helpers of kernels/elementwise_math.h.
//
// Training and backward: one block per channel over its N = B*T positions; each thread sums
// a fixed strided subset in double, then a fixed tree (deterministic, no atomics). Statistics
// are two-pass like the CPU: mean, then squared deviations from the float mean.
#include "kernels/cuda/launch.cuh"
#include "kernels/exact_sum_math.h"

namespace {

// Offset of position i (in [0, B*T)) of channel c.
__device__ __forceinline__ size_t bn_offset(size_t i, int c, int C, int T) {
    const size_t b = i / T, t = i - b * T;
    return (b * C + c) * T + t;
}

__global__ void bn_train_kernel(float* y, float* mean, float* rstd, float* running_mean,
                                float* running_var, const float* x, const float* weight,
                                const float* bias, int B, int C, int T, float eps, float momentum) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const size_t N = (size_t)B * T;
    double s = 0.0;
    for (size_t i = threadIdx.x; i < N; i += SPK_CUDA_THREADS) s += x[bn_offset(i, c, C, T)];
    const double mu = spk_block_sum(s, sh) / (double)N;
    const float muf = (float)mu;
    double ss = 0.0;
    for (size_t i = threadIdx.x; i < N; i += SPK_CUDA_THREADS) {
        const float d = x[bn_offset(i, c, C, T)] - muf;
        ss += d * d;
    }
    // After this reduction every thread has finished reading x, so y may alias x below.
    const double var = spk_block_sum(ss, sh) / (double)N;  // biased
    const float rs = spk_bn_rstd((float)var, eps);
    if (threadIdx.x == 0)
        spk_bn_save_stats(mean, rstd, running_mean, running_var, c, muf, rs, var, N, momentum);
    const float wc = weight ? weight[c] : 1.0f;
    const float bc = bias ? bias[c] : 0.0f;
    const float sc = spk_bn_scale(rs, wc);
    for (size_t i = threadIdx.x; i < N; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        y[o] = spk_bn_apply(x[o], muf, sc, bc);
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

__global__ void bn_backward_kernel(float* dx, float* dweight, float* dbias, const float* dy,
                                   const float* x, const float* weight, const float* mean,
                                   const float* rstd, int B, int C, int T) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const size_t N = (size_t)B * T;
    const float mu = mean[c], rs = rstd[c];
    double s1 = 0.0, s2 = 0.0;  // sum dy, sum dy * xhat
    for (size_t i = threadIdx.x; i < N; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        const float g = dy[o];
        s1 += g;
        s2 += g * ((x[o] - mu) * rs);
    }
    const double sdy = spk_block_sum(s1, sh);
    const double sdyx = spk_block_sum(s2, sh);
    if (threadIdx.x == 0) {
        if (dbias) dbias[c] += (float)sdy;
        if (dweight) dweight[c] += (float)sdyx;
    }
    if (!dx) return;
    const float wc = weight ? weight[c] : 1.0f;
    const float mdy = (float)(sdy / (double)N), mdyx = (float)(sdyx / (double)N);
    for (size_t i = threadIdx.x; i < N; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        dx[o] += spk_bn_dx(dy[o], (x[o] - mu) * rs, wc, rs, mdy, mdyx);
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
    SPK_LAUNCH(bn_train_kernel, spk_rows_grid((size_t)C), y, mean, rstd, running_mean, running_var,
               x, weight, bias, B, C, T, eps, momentum);
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
    SPK_LAUNCH(bn_backward_kernel, spk_rows_grid((size_t)C), dx, dweight, dbias, dy, x, weight, mean,
               rstd, B, C, T);
}

// ---- the world-size-invariant mode (kernels/batchnorm.h) ----------------------------------------
// One block per channel; each sample's sums over time by the block's fixed tree (in double),
// added to the exact sums by thread 0 in sample order (the order does not matter to them).

namespace {

__device__ __forceinline__ void add_one(xsum_t s, int64_t i, double v) {
    int J = s.bin[i];
    xsum_deposit(&J, &s.hi[i], &s.lo[i], v);
    s.bin[i] = (int8_t)J;
}

// Sample b's block sums s1, s2 of channel c: collected into g1, g2 over its group, which thread 0
// adds to sums[c], sums[C + c] at the group's last sample. Returns whether it did.
__device__ __forceinline__ bool add_group(xsum_t sums, int c, int C, int b, int group, double s1, double s2,
                                          double* g1, double* g2, double* sh) {
    const double t1 = spk_block_sum(s1, sh), t2 = spk_block_sum(s2, sh);
    *g1 = b % group ? *g1 + t1 : t1;
    *g2 = b % group ? *g2 + t2 : t2;
    if (threadIdx.x != 0 || b % group != group - 1) return false;
    add_one(sums, c, *g1);
    add_one(sums, C + c, *g2);
    return true;
}

__global__ void bn_stats_partial_kernel(xsum_t sums, const float* x, const float* shift, int B,
                                        int C, int T, int group) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const double sft = shift ? shift[c] : 0.0f;
    double g1 = 0.0, g2 = 0.0;  // a group's sums, samples in order (thread 0's)
    for (int b = 0; b < B; b++) {
        const float* r = x + ((size_t)b * C + c) * T;
        double s1 = 0.0, s2 = 0.0;
        SPK_ROW_LOOP(t, T) {
            const double d = (double)r[t] - sft;
            s1 += d;
            s2 += d * d;
        }
        add_group(sums, c, C, b, group, s1, s2, &g1, &g2, sh);
    }
}

__global__ void bn_forward_global_kernel(float* y, float* mean, float* rstd, float* running_mean,
                                         float* running_var, const float* x, const float* weight,
                                         const float* bias, xsum_t sums, int64_t N, int B, int C,
                                         int T, float eps, float momentum) {
    const int c = blockIdx.x;
    double mu, var;
    spk_bn_stats_of_sums(xsum_value(sums.bin[c], sums.hi[c], sums.lo[c]),
                         xsum_value(sums.bin[C + c], sums.hi[C + c], sums.lo[C + c]),
                         running_mean ? running_mean[c] : 0.0f, (double)N, &mu, &var);
    const float muf = (float)mu;
    const float rs = spk_bn_rstd((float)var, eps);
    __syncthreads();  // every thread has read running_mean[c] before thread 0 updates it
    if (threadIdx.x == 0)
        spk_bn_save_stats(mean, rstd, running_mean, running_var, c, muf, rs, var, (size_t)N, momentum);
    const float sc = spk_bn_scale(rs, weight ? weight[c] : 1.0f);
    const float bc = bias ? bias[c] : 0.0f;
    for (size_t i = threadIdx.x; i < (size_t)B * T; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        y[o] = spk_bn_apply(x[o], muf, sc, bc);
    }
}

__global__ void bn_backward_partial_kernel(xsum_t sums, xsum_t dweight, xsum_t dbias,
                                           const float* dy, const float* x, const float* mean,
                                           const float* rstd, int B, int C, int T, int group) {
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
        if (add_group(sums, c, C, b, group, s1, s2, &g1, &g2, sh)) {
            if (!xsum_empty(dbias)) add_one(dbias, c, g1);
            if (!xsum_empty(dweight)) add_one(dweight, c, g2);
        }
    }
}

__global__ void bn_backward_global_kernel(float* dx, const float* dy, const float* x,
                                          const float* weight, const float* mean, const float* rstd,
                                          xsum_t sums, int64_t N, int B, int C, int T) {
    const int c = blockIdx.x;
    const float mu = mean[c], rs = rstd[c];
    const float wc = weight ? weight[c] : 1.0f;
    const float mdy = (float)(xsum_value(sums.bin[c], sums.hi[c], sums.lo[c]) / (double)N);
    const float mdyx = (float)(xsum_value(sums.bin[C + c], sums.hi[C + c], sums.lo[C + c]) / (double)N);
    for (size_t i = threadIdx.x; i < (size_t)B * T; i += SPK_CUDA_THREADS) {
        const size_t o = bn_offset(i, c, C, T);
        dx[o] += spk_bn_dx(dy[o], (x[o] - mu) * rs, wc, rs, mdy, mdyx);
    }
}

}  // namespace

extern "C" void batchnorm1d_stats_partial_cuda(xsum_t sums, const float* x, const float* shift,
                                               int B, int C, int T, int group) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && group > 0 && B % group == 0);
    SPK_LAUNCH(bn_stats_partial_kernel, spk_rows_grid((size_t)C), sums, x, shift, B, C, T, group);
}

extern "C" void batchnorm1d_forward_global_cuda(float* y, float* mean, float* rstd,
                                                float* running_mean, float* running_var,
                                                const float* x, const float* weight,
                                                const float* bias, xsum_t sums, int64_t N, int B,
                                                int C, int T, float eps, float momentum) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && N > 1);
    SPK_LAUNCH(bn_forward_global_kernel, spk_rows_grid((size_t)C), y, mean, rstd, running_mean,
               running_var, x, weight, bias, sums, N, B, C, T, eps, momentum);
}

extern "C" void batchnorm1d_backward_partial_cuda(xsum_t sums, xsum_t dweight, xsum_t dbias,
                                                  const float* dy, const float* x,
                                                  const float* mean, const float* rstd, int B,
                                                  int C, int T, int group) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && group > 0 && B % group == 0);
    SPK_LAUNCH(bn_backward_partial_kernel, spk_rows_grid((size_t)C), sums, dweight, dbias, dy, x,
               mean, rstd, B, C, T, group);
}

extern "C" void batchnorm1d_backward_global_cuda(float* dx, const float* dy, const float* x,
                                                 const float* weight, const float* mean,
                                                 const float* rstd, xsum_t sums, int64_t N, int B,
                                                 int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && N > 0);
    SPK_LAUNCH(bn_backward_global_kernel, spk_rows_grid((size_t)C), dx, dy, x, weight, mean, rstd,
               sums, N, B, C, T);
}
