// The CUDA library context (kernels/cuda/context.cu): the device, one stream, the cuDNN and
// cuBLAS handles bound to it, device memory helpers, for kernels/cuda alone: what the layers
// above start, tune and stop it with is declared in kernels/device.h, and the ops are reached
// through the backend table (kernels/backend.h, spk_backend_cuda()). Built with SPKDDP_CUDA
// only (SPKDDP_HAVE_CUDA is defined then).
//
// Call spk_cuda_init() once before anything else and use the library from one host thread
// (the stream, the handles and the convolution plan cache are process-wide and unlocked).
// Everything queues on spk_cuda_stream(); upload, download and sync wait for it.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// What the layers above call (spk_cuda_init, spk_cuda_shutdown, spk_cuda_set_tf32, ...).
#include "kernels/device.h"

struct CUstream_st;  // cudaStream_t is `struct CUstream_st *`

// The stream every CUDA op runs on.
struct CUstream_st *spk_cuda_stream(void);

void *spk_cuda_malloc(size_t bytes);                               // cudaMalloc; NULL for 0
void spk_cuda_free(void *p);                                       // NULL is fine
void spk_cuda_memset0(void *p, size_t bytes);                      // on the stream
void spk_cuda_upload(void *dst, const void *src, size_t bytes);    // host -> device, blocking
void spk_cuda_download(void *dst, const void *src, size_t bytes);  // device -> host, blocking
void spk_cuda_sync(void);                                          // waits for the stream
// Convolution plans made and algorithm choices made so far (for tests of the plan cache).
void spk_cuda_conv_plan_counts(long long *made, long long *selections);
// The passes of the convolution plans held now in bf16 (else float): how many, and how many run
// in CUDNN_TENSOR_OP_MATH.
void spk_cuda_conv_plan_census(int bf16, int *passes, int *tensor_op);
// Drops every cached convolution plan (spk_cuda_shutdown does; tests start afresh with it).
void spk_conv1d_cuda_release_plans(void);

#ifdef __cplusplus
}

// ---- for kernels/cuda/*.cu ------------------------------------------------------------------
// Each ends the job with a sentence when spk_cuda_init() has not been called.
#include <cublas_v2.h>
#include <cudnn.h>
cudaStream_t spk_cuda_stream_checked(void);
cudnnHandle_t spk_cudnn_handle(void);
cublasHandle_t spk_cublas_handle(void);
// Library-owned device scratch of at least `bytes`, valid until the next call (same stream, so
// reuse is ordered). Grows as needed.
void *spk_cuda_scratch(size_t bytes);
// The convolution plans (kernels/cuda/conv_plans.cu) are made anew when the TF32 permission
// changes.
void spk_conv1d_cuda_set_tf32(int allow);
// For kernels/cuda/context_plans.cu, which starts and stops the plans with the context: whether
// spk_cuda_init succeeded; the handles, workspace, scratch and stream released (after the
// stream is idle and the plans are gone); cuBLAS's half of spk_cuda_set_tf32.
int spk_cuda_context_ready(void);
void spk_cuda_context_release(void);
void spk_cublas_set_tf32(int allow);
#endif
