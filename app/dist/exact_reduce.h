// Cross-rank exact sums (kernels/exact_sum.h) for the world-size-invariant mode: every rank's
// partial sums s become their sums over all ranks. Merging two partial sums raises both to the
// larger bin and adds the limbs, integer addition, exact: associative and commutative, so the
// result does not depend on the collective's algorithm, the number of ranks or how the sums are
// cut into buckets (the one-word form below is exact while it fits, and a sum that does not fit
// is redone in full).
//   host memory             bucketed, floats out (the gradients): every sum as one 64-bit word
//                           (bin and both limbs, kernels/exact_sum_math.h), reduce-scattered with
//                           a user reduction merging words, each rank rounding its share, the
//                           floats gathered: per sum 8 bytes reduce-scattered and 4 gathered,
//                           3/2 of a float allreduce's bytes (comm_allreduce_bytes), and no
//                           round to agree the bins first. A word holds a sum of up to 32 terms;
//                           past that a merge may not fit, and those sums (marked in the floats)
//                           are reduced in full at the wait, 17 bytes each, the same values.
//                           Sums of one float term a rank (xsum_ones) on a power of two ranks:
//                           recursive halving, the terms sent as floats (one a sum, then two),
//                           words after that; on 2 ranks a float allreduce's bytes, on 4 7/6 of
//                           them, rounded where the terms meet.
//                           Bucketed, sums out: the bins' maximum (MPI_INT8_T MAX), every sum
//                           raised to it, the limbs' sums (MPI_INT64_T SUM), MPI's own
//                           reductions in place: combined into one int64 a sum unless some
//                           rank's limbs are too large for that (a flag agreed with the bins;
//                           then hi and lo apart);
//                           exact_reduce_now (small, blocking): one MPI_Iallreduce with a user
//                           reduction doing the merge on the sums packed bin and limbs together
//                           (17 bytes a sum)
//   CUDA device memory      NCCL, which has no user reductions, all queued on NCCL's stream:
//                           bucketed, floats out, sums of at most 32 terms in all: the sums as
//                           words, each rank's share of them sent to it (ncclSend/ncclRecv),
//                           merged and rounded by a kernel there, the floats sent to every rank
//                           (12 bytes a sum, 3/2 of a float allreduce's, as on MPI); otherwise,
//                           and for exact_reduce_now: the bins' maximum (ncclInt8 MAX), a kernel
//                           raising every sum to it, the limbs' sums (ncclInt64 SUM), 17 bytes a
//                           sum
//   other separate memory   through host copies and MPI (cpu-staged; ranks sharing a GPU)
// A float allreduce moves 4 bytes a number.
#pragma once
#include "app/dist/comm.h"
#include "kernels/backend.h"

#include <stdint.h>

struct nccl_comm;
typedef struct exact_reduce exact_reduce_t;

// Collective. be: where the sums live; nccl: the NCCL communicator for CUDA memory (or NULL);
// n: the most sums a bucketed reduction covers.
exact_reduce_t *exact_reduce_create(const comm_t *c, const spk_backend_t *be, struct nccl_comm *nccl, int64_t n);
// s (n sums on the backend) <- their sums over all ranks, before any later work on the backend
// (the host waits for MPI; on NCCL the kernels' stream waits). Collective.
void exact_reduce_now(exact_reduce_t *r, xsum_t s, int64_t n);
// A bucketed reduction of the sums s: buckets [from, to) start in increasing order (every rank
// the same buckets), progress moves them on, and wait returns when they are done: out NULL, s
// holds the sums; out (the backend's memory, where exact_reduce_floats says so), out[from, to)
// holds them rounded to float, as xsum_to_float would, and s[from, to) is left as it was (on
// NCCL: scratch). Each rank then rounds a share of the sums and the ranks gather the floats: 4
// bytes a sum on the way back instead of 8, and each rank rounds 1 / R of them. terms: the most
// terms a sum of s takes over all ranks (0: not known); NCCL's words need at most 32.
void exact_reduce_start(exact_reduce_t *r, xsum_t s, int64_t from, int64_t to, float *out, int64_t terms);
int exact_reduce_floats(const exact_reduce_t *r);
void exact_reduce_progress(exact_reduce_t *r);
void exact_reduce_wait(exact_reduce_t *r);
// The same for n sums in host memory on c->world, for the trainer's loss sums. Collective.
void exact_allreduce_host(const comm_t *c, xsum_t s, int64_t n);
// Bytes this rank sent since the last call (then reset), as comm_allreduce_bytes counts them.
int64_t exact_reduce_take_bytes(exact_reduce_t *r);
void exact_reduce_free(exact_reduce_t *r);
