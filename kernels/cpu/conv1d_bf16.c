// Conv1d with bf16 operands (kernels/conv1d_bf16.h): the float32 convolution's schedule
// (kernels/cpu/conv1d.c) over bf16 operands and spk_gemm_bf16. The output gradient is rounded
// once per backward, into the head of the workspace; the schedule's scratch follows.
#include "kernels/conv1d_bf16.h"

#include "kernels/cpu/conv1d_schedule.h"
#include "kernels/gemm_bf16.h"

#define ALIGN 64
#define PAR_MIN 32768  // elements: below this, one thread

static void gemm_operands(char ta, char tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
                          float beta, float* C, int ldc) {
    spk_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// The weight gradient on the folded schedule: its GEMMs sum ~2000 columns per call instead of
// T per sample, which measured 1.1-2x faster for every ECAPA shape but 128 -> 1536 with bf16
// operands (docs/kernels.md).
static const conv_operands_t operands = {sizeof(spk_bf16), gemm_operands, 1};

// Bytes of the rounded output gradient (B, Cout, T), rounded up to a cache line.
static size_t dy_bytes(int B, int Cout, int T) {
    return ((size_t)B * Cout * T * sizeof(spk_bf16) + ALIGN - 1) / ALIGN * ALIGN;
}

size_t conv1d_bf16_workspace_floats(int B, int Cin, int Cout, int T, int K, int dilation) {
    const size_t bytes = dy_bytes(B, Cout, T) + conv_schedule_bytes(&operands, B, Cin, Cout, T, K, dilation);
    return (bytes + sizeof(float) - 1) / sizeof(float);
}

void conv1d_bf16_forward(float* y, spk_bf16* xh, const float* x, const spk_bf16* w, const float* bias, int B,
                         int Cin, int Cout, int T, int K, int dilation, float* workspace) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    if (x) bf16_from_f32(xh, x, (size_t)B * Cin * T);
    conv_schedule_forward(&operands, y, xh, w, bias, B, Cin, Cout, T, K, dilation, workspace);
}

// dyh = bf16(dy) and dbias += its float32 sums over samples and time, in one pass over dy
static void round_dy(spk_bf16* dyh, float* dbias, const float* dy, int B, int Cout, int T) {
#pragma omp parallel for schedule(static) if ((size_t)B * Cout * T >= PAR_MIN)
    for (int co = 0; co < Cout; co++) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++) {
            const float* src = dy + ((size_t)b * Cout + co) * T;
            spk_bf16* dst = dyh + ((size_t)b * Cout + co) * T;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int t = 0; t < T; t++) {
                dst[t] = spk_bf16_round(src[t]);
                s += src[t];
            }
            acc += s;
        }
        if (dbias) dbias[co] += acc;
    }
}

void conv1d_bf16_backward(float* dx, float* dw, float* dbias, const float* dy, const spk_bf16* xh, const spk_bf16* w,
                          int B, int Cin, int Cout, int T, int K, int dilation, float* workspace) {
    conv_check_shape(B, Cin, Cout, T, K, dilation);
    if (!dx && !dw && !dbias) return;
    spk_bf16* dyh = (spk_bf16*)workspace;  // (B, Cout, T)
    round_dy(dyh, dbias, dy, B, Cout, T);
    if (dx || dw)
        conv_schedule_backward(&operands, dx, dw, NULL, NULL, dyh, xh, w, B, Cin, Cout, T, K, dilation,
                               (char*)workspace + dy_bytes(B, Cout, T));
}
