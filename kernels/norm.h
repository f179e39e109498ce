// What gradient clipping needs: the squared L2 norm of a vector, summed in double in a fixed
// order that depends on n alone (so every rank holding the same vector gets the same bits,
// whatever its thread count), and scaling a vector by a factor.
#pragma once
#include <stddef.h>

// Elements summed per block: each block is summed from its first element to its last, then
// the block sums from the first block to the last (CUDA: each block by a fixed tree, the same
// on every run; CPU: sequentially).
#define NORM_BLOCK 4096

// *out = sum_i x[i]^2 (n floats; out is one double in backend memory).
void vec_sum_squares(double *out, const float *x, size_t n);
// y *= a.
void vec_scale(float *y, float a, size_t n);
