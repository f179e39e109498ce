// Direct convolutions of our own, one GEMM per output row, behind kernels/cpu/conv2d.c for two
// kinds of CAM++'s layers where oneDNN's best kernels are AVX2's or oneDNN is not the backend:
// the front end's layers that stride the height (stride (2, 1): 3x3, and the 1x1 shortcuts),
// which oneDNN 2.6 has on channels-last activations only for the 3x3 (69-83% of the peak
// forward, 55% for the input gradient by its im2col + GEMM, 32-35% for the weight gradient) and
// blocked with reorders for the 1x1 (2.1x slower than these); and the context layers' dilated
// 1-D convolutions (128 -> 32, kernel 3, dilation 2), whose weight gradient it has at 37% (a
// 2-core Zen 3, batch 32, docs/kernels.md).
//
// An output row's taps (the inputs each of its positions reads, kernel row by kernel column by
// channel, zeros outside) make a matrix of positions x KH KW Cin, and the matrix times the
// weights (KH KW Cin x Cout) is the row, on a 6x16 micro-kernel (kernels/cpu/micro_kernel.h)
// with no edge cases. The input gradient is the same with the rows of the output gradient an
// input row feeds (by its index modulo the stride) and the weights transposed; the weight
// gradient is the taps' transpose times the output gradient's row, summed per thread and the
// threads' sums added in order. Channels-last activations and PyTorch-layout weights, as
// kernels/conv2d.h. The forward's and input gradient's bits do not depend on the thread count;
// the weight gradient's are the same for the same thread count.
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"

// Whether the shape is one these kernels take: stride 1 along the width (any along the height;
// any kernel of up to 16 x 16, padding and dilation), channels in sixteens, and a vector
// micro-kernel built in.
int conv2d_taps_shape(const conv2d_shape_t *s);

// Floats of workspace the three passes need.
size_t conv2d_taps_workspace_floats(const conv2d_shape_t *s);

// y = the convolution of x, plus bias (NULL: none).
void conv2d_taps_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                         float *workspace);

// dx = or += (dx_accumulate) the input gradient, dw += the weight gradient; either may be NULL.
void conv2d_taps_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                          const conv2d_shape_t *s, float *workspace);
