// What the invariant mode's convolutions on CUDA (kernels/cuda/conv1d.cu, conv1d_bf16.cu,
// conv2d.cu, conv2d_bf16.cu) share: in training, every group of samples gets calls of its own,
// on the plan of B = group (cuDNN's and cuBLAS's choices may depend on the batch, not on which
// samples it holds), and each group's weight gradient is one term of the exact sums.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/launch.cuh"

namespace {

// The largest of room(n) over the divisors n of B: a workspace for the calls of any group of B
// samples (a plan's workspace need not grow with its batch).
template <class Room>
size_t most_over_group_sizes(int B, Room room) {
    size_t most = 0;
    for (int n = 1; n <= B; n++) {
        if (B % n) continue;
        const size_t f = room(n);
        most = f > most ? f : most;
    }
    return most;
}

// call(g, dw_g) for every group g < groups: group g's calls, its weight gradient into dw_g
// (dw_tmp zeroed, or nullptr with dw empty), which then goes to dw as one term (nw floats).
template <class Call>
void by_group_terms(int groups, float *dw_tmp, xsum_t dw, size_t nw, Call call) {
    const int with_dw = !xsum_empty(dw);
    SPK_ASSERT(!with_dw || dw_tmp != nullptr);
    for (int g = 0; g < groups; g++) {
        if (with_dw) spk_cuda_memset0(dw_tmp, nw * sizeof(float));
        call(g, with_dw ? dw_tmp : nullptr);
        if (with_dw) xsum_add_cuda(dw, dw_tmp, 1, (int64_t)nw, 1);
    }
}

}  // namespace
