// CUDA kernels (kernels/cuda/kernels_cuda.h) against the CPU kernels (kernels/*.h): every op,
// forward and backward, on random inputs, by normalised error ||gpu - cpu|| / ||cpu||.
// Backward calls start from random prefilled gradients, so accumulation is checked too, and
// backward passes are run twice to check that the gradients are bitwise identical.
// Without a CUDA device the test prints SKIPPED and exits 77 (reported as skipped by ctest).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/test_common.h"
#include "kernels/aam_softmax.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/device.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/optim.h"
#include "kernels/pooling.h"
#include "kernels/tensor_ops.h"
#include "kernels/xent.h"

// fp32 tolerances: elementwise and row reductions, and the GEMM/convolution family (longer
// sums in a different order than OpenBLAS).
#define TOL 1e-5
#define TOL_GEMM 1e-4

static int g_checks = 0;

// ---- device buffers -------------------------------------------------------------------------
static float* dev_f(const float* host, size_t n) {
    float* d = (float*)spk_cuda_malloc(sizeof(float) * n);
    if (host) spk_cuda_upload(d, host, sizeof(float) * n);
    return d;
}
static int* dev_i(const int* host, size_t n) {
    int* d = (int*)spk_cuda_malloc(sizeof(int) * n);
    spk_cuda_upload(d, host, sizeof(int) * n);
    return d;
}
static float* host_f(const float* dev, size_t n) {
    float* h = alloc_f(n);
    spk_cuda_download(h, dev, sizeof(float) * n);
    return h;
}

// ---- comparisons ----------------------------------------------------------------------------
static double norm_err(const float* got, const float* want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    if (num != num) return INFINITY;  // NaN somewhere
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// Device buffer `dev` against host reference `want`.
static void cmp(const char* name, const float* dev, const float* want, size_t n, double tol) {
    float* got = host_f(dev, n);
    const double e = norm_err(got, want, n);
    g_checks++;
    if (!(e <= tol)) {
        printf("FAIL %-44s normalised error %.3g > %.0e\n", name, e, tol);
        g_failures++;
    } else {
        printf("  ok %-44s %.2e\n", name, e);
    }
    free(got);
}

static void cmp_scalar(const char* name, const float* dev, double want, double tol) {
    float got;
    spk_cuda_download(&got, dev, sizeof got);
    const double e = fabs((double)got - want) / (fabs(want) > 0.0 ? fabs(want) : 1.0);
    g_checks++;
    if (!(e <= tol)) {
        printf("FAIL %-44s got %.9g want %.9g\n", name, (double)got, want);
        g_failures++;
    } else {
        printf("  ok %-44s %.2e\n", name, e);
    }
}

static void cmp_int(const char* name, const int* dev, int want) {
    int got;
    spk_cuda_download(&got, dev, sizeof got);
    g_checks++;
    if (got != want) {
        printf("FAIL %-44s got %d want %d\n", name, got, want);
        g_failures++;
    } else {
        printf("  ok %-44s %d\n", name, got);
    }
}

// Two device buffers must hold the same bits.
static void same_bits(const char* name, const float* d1, const float* d2, size_t n) {
    float* a = host_f(d1, n);
    float* b = host_f(d2, n);
    g_checks++;
    if (memcmp(a, b, sizeof(float) * n) != 0) {
        printf("FAIL %-44s two runs differ\n", name);
        g_failures++;
    } else {
        printf("  ok %-44s bitwise identical\n", name);
    }
    free(a);
    free(b);
}

static char g_name[160];
static const char* nm(const char* fmt, const char* what) {
    snprintf(g_name, sizeof g_name, fmt, what);
    return g_name;
}

// ---- memory helpers -------------------------------------------------------------------------
static void test_memory(void) {
    printf("memory helpers\n");
    const size_t n = 1000;
    float* h = rand_f(n, -1, 1);
    float* d = dev_f(h, n);
    cmp("upload/download round trip", d, h, n, 0.0);
    spk_cuda_memset0(d, sizeof(float) * n);
    float* z = zeros_f(n);
    cmp("memset0", d, z, n, 0.0);
    spk_cuda_sync();
    spk_cuda_free(d);
    spk_cuda_free(NULL);
    free(h);
    free(z);
}

// ---- gemm -----------------------------------------------------------------------------------
static void test_gemm(void) {
    printf("gemm\n");
    const int M = 37, N = 29, K = 53;
    const char ops[2] = {'N', 'T'};
    for (int ia = 0; ia < 2; ia++) {
        for (int ib = 0; ib < 2; ib++) {
            const char ta = ops[ia], tb = ops[ib];
            const int lda = (ta == 'N' ? K : M) + 3, rows_a = ta == 'N' ? M : K;
            const int ldb = (tb == 'N' ? N : K) + 2, rows_b = tb == 'N' ? K : N;
            const int ldc = N + 5;
            float* A = rand_f((size_t)rows_a * lda, -1, 1);
            float* B = rand_f((size_t)rows_b * ldb, -1, 1);
            float* C = rand_f((size_t)M * ldc, -1, 1);
            float *dA = dev_f(A, (size_t)rows_a * lda), *dB = dev_f(B, (size_t)rows_b * ldb);
            float* dC = dev_f(C, (size_t)M * ldc);
            spk_sgemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, C, ldc);
            spk_sgemm_cuda(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.3f, dC, ldc);
            char what[8] = {ta, tb, 0};
            cmp(nm("sgemm %s, strided, beta 0.3", what), dC, C, (size_t)M * ldc, TOL_GEMM);
            // beta = 0: C is not read (NaN stays out)
            fill_nan(C, (size_t)M * N);
            spk_cuda_upload(dC, C, sizeof(float) * M * N);
            spk_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            spk_sgemm_cuda(ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N);
            cmp(nm("sgemm %s, beta 0 over NaN", what), dC, C, (size_t)M * N, TOL_GEMM);
            // a batch of 4 with a shared A (stride 0), as the attentive pooling uses it
            const int batch = 4;
            const int64_t sb = (int64_t)rows_b * ldb, sc = (int64_t)M * ldc;
            float* Bb = rand_f((size_t)(sb * batch), -1, 1);
            float* Cb = rand_f((size_t)(sc * batch), -1, 1);
            float *dBb = dev_f(Bb, (size_t)(sb * batch)), *dCb = dev_f(Cb, (size_t)(sc * batch));
            spk_sgemm_batched(ta, tb, M, N, K, 0.7f, A, lda, 0, Bb, ldb, sb, 1.0f, Cb, ldc, sc, batch);
            spk_sgemm_batched_cuda(ta, tb, M, N, K, 0.7f, dA, lda, 0, dBb, ldb, sb, 1.0f, dCb, ldc, sc,
                                   batch);
            cmp(nm("sgemm_batched %s, shared A", what), dCb, Cb, (size_t)(sc * batch), TOL_GEMM);
            spk_cuda_free(dBb);
            spk_cuda_free(dCb);
            free(Bb);
            free(Cb);
            spk_cuda_free(dA);
            spk_cuda_free(dB);
            spk_cuda_free(dC);
            free(A);
            free(B);
            free(C);
        }
    }
}

// ---- TF32 (--tf32) --------------------------------------------------------------------------
// Tensor-core math rounds inputs to a 10-bit mantissa: results stay within ~1e-3 of fp32.
static void test_tf32(void) {
    printf("tf32\n");
    const double tol = 1e-2;
    const int B = 4, Cin = 64, Cout = 48, T = 100, K = 3, d = 2;
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *gy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d)), *y = alloc_f(ny);
    float *gx = alloc_f(nx), *gw = alloc_f(nw);
    memset(gx, 0, sizeof(float) * nx);
    memset(gw, 0, sizeof(float) * nw);
    conv1d_forward(y, x, w, NULL, B, Cin, Cout, T, K, d, ws);
    conv1d_backward(gx, gw, NULL, gy, x, w, B, Cin, Cout, T, K, d, ws);
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *dgy = dev_f(gy, ny), *dy = dev_f(NULL, ny);
    // the fp32 GPU results first: TF32 must change them, or it is not engaged
    const int M = 64, N = 80, Kg = 96;
    float *A = rand_f((size_t)M * Kg, -1, 1), *Bm = rand_f((size_t)Kg * N, -1, 1), *C = alloc_f((size_t)M * N);
    float *dA = dev_f(A, (size_t)M * Kg), *dB = dev_f(Bm, (size_t)Kg * N), *dC = dev_f(NULL, (size_t)M * N);
    float* dws32 = dev_f(NULL, conv1d_workspace_floats_cuda(B, Cin, Cout, T, K, d));
    conv1d_forward_cuda(dy, dx, dw, NULL, B, Cin, Cout, T, K, d, dws32);
    spk_sgemm_cuda('N', 'N', M, N, Kg, 1.0f, dA, Kg, dB, N, 0.0f, dC, N);
    float *y32 = host_f(dy, ny), *c32 = host_f(dC, (size_t)M * N);
    spk_cuda_free(dws32);
    spk_cuda_set_tf32(1);
    float* dws = dev_f(NULL, conv1d_workspace_floats_cuda(B, Cin, Cout, T, K, d));
    float *dgx = dev_f(NULL, nx), *dgw = dev_f(NULL, nw);
    spk_cuda_memset0(dgx, sizeof(float) * nx);
    spk_cuda_memset0(dgw, sizeof(float) * nw);
    conv1d_forward_cuda(dy, dx, dw, NULL, B, Cin, Cout, T, K, d, dws);
    conv1d_backward_cuda(dgx, dgw, NULL, dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
    cmp("conv1d forward tf32", dy, y, ny, tol);
    cmp("conv1d dx tf32", dgx, gx, nx, tol);
    cmp("conv1d dw tf32", dgw, gw, nw, tol);
    // a GEMM through cuBLAS's TF32 mode
    spk_sgemm('N', 'N', M, N, Kg, 1.0f, A, Kg, Bm, N, 0.0f, C, N);
    spk_sgemm_cuda('N', 'N', M, N, Kg, 1.0f, dA, Kg, dB, N, 0.0f, dC, N);
    cmp("sgemm tf32", dC, C, (size_t)M * N, tol);
    float *ytf = host_f(dy, ny), *ctf = host_f(dC, (size_t)M * N);
    g_checks++;
    const int conv_changed = memcmp(ytf, y32, sizeof(float) * ny) != 0;
    const int gemm_changed = memcmp(ctf, c32, sizeof(float) * M * N) != 0;
    if (!conv_changed && !gemm_changed) {
        printf("FAIL %-44s results equal the fp32 ones: TF32 is not engaged\n", "tf32 engaged");
        g_failures++;
    } else {
        printf("  ok %-44s conv %s, gemm %s\n", "tf32 engaged", conv_changed ? "changed" : "UNCHANGED (FMA fallback?)",
               gemm_changed ? "changed" : "UNCHANGED");
    }
    free(y32);
    free(c32);
    free(ytf);
    free(ctf);
    spk_cuda_set_tf32(0);
    float* bufs[] = {dws, dx, dw, dgy, dy, dgx, dgw, dA, dB, dC};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hb[] = {x, w, gy, ws, y, gx, gw, A, Bm, C};
    for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) free(hb[i]);
}

// ---- conv1d ---------------------------------------------------------------------------------
static void test_conv(int B, int Cin, int Cout, int T, int K, int d, int with_bias) {
    char tag[96];
    snprintf(tag, sizeof tag, "B%d Cin%d Cout%d T%d K%d d%d%s", B, Cin, Cout, T, K, d,
             with_bias ? " bias" : "");
    printf("conv1d %s\n", tag);
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float* x = rand_f(nx, -1, 1);
    float* w = rand_f(nw, -0.5f, 0.5f);
    float* bias = with_bias ? rand_f(Cout, -1, 1) : NULL;
    float* ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    float* y = alloc_f(ny);
    conv1d_forward(y, x, w, bias, B, Cin, Cout, T, K, d, ws);

    const size_t nws = conv1d_workspace_floats_cuda(B, Cin, Cout, T, K, d);
    float* dws = dev_f(NULL, nws);
    float *dx_ = dev_f(x, nx), *dw_ = dev_f(w, nw), *db_ = with_bias ? dev_f(bias, Cout) : NULL;
    float* dy_ = dev_f(NULL, ny);
    conv1d_forward_cuda(dy_, dx_, dw_, db_, B, Cin, Cout, T, K, d, dws);
    cmp(nm("conv1d forward %s", tag), dy_, y, ny, TOL_GEMM);

    // backward into prefilled gradients
    float* gy = rand_f(ny, -1, 1);
    float *gx0 = rand_f(nx, -1, 1), *gw0 = rand_f(nw, -1, 1), *gb0 = rand_f(Cout, -1, 1);
    float *gx = copy_f(gx0, nx), *gw = copy_f(gw0, nw), *gb = copy_f(gb0, Cout);
    conv1d_backward(gx, gw, gb, gy, x, w, B, Cin, Cout, T, K, d, ws);
    float* dgy = dev_f(gy, ny);
    float *dgx = dev_f(gx0, nx), *dgw = dev_f(gw0, nw), *dgb = dev_f(gb0, Cout);
    conv1d_backward_cuda(dgx, dgw, dgb, dgy, dx_, dw_, B, Cin, Cout, T, K, d, dws);
    cmp(nm("conv1d dx %s", tag), dgx, gx, nx, TOL_GEMM);
    cmp(nm("conv1d dw %s", tag), dgw, gw, nw, TOL_GEMM);
    cmp(nm("conv1d dbias %s", tag), dgb, gb, Cout, TOL);
    // a second run from the same prefill must give the same bits
    float *dgx2 = dev_f(gx0, nx), *dgw2 = dev_f(gw0, nw), *dgb2 = dev_f(gb0, Cout);
    conv1d_backward_cuda(dgx2, dgw2, dgb2, dgy, dx_, dw_, B, Cin, Cout, T, K, d, dws);
    same_bits(nm("conv1d dx twice %s", tag), dgx, dgx2, nx);
    same_bits(nm("conv1d dw twice %s", tag), dgw, dgw2, nw);
    same_bits(nm("conv1d dbias twice %s", tag), dgb, dgb2, Cout);
    // only dw (dx and dbias NULL)
    spk_cuda_upload(dgw2, gw0, sizeof(float) * nw);
    conv1d_backward_cuda(NULL, dgw2, NULL, dgy, dx_, dw_, B, Cin, Cout, T, K, d, dws);
    same_bits(nm("conv1d dw alone %s", tag), dgw, dgw2, nw);

    float* bufs[] = {dws, dx_, dw_, db_, dy_, dgy, dgx, dgw, dgb, dgx2, dgw2, dgb2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {x, w, bias, ws, y, gy, gx0, gw0, gb0, gx, gw, gb};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

// ---- batchnorm ------------------------------------------------------------------------------
static void test_batchnorm(int B, int C, int T, int affine) {
    char tag[64];
    snprintf(tag, sizeof tag, "B%d C%d T%d%s", B, C, T, affine ? " affine" : "");
    printf("batchnorm %s\n", tag);
    const size_t n = (size_t)B * C * T;
    const float eps = 1e-5f, momentum = 0.1f;
    float* x = rand_f(n, -2, 3);
    float* wt = affine ? rand_f(C, 0.5f, 1.5f) : NULL;
    float* bs = affine ? rand_f(C, -1, 1) : NULL;
    float* rm = rand_f(C, -1, 1);
    float* rv = rand_f(C, 0.5f, 2);
    float *dx_ = dev_f(x, n), *dwt = affine ? dev_f(wt, C) : NULL,
          *dbs = affine ? dev_f(bs, C) : NULL;
    float *drm = dev_f(rm, C), *drv = dev_f(rv, C);
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C);
    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, wt, bs, B, C, T, eps, momentum);
    float *dy_ = dev_f(x, n), *dmean = dev_f(NULL, C), *drstd = dev_f(NULL, C);
    // in place on the GPU (y == x is allowed)
    batchnorm1d_forward_train_cuda(dy_, dmean, drstd, drm, drv, dy_, dwt, dbs, B, C, T, eps,
                                   momentum);
    cmp(nm("bn train y (in place) %s", tag), dy_, y, n, TOL);
    cmp(nm("bn train mean %s", tag), dmean, mean, C, TOL);
    cmp(nm("bn train rstd %s", tag), drstd, rstd, C, TOL);
    cmp(nm("bn running_mean %s", tag), drm, rm, C, TOL);
    cmp(nm("bn running_var %s", tag), drv, rv, C, TOL);

    // inference with the updated running statistics
    float* yi = alloc_f(n);
    batchnorm1d_forward_infer(yi, x, rm, rv, wt, bs, B, C, T, eps);
    batchnorm1d_forward_infer_cuda(dy_, dx_, drm, drv, dwt, dbs, B, C, T, eps);
    cmp(nm("bn infer y %s", tag), dy_, yi, n, TOL);

    // backward into prefilled gradients
    float* gy = rand_f(n, -1, 1);
    float *gx0 = rand_f(n, -1, 1), *gw0 = rand_f(C, -1, 1), *gb0 = rand_f(C, -1, 1);
    float *gx = copy_f(gx0, n), *gw = copy_f(gw0, C), *gb = copy_f(gb0, C);
    batchnorm1d_backward(gx, gw, gb, gy, x, wt, mean, rstd, B, C, T);
    float *dgy = dev_f(gy, n), *dgx = dev_f(gx0, n), *dgw = dev_f(gw0, C), *dgb = dev_f(gb0, C);
    batchnorm1d_backward_cuda(dgx, dgw, dgb, dgy, dx_, dwt, dmean, drstd, B, C, T);
    cmp(nm("bn dx %s", tag), dgx, gx, n, TOL);
    cmp(nm("bn dweight %s", tag), dgw, gw, C, TOL);
    cmp(nm("bn dbias %s", tag), dgb, gb, C, TOL);
    float *dgx2 = dev_f(gx0, n), *dgw2 = dev_f(gw0, C), *dgb2 = dev_f(gb0, C);
    batchnorm1d_backward_cuda(dgx2, dgw2, dgb2, dgy, dx_, dwt, dmean, drstd, B, C, T);
    same_bits(nm("bn dx twice %s", tag), dgx, dgx2, n);
    same_bits(nm("bn dweight twice %s", tag), dgw, dgw2, C);
    same_bits(nm("bn dbias twice %s", tag), dgb, dgb2, C);

    float* bufs[] = {dx_, dwt, dbs, drm, drv,  dy_,  dmean, drstd,
                     dgy, dgx, dgw, dgb, dgx2, dgw2, dgb2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {x, wt, bs, rm, rv, y, mean, rstd, yi, gy, gx0, gw0, gb0, gx, gw, gb};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

// ---- activations ----------------------------------------------------------------------------
typedef void (*act_fwd)(float*, const float*, size_t);
typedef void (*act_bwd)(float*, const float*, const float*, size_t);

static void test_activation(const char* name, act_fwd f, act_fwd fc, act_bwd b, act_bwd bc) {
    printf("%s\n", name);
    const size_t n = 10007;
    float* x = rand_f(n, -4, 4);
    float* y = alloc_f(n);
    f(y, x, n);
    float *dx_ = dev_f(x, n), *dy_ = dev_f(NULL, n);
    fc(dy_, dx_, n);
    cmp(nm("%s forward", name), dy_, y, n, TOL);
    float *gy = rand_f(n, -1, 1), *gx0 = rand_f(n, -1, 1);
    float* gx = copy_f(gx0, n);
    b(gx, gy, y, n);
    float *dgy = dev_f(gy, n), *dgx = dev_f(gx0, n);
    bc(dgx, dgy, dy_, n);
    cmp(nm("%s backward", name), dgx, gx, n, TOL);
    spk_cuda_free(dx_);
    spk_cuda_free(dy_);
    spk_cuda_free(dgy);
    spk_cuda_free(dgx);
    free(x);
    free(y);
    free(gy);
    free(gx0);
    free(gx);
}

// ReLU backward in place: g = y > 0 ? g : 0, y the forward output (with exact zeros)
static void test_relu_mask(void) {
    printf("relu_mask\n");
    const size_t n = 10007;
    float *x = rand_f(n, -4, 4), *y = alloc_f(n);
    relu_forward(y, x, n);
    float* g = rand_f(n, -1, 1);
    float *dyd = dev_f(y, n), *dgd = dev_f(g, n);
    relu_mask(g, y, n);
    relu_mask_cuda(dgd, dyd, n);
    cmp("relu_mask", dgd, g, n, 0.0);
    spk_cuda_free(dyd);
    spk_cuda_free(dgd);
    free(x);
    free(y);
    free(g);
}

// ---- pooling --------------------------------------------------------------------------------
static void test_time_mean_and_scale(void) {
    printf("time_mean, channel_scale\n");
    const int B = 3, C = 5, T = 300;  // T > block size: strided loops
    const size_t n = (size_t)B * C * T, r = (size_t)B * C;
    float *x = rand_f(n, -1, 1), *m = alloc_f(r);
    float *dxd = dev_f(x, n), *dmd = dev_f(NULL, r);
    time_mean_forward(m, x, B, C, T);
    time_mean_forward_cuda(dmd, dxd, B, C, T);
    cmp("time_mean forward", dmd, m, r, TOL);
    float *gm = rand_f(r, -1, 1), *gx0 = rand_f(n, -1, 1);
    float* gx = copy_f(gx0, n);
    float *dgm = dev_f(gm, r), *dgx = dev_f(gx0, n);
    time_mean_backward(gx, gm, B, C, T);
    time_mean_backward_cuda(dgx, dgm, B, C, T);
    cmp("time_mean backward", dgx, gx, n, TOL);

    float *s = rand_f(r, -2, 2), *y = alloc_f(n);
    float *dsd = dev_f(s, r), *dyd = dev_f(x, n);
    channel_scale_forward(y, x, s, B, C, T);
    channel_scale_forward_cuda(dyd, dyd, dsd, B, C, T);  // in place
    cmp("channel_scale forward (in place)", dyd, y, n, TOL);
    float *gy = rand_f(n, -1, 1), *gs0 = rand_f(r, -1, 1);
    float* gs = copy_f(gs0, r);
    memcpy(gx, gx0, sizeof(float) * n);
    channel_scale_backward(gx, gs, gy, x, s, B, C, T);
    float *dgy = dev_f(gy, n), *dgs = dev_f(gs0, r);
    spk_cuda_upload(dgx, gx0, sizeof(float) * n);
    channel_scale_backward_cuda(dgx, dgs, dgy, dxd, dsd, B, C, T);
    cmp("channel_scale dx", dgx, gx, n, TOL);
    cmp("channel_scale ds", dgs, gs, r, TOL);

    float* bufs[] = {dxd, dmd, dgm, dgx, dsd, dyd, dgy, dgs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {x, m, gm, gx0, gx, s, y, gy, gs0, gs};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

// weighted statistics: weights = NULL (uniform) or rows of a softmax; ld = 2C with std =
// mean + C ([mean | std]) or ld = C with separate buffers; row 0 constant (eps clamp active).
static void test_weighted_stats(int uniform) {
    const char* tag = uniform ? "uniform" : "weighted";
    printf("weighted_stats %s\n", tag);
    const int B = 4, C = 6, T = 270;
    const float eps = 1e-12f;
    const int ld = uniform ? C : 2 * C;
    const size_t n = (size_t)B * C * T, no = (size_t)B * ld;
    float* x = rand_f(n, -1, 2);
    for (int t = 0; t < T; t++) x[t] = 0.5f;
    float* w = NULL;
    if (!uniform) {
        w = rand_f(n, -3, 3);
        softmax_time_forward(w, w, B, C, T);
    }
    // forward: [mean | std] rows (ld = 2C) or separate (ld = C)
    float* ms = zeros_f(2 * no);
    float *mean = ms, *std = uniform ? ms + no : ms + C;
    weighted_stats_forward(mean, std, x, w, B, C, T, ld, eps);
    float *dxd = dev_f(x, n), *dwd = w ? dev_f(w, n) : NULL, *dms = dev_f(NULL, 2 * no);
    spk_cuda_memset0(dms, sizeof(float) * 2 * no);
    float *dmean = dms, *dstd = uniform ? dms + no : dms + C;
    weighted_stats_forward_cuda(dmean, dstd, dxd, dwd, B, C, T, ld, eps);
    cmp(nm("weighted_stats forward %s", tag), dms, ms, 2 * no, TOL);

    // backward
    float* gms = rand_f(2 * no, -1, 1);
    float *gmean = gms, *gstd = uniform ? gms + no : gms + C;
    float *gx0 = rand_f(n, -1, 1), *gw0 = rand_f(n, -1, 1);
    float *gx = copy_f(gx0, n), *gw = copy_f(gw0, n);
    weighted_stats_backward(gx, w ? gw : NULL, gmean, gstd, x, w, mean, std, B, C, T, ld, eps);
    float *dgms = dev_f(gms, 2 * no), *dgx = dev_f(gx0, n), *dgw = dev_f(gw0, n);
    float *dgmean = dgms, *dgstd = uniform ? dgms + no : dgms + C;
    weighted_stats_backward_cuda(dgx, w ? dgw : NULL, dgmean, dgstd, dxd, dwd, dmean, dstd, B, C, T,
                                 ld, eps);
    cmp(nm("weighted_stats dx %s", tag), dgx, gx, n, TOL);
    if (w) cmp(nm("weighted_stats dw %s", tag), dgw, gw, n, TOL);
    float *dgx2 = dev_f(gx0, n), *dgw2 = dev_f(gw0, n);
    weighted_stats_backward_cuda(dgx2, w ? dgw2 : NULL, dgmean, dgstd, dxd, dwd, dmean, dstd, B, C,
                                 T, ld, eps);
    same_bits(nm("weighted_stats dx twice %s", tag), dgx, dgx2, n);
    if (w) same_bits(nm("weighted_stats dw twice %s", tag), dgw, dgw2, n);
    // dstd only
    memcpy(gx, gx0, sizeof(float) * n);
    weighted_stats_backward(gx, NULL, NULL, gstd, x, w, mean, std, B, C, T, ld, eps);
    spk_cuda_upload(dgx, gx0, sizeof(float) * n);
    weighted_stats_backward_cuda(dgx, NULL, NULL, dgstd, dxd, dwd, dmean, dstd, B, C, T, ld, eps);
    cmp(nm("weighted_stats dx from dstd only %s", tag), dgx, gx, n, TOL);

    float* bufs[] = {dxd, dwd, dms, dgms, dgx, dgw, dgx2, dgw2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {x, w, ms, gms, gx0, gw0, gx, gw};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

static void test_softmax_time(void) {
    printf("softmax_time\n");
    const int B = 3, C = 7, T = 301;
    const size_t n = (size_t)B * C * T;
    float *x = rand_f(n, -6, 6), *y = alloc_f(n);
    softmax_time_forward(y, x, B, C, T);
    float* dyd = dev_f(x, n);
    softmax_time_forward_cuda(dyd, dyd, B, C, T);  // in place
    cmp("softmax_time forward (in place)", dyd, y, n, TOL);
    float *gy = rand_f(n, -1, 1), *gx0 = rand_f(n, -1, 1);
    float* gx = copy_f(gx0, n);
    softmax_time_backward(gx, gy, y, B, C, T);
    float *dgy = dev_f(gy, n), *dgx = dev_f(gx0, n);
    softmax_time_backward_cuda(dgx, dgy, dyd, B, C, T);
    cmp("softmax_time backward", dgx, gx, n, TOL);
    spk_cuda_free(dyd);
    spk_cuda_free(dgy);
    spk_cuda_free(dgx);
    free(x);
    free(y);
    free(gy);
    free(gx0);
    free(gx);
}

// ---- tensor ops -----------------------------------------------------------------------------
static void test_tensor_ops(void) {
    printf("tensor_ops\n");
    const int B = 3, T = 11, Cd = 7, Cs = 5, C = 3;  // dst/src channel counts, copied channels
    const size_t nd = (size_t)B * Cd * T, ns = (size_t)B * Cs * T;
    float *dst = rand_f(nd, -1, 1), *src = rand_f(ns, -1, 1);
    float *ddst = dev_f(dst, nd), *dsrc = dev_f(src, ns);
    channel_slice_copy(dst + 2 * T, Cd, src + 1 * T, Cs, B, C, T);
    channel_slice_copy_cuda(ddst + 2 * T, Cd, dsrc + 1 * T, Cs, B, C, T);
    cmp("channel_slice_copy", ddst, dst, nd, 0.0);
    channel_slice_add(dst + 4 * T, Cd, src, Cs, B, C, T);
    channel_slice_add_cuda(ddst + 4 * T, Cd, dsrc, Cs, B, C, T);
    cmp("channel_slice_add", ddst, dst, nd, TOL);

    // time_repeat: y has 9 channels (write 3 from channel 4), s rows of ld = 7 (from column 2)
    const int Cy = 9, ld = 7;
    const size_t ny = (size_t)B * Cy * T, nsr = (size_t)B * ld;
    float *y = rand_f(ny, -1, 1), *s = rand_f(nsr, -1, 1);
    float *dyd = dev_f(y, ny), *dsd = dev_f(s, nsr);
    time_repeat_forward(y + 4 * T, Cy, s + 2, ld, B, C, T);
    time_repeat_forward_cuda(dyd + 4 * T, Cy, dsd + 2, ld, B, C, T);
    cmp("time_repeat forward", dyd, y, ny, 0.0);
    float* gy = rand_f(ny, -1, 1);
    float* dgy = dev_f(gy, ny);
    time_repeat_backward(s + 2, ld, gy + 4 * T, Cy, B, C, T);
    time_repeat_backward_cuda(dsd + 2, ld, dgy + 4 * T, Cy, B, C, T);
    cmp("time_repeat backward", dsd, s, nsr, TOL);
    // ld = 0: one vector of C values repeated for every sample, into channels [1, 1 + C)
    float* s1 = rand_f(C, -1, 1);
    float* ds1 = dev_f(s1, C);
    time_repeat_forward(y + 1 * T, Cy, s1, 0, B, C, T);
    time_repeat_forward_cuda(dyd + 1 * T, Cy, ds1, 0, B, C, T);
    cmp("time_repeat forward ld 0", dyd, y, ny, 0.0);

    // batch_transpose: partial tiles, R < C, more tiles than blocks, and the round trip
    const int tshape[][3] = {{3, 5, 70}, {2, 45, 33}, {4, 200, 80}, {5000, 40, 3}};
    for (size_t k = 0; k < sizeof tshape / sizeof tshape[0]; k++) {
        const int TB = tshape[k][0], R = tshape[k][1], TC = tshape[k][2];
        const size_t tn = (size_t)TB * R * TC;
        char tag[64];
        snprintf(tag, sizeof tag, "B%d R%d C%d", TB, R, TC);
        float *x = rand_f(tn, -1, 1), *xt = alloc_f(tn);
        float *dxd = dev_f(x, tn), *dxt = dev_f(NULL, tn), *dxtt = dev_f(NULL, tn);
        batch_transpose(xt, x, TB, R, TC);
        batch_transpose_cuda(dxt, dxd, TB, R, TC);
        cmp(nm("batch_transpose %s", tag), dxt, xt, tn, 0.0);
        batch_transpose_cuda(dxtt, dxt, TB, TC, R);
        cmp(nm("batch_transpose round trip %s", tag), dxtt, x, tn, 0.0);
        spk_cuda_free(dxd);
        spk_cuda_free(dxt);
        spk_cuda_free(dxtt);
        free(x);
        free(xt);
    }

    // vec ops (vec_add with y aliasing a)
    const size_t n = 5003;
    float *a = rand_f(n, -1, 1), *b = rand_f(n, -1, 1);
    float *da = dev_f(a, n), *db = dev_f(b, n);
    vec_add(a, a, b, n);
    vec_add_cuda(da, da, db, n);
    cmp("vec_add (y == a)", da, a, n, 0.0);
    vec_acc(a, b, n);
    vec_acc_cuda(da, db, n);
    cmp("vec_acc", da, a, n, 0.0);
    vec_zero(a, n);
    vec_zero_cuda(da, n);
    cmp("vec_zero", da, a, n, 0.0);
    vec_copy(a, b, n);
    vec_copy_cuda(da, db, n);
    cmp("vec_copy", da, a, n, 0.0);

    float* bufs[] = {ddst, dsrc, dyd, dsd, ds1, dgy, da, db};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {dst, src, y, s, s1, gy, a, b};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

// ---- losses ---------------------------------------------------------------------------------
static void test_xent(int B, int N) {
    char tag[32];
    snprintf(tag, sizeof tag, "B%d N%d", B, N);
    printf("xent %s\n", tag);
    const size_t n = (size_t)B * N;
    float* z = rand_f(n, -5, 5);
    int* labels = (int*)malloc(sizeof(int) * B);
    for (int b = 0; b < B; b++) {  // every other row labelled with its argmax (hits counted)
        int am = 0;
        for (int j = 1; j < N; j++)
            if (z[(size_t)b * N + j] > z[(size_t)b * N + am]) am = j;
        labels[b] = b % 2 ? am : rng_int(N);
    }
    float loss;
    int correct;
    float* probs = alloc_f(n);
    xent_forward(&loss, &correct, probs, z, labels, B, N);
    float *dz = dev_f(z, n), *dprobs = dev_f(NULL, n), *dloss = dev_f(NULL, 1);
    int* dlabels = dev_i(labels, B);
    int* dcorrect = (int*)spk_cuda_malloc(sizeof(int));
    xent_forward_cuda(dloss, dcorrect, dprobs, dz, dlabels, B, N);
    cmp_scalar(nm("xent loss %s", tag), dloss, loss, TOL);
    cmp_int(nm("xent correct %s", tag), dcorrect, correct);
    cmp(nm("xent probs %s", tag), dprobs, probs, n, TOL);
    float* g0 = rand_f(n, -1, 1);
    float* g = copy_f(g0, n);
    xent_backward(g, 1.7f, probs, labels, B, N);
    float* dg = dev_f(g0, n);
    xent_backward_cuda(dg, 1.7f, dprobs, dlabels, B, N);
    cmp(nm("xent dlogits %s", tag), dg, g, n, TOL);
    spk_cuda_free(dz);
    spk_cuda_free(dprobs);
    spk_cuda_free(dloss);
    spk_cuda_free(dlabels);
    spk_cuda_free(dcorrect);
    spk_cuda_free(dg);
    free(z);
    free(labels);
    free(probs);
    free(g0);
    free(g);
}

static void test_aam(int B, int E, int S) {
    char tag[48];
    snprintf(tag, sizeof tag, "B%d E%d S%d", B, E, S);
    printf("aam_softmax %s\n", tag);
    const float margin = 0.2f, scale = 30.0f;
    float* w = rand_f((size_t)S * E, -1, 1);
    float* emb = rand_f((size_t)B * E, -1, 1);
    int* labels = (int*)malloc(sizeof(int) * B);
    for (int b = 0; b < B; b++) {
        labels[b] = rng_int(S);
        if (b % 2 == 0)  // close to its class weight: a likely hit
            for (int e = 0; e < E; e++)
                emb[(size_t)b * E + e] =
                    w[(size_t)labels[b] * E + e] + 0.3f * emb[(size_t)b * E + e];
    }
    float* cache = alloc_f(aam_softmax_cache_floats(B, E, S));
    float* ws = alloc_f(aam_softmax_workspace_floats(B, E, S));
    float loss;
    int correct;
    aam_softmax_forward(&loss, &correct, cache, emb, w, labels, B, E, S, margin, scale, ws);
    float *demb = dev_f(emb, (size_t)B * E), *dw = dev_f(w, (size_t)S * E);
    int* dlabels = dev_i(labels, B);
    float* dcache = dev_f(NULL, aam_softmax_cache_floats_cuda(B, E, S));
    float* dws = dev_f(NULL, aam_softmax_workspace_floats_cuda(B, E, S));
    float* dloss = dev_f(NULL, 1);
    int* dcorrect = (int*)spk_cuda_malloc(sizeof(int));
    aam_softmax_forward_cuda(dloss, dcorrect, dcache, demb, dw, dlabels, B, E, S, margin, scale,
                             dws);
    cmp_scalar(nm("aam loss %s", tag), dloss, loss, TOL_GEMM);
    cmp_int(nm("aam correct %s", tag), dcorrect, correct);
    cmp(nm("aam probs %s", tag), dcache, cache, (size_t)B * S, TOL_GEMM);

    float *ge0 = rand_f((size_t)B * E, -1, 1), *gw0 = rand_f((size_t)S * E, -1, 1);
    float *ge = copy_f(ge0, (size_t)B * E), *gw = copy_f(gw0, (size_t)S * E);
    aam_softmax_backward(ge, gw, 1.0f, cache, emb, w, labels, B, E, S, margin, scale, ws);
    float *dge = dev_f(ge0, (size_t)B * E), *dgw = dev_f(gw0, (size_t)S * E);
    aam_softmax_backward_cuda(dge, dgw, 1.0f, dcache, demb, dw, dlabels, B, E, S, margin, scale,
                              dws);
    cmp(nm("aam demb %s", tag), dge, ge, (size_t)B * E, TOL_GEMM);
    cmp(nm("aam dw %s", tag), dgw, gw, (size_t)S * E, TOL_GEMM);
    float *dge2 = dev_f(ge0, (size_t)B * E), *dgw2 = dev_f(gw0, (size_t)S * E);
    aam_softmax_backward_cuda(dge2, dgw2, 1.0f, dcache, demb, dw, dlabels, B, E, S, margin, scale,
                              dws);
    same_bits(nm("aam demb twice %s", tag), dge, dge2, (size_t)B * E);
    same_bits(nm("aam dw twice %s", tag), dgw, dgw2, (size_t)S * E);

    float* bufs[] = {demb, dw, dcache, dws, dloss, dge, dgw, dge2, dgw2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    spk_cuda_free(dlabels);
    spk_cuda_free(dcorrect);
    float* hbufs[] = {w, emb, cache, ws, ge0, gw0, ge, gw};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
    free(labels);
}

// ---- linear ---------------------------------------------------------------------------------
static void test_linear(int with_bias) {
    const char* tag = with_bias ? "bias" : "no bias";
    printf("linear %s\n", tag);
    const int B = 13, In = 70, Out = 33;
    const size_t nx = (size_t)B * In, ny = (size_t)B * Out, nw = (size_t)Out * In;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -1, 1);
    float* b = with_bias ? rand_f(Out, -1, 1) : NULL;
    float* y = alloc_f(ny);
    linear_forward(y, x, w, b, B, In, Out);
    float *dx_ = dev_f(x, nx), *dw_ = dev_f(w, nw), *db_ = b ? dev_f(b, Out) : NULL;
    float* dy_ = dev_f(NULL, ny);
    linear_forward_cuda(dy_, dx_, dw_, db_, B, In, Out);
    cmp(nm("linear forward %s", tag), dy_, y, ny, TOL_GEMM);
    float *gy = rand_f(ny, -1, 1), *gx0 = rand_f(nx, -1, 1), *gw0 = rand_f(nw, -1, 1);
    float* gb0 = rand_f(Out, -1, 1);
    float *gx = copy_f(gx0, nx), *gw = copy_f(gw0, nw), *gb = copy_f(gb0, Out);
    linear_backward(gx, gw, gb, gy, x, w, B, In, Out);
    float *dgy = dev_f(gy, ny), *dgx = dev_f(gx0, nx), *dgw = dev_f(gw0, nw),
          *dgb = dev_f(gb0, Out);
    linear_backward_cuda(dgx, dgw, dgb, dgy, dx_, dw_, B, In, Out);
    cmp(nm("linear dx %s", tag), dgx, gx, nx, TOL_GEMM);
    cmp(nm("linear dw %s", tag), dgw, gw, nw, TOL_GEMM);
    cmp(nm("linear db %s", tag), dgb, gb, Out, TOL);
    float *dgx2 = dev_f(gx0, nx), *dgw2 = dev_f(gw0, nw), *dgb2 = dev_f(gb0, Out);
    linear_backward_cuda(dgx2, dgw2, dgb2, dgy, dx_, dw_, B, In, Out);
    same_bits(nm("linear dx twice %s", tag), dgx, dgx2, nx);
    same_bits(nm("linear dw twice %s", tag), dgw, dgw2, nw);
    same_bits(nm("linear db twice %s", tag), dgb, dgb2, Out);

    float* bufs[] = {dx_, dw_, db_, dy_, dgy, dgx, dgw, dgb, dgx2, dgw2, dgb2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) spk_cuda_free(bufs[i]);
    float* hbufs[] = {x, w, b, y, gy, gx0, gw0, gb0, gx, gw, gb};
    for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++) free(hbufs[i]);
}

// ---- optimizers -----------------------------------------------------------------------------
static void test_sgd(double momentum, double dampening, double wd, int nesterov) {
    char tag[96];
    snprintf(tag, sizeof tag, "mom %.2g damp %.2g wd %.2g%s", momentum, dampening, wd,
             nesterov ? " nesterov" : "");
    printf("sgd %s\n", tag);
    const size_t n = 5000;
    float *p = rand_f(n, -1, 1), *buf = zeros_f(n);
    float *dp = dev_f(p, n), *dbuf = dev_f(buf, n), *dg = dev_f(NULL, n);
    for (int step = 1; step <= 3; step++) {
        float* g = rand_f(n, -1, 1);
        spk_cuda_upload(dg, g, sizeof(float) * n);
        sgd_step(p, g, momentum != 0.0 ? buf : NULL, n, 0.05, momentum, dampening, wd, nesterov,
                 step);
        sgd_step_cuda(dp, dg, momentum != 0.0 ? dbuf : NULL, n, 0.05, momentum, dampening, wd,
                      nesterov, step);
        free(g);
    }
    cmp(nm("sgd params after 3 steps %s", tag), dp, p, n, TOL);
    if (momentum != 0.0) cmp(nm("sgd momentum buffer %s", tag), dbuf, buf, n, TOL);
    spk_cuda_free(dp);
    spk_cuda_free(dbuf);
    spk_cuda_free(dg);
    free(p);
    free(buf);
}

static void test_adam(int decoupled) {
    const char* tag = decoupled ? "adamw" : "adam";
    printf("%s\n", tag);
    const size_t n = 5000;
    float *p = rand_f(n, -1, 1), *m = zeros_f(n), *v = zeros_f(n);
    float *dp = dev_f(p, n), *dm = dev_f(m, n), *dv = dev_f(v, n), *dg = dev_f(NULL, n);
    for (int step = 1; step <= 3; step++) {
        float* g = rand_f(n, -1, 1);
        spk_cuda_upload(dg, g, sizeof(float) * n);
        if (decoupled) {
            adamw_step(p, g, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
            adamw_step_cuda(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
        } else {
            adam_step(p, g, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 2e-4, step);
            adam_step_cuda(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 2e-4, step);
        }
        free(g);
    }
    cmp(nm("%s params after 3 steps", tag), dp, p, n, TOL);
    cmp(nm("%s exp_avg", tag), dm, m, n, TOL);
    cmp(nm("%s exp_avg_sq", tag), dv, v, n, TOL);
    spk_cuda_free(dp);
    spk_cuda_free(dm);
    spk_cuda_free(dv);
    spk_cuda_free(dg);
    free(p);
    free(m);
    free(v);
}

int main(void) {
    char why[256] = "", name[256] = "";
    if (spk_device_count(why, sizeof why) == 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    if (spk_cuda_init(0) != 0) {
        printf("FAIL: spk_cuda_init(0) could not set up device 0\n");
        return 1;
    }
    spk_device_describe(0, name, sizeof name);
    printf("device 0: %s\n", name);
    rng_seed(20240611);

    test_memory();
    test_gemm();
    test_conv(3, 5, 7, 20, 3, 1, 1);
    test_conv(2, 8, 6, 17, 5, 3, 0);   // pad 6 of T 17
    test_conv(2, 4, 4, 5, 3, 2, 1);    // pad 2 of T 5: most positions reflect
    test_conv(4, 16, 12, 9, 1, 1, 1);  // K = 1: no padding, dx accumulated by cuDNN
    test_conv(4, 32, 24, 64, 3, 4, 1);
    test_batchnorm(4, 6, 23, 1);
    test_batchnorm(3, 5, 200, 0);
    test_batchnorm(8, 5, 1, 1);  // (B, C) input
    test_activation("relu", relu_forward, relu_forward_cuda, relu_backward, relu_backward_cuda);
    test_activation("sigmoid", sigmoid_forward, sigmoid_forward_cuda, sigmoid_backward,
                    sigmoid_backward_cuda);
    test_activation("tanh", tanh_forward, tanh_forward_cuda, tanh_backward, tanh_backward_cuda);
    test_relu_mask();
    test_time_mean_and_scale();
    test_weighted_stats(0);
    test_weighted_stats(1);
    test_softmax_time();
    test_tensor_ops();
    test_xent(37, 300);
    test_xent(150000, 5);  // 1.2 MB of row results: the library scratch grows
    test_aam(19, 40, 300);
    test_aam(6, 7, 5);
    test_linear(1);
    test_linear(0);
    test_sgd(0.0, 0.0, 0.01, 0);
    test_sgd(0.9, 0.1, 1e-3, 0);
    test_sgd(0.9, 0.0, 0.0, 1);
    test_adam(0);
    test_adam(1);
    test_tf32();  // last: it re-plans the convolutions

    spk_cuda_shutdown();
    printf("%d checks\n", g_checks);
    return test_finish("test_gpu_kernels");
}
