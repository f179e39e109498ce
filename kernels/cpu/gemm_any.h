// GEMMs over operands of either element type (float32, or bf16 with float32 sums), for the
// schedules that serve both precisions: the convolution schedule (kernels/cpu/conv1d_schedule.h)
// and the invariant mode's exact batched GEMM. Private to kernels/cpu.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/exact_sum.h"

// Multiply-adds below which the invariant mode's loops of fixed GEMMs (rows, batch items, blocks)
// run on one thread, for float32 and bf16 operands alike.
#define GEMM_LOOP_MIN_FLOPS 1000000

// C (M, N) = op(A) op(B) + beta C, the operands in the caller's element type, C float32.
typedef void gemm_any_fn(char ta, char tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                         float beta, float *C, int ldc);

// spk_sgemm_batched_exact (kernels/gemm.h) over operands of `elem` bytes, multiplied by `fixed`,
// a GEMM planned for and run on the calling thread.
void gemm_any_batched_exact(gemm_any_fn *fixed, size_t elem, char transa, char transb, int M, int N, int K,
                            const void *A, int lda, int64_t strideA, const void *B, int ldb, int64_t strideB,
                            float *tmp, xsum_t C, int ldc, int batch, int group);
