// Conv1d (stride 1, reflect 'same' padding, dilation) as im2col + GEMM with the batch folded
// into the GEMM's N dimension, a chunk of samples at a time:
//   col  (Cin*K, Nc)  = im2col of the chunk, Nc = samples_in_chunk * T
//   Yf   (Cout, Nc)   = W (Cout, Cin*K) . col         -> scattered to y (B, Cout, T) + bias
//   dW  += dYf . col^T,   dcol = W^T . dYf            -> folded back (col2im + reflect) to dx
// Folding the batch lets the GEMM pack W once per chunk instead of once per sample; chunks of
// ~2048 columns measured as fast as the whole batch while keeping the workspace small.
#include "kernels/conv1d.h"

#include <string.h>

#include "kernels/gemm.h"
#include "kernels/spk_assert.h"

#define CONV_CHUNK_COLS 2048

static int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }

// Reflect index for u in (-T, 2T - 1): torch 'reflect' (edge sample not repeated).
static inline int reflect_index(int u, int T) {
    return u < 0 ? -u : (u >= T ? 2 * (T - 1) - u : u);
}

static int chunk_samples(int B, int T) {
    int nb = (CONV_CHUNK_COLS + T - 1) / T;
    if (nb < 1) nb = 1;
    if (nb > B) nb = B;
    const int nchunks = (B + nb - 1) / nb;
    return (B + nchunks - 1) / nchunks;  // balance the chunks
}

static void check_shape(int B, int Cin, int Cout, int T, int K, int dilation) {
    SPK_ASSERT(B > 0 && Cin > 0 && Cout > 0 && T > 0);
    SPK_ASSERT(K > 0 && K % 2 == 1 && dilation > 0);
    SPK_ASSERT(T > conv_pad(K, dilation));  // reflect padding needs T > pad
}

size_t conv1d_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const size_t nc = (size_t)chunk_samples(B, T) * T;
    return ((size_t)Cin * K + Cout) * nc;
}

// col[(ci*K + k) * ldc + bi*T + t] = x[b0 + bi, ci, r(t + k*d - p)]
static void im2col(float* col, int ldc, const float* x, int b0, int nb, int Cin, int T, int K,
                   int dilation) {
    const int p = conv_pad(K, dilation);
#pragma omp parallel for collapse(2) schedule(static)
    for (int ci = 0; ci < Cin; ci++) {
        for (int k = 0; k < K; k++) {
            const int off = k * dilation - p;
            const int t_lo = off < 0 ? -off : 0;     // first t with t + off >= 0
            const int t_hi = off > 0 ? T - off : T;  // first t with t + off >= T
            float* row = col + ((size_t)ci * K + k) * ldc;
            for (int bi = 0; bi < nb; bi++) {
                const float* xr = x + ((size_t)(b0 + bi) * Cin + ci) * T;
                float* dst = row + (size_t)bi * T;
                for (int t = 0; t < t_lo; t++) dst[t] = xr[reflect_index(t + off, T)];
                memcpy(dst + t_lo, xr + t_lo + off, sizeof(float) * (size_t)(t_hi - t_lo));
                for (int t = t_hi; t < T; t++) dst[t] = xr[reflect_index(t + off, T)];
            }
        }
    }
}

// dx[b0 + bi, ci, r(t + k*d - p)] += col[(ci*K + k) * ldc + bi*T + t]
static void col2im_add(float* dx, const float* col, int ldc, int b0, int nb, int Cin, int T,
                       int K, int dilation) {
    const int p = conv_pad(K, dilation);
#pragma omp parallel for collapse(2) schedule(static)
    for (int bi = 0; bi < nb; bi++) {
        for (int ci = 0; ci < Cin; ci++) {
            float* dxr = dx + ((size_t)(b0 + bi) * Cin + ci) * T;
            for (int k = 0; k < K; k++) {
                const int off = k * dilation - p;
                const int t_lo = off < 0 ? -off : 0;
                const int t_hi = off > 0 ? T - off : T;
                const float* src = col + ((size_t)ci * K + k) * ldc + (size_t)bi * T;
                for (int t = 0; t < t_lo; t++) dxr[reflect_index(t + off, T)] += src[t];
#pragma omp simd
                for (int t = t_lo; t < t_hi; t++) dxr[t + off] += src[t];
                for (int t = t_hi; t < T; t++) dxr[reflect_index(t + off, T)] += src[t];
            }
        }
    }
}

void conv1d_forward(float* y, const float* x, const float* w, const float* bias, int B, int Cin,
                    int Cout, int T, int K, int dilation, float* workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const int nb_max = chunk_samples(B, T);
    const int CK = Cin * K;
    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        const int nc = nb * T;
        float* col = workspace;                      // (CK, nc)
        float* yf = workspace + (size_t)CK * nc;     // (Cout, nc)
        im2col(col, nc, x, b0, nb, Cin, T, K, dilation);
        spk_sgemm('N', 'N', Cout, nc, CK, 1.0f, w, CK, col, nc, 0.0f, yf, nc);
#pragma omp parallel for collapse(2) schedule(static)
        for (int bi = 0; bi < nb; bi++) {
            for (int co = 0; co < Cout; co++) {
                const float bv = bias ? bias[co] : 0.0f;
                const float* src = yf + (size_t)co * nc + (size_t)bi * T;
                float* dst = y + ((size_t)(b0 + bi) * Cout + co) * T;
#pragma omp simd
                for (int t = 0; t < T; t++) dst[t] = src[t] + bv;
            }
        }
    }
}

void conv1d_backward(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                     const float* w, int B, int Cin, int Cout, int T, int K, int dilation,
                     float* workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (!dx && !dw && !dbias) return;
    const int nb_max = chunk_samples(B, T);
    const int CK = Cin * K;
    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        const int nc = nb * T;
        float* col = workspace;                    // (CK, nc): im2col, then dcol
        float* dyf = workspace + (size_t)CK * nc;  // (Cout, nc)
        const int need_dyf = dx != NULL || dw != NULL;
#pragma omp parallel for schedule(static)
        for (int co = 0; co < Cout; co++) {
            float acc = 0.0f;
            for (int bi = 0; bi < nb; bi++) {
                const float* src = dy + ((size_t)(b0 + bi) * Cout + co) * T;
                float* dst = dyf + (size_t)co * nc + (size_t)bi * T;
                if (need_dyf) memcpy(dst, src, sizeof(float) * (size_t)T);
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (int t = 0; t < T; t++) s += src[t];
                acc += s;
            }
            if (dbias) dbias[co] += acc;
        }
        if (dw) {
            im2col(col, nc, x, b0, nb, Cin, T, K, dilation);
            spk_sgemm('N', 'T', Cout, CK, nc, 1.0f, dyf, nc, col, nc, 1.0f, dw, CK);
        }
        if (dx) {
            spk_sgemm('T', 'N', CK, nc, Cout, 1.0f, w, CK, dyf, nc, 0.0f, col, nc);
            col2im_add(dx, col, nc, b0, nb, Cin, T, K, dilation);
        }
    }
}

void conv1d_forward_reference(float* y, const float* x, const float* w, const float* bias,
                              int B, int Cin, int Cout, int T, int K, int dilation) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const int p = conv_pad(K, dilation);
    for (int b = 0; b < B; b++)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) {
                double acc = bias ? bias[co] : 0.0;
                for (int ci = 0; ci < Cin; ci++)
                    for (int k = 0; k < K; k++) {
                        int u = t + k * dilation - p;  // index into the unpadded input
                        if (u < 0) u = -u;
                        if (u >= T) u = 2 * (T - 1) - u;
                        acc += (double)w[((size_t)co * Cin + ci) * K + k] *
                               x[((size_t)b * Cin + ci) * T + u];
                    }
                y[((size_t)b * Cout + co) * T + t] = (float)acc;
            }
}
