// Row-major single-precision GEMM used by the layer kernels:
//   C = alpha * op(A) * op(B) + beta * C,  op(X) = X or X^T ('N' / 'T').
// op(A) is (M, K), op(B) is (K, N), C is (M, N); lda/ldb/ldc are row strides.
// beta == 0 means C is not read (it may hold NaN). Must be called from a serial region:
// the backend threads itself.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SPK_GEMM_BLAS = 0,  // cblas_sgemm (OpenBLAS)
    SPK_GEMM_DNNL = 1,  // dnnl_sgemm (oneDNN), available when built with SPK_USE_DNNL
} spk_gemm_backend;

void spk_sgemm(char transa, char transb, int M, int N, int K, float alpha, const float* A,
               int lda,                         // op(A): (M, K)
               const float* B, int ldb,         // op(B): (K, N)
               float beta, float* C, int ldc);  // (M, N)

// Same contract, but for use INSIDE an OpenMP parallel region: each call runs on the calling
// thread only, so threads can run independent GEMMs concurrently. (oneDNN's sgemm and the
// OpenMP build of OpenBLAS run sequentially when called from a parallel region; the pthread
// build of OpenBLAS is thread-safe but would share its own thread pool.)
void spk_sgemm_serial(char transa, char transb, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc);

// `batch` independent GEMMs of one shape: C_i = alpha op(A_i) op(B_i) + beta C_i, where
// X_i = X + i * strideX floats (a stride of 0 shares one matrix, e.g. a weight, across the
// batch). Either each C_i is distinct, or strideC = 0 sums the batch into one matrix:
// C = alpha sum_i op(A_i) op(B_i) + beta C (a weight gradient summed over samples). The CPU
// runs them one after the other (one serial GEMM per thread over the batch measured the same:
// 29 vs 31 ms for ECAPA's attention GEMMs at C=512, B=32); on the GPU it is one cuBLAS
// strided-batched call instead of `batch` launches (plus a sum over the batch for strideC = 0).
void spk_sgemm_batched(char transa, char transb, int M, int N, int K, float alpha,
                       const float* A, int lda, int64_t strideA, const float* B, int ldb,
                       int64_t strideB, float beta, float* C, int ldc, int64_t strideC,
                       int batch);

// Selects the backend for later spk_sgemm calls (process-wide). Returns 0 on success,
// -1 when that backend was not compiled in. The default is DNNL when compiled in, else BLAS.
int spk_gemm_set_backend(spk_gemm_backend backend);
spk_gemm_backend spk_gemm_get_backend(void);
