// Internal to kernels/cuda/*.cu: error checks, the library context (stream and handles stay
// opaque to C callers), launch shapes and the fixed-order block reductions.
//
// cudaCheck / cudnnCheck / cublasCheck wrap every runtime/library call: on failure they print
//   spkddp: CUDA error at kernels/cuda/conv1d.cu:123: cudaMalloc(&p, bytes) failed: out of
//   memory (cudaErrorMemoryAllocation)
// and abort. SPK_CUDA_LAUNCHED() checks the launch just made (bad configuration, missing
// kernel image for this GPU); errors inside a kernel surface at the next synchronising call.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#if CUDNN_MAJOR < 9
#error "spkddp needs cuDNN 9 or newer (cudnnGetLastErrorString): set CUDNN_ROOT, or configure with -DSPKDDP_CUDA=OFF"
#endif
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/kernels_cuda.h"
#include "kernels/base/spk_assert.h"

static inline void spk_cuda_fail_(const char* lib, const char* call, const char* file, int line,
                                  const char* msg, const char* name) {
    fprintf(stderr, "spkddp: %s error at %s:%d: %s failed: %s (%s)\n", lib, file, line, call, msg,
            name);
    fflush(stderr);
    abort();
}

static inline void spk_cuda_check_(cudaError_t e, const char* call, const char* file, int line) {
    if (e != cudaSuccess)
        spk_cuda_fail_("CUDA", call, file, line, cudaGetErrorString(e), cudaGetErrorName(e));
}
static inline void spk_cudnn_check_(cudnnStatus_t s, const char* call, const char* file, int line) {
    if (s != CUDNN_STATUS_SUCCESS) {
        char detail[512] = "", name[600];
        cudnnGetLastErrorString(detail, sizeof detail);  // cuDNN 9: what exactly went wrong
        snprintf(name, sizeof name, "cudnnStatus %d%s%s", (int)s, detail[0] ? "; " : "", detail);
        spk_cuda_fail_("cuDNN", call, file, line, cudnnGetErrorString(s), name);
    }
}
static inline void spk_cublas_check_(cublasStatus_t s, const char* call, const char* file,
                                     int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        spk_cuda_fail_("cuBLAS", call, file, line, cublasGetStatusString(s),
                       cublasGetStatusName(s));
}

#define cudaCheck(call) spk_cuda_check_((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call) spk_cudnn_check_((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) spk_cublas_check_((call), #call, __FILE__, __LINE__)
#define SPK_CUDA_LAUNCHED() spk_cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// ---- context (kernels/cuda/context.cu) ------------------------------------------------------
// Each aborts with a sentence when spk_cuda_init() has not been called.
cudaStream_t spk_cuda_stream_checked(void);
cudnnHandle_t spk_cudnn_handle(void);
cublasHandle_t spk_cublas_handle(void);
// Library-owned device scratch of at least `bytes`, valid until the next call (same stream, so
// reuse is ordered). Grows as needed.
void* spk_cuda_scratch(size_t bytes);
// Releases the convolution plan cache (kernels/cuda/conv1d.cu); called by spk_cuda_shutdown.
void spk_conv1d_cuda_release_plans(void);
void spk_conv1d_cuda_set_tf32(int allow);

// ---- launch shapes --------------------------------------------------------------------------
// Every kernel uses blocks of SPK_CUDA_THREADS threads; the block reductions below rely on it.
#define SPK_CUDA_THREADS 256
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

#ifdef __CUDACC__
// Grid-stride loop over [0, n).
#define SPK_GRID_LOOP(i, n)                                                         \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)blockDim.x * gridDim.x)

// ---- fixed-order block reductions -----------------------------------------------------------
// All threads of a block of SPK_CUDA_THREADS call these with their partial value; every thread
// gets the block total. The tree (pairs at distance 128, 64, ..., 1) is the same on every run,
// so with each thread's partial built in a fixed order the result is bitwise reproducible.
// `sh` is shared memory of SPK_CUDA_THREADS elements; it may be reused right after the call.
template <typename V>
__device__ __forceinline__ V spk_block_sum(V v, V* sh) {
    const int tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = SPK_CUDA_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = sh[tid] + sh[tid + s];
        __syncthreads();
    }
    const V r = sh[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ float spk_block_max(float v, float* sh) {
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
__device__ __forceinline__ int spk_block_argmax(float v, int idx, float* shv, int* shi) {
    const int tid = threadIdx.x;
    shv[tid] = v;
    shi[tid] = idx;
    __syncthreads();
    for (int s = SPK_CUDA_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) {
            const float ov = shv[tid + s];
            const int oi = shi[tid + s];
            const int mine = shi[tid];
            const int take =
                oi >= 0 && (mine < 0 || ov > shv[tid] || (ov == shv[tid] && oi < mine));
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
#endif  // __CUDACC__
