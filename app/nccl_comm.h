// NCCL for gradient averaging on GPUs (built with SPKDDP_CUDA only). MPI sets it up: rank 0
// makes the unique id and MPI_Bcast shares it. The allreduce runs on a stream of its own,
// ordered after the kernels' stream by events. NCCL has no timeout of its own, so the host
// waits by polling with a deadline: on an asynchronous NCCL error or when the deadline passes
// (a dead or stuck peer), the communicator is aborted and the whole job ends with a sentence.
#pragma once
#include "app/comm.h"

#include <stdint.h>

typedef struct nccl_comm nccl_comm_t;

// Collective over c->world, after spk_cuda_init selected this rank's device.
nccl_comm_t *nccl_comm_create(const comm_t *c, double timeout_s);
// buf (n floats of device memory) <- its mean over ranks (ncclAvg), in place. Waits until done.
void nccl_allreduce_mean(nccl_comm_t *n, float *buf, int64_t count);
void nccl_comm_destroy(nccl_comm_t *n);
