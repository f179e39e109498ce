#include "app/dist/grad_sync.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdlib.h>
#include <string.h>

#ifdef SPKDDP_HAVE_CUDA
#include "app/dist/device_select.h"
#include "app/dist/nccl_comm.h"

// Seconds a rank waits for the others' gradients before it declares a peer dead.
static double nccl_timeout(void) {
    const char *s = getenv("SPKDDP_NCCL_TIMEOUT");
    double t = s ? atof(s) : 0.0;
    return t > 0.0 ? t : 600.0;
}

// SPKDDP_NCCL=1: average through NCCL even in a world of one rank (the mean of one is the
// gradient itself), so that a one-GPU machine runs the NCCL setup, events, deadline and abort.
static int nccl_forced(const spk_backend_t *be) {
    const char *s = getenv("SPKDDP_NCCL");
    return be == spk_backend_cuda() && s && strcmp(s, "1") == 0;
}
#else
static int nccl_forced(const spk_backend_t *be) { return (void)be, 0; }
#endif

static int64_t bucket_floats(void) {
    const char *s = getenv("SPKDDP_BUCKET_MB");
    double mb = s ? atof(s) : 0.0;
    int64_t f = (int64_t)((mb > 0.0 ? mb : 4.0) * (1 << 20) / sizeof(float));
    return f < 1 ? 1 : f > (1 << 28) ? (1 << 28) : f;  // MPI counts are ints
}

void grad_sync_init(grad_sync_t *g, const comm_t *c, const spk_backend_t *be, int64_t n) {
    memset(g, 0, sizeof *g);
    g->comm = c;
    g->be = be;
    g->n = n;
    g->bucket = bucket_floats();
    if (c->size == 1 && !nccl_forced(be)) return;
    g->active = 1;
    comm_bcast(c, &g->bucket, 1, MPI_INT64_T, 0);  // ranks must start the same collectives
    g->overlap = 1;
    g->cap_req = (int)(n / g->bucket + 2);
    g->reqs = mallocCheck((size_t)g->cap_req * sizeof(MPI_Request));
    if (!be->separate_memory) return;
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) {
        if (!device_gpu_shared()) {
            g->nccl = nccl_comm_create(c, nccl_timeout());
            printf0("gradients: averaged by NCCL over %d GPU%s\n", c->size, c->size > 1 ? "s" : "");
            return;
        }
        // NCCL refuses two ranks on one GPU; the host path works, slower. Its downloads wait
        // for every queued kernel, so a bucket taken mid-backward would stall the queueing of
        // the rest: one bucket, after the backward.
        printf0("gradients: ranks share a GPU, so they are averaged through MPI on the host (one rank per GPU uses NCCL)\n");
        g->overlap = 0;
    }
#endif
    g->host = mallocCheck((size_t)n * sizeof(float) + 1);
}

// Starts averaging grads[from, to).
static void start(grad_sync_t *g, int64_t from, int64_t to) {
    float *grads = g->model->grads;
    const int64_t count = to - from;
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
    SPK_ASSERT(upto >= g->started && upto <= g->n);
    while (upto - g->started >= g->bucket) {
        start(g, g->started, g->started + g->bucket);
        g->started += g->bucket;
    }
    if (g->nreq > 0) {  // MPI moves nonblocking collectives only inside MPI calls
        int done;
        mpiCheck(MPI_Test(&g->reqs[g->nreq - 1], &done, MPI_STATUS_IGNORE));
    }
}

void grad_sync_begin(grad_sync_t *g, model_t *m) {
    g->model = m;
    g->started = 0;
    g->nreq = 0;
    if (!g->overlap) return;
    m->grads_ready = on_grads_ready;
    m->grads_ready_ctx = g;
}

void grad_sync_finish(grad_sync_t *g) {
    model_t *m = g->model;
    m->grads_ready = NULL;
    m->grads_ready_ctx = NULL;
    if (!g->active) return;
    while (g->started < g->n) {  // the rest, in buckets (MPI counts are ints)
        const int64_t to = g->n - g->started > g->bucket ? g->started + g->bucket : g->n;
        start(g, g->started, to);
        g->started = to;
    }
}

void grad_sync_wait(grad_sync_t *g) {
    model_t *m = g->model;
    if (!g->active) return;
    SPK_ASSERT(g->started == g->n);
#ifdef SPKDDP_HAVE_CUDA
    if (g->nccl) {
        nccl_allreduce_end(g->nccl, g->n);
        return;
    }
#endif
    for (int i = 0; i < g->nreq; i++) comm_wait(g->comm, &g->reqs[i]);
    float *sum = g->host ? g->host : m->grads;
    const float inv = 1.0f / (float)g->comm->size;
    for (int64_t i = 0; i < g->n; i++) sum[i] *= inv;
    if (g->host) g->be->upload(m->grads, g->host, (size_t)g->n * sizeof(float));
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
    free(g->host);
    free(g->reqs);
    memset(g, 0, sizeof *g);
}
