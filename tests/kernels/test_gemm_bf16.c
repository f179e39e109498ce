// spk_gemm_bf16: every transpose combination, row strides beyond the rows, beta = 0 over NaN and
// beta = 1 accumulation, batches with a shared A, calls from inside a parallel region, on the
// native path (oneDNN's matmul on AVX512-BF16/AMX, when this CPU has it) and the widened one
// (float32 GEMM); against a double reference of the same bf16 operands (products are exact in
// float32: only float32 summation error is allowed), against the float32 GEMM of the unrounded
// operands at bf16 tolerance, and twice for the same bits. The invariant mode's twins: a row of
// spk_gemm_bf16_rows is the same alone and on 1 or 2 threads; the batched exact sums are the
// same for any split of the batch (along groups) and right against the reference. Then every
// backend against the CPU.
#include "backends.h"
#include "exact_check.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

static spk_bf16 *rand_h(size_t n) {
    float *f = rand_f(n, -1, 1);
    spk_bf16 *h = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    bf16_from_f32(h, f, n);
    return h;
}

// want[i, j] = op(A) op(B) in double from the bf16 values, + C when beta = 1
static double *reference(char ta, char tb, int M, int N, int K, const spk_bf16 *A, int lda, const spk_bf16 *B, int ldb,
                         float beta, const float *C, int ldc) {
    double *want = alloc_d((size_t)M * ldc);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            double acc = j < N ? 0.0 : C[(size_t)i * ldc + j];  // padding columns untouched
            for (int k = 0; j < N && k < K; k++) {
                const spk_bf16 a = ta == 'N' ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                const spk_bf16 b = tb == 'N' ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                acc += (double)spk_bf16_to_f32(a) * spk_bf16_to_f32(b);
            }
            if (j < N && beta != 0.0f) acc += C[(size_t)i * ldc + j];
            want[(size_t)i * ldc + j] = acc;
        }
    return want;
}

static void run_case(const char *path, char ta, char tb, int M, int N, int K, float beta) {
    const int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 5;
    const size_t na = (size_t)(ta == 'N' ? M : K) * lda, nb = (size_t)(tb == 'N' ? K : N) * ldb;
    const size_t nc = (size_t)M * ldc;
    spk_bf16 *A = rand_h(na), *B = rand_h(nb);
    float *C = rand_f(nc, -1, 1);
    const double *want = reference(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    float *C2 = copy_f(C, nc);
    if (beta == 0.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = C2[(size_t)i * ldc + j] = NAN;
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    char nm[160];
    snprintf(nm, sizeof nm, "[%s] gemm_bf16 %c%c M%d N%d K%d beta %g", path, ta, tb, M, N, K, beta);
    check_close_d(nm, C, want, nc, 1e-5, 1e-5 * (1 + K / 16.0));
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C2, ldc);
    snprintf(nm, sizeof nm, "[%s] gemm_bf16 %c%c M%d N%d K%d beta %g twice", path, ta, tb, M, N, K, beta);
    check_close(nm, C2, C, nc, 0, 0);
    test_release();
}

// Against the float32 GEMM of the operands before rounding: bf16's 8-bit mantissa, nothing worse.
static void run_vs_f32(const char *path) {
    const int M = 48, N = 200, K = 192;
    float *a = rand_f((size_t)M * K, -1, 1), *b = rand_f((size_t)K * N, -1, 1), *c = alloc_f((size_t)M * N);
    float *c32 = alloc_f((size_t)M * N);
    spk_bf16 *ah = (spk_bf16 *)test_alloc((size_t)M * K * 2), *bh = (spk_bf16 *)test_alloc((size_t)K * N * 2);
    bf16_from_f32(ah, a, (size_t)M * K);
    bf16_from_f32(bh, b, (size_t)K * N);
    spk_gemm_bf16('N', 'N', M, N, K, ah, K, bh, N, 0.0f, c, N);
    spk_sgemm('N', 'N', M, N, K, 1.0f, a, K, b, N, 0.0f, c32, N);
    double num = 0, den = 0, diff = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) {
        num += ((double)c[i] - c32[i]) * ((double)c[i] - c32[i]);
        den += (double)c32[i] * c32[i];
        diff += c[i] != c32[i];
    }
    const double err = sqrt(num / den);
    char nm[128];
    snprintf(nm, sizeof nm, "[%s] gemm_bf16 vs fp32 GEMM: normalised error %.2e within 1e-2, operands rounded", path,
             err);
    check_true(err < 1e-2 && diff > 0, nm);
    test_release();
}

// The batch is each item's GEMM (a shared A with stride 0, padded row strides), and the same
// GEMMs from inside a parallel region (each on its thread) match the serial calls.
static void run_batched(const char *path, char ta, char tb) {
    const int M = 19, N = 33, K = 40, batch = 5;
    const int lda = (ta == 'N' ? K : M) + 1, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 3;
    const int64_t sb = (int64_t)(tb == 'N' ? K : N) * ldb + 4, sc = (int64_t)M * ldc + 1;
    spk_bf16 *A = rand_h((size_t)(ta == 'N' ? M : K) * lda);
    spk_bf16 *B = rand_h((size_t)(sb * batch));
    float *C = rand_f((size_t)(sc * batch), -1, 1);
    float *want = copy_f(C, (size_t)(sc * batch));
    float *nested = copy_f(C, (size_t)(sc * batch));
    for (int i = 0; i < batch; i++) spk_gemm_bf16(ta, tb, M, N, K, A, lda, B + i * sb, ldb, 1.0f, want + i * sc, ldc);
    spk_gemm_bf16_batched(ta, tb, M, N, K, A, lda, 0, B, ldb, sb, 1.0f, C, ldc, sc, batch);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < batch; i++) spk_gemm_bf16(ta, tb, M, N, K, A, lda, B + i * sb, ldb, 1.0f, nested + i * sc, ldc);
    char nm[96];
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_batched %c%c, shared A", path, ta, tb);
    check_close(nm, C, want, (size_t)(sc * batch), 1e-5, 1e-5 * (1 + K / 16.0));
    snprintf(nm, sizeof nm, "[%s] gemm_bf16 %c%c inside a parallel region", path, ta, tb);
    check_close(nm, nested, want, (size_t)(sc * batch), 1e-5, 1e-5 * (1 + K / 16.0));
    test_release();
}

// More shapes than the primitive cache holds (inference on utterances of many lengths): the
// least recently used ones make room, and every result stays right.
static void run_many_shapes(const char *path) {
    const int M = 8, K = 16, shapes = 300;
    spk_bf16 *A = rand_h((size_t)M * K), *B = rand_h((size_t)K * shapes);
    float *C = alloc_f((size_t)M * shapes);
    int bad = 0;
    for (int n = 1; n <= shapes; n++) {
        spk_gemm_bf16('N', 'N', M, n, K, A, K, B, n, 0.0f, C, n);
        const double *want = reference('N', 'N', M, n, K, A, K, B, n, 0.0f, C, n);
        for (int i = 0; i < M * n; i++) bad += fabs(C[i] - want[i]) > 1e-5 * (1 + K / 16.0);
    }
    char nm[96];
    snprintf(nm, sizeof nm, "[%s] gemm_bf16 over %d shapes", path, shapes);
    check_true(bad == 0, nm);
    test_release();
}

// ---- the world-size-invariant mode ----------------------------------------------------------
static void invariant_case(const char *path, char ta, char tb) {
    const int M = 12, N = 300, K = 700, batch = 6;  // big enough for the libraries to thread
    const int lda = (ta == 'N' ? K : M) + 1, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 3;
    const int64_t sa = (int64_t)(ta == 'N' ? M : K) * lda, sb = (int64_t)(tb == 'N' ? K : N) * ldb,
                  n = (int64_t)M * ldc;
    spk_bf16 *A = rand_h((size_t)sa * batch), *B = rand_h((size_t)sb * batch);
    float *C2 = zeros_f((size_t)n), *C1 = zeros_f((size_t)n), *rows = zeros_f((size_t)n);
    char nm[160];
    int before = with_threads(2);
    spk_gemm_bf16_rows(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C2, ldc);
    with_threads(1);
    spk_gemm_bf16_rows(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C1, ldc);
    with_threads(before);
    for (int i = 0; i < M; i++)  // each row alone
        spk_gemm_bf16_rows(ta, tb, 1, N, K, ta == 'N' ? A + (size_t)i * lda : A + i, lda, B, ldb, 0.0f,
                           rows + (size_t)i * ldc, ldc);
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_rows %c%c: a row is the same alone and on 1 or 2 threads", path, ta, tb);
    check_true(memcmp(C1, C2, sizeof(float) * n) == 0 && memcmp(C1, rows, sizeof(float) * n) == 0, nm);
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_rows %c%c vs reference", path, ta, tb);
    check_close_d(nm, C1, reference(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C1, ldc), (size_t)n, 1e-5,
                  1e-5 * (1 + K / 16.0));

    float *fixed = zeros_f((size_t)n * batch), *loop = zeros_f((size_t)n * batch), *tmp = alloc_f((size_t)n);
    spk_gemm_bf16_batched_fixed(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, 0.0f, fixed, ldc, n, batch);
    for (int i = 0; i < batch; i++)
        spk_gemm_bf16_fixed(ta, tb, M, N, K, A + i * sa, lda, B + i * sb, ldb, 0.0f, loop + (size_t)i * n, ldc);
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_batched_fixed %c%c is the loop of fixed GEMMs", path, ta, tb);
    check_true(memcmp(fixed, loop, sizeof(float) * n * batch) == 0, nm);

    xsum_t whole = host_sums(n), items = host_sums(n), g2 = host_sums(n), g2split = host_sums(n);
    before = with_threads(2);
    spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, whole, ldc, batch, 1);
    spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, g2, ldc, batch, 2);
    with_threads(1);
    for (int i = batch - 1; i >= 0; i--)
        spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A + i * sa, lda, sa, B + i * sb, ldb, sb, tmp, items, ldc, 1, 1);
    spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A + 4 * sa, lda, sa, B + 4 * sb, ldb, sb, tmp, g2split, ldc, 2, 2);
    spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, tmp, g2split, ldc, 4, 2);
    with_threads(before);
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_batched_exact %c%c: the same sums item by item, groups split", path, ta,
             tb);
    check_true(same_sums(whole, items, n) && same_sums(g2, g2split, n), nm);
    double *want = alloc_d((size_t)n);
    for (int64_t k = 0; k < n; k++) want[k] = 0.0;
    for (int i = 0; i < batch; i++) {
        const double *item = reference(ta, tb, M, N, K, A + i * sa, lda, B + i * sb, ldb, 0.0f, tmp, ldc);
        for (int r = 0; r < M; r++)
            for (int c = 0; c < N; c++) want[(size_t)r * ldc + c] += item[(size_t)r * ldc + c];
    }
    float *got = sums_to_floats(g2, n);
    for (int r = 0; r < M; r++)
        for (int c = N; c < ldc; c++) got[(size_t)r * ldc + c] = 0.0f;  // columns past N: no sums
    snprintf(nm, sizeof nm, "[%s] gemm_bf16_batched_exact %c%c groups of 2 vs reference", path, ta, tb);
    check_close_d(nm, got, want, (size_t)n, 1e-5, 1e-5 * (1 + K / 16.0));
    test_release();
}

static void run_all(const char *path) {
    const char tr[2] = {'N', 'T'};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            run_case(path, tr[a], tr[b], 7, 9, 5, 0.0f);
            run_case(path, tr[a], tr[b], 33, 65, 129, 1.0f);
            run_case(path, tr[a], tr[b], 64, 200, 192, 1.0f);
            run_case(path, tr[a], tr[b], 1, 17, 3, 0.0f);
            run_batched(path, tr[a], tr[b]);
        }
    run_vs_f32(path);
    run_many_shapes(path);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) invariant_case(path, tr[a], tr[b]);
}

static void cpu_checks(void) {
    const spk_gemm_backend library = spk_gemm_get_backend();
    if (spk_gemm_bf16_native()) {
        printf("test_gemm_bf16: native bf16 (oneDNN matmul)\n");
        run_all("native");
    } else {
        printf("test_gemm_bf16: this CPU or build has no native bf16 GEMM; checking the widened path only\n");
    }
    check_true(spk_gemm_set_backend(SPK_GEMM_BLAS) == 0, "BLAS backend available");
    check_true(!spk_gemm_bf16_native(), "the BLAS backend widens bf16 to float32");
    run_all("widened");
    spk_gemm_set_backend(library);
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(char ta, char tb) {
    const int M = 37, N = 29, K = 53;
    const int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 2, ldc = N + 5;
    const size_t na = (size_t)(ta == 'N' ? M : K) * lda, nb = (size_t)(tb == 'N' ? K : N) * ldb;
    const size_t nc = (size_t)M * ldc;
    spk_bf16 *A = rand_h(na), *B = rand_h(nb);
    float *C = rand_f(nc, -1, 1);
    spk_bf16 *dA = (spk_bf16 *)dev_alloc(na * 2), *dB = (spk_bf16 *)dev_alloc(nb * 2);
    g_be->upload(dA, A, na * 2);
    g_be->upload(dB, B, nb * 2);
    float *dC = dev_f(C, nc);
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C, ldc);
    g_be->spk_gemm_bf16(ta, tb, M, N, K, dA, lda, dB, ldb, 1.0f, dC, ldc);
    cmp(cname("gemm_bf16 %c%c, strided, beta 1", ta, tb), dC, C, nc, TOL_GEMM);
    fill_nan(C, (size_t)M * N);
    dev_set(dC, C, (size_t)M * N);
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, N);
    g_be->spk_gemm_bf16(ta, tb, M, N, K, dA, lda, dB, ldb, 0.0f, dC, N);
    cmp(cname("gemm_bf16 %c%c, beta 0 over NaN", ta, tb), dC, C, (size_t)M * N, TOL_GEMM);
    const int batch = 4;
    spk_bf16 *Bb = rand_h(nb * batch);
    float *Cb = rand_f(nc * batch, -1, 1);
    spk_bf16 *dBb = (spk_bf16 *)dev_alloc(nb * batch * 2);
    g_be->upload(dBb, Bb, nb * batch * 2);
    float *dCb = dev_f(Cb, nc * batch);
    spk_gemm_bf16_batched(ta, tb, M, N, K, A, lda, 0, Bb, ldb, (int64_t)nb, 1.0f, Cb, ldc, (int64_t)nc, batch);
    g_be->spk_gemm_bf16_batched(ta, tb, M, N, K, dA, lda, 0, dBb, ldb, (int64_t)nb, 1.0f, dCb, ldc, (int64_t)nc, batch);
    cmp(cname("gemm_bf16_batched %c%c, shared A", ta, tb), dCb, Cb, nc * batch, TOL_GEMM);

    // the invariant twins: rows, the fixed batch, the exact batched sums (groups of 2)
    const spk_backend_t *twin = spk_backend_invariant(g_be);
    spk_gemm_bf16_rows(ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C, ldc);
    dev_set(dC, C, nc);
    twin->spk_gemm_bf16(ta, tb, M, N, K, dA, lda, dB, ldb, 1.0f, dC, ldc);
    spk_gemm_bf16_rows(ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C, ldc);
    cmp(cname("gemm_bf16_rows %c%c", ta, tb), dC, C, nc, TOL_GEMM);
    twin->spk_gemm_bf16_batched(ta, tb, M, N, K, dA, lda, 0, dBb, ldb, (int64_t)nb, 0.0f, dCb, ldc, (int64_t)nc, batch);
    spk_gemm_bf16_batched_fixed(ta, tb, M, N, K, A, lda, 0, Bb, ldb, (int64_t)nb, 0.0f, Cb, ldc, (int64_t)nc, batch);
    for (int i = 0; i < batch; i++) {  // columns past N are not written: compare the written ones
        float *got = dev_get(dCb + (size_t)i * nc, nc);
        for (int r = 0; r < M; r++)
            for (int c = N; c < ldc; c++) got[(size_t)r * ldc + c] = Cb[(size_t)i * nc + (size_t)r * ldc + c];
        dev_set(dCb + (size_t)i * nc, got, nc);
    }
    cmp(cname("gemm_bf16_batched_fixed %c%c", ta, tb), dCb, Cb, nc * batch, TOL_GEMM);
    xsum_t hs = host_sums((int64_t)nc), ds = xsum_layout(dev_alloc(xsum_bytes((int64_t)nc)), (int64_t)nc);
    float *htmp = alloc_f(nc), *dtmp = dev_f(NULL, nc), *dsum = dev_f(NULL, nc);
    spk_gemm_bf16_batched_exact(ta, tb, M, N, K, A, lda, 0, Bb, ldb, (int64_t)nb, htmp, hs, ldc, batch, 2);
    g_be->spk_gemm_bf16_batched_exact(ta, tb, M, N, K, dA, lda, 0, dBb, ldb, (int64_t)nb, dtmp, ds, ldc, batch, 2);
    g_be->xsum_to_float(dsum, ds, (int64_t)nc);
    cmp(cname("gemm_bf16_batched_exact %c%c", ta, tb), dsum, sums_to_floats(hs, (int64_t)nc), nc, TOL_GEMM);
    dev_release();
    test_release();
}

static void backend_checks(void) { for_each_transpose(backend_case); }

int main(int argc, char **argv) { return test_main(argc, argv, "test_gemm_bf16", 17, cpu_checks, backend_checks); }
