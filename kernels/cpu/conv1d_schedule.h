// The convolution schedule of kernels/cpu/conv1d.c, shared by the float32 entry points there
// and the bf16 ones in kernels/cpu/conv1d_bf16.c: im2col + GEMM with the per-sample or the
// folded schedule, over operands (x, w, dy) of either element type. Outputs (y, dx, dW) are
// float32 in both. Private to kernels/cpu.
#pragma once
#include <stddef.h>

#include "kernels/cpu/gemm_any.h"
#include "kernels/exact_sum.h"

// What the GEMMs multiply: float32 operands through spk_sgemm, or bf16 ones through
// spk_gemm_bf16 (float32 accumulation). Either gemm may be called from a serial region
// (threads itself) or inside a parallel region (runs on the calling thread).
typedef struct {
    size_t elem;  // bytes per element of x, w and dy as the GEMMs read them
    gemm_any_fn *gemm;
    int folded;  // CONV1D_AUTO is the folded schedule (else the per-sample one)
} conv_operands_t;

extern const conv_operands_t conv_operands_f32;

// An operand tensor of B samples, C rows (channels) and T columns (time): element (b, c, t) at
// p + (b * sample + c * row + t) elements. (B, C, T) tensors have sample = C*T, row = T; with
// the batch folded into time, (C, B*T), sample = T and row = B*T, which the folded schedule's
// GEMMs read in place.
typedef struct {
    const void *p;
    size_t sample, row;
} conv_tensor_t;

// Scratch bytes of the schedule for this shape (independent of the thread count).
size_t conv_schedule_bytes(const conv_operands_t *op, int B, int Cin, int Cout, int T, int K, int dilation);

// y (B, Cout, T) = conv(x, w) (+ bias); x (B, Cin, T) and w (Cout, Cin, K) in op's element type.
void conv_schedule_forward(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                           int B, int Cin, int Cout, int T, int K, int dilation, void *scratch);
// dx (B, Cin, T) += (dx_accumulate; else =, the bits of zeroing it first), dw += (either may
// be NULL) from dy (B, Cout, T), all operands in op's element type. The bias gradient is the
// caller's.
void conv_schedule_backward(const conv_operands_t *op, float *dx, int dx_accumulate, float *dw, conv_tensor_t dy,
                            conv_tensor_t x, const void *w, int B, int Cin, int Cout, int T, int K, int dilation,
                            void *scratch);

// The world-size-invariant mode's schedule (kernels/conv1d.h's conv1d_forward_grouped and
// conv1d_backward_exact, over op's operands; op's GEMMs planned for one thread): the forward
// and the input gradient sample by sample, or, for groups of `group` > 1 samples on bf16 layers
// and on float32 layers whose weights exceed L2, by chunks of each group's samples folded
// together; the weight gradient in blocks set by the shapes, each group one term of the exact
// sums dw; dbias from dy_f32, the float32 output gradient (B, Cout, T). x and dy hold groups of
// `group` samples one after another, C * group * T elements each, with a group's samples (C, T)
// each (sample = C*T, row = T) or folded together (sample = T, row = group*T; bf16 with group
// > 1, read in place): either way what a group's GEMMs read depends on the group alone. Scratch:
// conv_schedule_bytes_fixed.
size_t conv_schedule_bytes_fixed(const conv_operands_t *op, int B, int Cin, int Cout, int T, int K, int dilation);
void conv_schedule_forward_fixed(const conv_operands_t *op, float *y, conv_tensor_t x, const void *w, const float *bias,
                                 int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int group);
void conv_schedule_backward_exact(const conv_operands_t *op, float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw,
                                  xsum_t dbias, const float *dy_f32, conv_tensor_t dy, conv_tensor_t x, const void *w,
                                  int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int group);

// Reflect 'same' padding of a conv with kernel K and dilation d; shapes it cannot take abort.
static inline int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }
void conv_check_shape(int B, int Cin, int Cout, int T, int K, int dilation);
