// The double-precision adjoint of the reference convolution (conv1d_forward_reference), and the
// shapes every backend is checked on, shared by the float32 and bf16 convolution tests.
#pragma once
#include <stddef.h>

// Direct adjoint of the reference conv (double): dx, dw, dbias for upstream r.
static void conv_backward_reference(double *dx, double *dw, double *db, const float *r, const float *x, const float *w,
                                    int B, int Cin, int Cout, int T, int K, int d) {
    const int p = d * (K - 1) / 2;
    for (int b = 0; b < B; b++)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) {
                const double g = r[((size_t)b * Cout + co) * T + t];
                db[co] += g;
                for (int ci = 0; ci < Cin; ci++)
                    for (int k = 0; k < K; k++) {
                        int u = t + k * d - p;
                        if (u < 0) u = -u;
                        if (u >= T) u = 2 * (T - 1) - u;
                        dw[((size_t)co * Cin + ci) * K + k] += g * x[((size_t)b * Cin + ci) * T + u];
                        dx[((size_t)b * Cin + ci) * T + u] += g * w[((size_t)co * Cin + ci) * K + k];
                    }
            }
}

// B, Cin, Cout, T, K, dilation, with a bias: the shapes each backend runs against the CPU kernels.
static const int conv_backend_shapes[][7] = {
    {3, 5, 7, 20, 3, 1, 1},   {2, 8, 6, 17, 5, 3, 0},  // pad 6 of T 17
    {2, 4, 4, 5, 3, 2, 1},                             // pad 2 of T 5: most positions reflect
    {4, 16, 12, 9, 1, 1, 1},  // K = 1: no padding (dx accumulated by cuDNN in the float32 conv)
    {4, 32, 24, 64, 3, 4, 1},
};

// Runs backend_case(B, Cin, Cout, T, K, dilation, with_bias) for every shape above.
static void conv_backend_checks(void (*backend_case)(int, int, int, int, int, int, int)) {
    for (size_t i = 0; i < sizeof conv_backend_shapes / sizeof conv_backend_shapes[0]; i++) {
        const int *s = conv_backend_shapes[i];
        backend_case(s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
    }
}
