// The exact sums' kernels that kernels/cuda/nccl_comm.c queues on NCCL's stream, between its
// collectives: the raise to agreed bins (xsum_raise_to), between the bins' maximum and the limbs'
// sums; the sums' words (kernels/exact_sum_math.h), and a share's words merged and rounded.
// Built with SPKDDP_CUDA only.
#pragma once
#include <stdint.h>

#include "kernels/exact_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
// s[i] raised to bin[i], i < n (device memory), queued on `stream`.
void xsum_raise_to_cuda_stream(struct CUstream_st *stream, xsum_t s, const int8_t *bin, int64_t n);
// w[i] <- the word of s[i], i < n (device memory; w may be s.hi).
void xsum_to_words_cuda_stream(struct CUstream_st *stream, uint64_t *w, xsum_t s, int64_t n);
// y[i] <- the float of own[i] merged with rows[k n + i] for k < nrows, i < n: xsum_words_to_float's.
// The sums take at most 32 terms: a merge that does not fit is a device-side assertion.
void xsum_words_round_cuda_stream(struct CUstream_st *stream, float *y, const uint64_t *own, const uint64_t *rows,
                                  int nrows, int64_t n);

#ifdef __cplusplus
}
#endif
