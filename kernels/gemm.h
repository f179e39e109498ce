// Row-major single-precision GEMM used by the layer kernels:
//   C = alpha * op(A) * op(B) + beta * C,  op(X) = X or X^T ('N' / 'T').
// op(A) is (M, K), op(B) is (K, N), C is (M, N); lda/ldb/ldc are row strides.
// beta == 0 means C is not read (it may hold NaN). Must be called from a serial region:
// the backend threads itself.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/exact_sum.h"

typedef enum {
    SPK_GEMM_BLAS = 0,  // cblas_sgemm (OpenBLAS)
    SPK_GEMM_DNNL = 1,  // dnnl_sgemm (oneDNN), available when built with SPK_USE_DNNL
} spk_gemm_backend;

void spk_sgemm(char transa, char transb, int M, int N, int K, float alpha, const float *A,
               int lda,                         // op(A): (M, K)
               const float *B, int ldb,         // op(B): (K, N)
               float beta, float *C, int ldc);  // (M, N)

// The type of spk_sgemm and its variants below, for kernels that run either.
typedef void spk_gemm_fn(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);

// Same contract, but for use INSIDE an OpenMP parallel region: each call runs on the calling
// thread only, so threads can run independent GEMMs concurrently. (oneDNN's sgemm and the
// OpenMP build of OpenBLAS run sequentially when called from a parallel region; the pthread
// build of OpenBLAS is thread-safe but would share its own thread pool.)
void spk_sgemm_serial(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);

// `batch` independent GEMMs of one shape: C_i = alpha op(A_i) op(B_i) + beta C_i, where
// X_i = X + i * strideX floats (a stride of 0 shares one matrix, e.g. a weight, across the
// batch). Either each C_i is distinct, or strideC = 0 sums the batch into one matrix:
// C = alpha sum_i op(A_i) op(B_i) + beta C (a weight gradient summed over samples). The CPU
// runs them one after the other (one serial GEMM per thread over the batch measured the same:
// 29 vs 31 ms for ECAPA's attention GEMMs at C=512, B=32); on the GPU it is one cuBLAS
// strided-batched call instead of `batch` launches (plus a sum over the batch for strideC = 0).
void spk_sgemm_batched(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                       int64_t strideA, const float *B, int ldb, int64_t strideB, float beta, float *C, int ldc,
                       int64_t strideC, int batch);

// ---- the world-size-invariant mode (kernels/backend.h's invariant tables) -----------------
// Results that depend only on the operands and the shapes: never on the thread count, on the
// calling context or, for rows of C that are samples, on how many rows there are. oneDNN and
// OpenBLAS plan a GEMM for the thread count they are allowed (and may split K), and pick
// other kernels for other M (a row of M = 1 differs from the same row in M = 16), so:
//   spk_sgemm_fixed          one GEMM, planned for and run on the calling thread
//   spk_sgemm_rows           spk_sgemm's contract, each row of C by its own fixed GEMM (M = 1),
//                            rows in parallel: a sample's row does not depend on the batch
//   spk_sgemm_batched_fixed  spk_sgemm_batched's contract, each item one fixed GEMM, items in
//                            parallel
//   spk_sgemm_batched_exact  C += sum_i op(A_i) op(B_i), with the products of each group of
//                            `group` consecutive items (batch is a multiple) summed by fixed GEMMs
//                            on blocks of C set by the shapes (into tmp, the layout of C: (M, ldc)
//                            floats of scratch) and added to the exact sums C (kernels/exact_sum.h)
//                            as one term: the sum does not depend on which groups a call gets
spk_gemm_fn spk_sgemm_fixed;
spk_gemm_fn spk_sgemm_rows;
void spk_sgemm_batched_fixed(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                             int64_t strideA, const float *B, int ldb, int64_t strideB, float beta, float *C, int ldc,
                             int64_t strideC, int batch);
void spk_sgemm_batched_exact(char transa, char transb, int M, int N, int K, const float *A, int lda, int64_t strideA,
                             const float *B, int ldb, int64_t strideB, float *tmp, xsum_t C, int ldc, int batch,
                             int group);

// Selects the backend for later spk_sgemm calls (process-wide). Returns 0 on success,
// -1 when that backend was not compiled in. The default is DNNL when compiled in, else BLAS.
int spk_gemm_set_backend(spk_gemm_backend backend);
spk_gemm_backend spk_gemm_get_backend(void);
