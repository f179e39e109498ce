// Conv1d with bf16 operands: the convolution of kernels/conv1d.h (stride 1, odd K, dilation,
// reflect 'same' padding, bias) whose GEMMs take the input, the weight and the output gradient
// rounded to bf16 (kernels/bf16.h) and accumulate in float32. Outputs, bias and every gradient
// are float32; backward ACCUMULATES (+=) into dw and dbias, and into dx with dx_accumulate
// (else it overwrites dx, with the bits of zeroing it first); any of them may be NULL.
//
// The forward rounds x into xh (the caller's buffer), which the backward reads instead of x:
// the stored activation is half the bytes and needs no second rounding. xh has the batch
// folded into time, xh[c, b*T + t] = bf16(x[b, c, t]), which the weight gradient's GEMM reads
// in place. x may be NULL when xh already holds the rounded input. w is the bf16 copy of the
// float32 weight. The backward rounds dy the same way; a caller that produced the output gradient
// rounded and folded already (batchnorm1d_relu_backward_bf16, with the bias gradient's sums)
// passes it as dyh, with dy and dbias NULL.
//
// Scratch: `workspace` of conv1d_bf16_workspace_floats(...) floats (independent of the thread
// count, contents do not carry over). Call from a serial region. Same bits on every run for a
// given shape and thread count.
#pragma once
#include <stddef.h>

#include "kernels/bf16.h"
#include "kernels/exact_sum.h"

size_t conv1d_bf16_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation);

void conv1d_bf16_forward(float *y,           // (B, Cout, T)
                         spk_bf16 *xh,       // (Cin, B*T) = bf16(x) folded, written unless x is NULL
                         const float *x,     // (B, Cin, T) or NULL
                         const spk_bf16 *w,  // (Cout, Cin, K)
                         const float *bias,  // (Cout) or NULL
                         int B, int Cin, int Cout, int T, int K, int dilation,
                         float *workspace);  // (conv1d_bf16_workspace_floats)

void conv1d_bf16_backward(float *dx,  // (B, Cin, T) += (dx_accumulate) or = ; or NULL
                          int dx_accumulate,
                          float *dw,            // (Cout, Cin, K) += ; or NULL
                          float *dbias,         // (Cout) += ; or NULL
                          const float *dy,      // (B, Cout, T), or NULL with dyh
                          const spk_bf16 *dyh,  // (Cout, B*T) dy already rounded and folded, or NULL
                          const spk_bf16 *xh,   // (Cin, B*T) the forward's rounded input
                          const spk_bf16 *w,    // (Cout, Cin, K)
                          int B, int Cin, int Cout, int T, int K, int dilation,
                          float *workspace);  // (conv1d_bf16_workspace_floats)

// The world-size-invariant mode (kernels/backend.h, docs/invariant.md), with
// conv1d_forward_grouped's and conv1d_backward_exact's contracts (kernels/conv1d.h) over bf16
// operands: a group's GEMMs planned for the group alone, dw and dbias exact sums with one term
// per group of `group` samples (dbias from dy as float32, as conv1d_bf16_backward's). Here xh
// holds groups of `group` samples one after another, each folded (Cin, group*T):
// xh[((g*Cin + c)*group + bi)*T + t] = bf16(x[g*group + bi, c, t]), so that a group's GEMMs read
// it with strides set by the group whatever B is (group 1: (B, Cin, T), group B: the default's
// folded layout); the grouped forward writes it so (conv1d_bf16_forward_fixed: groups of one)
// and the exact backward reads it so, with the same group. The exact backward takes the output
// gradient as dy, rounded in it, or rounded already as dyh, in the same layout
// (batchnorm1d_relu_backward_bf16 by groups), with dy NULL and dbias empty.
size_t conv1d_bf16_workspace_floats_fixed(int B, int Cin, int Cout, int T, int K, int dilation);
void conv1d_bf16_forward_fixed(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias, int B,
                               int Cin, int Cout, int T, int K, int dilation, float *workspace);
void conv1d_bf16_forward_grouped(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias, int B,
                                 int Cin, int Cout, int T, int K, int dilation, float *workspace, int group);
void conv1d_bf16_backward_exact(float *dx,  // (B, Cin, T) += (dx_accumulate) or = ; or NULL
                                int dx_accumulate,
                                float *dw_tmp,        // (Cout, Cin, K) scratch
                                xsum_t dw,            // (Cout, Cin, K) +=
                                xsum_t dbias,         // (Cout) +=
                                const float *dy,      // (B, Cout, T), or NULL with dyh
                                const spk_bf16 *dyh,  // dy already rounded (groups folded, as xh), or NULL
                                const spk_bf16 *xh,   // the grouped forward's rounded input
                                const spk_bf16 *w,    // (Cout, Cin, K)
                                int B, int Cin, int Cout, int T, int K, int dilation,
                                float *workspace,  // (conv1d_bf16_workspace_floats_fixed)
                                int group);
