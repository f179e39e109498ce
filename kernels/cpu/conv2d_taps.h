// Direct 3x3 convolutions of our own that stride the height (the CAM++ front end's frequency-
// halving layers: stride (2, 1)), behind kernels/cpu/conv2d.c where oneDNN's best kernels are
// AVX2's or oneDNN is not the backend. There oneDNN 2.6 has them only on channels-last
// activations, and ran them at 69-83% of the peak forward, 55% for the input gradient (its
// im2col + GEMM) and 32-35% for the weight gradient (a 2-core Zen 3, batch 32, docs/kernels.md).
//
// Each output row is one GEMM over its nine taps: the three input rows it reads, zero-padded
// and interleaved position by position, make a matrix whose row j holds the 3 x 3 x Cin inputs
// of output position j in order, so rows of positions times the weights (9 Cin x Cout) give the
// row on a 6x16 micro-kernel (kernels/cpu/micro_kernel.h) with no edge cases. The input
// gradient is the same with the output gradient's rows (those a row of x feeds, by the residue
// of its index modulo the stride) and the weights transposed and flipped; the weight gradient
// is the first matrix's transpose times the output gradient's row, summed per thread and the
// threads' sums added in order. Channels-last activations and PyTorch-layout weights, as
// kernels/conv2d.h. The forward's and input gradient's bits do not depend on the thread count;
// the weight gradient's are the same for the same thread count.
#pragma once
#include <stddef.h>

#include "kernels/conv2d.h"

// Whether the shape is one these kernels take: 3x3, padding 1, no dilation, stride 1 along the
// width (any along the height), channels in sixteens, and a vector micro-kernel built in.
int conv2d_taps_shape(const conv2d_shape_t *s);

// Floats of workspace the three passes need.
size_t conv2d_taps_workspace_floats(const conv2d_shape_t *s);

// y = the convolution of x, plus bias (NULL: none).
void conv2d_taps_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                         float *workspace);

// dx = or += (dx_accumulate) the input gradient, dw += the weight gradient; either may be NULL.
void conv2d_taps_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                          const conv2d_shape_t *s, float *workspace);
