// Conv2d over channels-last activations, the 2-D encoders' convolution (ResNet, the CAM++ front
// end): x (B, H, W, Cin) -> y (B, OH, OW, Cout), weights in PyTorch's layout (Cout, Cin, KH, KW),
// zero padding, any stride and dilation, one group, optional bias.
//
//   y[b,i,j,o] = bias[o] + sum_{c,r,s} w[o,c,r,s] * x[b, i*SH - PH + r*DH, j*SW - PW + s*DW, c]
//   (terms outside the input are zero), OH = (H + 2 PH - DH (KH - 1) - 1) / SH + 1, OW alike.
//
// Channels-last ("NHWC") because it is the layout both oneDNN's (on AVX-512 CPUs; on AVX2 ones
// kernels/cpu/conv2d_dnnl.c reorders to its blocked layout) and cuDNN's fast kernels take
// without reordering the activations, and because BatchNorm over it is a row reduction
// (kernels/batchnorm2d.h). The weights keep PyTorch's layout: checkpoints and exports need no
// conversion; the kernels reorder them per call (they are small beside the activations).
//
// Backward: dx is overwritten (dx_accumulate 0) or added to (1): a residual block's input
// gradient is the sum of two paths, and overwriting saves clearing it first. dw and dbias
// ACCUMULATE. Any of dx, dw, dbias may be NULL. Outputs must not alias inputs. Scratch:
// `workspace` of conv2d_workspace_floats(s) floats, reusable between calls (contents do not
// carry over); its size may depend on the thread count, which is fixed for a process. Call from
// a serial region (threads internally).
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"
#include "kernels/exact_sum.h"

size_t conv2d_workspace_floats(const conv2d_shape_t *s);
// The workspace conv2d_forward alone needs (inference: no backward runs on it), at most
// conv2d_workspace_floats(s). The CPU's oneDNN plans then make none of the backward's parts.
size_t conv2d_forward_workspace_floats(const conv2d_shape_t *s);

void conv2d_forward(float *y,           // (B, OH, OW, Cout)
                    const float *x,     // (B, H, W, Cin)
                    const float *w,     // (Cout, Cin, KH, KW)
                    const float *bias,  // (Cout) or NULL
                    const conv2d_shape_t *s,
                    float *workspace);  // (conv2d_workspace_floats)

void conv2d_backward(float *dx,  // (B, H, W, Cin) = or += (dx_accumulate); or NULL
                     int dx_accumulate,
                     float *dw,        // (Cout, Cin, KH, KW) += ; or NULL
                     float *dbias,     // (Cout) += ; or NULL
                     const float *dy,  // (B, OH, OW, Cout)
                     const float *x,   // (B, H, W, Cin)
                     const float *w,   // (Cout, Cin, KH, KW)
                     const conv2d_shape_t *s,
                     float *workspace);  // (conv2d_workspace_floats)

// The world-size-invariant mode (kernels/backend.h, docs/invariant.md). conv2d_forward_fixed:
// conv2d_forward with every sample computed on its own, by oneDNN plans of blocks of samples
// (the block fixed by the shape, a short one padded) or GEMMs, both planned for one thread, so a
// sample's output depends on neither B nor the thread count. conv2d_backward_exact: dx as
// conv2d_backward (= or += by dx_accumulate), computed the same way; dw and dbias are exact sums
// (kernels/exact_sum.h) to which every group of `group` consecutive samples (B is a multiple)
// adds its contribution as one term (its samples' float gradients summed in order), so they do
// not depend on which groups this call gets. dw_tmp: (Cout, Cin, KH, KW) floats of scratch,
// undefined afterwards (needed with dw). Either sum may be empty (xsum_none()). Their workspace:
// conv2d_workspace_floats_fixed (which grows with B: per-sample partial sums).
size_t conv2d_workspace_floats_fixed(const conv2d_shape_t *s);
void conv2d_forward_fixed(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                          float *workspace);
void conv2d_backward_exact(float *dx,  // (B, H, W, Cin) = or += (dx_accumulate); or NULL
                           int dx_accumulate,
                           float *dw_tmp,    // (Cout, Cin, KH, KW) scratch
                           xsum_t dw,        // (Cout, Cin, KH, KW) +=
                           xsum_t dbias,     // (Cout) +=
                           const float *dy,  // (B, OH, OW, Cout)
                           const float *x,   // (B, H, W, Cin)
                           const float *w,   // (Cout, Cin, KH, KW)
                           const conv2d_shape_t *s,
                           float *workspace,  // (conv2d_workspace_floats_fixed)
                           int group);

// conv2d_algorithm (kernels/conv2d_types.h): how the CPU computes the float32 convolutions.
void conv2d_set_algorithm(conv2d_algorithm a);

// Plain reference (direct loops, double accumulation). Slow; for tests.
void conv2d_forward_reference(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s);
