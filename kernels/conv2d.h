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

#include "kernels/exact_sum.h"

typedef struct {
    int B, Cin, Cout;  // batch, input and output channels
    int H, W;          // input height (frequency) and width (time)
    int KH, KW;        // kernel
    int SH, SW;        // stride
    int PH, PW;        // zero padding on each side
    int DH, DW;        // dilation (1: none)
} conv2d_shape_t;

static inline int conv2d_out_h(const conv2d_shape_t *s) {
    return (s->H + 2 * s->PH - s->DH * (s->KH - 1) - 1) / s->SH + 1;
}
static inline int conv2d_out_w(const conv2d_shape_t *s) {
    return (s->W + 2 * s->PW - s->DW * (s->KW - 1) - 1) / s->SW + 1;
}
// Whether the sizes make a convolution (positive sizes, no negative padding, an output).
static inline int conv2d_shape_ok(const conv2d_shape_t *s) {
    return s->B > 0 && s->Cin > 0 && s->Cout > 0 && s->H > 0 && s->W > 0 && s->KH > 0 && s->KW > 0 && s->SH > 0 &&
           s->SW > 0 && s->DH > 0 && s->DW > 0 && s->PH >= 0 && s->PW >= 0 && conv2d_out_h(s) > 0 &&
           conv2d_out_w(s) > 0;
}
// Elements of x, y and w.
static inline size_t conv2d_x_size(const conv2d_shape_t *s) { return (size_t)s->B * s->H * s->W * s->Cin; }
static inline size_t conv2d_y_size(const conv2d_shape_t *s) {
    return (size_t)s->B * conv2d_out_h(s) * conv2d_out_w(s) * s->Cout;
}
static inline size_t conv2d_w_size(const conv2d_shape_t *s) { return (size_t)s->Cout * s->Cin * s->KH * s->KW; }
// A square kernel k with stride `stride` and 'same'-style padding k / 2 (the ResNets' layers).
static inline conv2d_shape_t conv2d_square(int B, int Cin, int Cout, int H, int W, int k, int stride) {
    return (conv2d_shape_t){B, Cin, Cout, H, W, k, k, stride, stride, k / 2, k / 2, 1, 1};
}

size_t conv2d_workspace_floats(const conv2d_shape_t *s);

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
// conv2d_forward with every sample computed on its own, by GEMMs planned for one thread, so a
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

// How the CPU computes the float32 convolutions (process-wide, as the models choose:
// app/model/model.h). WINOGRAD: the 3x3 stride-1 layers (nearly all of a ResNet's work) by
// Winograd's F(4x4, 3x3), 4x fewer multiplications than the direct sum, with its own rounding
// (the transforms' sums: a step's gradients stray up to 3x further from float64 than the direct
// sum's where many ReLU inputs sit near zero): oneDNN's where it has one (AVX-512 CPUs, channels
// in sixteens), kernels/cpu/conv2d_winograd.c's elsewhere. Every other shape, and all of them
// under DIRECT (the default), by the direct convolution. The invariant mode's fixed kernels and
// native bf16 operands are unaffected; the widened bf16 path is a float32 convolution.
typedef enum { CONV2D_ALGO_DIRECT = 0, CONV2D_ALGO_WINOGRAD = 1 } conv2d_algorithm;
void conv2d_set_algorithm(conv2d_algorithm a);

// Plain reference (direct loops, double accumulation). Slow; for tests.
void conv2d_forward_reference(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s);
