// oneDNN's convolutions for the world-size-invariant mode (kernels/conv2d.h's and conv2d_bf16.h's
// fixed and exact twins, docs/invariant.md), on the plans of kernels/cpu/conv2d_dnnl.c, with
// CONV2D_F32 or CONV2D_BF16 operands (and CONV2D_BF16_OUT: y, or dx alone, in bf16): blocks of
// samples by plans made and run on one thread, threads over blocks, the block's size a function
// of the shape alone (8 samples on small maps, 1 elsewhere; a short block padded with zero
// samples), so a sample's result depends on neither the batch nor the thread count; Winograd
// where asked for and oneDNN has it (a: as for the default plans), else direct on channels-last
// activations. Usable where oneDNN has the shape's three passes without its reference loops. The
// weight gradient: each group's samples in blocks (float32, the last one short where the block
// does not divide the group), summed in order in float, each group's sum one exact term added to dw.
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/exact_sum.h"

int conv2d_dnnl_fixed_usable(const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a);
size_t conv2d_dnnl_fixed_workspace_bytes(const conv2d_shape_t *s, conv2d_operands t);
void conv2d_dnnl_forward_fixed(void *y, const void *x, const void *w, const float *bias, const conv2d_shape_t *s,
                               conv2d_operands t, conv2d_algorithm a, void *workspace);
// dx = or += (accumulate) the input gradient (or NULL), dw += the groups' terms (or empty).
void conv2d_dnnl_backward_exact(void *dx, int accumulate, xsum_t dw, const void *dy, const void *x, const void *w,
                                const conv2d_shape_t *s, conv2d_operands t, conv2d_algorithm a, int group,
                                void *workspace);
