// BatchNorm + ReLU over the channels of a densely connected block (CAM++'s dense TDNN blocks),
// with the statistics shared by every layer that reads a channel.
//
// A dense block keeps each layer's output channels side by side in one buffer of rows
// (channels-last: B samples of HW rows, row stride ld >= the block's channels), and every later
// layer, and the transition after the block, starts with its own BatchNorm and ReLU over a prefix
// of those channels. In training a channel's batch statistics are the same whichever layer reads
// it, so they are computed once per channel (dense_bn_stats_partial, dense_bn_stats_finish), and
// each reader applies them with its own affine parameters (dense_bn_relu_forward). Backward, each
// reader adds the gradient at the normalised input (m * weight, m its gradient masked by its
// ReLU) into one accumulator g per channel and returns its sums (dense_bn_relu_backward); once
// every reader of a channel has run, dense_bn_input_grad turns g and the readers' summed sums
// into the input gradient. This equals the sum of the readers' own BatchNorm backwards, with one
// pass over the rows per channel instead of one per reader:
//   dx = rstd * (g - S1 / N - xhat * S2 / N),  S1 = sum_readers w sum_rows m,
//   S2 = sum_readers w sum_rows m * xhat,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps).
//
// Sums are per group of `group` consecutive samples (B a multiple; group = B: one group), over
// the group's rows in a fixed order in double, rounded to float: they depend on the shape alone,
// never on the thread count; the world-size-invariant mode adds each group's sums to exact sums
// (kernels/exact_sum.h) and reduces them over the ranks. Nothing aliases. Call from a serial
// region (threads internally).
#pragma once
#include <stdint.h>

#include "kernels/bf16.h"

// part (2, B / group, C): part[0][k][c] = the sum over group k's rows of (x[., c] - shift[c]),
// part[1][k][c] that of its square. shift (C): any value identical on every rank (the running
// mean, or NULL for 0); it keeps the variance from cancelling.
void dense_bn_stats_partial(float *part, const float *x, int ldx, const float *shift, int B, int HW, int C, int group);
// From s1 = sum(x - shift), s2 = sum((x - shift)^2) over N rows: the mean and the biased
// variance (>= 0) of every channel; and, unless running_mean is NULL, the running statistics
// updated as PyTorch's BatchNorm does (momentum; the unbiased variance var * N / (N - 1)).
void dense_bn_stats_finish(float *mean, float *var, float *running_mean, float *running_var, const float *s1,
                           const float *s2, const float *shift, int64_t N, int C, float momentum);
// A reader's running statistics from the shared batch statistics (as dense_bn_stats_finish).
void dense_bn_running_update(float *running_mean, float *running_var, const float *mean, const float *var, int64_t N,
                             int C, float momentum);

// z = relu((x - mean) / sqrt(var + eps) * weight + bias) over N rows of C channels: training
// passes the batch statistics, inference the reader's running ones. weight/bias NULL: 1, 0.
// Into z (float) or zh (rounded to bf16, for a bf16 convolution's operand: the float pass and the
// rounding pass saved), whichever is not NULL (both: both), each with row stride ldz.
void dense_bn_relu_forward(float *z, spk_bf16 *zh, int ldz, const float *x, int ldx, const float *mean,
                           const float *var, const float *weight, const float *bias, int N, int C, float eps);

// A reader's backward from dz, the gradient of its z (recomputed from x for the ReLU's mask):
// with m = dz where z > 0, else 0, g = m * weight (overwritten, or added with accumulate), and
// part (4, B / group, C): per group the sums over its rows of m and m * xhat (its bias and weight
// gradients), then those times weight (its terms of S1 and S2).
void dense_bn_relu_backward(float *g, int ldg, int accumulate, float *part, const float *dz, int ldz, const float *x,
                            int ldx, const float *mean, const float *var, const float *weight, const float *bias, int B,
                            int HW, int C, float eps, int group);

// dx = rstd * (g - s1 / N - xhat * s2 / N) (overwritten, or added with accumulate) over `rows`
// rows, with s1, s2 (C each) the readers' S1 and S2 over the N rows of the (global) batch.
void dense_bn_input_grad(float *dx, int lddx, int accumulate, const float *g, int ldg, const float *x, int ldx,
                         const float *mean, const float *var, const float *s1, const float *s2, int64_t N, int rows,
                         int C, float eps);
