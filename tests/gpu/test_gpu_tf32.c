// --tf32 (spk_cuda_set_tf32): TF32 tensor-core math in cuDNN convolutions and cuBLAS GEMMs
// rounds inputs to a 10-bit mantissa, so results stay within ~1e-3 of the CPU's fp32 and must
// differ from the GPU's own fp32 results (else TF32 is not engaged). GPU only: every op's fp32
// checks are the kernel_<op>_cuda tests (tests/kernels). Without a CUDA device it reports
// SKIPPED (exit 77).
#include "../kernels/backends.h"
#include "kernels/conv1d.h"
#include "kernels/gemm.h"

#ifdef SPKDDP_HAVE_CUDA
static void tf32_checks(void) {
    const double tol = 1e-2;
    const int B = 4, Cin = 64, Cout = 48, T = 100, K = 3, d = 2;
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *gy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d)), *y = alloc_f(ny);
    float *gx = zeros_f(nx), *gw = zeros_f(nw);
    conv1d_forward(y, x, w, NULL, B, Cin, Cout, T, K, d, ws);
    conv1d_backward(gx, gw, NULL, gy, x, w, B, Cin, Cout, T, K, d, ws);
    const int M = 64, N = 80, Kg = 96;
    float *A = rand_f((size_t)M * Kg, -1, 1), *Bm = rand_f((size_t)Kg * N, -1, 1);
    float* C = alloc_f((size_t)M * N);
    spk_sgemm('N', 'N', M, N, Kg, 1.0f, A, Kg, Bm, N, 0.0f, C, N);

    // the fp32 GPU results first: TF32 must change them
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *dgy = dev_f(gy, ny), *dy = dev_f(NULL, ny);
    float *dA = dev_f(A, (size_t)M * Kg), *dB = dev_f(Bm, (size_t)Kg * N);
    float* dC = dev_f(NULL, (size_t)M * N);
    float* dws32 = dev_f(NULL, g_be->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    g_be->conv1d_forward(dy, dx, dw, NULL, B, Cin, Cout, T, K, d, dws32);
    g_be->spk_sgemm('N', 'N', M, N, Kg, 1.0f, dA, Kg, dB, N, 0.0f, dC, N);
    const float *y32 = dev_get(dy, ny), *c32 = dev_get(dC, (size_t)M * N);

    spk_cuda_set_tf32(1);  // re-plans the convolutions: workspace sizes may change
    float* dws = dev_f(NULL, g_be->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    float *dgx = dev_f(NULL, nx), *dgw = dev_f(NULL, nw);
    g_be->conv1d_forward(dy, dx, dw, NULL, B, Cin, Cout, T, K, d, dws);
    g_be->conv1d_backward(dgx, dgw, NULL, dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
    cmp("conv1d forward tf32", dy, y, ny, tol);
    cmp("conv1d dx tf32", dgx, gx, nx, tol);
    cmp("conv1d dw tf32", dgw, gw, nw, tol);
    g_be->spk_sgemm('N', 'N', M, N, Kg, 1.0f, dA, Kg, dB, N, 0.0f, dC, N);
    cmp("sgemm tf32", dC, C, (size_t)M * N, tol);
    const float *ytf = dev_get(dy, ny), *ctf = dev_get(dC, (size_t)M * N);
    const int conv_changed = memcmp(ytf, y32, sizeof(float) * ny) != 0;
    const int gemm_changed = memcmp(ctf, c32, sizeof(float) * M * N) != 0;
    check_true(conv_changed || gemm_changed, "tf32 engaged: results differ from the fp32 ones");
    printf("tf32 engaged: conv %s, gemm %s\n", conv_changed ? "changed" : "UNCHANGED (FMA fallback?)",
           gemm_changed ? "changed" : "UNCHANGED");
    spk_cuda_set_tf32(0);
    dev_release();
    test_release();
}
#endif

int main(int argc, char** argv) {
    (void)argc;
#ifdef SPKDDP_HAVE_CUDA
    char* cuda_only[] = {argv[0], "cuda"};
    return test_main(2, cuda_only, "test_gpu_tf32", 20240611, NULL, tf32_checks);
#else
    (void)argv;
    printf("SKIPPED: this spkddp was built without CUDA\n");
    return 77;
#endif
}
