// Dense layer (kernels/linear.h) on the cuBLAS GEMM of kernels/cuda/gemm.cu, as
// kernels/cpu/linear.c is on the CPU GEMM; the bias and its gradient are our own kernels.
#include "kernels/cuda/launch.cuh"

namespace {

// y[i, o] = b[o]
__global__ void fill_rows_kernel(float *y, const float *b, size_t n, int Out) { SPK_GRID_LOOP(i, n) y[i] = b[i % Out]; }

// db[o] += sum_i dy[i, o]: one thread per column, rows summed in order (deterministic).
__global__ void column_sum_kernel(float *db, const float *dy, int B, int Out) {
    SPK_GRID_LOOP(o, (size_t)Out) {
        spk_fsum acc = spk_fsum_zero();
        for (int i = 0; i < B; i++) spk_fsum_add(&acc, dy[(size_t)i * Out + o]);
        db[o] += spk_fsum_value(acc);
    }
}

}  // namespace

extern "C" void linear_forward_cuda(float *y, const float *x, const float *w, const float *b, int B, int In, int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (b) {
        const size_t n = (size_t)B * Out;
        SPK_LAUNCH(fill_rows_kernel, spk_grid(n), y, b, n, Out);
    }
    spk_sgemm_cuda('N', 'T', B, Out, In, 1.0f, x, In, w, In, b ? 1.0f : 0.0f, y, Out);
}

extern "C" void linear_backward_cuda(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                     int B, int In, int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (dx) spk_sgemm_cuda('N', 'N', B, In, Out, 1.0f, dy, Out, w, In, 1.0f, dx, In);
    if (dw) spk_sgemm_cuda('T', 'N', Out, In, B, 1.0f, dy, Out, x, In, 1.0f, dw, In);
    if (db) SPK_LAUNCH(column_sum_kernel, spk_grid((size_t)Out), db, dy, B, Out);
}

// The world-size-invariant mode: every row by its own GEMM (kernels/gemm.h, spk_sgemm_rows).
extern "C" void linear_forward_rows_cuda(float *y, const float *x, const float *w, const float *b, int B, int In,
                                         int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (b) {
        const size_t n = (size_t)B * Out;
        SPK_LAUNCH(fill_rows_kernel, spk_grid(n), y, b, n, Out);
    }
    spk_sgemm_rows_cuda('N', 'T', B, Out, In, 1.0f, x, In, w, In, b ? 1.0f : 0.0f, y, Out);
}
