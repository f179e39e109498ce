// The 2-D convolution's shape and the CPU's choice of algorithm (kernels/conv2d.h has the
// operations): their own header, so that the CPU backend's kernels (kernels/cpu/conv2d_*.c) share
// the shape with the file that dispatches to them without including what they implement.
#pragma once
#include <stddef.h>

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

// How the CPU computes the float32 convolutions (process-wide, as the models choose:
// app/model/model.h). WINOGRAD: the 3x3 stride-1 layers (nearly all of a ResNet's work) by
// Winograd's F(4x4, 3x3), 4x fewer multiplications than the direct sum, with its own rounding
// (the transforms' sums: a step's gradients stray up to 3x further from float64 than the direct
// sum's where many ReLU inputs sit near zero): oneDNN's where it has one (AVX-512 CPUs, channels
// in sixteens), kernels/cpu/conv2d_winograd.c's elsewhere. Every other shape, and all of them
// under DIRECT (the default), by the direct convolution. The invariant mode's fixed kernels and
// native bf16 operands are unaffected; the widened bf16 path is a float32 convolution.
typedef enum { CONV2D_ALGO_DIRECT = 0, CONV2D_ALGO_WINOGRAD = 1 } conv2d_algorithm;
