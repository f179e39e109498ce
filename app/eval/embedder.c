#include "app/eval/embedder.h"

#include "io/loader/loader.h"
#include "kernels/base/check.h"
#include "kernels/base/mpi_wait.h"

#include <stdlib.h>

float *embed_dataset(const comm_t *comm, model_t *m, dataset_t *ds, int64_t batch, void (*met)(void)) {
    const int64_t N = ds->num_utts, K = comm->size, E = m->emb_dim;
    int *counts = mallocCheck((size_t)K * sizeof(int)), *displs = mallocCheck((size_t)K * sizeof(int));
    for (int r = 0; r < K; r++) {
        int64_t a = N * r / K, z = N * (r + 1) / K;
        counts[r] = (int)((z - a) * E);
        displs[r] = (int)(a * E);
    }
    int64_t lo = N * comm->rank / K, hi = N * (comm->rank + 1) / K;
    int64_t steps = ((N + K - 1) / K + batch - 1) / batch;
    float *all = mallocCheck((size_t)(N * E + 1) * sizeof(float));
    int64_t *idx = mallocCheck((size_t)batch * sizeof(int64_t));
    loader_t l;
    loader_spec_t whole = m->input;
    whole.crop = 0;  // full length
    loader_init(&l, ds, (int)batch, &whole, 0, -1);
    for (int64_t s = 0; s < steps; s++) {  // every rank joins every collective read
        int n = 0;
        int64_t first = lo + s * batch;
        for (int64_t u = first; u < hi && n < batch; u++) idx[n++] = u;
        const batch_t *b = loader_load(&l, 0, idx, n);
        if (met) met();
        if (n > 0) m->ops->embed(m, b, all + first * E);
    }
    loader_free(&l);
    SPK_COLLECTIVE("the gather of the embeddings", MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_FLOAT, all, counts, displs,
                   MPI_FLOAT, comm->world);
    free(idx);
    free(counts);
    free(displs);
    return all;
}
