#include "app/dist/grad_sync.h"

#include "app/dist/exact_reduce.h"
#include "kernels/base/check.h"
#include "kernels/base/env.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>
#include <string.h>

#ifdef SPKDDP_HAVE_CUDA
#include "app/dist/device_select.h"
#include "kernels/nccl_comm.h"

// Seconds a rank waits for the others' gradients before it declares a peer dead.
static double nccl_timeout(void) { return spk_env_number("SPKDDP_NCCL_TIMEOUT", 600.0, 0.001, 1e9); }

// Rank 0's unique id, shared over MPI, makes every rank's end of one NCCL communicator.
static nccl_comm_t *nccl_open(const comm_t *c, double timeout_s) {
    unsigned char id[NCCL_COMM_ID_BYTES] = {0};
    if (c->rank == 0) nccl_comm_unique_id(id);
    comm_bcast(c, id, sizeof id, MPI_BYTE, 0);
    return nccl_comm_create(c->rank, c->size, id, timeout_s);
}

// SPKDDP_NCCL=1: average through NCCL even in a world of one rank (the mean of one is the
// gradient itself), so that a one-GPU machine runs the NCCL setup, events, deadline and abort.
static int nccl_forced(const spk_backend_t *be) { return be == spk_backend_cuda() && spk_env_switch("SPKDDP_NCCL"); }
#else
static int nccl_forced(const spk_backend_t *be) { return (void)be, 0; }
#endif

static int64_t bucket_floats(void) {
    const double mb = spk_env_number("SPKDDP_BUCKET_MB", 4.0, 1e-6, 1024.0);  // MPI counts are ints
    const int64_t f = (int64_t)(mb * (1 << 20) / sizeof(float));
    return f < 1 ? 1 : f;
}

// SPKDDP_EXACT_ALLREDUCE=float: the invariance tests' check that they can fail.
static int exact_as_float(void) { return spk_env_choice("SPKDDP_EXACT_ALLREDUCE", "exact|float") == 1; }

void grad_sync_init(grad_sync_t *g, const comm_t *c, const spk_backend_t *be, int64_t n, int64_t skip, int exact,
                    int exact_sums) {
    SPK_ASSERT(skip >= 0 && skip <= n);
    memset(g, 0, sizeof *g);
    g->comm = c;
    g->be = be;
    g->n = n;
    g->skip = skip;
    g->bucket = bucket_floats();
    g->exact = exact;
    if (c->size == 1 && !nccl_forced(be)) return;
    g->active = 1;
    comm_bcast(c, &g->bucket, 1, MPI_INT64_T, 0);  // ranks must start the same collectives
    g->overlap = 1;
    g->cap_req = (int)((n - skip) / g->bucket + 2);
    g->reqs = mallocCheck((size_t)g->cap_req * sizeof(MPI_Request));
    if (be->separate_memory) {
#ifdef SPKDDP_HAVE_CUDA
        if (be == spk_backend_cuda()) {
            if (!device_gpu_shared()) {
                g->nccl = nccl_open(c, nccl_timeout());
                printf0("gradients: %s by NCCL over %d GPU%s\n", exact ? "summed exactly" : "averaged", c->size,
                        c->size > 1 ? "s" : "");
            } else {
                // NCCL refuses two ranks on one GPU; the host path works, slower. Its downloads
                // wait for every queued kernel, so a bucket taken mid-backward would stall the
                // queueing of the rest: one bucket, after the backward.
                printf0(
                    "gradients: ranks share a GPU, so they are averaged through MPI on the host (one rank per GPU uses "
                    "NCCL)\n");
                g->overlap = 0;
            }
        }
#endif
        if (!g->nccl) g->host = mallocCheck((size_t)n * sizeof(float) + 1);
    }
    if (!exact) {
        if (exact_sums) g->xr = exact_reduce_create(c, be, g->nccl, 1);  // (exact_reduce_now only)
        return;
    }
    g->xr = exact_reduce_create(c, be, g->nccl, n);
    g->exact_as_float = exact_as_float() && !g->nccl;  // (NCCL would average: not the check's sum)
    if (g->exact_as_float) g->overlap = 0;             // each rank's sums are rounded after the backward
}

// Starts averaging grads[from, to) (xgrads in the invariant mode).
static void start(grad_sync_t *g, int64_t from, int64_t to) {
    if (g->exact && !g->exact_as_float) {
        exact_reduce_start(g->xr, g->model->xgrads, from, to, exact_reduce_floats(g->xr) ? g->model->grads : NULL,
                           g->model->exact_terms);
        return;
    }
    float *grads = g->model->grads;
    const int64_t count = to - from;
    g->bytes += comm_allreduce_bytes(g->comm, count * (int64_t)sizeof(float));
#ifdef SPKDDP_HAVE_CUDA
    if (g->nccl) {
        nccl_allreduce_start(g->nccl, grads + from, count);
        return;
    }
#endif
    float *buf = grads + from;
    if (g->host) {  // the bucket's gradients, to the host first
        buf = g->host + from;
        g->be->download(buf, grads + from, (size_t)count * sizeof(float));
    }
    SPK_ASSERT(g->nreq < g->cap_req && count <= (1 << 30));
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, g->comm->world, &g->reqs[g->nreq++]));
}

// The backward's progress: grads[0, upto) are final.
static void on_grads_ready(void *ctx, int64_t upto) {
    grad_sync_t *g = ctx;
    SPK_ASSERT(upto >= g->started && upto <= g->n);  // (a sharded head's slice reports upto == skip)
    while (upto - g->started >= g->bucket) {
        start(g, g->started, g->started + g->bucket);
        g->started += g->bucket;
    }
    if (g->exact) {
        exact_reduce_progress(g->xr);
    } else if (g->nreq > 0) {  // MPI moves nonblocking collectives only inside MPI calls
        int done;
        mpiCheck(MPI_Test(&g->reqs[g->nreq - 1], &done, MPI_STATUS_IGNORE));
    }
}

// The model's BatchNorm sums and global batch size, over all ranks.
static void exact_allreduce(void *ctx, xsum_t s, int64_t n) {
    grad_sync_t *g = ctx;
    exact_reduce_now(g->xr, s, n);
}

void grad_sync_begin(grad_sync_t *g, model_t *m) {
    SPK_ASSERT(m->invariant == g->exact);
    g->model = m;
    g->started = g->skip;
    g->nreq = 0;
    if (g->xr) {
        m->exact_allreduce = exact_allreduce;
        m->exact_ctx = g;
    }
    if (!g->overlap) return;
    m->grads_ready = on_grads_ready;
    m->grads_ready_ctx = g;
}

void grad_sync_begin_micro(grad_sync_t *g, model_t *m) {
    SPK_ASSERT(m->invariant == g->exact);
    g->model = m;
    m->grads_ready = NULL;
    m->grads_ready_ctx = NULL;
    if (g->xr) {
        m->exact_allreduce = exact_allreduce;
        m->exact_ctx = g;
    }
}

void grad_sync_finish(grad_sync_t *g) {
    model_t *m = g->model;
    m->grads_ready = NULL;
    m->grads_ready_ctx = NULL;
    m->exact_allreduce = NULL;
    m->exact_ctx = NULL;
    if (!g->active) return;
    if (g->exact_as_float) g->be->xsum_to_float(m->grads, m->xgrads, g->n);  // each rank's sums, rounded
    while (g->started < g->n) {  // the rest, in buckets (MPI counts are ints)
        const int64_t to = g->n - g->started > g->bucket ? g->started + g->bucket : g->n;
        start(g, g->started, to);
        g->started = to;
    }
}

void grad_sync_wait(grad_sync_t *g) {
    model_t *m = g->model;
    if (g->exact && !g->exact_as_float) {  // the sums of every sample over all ranks, rounded once
        const int floats = g->xr && exact_reduce_floats(g->xr);  // buckets end as floats in the gradients
        if (g->xr) exact_reduce_wait(g->xr);
        g->be->xsum_to_float(m->grads, m->xgrads, floats ? g->skip : g->n);
        return;
    }
    if (!g->active) return;
    SPK_ASSERT(g->started == g->n);
#ifdef SPKDDP_HAVE_CUDA
    if (g->nccl) {
        nccl_allreduce_end(g->nccl, g->n);
        return;
    }
#endif
    for (int i = 0; i < g->nreq; i++) comm_wait(g->comm, &g->reqs[i]);
    if (!g->exact) {  // the invariant mode's gradients are sums already scaled by 1 / global batch
        const float inv = 1.0f / (float)g->comm->size;
        if (g->host)
            for (int64_t i = g->skip; i < g->n; i++) g->host[i] *= inv;
        else  // on the backend's threads (a rank of several threads ran this pass on one)
            g->be->vec_scale(m->grads + g->skip, inv, (size_t)(g->n - g->skip));
    }
    if (g->host) g->be->upload(m->grads + g->skip, g->host + g->skip, (size_t)(g->n - g->skip) * sizeof(float));
}

int64_t grad_sync_take_bytes(grad_sync_t *g) {
    int64_t b = g->bytes;
    if (g->xr) b += exact_reduce_take_bytes(g->xr);
    g->bytes = 0;
    return b;
}

void grad_sync_drain(grad_sync_t *g) {
#ifdef SPKDDP_HAVE_CUDA
    if (g->nccl) nccl_allreduce_drain(g->nccl, g->n);
#else
    (void)g;
#endif
}

void grad_sync_free(grad_sync_t *g) {
#ifdef SPKDDP_HAVE_CUDA
    nccl_comm_destroy(g->nccl);
#endif
    exact_reduce_free(g->xr);
    free(g->host);
    free(g->reqs);
    memset(g, 0, sizeof *g);
}
