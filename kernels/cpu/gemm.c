// Row-major SGEMM dispatch: oneDNN's dnnl_sgemm (when built with SPK_USE_DNNL) or cblas.
// On this project's CPUs dnnl_sgemm measured 1.2-2x faster than OpenBLAS 0.3.21, whose
// runtime CPU detection does not recognise recent Xeons (see docs/kernels.md).
#include "kernels/gemm.h"

#include <cblas.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/base/spk_assert.h"

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
    const char* core = openblas_get_corename();
    if (core && strcmp(core, "Prescott") == 0)
        fprintf(stderr,
                "spkddp: OpenBLAS chose its generic 'Prescott' kernels for this CPU (slow); "
                "set OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) before starting, "
                "or build with oneDNN (SPK_USE_DNNL)\n");
}

void spk_sgemm_serial(char transa, char transb, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    spk_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void spk_sgemm_batched(char transa, char transb, int M, int N, int K, float alpha,
                       const float* A, int lda, int64_t strideA, const float* B, int ldb,
                       int64_t strideB, float beta, float* C, int ldc, int64_t strideC,
                       int batch) {
    SPK_ASSERT(batch >= 0);
    for (int i = 0; i < batch; i++)  // strideC = 0: the later items add onto the first
        spk_sgemm(transa, transb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb,
                  strideC == 0 && i > 0 ? 1.0f : beta, C + i * strideC, ldc);
}

void spk_sgemm(char transa, char transb, int M, int N, int K, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
    SPK_ASSERT(transa == 'N' || transa == 'T');
    SPK_ASSERT(transb == 'N' || transb == 'T');
    SPK_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) return;
    if (K == 0) {  // C = beta * C
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
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
    cblas_sgemm(CblasRowMajor, transa == 'T' ? CblasTrans : CblasNoTrans,
                transb == 'T' ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}
