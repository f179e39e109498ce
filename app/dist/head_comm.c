// The sharded classifier's slices and collectives (app/dist/head_comm.h).
#include "app/dist/head_comm.h"

#include "app/dist/exact_reduce.h"
#include "kernels/aam_shard.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/nccl_comm.h"

#include <limits.h>
#include <stdlib.h>

void head_shard_slice(int64_t classes, int size, int rank, int64_t *first, int64_t *rows) {
    const int64_t block = aam_shard_block(classes), blocks = aam_shard_blocks(classes);
    const int64_t end = blocks * (rank + 1) / size * block;
    *first = blocks * rank / size * block;
    *rows = (end < classes ? end : classes) - *first;
}

// Counts and displacements of every rank's block in units of `unit` elements, as MPI's ints:
// counts in [0, size), displacements in [size, 2 size) of the array returned (to free).
static int *layout(const comm_t *c, const int64_t *counts, int64_t unit) {
    int *n = mallocCheck(2 * (size_t)c->size * sizeof(int)), *displ = n + c->size;
    int64_t off = 0;
    for (int r = 0; r < c->size; r++) {
        const int64_t k = counts[r] * unit;
        if (k > INT_MAX || off + k > INT_MAX)
            spk_die(SPK_EXIT_FAILURE,
                    "the global batch's collectives would move %lld items in one call, more than MPI's counts hold",
                    (long long)(off + k));
        n[r] = (int)k;
        displ[r] = (int)off;
        off += k;
    }
    return n;
}

static void counts(void *ctx, int64_t n, int64_t *all) {
    head_comm_impl_t *h = ctx;
    MPI_Request r;
    mpiCheck(MPI_Iallgather(&n, 1, MPI_INT64_T, all, 1, MPI_INT64_T, h->comm->world, &r));
    comm_wait(h->comm, &r);
}

static void allgather(void *ctx, const void *send, void *recv, const int64_t *cnt, size_t unit) {
    head_comm_impl_t *h = ctx;
    const comm_t *c = h->comm;
    int *n = layout(c, cnt, (int64_t)unit), *displ = n + c->size;
    MPI_Request r;
    mpiCheck(MPI_Iallgatherv(send, n[c->rank], MPI_BYTE, recv, n, displ, MPI_BYTE, c->world, &r));
    comm_wait(c, &r);
    h->bytes += n[c->rank];
    free(n);
}

static void reduce_scatter(void *ctx, const float *send, float *recv, const int64_t *cnt, size_t unit) {
    head_comm_impl_t *h = ctx;
    const comm_t *c = h->comm;
    int *n = layout(c, cnt, (int64_t)unit), *displ = n + c->size;
    MPI_Request r;
    mpiCheck(MPI_Ireduce_scatter(send, recv, n, MPI_FLOAT, MPI_SUM, c->world, &r));
    comm_wait(c, &r);
    h->bytes += (int64_t)(displ[c->size - 1] + n[c->size - 1] - n[c->rank]) * (int64_t)sizeof(float);
    free(n);
}

static void exact_allreduce(void *ctx, xsum_t s, int64_t n) {
    head_comm_impl_t *h = ctx;
    if (h->comm->size == 1 || n == 0) return;
    SPK_ASSERT(h->exact);  // (head_comm_use_backend)
    exact_reduce_now(h->exact, s, n);
}

#ifdef SPKDDP_HAVE_CUDA
static void allgather_device(void *ctx, const float *send, float *recv, int64_t count) {
    head_comm_impl_t *h = ctx;
    nccl_allgather(h->nccl, send, recv, count);
    h->bytes += count * (int64_t)sizeof(float);
}

static void reduce_scatter_device(void *ctx, const float *send, float *recv, int64_t count) {
    head_comm_impl_t *h = ctx;
    nccl_reduce_scatter(h->nccl, send, recv, count);
    h->bytes += count * (h->comm->size - 1) * (int64_t)sizeof(float);
}
#endif

void head_comm_use_backend(head_comm_impl_t *h, const spk_backend_t *be, struct nccl_comm *nccl) {
    head_comm_release(h);
    if (h->comm->size > 1) h->exact = exact_reduce_create(h->comm, be, nccl, 1);  // (blocking reductions only)
#ifdef SPKDDP_HAVE_CUDA
    h->nccl = nccl;
    h->ops.allgather_device = nccl ? allgather_device : NULL;
    h->ops.reduce_scatter_device = nccl ? reduce_scatter_device : NULL;
#else
    SPK_ASSERT(!nccl);
#endif
}

void head_comm_release(head_comm_impl_t *h) {
    if (h->exact) {
        h->bytes += exact_reduce_take_bytes(h->exact);
        exact_reduce_free(h->exact);
    }
    h->exact = NULL;
    h->nccl = NULL;
    h->ops.allgather_device = h->ops.reduce_scatter_device = NULL;
}

void head_comm_init(head_comm_impl_t *h, const comm_t *c) {
    h->comm = c;
    h->nccl = NULL;
    h->exact = NULL;
    h->bytes = 0;
    h->ops = (head_comm_t){.rank = c->rank,
                           .size = c->size,
                           .ctx = h,
                           .counts = counts,
                           .allgather = allgather,
                           .reduce_scatter = reduce_scatter,
                           .exact_allreduce = exact_allreduce};
}

int64_t head_comm_take_bytes(head_comm_impl_t *h) {
    const int64_t b = h->bytes + (h->exact ? exact_reduce_take_bytes(h->exact) : 0);
    h->bytes = 0;
    return b;
}

// Every rank's slice of a (classes, E) head in rows (MPI counts in rows of `row`, E floats, so a
// head of more than 2^31 floats moves too), as layout's counts and displacements.
static int *slices(const comm_t *c, int64_t classes, int64_t E, MPI_Datatype *row) {
    int64_t *rows = mallocCheck((size_t)c->size * sizeof(int64_t));
    for (int r = 0; r < c->size; r++) {
        int64_t first;
        head_shard_slice(classes, c->size, r, &first, &rows[r]);
    }
    int *n = layout(c, rows, 1);
    free(rows);
    SPK_ASSERT(E > 0 && E <= INT_MAX);
    mpiCheck(MPI_Type_contiguous((int)E, MPI_FLOAT, row));
    mpiCheck(MPI_Type_commit(row));
    return n;
}

void head_gather(const comm_t *c, const float *local, int64_t classes, int64_t E, float *full) {
    MPI_Datatype row;
    int *n = slices(c, classes, E, &row), *displ = n + c->size;
    MPI_Request r;
    mpiCheck(MPI_Igatherv(local, n[c->rank], row, full, n, displ, row, 0, c->world, &r));
    comm_wait(c, &r);
    mpiCheck(MPI_Type_free(&row));
    free(n);
}

void head_scatter(const comm_t *c, const float *full, int64_t classes, int64_t E, float *local) {
    MPI_Datatype row;
    int *n = slices(c, classes, E, &row), *displ = n + c->size;
    MPI_Request r;
    mpiCheck(MPI_Iscatterv(full, n, displ, row, local, n[c->rank], row, 0, c->world, &r));
    comm_wait(c, &r);
    mpiCheck(MPI_Type_free(&row));
    free(n);
}
