// The model interface. One struct per model with contiguous buffers and named views:
//   params (num_params,)  trainable, averaged gradients update them identically everywhere
//   grads  (num_params,)  same layout; train_step ACCUMULATES into it (caller zeroes)
//   state  (num_state,)   non-trainable buffers (BatchNorm running statistics); like PyTorch
//                         DDP, rank 0's copy is authoritative (broadcast before checkpoints)
//   params_bf16           with --precision bf16: params rounded to bf16 at the start of every
//                         forward, the weights its convolutions and GEMMs read
// Precision (model_config_t.precision): fp32 computes in float32 throughout; tf32 is fp32 on
// the CPU and lets a GPU's tensor cores round GEMM inputs to TF32 (device_set_precision);
// bf16 (ECAPA) gives the convolutions and the attention GEMMs bf16 operands with float32
// accumulation (kernels/conv1d_bf16.h), while params, gradients, optimizer state, BatchNorm,
// pooling statistics, softmax, the embedding layer and the AAM loss stay float32.
// In the world-size-invariant mode (model_config_t.invariant, docs/invariant.md) train_step
// adds its gradients to the exact sums xgrads instead (grads is its scratch; the caller turns
// the cross-rank sums into grads), BatchNorm normalises over the global batch through
// exact_allreduce, the loss is a sum over the global batch divided by its size, and state comes
// out the same on every rank.
// These live on the model's backend (device memory for CUDA) and every op runs there.
// host_params / host_state are the host's copies for initialisation, checkpoints and MPI;
// with a host-memory backend they are the same buffers, otherwise model_upload and
// model_download move them.
#pragma once
#include "app/model/model_config.h"
#include "io/loader.h"
#include "io/params.h"
#include "kernels/backend.h"

#include <stdint.h>

typedef struct {
    double loss_sum;         // sum over samples of the per-sample loss (0 in the invariant mode)
    int64_t correct;         // argmax == label
    int64_t count;           // samples
    xsum_cell_t loss_exact;  // invariant mode: the exact sum of the per-sample losses
} step_stats_t;

typedef struct model model_t;

typedef struct {
    // Forward + backward on a local batch; the loss is the batch mean, so the gradient is of
    // the mean. Accumulates into m->grads. On a device the work is only queued, nothing waits
    // for it: the call returns once `b` is in pinned staging memory (so the caller may load
    // the next batch into it while the device computes); model_read_stats gets the loss.
    void (*train_step)(model_t *m, const batch_t *b);
    // Forward only, inference mode (running statistics), no state change.
    void (*eval_step)(model_t *m, const batch_t *b, step_stats_t *st);
    // Inference-mode embeddings of every sample: out (n, emb_dim) in HOST memory. Samples may
    // differ in length.
    void (*embed)(model_t *m, const batch_t *b, float *out);
    // Epoch-dependent hyperparameters (margin ramp); may be NULL.
    void (*set_epoch)(model_t *m, int64_t epoch);
    void (*free_impl)(model_t *m);
} model_ops_t;

struct model {
    char name[32];
    const model_ops_t *ops;
    const spk_backend_t *be;    // where the buffers live and the math runs
    param_table_t table;        // views into params/grads
    float *params;              // (table.total,) on be
    float *grads;               // (table.total,) on be
    param_table_t state_table;  // views into state
    float *state;               // (state_table.total,) on be
    int bf16;                   // --precision bf16
    spk_bf16 *params_bf16;      // (table.total,) on be; NULL unless bf16
    float *host_params;         // host copies (== params / state when be uses host memory)
    float *host_state;
    int64_t feature_dim;   // F of the input frames
    int64_t num_classes;   // speakers in the training set
    int64_t visual_dim;    // Fv of the visual stream (0: audio only)
    int64_t visual_ratio;  // audio frames per visual frame
    loader_spec_t input;   // what the loader hands over: crop length, minimum length, CMN, visual
    int64_t emb_dim;       // size of the embedding `embed` returns
    int min_batch;         // samples a training step needs per rank, in the invariant mode in the global
                           // batch (2 with BatchNorm over the batch)
    // Told by train_step's backward as gradients become final: grads[0, upto) will not change
    // again this step (tensors are in reverse execution order; xgrads in the invariant mode).
    // NULL: nobody listens.
    void (*grads_ready)(void *ctx, int64_t upto);
    void *grads_ready_ctx;
    spk_staging_t *staging;     // batches to the backend, statistics back (kernels/backend.h)
    int stats_pending;          // train_steps whose statistics were not read yet (at most 2)
    int stats_n[2];             // their samples, oldest first
    xsum_cell_t stats_loss[2];  // invariant mode: their exact loss sums (this rank's samples)
    // The world-size-invariant mode.
    int invariant;
    int group;      // samples per exact term of train_step (model_config_t.invariant_group)
    xsum_t xgrads;  // (table.total,) on be: exact gradient sums of this rank's samples
    // Set by the caller with grads_ready: replaces the n exact sums s (on be) by their sums over
    // all ranks, in place. Collective: train_step calls it in the same order on every rank
    // (the global batch size, each BatchNorm's statistics and gradients). NULL: one rank.
    void (*exact_allreduce)(void *ctx, xsum_t s, int64_t n);
    void *exact_ctx;
    int64_t global_batch;  // samples of the global batch of the current train_step
    xsum_t xcells;         // (2,) on be: [0] the batch size being reduced, [1] the losses of the last step
    xsum_t xstats;         // (xstats_cap,) on be: the BatchNorm sums being reduced
    int64_t xstats_cap;
    float *fcells;  // (1,) on be: the batch size as a term
    void *impl;
};

// Builds the model named by cfg->name on backend `be`, with parameters initialised from
// cfg->seed (on the host, then uploaded).
model_t *model_create(const model_config_t *cfg, const model_data_t *data, const spk_backend_t *be);
void model_free(model_t *m);
// host_params/host_state -> params/state, and back; nothing to do on a host-memory backend.
void model_upload(model_t *m);
void model_download(model_t *m);
// Zeroes the gradients before a train_step (grads, and xgrads in the invariant mode).
void model_zero_grads(model_t *m);
// Adds the loss and accuracy of the oldest train_step not read yet to st, waiting for them
// only (not for later work). Returns 0 when every step's statistics were read. A caller reads
// step s after queueing step s + 1, so the device never idles while the host waits. At most
// one step may be pending when train_step, eval_step or embed is called (two staging slots).
int model_read_stats(model_t *m, step_stats_t *st);
