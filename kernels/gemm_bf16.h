// Row-major mixed-precision GEMM: bf16 operands, float32 accumulation and output.
//   C = op(A) op(B) + beta C,  op(X) = X or X^T ('N' / 'T'), beta 0 or 1.
// op(A) is (M, K), op(B) is (K, N), C is (M, N) float32; lda/ldb/ldc are row strides in
// elements. beta == 0 means C is not read (it may hold NaN).
//
// On CPUs with native bf16 (AVX512-BF16, AMX) the CPU path runs oneDNN's matmul primitive
// (JIT brgemm kernels, ~2x the float32 GEMM rate per core); elsewhere, and when built without
// oneDNN or with spk_gemm_set_backend(SPK_GEMM_BLAS), it widens the operands to float32 (exact)
// and runs the float32 GEMM: the same products, slower than float32 itself. Either way, for a
// given shape and thread count the result has the same bits on every run.
//
// Like spk_sgemm it may be called from a serial region (it threads itself) or from inside an
// OpenMP parallel region, where each call runs on the calling thread alone.
#pragma once
#include <stdint.h>

#include "kernels/bf16.h"
#include "kernels/exact_sum.h"

void spk_gemm_bf16(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,  // op(A): (M, K)
                   const spk_bf16 *B, int ldb,                                                 // op(B): (K, N)
                   float beta, float *C, int ldc);                                             // (M, N)

// `batch` GEMMs of one shape, X_i = X + i * strideX elements (stride 0 shares one matrix, e.g.
// a weight, across the batch); each C_i distinct. One threaded call on the CPU, one cuBLAS
// strided-batched call on the GPU. Call from a serial region.
void spk_gemm_bf16_batched(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, int64_t strideA,
                           const spk_bf16 *B, int ldb, int64_t strideB, float beta, float *C, int ldc, int64_t strideC,
                           int batch);

// The world-size-invariant mode's twins (kernels/backend.h), with kernels/gemm.h's float32
// contracts for them: results that depend only on the operands and the shapes, never on the
// thread count, the calling context or, for rows that are samples, on how many there are.
//   spk_gemm_bf16_fixed          one GEMM planned for and run on the calling thread
//   spk_gemm_bf16_rows           spk_gemm_bf16's contract, each row of C by its own fixed GEMM
//   spk_gemm_bf16_batched_fixed  spk_gemm_bf16_batched's contract, each item one fixed GEMM
//   spk_gemm_bf16_batched_exact  C += sum_i op(A_i) op(B_i) as spk_sgemm_batched_exact: each
//                                group of `group` items summed in float32 in order (into tmp,
//                                (M, ldc) floats of scratch), then added to the exact sums C
void spk_gemm_bf16_fixed(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B,
                         int ldb, float beta, float *C, int ldc);
void spk_gemm_bf16_rows(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B,
                        int ldb, float beta, float *C, int ldc);
void spk_gemm_bf16_batched_fixed(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                 int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB, float beta, float *C,
                                 int ldc, int64_t strideC, int batch);
void spk_gemm_bf16_batched_exact(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                 int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB, float *tmp, xsum_t C,
                                 int ldc, int batch, int group);

// 1 when the CPU's bf16 GEMMs run on native bf16 instructions, 0 when they widen to float32
// (no AVX512-BF16/AMX, no oneDNN, or the BLAS backend selected).
int spk_gemm_bf16_native(void);
