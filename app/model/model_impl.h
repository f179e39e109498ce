// For the files that implement a model (model_linear.c, model_ecapa.c and its blocks), not
// for its callers: buffers on the model's backend, staging of host input, the backward's
// progress report, and the builders model_create dispatches to.
#pragma once
#include "app/model/model.h"

// Allocates params/grads/state and the host copies once the tables are complete.
void model_alloc_buffers(model_t *m);

// Buffers on the model's backend: n zeroed floats, and release (NULL is fine, *p is cleared).
float *model_buf(const model_t *m, size_t n);
void model_buf_free(const model_t *m, float **p);
spk_bf16 *model_buf_bf16(const model_t *m, size_t n);
void model_buf_bf16_free(const model_t *m, spk_bf16 **p);
// params -> params_bf16 (bf16 models; nothing otherwise): at the start of every forward, since
// the optimizer changed params after the last one.
void model_round_params(model_t *m);
// Host input for the model's kernels, through the backend's staging (kernels/backend.h): begin
// with the total bytes of up to 4 pieces, stage each piece (the result is where the kernels
// find it: `host` itself on a host-memory backend), then ready before queueing the kernels.
void model_stage_begin(model_t *m, size_t bytes);
const void *model_stage(model_t *m, const void *host, size_t bytes);
void model_stage_ready(model_t *m);
// After queueing a loss op that wrote [loss, correct (an int)] to `scalars` (backend memory)
// for n samples: fetches them back without waiting (model_read_stats reads them).
void model_stats_fetch(model_t *m, const float *scalars, int n);

// Called by a backward pass as gradients become final: grads[0, upto) will not change again
// this step (model_t.grads_ready).
static inline void model_grads_ready(model_t *m, int64_t upto) {
    if (m->grads_ready) m->grads_ready(m->grads_ready_ctx, upto);
}

// Builders, one per model file.
void model_linear_build(model_t *m, const model_config_t *cfg);
void model_ecapa_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
