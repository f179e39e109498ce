#include "app/dist/exact_reduce.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>
#include <string.h>

#ifdef SPKDDP_HAVE_CUDA
#include "app/dist/nccl_comm.h"
#endif

#define MAX_COUNT (1 << 28)  // MPI counts are ints

static size_t pad64(int64_t n) { return ((size_t)n + 63) & ~(size_t)63; }

// One bucket of a bucketed reduction, on the host: its bins' maximum, then its limbs' sums.
typedef struct {
    int64_t from, to;
    MPI_Request bins, limbs[2];
    int phase;  // 1: bins in flight, 2: limbs in flight
} bucket_t;

struct exact_reduce {
    const comm_t *comm;
    const spk_backend_t *be;
    struct nccl_comm *nccl;
    MPI_Comm bins_comm, limbs_comm, now_comm;
    int64_t n;
    xsum_t s;              // the sums of the bucketed reduction in progress (on the backend)
    xsum_t host;           // (n) their host copy, separate memory without NCCL
    int8_t *max;           // (n) the bins' maximum, on the host (on the device with NCCL)
    bucket_t *buckets;     // in start order
    int nbuckets, cap, raised;  // buckets[0, raised) have their limbs in flight
    void *now_buf;         // exact_reduce_now's host copy and maximum (separate memory)
    int64_t now_cap;
    int64_t bytes;
};

exact_reduce_t *exact_reduce_create(const comm_t *c, const spk_backend_t *be, struct nccl_comm *nccl, int64_t n) {
    exact_reduce_t *r = callocCheck(1, sizeof *r);
    r->comm = c;
    r->be = be;
    r->nccl = nccl;
    r->n = n;
    mpiCheck(MPI_Comm_dup(c->world, &r->bins_comm));
    mpiCheck(MPI_Comm_dup(c->world, &r->limbs_comm));
    mpiCheck(MPI_Comm_dup(c->world, &r->now_comm));
    if (nccl) {
        r->max = be->alloc((size_t)n + 1);  // device memory
        return r;
    }
    r->max = mallocCheck((size_t)n + 1);
    if (be->separate_memory) r->host = xsum_layout(callocCheck(1, xsum_bytes(n)), n);
    return r;
}

// Starts the int64 sums of the limbs of the count host sums s.
static void start_limbs(xsum_t s, int64_t count, MPI_Comm comm, MPI_Request req[2]) {
    SPK_ASSERT(count <= MAX_COUNT);
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, s.hi, (int)count, MPI_INT64_T, MPI_SUM, comm, &req[0]));
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, s.lo, (int)count, MPI_INT64_T, MPI_SUM, comm, &req[1]));
}

static void copy_sums(const spk_backend_t *be, xsum_t dst, xsum_t src, int64_t n, int to_host) {
    void (*copy)(void *, const void *, size_t) = to_host ? be->download : be->upload;
    copy(dst.bin, src.bin, (size_t)n);
    copy(dst.hi, src.hi, (size_t)n * sizeof(int64_t));
    copy(dst.lo, src.lo, (size_t)n * sizeof(int64_t));
}

// The n host sums h over all ranks on comm (max: n bytes of scratch), blocking.
static void host_allreduce(const comm_t *c, MPI_Comm comm, xsum_t h, int64_t n, int8_t *max) {
    SPK_ASSERT(n <= MAX_COUNT);
    memcpy(max, h.bin, (size_t)n);
    MPI_Request req[2];
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, max, (int)n, MPI_INT8_T, MPI_MAX, comm, &req[0]));
    comm_wait(c, &req[0]);
    xsum_raise_to(h, max, n);
    start_limbs(h, n, comm, req);
    comm_wait(c, &req[0]);
    comm_wait(c, &req[1]);
}

void exact_allreduce_host(const comm_t *c, xsum_t s, int64_t n) {
    if (c->size == 1 || n == 0) return;
    int8_t *max = mallocCheck((size_t)n);
    host_allreduce(c, c->world, s, n, max);
    free(max);
}

void exact_reduce_now(exact_reduce_t *r, xsum_t s, int64_t n) {
    if (r->comm->size == 1 || n == 0) return;
    r->bytes += n * (1 + 2 * (int64_t)sizeof(int64_t));
    if (n > r->now_cap) {  // host sums and their bins' maximum (NCCL: the maximum on the device)
        if (r->nccl)
            r->be->free(r->now_buf);
        else
            free(r->now_buf);
        r->now_buf = r->nccl ? r->be->alloc((size_t)n) : mallocCheck(pad64(n) + xsum_bytes(n));
        r->now_cap = n;
    }
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        nccl_exact_allreduce_start(r->nccl, s, r->now_buf, n);
        nccl_join(r->nccl);
        return;
    }
#endif
    int8_t *max = r->now_buf;
    if (!r->be->separate_memory) {
        host_allreduce(r->comm, r->now_comm, s, n, max);
        return;
    }
    const xsum_t h = xsum_layout((char *)r->now_buf + pad64(n), n);
    copy_sums(r->be, h, s, n, 1);
    host_allreduce(r->comm, r->now_comm, h, n, max);
    copy_sums(r->be, s, h, n, 0);
}

void exact_reduce_start(exact_reduce_t *r, xsum_t s, int64_t from, int64_t to) {
    SPK_ASSERT(from < to && to <= r->n && to - from <= MAX_COUNT);
    const int64_t count = to - from;
    r->s = s;
    r->bytes += count * (1 + 2 * (int64_t)sizeof(int64_t));
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        nccl_exact_allreduce_start(r->nccl, xsum_at(s, from), r->max + from, count);
        return;
    }
#endif
    xsum_t h = s;
    if (r->be->separate_memory) {  // the bucket's sums, to the host first
        h = r->host;
        copy_sums(r->be, xsum_at(h, from), xsum_at(s, from), count, 1);
    }
    if (r->nbuckets == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        bucket_t *grown = mallocCheck((size_t)r->cap * sizeof *grown);
        if (r->nbuckets) memcpy(grown, r->buckets, (size_t)r->nbuckets * sizeof *grown);
        free(r->buckets);
        r->buckets = grown;
    }
    bucket_t *b = &r->buckets[r->nbuckets++];
    *b = (bucket_t){.from = from, .to = to, .phase = 1};
    memcpy(r->max + from, h.bin + from, (size_t)count);
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, r->max + from, (int)count, MPI_INT8_T, MPI_MAX, r->bins_comm, &b->bins));
}

// The host sums of the reduction (the sums themselves, or their host copy).
static xsum_t host_sums(const exact_reduce_t *r) { return r->be->separate_memory ? r->host : r->s; }

// Raises bucket b to its bins' maximum and starts its limbs' sums.
static void raise_bucket(exact_reduce_t *r, bucket_t *b) {
    const xsum_t h = xsum_at(host_sums(r), b->from);
    xsum_raise_to(h, r->max + b->from, b->to - b->from);
    start_limbs(h, b->to - b->from, r->limbs_comm, b->limbs);
    b->phase = 2;
}

void exact_reduce_progress(exact_reduce_t *r) {
    // Limbs start in bucket order, each once its bins are agreed (MPI moves nonblocking
    // collectives only inside MPI calls: the test is what makes them progress).
    while (r->raised < r->nbuckets) {
        bucket_t *b = &r->buckets[r->raised];
        int done;
        mpiCheck(MPI_Test(&b->bins, &done, MPI_STATUS_IGNORE));
        if (!done) return;
        raise_bucket(r, b);
        r->raised++;
    }
    if (r->nbuckets > 0) {
        int done;
        mpiCheck(MPI_Test(&r->buckets[r->nbuckets - 1].limbs[1], &done, MPI_STATUS_IGNORE));
    }
}

void exact_reduce_wait(exact_reduce_t *r) {
#ifdef SPKDDP_HAVE_CUDA
    if (r->nccl) {
        nccl_allreduce_wait(r->nccl, r->n);
        return;
    }
#endif
    for (; r->raised < r->nbuckets; r->raised++) {
        bucket_t *b = &r->buckets[r->raised];
        comm_wait(r->comm, &b->bins);
        raise_bucket(r, b);
    }
    for (int i = 0; i < r->nbuckets; i++) {
        comm_wait(r->comm, &r->buckets[i].limbs[0]);
        comm_wait(r->comm, &r->buckets[i].limbs[1]);
    }
    if (r->be->separate_memory)
        for (int i = 0; i < r->nbuckets; i++) {
            const bucket_t *b = &r->buckets[i];
            copy_sums(r->be, xsum_at(r->s, b->from), xsum_at(r->host, b->from), b->to - b->from, 0);
        }
    r->nbuckets = r->raised = 0;
}

int64_t exact_reduce_take_bytes(exact_reduce_t *r) {
    const int64_t b = r->bytes;
    r->bytes = 0;
    return b;
}

void exact_reduce_free(exact_reduce_t *r) {
    if (!r) return;
    MPI_Comm_free(&r->bins_comm);
    MPI_Comm_free(&r->limbs_comm);
    MPI_Comm_free(&r->now_comm);
    if (r->nccl) {
        r->be->free(r->max);
        r->be->free(r->now_buf);
    } else {
        free(r->max);
        free(r->now_buf);
    }
    free(r->host.bin);
    free(r->buckets);
    free(r);
}
