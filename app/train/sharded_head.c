// The sharded classifier gathered and scattered whole (app/train/sharded_head.h).
#include "app/train/sharded_head.h"

#include "app/dist/head_comm.h"
#include "kernels/base/spk_assert.h"

#include <string.h>

int sharded_head_of(const model_t *m) { return m->head_rows != m->num_classes; }

void sharded_head_init(sharded_head_t *s, const comm_t *c, const model_t *m) {
    memset(s, 0, sizeof *s);
    const param_tensor_t *head = &m->table.t[0];
    SPK_ASSERT(strcmp(head->name, "classifier.weight") == 0 && head->offset == 0 && head->ndim == 2);
    s->comm = c;
    s->classes = m->num_classes;
    s->E = head->shape[1];
    s->own = head->numel;
    s->n_local = m->table.total;
    s->n_full = m->table.total - s->own + s->classes * s->E;
    for (int i = 0; i < m->table.count; i++) {
        param_tensor_t t = m->table.t[i];
        if (i == 0) t.shape[0] = s->classes;
        param_table_add(&s->full, t.name, t.ndim, t.shape);
    }
    SPK_ASSERT(s->full.total == s->n_full);
}

void sharded_head_free(sharded_head_t *s) { param_table_free(&s->full); }

model_t sharded_head_view(const sharded_head_t *s, const model_t *m, float *full) {
    model_t v = *m;
    v.table = s->full;
    v.host_params = full;
    v.head_first = 0;
    v.head_rows = m->num_classes;
    return v;
}

void sharded_head_gather(const sharded_head_t *s, const float *local, int copies, float *full) {
    const int64_t rest = s->n_local - s->own, whole = s->classes * s->E;
    for (int k = 0; k < copies; k++) {
        const float *l = local + (size_t)k * s->n_local;
        float *f = s->comm->rank == 0 ? full + (size_t)k * s->n_full : NULL;
        head_gather(s->comm, l, s->classes, s->E, f);
        if (f) memcpy(f + whole, l + s->own, (size_t)rest * sizeof(float));
    }
}

void sharded_head_scatter(const sharded_head_t *s, const float *full, int copies, float *local) {
    const int64_t rest = s->n_local - s->own, whole = s->classes * s->E;
    for (int k = 0; k < copies; k++) {
        const float *f = s->comm->rank == 0 ? full + (size_t)k * s->n_full : NULL;
        float *l = local + (size_t)k * s->n_local;
        head_scatter(s->comm, f, s->classes, s->E, l);
        if (f) memcpy(l + s->own, f + whole, (size_t)rest * sizeof(float));
        comm_bcast(s->comm, l + s->own, rest, MPI_FLOAT, 0);
    }
}
