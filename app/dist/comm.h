// Communication: MPI set-up, broadcasts, reductions, replica checks (gradient averaging,
// which may also run on NCCL, is app/dist/grad_sync.h).
// Waits are kernels/base/mpi_wait.h's: nonblocking calls polled with a short sleep when the
// node is oversubscribed (more ranks than cores), and never past a deadline.
#pragma once
#include "kernels/base/mpi_wait.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    MPI_Comm world;
    int rank, size;
    int local_rank, local_size;  // within this node (MPI_COMM_TYPE_SHARED)
    spk_wait_t wait;             // how MPI waits poll, and their deadline
    int threads;                 // compute threads of this rank (app/dist/threads.h)
} comm_t;

void comm_init(comm_t *c, int *argc, char ***argv);
// "MPICH 4.0.2 (MPI 4.0)": the MPI library's first line of self-description, and the standard.
void comm_library(char *out, size_t cap);
// Waits for a request of a collective under c->wait.
void comm_wait(const comm_t *c, MPI_Request *req);
void comm_bcast(const comm_t *c, void *buf, int64_t count, MPI_Datatype type, int root);
void comm_allreduce_sum_f64(const comm_t *c, double *v, int n);
void comm_allreduce_max_f64(const comm_t *c, double *v, int n);
// max over ranks and elements of |theta_r - theta_0|; `scratch` holds n floats.
double comm_divergence(const comm_t *c, const float *theta, int64_t n, float *scratch);
void comm_barrier(const comm_t *c);
// Bytes a rank sends in a collective, as the bandwidth-optimal algorithms (ring, Rabenseifner's)
// move them: an allreduce of `payload` bytes a rank 2 (R - 1) / R of it (its reduce-scatter and
// its allgather); a reduce-scatter or an allgather (R - 1) / R of the whole vector. 0 on one rank.
int64_t comm_allreduce_bytes(const comm_t *c, int64_t payload);
int64_t comm_scatter_bytes(const comm_t *c, int64_t whole);
