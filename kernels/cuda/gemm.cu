// Row-major SGEMM (kernels/gemm.h semantics) on cuBLAS, and the invariant mode's exact batched
// GEMMs over float32 and bf16 operands (the bf16 ones: spk_gemm_bf16_cuda, kernels/cuda/gemm_bf16.cu). A batch summed into one C (strideC = 0)
// is one strided-batched call into a scratch stack of products, then a fixed-order sum over it
// (in chunks of at most 64 MiB of products), instead of `batch` dependent GEMMs.
//
// cuBLAS is column-major. A row-major (r, c) matrix with row stride ld is, read column-major,
// its (c, r) transpose with the same leading dimension. So row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: call cuBLAS with the operands swapped (B first), the same
// 'N'/'T' flags, and the dimensions (N, M, K).
#include "kernels/cuda/launch.cuh"
#include "kernels/exact_sum_math.h"

namespace {

cublasOperation_t op_of(char t) {
    SPK_ASSERT(t == 'N' || t == 'n' || t == 'T' || t == 't');
    return (t == 'N' || t == 'n') ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// Row strides of the stored matrices: at least their row lengths.
void check_strides(cublasOperation_t opa, cublasOperation_t opb, int M, int N, int K, int lda, int ldb, int ldc) {
    SPK_ASSERT(M > 0 && N > 0 && K > 0);
    SPK_ASSERT(lda >= (opa == CUBLAS_OP_N ? K : M));
    SPK_ASSERT(ldb >= (opb == CUBLAS_OP_N ? N : K));
    SPK_ASSERT(ldc >= N);
}

const size_t kStackFloats = (size_t)16 << 20;  // products held at once (64 MiB)

// C[i, j] = (first ? beta C[i, j] : C[i, j]) + sum_q P[q, i, j], q in order; P is (n, M, N).
__global__ void sum_stack_kernel(float *C, int ldc, const float *P, int M, int N, int n, float beta, int first) {
    const size_t mn = (size_t)M * N;
    SPK_GRID_LOOP(e, mn) {
        const size_t i = e / N, j = e - i * N;
        float *c = C + i * ldc + j;
        spk_fsum acc = spk_fsum_zero();
        if (!first || beta != 0.0f) spk_fsum_add(&acc, first ? beta * *c : *c);  // beta 0: C unread
        for (int q = 0; q < n; q++) spk_fsum_add(&acc, P[q * mn + e]);
        *c = spk_fsum_value(acc);
    }
}

}  // namespace

extern "C" void spk_sgemm_cuda(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                               const float *B, int ldb, float beta, float *C, int ldc) {
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    check_strides(opa, opb, M, N, K, lda, ldb, ldc);
    cublasCheck(cublasSgemm(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

extern "C" void spk_sgemm_batched_cuda(char transa, char transb, int M, int N, int K, float alpha, const float *A,
                                       int lda, int64_t strideA, const float *B, int ldb, int64_t strideB, float beta,
                                       float *C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0);
    if (batch == 0) return;
    const cublasOperation_t opa = op_of(transa), opb = op_of(transb);
    check_strides(opa, opb, M, N, K, lda, ldb, ldc);
    if (strideC != 0 || batch == 1) {
        cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B, ldb, strideB, A, lda,
                                              strideA, &beta, C, ldc, strideC, batch));
        return;
    }
    const size_t mn = (size_t)M * N;
    size_t chunk = kStackFloats / mn;
    chunk = chunk < 1 ? 1 : chunk > (size_t)batch ? (size_t)batch : chunk;
    float *P = (float *)spk_cuda_scratch(sizeof(float) * mn * chunk);
    const float zero = 0.0f;
    for (int q0 = 0; q0 < batch; q0 += (int)chunk) {
        const int n = batch - q0 < (int)chunk ? batch - q0 : (int)chunk;
        cublasCheck(cublasSgemmStridedBatched(spk_cublas_handle(), opb, opa, N, M, K, &alpha, B + q0 * strideB, ldb,
                                              strideB, A + q0 * strideA, lda, strideA, &zero, P, N, (long long)mn, n));
        SPK_LAUNCH(sum_stack_kernel, spk_grid(mn), C, ldc, P, M, N, n, beta, q0 == 0);
    }
}

// ---- the world-size-invariant mode (kernels/gemm.h) ---------------------------------------------
// cuBLAS is deterministic for one call's arguments, but may choose other kernels for other M or
// batch counts: rows and batch items get calls of their own.

namespace {

// Row i of op(A): row i of A, or column i of A when transposed.
const float *op_row(char t, const float *A, int lda, int i) {
    return op_of(t) == CUBLAS_OP_N ? A + (size_t)i * lda : A + i;
}

// C (rows, N, row stride ldc) added to the exact sums s (same layout), one thread per column of
// a row-major block: the deposit is the CPU's.
__global__ void add_block_kernel(xsum_t s, const float *C, int rows, int N, int ldc) {
    SPK_GRID_LOOP(k, (size_t)rows * N) {
        const size_t r = k / N, o = r * ldc + (k - r * N);
        int J = s.bin[o];
        int64_t hi = s.hi[o], lo = s.lo[o];
        xsum_deposit(&J, &hi, &lo, (double)C[o]);
        s.bin[o] = (int8_t)J;
        s.hi[o] = hi;
        s.lo[o] = lo;
    }
}

}  // namespace

extern "C" void spk_sgemm_rows_cuda(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                                    const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        spk_sgemm_cuda(transa, transb, 1, N, K, alpha, op_row(transa, A, lda, i), lda, B, ldb, beta,
                       C + (size_t)i * ldc, ldc);
}

extern "C" void spk_sgemm_batched_fixed_cuda(char transa, char transb, int M, int N, int K, float alpha, const float *A,
                                             int lda, int64_t strideA, const float *B, int ldb, int64_t strideB,
                                             float beta, float *C, int ldc, int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
    for (int i = 0; i < batch; i++)
        spk_sgemm_cuda(transa, transb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta,
                       C + i * strideC, ldc);
}

// C += sum_i op(A_i) op(B_i), each group's items summed in tmp by `gemm` (beta 0 for its first
// item), then one term of the exact sums.
template <typename G>
void batched_exact(G gemm, int M, int N, int K, float *tmp, xsum_t C, int ldc, int batch, int group) {
    SPK_ASSERT(M >= 0 && N >= 0 && K >= 0 && batch >= 0 && ldc >= N && group > 0 && batch % group == 0);
    if (M == 0 || N == 0 || K == 0) return;
    for (int i = 0; i < batch; i++) {  // a group's products add up in tmp, then one term
        gemm(i, i % group ? 1.0f : 0.0f);
        if (i % group == group - 1) SPK_LAUNCH(add_block_kernel, spk_grid((size_t)M * N), C, tmp, M, N, ldc);
    }
}

extern "C" void spk_sgemm_batched_exact_cuda(char transa, char transb, int M, int N, int K, const float *A, int lda,
                                             int64_t strideA, const float *B, int ldb, int64_t strideB, float *tmp,
                                             xsum_t C, int ldc, int batch, int group) {
    batched_exact(
        [&](int i, float beta) {
            spk_sgemm_cuda(transa, transb, M, N, K, 1.0f, A + i * strideA, lda, B + i * strideB, ldb, beta, tmp, ldc);
        },
        M, N, K, tmp, C, ldc, batch, group);
}

extern "C" void spk_gemm_bf16_batched_exact_cuda(char transa, char transb, int M, int N, int K, const spk_bf16 *A,
                                                 int lda, int64_t strideA, const spk_bf16 *B, int ldb, int64_t strideB,
                                                 float *tmp, xsum_t C, int ldc, int batch, int group) {
    batched_exact(
        [&](int i, float beta) {
            spk_gemm_bf16_cuda(transa, transb, M, N, K, A + i * strideA, lda, B + i * strideB, ldb, beta, tmp, ldc);
        },
        M, N, K, tmp, C, ldc, batch, group);
}
