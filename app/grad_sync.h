// Gradient averaging across ranks, g <- (1/K) sum_k g_k, wherever the gradients live:
//   host memory             MPI allreduce in place (app/comm.h)
//   CUDA device memory      NCCL allreduce with ncclAvg (app/nccl_comm.h), one GPU per rank
//   other separate memory   through a host buffer and MPI: the cpu-staged test backend, and
//                           ranks sharing a GPU (NCCL refuses them)
// A world of one rank has nothing to average.
#pragma once
#include "app/comm.h"
#include "kernels/backend.h"

#include <stdint.h>

struct nccl_comm;

typedef struct {
    const comm_t *comm;
    const spk_backend_t *be;
    struct nccl_comm *nccl;  // CUDA and more than one rank
    float *host;             // staging for a separate-memory backend without NCCL
    int64_t n;
} grad_sync_t;

// Collective: every rank calls it with the same backend and n.
void grad_sync_init(grad_sync_t *g, const comm_t *c, const spk_backend_t *be, int64_t n);
void grad_sync_mean(grad_sync_t *g, float *grads);
void grad_sync_free(grad_sync_t *g);
