// The exact sums' raise to agreed bins (kernels/exact_sum.h, xsum_raise_to) queued on a stream
// of the caller's: kernels/cuda/nccl_comm.c runs it on NCCL's stream, between the collective
// maximum of the bins and the sums of the limbs. Built with SPKDDP_CUDA only.
#pragma once
#include <stdint.h>

#include "kernels/exact_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
// s[i] raised to bin[i], i < n (device memory), queued on `stream`.
void xsum_raise_to_cuda_stream(struct CUstream_st *stream, xsum_t s, const int8_t *bin, int64_t n);

#ifdef __cplusplus
}
#endif
