// Row L2 normalisation (kernels/rows_norm.h). A row is reduced by a segment of W threads, W the
// power of two from 32 to SPK_CUDA_THREADS that covers E (or SPK_CUDA_THREADS for longer rows),
// so short rows (the bottleneck's, the last layer's 256) share a block and long ones take a
// block each. The segment's tree is fixed and W depends on E alone: a row's bits depend neither
// on B nor on the run.
#include "kernels/cuda/launch.cuh"

namespace {

int seg_width(int E) {
    int w = 32;
    while (w < E && w < SPK_CUDA_THREADS) w <<= 1;
    return w;
}

unsigned seg_blocks(int B, int W) { return spk_rows_grid(((size_t)B * W + SPK_CUDA_THREADS - 1) / SPK_CUDA_THREADS); }

// The sum of v over the W threads of this thread's segment, by the pairs at distance W/2, ...,
// 1 (spk_block_fold's tree within the segment); every thread of the segment gets it. All the
// block's threads call it.
__device__ __forceinline__ spk_fsum seg_sum(spk_fsum v, spk_fsum *sh, int W) {
    const int tid = threadIdx.x, lane = tid & (W - 1);
    sh[tid] = v;
    __syncthreads();
    for (int s = W / 2; s > 0; s >>= 1) {
        if (lane < s) sh[tid] = sh[tid] + sh[tid + s];
        __syncthreads();
    }
    const spk_fsum r = sh[tid - lane];
    __syncthreads();
    return r;
}

__global__ void rows_norm_fwd_kernel(float *z, float *norm, const float *x, int B, int E, int W, float eps) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int lane = threadIdx.x & (W - 1);
    const size_t i = (size_t)blockIdx.x * (SPK_CUDA_THREADS / W) + threadIdx.x / W;
    const bool live = i < (size_t)B;  // the last block's spare segments still take the barriers
    spk_fsum acc = spk_fsum_zero();
    if (live)
        for (int j = lane; j < E; j += W) {
            const float v = x[i * E + j];
            spk_fsum_add(&acc, v * v);
        }
    const float n = (float)sqrt(spk_fsum_double(seg_sum(acc, sh, W)));
    if (!live) return;
    if (lane == 0) norm[i] = n;
    const float d = n < eps ? eps : n;  // a NaN norm stays NaN, as clamp_min
    for (int j = lane; j < E; j += W) z[i * E + j] = x[i * E + j] / d;
}

__global__ void rows_norm_bwd_kernel(float *dx, const float *dz, const float *z, const float *norm, int B, int E, int W,
                                     float eps) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const int lane = threadIdx.x & (W - 1);
    const size_t i = (size_t)blockIdx.x * (SPK_CUDA_THREADS / W) + threadIdx.x / W;
    const bool live = i < (size_t)B;
    const float n = live ? norm[i] : 0.0f;
    // every thread of a block takes the barriers, so a row under eps reduces too (for nothing)
    spk_fsum acc = spk_fsum_zero();
    if (live)
        for (int j = lane; j < E; j += W) spk_fsum_add(&acc, z[i * E + j] * dz[i * E + j]);
    const float d = (float)spk_fsum_double(seg_sum(acc, sh, W));
    if (!live) return;
    if (n < eps) {  // the denominator is the constant eps
        for (int j = lane; j < E; j += W) dx[i * E + j] += dz[i * E + j] / eps;
    } else {
        for (int j = lane; j < E; j += W) dx[i * E + j] += (dz[i * E + j] - z[i * E + j] * d) / n;
    }
}

}  // namespace

extern "C" void rows_normalize_forward_cuda(float *z, float *norm, const float *x, int B, int E, float eps) {
    SPK_ASSERT(B > 0 && E > 0 && eps > 0.0f);
    const int W = seg_width(E);
    SPK_LAUNCH(rows_norm_fwd_kernel, seg_blocks(B, W), z, norm, x, B, E, W, eps);
}

extern "C" void rows_normalize_backward_cuda(float *dx, const float *dz, const float *z, const float *norm, int B,
                                             int E, float eps) {
    SPK_ASSERT(B > 0 && E > 0 && eps > 0.0f);
    const int W = seg_width(E);
    SPK_LAUNCH(rows_norm_bwd_kernel, seg_blocks(B, W), dx, dz, z, norm, B, E, W, eps);
}
