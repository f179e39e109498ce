// What BatchNorm1d and BatchNorm2d (kernels/cuda/batchnorm.cu, batchnorm2d.cu) share: the
// backward's per-channel finish of its two channel sums (kernels/cuda/channel_sums.cuh), and the
// world-size-invariant mode's per-channel steps on exact sums (kernels/exact_sum_math.h, the
// CPU's math).
#pragma once
#include "kernels/cuda/channel_sums.cuh"
#include "kernels/exact_sum.h"
#include "kernels/exact_sum_math.h"

namespace {

// One block per channel (spk_rows_grid(C)), from the S partials of sum dy and sum dy * xhat
// (NV = 2) over N values (dy masked by the ReLU in BatchNorm2d): dbias += sum dy, dweight +=
// sum dy xhat, and means (C, 2) = their means, for the input gradient.
__global__ void bn_grad_finish_kernel(float *dweight, float *dbias, float *means, const spk_fsum *sums, int S,
                                      size_t N) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int c = blockIdx.x;
    const double sdy = spk_fsum_double(spk_channel_total_block(sums, c, S, 2, 0, sh));
    const double sdyx = spk_fsum_double(spk_channel_total_block(sums, c, S, 2, 1, sh));
    if (threadIdx.x != 0) return;
    if (dbias) dbias[c] += (float)sdy;
    if (dweight) dweight[c] += (float)sdyx;
    means[2 * c] = (float)(sdy / (double)N);
    means[2 * c + 1] = (float)(sdyx / (double)N);
}

// ---- the world-size-invariant mode ------------------------------------------------------------

// s[i] += v, one term.
__device__ __forceinline__ void bn_xsum_add(xsum_t s, int64_t i, double v) {
    int J = s.bin[i];
    xsum_deposit(&J, &s.hi[i], &s.lo[i], v);
    s.bin[i] = (int8_t)J;
}

__device__ __forceinline__ double bn_xsum_value(xsum_t s, int64_t i) { return xsum_value(s.bin[i], s.hi[i], s.lo[i]); }

// Sample b's sums t1, t2 of channel c, collected over its group into g1, g2 (samples in order);
// at the group's last sample, when `deposit`, g1 and g2 go as one term each to sums[c] and
// sums[C + c] and, unless empty, to d1[c] and d2[c] (the backward's dbias and dweight: the same
// terms).
__device__ __forceinline__ void bn_group_add(xsum_t sums, xsum_t d1, xsum_t d2, int c, int C, int b, int group,
                                             double t1, double t2, double *g1, double *g2, bool deposit) {
    *g1 = b % group ? *g1 + t1 : t1;
    *g2 = b % group ? *g2 + t2 : t2;
    if (!deposit || b % group != group - 1) return;
    bn_xsum_add(sums, c, *g1);
    bn_xsum_add(sums, C + c, *g2);
    if (!xsum_empty(d1)) bn_xsum_add(d1, c, *g1);
    if (!xsum_empty(d2)) bn_xsum_add(d2, c, *g2);
}

// Channel c's statistics over N values from the reduced sums of (x - shift) and its square
// (shift: the running mean, or 0): the float mean and rstd, and the biased variance.
struct bn_global_stat_t {
    float mu, rs;
    double var;
};
__device__ __forceinline__ bn_global_stat_t bn_global_stat(xsum_t sums, int c, int C, const float *running_mean,
                                                           int64_t N, float eps) {
    double mu, var;
    spk_bn_stats_of_sums(bn_xsum_value(sums, c), bn_xsum_value(sums, C + c), running_mean ? running_mean[c] : 0.0f,
                         (double)N, &mu, &var);
    return bn_global_stat_t{(float)mu, spk_bn_rstd((float)var, eps), var};
}

// The mean over N values of the reduced sum s[i], in float (the backward's mean dy, mean dy xhat).
__device__ __forceinline__ float bn_xsum_mean(xsum_t s, int64_t i, int64_t N) {
    return (float)(bn_xsum_value(s, i) / (double)N);
}

}  // namespace
