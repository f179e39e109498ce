// Row L2 normalisation with F.normalize(x, dim=-1, eps) semantics over B rows of E floats:
// z_i = x_i / max(|x_i|, eps). It serves the DINO head twice: the L2 normalisation after the
// MLP bottleneck (many short rows) and the weight-normalised last layer with weight_g fixed at 1
// (W = the K rows of v, normalised). Each row is reduced on its own in a fixed order, so a row's
// result depends neither on B nor on the thread count.
#pragma once

// norm[i] = |x_i| (the 2-norm of row i; squares summed in double on the CPU, in compensated
// float on CUDA), z_i = x_i / max(norm[i], eps). z may alias x. eps > 0 (PyTorch: 1e-12).
void rows_normalize_forward(float *z,        // (B, E) out
                            float *norm,     // (B) out, kept for backward
                            const float *x,  // (B, E)
                            int B, int E, float eps);

// The gradient through the forward, from its outputs z and norm (x need not be kept):
//   dx_i += (dz_i - z_i (z_i . dz_i)) / norm[i]   where norm[i] >= eps,
//   dx_i += dz_i / eps                            where norm[i] < eps (the clamp holds the
//                                                 denominator, as PyTorch's clamp_min).
// ACCUMULATES into dx, which must alias neither dz nor z.
void rows_normalize_backward(float *dx,          // (B, E) +=
                             const float *dz,    // (B, E)
                             const float *z,     // (B, E) from forward
                             const float *norm,  // (B) from forward
                             int B, int E, float eps);
