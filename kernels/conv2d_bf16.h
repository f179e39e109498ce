// Conv2d with bf16 operands: the convolution of kernels/conv2d.h (channels-last activations,
// PyTorch-layout weights, zero padding, stride, dilation, bias) whose products take the input,
// the weight and the output gradient rounded to bf16 (kernels/bf16.h) and accumulate in
// float32. Outputs, bias and every gradient are float32; dx is overwritten or added to
// (dx_accumulate) as in conv2d_backward, dw and dbias ACCUMULATE; any of them may be NULL. A
// backend may round y, dx and dw to bf16 on the way (the CUDA one does: cuDNN's bf16 convolutions
// write bf16, as PyTorch AMP's; kernels/cuda/conv2d_bf16.cu); the CPU's keep the float32 sums.
//
// The forward rounds x into xh (the caller's buffer, the same layout), which the backward reads
// instead of x: the stored activation is half the bytes and needs no second rounding. x may be
// NULL when xh already holds the rounded input. w is the bf16 copy of the float32 weight. The
// backward rounds dy the same way; a caller that produced the output gradient rounded already
// (batchnorm2d_backward_rounded) passes it as dyh, with dy and dbias NULL.
//
// Scratch: `workspace` of conv2d_bf16_workspace_floats(s) floats (contents do not carry over).
// Call from a serial region.
#pragma once
#include <stddef.h>

#include "kernels/bf16.h"
#include "kernels/conv2d.h"

size_t conv2d_bf16_workspace_floats(const conv2d_shape_t *s);
// The workspace conv2d_bf16_forward alone needs (inference: neither a backward nor the rounded
// forward runs on it), at most conv2d_bf16_workspace_floats(s).
size_t conv2d_bf16_forward_workspace_floats(const conv2d_shape_t *s);

void conv2d_bf16_forward(float *y,           // (B, OH, OW, Cout)
                         spk_bf16 *xh,       // (B, H, W, Cin) = bf16(x), written unless x is NULL
                         const float *x,     // (B, H, W, Cin) or NULL
                         const spk_bf16 *w,  // (Cout, Cin, KH, KW)
                         const float *bias,  // (Cout) or NULL
                         const conv2d_shape_t *s,
                         float *workspace);  // (conv2d_bf16_workspace_floats)

// The forward without bias whose output is stored in bf16: yh = bf16 of the float32 sums (round
// to nearest even), as PyTorch AMP's convolutions store theirs. The bf16 training step of the
// 2-D encoders keeps its convolutions' outputs so: BatchNorm2d reads them at half the bytes
// (kernels/batchnorm2d.h). xh and x as conv2d_bf16_forward's.
void conv2d_bf16_forward_rounded(spk_bf16 *yh,       // (B, OH, OW, Cout)
                                 spk_bf16 *xh,       // (B, H, W, Cin) = bf16(x), written unless x is NULL
                                 const float *x,     // (B, H, W, Cin) or NULL
                                 const spk_bf16 *w,  // (Cout, Cin, KH, KW)
                                 const conv2d_shape_t *s,
                                 float *workspace);  // (conv2d_bf16_workspace_floats)

void conv2d_bf16_backward(float *dx,  // (B, H, W, Cin) = or += (dx_accumulate); or NULL
                          int dx_accumulate,
                          float *dw,            // (Cout, Cin, KH, KW) += ; or NULL
                          float *dbias,         // (Cout) += ; or NULL
                          const float *dy,      // (B, OH, OW, Cout), or NULL with dyh
                          const spk_bf16 *dyh,  // (B, OH, OW, Cout) dy already rounded, or NULL
                          const spk_bf16 *xh,   // (B, H, W, Cin) the forward's rounded input
                          const spk_bf16 *w,    // (Cout, Cin, KH, KW)
                          const conv2d_shape_t *s,
                          float *workspace);  // (conv2d_bf16_workspace_floats)

// The backward whose input gradient is stored in bf16: dxh = bf16 of the float32 sums
// (overwritten), as PyTorch AMP's convolutions store theirs; dw += as conv2d_bf16_backward's
// (the same bits), or NULL. dy comes rounded (dyh). The bf16 training step's convolutions whose
// input gradient goes to a BatchNorm2d alone, which reads it so (kernels/batchnorm2d.h).
void conv2d_bf16_backward_rounded(spk_bf16 *dxh,        // (B, H, W, Cin)
                                  float *dw,            // (Cout, Cin, KH, KW) += ; or NULL
                                  const spk_bf16 *dyh,  // (B, OH, OW, Cout)
                                  const spk_bf16 *xh,   // (B, H, W, Cin) the forward's rounded input
                                  const spk_bf16 *w,    // (Cout, Cin, KH, KW)
                                  const conv2d_shape_t *s,
                                  float *workspace);  // (conv2d_bf16_workspace_floats)

// The world-size-invariant mode (kernels/backend.h, docs/invariant.md), with
// conv2d_forward_fixed's and conv2d_backward_exact's contracts (kernels/conv2d.h) over bf16
// operands: each sample computed on its own by plans that depend neither on B nor on the thread
// count; dw and dbias exact sums, one term per group of `group` samples (dbias from dy as
// float32, as conv2d_bf16_backward's). The output gradient comes as dy, or rounded as dyh (one
// of them; dbias empty with dyh). conv2d_bf16_forward_rounded_fixed: conv2d_bf16_forward_rounded
// so (the bf16 training step's 2-D units where BatchNorm runs by groups on the default kernels).
size_t conv2d_bf16_workspace_floats_fixed(const conv2d_shape_t *s);
void conv2d_bf16_forward_fixed(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                               const conv2d_shape_t *s, float *workspace);
void conv2d_bf16_forward_rounded_fixed(spk_bf16 *yh, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                       const conv2d_shape_t *s, float *workspace);
void conv2d_bf16_backward_exact(float *dx,  // (B, H, W, Cin) = or += (dx_accumulate); or NULL
                                int dx_accumulate,
                                float *dw_tmp,        // (Cout, Cin, KH, KW) scratch
                                xsum_t dw,            // (Cout, Cin, KH, KW) +=
                                xsum_t dbias,         // (Cout) +=
                                const float *dy,      // (B, OH, OW, Cout), or NULL
                                const spk_bf16 *dyh,  // (B, OH, OW, Cout) bf16(dy), or NULL
                                const spk_bf16 *xh,   // (B, H, W, Cin) the forward's rounded input
                                const spk_bf16 *w,    // (Cout, Cin, KH, KW)
                                const conv2d_shape_t *s,
                                float *workspace,  // (conv2d_bf16_workspace_floats_fixed)
                                int group);
// conv2d_bf16_backward_rounded's twin: dxh = bf16 of conv2d_bf16_backward_exact's input gradient
// (overwritten), dw as its (or empty).
void conv2d_bf16_backward_rounded_exact(spk_bf16 *dxh,        // (B, H, W, Cin)
                                        float *dw_tmp,        // (Cout, Cin, KH, KW) scratch
                                        xsum_t dw,            // (Cout, Cin, KH, KW) +=
                                        const spk_bf16 *dyh,  // (B, OH, OW, Cout)
                                        const spk_bf16 *xh,   // (B, H, W, Cin) the forward's rounded input
                                        const spk_bf16 *w,    // (Cout, Cin, KH, KW)
                                        const conv2d_shape_t *s,
                                        float *workspace,  // (conv2d_bf16_workspace_floats_fixed)
                                        int group);

// How the CPU computes it (process-wide; for tuning and tests): AUTO is what measured fastest
// (kernels/cpu/conv2d_bf16.c): oneDNN's bf16 convolutions where the CPU has AMX, else the
// operands rounded to bf16 and widened to float32 for the float32 convolution (the same
// products, summed in float32 either way). NATIVE needs oneDNN and bf16 instructions.
typedef enum { CONV2D_BF16_AUTO = 0, CONV2D_BF16_NATIVE = 1, CONV2D_BF16_WIDENED = 2 } conv2d_bf16_path;
void conv2d_bf16_set_path(conv2d_bf16_path p);
