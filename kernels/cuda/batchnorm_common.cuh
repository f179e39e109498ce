// What BatchNorm1d and BatchNorm2d (kernels/cuda/batchnorm.cu, batchnorm2d.cu) share: the
// backward's per-channel finish of its two channel sums (kernels/cuda/channel_sums.cuh).
#pragma once
#include "kernels/cuda/channel_sums.cuh"

namespace {

// One thread per channel, from the S partials of sum dy and sum dy * xhat (NV = 2) over N
// values (dy masked by the ReLU in BatchNorm2d): dbias += sum dy, dweight += sum dy xhat, and
// means (C, 2) = their means, for the input gradient.
__global__ void bn_grad_finish_kernel(float *dweight, float *dbias, float *means, const spk_fsum *sums, int C, int S,
                                      size_t N) {
    SPK_GRID_LOOP(c, (size_t)C) {
        const double sdy = spk_fsum_double(spk_channel_total(sums, (int)c, S, 2, 0));
        const double sdyx = spk_fsum_double(spk_channel_total(sums, (int)c, S, 2, 1));
        if (dbias) dbias[c] += (float)sdy;
        if (dweight) dweight[c] += (float)sdyx;
        means[2 * c] = (float)(sdy / (double)N);
        means[2 * c + 1] = (float)(sdyx / (double)N);
    }
}

}  // namespace
