// The convolution schedule of kernels/cpu/conv1d.c, shared by the float32 entry points there
// and the bf16 ones in kernels/cpu/conv1d_bf16.c: im2col + GEMM with the per-sample or the
// folded schedule, over operands (x, w, dy) of either element type. Outputs (y, dx, dW) are
// float32 in both. Private to kernels/cpu.
#pragma once
#include <stddef.h>

// What the GEMMs multiply: float32 operands through spk_sgemm, or bf16 ones through
// spk_gemm_bf16 (float32 accumulation). Either gemm may be called from a serial region
// (threads itself) or inside a parallel region (runs on the calling thread).
typedef struct {
    size_t elem;  // bytes per element of x, w and dy as the GEMMs read them
    void (*gemm)(char ta, char tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb, float beta,
                 float* C, int ldc);
    int folded_dw;  // the weight gradient always on the folded schedule (else only for big weights)
} conv_operands_t;

extern const conv_operands_t conv_operands_f32;

// Scratch bytes of the schedule for this shape (independent of the thread count).
size_t conv_schedule_bytes(const conv_operands_t* op, int B, int Cin, int Cout, int T, int K, int dilation);

// y = conv(x, w) (+ bias); x (B, Cin, T), w (Cout, Cin, K) in op's element type.
void conv_schedule_forward(const conv_operands_t* op, float* y, const void* x, const void* w, const float* bias,
                           int B, int Cin, int Cout, int T, int K, int dilation, void* scratch);
// dx += , dw += , dbias += (each may be NULL); dy_op is dy in op's element type (the GEMMs read
// it), dy the float32 gradient (the bias gradient sums it; dy may be NULL without dbias).
void conv_schedule_backward(const conv_operands_t* op, float* dx, float* dw, float* dbias, const float* dy,
                            const void* dy_op, const void* x, const void* w, int B, int Cin, int Cout, int T, int K,
                            int dilation, void* scratch);

// Reflect 'same' padding of a conv with kernel K and dilation d; shapes it cannot take abort.
static inline int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }
void conv_check_shape(int B, int Cin, int Cout, int T, int K, int dilation);
