// The classifier sharded across ranks (--head sharded): which classes a rank holds, the
// collectives its step needs (model_t.head_comm, app/model/layers/aam_head_shard.h), and the
// moves of whole heads between the ranks' slices and rank 0 for checkpoints, which always hold
// the whole head (so a run resumes on any number of ranks, sharded or not, and every tool reads
// its checkpoints as before).
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"

#include <stdint.h>

struct nccl_comm;
struct exact_reduce;

typedef struct {
    head_comm_t ops;  // what the model calls
    const comm_t *comm;
    struct nccl_comm *nccl;      // head_comm_use_backend's (device collectives), or NULL
    struct exact_reduce *exact;  // head_comm_use_backend's (exact sums in the model's memory), or NULL
    int64_t bytes;               // payload bytes this rank sent since head_comm_take_bytes
} head_comm_impl_t;

// Rank `rank` of `size` holds classes [*first, *first + *rows): contiguous whole blocks of
// aam_shard_block(classes) classes (kernels/aam_shard.h; one class below 2,048), sizes
// differing by at most one block, none empty when the blocks are at least as many as the ranks.
void head_shard_slice(int64_t classes, int size, int rank, int64_t *first, int64_t *rows);
// The model's collectives over c (MPI on host buffers, each wait under the job's deadline).
void head_comm_init(head_comm_impl_t *h, const comm_t *c);
int64_t head_comm_take_bytes(head_comm_impl_t *h);
// On the model's backend be: the exact sums' reduction in its memory (NCCL's over nccl, the
// gradient averaging's communicator, with one GPU per rank; else MPI, through host copies where
// the memory is separate), and with nccl the device collectives. Collective; before any exact
// sum is reduced on more than one rank. head_comm_release undoes it.
void head_comm_use_backend(head_comm_impl_t *h, const spk_backend_t *be, struct nccl_comm *nccl);
void head_comm_release(head_comm_impl_t *h);

// Rank 0's full (classes, E) <- every rank's slice `local` (rows x E, at the rows of
// head_shard_slice). Collective; full is only written on rank 0.
void head_gather(const comm_t *c, const float *local, int64_t classes, int64_t E, float *full);
// Every rank's slice `local` <- its rows of rank 0's full (classes, E). Collective.
void head_scatter(const comm_t *c, const float *full, int64_t classes, int64_t E, float *local);
