// For the files that implement a model (model_linear.c, model_ecapa.c and its blocks), not
// for its callers: buffers on the model's backend, staging of host input, the backward's
// progress report, and the builders model_create dispatches to.
#pragma once
#include "app/model/model.h"

// Allocates params/grads/state and the host copies once the tables are complete.
void model_alloc_buffers(model_t *m, const model_data_t *data);

// Buffers on the model's backend: n zeroed floats, and release (NULL is fine, *p is cleared).
float *model_buf(const model_t *m, size_t n);
void model_buf_free(const model_t *m, float **p);
spk_bf16 *model_buf_bf16(const model_t *m, size_t n);
void model_buf_bf16_free(const model_t *m, spk_bf16 **p);
// params -> params_bf16 (bf16 models; nothing otherwise): at the start of every forward, since
// the optimizer changed params after the last one.
void model_round_params(model_t *m);
// n exact sums on the model's backend, and release (the empty view is fine).
xsum_t model_xsum(const model_t *m, int64_t n);
void model_xsum_free(const model_t *m, xsum_t *s);
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

// ---- calls that differ in the world-size-invariant mode (app/model/model_grads.c) -------------
// Parameters are named by their offsets in the table (b < 0: no bias). By default these are
// the kernels' own calls, gradients accumulating in m->grads and BatchNorm using this rank's
// batch (PyTorch DDP); in the invariant mode every sample's contribution goes to the exact sums
// m->xgrads (m->grads serving as scratch) and BatchNorm normalises over the global batch.

// The samples of the global batch of this train_step (one collective in the invariant mode;
// B elsewhere), kept in m->global_batch.
int64_t model_begin_step(model_t *m, int B);
// Conv1d weight and bias gradients (b < 0: none) and dx += : bf16 models on the forward's rounded
// input xh (x unused), the invariant mode as exact sums, else conv1d_backward.
void model_conv1d_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                           const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K, int dilation, float *work);
// Dense layer y = x W^T + b: W (Out, In) at w.
void model_linear_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B, int In,
                           int Out);
void model_batchnorm_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean, int64_t running_var,
                           const float *x, int64_t w, int64_t b, int B, int C, int T, float eps, float momentum);
void model_batchnorm_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                              const float *mean, const float *rstd, int B, int C, int T);
// Invariant mode only: the gradient at c (row stride ldc) += sum_i op(A_i) op(B_i)
// (spk_sgemm_batched_exact), and the gradient at c (n) += the sum of the rows of x (rows, n).
void model_gemm_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const float *A, int lda,
                           int64_t strideA, const float *Bm, int ldb, int64_t strideB, int64_t c, int ldc, int batch);
void model_rows_grad_exact(model_t *m, int64_t c, const float *x, int rows, int64_t n);
// Invariant mode: the step's loss is the exact sum of the B per-sample losses row_loss (on the
// backend), in terms of `group` samples (m->group in training, 1 in evaluation, whose batches
// do not follow the groups); model_loss_sum reads it back (model_stats_fetch does, for
// model_read_stats to add it to step_stats_t.loss_exact).
void model_sum_losses(model_t *m, const float *row_loss, int B, int group);
xsum_cell_t model_loss_sum(const model_t *m);

// Builders, one per model file.
void model_linear_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
void model_ecapa_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
