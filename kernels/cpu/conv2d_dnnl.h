// oneDNN's convolution primitives behind kernels/cpu/conv2d.c and conv2d_bf16.c: channels-last
// activations as they are, the PyTorch-layout weights reordered per call into the format the
// primitive chose, the weight gradient reordered back and added; Winograd plans (the caller
// passes the algorithm asked for), and float32 direct ones on CPUs without AVX-512, reorder the
// activations to a blocked layout too. Plans (the primitives and the reorders of a shape,
// operand type and algorithm) are made on first use and cached.
//
// Operand types: CONV2D_F32 takes float32 x, w and dy; CONV2D_BF16 takes them in bf16 (x and dy
// rounded by the caller, w the bf16 copy). Outputs (y, dx, dw) are float32 either way, but for
// CONV2D_BF16_OUT: CONV2D_BF16's operands with y and dx written in bf16 (oneDNN rounds its
// float32 sums; dx overwritten, not added to).
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"
#include "kernels/exact_sum.h"

typedef enum { CONV2D_F32 = 0, CONV2D_BF16 = 1, CONV2D_BF16_OUT = 2 } conv2d_operands;

// Whether oneDNN runs this shape with these operands here (built with oneDNN; bf16 needs the
// CPU's bf16 instructions).
int conv2d_dnnl_usable(conv2d_operands t);

// 1 where oneDNN has a Winograd convolution on this CPU (oneDNN 2.6: AVX-512 only) and is the
// GEMM backend; elsewhere kernels/cpu/conv2d_winograd.c runs Winograd.
int conv2d_dnnl_winograd_available(void);

// 1 where oneDNN's best kernels on this CPU are AVX-512's (0 on AVX2 CPUs and without oneDNN).
int conv2d_dnnl_avx512(void);

// Bytes of scratch the three passes need (weights in the primitives' formats, the weight
// gradient before it is added, oneDNN's scratchpad, and an input gradient to be added).
size_t conv2d_dnnl_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t);

// a: the algorithm asked for (Winograd runs where oneDNN has it for the shape and operands).
// y: float32, or bf16 for CONV2D_BF16_OUT.
void conv2d_dnnl_forward(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                         conv2d_operands t, conv2d_algorithm a, void *workspace);
// dx = or += (accumulate) the input gradient, dw += the weight gradient; either may be NULL.
void conv2d_dnnl_backward(void *dx, int accumulate, float *dw, const void *dy, const void *x, const void *w,
                          const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, void *workspace);

// The world-size-invariant mode (kernels/conv2d.h's and conv2d_bf16.h's fixed and exact twins),
// CONV2D_F32 or CONV2D_BF16 operands: every sample by a plan of one sample made and run on one
// thread, threads over samples, so a sample's result depends on neither the batch nor the
// thread count; Winograd where asked for and oneDNN has it (a: as for the default plans), else
// direct on channels-last activations. Usable where oneDNN has the shape's three passes without
// its reference loops. The weight gradient: each sample's (float32), summed in order
// over its group of `group` samples in float, each group's sum one exact term added to dw.
int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a);
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t);
void conv2d_dnnl_forward_fixed(float *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace);
// dx = or += (accumulate) the input gradient (or NULL), dw += the groups' terms (or empty).
void conv2d_dnnl_backward_exact(float *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace);
