// Checks for every CUDA runtime, cuDNN, cuBLAS and NCCL call, in the kernels (kernels/cuda)
// and in the gradient averaging (kernels/cuda/nccl_comm.c). A failure ends the whole job through
// spk_die_at (kernels/base/check.h) with the rank, the call, the library's explanation and
// file:line, e.g.
//   spkddp: error: [rank 1] CUDA call cudaMalloc(&p, bytes) failed: out of memory
//   (cudaErrorMemoryAllocation) (.../kernels/cuda/context.cu:113)
// SPK_CUDA_LAUNCHED() checks the kernel launch just made (bad configuration, no kernel image
// for this GPU); errors inside a kernel surface at the next synchronising call.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#if CUDNN_MAJOR < 9
#error "spkddp needs cuDNN 9 or newer (cudnnGetLastErrorString): set CUDNN_ROOT, or configure with -DSPKDDP_CUDA=OFF"
#endif
#include <stdio.h>

#include "kernels/base/check.h"

static inline void spk_cuda_check_at(cudaError_t e, const char *call, const char *file, int line) {
    if (e != cudaSuccess)
        spk_die_at(file, line, SPK_EXIT_FAILURE, "CUDA call %s failed: %s (%s)", call, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

static inline void spk_cudnn_check_at(cudnnStatus_t s, const char *call, const char *file, int line) {
    if (s != CUDNN_STATUS_SUCCESS) {
        char detail[512] = "";
        cudnnGetLastErrorString(detail, sizeof detail);  // cuDNN 9: what exactly went wrong
        spk_die_at(file, line, SPK_EXIT_FAILURE, "cuDNN call %s failed: %s (cudnnStatus %d%s%s)", call,
                   cudnnGetErrorString(s), (int)s, detail[0] ? "; " : "", detail);
    }
}

static inline void spk_cublas_check_at(cublasStatus_t s, const char *call, const char *file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        spk_die_at(file, line, SPK_EXIT_FAILURE, "cuBLAS call %s failed: %s (%s)", call, cublasGetStatusString(s),
                   cublasGetStatusName(s));
}

#define cudaCheck(call)     spk_cuda_check_at((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call)    spk_cudnn_check_at((call), #call, __FILE__, __LINE__)
#define cublasCheck(call)   spk_cublas_check_at((call), #call, __FILE__, __LINE__)
#define SPK_CUDA_LAUNCHED() spk_cuda_check_at(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// NCCL: for the file that includes <nccl.h> (the kernels do not use NCCL).
#define ncclCheck(call)                                                                        \
    do {                                                                                       \
        ncclResult_t nccl_rc_ = (call);                                                        \
        if (nccl_rc_ != ncclSuccess)                                                           \
            spk_die_at(__FILE__, __LINE__, SPK_EXIT_FAILURE, "NCCL call %s failed: %s", #call, \
                       ncclGetErrorString(nccl_rc_));                                          \
    } while (0)
