// BatchNorm2d over channels-last (N, C) rows (kernels/batchnorm2d.h) with our own kernels, as
// BatchNorm1d (kernels/cuda/batchnorm.cu): the statistics are the CPU's (mean, rstd =
// 1/sqrt(biased var + eps), the unbiased running variance), with the residual add and the ReLU
// fused into the pass that applies them, and the backward's ReLU mask taken from the forward's
// output. Per-element math: the shared SPK_HD helpers of kernels/elementwise_math.h.
//
// Channel sums over the rows run in two deterministic stages (kernels/cuda/channel_sums.cuh: a
// partition fixed by N and C alone, partials added in a fixed order), compensated fp32. The
// statistics take one pass over x, as on the CPU: the sums of a = x - shift and a^2, shift
// being the channel's mean over the first 256 rows (near the mean, so the variance does not
// cancel), finished in double.
//
// workspace = [ partial sums: C * S * 2 ][ per channel, 2C floats: the shift (forward), or the
// means of g and g * xhat (backward) ]
#include "kernels/batchnorm2d.h"
#include "kernels/cuda/batchnorm_common.cuh"

namespace {

constexpr int kShiftRows = 256;  // rows of the shift, as the CPU's

struct Parts {
    spk_fsum *part;   // (C, S, 2)
    float *per_chan;  // (2C)
    int S;
};

Parts parts(float *workspace, int N, int C) {
    Parts p;
    p.S = spk_rows_channel_splits((size_t)N, C);
    p.part = (spk_fsum *)workspace;
    p.per_chan = workspace + (size_t)C * p.S * 2 * (sizeof(spk_fsum) / sizeof(float));
    return p;
}

// An input at element o: x, or its bf16 copy xh where given (x NULL).
__device__ __forceinline__ float input_at(const float *x, const spk_bf16 *xh, size_t o) {
    return xh ? spk_bf16_to_f32(xh[o]) : x[o];
}

// The gradient reaching the normalisation: dy (or its bf16 copy dyh), masked by the ReLU of the
// forward's output y, or by its bf16 copy yh where given (nonzero where y > 0,
// kernels/batchnorm2d.h).
__device__ __forceinline__ float masked(const float *dy, const spk_bf16 *dyh, const float *y, const spk_bf16 *yh,
                                        size_t o, int relu) {
    return relu && !(yh ? yh[o] != 0 : y[o] > 0.0f) ? 0.0f : input_at(dy, dyh, o);
}

// The terms in V: float for the compensated sums, double for the invariant mode's (as the CPU's).
template <typename V>
struct shifted_term {  // a = x - shift (0 when NULL), a^2
    const float *x, *shift;
    const spk_bf16 *xh;
    __device__ void operator()(size_t o, int c, V *v) const {
        const V a = (V)input_at(x, xh, o) - (shift ? shift[c] : 0.0f);
        v[0] = a;
        v[1] = a * a;
    }
};

template <typename V>
struct grad_term {  // g, g * xhat
    const float *dy, *y, *x, *mean, *rstd;
    int relu;
    const spk_bf16 *yh, *xh, *dyh;
    __device__ void operator()(size_t o, int c, V *v) const {
        const V g = masked(dy, dyh, y, yh, o, relu);
        v[0] = g;
        v[1] = g * ((input_at(x, xh, o) - mean[c]) * rstd[c]);
    }
};

// shift[c] = the mean of channel c over the first min(N, 256) rows, by blocks of 32 channels
// times 8 row lanes as the channel sums (a fixed order).
__global__ void shift_kernel(float *shift, const float *x, const spk_bf16 *xh, int N, int C) {
    __shared__ float sh[SPK_CUDA_THREADS];
    const int rows = N < kShiftRows ? N : kShiftRows;
    const int lane = threadIdx.x % SPK_ROWS_CHANNELS, c = blockIdx.x * SPK_ROWS_CHANNELS + lane;
    float s = 0.0f;
    if (c < C)
        for (int i = threadIdx.x / SPK_ROWS_CHANNELS; i < rows; i += SPK_ROWS_LANES)
            s += input_at(x, xh, (size_t)i * C + c);
    spk_block_fold(s, sh, SPK_ROWS_CHANNELS);
    if (threadIdx.x < SPK_ROWS_CHANNELS && c < C) shift[c] = sh[lane] / (float)rows;
}

// Stage 1 of two channel sums over the N rows (channel_sums.cuh), in Acc: spk_fsum or double.
template <typename Acc, typename Term>
__global__ void sums_kernel(Acc *part, Term term, int N, int C) {
    __shared__ Acc sh[SPK_CUDA_THREADS];
    spk_rows_channel_partial<2>(part, (size_t)N, C, term, sh);
}

// One block per channel (spk_rows_grid(C)): the statistics, saved and folded into the running
// ones.
__global__ void stats_kernel(float *mean, float *rstd, float *running_mean, float *running_var, const spk_fsum *part,
                             const float *shift, int N, int S, float eps, float momentum) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const double s1 = spk_fsum_double(spk_channel_total_block(part, c, S, 2, 0, sh));
    const double s2 = spk_fsum_double(spk_channel_total_block(part, c, S, 2, 1, sh));
    if (threadIdx.x != 0) return;
    double mu, var;
    spk_bn_stats_of_sums(s1, s2, shift[c], (double)N, &mu, &var);
    const float rs = spk_bn_rstd((float)var, eps);
    spk_bn_save_stats(mean, rstd, running_mean, running_var, c, (float)mu, rs, var, (size_t)N, momentum);
}

// y = act(bn(x) + residual) with rstd given, or (var given) 1/sqrt(var + eps), and yh = bf16(y)
// unless yh is NULL; the input x, or xh where given. y may alias x: each element is read, then
// written, by one thread.
__global__ void apply_kernel(float *y, spk_bf16 *yh, const float *x, const spk_bf16 *xh, const float *mean,
                             const float *rstd, const float *var, float eps, const float *weight, const float *bias,
                             const float *residual, const spk_bf16 *residual_h, int relu, size_t n, int C) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)(i % C);
        const float rs = var ? spk_bn_rstd(var[c], eps) : rstd[c];
        float v = spk_bn_apply(input_at(x, xh, i), mean[c], spk_bn_scale(rs, weight ? weight[c] : 1.0f),
                               bias ? bias[c] : 0.0f);
        if (residual || residual_h) v += input_at(residual, residual_h, i);
        v = relu && !(v > 0.0f) ? 0.0f : v;
        if (yh) {
            const spk_bf16 h = spk_bf16_round(v);
            if (relu && !h) v = 0.0f;  // y > 0 where yh is nonzero (kernels/batchnorm2d.h)
            yh[i] = h;
        }
        if (y) y[i] = v;
    }
}

// dresidual = or += g; dx = or += BatchNorm's input gradient of g, or dxh = it rounded to bf16.
__global__ void grad_apply_kernel(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate, const float *dy,
                                  const spk_bf16 *dyh, const float *y, const spk_bf16 *yh, const float *x,
                                  const spk_bf16 *xh, const float *weight, const float *mean, const float *rstd,
                                  const float *means, int relu, size_t n, int C) {
    SPK_GRID_LOOP(i, n) {
        const int c = (int)(i % C);
        const float g = masked(dy, dyh, y, yh, i, relu);
        if (dresidual) dresidual[i] = accumulate ? dresidual[i] + g : g;
        if (!dx && !dxh) continue;
        const float rs = rstd[c];
        const float d = spk_bn_dx(g, (input_at(x, xh, i) - mean[c]) * rs, weight ? weight[c] : 1.0f, rs, means[2 * c],
                                  means[2 * c + 1]);
        if (dxh)
            dxh[i] = spk_bf16_round(d);
        else
            dx[i] = accumulate ? dx[i] + d : d;
    }
}

}  // namespace

extern "C" size_t batchnorm2d_workspace_floats_cuda(int N, int C) {
    SPK_ASSERT(N > 0 && C > 0);
    const size_t S = (size_t)spk_rows_channel_splits((size_t)N, C);
    return (size_t)C * S * 2 * (sizeof(spk_fsum) / sizeof(float)) + 2 * (size_t)C;
}

extern "C" void batchnorm2d_forward_train_cuda(float *y, spk_bf16 *yh, float *mean, float *rstd, float *running_mean,
                                               float *running_var, const float *x, const spk_bf16 *xh,
                                               const float *weight, const float *bias, const float *residual,
                                               const spk_bf16 *residual_h, int relu, int N, int C, float eps,
                                               float momentum, float *workspace) {
    SPK_ASSERT(N > 1 && C > 0);  // N > 1: PyTorch's "more than 1 value per channel"
    SPK_ASSERT(!x != !xh && !(residual && residual_h));
    const Parts p = parts(workspace, N, C);
    float *shift = p.per_chan;
    SPK_LAUNCH(shift_kernel, spk_rows_channel_grid(C, 1), shift, x, xh, N, C);
    SPK_LAUNCH(sums_kernel, spk_rows_channel_grid(C, p.S), p.part, shifted_term<float>{x, shift, xh}, N, C);
    SPK_LAUNCH(stats_kernel, spk_rows_grid((size_t)C), mean, rstd, running_mean, running_var, p.part, shift, N, p.S,
               eps, momentum);
    const size_t n = (size_t)N * C;
    SPK_LAUNCH(apply_kernel, spk_grid(n), y, yh, x, xh, mean, rstd, nullptr, eps, weight, bias, residual, residual_h,
               relu, n, C);
}

extern "C" void batchnorm2d_forward_infer_cuda(float *y, const float *x, const float *running_mean,
                                               const float *running_var, const float *weight, const float *bias,
                                               const float *residual, int relu, int N, int C, float eps) {
    SPK_ASSERT(N > 0 && C > 0);
    const size_t n = (size_t)N * C;
    SPK_LAUNCH(apply_kernel, spk_grid(n), y, nullptr, x, nullptr, running_mean, nullptr, running_var, eps, weight, bias,
               residual, nullptr, relu, n, C);
}

namespace {

void backward(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate, float *dweight, float *dbias, const float *dy,
              const spk_bf16 *dyh, const float *y, const spk_bf16 *yh, const float *x, const spk_bf16 *xh,
              const float *weight, const float *mean, const float *rstd, int relu, int N, int C, float *workspace) {
    SPK_ASSERT(N > 1 && C > 0);
    SPK_ASSERT(!relu || y != NULL || yh != NULL);
    const Parts p = parts(workspace, N, C);
    float *means = p.per_chan;  // (C, 2): mean g, mean g * xhat
    if (dx || dxh || dweight || dbias) {
        const grad_term<float> term = {dy, y, x, mean, rstd, relu, yh, xh, dyh};
        SPK_LAUNCH(sums_kernel, spk_rows_channel_grid(C, p.S), p.part, term, N, C);
        SPK_LAUNCH(bn_grad_finish_kernel, spk_rows_grid((size_t)C), dweight, dbias, means, p.part, p.S, (size_t)N);
    }
    const size_t n = (size_t)N * C;
    if (dx || dxh || dresidual)
        SPK_LAUNCH(grad_apply_kernel, spk_grid(n), dx, dxh, dresidual, accumulate, dy, dyh, y, yh, x, xh, weight, mean,
                   rstd, means, relu, n, C);
}

}  // namespace

extern "C" void batchnorm2d_backward_cuda(float *dx, float *dresidual, int accumulate, float *dweight, float *dbias,
                                          const float *dy, const float *y, const float *x, const float *weight,
                                          const float *mean, const float *rstd, int relu, int N, int C,
                                          float *workspace) {
    backward(dx, nullptr, dresidual, accumulate, dweight, dbias, dy, nullptr, y, nullptr, x, nullptr, weight, mean,
             rstd, relu, N, C, workspace);
}

extern "C" void batchnorm2d_backward_rounded_cuda(spk_bf16 *dxh, float *dresidual, int accumulate, float *dweight,
                                                  float *dbias, const float *dy, const spk_bf16 *dyh, const float *y,
                                                  const spk_bf16 *yh, const float *x, const spk_bf16 *xh,
                                                  const float *weight, const float *mean, const float *rstd, int relu,
                                                  int N, int C, float *workspace) {
    SPK_ASSERT(dxh && !x != !xh && !dy != !dyh);
    backward(nullptr, dxh, dresidual, accumulate, dweight, dbias, dy, dyh, y, yh, x, xh, weight, mean, rstd, relu, N, C,
             workspace);
}

// ---- the world-size-invariant mode (kernels/batchnorm2d.h) --------------------------------------
// The partial passes: every sample's sums over its HW rows in double (stage 1 of the channel sums
// with one split per sample: a fixed order that depends on HW and C alone), in the library
// scratch, then one thread per channel adding each group's samples in order and depositing the
// group as one term. The global passes: per-channel statistics (or means) from the reduced sums,
// then the training passes' elementwise kernels.

namespace {

// One thread per channel: the per-sample sums part (C, B, 2) added by groups (bn_group_add).
__global__ void group_terms_kernel(xsum_t sums, xsum_t dbias, xsum_t dweight, const double *part, int B, int C,
                                   int group) {
    SPK_GRID_LOOP(c, (size_t)C) {
        double g1 = 0.0, g2 = 0.0;
        for (int b = 0; b < B; b++) {
            const double *p = part + ((size_t)c * B + b) * 2;
            bn_group_add(sums, dbias, dweight, (int)c, C, b, group, p[0], p[1], &g1, &g2, true);
        }
    }
}

// The two sums of `term` over each group of B samples of HW rows, one term per group each.
template <typename Term>
void group_sums(xsum_t sums, xsum_t dbias, xsum_t dweight, Term term, int B, int HW, int C, int group) {
    SPK_ASSERT(B > 0 && HW > 0 && C > 0 && group > 0 && B % group == 0);
    SPK_ASSERT((size_t)B * HW <= 0x7fffffffu);
    double *part = (double *)spk_cuda_scratch(sizeof(double) * 2 * (size_t)C * B);
    SPK_LAUNCH(sums_kernel, spk_rows_channel_grid(C, B), part, term, B * HW, C);  // split b: sample b
    SPK_LAUNCH(group_terms_kernel, spk_grid((size_t)C), sums, dbias, dweight, part, B, C, group);
}

// One thread per channel: the statistics of the reduced sums, saved and folded into the running
// ones (the thread reads running_mean[c], the shift, before it updates it).
__global__ void global_stats_kernel(float *mean, float *rstd, float *running_mean, float *running_var, xsum_t sums,
                                    int64_t N, int C, float eps, float momentum) {
    SPK_GRID_LOOP(c, (size_t)C) {
        const bn_global_stat_t st = bn_global_stat(sums, (int)c, C, running_mean, N, eps);
        spk_bn_save_stats(mean, rstd, running_mean, running_var, (int)c, st.mu, st.rs, st.var, (size_t)N, momentum);
    }
}

// means (C, 2) = the reduced sums of g and g * xhat over N, as grad_apply_kernel takes them.
__global__ void global_means_kernel(float *means, xsum_t sums, int64_t N, int C) {
    SPK_GRID_LOOP(c, (size_t)C) {
        means[2 * c] = bn_xsum_mean(sums, (int64_t)c, N);
        means[2 * c + 1] = bn_xsum_mean(sums, C + (int64_t)c, N);
    }
}

}  // namespace

extern "C" void batchnorm2d_stats_partial_cuda(xsum_t sums, const float *x, const float *shift, int B, int HW, int C,
                                               int group) {
    group_sums(sums, xsum_none(), xsum_none(), shifted_term<double>{x, shift, nullptr}, B, HW, C, group);
}

extern "C" void batchnorm2d_forward_global_cuda(float *y, float *mean, float *rstd, float *running_mean,
                                                float *running_var, const float *x, const float *weight,
                                                const float *bias, const float *residual, int relu, xsum_t sums,
                                                int64_t N_global, int N, int C, float eps, float momentum) {
    SPK_ASSERT(N > 0 && C > 0 && N_global > 1);
    SPK_LAUNCH(global_stats_kernel, spk_grid((size_t)C), mean, rstd, running_mean, running_var, sums, N_global, C, eps,
               momentum);
    const size_t n = (size_t)N * C;
    SPK_LAUNCH(apply_kernel, spk_grid(n), y, nullptr, x, nullptr, mean, rstd, nullptr, eps, weight, bias, residual,
               nullptr, relu, n, C);
}

extern "C" void batchnorm2d_backward_partial_cuda(xsum_t sums, xsum_t dweight, xsum_t dbias, const float *dy,
                                                  const float *y, const float *x, const float *mean, const float *rstd,
                                                  int relu, int B, int HW, int C, int group) {
    SPK_ASSERT(!relu || y != NULL);
    group_sums(sums, dbias, dweight, grad_term<double>{dy, y, x, mean, rstd, relu, nullptr, nullptr, nullptr}, B, HW, C,
               group);
}

extern "C" void batchnorm2d_backward_global_cuda(float *dx, spk_bf16 *dxh, float *dresidual, int accumulate,
                                                 const float *dy, const float *y, const float *x, const float *weight,
                                                 const float *mean, const float *rstd, int relu, xsum_t sums,
                                                 int64_t N_global, int N, int C) {
    SPK_ASSERT(N > 0 && C > 0 && N_global > 0 && !(dx && dxh));
    SPK_ASSERT(!relu || y != NULL);
    if (!dx && !dxh && !dresidual) return;
    float *means = (float *)spk_cuda_scratch(sizeof(float) * 2 * (size_t)C);  // (C, 2): mean g, mean g * xhat
    SPK_LAUNCH(global_means_kernel, spk_grid((size_t)C), means, sums, N_global, C);
    const size_t n = (size_t)N * C;
    SPK_LAUNCH(grad_apply_kernel, spk_grid(n), dx, dxh, dresidual, accumulate, dy, nullptr, y, nullptr, x, nullptr,
               weight, mean, rstd, means, relu, n, C);
}
