#include "app/grad_sync.h"

#include "app/check.h"

#include <stdlib.h>
#include <string.h>

#ifdef SPKDDP_HAVE_CUDA
#include "app/device_select.h"
#include "app/nccl_comm.h"

// Seconds a rank waits for the others' gradients before it declares a peer dead.
static double nccl_timeout(void) {
    const char *s = getenv("SPKDDP_NCCL_TIMEOUT");
    double t = s ? atof(s) : 0.0;
    return t > 0.0 ? t : 600.0;
}
#endif

void grad_sync_init(grad_sync_t *g, const comm_t *c, const spk_backend_t *be, int64_t n) {
    memset(g, 0, sizeof *g);
    g->comm = c;
    g->be = be;
    g->n = n;
    if (c->size == 1 || !be->separate_memory) return;
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) {
        if (!device_gpu_shared()) {
            g->nccl = nccl_comm_create(c, nccl_timeout());
            return;
        }
        // NCCL refuses two ranks on one GPU; the host path works, slower.
        printf0("gradients: ranks share a GPU, so they are averaged through MPI on the host (one rank per GPU uses NCCL)\n");
    }
#endif
    g->host = mallocCheck((size_t)n * sizeof(float) + 1);
}

void grad_sync_mean(grad_sync_t *g, float *grads) {
    if (g->comm->size == 1) return;
#ifdef SPKDDP_HAVE_CUDA
    if (g->nccl) {
        nccl_allreduce_mean(g->nccl, grads, g->n);
        return;
    }
#endif
    if (!g->host) {
        comm_allreduce_mean(g->comm, grads, g->n);
        return;
    }
    g->be->download(g->host, grads, (size_t)g->n * sizeof(float));
    comm_allreduce_mean(g->comm, g->host, g->n);
    g->be->upload(grads, g->host, (size_t)g->n * sizeof(float));
}

void grad_sync_free(grad_sync_t *g) {
#ifdef SPKDDP_HAVE_CUDA
    nccl_comm_destroy(g->nccl);
#endif
    free(g->host);
    memset(g, 0, sizeof *g);
}
