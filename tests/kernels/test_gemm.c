// spk_sgemm: all transpose combinations, leading dimensions larger than the rows, beta = 0
// ignoring NaN in C, beta = 1 accumulation, on every compiled-in backend.
#include "kernels/gemm.h"
#include "test_common.h"

static void run_case(char ta, char tb, int M, int N, int K, float alpha, float beta) {
    const int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 5;
    const int arows = ta == 'N' ? M : K, brows = tb == 'N' ? K : N;
    float* A = rand_f((size_t)arows * lda, -1, 1);
    float* B = rand_f((size_t)brows * ldb, -1, 1);
    float* C = rand_f((size_t)M * ldc, -1, 1);
    double* want = (double*)malloc(sizeof(double) * (size_t)M * ldc);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            double acc = 0.0;
            if (j < N) {
                for (int k = 0; k < K; k++) {
                    const double a = ta == 'N' ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                    const double b = tb == 'N' ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                    acc += a * b;
                }
                acc = alpha * acc + (beta == 0.0f ? 0.0 : beta * (double)C[(size_t)i * ldc + j]);
            } else {
                acc = C[(size_t)i * ldc + j];  // padding columns untouched
            }
            want[(size_t)i * ldc + j] = acc;
        }
    if (beta == 0.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = NAN;
    spk_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    char nm[128];
    snprintf(nm, sizeof nm, "sgemm %c%c M%d N%d K%d beta %g", ta, tb, M, N, K, beta);
    check_close_d(nm, C, want, (size_t)M * ldc, 1e-5, 1e-5 * (1 + K / 16.0));
    free(A);
    free(B);
    free(C);
    free(want);
}

// The batch is each item's GEMM (a shared A with stride 0, padded row strides).
static void run_batched(char ta, char tb) {
    const int M = 9, N = 13, K = 7, batch = 5;
    const int lda = (ta == 'N' ? K : M) + 1, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 3;
    const int64_t sa = 0, sb = (int64_t)(tb == 'N' ? K : N) * ldb + 4, sc = (int64_t)M * ldc + 1;
    float* A = rand_f((size_t)(ta == 'N' ? M : K) * lda, -1, 1);
    float* B = rand_f((size_t)(sb * batch), -1, 1);
    float* C = rand_f((size_t)(sc * batch), -1, 1);
    float* want = (float*)malloc(sizeof(float) * (size_t)(sc * batch));
    memcpy(want, C, sizeof(float) * (size_t)(sc * batch));
    for (int i = 0; i < batch; i++)
        spk_sgemm(ta, tb, M, N, K, 0.5f, A + i * sa, lda, B + i * sb, ldb, 1.0f, want + i * sc, ldc);
    spk_sgemm_batched(ta, tb, M, N, K, 0.5f, A, lda, sa, B, ldb, sb, 1.0f, C, ldc, sc, batch);
    char nm[64];
    snprintf(nm, sizeof nm, "sgemm_batched %c%c, shared A", ta, tb);
    check_close(nm, C, want, (size_t)(sc * batch), 0.0, 0.0);
    free(A);
    free(B);
    free(C);
    free(want);
}

static void run_all(void) {
    const char tr[2] = {'N', 'T'};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            run_case(tr[a], tr[b], 7, 9, 5, 1.0f, 0.0f);
            run_case(tr[a], tr[b], 33, 65, 129, 1.0f, 1.0f);
            run_case(tr[a], tr[b], 64, 200, 192, 0.5f, 1.0f);
            run_case(tr[a], tr[b], 1, 17, 3, 2.0f, 0.0f);
            run_batched(tr[a], tr[b]);
        }
}

int main(void) {
    rng_seed(7);
    check_true(spk_gemm_set_backend(SPK_GEMM_BLAS) == 0, "BLAS backend available");
    run_all();
    // oneDNN when the library was built with it (SPK_USE_DNNL)
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0) {
        printf("test_gemm: also checking the oneDNN backend\n");
        run_all();
    }
    return test_finish("test_gemm");
}
