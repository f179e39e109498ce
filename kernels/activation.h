// Elementwise activations over n floats. Forward may run in place (y == x). Backward
// ACCUMULATES into dx (dx += f'(.) * dy) and takes the forward OUTPUT y, so the input need
// not be kept; but for GELU's, which takes the forward INPUT x (GELU is not invertible).
// dx must not alias dy.
#pragma once
#include <stddef.h>

void relu_forward(float *y, const float *x, size_t n);
void relu_backward(float *dx, const float *dy, const float *y, size_t n);
// ReLU backward in place, when the incoming gradient already sits in g: g = y > 0 ? g : 0
// (y the forward output). Overwrites g instead of accumulating.
void relu_mask(float *g, const float *y, size_t n);

void sigmoid_forward(float *y, const float *x, size_t n);
void sigmoid_backward(float *dx, const float *dy, const float *y, size_t n);

void tanh_forward(float *y, const float *x, size_t n);
void tanh_backward(float *dx, const float *dy, const float *y, size_t n);

// GELU, exact erf form (PyTorch nn.GELU(approximate='none')): y = x * Phi(x), Phi the standard
// normal CDF. Backward takes the forward INPUT x: dx += dy * (Phi(x) + x * phi(x)).
void gelu_forward(float *y, const float *x, size_t n);
void gelu_backward(float *dx, const float *dy, const float *x, size_t n);
