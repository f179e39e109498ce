// What the two loss heads (kernels/cuda/xent.cu, aam_softmax.cu) share, as kernels/cpu/rows.h
// does on the CPU: one block per row writes the row's loss and hit, then one block sums them in
// a fixed order (deterministic) into the mean loss and the hit count.
#pragma once
#include "kernels/cuda/launch.cuh"

// Device-side checks stay on in release builds, like SPK_ASSERT (kernels/base/spk_assert.h).
#undef NDEBUG
#include <assert.h>

// Labels live on the device, so they are checked there: a bad label prints the failed condition
// with the kernel's name, and the next synchronising call fails with "device-side assert
// triggered".
__device__ __forceinline__ void spk_check_label(int y, int n) { assert(y >= 0 && y < n); }

// The block reductions' shared memory of a loss row.
struct spk_row_shared_t {
    float f[SPK_CUDA_THREADS];
    int i[SPK_CUDA_THREADS];
    spk_fsum d[SPK_CUDA_THREADS];
};

// loss = mean of the B row losses, correct = number of hits; one block.
static __global__ void spk_row_losses_kernel(float *loss, int *correct, const float *row_loss, const int *row_ok,
                                             int B) {
    __shared__ spk_fsum shd[SPK_CUDA_THREADS];
    __shared__ int shi[SPK_CUDA_THREADS];
    spk_fsum acc = spk_fsum_zero();
    int ok = 0;
    SPK_ROW_LOOP(b, B) {
        spk_fsum_add(&acc, row_loss[b]);
        ok += row_ok[b];
    }
    const double total = spk_fsum_double(spk_block_sum(acc, shd));
    const int hits = spk_block_sum(ok, shi);
    if (threadIdx.x == 0) {
        *loss = (float)(total / B);
        *correct = hits;
    }
}

static inline void spk_row_losses_cuda(float *loss, int *correct, const float *row_loss, const int *row_ok, int B) {
    SPK_LAUNCH(spk_row_losses_kernel, 1, loss, correct, row_loss, row_ok, B);
}
