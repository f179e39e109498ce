// BatchNorm + ReLU over a dense block's channels, statistics shared by the readers
// (kernels/dense_bn.h), with the per-element math of kernels/elementwise_math.h that the CPU's
// kernels/cpu/dense_bn.c runs too.
//
// The per-group sums run in two deterministic stages, as the rows' channel sums of
// kernels/cuda/channel_sums.cuh, but with a partition of each group's rows fixed by the group's
// row count and C alone (never by B, so that a group's sums do not depend on how the batch is
// split over ranks):
//   stage 1: blocks (lane of 32 channels, split p of P, group k); a block sums its rows as
//            32 channel lanes times 8 row lanes (compensated fp32, rows in order), folded by the
//            fixed tree of spk_block_fold, and stores the partial in double;
//   stage 2: one thread per (group, channel) adds the P partials in order and rounds to float.
// The backward's stage 1 also writes the reader's g, each element by the one thread summing it.
// The elementwise passes are grid-stride loops over the rows' C columns (ld: the row stride).
#include "kernels/bf16.h"
#include "kernels/cuda/channel_sums.cuh"

namespace {

// Channel c's rstd and folded scale, as the CPU folds them.
__device__ __forceinline__ float dbn_rstd(const float *var, int c, float eps) { return spk_bn_rstd(var[c], eps); }
__device__ __forceinline__ float dbn_scale(const float *var, const float *weight, int c, float eps) {
    return spk_bn_scale(dbn_rstd(var, c, eps), weight ? weight[c] : 1.0f);
}

// The pre-activation of a reader: the forward's z and the backward's mask both come from this one
// expression, so the mask agrees with the forward bit for bit.
__device__ __forceinline__ float dbn_pre(float x, float mu, float scale, float beta) {
    return spk_bn_apply(x, mu, scale, beta);
}

// The terms of the statistics: a = x - shift and a^2.
struct stats_term {
    const float *x, *shift;
    int ldx;
    struct chan {
        float shift;
    };
    __device__ chan channel(int c) const { return chan{shift ? shift[c] : 0.0f}; }
    __device__ void operator()(const chan &k, size_t i, int c, float *v) const {
        const float a = x[i * ldx + c] - k.shift;
        v[0] = a;
        v[1] = a * a;
    }
};

// The terms of a reader's backward, m and m * xhat (m = dz masked by the ReLU), writing g = m * w.
struct grad_term {
    float *g;
    const float *dz, *x, *mean, *var, *weight, *bias;
    int ldg, ldz, ldx, accumulate;
    float eps;
    struct chan {
        float mu, rstd, scale, beta, w;
    };
    __device__ chan channel(int c) const {
        return chan{mean[c], dbn_rstd(var, c, eps), dbn_scale(var, weight, c, eps), bias ? bias[c] : 0.0f,
                    weight ? weight[c] : 1.0f};
    }
    __device__ void operator()(const chan &k, size_t i, int c, float *v) const {
        const float xv = x[i * ldx + c];
        const float m = dbn_pre(xv, k.mu, k.scale, k.beta) > 0.0f ? dz[i * ldz + c] : 0.0f;
        const float gm = m * k.w;
        float *o = g + i * ldg + c;
        *o = accumulate ? *o + gm : gm;
        v[0] = m;
        v[1] = m * ((xv - k.mu) * k.rstd);
    }
};

// Stage 1 on a (lanes, P, groups) grid: part (groups, P, 2, C) in double, over the `rows` rows of
// each group.
template <typename Term>
__global__ void group_partial_kernel(double *part, Term term, size_t rows, int C) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int lane = threadIdx.x % SPK_ROWS_CHANNELS, row_lane = threadIdx.x / SPK_ROWS_CHANNELS;
    const int c = blockIdx.x * SPK_ROWS_CHANNELS + lane, p = blockIdx.y, P = gridDim.y, k = blockIdx.z;
    spk_fsum acc[2];
    for (int q = 0; q < 2; q++) acc[q] = spk_fsum_zero();
    if (c < C) {
        const typename Term::chan ch = term.channel(c);
        const size_t first = (size_t)k * rows;
        for (size_t i = rows * p / P + row_lane; i < rows * (p + 1) / P; i += SPK_ROWS_LANES) {
            float v[2];
            term(ch, first + i, c, v);
            for (int q = 0; q < 2; q++) spk_fsum_add(&acc[q], v[q]);
        }
    }
    for (int q = 0; q < 2; q++) {  // every thread reaches every barrier
        spk_block_fold(acc[q], sh, SPK_ROWS_CHANNELS);
        if (row_lane == 0 && c < C) part[(((size_t)k * P + p) * 2 + q) * C + c] = spk_fsum_double(sh[lane]);
        __syncthreads();
    }
}

// Stage 2: group k's q-th sum of channel c, its P partials added in order.
__device__ __forceinline__ float group_total(const double *part, int k, int P, int q, int C, int c) {
    double s = 0.0;
    for (int p = 0; p < P; p++) s += part[(((size_t)k * P + p) * 2 + q) * C + c];
    return (float)s;
}

// out (2, groups, C): the sums of a and a^2.
__global__ void stats_total_kernel(float *out, const double *part, int groups, int P, int C) {
    SPK_GRID_LOOP(i, (size_t)groups * C) {
        const int k = (int)(i / C), c = (int)(i % C);
        out[i] = group_total(part, k, P, 0, C, c);
        out[(size_t)groups * C + i] = group_total(part, k, P, 1, C, c);
    }
}

// out (4, groups, C): the sums of m and m * xhat, then those times the weight.
__global__ void grad_total_kernel(float *out, const double *part, const float *weight, int groups, int P, int C) {
    SPK_GRID_LOOP(i, (size_t)groups * C) {
        const int k = (int)(i / C), c = (int)(i % C);
        const float m1 = group_total(part, k, P, 0, C, c), m2 = group_total(part, k, P, 1, C, c);
        const float w = weight ? weight[c] : 1.0f;
        const size_t n = (size_t)groups * C;
        out[i] = m1;
        out[n + i] = m2;
        out[2 * n + i] = m1 * w;
        out[3 * n + i] = m2 * w;
    }
}

// Stage 1 of the two sums of `term` over each group of `group` samples of HW rows.
struct group_parts {
    double *part;
    int groups, P;
};
template <typename Term>
group_parts group_partials(Term term, int B, int HW, int C, int group) {
    SPK_ASSERT(B > 0 && HW > 0 && C > 0 && group > 0 && B % group == 0);
    group_parts g;
    g.groups = B / group;
    SPK_ASSERT(g.groups <= 65535);
    const size_t rows = (size_t)group * HW;
    g.P = spk_rows_channel_splits(rows, C);  // the group's shape alone
    g.part = (double *)spk_cuda_scratch(sizeof(double) * (size_t)g.groups * g.P * 2 * C);
    const dim3 grid(spk_rows_channel_grid(C, g.P).x, (unsigned)g.P, (unsigned)g.groups);
    SPK_LAUNCH(group_partial_kernel, grid, g.part, term, rows, C);
    return g;
}

// Running statistics of channel c from the batch's mean and biased variance (PyTorch's update).
__device__ __forceinline__ void running_update(float *running_mean, float *running_var, int c, float mu, float var,
                                               int64_t N, float momentum) {
    running_mean[c] = spk_ema(running_mean[c], mu, momentum);
    running_var[c] = spk_ema(running_var[c], (float)((double)var * (double)N / (double)(N - 1)), momentum);
}

// One thread per channel; it reads shift[c] before it writes running_mean[c].
__global__ void stats_finish_kernel(float *mean, float *var, float *running_mean, float *running_var, const float *s1,
                                    const float *s2, const float *shift, int64_t N, int C, float momentum) {
    SPK_GRID_LOOP(c, (size_t)C) {
        double mu, v;
        spk_bn_stats_of_sums(s1[c], s2[c], shift ? shift[c] : 0.0f, (double)N, &mu, &v);
        mean[c] = (float)mu;
        var[c] = (float)v;
        if (running_mean) running_update(running_mean, running_var, (int)c, (float)mu, (float)v, N, momentum);
    }
}

__global__ void running_update_kernel(float *running_mean, float *running_var, const float *mean, const float *var,
                                      int64_t N, int C, float momentum) {
    SPK_GRID_LOOP(c, (size_t)C) running_update(running_mean, running_var, (int)c, mean[c], var[c], N, momentum);
}

__global__ void relu_forward_kernel(float *z, spk_bf16 *zh, int ldz, const float *x, int ldx, const float *mean,
                                    const float *var, const float *weight, const float *bias, size_t n, int C,
                                    float eps) {
    SPK_GRID_LOOP(i, n) {
        const size_t r = i / C;
        const int c = (int)(i - r * C);
        const float v = dbn_pre(x[r * ldx + c], mean[c], dbn_scale(var, weight, c, eps), bias ? bias[c] : 0.0f);
        const float y = v > 0.0f ? v : 0.0f;
        if (z) z[r * ldz + c] = y;
        if (zh) zh[r * ldz + c] = spk_bf16_round(y);
    }
}

__global__ void input_grad_kernel(float *dx, int lddx, int accumulate, const float *g, int ldg, const float *x, int ldx,
                                  const float *mean, const float *var, const float *s1, const float *s2, float fN,
                                  size_t n, int C, float eps) {
    SPK_GRID_LOOP(i, n) {
        const size_t r = i / C;
        const int c = (int)(i - r * C);
        const float rs = dbn_rstd(var, c, eps);
        const float d = spk_bn_dx(g[r * ldg + c], (x[r * ldx + c] - mean[c]) * rs, 1.0f, rs, s1[c] / fN, s2[c] / fN);
        float *o = dx + r * lddx + c;
        *o = accumulate ? *o + d : d;
    }
}

}  // namespace

extern "C" void dense_bn_stats_partial_cuda(float *part, const float *x, int ldx, const float *shift, int B, int HW,
                                            int C, int group) {
    SPK_ASSERT(ldx >= C);
    const group_parts g = group_partials(stats_term{x, shift, ldx}, B, HW, C, group);
    SPK_LAUNCH(stats_total_kernel, spk_grid((size_t)g.groups * C), part, g.part, g.groups, g.P, C);
}

extern "C" void dense_bn_stats_finish_cuda(float *mean, float *var, float *running_mean, float *running_var,
                                           const float *s1, const float *s2, const float *shift, int64_t N, int C,
                                           float momentum) {
    SPK_ASSERT(N > 1 && C > 0);  // N > 1: PyTorch's "more than 1 value per channel"
    SPK_LAUNCH(stats_finish_kernel, spk_grid((size_t)C), mean, var, running_mean, running_var, s1, s2, shift, N, C,
               momentum);
}

extern "C" void dense_bn_running_update_cuda(float *running_mean, float *running_var, const float *mean,
                                             const float *var, int64_t N, int C, float momentum) {
    SPK_ASSERT(N > 1 && C > 0);
    SPK_LAUNCH(running_update_kernel, spk_grid((size_t)C), running_mean, running_var, mean, var, N, C, momentum);
}

extern "C" void dense_bn_relu_forward_cuda(float *z, spk_bf16 *zh, int ldz, const float *x, int ldx,
                                           const float *mean, const float *var, const float *weight,
                                           const float *bias, int N, int C, float eps) {
    SPK_ASSERT(N > 0 && C > 0 && ldx >= C && ldz >= C && (z || zh));
    const size_t n = (size_t)N * C;
    SPK_LAUNCH(relu_forward_kernel, spk_grid(n), z, zh, ldz, x, ldx, mean, var, weight, bias, n, C, eps);
}

extern "C" void dense_bn_relu_backward_cuda(float *g, int ldg, int accumulate, float *part, const float *dz, int ldz,
                                            const float *x, int ldx, const float *mean, const float *var,
                                            const float *weight, const float *bias, int B, int HW, int C, float eps,
                                            int group) {
    SPK_ASSERT(ldx >= C && ldz >= C && ldg >= C);
    const grad_term term = {g, dz, x, mean, var, weight, bias, ldg, ldz, ldx, accumulate, eps};
    const group_parts p = group_partials(term, B, HW, C, group);
    SPK_LAUNCH(grad_total_kernel, spk_grid((size_t)p.groups * C), part, p.part, weight, p.groups, p.P, C);
}

extern "C" void dense_bn_input_grad_cuda(float *dx, int lddx, int accumulate, const float *g, int ldg, const float *x,
                                         int ldx, const float *mean, const float *var, const float *s1, const float *s2,
                                         int64_t N, int rows, int C, float eps) {
    SPK_ASSERT(N > 0 && rows > 0 && C > 0 && lddx >= C && ldg >= C && ldx >= C);
    const size_t n = (size_t)rows * C;
    SPK_LAUNCH(input_grad_kernel, spk_grid(n), dx, lddx, accumulate, g, ldg, x, ldx, mean, var, s1, s2, (float)N, n, C,
               eps);
}
