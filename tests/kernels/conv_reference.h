// The double-precision adjoint of the reference convolution (conv1d_forward_reference), shared
// by the float32 and bf16 convolution tests.
#pragma once
#include <stddef.h>

// Direct adjoint of the reference conv (double): dx, dw, dbias for upstream r.
static void conv_backward_reference(double* dx, double* dw, double* db, const float* r,
                                    const float* x, const float* w, int B, int Cin, int Cout, int T,
                                    int K, int d) {
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
                        dw[((size_t)co * Cin + ci) * K + k] +=
                            g * x[((size_t)b * Cin + ci) * T + u];
                        dx[((size_t)b * Cin + ci) * T + u] +=
                            g * w[((size_t)co * Cin + ci) * K + k];
                    }
            }
}
