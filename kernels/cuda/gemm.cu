// Row-major SGEMM (kernels/gemm.h semantics) on cuBLAS. A batch summed into one C (strideC = 0)
// is one strided-batched call into a scratch stack of products, then a fixed-order sum over it
// (in chunks of at most 64 MiB of products), instead of `batch` dependent GEMMs.
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

const size_t kStackFloats = (size_t)16 << 20;  // products held at once (64 MiB)

// C[i, j] = (first ? beta C[i, j] : C[i, j]) + sum_q P[q, i, j], q in order; P is (n, M, N).
__global__ void sum_stack_kernel(float* C, int ldc, const float* P, int M, int N, int n, float beta, int first) {
    const size_t mn = (size_t)M * N;
    SPK_GRID_LOOP(e, mn) {
        const size_t i = e / N, j = e - i * N;
        float* c = C + i * ldc + j;
        spk_fsum acc = spk_fsum_zero();
        if (!first || beta != 0.0f) spk_fsum_add(&acc, first ? beta * *c : *c);  // beta 0: C unread
        for (int q = 0; q < n; q++) spk_fsum_add(&acc, P[q * mn + e]);
        *c = spk_fsum_value(acc);
    }
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
    SPK_ASSERT(batch >= 0);
    if (batch == 0) return;
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    check_strides(opa, opb, M, N, K, lda, ldb, ldc);
    if (strideC != 0 || batch == 1) {
        cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb,
                                              strideB, A, lda, strideA, &beta, C, ldc, strideC,
                                              batch));
        return;
    }
    const size_t mn = (size_t)M * N;
    size_t chunk = kStackFloats / mn;
    chunk = chunk < 1 ? 1 : chunk > (size_t)batch ? (size_t)batch : chunk;
    float* P = (float*)spk_cuda_scratch(sizeof(float) * mn * chunk);
    const float zero = 0.0f;
    for (int q0 = 0; q0 < batch; q0 += (int)chunk) {
        const int n = batch - q0 < (int)chunk ? batch - q0 : (int)chunk;
        cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B + q0 * strideB,
                                              ldb, strideB, A + q0 * strideA, lda, strideA, &zero, P, N,
                                              (long long)mn, n));
        SPK_LAUNCH(sum_stack_kernel, spk_grid(mn), C, ldc, P, M, N, n, beta, q0 == 0);
    }
}
