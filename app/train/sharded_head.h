// A classifier sharded across ranks (--head sharded) where the run needs it whole:
// checkpoints, which always hold the whole head in the replicated layout (so a run resumes on
// any number of ranks, sharded or not, and inspect, average, export and --init-from read them
// as before), and --init-from. The classifier is the first tensor of the table, so a rank's
// buffer is [its slice | the rest] and the whole model's is [the whole head | the same rest].
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"

#include <stdint.h>

typedef struct {
    const comm_t *comm;
    int64_t classes, E;       // the whole head: (classes, E)
    int64_t own;              // floats of this rank's slice
    int64_t n_local, n_full;  // floats of a rank's parameter buffer and of the whole model's
    param_table_t full;       // the whole model's layout
} sharded_head_t;

// 1 when m's classifier is sharded.
int sharded_head_of(const model_t *m);
void sharded_head_init(sharded_head_t *s, const comm_t *c, const model_t *m);
void sharded_head_free(sharded_head_t *s);
// m seen whole (on rank 0, for the checkpoint and --init-from code): its table the whole
// model's, host_params `full` (n_full floats).
model_t sharded_head_view(const sharded_head_t *s, const model_t *m, float *full);
// Rank 0's full (copies x n_full) <- every rank's local (copies x n_local): the slices gathered,
// the rest rank 0's. Collective; full is only used on rank 0.
void sharded_head_gather(const sharded_head_t *s, const float *local, int copies, float *full);
// Every rank's local (copies x n_local) <- rank 0's full: its slice, and the rest. Collective.
void sharded_head_scatter(const sharded_head_t *s, const float *full, int copies, float *local);
