// oneDNN's convolution primitives behind kernels/cpu/conv2d.c and conv2d_bf16.c: channels-last
// activations as they are, the PyTorch-layout weights reordered per call into the format the
// primitive chose, the weight gradient reordered back and added; Winograd plans (the caller
// passes the algorithm asked for), and float32 direct ones on CPUs without AVX-512, reorder the
// activations to a blocked layout too. Plans (the primitives and the reorders of a shape,
// operand type (kernels/cpu/conv2d_operands.h) and algorithm) are made on first use and cached.
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"
#include "kernels/cpu/conv2d_operands.h"

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
// ... of the forward alone (inference: no backward runs on this workspace), which makes none of
// the backward's parts of the plan.
size_t conv2d_dnnl_forward_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t);

// a: the algorithm asked for (Winograd runs where oneDNN has it for the shape and operands).
// y: float32, or bf16 for CONV2D_BF16_OUT.
void conv2d_dnnl_forward(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                         conv2d_operands t, conv2d_algorithm a, void *workspace);
// dx = or += (accumulate) the input gradient, dw += the weight gradient; either may be NULL.
void conv2d_dnnl_backward(void *dx, int accumulate, float *dw, const void *dy, const void *x, const void *w,
                          const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, void *workspace);
