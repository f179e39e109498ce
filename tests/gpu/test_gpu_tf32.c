// --tf32 (spk_cuda_set_tf32): TF32 tensor-core math in cuDNN convolutions and cuBLAS GEMMs
// rounds inputs to a 10-bit mantissa, so results stay within ~1e-3 of the CPU's fp32, and each
// convolution pass and the GEMM must move from the GPU's own fp32 result by a TF32-sized step
// (else TF32 does not reach it). Checked at production shapes (usage: test_gpu_tf32 [C B T],
// default ECAPA's dilated convolution at C=1024, batch 32, 200 frames; always the AAM head's GEMM
// of a batch of 128 against 5994 speakers of 192 dimensions): on small problems cuBLAS and cuDNN
// often choose kernels without tensor cores, and the check would fail on a correct build.
// Prints cuDNN's choices. GPU only: every op's fp32 checks are the kernel_<op>_cuda tests
// (tests/kernels). Without a CUDA device it reports SKIPPED (exit 77).
#include "../kernels/backends.h"
#include "kernels/conv1d.h"
#include "kernels/gemm.h"

static int g_C = 1024, g_B = 32, g_T = 200;

#ifdef SPKDDP_HAVE_CUDA
// TF32 rounds inputs to 10 mantissa bits: results move ~1e-4..1e-3 from fp32. fp32 algorithms
// that differ only in summation order move them ~1e-7, and the same algorithm not at all.
#define TF32_MOVES 1e-5

// TF32 reached `name` when its result moved from the GPU's own fp32 one by a TF32-sized step.
static void tf32_reached(const char *name, const float *tf, const float *fp32, size_t n) {
    const double moved = norm_err(tf, fp32, n);
    printf("%s %s: %.2e from the fp32 result (TF32 moves it more than %.0e)\n", moved > TF32_MOVES ? "  ok" : "FAIL",
           name, moved, TF32_MOVES);
    check_true(moved > TF32_MOVES, name);
}

static void tf32_checks(void) {
    const double tol = 1e-2;
    const int B = g_B, Cin = g_C, Cout = g_C, T = g_T, K = 3, d = 2;
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *gy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d)), *y = alloc_f(ny);
    float *gx = zeros_f(nx), *gw = zeros_f(nw);
    conv1d_forward(y, x, w, NULL, B, Cin, Cout, T, K, d, ws);
    conv1d_backward(gx, 1, gw, NULL, gy, x, w, B, Cin, Cout, T, K, d, ws);
    // The AAM head's cosines at batch 128: (128, 192 embedding) x (192, 5994 speakers).
    const int M = 128, N = 5994, Kg = 192;
    float *A = rand_f((size_t)M * Kg, -1, 1), *Bm = rand_f((size_t)Kg * N, -1, 1);
    float *C = alloc_f((size_t)M * N);
    spk_sgemm('N', 'N', M, N, Kg, 1.0f, A, Kg, Bm, N, 0.0f, C, N);

    // The GPU's fp32 results first, then TF32's: every pass must move.
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *dgy = dev_f(gy, ny), *dy = dev_f(NULL, ny);
    float *dA = dev_f(A, (size_t)M * Kg), *dB = dev_f(Bm, (size_t)Kg * N), *dC = dev_f(NULL, (size_t)M * N);
    float *dgx = dev_f(NULL, nx), *dgw = dev_f(NULL, nw);
    const float *fp32[4];
    const float *tf[4];
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        spk_cuda_set_tf32(tf32);  // re-plans the convolutions: workspace sizes may change
        float *dws = dev_f(NULL, g_be->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
        g_be->vec_zero(dgx, nx);
        g_be->vec_zero(dgw, nw);
        g_be->conv1d_forward(dy, dx, dw, NULL, B, Cin, Cout, T, K, d, dws);
        g_be->conv1d_backward(dgx, 1, dgw, NULL, dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
        g_be->spk_sgemm('N', 'N', M, N, Kg, 1.0f, dA, Kg, dB, N, 0.0f, dC, N);
        const float **r = tf32 ? tf : fp32;
        r[0] = dev_get(dy, ny), r[1] = dev_get(dgx, nx), r[2] = dev_get(dgw, nw), r[3] = dev_get(dC, (size_t)M * N);
        printf("cuDNN's choices %s:\n", tf32 ? "with TF32 allowed" : "in fp32");
        spk_cuda_print_conv_plans();
    }
    cmp("conv1d forward tf32", dy, y, ny, tol);
    cmp("conv1d dx tf32", dgx, gx, nx, tol);
    cmp("conv1d dw tf32", dgw, gw, nw, tol);
    cmp("sgemm tf32", dC, C, (size_t)M * N, tol);
    tf32_reached("tf32 reaches the convolution's forward pass", tf[0], fp32[0], ny);
    tf32_reached("tf32 reaches the convolution's backward-data pass", tf[1], fp32[1], nx);
    tf32_reached("tf32 reaches the convolution's backward-filter pass", tf[2], fp32[2], nw);
    tf32_reached("tf32 reaches the GEMM", tf[3], fp32[3], (size_t)M * N);
    spk_cuda_set_tf32(0);
    dev_release();
    test_release();
}
#else
static void tf32_checks(void) {}  // never runs: without CUDA the test is skipped
#endif

int main(int argc, char **argv) {
    if (argc == 4) {
        g_C = atoi(argv[1]), g_B = atoi(argv[2]), g_T = atoi(argv[3]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [C B T]\n", argv[0]);
        return 2;
    }
    if (g_C < 8 || g_B < 1 || g_T < 8) {
        fprintf(stderr, "%s: C >= 8, B >= 1, T >= 8\n", argv[0]);
        return 2;
    }
    return test_main_cuda(argv[0], "test_gpu_tf32", 20240611, tf32_checks);
}
