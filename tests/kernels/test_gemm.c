// spk_sgemm: all transpose combinations, leading dimensions larger than the rows, beta = 0
// ignoring NaN in C, beta = 1 accumulation, on every compiled-in GEMM library. The invariant
// mode's GEMMs: a row of spk_sgemm_rows is its own M = 1 GEMM whatever M and the thread count;
// spk_sgemm_batched_fixed is the loop of fixed GEMMs; spk_sgemm_batched_exact's sums do not
// change when the batch is split between calls or run on another thread count, and are close to
// the double reference. Then every backend against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "exact_check.h"
#include "kernels/gemm.h"

static void run_case(char ta, char tb, int M, int N, int K, float alpha, float beta) {
    const int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 5;
    const int arows = ta == 'N' ? M : K, brows = tb == 'N' ? K : N;
    float *A = rand_f((size_t)arows * lda, -1, 1);
    float *B = rand_f((size_t)brows * ldb, -1, 1);
    float *C = rand_f((size_t)M * ldc, -1, 1);
    double *want = alloc_d((size_t)M * ldc);
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
    test_release();
}

// The batch is each item's GEMM (a shared A with stride 0, padded row strides).
static void run_batched(char ta, char tb) {
    const int M = 9, N = 13, K = 7, batch = 5;
    const int lda = (ta == 'N' ? K : M) + 1, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 3;
    const int64_t sa = 0, sb = (int64_t)(tb == 'N' ? K : N) * ldb + 4, sc = (int64_t)M * ldc + 1;
    float *A = rand_f((size_t)(ta == 'N' ? M : K) * lda, -1, 1);
    float *B = rand_f((size_t)(sb * batch), -1, 1);
    float *C = rand_f((size_t)(sc * batch), -1, 1);
    float *want = copy_f(C, (size_t)(sc * batch));
    for (int i = 0; i < batch; i++)
        spk_sgemm(ta, tb, M, N, K, 0.5f, A + i * sa, lda, B + i * sb, ldb, 1.0f, want + i * sc, ldc);
    spk_sgemm_batched(ta, tb, M, N, K, 0.5f, A, lda, sa, B, ldb, sb, 1.0f, C, ldc, sc, batch);
    char nm[64];
    snprintf(nm, sizeof nm, "sgemm_batched %c%c, shared A", ta, tb);
    check_close(nm, C, want, (size_t)(sc * batch), 0.0, 0.0);
    // strideC = 0: the batch summed into one C, as the loop of accumulating GEMMs gives it
    float *S = rand_f((size_t)M * ldc, -1, 1);
    float *want_sum = copy_f(S, (size_t)M * ldc);
    for (int i = 0; i < batch; i++)
        spk_sgemm(ta, tb, M, N, K, 0.5f, A + i * sa, lda, B + i * sb, ldb, i ? 1.0f : 0.25f, want_sum, ldc);
    spk_sgemm_batched(ta, tb, M, N, K, 0.5f, A, lda, sa, B, ldb, sb, 0.25f, S, ldc, 0, batch);
    snprintf(nm, sizeof nm, "sgemm_batched %c%c, summed over the batch", ta, tb);
    check_close(nm, S, want_sum, (size_t)M * ldc, 0.0, 0.0);
    test_release();
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

// ---- the world-size-invariant mode ----------------------------------------------------------
static void invariant_rows(char ta, char tb) {
    const int M = 12, N = 300, K = 700;  // big enough for the libraries to thread
    const int lda = (ta == 'N' ? K : M) + 1, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 3;
    float *A = rand_f((size_t)(ta == 'N' ? M : K) * lda, -1, 1);
    float *B = rand_f((size_t)(tb == 'N' ? K : N) * ldb, -1, 1);
    float *C2 = zeros_f((size_t)M * ldc), *C1 = zeros_f((size_t)M * ldc), *rows = zeros_f((size_t)M * ldc);
    const int before = with_threads(2);
    spk_sgemm_rows(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, C2, ldc);
    with_threads(1);
    spk_sgemm_rows(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, C1, ldc);
    with_threads(before);
    for (int i = 0; i < M; i++)  // each row alone, as a batch of one
        spk_sgemm_rows(ta, tb, 1, N, K, 0.5f, ta == 'N' ? A + (size_t)i * lda : A + i, lda, B, ldb, 0.0f,
                       rows + (size_t)i * ldc, ldc);
    check_true(memcmp(C1, C2, sizeof(float) * M * ldc) == 0 && memcmp(C1, rows, sizeof(float) * M * ldc) == 0,
               cname("sgemm_rows %c%c: a row is the same with 1 or 2 threads and alone", ta, tb));
    float *ref = zeros_f((size_t)M * ldc);
    spk_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, ref, ldc);
    check_close(cname("sgemm_rows %c%c vs sgemm", ta, tb), C1, ref, (size_t)M * ldc, 1e-5, 1e-4);
    test_release();
}

static void invariant_batched(char ta, char tb) {
    const int M = 150, N = 300, K = 40, batch = 6;  // 2 x 2 blocks of C
    const int lda = ta == 'N' ? K : M, ldb = tb == 'N' ? N : K, ldc = N + 7;
    const int64_t sa = (int64_t)M * K, sb = (int64_t)K * N;
    float *A = rand_f((size_t)sa * batch, -1, 1), *B = rand_f((size_t)sb * batch, -1, 1);
    float *tmp = alloc_f((size_t)M * ldc), *fixed = zeros_f((size_t)M * ldc * batch),
          *loop = zeros_f((size_t)M * ldc * batch);
    spk_sgemm_batched_fixed(ta, tb, M, N, K, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, fixed, ldc, (int64_t)M * ldc, batch);
    for (int i = 0; i < batch; i++)
        spk_sgemm_fixed(ta, tb, M, N, K, 1.0f, A + i * sa, lda, B + i * sb, ldb, 0.0f, loop + (size_t)i * M * ldc, ldc);
    check_true(memcmp(fixed, loop, sizeof(float) * M * ldc * batch) == 0,
               cname("sgemm_batched_fixed %c%c is the loop of fixed GEMMs", ta, tb));
    const int64_t n = (int64_t)M * ldc;
    xsum_t whole = host_sums(n), split = host_sums(n), one = host_sums(n);
    const int before = with_threads(2);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, whole, ldc, batch, 1);
    xsum_t g2 = host_sums(n), g2split = host_sums(n);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, g2, ldc, batch, 2);
    with_threads(1);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, split, ldc, 2, 1);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A + 2 * sa, lda, sa, B + 2 * sb, ldb, sb, tmp, split, ldc, batch - 2, 1);
    for (int i = batch - 1; i >= 0; i--)
        spk_sgemm_batched_exact(ta, tb, M, N, K, A + i * sa, lda, sa, B + i * sb, ldb, sb, tmp, one, ldc, 1, 1);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A + 4 * sa, lda, sa, B + 4 * sb, ldb, sb, tmp, g2split, ldc, 2, 2);
    spk_sgemm_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, g2split, ldc, 4, 2);
    with_threads(before);
    check_true(
        same_sums(whole, split, n) && same_sums(whole, one, n),
        cname("sgemm_batched_exact %c%c: the same sums for a batch split, item by item, on 1 or 2 threads", ta, tb));
    check_true(same_sums(g2, g2split, n),
               cname("sgemm_batched_exact %c%c, groups of 2: the same sums for a split along the groups", ta, tb));
    check_close(cname("sgemm_batched_exact %c%c groups of 2 vs single items", ta, tb), sums_to_floats(g2, n),
                sums_to_floats(whole, n), (size_t)n, 1e-5, 1e-5 * K);
    double *want = alloc_d((size_t)n);
    for (int64_t k = 0; k < n; k++) want[k] = 0.0;
    for (int i = 0; i < batch; i++)
        for (int r = 0; r < M; r++)
            for (int c = 0; c < N; c++) {
                double acc = 0;
                for (int k = 0; k < K; k++) {
                    const double a = ta == 'N' ? A[i * sa + (size_t)r * lda + k] : A[i * sa + (size_t)k * lda + r];
                    const double b = tb == 'N' ? B[i * sb + (size_t)k * ldb + c] : B[i * sb + (size_t)c * ldb + k];
                    acc += a * b;
                }
                want[(size_t)r * ldc + c] += acc;
            }
    check_close_d(cname("sgemm_batched_exact %c%c vs double", ta, tb), sums_to_floats(whole, n), want, (size_t)n, 1e-5,
                  1e-5 * K);
    test_release();
}

static void invariant_checks(void) {
    const char tr[2] = {'N', 'T'};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            invariant_rows(tr[a], tr[b]);
            invariant_batched(tr[a], tr[b]);
        }
}

static void cpu_checks(void) {
    const spk_gemm_backend library = spk_gemm_get_backend();
    check_true(spk_gemm_set_backend(SPK_GEMM_BLAS) == 0, "BLAS backend available");
    run_all();
    invariant_checks();
    // oneDNN when the library was built with it (SPK_USE_DNNL)
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0) {
        printf("test_gemm: also checking the oneDNN backend\n");
        run_all();
        invariant_checks();
    }
    spk_gemm_set_backend(library);
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(char ta, char tb) {
    const int M = 37, N = 29, K = 53;
    const int lda = (ta == 'N' ? K : M) + 3, rows_a = ta == 'N' ? M : K;
    const int ldb = (tb == 'N' ? N : K) + 2, rows_b = tb == 'N' ? K : N;
    const int ldc = N + 5;
    const size_t na = (size_t)rows_a * lda, nb = (size_t)rows_b * ldb, nc = (size_t)M * ldc;
    float *A = rand_f(na, -1, 1), *B = rand_f(nb, -1, 1), *C = rand_f(nc, -1, 1);
    float *dA = dev_f(A, na), *dB = dev_f(B, nb), *dC = dev_f(C, nc);
    spk_sgemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, C, ldc);
    g_be->spk_sgemm(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.3f, dC, ldc);
    cmp(cname("sgemm %c%c, strided, beta 0.3", ta, tb), dC, C, nc, TOL_GEMM);
    // beta = 0: C is not read (NaN stays out)
    fill_nan(C, (size_t)M * N);
    dev_set(dC, C, (size_t)M * N);
    spk_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
    g_be->spk_sgemm(ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N);
    cmp(cname("sgemm %c%c, beta 0 over NaN", ta, tb), dC, C, (size_t)M * N, TOL_GEMM);
    // a batch of 4 with a shared A (stride 0), as the attentive pooling uses it
    const int batch = 4;
    const int64_t sb = (int64_t)nb, sc = (int64_t)nc;
    float *Bb = rand_f(nb * batch, -1, 1), *Cb = rand_f(nc * batch, -1, 1);
    float *dBb = dev_f(Bb, nb * batch), *dCb = dev_f(Cb, nc * batch);
    spk_sgemm_batched(ta, tb, M, N, K, 0.7f, A, lda, 0, Bb, ldb, sb, 1.0f, Cb, ldc, sc, batch);
    g_be->spk_sgemm_batched(ta, tb, M, N, K, 0.7f, dA, lda, 0, dBb, ldb, sb, 1.0f, dCb, ldc, sc, batch);
    cmp(cname("sgemm_batched %c%c, shared A", ta, tb), dCb, Cb, nc * batch, TOL_GEMM);
    // strideC = 0: the batch summed into C (beta 0.5), and with beta 0 (C not read: NaN stays out)
    float *Cs = rand_f(nc, -1, 1);
    float *dCs = dev_f(Cs, nc);
    spk_sgemm_batched(ta, tb, M, N, K, 0.7f, A, lda, 0, Bb, ldb, sb, 0.5f, Cs, ldc, 0, batch);
    g_be->spk_sgemm_batched(ta, tb, M, N, K, 0.7f, dA, lda, 0, dBb, ldb, sb, 0.5f, dCs, ldc, 0, batch);
    cmp(cname("sgemm_batched %c%c, summed, beta 0.5", ta, tb), dCs, Cs, nc, TOL_GEMM);
    fill_nan(Cs, (size_t)M * N);
    dev_set(dCs, Cs, (size_t)M * N);
    spk_sgemm_batched(ta, tb, M, N, K, 0.7f, A, lda, 0, Bb, ldb, sb, 0.0f, Cs, N, 0, batch);
    g_be->spk_sgemm_batched(ta, tb, M, N, K, 0.7f, dA, lda, 0, dBb, ldb, sb, 0.0f, dCs, N, 0, batch);
    cmp(cname("sgemm_batched %c%c, summed, beta 0", ta, tb), dCs, Cs, (size_t)M * N, TOL_GEMM);
    dev_release();
    test_release();
}

static void backend_checks(void) { for_each_transpose(backend_case); }

int main(int argc, char **argv) { return test_main(argc, argv, "test_gemm", 7, cpu_checks, backend_checks); }
