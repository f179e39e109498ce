// Gradient averaging across ranks, g <- (1/K) sum_k g_k, wherever the gradients live:
//   host memory             MPI allreduce in place (app/dist/comm.h)
//   CUDA device memory      NCCL allreduce with ncclAvg (kernels/nccl_comm.h), one GPU per rank
//   other separate memory   through a host buffer and MPI: the cpu-staged test backend, and
//                           ranks sharing a GPU (NCCL refuses them)
// Overlap: between grad_sync_begin and grad_sync_finish the model's backward reports how far
// its gradients are final (model_t.grads_ready; tensors are laid out in reverse execution
// order, so that is a growing prefix), and each full bucket of SPKDDP_BUCKET_MB (default 4,
// rank 0's value) starts averaging at once while the backward goes on (NCCL runs beside it;
// MPI progresses it at the backward's later reports). grad_sync_finish starts the rest,
// grad_sync_wait orders what follows after all of it (the caller may do host work in between):
// MPI waits for it; with NCCL the kernels' stream waits for it and the host, with the
// deadline, only for the previous step's (grad_sync_drain: for all of it). Each element
// is summed over the same ranks whatever the bucket size; whether the rounding is the same
// is up to the library (MPICH: bitwise the same on 2-4 ranks, tested; NCCL picks its
// algorithm by message size).
// A world of one rank has nothing to average, unless SPKDDP_NCCL=1 on a GPU (NCCL over one
// rank, to exercise it on a one-GPU machine).
//
// The world-size-invariant mode (exact = 1, model_t.invariant): the model adds every sample's
// gradient to the exact sums model_t.xgrads, already scaled by 1 / global batch; the buckets of
// those sums are reduced across ranks exactly (app/dist/exact_reduce.h), with the same overlap,
// and grad_sync_wait rounds the totals into grads once. Between begin and finish the model also
// gets model_t.exact_allreduce, for BatchNorm over the global batch. SPKDDP_EXACT_ALLREDUCE=float
// (a check that the invariance tests can fail) rounds each rank's sums first and adds them with
// a plain float allreduce instead.
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"

#include <stdint.h>

struct nccl_comm;
struct exact_reduce;

typedef struct {
    const comm_t *comm;
    const spk_backend_t *be;
    struct nccl_comm *nccl;   // CUDA and one GPU per rank
    float *host;              // staging for a separate-memory backend without NCCL
    int64_t n;                // floats of the gradient buffer
    int64_t skip;             // grads[0, skip) are this rank's own and never averaged (the sharded head)
    int64_t bucket;           // floats per allreduce (rank 0's SPKDDP_BUCKET_MB)
    int active;               // there is averaging to do (more than one rank, or SPKDDP_NCCL=1)
    int overlap;              // start buckets during the backward (off: all after it)
    int exact;                // the world-size-invariant mode: xgrads reduced exactly
    int exact_as_float;       // SPKDDP_EXACT_ALLREDUCE=float (the check above)
    struct exact_reduce *xr;  // exact: the cross-rank reduction (NULL on one rank)
    int64_t bytes;            // bytes this rank sent since grad_sync_take_bytes (comm_allreduce_bytes)
    // between begin and mean
    model_t *model;
    int64_t started;    // grads[0, started) are being averaged
    MPI_Request *reqs;  // MPI paths: one per started bucket
    int nreq, cap_req;
} grad_sync_t;

// Collective: every rank calls it with the same backend, n - skip and exact. grads[0, skip) hold
// what only this rank has (the classifier's slice of --head sharded, whose gradient is already
// the global batch's): they are left as they are.
// exact_sums: outside the invariant mode too, the model's own exact sums (model_t.exact_allreduce:
// DINO's synchronized BatchNorm and centre) are added across the ranks.
void grad_sync_init(grad_sync_t *g, const comm_t *c, const spk_backend_t *be, int64_t n, int64_t skip, int exact,
                    int exact_sums);
// Before the model's train_step: hooks the backward's progress to start buckets early.
void grad_sync_begin(grad_sync_t *g, model_t *m);
// A micro-batch before an update's last (--grad-accum): in the invariant mode the model's
// cross-rank exact sums (BatchNorm's, the batch size) are reduced during it, its gradients are
// not (they stay in the exact sums until the last micro-batch's). Nothing to do otherwise.
void grad_sync_begin_micro(grad_sync_t *g, model_t *m);
// After it: starts averaging what is left and unhooks. Returns without waiting.
void grad_sync_finish(grad_sync_t *g);
// Work queued from now on sees the mean in m->grads (on the host too with MPI; with NCCL the
// host has only waited for the previous step's).
void grad_sync_wait(grad_sync_t *g);
// Payload bytes this rank sent (gradients, and in the invariant mode BatchNorm's sums) since
// the last call.
int64_t grad_sync_take_bytes(grad_sync_t *g);
// Waits on the host for every averaging started (NCCL: with the deadline). Before anything that
// waits for the device (downloads, checkpoints, the end of a run).
void grad_sync_drain(grad_sync_t *g);
void grad_sync_free(grad_sync_t *g);
