// BatchNorm1d over (B, C, T) activations (use T = 1 for (B, C)). Statistics are per channel
// over the N = B*T positions.
//
// Training: mean and biased variance over N, y = (x - mean) / sqrt(var + eps) * w + b;
// running_mean/var (if not NULL) become (1 - momentum) * running + momentum * stat, where
// running_var uses the UNBIASED variance var * N / (N - 1) (PyTorch; needs N > 1).
// mean and rstd = 1/sqrt(var + eps) are saved for backward. Inference uses the running stats.
// weight/bias may be NULL (affine = False: w = 1, b = 0). y may alias x.
#pragma once
#include <stdint.h>

#include "kernels/bf16.h"
#include "kernels/exact_sum.h"

void batchnorm1d_forward_train(float *y,             // (B, C, T)
                               float *mean,          // (C) out, saved for backward
                               float *rstd,          // (C) out, saved for backward
                               float *running_mean,  // (C) updated, or NULL
                               float *running_var,   // (C) updated, or NULL
                               const float *x,       // (B, C, T)
                               const float *weight,  // (C) or NULL
                               const float *bias,    // (C) or NULL
                               int B, int C, int T, float eps, float momentum);

// The same over relu(x), x the ReLU's input (a TDNN block: convolution, ReLU, BatchNorm): the bits
// of relu_forward then batchnorm1d_forward_train, with the ReLU taken as x is read, not stored.
// The backward (batchnorm1d_relu_backward) takes this x as it is. y must not alias x.
void batchnorm1d_relu_forward_train(float *y, float *mean, float *rstd, float *running_mean, float *running_var,
                                    const float *x, const float *weight, const float *bias, int B, int C, int T,
                                    float eps, float momentum);

void batchnorm1d_forward_infer(float *y,                   // (B, C, T)
                               const float *x,             // (B, C, T)
                               const float *running_mean,  // (C)
                               const float *running_var,   // (C)
                               const float *weight,        // (C) or NULL
                               const float *bias,          // (C) or NULL
                               int B, int C, int T, float eps);

// Training-mode backward. ACCUMULATES into dx, dweight, dbias (each may be NULL).
// dx must not alias dy or x.
void batchnorm1d_backward(float *dx,            // (B, C, T) +=
                          float *dweight,       // (C) +=
                          float *dbias,         // (C) +=
                          const float *dy,      // (B, C, T)
                          const float *x,       // (B, C, T) forward input
                          const float *weight,  // (C) or NULL
                          const float *mean,    // (C) from forward
                          const float *rstd,    // (C) from forward
                          int B, int C, int T);

// The same backward when x is a ReLU's output or its input (SpeechBrain's TDNN block:
// convolution, ReLU, BatchNorm; the BatchNorm's input is relu(x) either way): dx = the gradient
// at the ReLU's input, the BatchNorm's input gradient where x > 0 and 0 elsewhere, OVERWRITTEN;
// dweight, dbias accumulate. The bits of zeroing dx, then batchnorm1d_backward over relu(x), then
// relu_mask(dx, x), in one pass instead of three. dsum: += the sums of dx over b and t (the
// gradient of the preceding convolution's bias, as conv1d_backward would add it), or NULL.
void batchnorm1d_relu_backward(float *dx,            // (B, C, T) =
                               float *dsum,          // (C) += ; or NULL
                               float *dweight,       // (C) +=
                               float *dbias,         // (C) +=
                               const float *dy,      // (B, C, T)
                               const float *x,       // (B, C, T) the ReLU's input or output
                               const float *weight,  // (C) or NULL
                               const float *mean,    // (C) from forward
                               const float *rstd,    // (C) from forward
                               int B, int C, int T);

// batchnorm1d_relu_backward whose input gradient goes straight to a bf16 convolution's output
// gradient (kernels/conv1d_bf16.h), rounded: dxh[c*yc + b*yb + t] = bf16(dx[b, c, t]), folded
// (yc = B*T, yb = T) as conv1d_bf16_backward reads it, or (B, C, T) (yc = T, yb = C*T) as the
// invariant mode's conv1d_bf16_backward_exact does; with dsum[c] += the sum of dx[., c, .] in
// float32 (the convolution's bias gradient), the bits of batchnorm1d_relu_backward followed by
// bf16_fold_from_f32(dxh, dsum, dx) (its sums' order); dsum may be NULL, the other arguments are
// batchnorm1d_relu_backward's. No float dx is written or read back.
void batchnorm1d_relu_backward_bf16(spk_bf16 *dxh, size_t yc, size_t yb, float *dsum, float *dweight, float *dbias,
                                    const float *dy, const float *x, const float *weight, const float *mean,
                                    const float *rstd, int B, int C, int T);

// ---- the world-size-invariant mode: BatchNorm over the global batch ------------------------
// Training statistics of every rank's samples together (synchronized BatchNorm), from exact
// sums (kernels/exact_sum.h) that the caller reduces across ranks between the two calls of
// each pass. Every group of `group` consecutive samples (B is a multiple) adds its sums over
// time (in double, samples in order) as one term, so the statistics do not depend on how the
// groups are split between ranks or threads, and the running statistics come out the same on
// every rank.
//   forward:  batchnorm1d_stats_partial adds each group's sums of (x - shift) and
//             (x - shift)^2 to sums[0, C) and sums[C, 2C) (shift = running_mean, identical on
//             every rank, or 0 when NULL; it only keeps the variance from cancelling);
//             batchnorm1d_forward_global normalises with the mean and biased variance of the
//             reduced sums over N positions (N = samples of the global batch * T), saves
//             mean/rstd and updates the running statistics as batchnorm1d_forward_train does.
//   backward: batchnorm1d_backward_partial adds each group's sums of dy and dy * xhat to
//             sums[0, C) and sums[C, 2C) and, unless empty, to dbias and dweight (the same
//             terms: those gradients are these sums); batchnorm1d_backward_global then adds
//             the input gradient with the reduced sums to dx, or with relu_set (x a ReLU's
//             output or input) overwrites dx with the gradient at the ReLU's input: the bits
//             of zeroing dx, adding it, then relu_mask(dx, x).
void batchnorm1d_stats_partial(xsum_t sums,         // (2C) +=
                               const float *x,      // (B, C, T)
                               const float *shift,  // (C) or NULL
                               int B, int C, int T, int group);
void batchnorm1d_forward_global(float *y, float *mean, float *rstd, float *running_mean, float *running_var,
                                const float *x, const float *weight, const float *bias,
                                xsum_t sums,  // (2C) reduced, from batchnorm1d_stats_partial
                                int64_t N, int B, int C, int T, float eps, float momentum);
void batchnorm1d_backward_partial(xsum_t sums,     // (2C) +=
                                  xsum_t dweight,  // (C) += , or empty
                                  xsum_t dbias,    // (C) += , or empty
                                  const float *dy, const float *x, const float *mean, const float *rstd, int B, int C,
                                  int T, int group);
void batchnorm1d_backward_global(float *dx,  // (B, C, T) += ; = with relu_set
                                 int relu_set, const float *dy, const float *x, const float *weight, const float *mean,
                                 const float *rstd,
                                 xsum_t sums,  // (2C) reduced, from batchnorm1d_backward_partial
                                 int64_t N, int B, int C, int T);
