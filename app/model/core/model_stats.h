// A training step's traffic and bookkeeping, for every family (app/model/core/model_stats.c):
// the host input staged for the model's kernels, the global batch of the step, and its loss and
// accuracy fetched back without waiting (model_read_stats, which callers call).
#pragma once
#include "app/model/core/model_core.h"

#include <stddef.h>
#include <stdint.h>

// Adds the loss and accuracy of the oldest train_step not read yet to st, waiting for them
// only (not for later work). Returns 0 when every step's statistics were read. A caller reads
// step s after queueing step s + 1, so the device never idles while the host waits. At most
// one step may be pending when train_step, eval_step or embed is called (two staging slots).
int model_read_stats(model_t *m, step_stats_t *st);

// Host input for the model's kernels, through the backend's staging (kernels/backend.h): begin
// with the total bytes of up to 4 pieces, stage each piece (the result is where the kernels
// find it: `host` itself on a host-memory backend), then ready before queueing the kernels.
void model_stage_begin(model_t *m, size_t bytes);
const void *model_stage(model_t *m, const void *host, size_t bytes);
void model_stage_ready(model_t *m);
// After queueing a loss op that wrote [loss, correct (an int)] to `scalars` (backend memory)
// for n samples: fetches them back without waiting (model_read_stats reads them).
void model_stats_fetch(model_t *m, const float *scalars, int n);

// The samples of the global batch of this train_step (one collective in the invariant mode;
// B elsewhere), kept in m->global_batch.
int64_t model_begin_step(model_t *m, int B);
// Invariant mode: the step's loss is the exact sum of the B per-sample losses row_loss (on the
// backend), in terms of `group` samples (m->group in training, 1 in evaluation, whose batches
// do not follow the groups); model_loss_sum reads it back (model_stats_fetch does, for
// model_read_stats to add it to step_stats_t.loss_exact).
void model_sum_losses(model_t *m, const float *row_loss, int B, int group);
xsum_cell_t model_loss_sum(const model_t *m);
