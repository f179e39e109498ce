// Winograd F(4x4, 3x3) convolutions of our own, behind kernels/cpu/conv2d.c where Winograd is
// asked for (conv2d_set_algorithm): on AVX-512 CPUs, where they outrun oneDNN 2.6's (its
// Winograd is AVX-512 only, and reorders to a blocked layout around its kernels), and where
// oneDNN has none (CPUs without AVX-512, builds without oneDNN). Channels-last activations and
// PyTorch-layout weights, as kernels/conv2d.h; the shapes are 3x3, stride 1, padding 1, no
// dilation (a ResNet's and the CAM++ front end's 3x3 layers, nearly all their work), with
// channels in sixteens as oneDNN's Winograd takes them, so that every CPU runs the same layers
// by Winograd (fewer channels gain little, and lose accuracy where a network is ill-conditioned).
//
// Each 4x4 output tile is A^T [(G w G^T) . (B^T d B)] A for its 6x6 input patch d (at the
// points 0, +-2/3, +-3/2 and infinity, which round less than Lavin and Gray's 0, +-1, +-2): 36
// products a tile and channel pair where the direct sum takes 144. The input gradient is the
// same convolution of dy with the weights rotated and transposed; the weight gradient is its
// adjoint, G^T [sum over tiles (A dy A^T) . (B^T x B)] G.
// The products run as small GEMMs over blocks of tiles (micro-kernels of AVX-512 or AVX2 and FMA
// where the compiler targets them, plain loops elsewhere). The rounding is the transforms' own,
// as oneDNN's Winograd's is (docs/kernels.md). The forward's and the input gradient's bits do not
// depend on the thread count nor on the batch's other samples (each tile is computed on its
// own); the weight gradient's are the same for the same thread count.
#pragma once
#include <stddef.h>

#include "kernels/conv2d_types.h"

// Whether the shape is one these kernels take.
int conv2d_winograd_shape(const conv2d_shape_t *s);

// Whether these kernels are AVX-512's, and so to be taken before oneDNN's Winograd: ResNet34's
// 3x3 layers took 0.95 s a step (batch 32, 2 threads of a Zen 5) against oneDNN's 1.41 s.
int conv2d_winograd_avx512(void);

// Floats of workspace the three passes need (the weights transformed, blocks of tiles, the
// weight gradient's sums).
size_t conv2d_winograd_workspace_floats(const conv2d_shape_t *s);

// y = the convolution of x, plus bias (NULL: none).
void conv2d_winograd_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                             float *workspace);

// dx = or += (dx_accumulate) the input gradient, dw += the weight gradient; either may be NULL.
void conv2d_winograd_backward(float *dx, int dx_accumulate, float *dw, const float *dy, const float *x, const float *w,
                              const conv2d_shape_t *s, float *workspace);

// The weight gradient in two steps, for the invariant mode's blocks of samples: the sums over
// tiles (A dy A^T) . (B^T x B) of a block, on the calling thread alone (from inside a parallel
// region), the tiles' products added block after block in order, so that the bits depend on the
// shape alone, never on the thread count; then dw += G^T sums G (threads over kernels; each
// kernel's bits its own). The sums' floats, and the serial step's workspace:
size_t conv2d_winograd_sums_floats(const conv2d_shape_t *s);
size_t conv2d_winograd_serial_workspace_floats(const conv2d_shape_t *s);
void conv2d_winograd_weight_sums_serial(float *sums, const float *dy, const float *x, const conv2d_shape_t *s,
                                        float *workspace);
void conv2d_winograd_weight_of_sums(float *dw, const float *sums, const conv2d_shape_t *s);
