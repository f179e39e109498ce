// BatchNorm2d over channels-last (B, H, W, C) activations: statistics per channel over the
// N = B*H*W rows of C channels, as PyTorch's BatchNorm2d (biased variance to normalise, the
// unbiased one in the running variance, eps, momentum, affine; see kernels/batchnorm.h), with
// a residual block's epilogue fused into the same pass over memory:
//
//   y = act(bn(x) + residual),  act = ReLU when relu is set, else the identity;
//   residual may be NULL (no addition).
//
// The training forward also writes yh = bf16(y) when yh is not NULL: the next bf16
// convolution's rounded input (kernels/conv2d_bf16.h, xh), in the pass that writes y. With the
// ReLU, an output that bf16 rounds to zero (below 2^-133) is then zero in y too, so that yh is
// nonzero exactly where y > 0 and the rounded backward may take its mask from yh. y may be NULL
// when yh is given: the rounded output alone is written.
//
// The training passes may read their input x as bf16 (xh, with x NULL): the output of a bf16
// convolution that rounds it (kernels/conv2d_bf16.h, conv2d_bf16_forward_rounded), half the bytes
// in each of the passes that read it. The arithmetic is the float32 one on the widened values:
// the results are bitwise those of x = the widened xh. The residual may come in bf16 too
// (residual_h, with residual NULL): the bf16 training step's residual blocks add it so.
//
// The backward takes the forward's output y for the ReLU mask: g = relu ? dy * (y > 0) : dy.
// It writes the residual's gradient (g) and the input's (BatchNorm's backward of g); both are
// overwritten, or added to when `accumulate` is set (a residual network's gradient buffers
// are mostly first writes, so overwriting saves clearing them). dweight and dbias ACCUMULATE.
// Any gradient output may be NULL. y may alias x in the forward; nothing aliases in the backward.
//
// Deterministic: every backend sums in a partition of the rows fixed by the shape (the CPU: blocks
// of 256 rows in float, combined in double in block order), so the result does not depend on
// the thread count or on scheduling. workspace: 8-byte aligned (a buffer's start).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/bf16.h"
#include "kernels/exact_sum.h"

void batchnorm2d_forward_train(float *y,                    // (N, C), or NULL (yh alone)
                               spk_bf16 *yh,                // (N, C) = bf16(y), or NULL
                               float *mean,                 // (C) out, saved for backward
                               float *rstd,                 // (C) out, saved for backward
                               float *running_mean,         // (C) updated, or NULL
                               float *running_var,          // (C) updated, or NULL
                               const float *x,              // (N, C), or NULL (xh)
                               const spk_bf16 *xh,          // (N, C) the input in bf16, or NULL (x)
                               const float *weight,         // (C) or NULL
                               const float *bias,           // (C) or NULL
                               const float *residual,       // (N, C) or NULL
                               const spk_bf16 *residual_h,  // (N, C) the residual in bf16, or NULL
                               int relu, int N, int C, float eps, float momentum,
                               float *workspace);  // (batchnorm2d_workspace_floats)

void batchnorm2d_forward_infer(float *y,                   // (N, C)
                               const float *x,             // (N, C)
                               const float *running_mean,  // (C)
                               const float *running_var,   // (C)
                               const float *weight,        // (C) or NULL
                               const float *bias,          // (C) or NULL
                               const float *residual,      // (N, C) or NULL
                               int relu, int N, int C, float eps);

void batchnorm2d_backward(float *dx,         // (N, C) = or += (accumulate); or NULL
                          float *dresidual,  // (N, C) = or += (accumulate); or NULL
                          int accumulate,
                          float *dweight,       // (C) += ; or NULL
                          float *dbias,         // (C) += ; or NULL
                          const float *dy,      // (N, C)
                          const float *y,       // (N, C) forward output (read when relu)
                          const float *x,       // (N, C) forward input
                          const float *weight,  // (C) or NULL
                          const float *mean,    // (C) from forward
                          const float *rstd,    // (C) from forward
                          int relu, int N, int C,
                          float *workspace);  // (batchnorm2d_workspace_floats)

// The same backward when the input gradient goes only to a bf16 convolution's output gradient
// (kernels/conv2d_bf16.h, dyh): dxh = bf16 of the dx batchnorm2d_backward would overwrite, with no
// float copy; the other arguments are batchnorm2d_backward's (accumulate applies to dresidual).
// yh: the forward's rounded output, or NULL; where given the ReLU's mask is read from it (half
// the bytes of y; the same mask) and y may be NULL. The input is x, or its bf16 copy xh (x NULL)
// as the forward took it; with xh, dy may come in bf16 too (dyh, dy NULL: a bf16 convolution's
// rounded input gradient, kernels/conv2d_bf16.h). As in the forward, bitwise the results of the
// widened values.
void batchnorm2d_backward_rounded(spk_bf16 *dxh, float *dresidual, int accumulate, float *dweight, float *dbias,
                                  const float *dy, const spk_bf16 *dyh, const float *y, const spk_bf16 *yh,
                                  const float *x, const spk_bf16 *xh, const float *weight, const float *mean,
                                  const float *rstd, int relu, int N, int C, float *workspace);

// Scratch of the training passes: the per-block partial sums.
size_t batchnorm2d_workspace_floats(int N, int C);

// ---- the world-size-invariant mode: BatchNorm2d over the global batch -----------------------
// As batchnorm1d's (kernels/batchnorm.h, the same two calls per pass around the caller's
// cross-rank reduction of the exact sums), for B samples of HW rows each (N = B * HW rows here,
// N_global of the global batch): every group of `group` consecutive samples (B is a multiple)
// adds its sums over its rows (in double, the rows in an order fixed by the shape, the samples in
// order) as one term.
//   forward:  batchnorm2d_stats_partial adds each group's sums of (x - shift) and (x - shift)^2
//             to sums[0, C) and sums[C, 2C) (shift: running_mean, or 0 when NULL);
//             batchnorm2d_forward_global normalises with the reduced sums' mean and biased
//             variance over N_global rows, saves mean/rstd, updates the running statistics and
//             applies the epilogue, as batchnorm2d_forward_train.
//   backward: batchnorm2d_backward_partial adds each group's sums of g and g * xhat (g: dy masked
//             by the ReLU of y) to sums[0, C) and sums[C, 2C) and, unless empty, to dbias and
//             dweight; batchnorm2d_backward_global then writes (or adds) the residual's and the
//             input's gradients, as batchnorm2d_backward, with the reduced sums (the input's, or
//             its bf16 rounding alone: dxh, the output gradient of a bf16 convolution).
void batchnorm2d_stats_partial(xsum_t sums,         // (2C) +=
                               const float *x,      // (B * HW, C)
                               const float *shift,  // (C) or NULL
                               int B, int HW, int C, int group);
void batchnorm2d_forward_global(float *y, float *mean, float *rstd, float *running_mean, float *running_var,
                                const float *x, const float *weight, const float *bias, const float *residual, int relu,
                                xsum_t sums,  // (2C) reduced, from batchnorm2d_stats_partial
                                int64_t N_global, int N, int C, float eps, float momentum);
void batchnorm2d_backward_partial(xsum_t sums,     // (2C) +=
                                  xsum_t dweight,  // (C) += , or empty
                                  xsum_t dbias,    // (C) += , or empty
                                  const float *dy, const float *y, const float *x, const float *mean, const float *rstd,
                                  int relu, int B, int HW, int C, int group);
void batchnorm2d_backward_global(float *dx,         // (N, C) = or += (accumulate); or NULL
                                 spk_bf16 *dxh,     // (N, C) = bf16 of the input gradient, or NULL (with dx NULL)
                                 float *dresidual,  // (N, C) = or += (accumulate); or NULL
                                 int accumulate, const float *dy, const float *y, const float *x, const float *weight,
                                 const float *mean, const float *rstd, int relu,
                                 xsum_t sums,  // (2C) reduced, from batchnorm2d_backward_partial
                                 int64_t N_global, int N, int C);
