// 1x1 convolutions of stride 1 (CAM++'s dense and transition layers, the bottleneck ResNets'
// 1x1 layers) as GEMMs, behind kernels/cpu/conv2d.c and conv2d_bf16.c. Over channels-last rows
// such a layer is one GEMM over all B H W rows: y = x w^T, dx = dy w, dW += dY^T X, with w
// (Cout, Cin) as PyTorch lays it out: no reorders. Against oneDNN's convolution primitives (a Zen
// 3, 2 threads, CAM++'s dense layers at 32 x 100 rows and a Bottleneck's at 32 x 80 x 200, docs/
// kernels.md): the float32 weight gradient is 13-45% faster on every shape, the forward and
// input gradient up to 2x faster below 256 input channels (conv2d.c picks by that); in bf16
// oneDNN's matmul ran CAM++'s weight gradients at 375 GFLOP/s in the step where its convolution
// ran 305 (an AMX Xeon, one thread, batch 16), and ResNet50's bf16 step 1.09-1.17x as fast.
#pragma once
#include "kernels/bf16.h"
#include "kernels/conv2d_types.h"
#include "kernels/exact_sum.h"

static inline int conv2d_pointwise(const conv2d_shape_t *s) {
    return s->KH == 1 && s->KW == 1 && s->SH == 1 && s->SW == 1 && s->PH == 0 && s->PW == 0;
}

// Float32: y = x w^T (+ bias, or NULL); dx = or += (accumulate) dy w. Threaded (call from a
// serial region).
void conv2d_pointwise_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s);
void conv2d_pointwise_input_grad(float *dx, int accumulate, const float *dy, const float *w, const conv2d_shape_t *s);

// dw += dy^T x: float32 operands, or bf16 ones (float32 sums of their products), on the
// caller's threads (call from a serial region).
void conv2d_pointwise_weight_grad(float *dw, const float *dy, const float *x, const conv2d_shape_t *s);
void conv2d_pointwise_weight_grad_bf16(float *dw, const spk_bf16 *dyh, const spk_bf16 *xh, const conv2d_shape_t *s);

// The world-size-invariant mode's (kernels/conv2d.h, conv2d_backward_exact): each group of
// `group` samples adds its dW = dYg^T Xg over its G H W rows to the exact sums dw as one term,
// by GEMMs over fixed parts of the group and tiles of dW, each planned for one thread (threads
// over them), the parts added in order, so the thread count does not show. dy and x are float32,
// or bf16 where `bf16` is set; scratch: conv2d_pointwise_exact_floats(s) floats (0 for shapes
// that are not pointwise).
size_t conv2d_pointwise_exact_floats(const conv2d_shape_t *s);
void conv2d_pointwise_weight_grad_exact(xsum_t dw, const void *dy, const void *x, int bf16, const conv2d_shape_t *s,
                                        int group, float *scratch);
