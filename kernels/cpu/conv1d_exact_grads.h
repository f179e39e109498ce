// The world-size-invariant mode's exact weight and bias gradients of the 1-D convolution, for
// kernels/cpu/conv1d.c's conv_schedule_backward_exact: every group of `group` consecutive
// samples (B a multiple) adds its contribution to the exact sums as one term, by blocks that the
// shapes set, so the sums depend neither on B nor on the thread count. Private to kernels/cpu.
#pragma once
#include "kernels/cpu/conv1d_schedule.h"

// dw += the weight gradient of dy and x (the mode's layout, kernels/cpu/conv1d_layout.h's
// conv_group_at), on up to nt threads; dw_tmp: (Cout, Cin*K) floats of scratch; scratch: the
// schedule's (conv_schedule_bytes_fixed).
void conv_weight_grad_exact(const conv_operands_t *op, float *dw_tmp, xsum_t dw, conv_tensor_t dy, conv_tensor_t x,
                            int B, int Cin, int Cout, int T, int K, int dilation, void *scratch, int nt, int group);
// dbias += each group's samples' float sums over time of dy (B, Cout, T) (float32 whatever the
// operands), in order, one term per group.
void conv_bias_grad_exact(xsum_t dbias, const float *dy, int B, int Cout, int T, int group);
