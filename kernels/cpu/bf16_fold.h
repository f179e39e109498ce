// bf16_fold_from_f32 (kernels/bf16.h) by groups of samples, for the world-size-invariant mode's
// layout of bf16 operands (kernels/conv1d_bf16.h). Private to kernels/cpu.
#pragma once
#include "kernels/bf16.h"

// x (B, C, T) rounded into groups of `group` samples (B a multiple), each folded:
// y[((g*C + c)*group + bi)*T + t] = bf16(x[g*group + bi, c, t]); group B is bf16_fold_from_f32's
// layout, group 1 x's own. With sums (B/group, C) not NULL, sums[g, c] += the float sum over the
// group's samples, in order, of their sums over time (bf16_fold_from_f32's order).
void bf16_fold_groups_from_f32(spk_bf16 *y, float *sums, const float *x, int B, int C, int T, int group);
