// bf16 GEMM (kernels/gemm_bf16.h) on cuBLAS: cublasGemmEx with bf16 A and B, a float32 C and
// float32 compute (CUBLAS_COMPUTE_32F: tensor cores on Ampere and newer, float32 sums). The
// row-major/column-major swap is kernels/cuda/gemm.cu's: C^T = op(B)^T op(A)^T.
#include "kernels/cuda/launch.cuh"

namespace {

cublasOperation_t op_of(char t) {
    SPK_ASSERT(t == 'N' || t == 'T');
    return t == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
}

void check_args(char ta, char tb, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    SPK_ASSERT(M > 0 && N > 0 && K > 0);
    SPK_ASSERT(lda >= (ta == 'N' ? K : M) && ldb >= (tb == 'N' ? N : K) && ldc >= N);
    SPK_ASSERT(beta == 0.0f || beta == 1.0f);
}

}  // namespace

extern "C" void spk_gemm_bf16_cuda(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                   const spk_bf16 *B, int ldb, float beta, float *C, int ldc) {
    check_args(transa, transb, M, N, K, lda, ldb, ldc, beta);
    const float one = 1.0f;
    cublasCheck(cublasGemmEx(spk_cublas_handle(), op_of(transb), op_of(transa), N, M, K, &one, B, CUDA_R_16BF, ldb, A,
                             CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

extern "C" void spk_gemm_bf16_batched_cuda(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                           int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB, float beta,
                                           float *C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
    if (batch == 0) return;
    check_args(transa, transb, M, N, K, lda, ldb, ldc, beta);
    const float one = 1.0f;
    cublasCheck(cublasGemmStridedBatchedEx(spk_cublas_handle(), op_of(transb), op_of(transa), N, M, K, &one, B,
                                           CUDA_R_16BF, ldb, strideB, A, CUDA_R_16BF, lda, strideA, &beta, C,
                                           CUDA_R_32F, ldc, strideC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- the world-size-invariant mode (kernels/gemm_bf16.h) ----------------------------------------
// cuBLAS may pick another algorithm, and another rounding, for another shape: every sample (a
// row, or a batch item) gets a call of its own, whose shape does not depend on the batch.

extern "C" void spk_gemm_bf16_rows_cuda(char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                        const spk_bf16 *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        spk_gemm_bf16_cuda(transa, transb, 1, N, K, transa == 'N' ? A + (size_t)i * lda : A + i, lda, B, ldb, beta,
                           C + (size_t)i * ldc, ldc);
}

extern "C" void spk_gemm_bf16_batched_fixed_cuda(char transa, char transb, int M, int N, int K, const spk_bf16 *A,
                                                 int lda, int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB,
                                                 float beta, float *C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
    for (int i = 0; i < batch; i++)
        spk_gemm_bf16_cuda(transa, transb, M, N, K, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC,
                           ldc);
}
