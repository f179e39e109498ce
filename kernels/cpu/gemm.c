// Row-major SGEMM dispatch: oneDNN's dnnl_sgemm (when built with SPK_USE_DNNL) or cblas.
// On this project's CPUs dnnl_sgemm measured 1.2-2x faster than OpenBLAS 0.3.21, whose
// runtime CPU detection does not recognise recent Xeons (see docs/kernels.md).
#include "kernels/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/cpu/gemm_any.h"

#ifdef SPK_USE_DNNL
#include <oneapi/dnnl/dnnl.h>
static spk_gemm_backend g_backend = SPK_GEMM_DNNL;
#else
static spk_gemm_backend g_backend = SPK_GEMM_BLAS;
#endif

int spk_gemm_set_backend(spk_gemm_backend backend) {
    if (backend == SPK_GEMM_BLAS) {
        g_backend = backend;
        return 0;
    }
#ifdef SPK_USE_DNNL
    if (backend == SPK_GEMM_DNNL) {
        g_backend = backend;
        return 0;
    }
#endif
    return -1;
}

spk_gemm_backend spk_gemm_get_backend(void) { return g_backend; }

// OpenBLAS 0.3.21 falls back to its generic SSE3 "Prescott" kernels on CPUs it does not know
// (e.g. family 6 model 207 Xeons), which is ~5x slower here. Say so once.
static void warn_slow_blas(void) {
    static atomic_int checked = 0;
    if (atomic_exchange(&checked, 1)) return;
    const char *core = openblas_get_corename();
    if (core && strcmp(core, "Prescott") == 0)
        fprintf(stderr,
                "spkddp: OpenBLAS chose its generic 'Prescott' kernels for this CPU (slow); "
                "set OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) before starting, "
                "or build with oneDNN (SPK_USE_DNNL)\n");
}

void spk_sgemm_serial(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    spk_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void spk_sgemm_batched(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                       int64_t strideA, const float *B, int ldb, int64_t strideB, float beta, float *C, int ldc,
                       int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0);
    for (int i = 0; i < batch; i++)  // strideC = 0: the later items add onto the first
        spk_sgemm(transa, transb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb,
                  strideC == 0 && i > 0 ? 1.0f : beta, C + i * strideC, ldc);
}

void spk_sgemm(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc) {
    SPK_ASSERT(transa == 'N' || transa == 'T');
    SPK_ASSERT(transb == 'N' || transb == 'T');
    SPK_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) return;
    if (K == 0) {  // C = beta * C
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
#ifdef SPK_USE_DNNL
    if (g_backend == SPK_GEMM_DNNL) {
        dnnl_status_t st = dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        SPK_ASSERT(st == dnnl_success);
        return;
    }
#endif
    warn_slow_blas();
    cblas_sgemm(CblasRowMajor, transa == 'T' ? CblasTrans : CblasNoTrans, transb == 'T' ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// ---- the world-size-invariant mode --------------------------------------------------------------

void spk_sgemm_fixed(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    // Both libraries read the thread count they may use from this task's OpenMP ICV at every
    // call: 1 makes them plan (and run) the GEMM on this thread, whatever the context.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    spk_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(threads);
}

// Row i of op(A): row i of A, or column i of A when transposed (elements of `elem` bytes).
static const char *op_row(char trans, const void *A, int lda, int i, size_t elem) {
    return (const char *)A + (trans == 'N' ? (size_t)i * lda : (size_t)i) * elem;
}

void spk_sgemm_rows(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(dynamic, 1) if (M > 1 && (double)M * N * K >= GEMM_LOOP_MIN_FLOPS)
    for (int i = 0; i < M; i++)
        spk_sgemm_fixed(transa, transb, 1, N, K, alpha, (const float *)op_row(transa, A, lda, i, sizeof(float)), lda, B,
                        ldb, beta, C + (size_t)i * ldc, ldc);
}

void spk_sgemm_batched_fixed(char transa, char transb, int M, int N, int K, float alpha, const float *A, int lda,
                             int64_t strideA, const float *B, int ldb, int64_t strideB, float beta, float *C, int ldc,
                             int64_t strideC, int batch) {
    SPK_ASSERT(batch >= 0 && (strideC != 0 || batch <= 1));
#pragma omp parallel for schedule(dynamic, 1) if (batch > 1 && (double)batch * M * N * K >= GEMM_LOOP_MIN_FLOPS)
    for (int i = 0; i < batch; i++)
        spk_sgemm_fixed(transa, transb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta,
                        C + i * strideC, ldc);
}

// Blocks of C for spk_sgemm_batched_exact, set by the shapes only: up to 128 rows by 256
// columns (wide enough GEMMs; a block and its sums, ~700 KiB, stay in cache while every item is
// added to them).
#define EXACT_BLOCK_ROWS 128
#define EXACT_BLOCK_COLS 256

void gemm_any_batched_exact(gemm_any_fn *fixed, size_t elem, char transa, char transb, int M, int N, int K,
                            const void *A, int lda, int64_t strideA, const void *B, int ldb, int64_t strideB,
                            float *tmp, xsum_t C, int ldc, int batch, int group) {
    SPK_ASSERT(M >= 0 && N >= 0 && K >= 0 && batch >= 0 && ldc >= N && group > 0 && batch % group == 0);
    if (M == 0 || N == 0 || batch == 0) return;
    const int nrow = (M + EXACT_BLOCK_ROWS - 1) / EXACT_BLOCK_ROWS,
              ncol = (N + EXACT_BLOCK_COLS - 1) / EXACT_BLOCK_COLS;
#pragma omp parallel for schedule(dynamic, 1) if (nrow * ncol > 1 && (double)batch * M * N * K >= GEMM_LOOP_MIN_FLOPS)
    for (int blk = 0; blk < nrow * ncol; blk++) {
        const int m0 = blk / ncol * EXACT_BLOCK_ROWS, m1 = m0 + EXACT_BLOCK_ROWS < M ? m0 + EXACT_BLOCK_ROWS : M;
        const int n0 = blk % ncol * EXACT_BLOCK_COLS, n1 = n0 + EXACT_BLOCK_COLS < N ? n0 + EXACT_BLOCK_COLS : N;
        float *t = tmp + (size_t)m0 * ldc + n0;
        for (int i = 0; i < batch; i++) {
            // op(B)'s columns n0.. are B's columns (N) or rows (T) n0..
            const char *Bi =
                (const char *)B + ((size_t)i * strideB + (transb == 'N' ? (size_t)n0 : (size_t)n0 * ldb)) * elem;
            const void *Ai = (const char *)A + (size_t)i * strideA * elem;
            fixed(transa, transb, m1 - m0, n1 - n0, K, op_row(transa, Ai, lda, m0, elem), lda, Bi, ldb,
                  i % group ? 1.0f : 0.0f, t, ldc);  // the group's items add up in t
            if (i % group == group - 1)
                for (int m = m0; m < m1; m++)
                    xsum_add_row(xsum_at(C, (int64_t)m * ldc + n0), tmp + (size_t)m * ldc + n0, n1 - n0);
        }
    }
}

static void sgemm_fixed_any(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                            float beta, float *C, int ldc) {
    spk_sgemm_fixed(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

void spk_sgemm_batched_exact(char transa, char transb, int M, int N, int K, const float *A, int lda, int64_t strideA,
                             const float *B, int ldb, int64_t strideB, float *tmp, xsum_t C, int ldc, int batch,
                             int group) {
    gemm_any_batched_exact(sgemm_fixed_any, sizeof(float), transa, transb, M, N, K, A, lda, strideA, B, ldb, strideB,
                           tmp, C, ldc, batch, group);
}
