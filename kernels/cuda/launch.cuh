// How the kernels of kernels/cuda/*.cu are launched and how their blocks reduce: blocks of
// SPK_CUDA_THREADS threads on the library stream, grid-stride loops or one block per row, and
// fixed-order block reductions (bitwise reproducible run to run).
#pragma once
#include <math.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/elementwise_math.h"

// ---- launch shapes --------------------------------------------------------------------------
// Every kernel uses blocks of SPK_CUDA_THREADS threads; the block reductions below rely on it.
#define SPK_CUDA_THREADS    256
#define SPK_CUDA_MAX_BLOCKS 4096  // grid-stride loops cover the rest

// Blocks for a grid-stride loop over n elements (at least 1).
static inline unsigned spk_grid(size_t n) {
    size_t b = (n + SPK_CUDA_THREADS - 1) / SPK_CUDA_THREADS;
    if (b < 1) b = 1;
    if (b > SPK_CUDA_MAX_BLOCKS) b = SPK_CUDA_MAX_BLOCKS;
    return (unsigned)b;
}
// Blocks for one-block-per-row kernels.
static inline unsigned spk_rows_grid(size_t rows) {
    SPK_ASSERT(rows > 0 && rows <= 0x7fffffffu);
    return (unsigned)rows;
}

// Queues `kernel` on `blocks` blocks on the library stream and checks the launch.
#define SPK_LAUNCH(kernel, blocks, ...)                                                    \
    do {                                                                                   \
        kernel<<<(blocks), SPK_CUDA_THREADS, 0, spk_cuda_stream_checked()>>>(__VA_ARGS__); \
        SPK_CUDA_LAUNCHED();                                                               \
    } while (0)

// Grid-stride loop over [0, n).
#define SPK_GRID_LOOP(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)blockDim.x * gridDim.x)

// Loop of one thread over its positions of a row of n, when a block works on the row.
#define SPK_ROW_LOOP(j, n) for (int j = threadIdx.x; j < (n); j += SPK_CUDA_THREADS)

// ---- compensated float sums ------------------------------------------------------------------
// Reductions accumulate in fp32 with the rounding error of every addition carried along
// (Neumaier's compensated sum): as accurate as a double accumulator for the sums here (the
// error stays near one rounding of the result instead of growing with the count), at fp32
// speed on GPUs whose fp64 rate is 1/64 of fp32 (L40S, A10). A fixed order of additions gives
// the same bits every run. __fadd_rn/__fsub_rn are never contracted or reassociated.
struct spk_fsum {
    float s, c;  // running sum, accumulated rounding errors
};

__device__ __forceinline__ spk_fsum spk_fsum_zero() { return spk_fsum{0.0f, 0.0f}; }

__device__ __forceinline__ void spk_fsum_add(spk_fsum *a, float x) {
    const float t = __fadd_rn(a->s, x);
    // the part of the smaller operand that t lost
    const float e = fabsf(a->s) >= fabsf(x) ? __fadd_rn(__fsub_rn(a->s, t), x) : __fadd_rn(__fsub_rn(x, t), a->s);
    a->s = t;
    a->c = __fadd_rn(a->c, e);
}

__device__ __forceinline__ spk_fsum operator+(spk_fsum a, spk_fsum b) {
    spk_fsum_add(&a, b.s);
    a.c = __fadd_rn(a.c, b.c);
    return a;
}

__device__ __forceinline__ float spk_fsum_value(spk_fsum a) { return __fadd_rn(a.s, a.c); }
// The sum in double, for per-channel finishing arithmetic done once (not in a loop).
__device__ __forceinline__ double spk_fsum_double(spk_fsum a) { return (double)a.s + (double)a.c; }

// ---- fixed-order block reductions -----------------------------------------------------------
// All threads of a block of SPK_CUDA_THREADS call these with their partial value; every thread
// gets the block total. The tree (pairs at distance 128, 64, ..., 1) is the same on every run,
// so with each thread's partial built in a fixed order the result is bitwise reproducible.
// `sh` is shared memory of SPK_CUDA_THREADS elements; it may be reused right after the call.

// The tree down to distance `width` (a power of two): sh[t] for t < width is then the sum over
// the threads t, t + width, t + 2 width, ... Reuse sh only after a __syncthreads.
template <typename V>
__device__ __forceinline__ void spk_block_fold(V v, V *sh, int width) {
    const int tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = SPK_CUDA_THREADS / 2; s >= width; s >>= 1) {
        if (tid < s) sh[tid] = sh[tid] + sh[tid + s];
        __syncthreads();
    }
}

template <typename V>
__device__ __forceinline__ V spk_block_sum(V v, V *sh) {
    spk_block_fold(v, sh, 1);
    const V r = sh[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ float spk_block_max(float v, float *sh) {
    const int tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = SPK_CUDA_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = fmaxf(sh[tid], sh[tid + s]);
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

// First index of the maximum: threads pass their own (value, index) with index = -1 when they
// saw no element; larger value wins, equal values go to the smaller index.
__device__ __forceinline__ int spk_block_argmax(float v, int idx, float *shv, int *shi) {
    const int tid = threadIdx.x;
    shv[tid] = v;
    shi[tid] = idx;
    __syncthreads();
    for (int s = SPK_CUDA_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) {
            const float ov = shv[tid + s];
            const int oi = shi[tid + s];
            const int mine = shi[tid];
            const int take = oi >= 0 && (mine < 0 || ov > shv[tid] || (ov == shv[tid] && oi < mine));
            if (take) {
                shv[tid] = ov;
                shi[tid] = oi;
            }
        }
        __syncthreads();
    }
    const int r = shi[0];
    __syncthreads();
    return r;
}

// First index of the maximum of a row of n, by the whole block.
__device__ __forceinline__ int spk_block_row_argmax(const float *z, int n, float *shv, int *shi) {
    float mv = -INFINITY;
    int mi = -1;
    SPK_ROW_LOOP(j, n) {
        if (mi < 0 || z[j] > mv) {
            mv = z[j];
            mi = j;
        }
    }
    return spk_block_argmax(mv, mi, shv, shi);
}

// The softmax of a row of n given its maximum mx, by the whole block: p[j] = exp(z[j] - mx) / s
// with s = sum_j exp(z[j] - mx) (a compensated sum), which every thread gets back. Each thread
// reads and writes only its own positions, so p may alias z.
__device__ __forceinline__ float spk_block_softmax_row(float *p, const float *z, int n, float mx, spk_fsum *sh) {
    spk_fsum acc = spk_fsum_zero();
    SPK_ROW_LOOP(j, n) {
        const float e = spk_expf(z[j] - mx);
        p[j] = e;
        spk_fsum_add(&acc, e);
    }
    const float s = spk_fsum_value(spk_block_sum(acc, sh));
    const float inv = 1.0f / s;
    SPK_ROW_LOOP(j, n) p[j] *= inv;
    return s;
}
