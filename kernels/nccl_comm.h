// NCCL for gradient averaging on GPUs (kernels/cuda/nccl_comm.c, built with SPKDDP_CUDA only).
// The caller sets it up over MPI: rank 0 makes the unique id, every rank receives it and
// creates its end (app/dist/grad_sync.c). Allreduces run on a stream of their own, each
// ordered after the work queued so far on the kernels' stream by an event, so a bucket of
// gradients is averaged while the backward pass computes the next ones. NCCL has no timeout of
// its own, so the host waits by polling with a deadline, one step late: on an asynchronous NCCL
// error or when the deadline passes (a dead or stuck peer), the communicator is aborted and the
// whole job ends with a sentence.
#pragma once
#include "kernels/exact_sum.h"

#include <stdint.h>

typedef struct nccl_comm nccl_comm_t;

#define NCCL_COMM_ID_BYTES 128  // an ncclUniqueId

// Rank 0: a fresh unique id for nccl_comm_create into id (NCCL_COMM_ID_BYTES bytes).
void nccl_comm_unique_id(void *id);
// Collective over the `size` ranks that received rank 0's id, after spk_cuda_init selected
// this rank's device.
nccl_comm_t *nccl_comm_create(int rank, int size, const void *id, double timeout_s);
// Queues buf (count floats of device memory) <- its mean over ranks (ncclAvg), in place, to
// run once the kernels queued so far on spk_cuda_stream() are done. Returns at once.
void nccl_allreduce_start(nccl_comm_t *n, float *buf, int64_t count);
// After a step's last allreduce: makes the kernels' stream wait for the step's allreduces, and
// waits on the host, with the deadline, for the previous step's only, so the device has this
// step's work queued while the host waits. `total` (floats) is for the message.
void nccl_allreduce_end(nccl_comm_t *n, int64_t total);
// Waits on the host, with the deadline, for every allreduce queued (before anything that waits
// for the kernels' stream, which would wait for them without a deadline).
void nccl_allreduce_drain(nccl_comm_t *n, int64_t total);
// The world-size-invariant mode (app/dist/exact_reduce.h): queues, after the kernels queued so
// far, s (count exact sums in device memory) <- their sums over ranks: the bins' maximum into
// max (count bytes of device memory; ncclInt8, ncclMax), every sum raised to it (a kernel on
// NCCL's stream), the limbs' sums (ncclInt64, ncclSum) in place. Returns at once;
// nccl_allreduce_end waits for it with the rest.
void nccl_exact_allreduce_start(nccl_comm_t *n, xsum_t s, int8_t *max, int64_t count);
// The same for sums that take at most 32 terms in all (no merge of their words overflows), with
// y (count floats of device memory) <- their sums rounded, as xsum_to_float would, in 12 bytes a
// sum where the above takes 17 in each direction: every sum as one word (kernels/exact_sum_math.h)
// in s.hi's place, each rank's share of the words sent to it (ncclSend/ncclRecv), received into
// s.lo's place (which must hold R - 1 shares of up to ceil(count / R) sums), merged and rounded there,
// then each share's floats sent to every rank. s is scratch afterwards. Returns at once.
void nccl_exact_words_start(nccl_comm_t *n, xsum_t s, float *y, int64_t count);
// The global batch's collectives (contrastive losses over every rank's embeddings), on device
// memory, every rank the same count: recv (size x count floats) <- every rank's send (count
// floats) in rank order; recv (count floats) <- the sum over ranks of their send's block `rank`
// (send: size x count floats). Each runs after the kernels queued so far and returns once it
// is done, waited for on the host with the deadline.
void nccl_allgather(nccl_comm_t *n, const float *send, float *recv, int64_t count);
void nccl_reduce_scatter(nccl_comm_t *n, const float *send, float *recv, int64_t count);
// Makes the kernels' stream wait for everything queued on NCCL's stream (no host wait).
void nccl_join(nccl_comm_t *n);
void nccl_comm_destroy(nccl_comm_t *n);
