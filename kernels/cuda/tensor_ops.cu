// Layout helpers over (B, C, T) tensors (kernels/tensor_ops.h): grid-stride loops, except
// time_repeat_backward (one block per (b, c) row, fixed-order sum) and batch_transpose
// (grid-stride over 32x32 tiles staged in shared memory).
#include "kernels/cuda/launch.cuh"

namespace {

// dst[b * dst_channels * T + j] (=|+=) src[b * src_channels * T + j] for j < C*T
template <int kAdd>
__global__ void slice_kernel(float *dst, int dst_channels, const float *src, int src_channels, int B, int C, int T) {
    const size_t row = (size_t)C * T;
    SPK_GRID_LOOP(i, (size_t)B * row) {
        const size_t b = i / row, j = i - b * row;
        const float v = src[b * src_channels * T + j];
        float *d = dst + b * dst_channels * T + j;
        if (kAdd)
            *d += v;
        else
            *d = v;
    }
}

// y[(b * y_channels + c) * T + t] = s[b * ld + c] (ld = 0: the same s for every b)
__global__ void time_repeat_fwd_kernel(float *y, int y_channels, const float *s, int ld, int B, int C, int T) {
    SPK_GRID_LOOP(i, (size_t)B * C * T) {
        const size_t bc = i / T, t = i - bc * T;
        const size_t b = bc / C, c = bc - b * C;
        y[(b * y_channels + c) * T + t] = s[b * ld + c];
    }
}

// ds[b * ld + c] += sum_t dy[(b * dy_channels + c) * T + t]; one block per (b, c)
__global__ void time_repeat_bwd_kernel(float *ds, int ld, const float *dy, int dy_channels, int C, int T) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    const size_t b = blockIdx.x / C, c = blockIdx.x - b * C;
    const float *r = dy + (b * dy_channels + c) * T;
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(t, T) spk_fsum_add(&acc, r[t]);
    const float s = spk_fsum_value(spk_block_sum(acc, sh));
    if (threadIdx.x == 0) ds[b * ld + c] += s;
}

// y[(b * C + c) * R + r] = x[(b * R + r) * C + c]. A block loads a 32x32 tile of x with
// coalesced row reads, then writes it out along columns, so the writes to y are coalesced too.
constexpr int kTile = 32;
constexpr int kTileRows = SPK_CUDA_THREADS / kTile;  // tile rows one pass of the block covers
static_assert(SPK_CUDA_THREADS % kTile == 0, "block must cover whole tile rows");
__global__ void batch_transpose_kernel(float *y, const float *x, int R, int C, size_t tiles) {
    __shared__ float sh[kTile][kTile + 1];  // +1: column reads hit 32 different banks
    const int tr = (R + kTile - 1) / kTile, tc = (C + kTile - 1) / kTile;
    const int lx = threadIdx.x % kTile, ly = threadIdx.x / kTile;
    // tiles is the same for every thread, so all of them reach each __syncthreads
    for (size_t k = blockIdx.x; k < tiles; k += gridDim.x) {
        const size_t per = (size_t)tr * tc, b = k / per;
        const int rem = (int)(k - b * per);
        const int r0 = rem / tc * kTile, c0 = rem % tc * kTile;
        const float *xb = x + b * R * C;
        float *yb = y + b * C * R;
        for (int j = ly; j < kTile; j += kTileRows) {
            const int r = r0 + j, c = c0 + lx;
            if (r < R && c < C) sh[j][lx] = xb[(size_t)r * C + c];
        }
        __syncthreads();
        for (int j = ly; j < kTile; j += kTileRows) {
            const int c = c0 + j, r = r0 + lx;
            if (c < C && r < R) yb[(size_t)c * R + r] = sh[lx][j];
        }
        __syncthreads();  // the next tile overwrites sh
    }
}

__global__ void vec_acc_kernel(float *y, const float *a, size_t n) { SPK_GRID_LOOP(i, n) y[i] += a[i]; }

// Row i of the n x E rows by index: ADD = 0 gathers (dst[i] = src[idx[i]]), 1 scatters back
// (dst[idx[i]] += src[i]).
template <int ADD>
__global__ void rows_kernel(float *dst, const float *src, const int *idx, int E, size_t n) {
    SPK_GRID_LOOP(k, n) {
        const size_t i = k / E, e = k - i * E, r = (size_t)idx[i] * E + e;
        if (ADD)
            dst[r] += src[k];
        else
            dst[k] = src[r];
    }
}

}  // namespace

extern "C" void channel_slice_copy_cuda(float *dst, int dst_channels, const float *src, int src_channels, int B, int C,
                                        int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    SPK_ASSERT(B >= 0 && C >= 0 && T >= 0);
    const size_t n = (size_t)B * C * T;
    if (n) SPK_LAUNCH(slice_kernel<0>, spk_grid(n), dst, dst_channels, src, src_channels, B, C, T);
}

extern "C" void channel_slice_add_cuda(float *dst, int dst_channels, const float *src, int src_channels, int B, int C,
                                       int T) {
    SPK_ASSERT(C <= dst_channels && C <= src_channels);
    SPK_ASSERT(B >= 0 && C >= 0 && T >= 0);
    const size_t n = (size_t)B * C * T;
    if (n) SPK_LAUNCH(slice_kernel<1>, spk_grid(n), dst, dst_channels, src, src_channels, B, C, T);
}

extern "C" void time_repeat_forward_cuda(float *y, int y_channels, const float *s, int ld, int B, int C, int T) {
    SPK_ASSERT(C <= y_channels && (ld == 0 || C <= ld));  // ld = 0: one s for every sample
    SPK_ASSERT(B >= 0 && C >= 0 && T >= 0);
    const size_t n = (size_t)B * C * T;
    if (n) SPK_LAUNCH(time_repeat_fwd_kernel, spk_grid(n), y, y_channels, s, ld, B, C, T);
}

extern "C" void time_repeat_backward_cuda(float *ds, int ld, const float *dy, int dy_channels, int B, int C, int T) {
    SPK_ASSERT(C <= dy_channels && C <= ld);
    SPK_ASSERT(B >= 0 && C >= 0 && T >= 0);
    const size_t rows = (size_t)B * C;
    if (rows) SPK_LAUNCH(time_repeat_bwd_kernel, spk_rows_grid(rows), ds, ld, dy, dy_channels, C, T);
}

extern "C" void batch_transpose_cuda(float *y, const float *x, int B, int R, int C) {
    SPK_ASSERT(B >= 0 && R >= 0 && C >= 0);
    const size_t tiles = (size_t)B * ((R + kTile - 1) / kTile) * (size_t)((C + kTile - 1) / kTile);
    if (tiles == 0) return;
    const unsigned blocks = tiles < SPK_CUDA_MAX_BLOCKS ? (unsigned)tiles : SPK_CUDA_MAX_BLOCKS;
    SPK_LAUNCH(batch_transpose_kernel, blocks, y, x, R, C, tiles);
}

extern "C" void rows_gather_cuda(float *dst, const float *src, const int *idx, int n, int E) {
    const size_t k = (size_t)n * E;
    if (k) SPK_LAUNCH(rows_kernel<0>, spk_grid(k), dst, src, idx, E, k);
}

extern "C" void rows_scatter_add_cuda(float *dst, const float *src, const int *idx, int n, int E) {
    const size_t k = (size_t)n * E;
    if (k) SPK_LAUNCH(rows_kernel<1>, spk_grid(k), dst, src, idx, E, k);
}

extern "C" void vec_acc_cuda(float *y, const float *a, size_t n) {
    if (n) SPK_LAUNCH(vec_acc_kernel, spk_grid(n), y, a, n);
}
extern "C" void vec_zero_cuda(float *y, size_t n) { spk_cuda_memset0(y, n * sizeof(float)); }
extern "C" void vec_copy_cuda(float *y, const float *a, size_t n) {
    if (n == 0) return;
    cudaCheck(cudaMemcpyAsync(y, a, n * sizeof(float), cudaMemcpyDeviceToDevice, spk_cuda_stream_checked()));
}
