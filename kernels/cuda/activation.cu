// Elementwise activations (kernels/activation.h): grid-stride loops over the SPK_HD math of
// kernels/elementwise_math.h that kernels/cpu/activation.c runs too.
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void relu_fwd_kernel(float *y, const float *x, size_t n) { SPK_GRID_LOOP(i, n) y[i] = spk_relu(x[i]); }
__global__ void relu_bwd_kernel(float *dx, const float *dy, const float *y, size_t n) {
    SPK_GRID_LOOP(i, n) dx[i] += spk_relu_grad(dy[i], y[i]);
}
__global__ void relu_mask_kernel(float *g, const float *y, size_t n) {
    SPK_GRID_LOOP(i, n) g[i] = spk_relu_grad(g[i], y[i]);
}
__global__ void sigmoid_fwd_kernel(float *y, const float *x, size_t n) { SPK_GRID_LOOP(i, n) y[i] = spk_sigmoid(x[i]); }
__global__ void sigmoid_bwd_kernel(float *dx, const float *dy, const float *y, size_t n) {
    SPK_GRID_LOOP(i, n) dx[i] += spk_sigmoid_grad(dy[i], y[i]);
}
__global__ void tanh_fwd_kernel(float *y, const float *x, size_t n) { SPK_GRID_LOOP(i, n) y[i] = spk_tanh(x[i]); }
__global__ void tanh_bwd_kernel(float *dx, const float *dy, const float *y, size_t n) {
    SPK_GRID_LOOP(i, n) dx[i] += spk_tanh_grad(dy[i], y[i]);
}

__global__ void gelu_fwd_kernel(float *y, const float *x, size_t n) { SPK_GRID_LOOP(i, n) y[i] = spk_gelu(x[i]); }
__global__ void gelu_bwd_kernel(float *dx, const float *dy, const float *x, size_t n) {
    SPK_GRID_LOOP(i, n) dx[i] += spk_gelu_grad(dy[i], x[i]);
}

}  // namespace

extern "C" void relu_forward_cuda(float *y, const float *x, size_t n) {
    SPK_LAUNCH(relu_fwd_kernel, spk_grid(n), y, x, n);
}
extern "C" void relu_backward_cuda(float *dx, const float *dy, const float *y, size_t n) {
    SPK_LAUNCH(relu_bwd_kernel, spk_grid(n), dx, dy, y, n);
}
extern "C" void relu_mask_cuda(float *g, const float *y, size_t n) {
    SPK_LAUNCH(relu_mask_kernel, spk_grid(n), g, y, n);
}
extern "C" void sigmoid_forward_cuda(float *y, const float *x, size_t n) {
    SPK_LAUNCH(sigmoid_fwd_kernel, spk_grid(n), y, x, n);
}
extern "C" void sigmoid_backward_cuda(float *dx, const float *dy, const float *y, size_t n) {
    SPK_LAUNCH(sigmoid_bwd_kernel, spk_grid(n), dx, dy, y, n);
}
extern "C" void tanh_forward_cuda(float *y, const float *x, size_t n) {
    SPK_LAUNCH(tanh_fwd_kernel, spk_grid(n), y, x, n);
}
extern "C" void tanh_backward_cuda(float *dx, const float *dy, const float *y, size_t n) {
    SPK_LAUNCH(tanh_bwd_kernel, spk_grid(n), dx, dy, y, n);
}
extern "C" void gelu_forward_cuda(float *y, const float *x, size_t n) {
    SPK_LAUNCH(gelu_fwd_kernel, spk_grid(n), y, x, n);
}
extern "C" void gelu_backward_cuda(float *dx, const float *dy, const float *x, size_t n) {
    SPK_LAUNCH(gelu_bwd_kernel, spk_grid(n), dx, dy, x, n);
}
