// Row-major SGEMM (kernels/gemm.h semantics) on cuBLAS.
//
// cuBLAS is column-major. A row-major (r, c) matrix with row stride ld is, read column-major,
// its (c, r) transpose with the same leading dimension. So row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: call cuBLAS with the operands swapped (B first), the same
// 'N'/'T' flags, and the dimensions (N, M, K).
#include "kernels/cuda/launch.cuh"

namespace {

cublasOperation_t op_of(char t) {
    SPK_ASSERT(t == 'N' || t == 'n' || t == 'T' || t == 't');
    return (t == 'N' || t == 'n') ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// Row strides of the stored matrices: at least their row lengths.
void check_strides(cublasOperation_t opa, cublasOperation_t opb, int M, int N, int K, int lda,
                   int ldb, int ldc) {
    SPK_ASSERT(M > 0 && N > 0 && K > 0);
    SPK_ASSERT(lda >= (opa == CUBLAS_OP_N ? K : M));
    SPK_ASSERT(ldb >= (opb == CUBLAS_OP_N ? N : K));
    SPK_ASSERT(ldc >= N);
}

}  // namespace

extern "C" void spk_sgemm_cuda(char transa, char transb, int M, int N, int K, float alpha,
                               const float* A, int lda, const float* B, int ldb, float beta,
                               float* C, int ldc) {
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    check_strides(opa, opb, M, N, K, lda, ldb, ldc);
    cublasCheck(
        cublasSgemm(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

extern "C" void spk_sgemm_batched_cuda(char transa, char transb, int M, int N, int K,
                                       float alpha, const float* A, int lda, int64_t strideA,
                                       const float* B, int ldb, int64_t strideB, float beta,
                                       float* C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
    if (batch == 0) return;
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    check_strides(opa, opb, M, N, K, lda, ldb, ldc);
    cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb,
                                          strideB, A, lda, strideA, &beta, C, ldc, strideC,
                                          batch));
}
