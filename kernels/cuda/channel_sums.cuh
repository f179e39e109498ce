// Per-channel sums over the N = B*T positions of (B, C, T) tensors (BatchNorm statistics and
// gradients, convolution bias gradients), and over the rows of channels-last (N, C) ones
// (below), in two deterministic stages, so that narrow layers still fill the GPU (one block
// per channel gave 128 blocks for 132 SMs, each reading 25,600 values two or three times):
//   stage 1: C x S blocks; block (c, s) sums channel c over samples [s B / S, (s + 1) B / S) in
//            a fixed per-thread order and the fixed block tree (launch.cuh), and stores the
//            partial (compensated) sum;
//   stage 2: the caller's finishing kernel adds channel c's S partials in order
//            (spk_channel_total).
// S depends on the shape only (~1024 blocks in all, >= 2048 values each, at most B), so the
// sums are the same on every GPU model.
#pragma once
#include "kernels/cuda/launch.cuh"

// Splits per channel for (B, C, T).
static inline int spk_channel_splits(int B, int C, int T) {
    const size_t N = (size_t)B * T;
    size_t s = (1024 + (size_t)C - 1) / (size_t)C;
    if (s > N / 2048) s = N / 2048;
    if (s > (size_t)B) s = (size_t)B;
    return s < 1 ? 1 : (int)s;
}

static inline dim3 spk_channel_grid(int C, int S) {
    SPK_ASSERT(C > 0 && S > 0 && S <= 65535);
    return dim3((unsigned)C, (unsigned)S);
}

// Stage 1, called by every thread of block (c, s) of a spk_channel_grid launch: sums NV values
// per position, term(offset of (b, c, t), v) giving them, into part[(c * S + s) * NV + k].
template <int NV, typename Term>
__device__ __forceinline__ void spk_channel_partial(spk_fsum *part, int B, int C, int T, const Term &term,
                                                    spk_fsum *sh) {
    const int c = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    const size_t b0 = (size_t)B * s / S, b1 = (size_t)B * (s + 1) / S;
    spk_fsum acc[NV];
    for (int k = 0; k < NV; k++) acc[k] = spk_fsum_zero();
    for (size_t i = b0 * T + threadIdx.x; i < b1 * T; i += SPK_CUDA_THREADS) {
        const size_t b = i / T, t = i - b * T;
        float v[NV];
        term((b * C + c) * T + t, v);
        for (int k = 0; k < NV; k++) spk_fsum_add(&acc[k], v[k]);
    }
    for (int k = 0; k < NV; k++) {
        const spk_fsum tot = spk_block_sum(acc[k], sh);
        if (threadIdx.x == 0) part[((size_t)c * S + s) * NV + k] = tot;
    }
}

// The term of plain sums: the tensor's values (the second form for spk_rows_channel_partial).
struct spk_value_term {
    const float *x;
    __device__ void operator()(size_t o, float *v) const { v[0] = x[o]; }
    __device__ void operator()(size_t o, int, float *v) const { v[0] = x[o]; }
};

// Stage 2: channel c's k-th sum from its S partials, added in order.
__device__ __forceinline__ spk_fsum spk_channel_total(const spk_fsum *part, int c, int S, int NV, int k) {
    spk_fsum t = spk_fsum_zero();
    for (int s = 0; s < S; s++) t = t + part[((size_t)c * S + s) * NV + k];
    return t;
}

// Stage 2 by a block, one per channel (spk_rows_grid(C)), for many partials (2-D maps: S up to
// ~1024): thread i adds s = i, i + 256, ... in order, then the block's fixed tree; every thread
// gets the total. One thread walking 1024 partials took 127 us a call on an H200 (a fifth of
// ResNet34's bf16 step went to two such finishing kernels).
__device__ __forceinline__ spk_fsum spk_channel_total_block(const spk_fsum *part, int c, int S, int NV, int k,
                                                            spk_fsum *sh) {
    spk_fsum t = spk_fsum_zero();
    for (int s = threadIdx.x; s < S; s += SPK_CUDA_THREADS) t = t + part[((size_t)c * S + s) * NV + k];
    return spk_block_sum(t, sh);
}

// Stage 2 of plain sums (NV = 1): out[c] += channel c's total.
static __global__ void spk_channel_totals_add_kernel(float *out, const spk_fsum *part, int C, int S) {
    SPK_GRID_LOOP(c, (size_t)C) out[c] += spk_fsum_value(spk_channel_total(part, (int)c, S, 1, 0));
}
static inline void spk_channel_totals_add(float *out, const spk_fsum *part, int C, int S) {
    SPK_LAUNCH(spk_channel_totals_add_kernel, spk_grid((size_t)C), out, part, C, S);
}

// ---- channels-last rows ---------------------------------------------------------------------
// The same two stages over the N rows of a channels-last (N, C) tensor (2-D maps, N = B*H*W;
// kernels/cuda/batchnorm2d.cu, conv2d_common.cuh). Stage 1 runs ceil(C / 32) x S blocks: block
// (j, s) sums channels [32 j, 32 j + 32) over rows [s N / S, (s + 1) N / S), its threads as 32
// channel lanes (a warp reads 32 consecutive floats of a row) times 8 row lanes; row lane l
// takes rows l, l + 8, ... of the range in order, and the 8 row lanes are added by the fixed
// tree of spk_block_fold. Partials land where spk_channel_total reads them. S depends on N and
// C alone (~1024 blocks, at least 256 rows each).
#define SPK_ROWS_CHANNELS 32                                      // channels of a block
#define SPK_ROWS_LANES    (SPK_CUDA_THREADS / SPK_ROWS_CHANNELS)  // rows it reads at a time

static inline int spk_rows_channel_splits(size_t N, int C) {
    const size_t blocks = ((size_t)C + SPK_ROWS_CHANNELS - 1) / SPK_ROWS_CHANNELS;
    size_t s = (1024 + blocks - 1) / blocks;
    if (s > N / 256) s = N / 256;
    if (s > 65535) s = 65535;
    return s < 1 ? 1 : (int)s;
}

static inline dim3 spk_rows_channel_grid(int C, int S) {
    SPK_ASSERT(C > 0 && S > 0 && S <= 65535);
    return dim3((unsigned)((C + SPK_ROWS_CHANNELS - 1) / SPK_ROWS_CHANNELS), (unsigned)S);
}

// The accumulators of stage 1: compensated fp32 of float terms (spk_fsum), or double of double
// terms (the world-size-invariant mode's per-sample sums, in double as on the CPU).
template <typename Acc>
struct spk_acc_of {
    typedef float term;
};
template <>
struct spk_acc_of<double> {
    typedef double term;
};
__device__ __forceinline__ void spk_acc_zero(spk_fsum *a) { *a = spk_fsum_zero(); }
__device__ __forceinline__ void spk_acc_zero(double *a) { *a = 0.0; }
__device__ __forceinline__ void spk_acc_add(spk_fsum *a, float v) { spk_fsum_add(a, v); }
__device__ __forceinline__ void spk_acc_add(double *a, double v) { *a += v; }

// Stage 1, called by every thread of a spk_rows_channel_grid launch: NV sums per element,
// term(offset of (row, c), c, v) giving them, into part[(c * S + s) * NV + k]. With N = B * HW
// and S = B, split s is sample s's HW rows exactly: the per-sample sums.
template <int NV, typename Term, typename Acc>
__device__ __forceinline__ void spk_rows_channel_partial(Acc *part, size_t N, int C, const Term &term, Acc *sh) {
    const int lane = threadIdx.x % SPK_ROWS_CHANNELS, row_lane = threadIdx.x / SPK_ROWS_CHANNELS;
    const int c = blockIdx.x * SPK_ROWS_CHANNELS + lane, s = blockIdx.y, S = gridDim.y;
    Acc acc[NV];
    for (int k = 0; k < NV; k++) spk_acc_zero(&acc[k]);
    if (c < C)
        for (size_t i = N * s / S + row_lane; i < N * (s + 1) / S; i += SPK_ROWS_LANES) {
            typename spk_acc_of<Acc>::term v[NV];
            term(i * C + c, c, v);
            for (int k = 0; k < NV; k++) spk_acc_add(&acc[k], v[k]);
        }
    for (int k = 0; k < NV; k++) {  // every thread reaches every barrier
        spk_block_fold(acc[k], sh, SPK_ROWS_CHANNELS);
        if (row_lane == 0 && c < C) part[((size_t)c * S + s) * NV + k] = sh[lane];
        __syncthreads();
    }
}

// Device scratch for the partials of NV sums per channel, followed by `extra` floats (the
// library scratch: one call per op, whose use ends in stream order before the next op's).
static inline spk_fsum *spk_channel_scratch(int C, int S, int NV, size_t extra, float **extra_out) {
    const size_t part = sizeof(spk_fsum) * (size_t)C * S * NV;
    char *p = (char *)spk_cuda_scratch(part + sizeof(float) * extra);
    if (extra_out) *extra_out = (float *)(p + part);
    return (spk_fsum *)p;
}
