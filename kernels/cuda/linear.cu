// Row-major SGEMM on cuBLAS (kernels/gemm.h semantics) and the dense layer (kernels/linear.h).
//
// cuBLAS is column-major. A row-major (r, c) matrix with row stride ld is, read column-major,
// its (c, r) transpose with the same leading dimension. So row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: call cuBLAS with the operands swapped (B first), the same
// 'N'/'T' flags, and the dimensions (N, M, K).
#include "kernels/cuda/cuda_check.h"

namespace {

cublasOperation_t op_of(char t) {
    SPK_ASSERT(t == 'N' || t == 'n' || t == 'T' || t == 't');
    return (t == 'N' || t == 'n') ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// y[i, o] = b[o]
__global__ void fill_rows_kernel(float* y, const float* b, size_t n, int Out) {
    SPK_GRID_LOOP(i, n) y[i] = b[i % Out];
}

// db[o] += sum_i dy[i, o]: one thread per column, rows summed in order (deterministic).
__global__ void column_sum_kernel(float* db, const float* dy, int B, int Out) {
    SPK_GRID_LOOP(o, (size_t)Out) {
        double acc = 0.0;
        for (int i = 0; i < B; i++) acc += dy[(size_t)i * Out + o];
        db[o] += (float)acc;
    }
}

}  // namespace

extern "C" void spk_sgemm_cuda(char transa, char transb, int M, int N, int K, float alpha,
                               const float* A, int lda, const float* B, int ldb, float beta,
                               float* C, int ldc) {
    SPK_ASSERT(M > 0 && N > 0 && K > 0);
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    // row strides of the stored matrices: at least their row lengths
    SPK_ASSERT(lda >= (opa == CUBLAS_OP_N ? K : M));
    SPK_ASSERT(ldb >= (opb == CUBLAS_OP_N ? N : K));
    SPK_ASSERT(ldc >= N);
    cublasCheck(
        cublasSgemm(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

extern "C" void spk_sgemm_batched_cuda(char transa, char transb, int M, int N, int K,
                                       float alpha, const float* A, int lda, int64_t strideA,
                                       const float* B, int ldb, int64_t strideB, float beta,
                                       float* C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(M > 0 && N > 0 && K > 0 && batch >= 0);
    if (batch == 0) return;
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    SPK_ASSERT(lda >= (opa == CUBLAS_OP_N ? K : M));
    SPK_ASSERT(ldb >= (opb == CUBLAS_OP_N ? N : K));
    SPK_ASSERT(ldc >= N && (strideC != 0 || batch == 1));
    cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb,
                                          strideB, A, lda, strideA, &beta, C, ldc, strideC,
                                          batch));
}

extern "C" void linear_forward_cuda(float* y, const float* x, const float* w, const float* b, int B,
                                    int In, int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (b) {
        const size_t n = (size_t)B * Out;
        fill_rows_kernel<<<spk_grid(n), SPK_CUDA_THREADS, 0, spk_cuda_stream_checked()>>>(y, b, n,
                                                                                          Out);
        SPK_CUDA_LAUNCHED();
    }
    spk_sgemm_cuda('N', 'T', B, Out, In, 1.0f, x, In, w, In, b ? 1.0f : 0.0f, y, Out);
}

extern "C" void linear_backward_cuda(float* dx, float* dw, float* db, const float* dy,
                                     const float* x, const float* w, int B, int In, int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (dx) spk_sgemm_cuda('N', 'N', B, In, Out, 1.0f, dy, Out, w, In, 1.0f, dx, In);
    if (dw) spk_sgemm_cuda('T', 'N', Out, In, B, 1.0f, dy, Out, x, In, 1.0f, dw, In);
    if (db) {
        column_sum_kernel<<<spk_grid((size_t)Out), SPK_CUDA_THREADS, 0,
                            spk_cuda_stream_checked()>>>(db, dy, B, Out);
        SPK_CUDA_LAUNCHED();
    }
}
