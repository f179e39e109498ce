// BatchNorm1d over (B, C, T) activations (use T = 1 for (B, C)). Statistics are per channel
// over the N = B*T positions.
//
// Training: mean and biased variance over N, y = (x - mean) / sqrt(var + eps) * w + b;
// running_mean/var (if not NULL) become (1 - momentum) * running + momentum * stat, where
// running_var uses the UNBIASED variance var * N / (N - 1) (PyTorch; needs N > 1).
// mean and rstd = 1/sqrt(var + eps) are saved for backward. Inference uses the running stats.
// weight/bias may be NULL (affine = False: w = 1, b = 0). y may alias x.
#pragma once

void batchnorm1d_forward_train(float* y,             // (B, C, T)
                               float* mean,          // (C) out, saved for backward
                               float* rstd,          // (C) out, saved for backward
                               float* running_mean,  // (C) updated, or NULL
                               float* running_var,   // (C) updated, or NULL
                               const float* x,       // (B, C, T)
                               const float* weight,  // (C) or NULL
                               const float* bias,    // (C) or NULL
                               int B, int C, int T, float eps, float momentum);

void batchnorm1d_forward_infer(float* y,                   // (B, C, T)
                               const float* x,             // (B, C, T)
                               const float* running_mean,  // (C)
                               const float* running_var,   // (C)
                               const float* weight,        // (C) or NULL
                               const float* bias,          // (C) or NULL
                               int B, int C, int T, float eps);

// Training-mode backward. ACCUMULATES into dx, dweight, dbias (each may be NULL).
// dx must not alias dy or x.
void batchnorm1d_backward(float* dx,            // (B, C, T) +=
                          float* dweight,       // (C) +=
                          float* dbias,         // (C) +=
                          const float* dy,      // (B, C, T)
                          const float* x,       // (B, C, T) forward input
                          const float* weight,  // (C) or NULL
                          const float* mean,    // (C) from forward
                          const float* rstd,    // (C) from forward
                          int B, int C, int T);
