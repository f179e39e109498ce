// Elementwise activations; math in kernels/elementwise_math.h.
#include "kernels/activation.h"

#include "kernels/elementwise_math.h"

#define PAR_MIN 32768  // below this many elements, threading costs more than it saves

// for i in [0, n): one vectorized loop, threaded from PAR_MIN elements on.
#define EACH(i) _Pragma("omp parallel for simd schedule(static) if (n >= PAR_MIN)") for (size_t i = 0; i < n; i++)

void relu_forward(float *y, const float *x, size_t n) { EACH(i) y[i] = spk_relu(x[i]); }
void relu_backward(float *dx, const float *dy, const float *y, size_t n) {
    EACH(i) dx[i] += spk_relu_grad(dy[i], y[i]);
}
void relu_mask(float *g, const float *y, size_t n) { EACH(i) g[i] = spk_relu_grad(g[i], y[i]); }
void sigmoid_forward(float *y, const float *x, size_t n) { EACH(i) y[i] = spk_sigmoid(x[i]); }
void sigmoid_backward(float *dx, const float *dy, const float *y, size_t n) {
    EACH(i) dx[i] += spk_sigmoid_grad(dy[i], y[i]);
}

void tanh_forward(float *y, const float *x, size_t n) { EACH(i) y[i] = spk_tanh(x[i]); }

void tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
    EACH(i) dx[i] += spk_tanh_grad(dy[i], y[i]);
}

// erfcf is libm's scalar function: threaded, not vectorized
void gelu_forward(float *y, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = spk_gelu(x[i]);
}

void gelu_backward(float *dx, const float *dy, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] += spk_gelu_grad(dy[i], x[i]);
}
