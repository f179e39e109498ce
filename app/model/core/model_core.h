// The core every model stands on (app/model/model.h describes the buffers): the model_t that
// callers hold and the families fill, its buffers on the model's backend and their host copies,
// and the backward's progress reports. Staging and the step's statistics are
// app/model/core/model_stats.h, the layers whose calls differ in the world-size-invariant mode
// app/model/layers/model_layers.h.
#pragma once
#include "app/model/core/model_config.h"
#include "io/loader/batch.h"
#include "kernels/backend.h"
#include "kernels/base/params.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    double loss_sum;         // sum over samples of the per-sample loss (0 in the invariant mode)
    int64_t correct;         // argmax == label
    int64_t count;           // samples
    xsum_cell_t loss_exact;  // invariant mode: the exact sum of the per-sample losses
} step_stats_t;

typedef struct model model_t;

// What a classifier sharded across ranks (--head sharded) asks of them: collectives over every
// rank, called in the same order everywhere, on HOST buffers unless said (app/dist/head_comm.h).
typedef struct {
    int rank, size;
    void *ctx;
    // counts[r] = the n of rank r, for every rank.
    void (*counts)(void *ctx, int64_t n, int64_t *counts);
    // recv = every rank's counts[r] items of `unit` bytes, in rank order.
    void (*allgather)(void *ctx, const void *send, void *recv, const int64_t *counts, size_t unit);
    // recv (counts[rank] x unit floats) = the sum over ranks of block `rank` of their send
    // (every rank's blocks of counts[r] x unit floats, in rank order).
    void (*reduce_scatter)(void *ctx, const float *send, float *recv, const int64_t *counts, size_t unit);
    // The same two over DEVICE memory with every rank sending `count` floats (NCCL on GPUs);
    // NULL where there is no such path (then the host ones serve).
    void (*allgather_device)(void *ctx, const float *send, float *recv, int64_t count);
    void (*reduce_scatter_device)(void *ctx, const float *send, float *recv, int64_t count);
    // s (n exact sums in the model's backend memory) = their sums over every rank (the
    // invariant mode; NCCL on GPUs).
    void (*exact_allreduce)(void *ctx, xsum_t s, int64_t n);
} head_comm_t;

// Whether the device collectives serve a step whose ranks have counts[r] samples: they exist and
// every rank has the same, nonzero count (every rank holds the same counts, so all decide alike).
static inline int head_comm_on_device(const head_comm_t *c, const int64_t *counts) {
    if (!c || !c->allgather_device || counts[0] <= 0) return 0;
    for (int r = 1; r < c->size; r++)
        if (counts[r] != counts[0]) return 0;
    return 1;
}

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
    // Releases what impl holds (model_free then frees impl itself); may be NULL.
    void (*free_impl)(model_t *m);
    // After the optimizer's update `step` (counted from 1) of `total`: a teacher's EMA (DINO); may be NULL.
    void (*after_update)(model_t *m, int64_t step, int64_t total);
    // Once the step's gradients are summed or averaged over the ranks (before the optimizer and
    // the step controls see them): what only the final gradient allows (DINO's weight-normalised
    // prototypes); may be NULL.
    void (*after_averaging)(model_t *m);
    // After the family built and initialised the model: initialises what the loss added (DINO's
    // head); may be NULL.
    void (*finish)(model_t *m);
} model_ops_t;

// The streams an audio-visual sample is encoded from (modality dropout, single-stream embeddings).
enum { MODALITY_BOTH, MODALITY_AUDIO, MODALITY_VISUAL };

// The prefix of the teacher's copies among the state tensors: the teacher is an exponential
// moving average of the model (short, so that CAM++'s longest names fit PARAM_NAME_MAX).
#define MODEL_TEACHER "ema."

// Whether a state tensor is training's own and not the model's: the teacher's copies and DINO's
// centre and flag ("dino."), which export leaves out and --init-from does not need.
static inline int model_training_only(const char *name) {
    return strncmp(name, MODEL_TEACHER, sizeof MODEL_TEACHER - 1) == 0 || strncmp(name, "dino.", 5) == 0;
}

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
    int64_t feature_dim;  // F of the input frames
    int64_t num_classes;  // speakers in the training set
    // The classifier's classes on this rank: [head_first, head_first + head_rows); all of them
    // unless it is sharded, and then head_comm (set by the caller before a step) joins the ranks.
    int64_t head_first, head_rows;
    const head_comm_t *head_comm;
    const head_comm_t *batch_comm;  // the global batch's collectives (contrastive losses over every rank's samples)
    int64_t step_key;        // the update being trained (set by the caller): keys a sharded head's class sampling
    const int8_t *modality;  // (B) the streams each sample of the running forward keeps: MODALITY_*; NULL: both
    int embed_modality;      // what embed keeps of an audio-visual model (MODALITY_*; set by the caller)
    int embedding;           // embed is running: inference on whole utterances, which a layer may take in pieces
    int head_unused;         // the loss leaves the first tensor (the classifier) without a gradient (--loss supcon ...)
    int residual_zeroed;     // --zero-init-residual found residual blocks to start as their shortcuts
    // A teacher (--loss dino): state also holds MODEL_TEACHER "<name>" for every parameter (from state
    // offset teacher_params, the parameters' layout) and every other state tensor (from
    // teacher_state, the layout of state[0, teacher_state_n)), registered by model_alloc_buffers.
    int teacher;
    int64_t teacher_params, teacher_state, teacher_state_n;
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
    int group;  // samples per exact term of train_step (model_config_t.invariant_group)
    // --invariant-bn group: BatchNorm normalises each group of samples with its own statistics
    // (no exchange); the running statistics follow the global batch's first group, which the
    // rank with batch_offset 0 holds (the caller sets it: this rank's first sample's position
    // in the global batch) on any world size, and are that rank's (rank 0's rule, as PyTorch DDP).
    int bn_by_group;
    int64_t batch_offset;
    xsum_t xgrads;  // (table.total,) on be: exact gradient sums of this rank's samples, in
                    // full or as words (kernels/exact_sum.h), in xgrads_full's memory
    xsum_t xgrads_full;
    // The most terms a gradient sum takes this update over all ranks, and on this rank
    // (model_plan_update); they choose xgrads' form (model_zero_grads).
    int64_t exact_terms, exact_rank_terms;
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
    void *impl;     // the family's own state, malloc'ed by its builder
};

// ---- for the callers ------------------------------------------------------------------------
// host_params/host_state -> params/state, and back; nothing to do on a host-memory backend.
void model_upload(model_t *m);
void model_download(model_t *m);
// Before an update's model_zero_grads: it trains on `samples` samples over all ranks (every
// micro-batch). The invariant mode's gradient sums then take a term for each group of them, or
// of a layer's rows where a sample gives it several: pictures with the visual stream (a face
// encoder's samples).
void model_plan_update(model_t *m, int64_t samples, int ranks);
// Zeroes the gradients before a train_step (grads, and xgrads in the invariant mode, in the form
// the planned update allows).
void model_zero_grads(model_t *m);
// BatchNorm by groups on the default kernels (--invariant-bn group where the backend's BatchNorm
// sums in an order fixed by the rows it is given, spk_backend_t.bn_fixed_order): a group's
// results depend on its samples alone, and its gradients join the exact sums as float terms.
int model_bn_by_default_kernels(const model_t *m);
// A model with a teacher (m->teacher) takes the teacher's parameters and state as its own, in
// the host copies (then model_upload): what embed and export use of a DINO run.
void model_use_teacher(model_t *m);

// Whether every rank holds the same running statistics (the invariant mode's BatchNorm over the
// global batch); otherwise rank 0's are the model's.
static inline int model_state_shared(const model_t *m) { return m->invariant && !m->bn_by_group; }

// ---- for the families (app/model/<family>/) -------------------------------------------------
// Allocates params/grads/state and the host copies once the tables are complete.
void model_alloc_buffers(model_t *m, const model_data_t *data);

// Releases the tables, what model_alloc_buffers allocated and the staging (model_free, after the family's
// free_impl).
void model_free_buffers(model_t *m);

// Buffers on the model's backend: n zeroed floats, and release (NULL is fine, *p is cleared).
float *model_buf(const model_t *m, size_t n);
void model_buf_free(const model_t *m, float **p);
// model_buf_free of each of the n buffers (NULL ones too): a layer's release in one call.
void model_bufs_free(const model_t *m, float **const *bufs, size_t n);
spk_bf16 *model_buf_bf16(const model_t *m, size_t n);
void model_buf_bf16_free(const model_t *m, spk_bf16 **p);
// params -> params_bf16 (bf16 models; nothing otherwise): at the start of every forward, since
// the optimizer changed params after the last one.
void model_round_params(model_t *m);
// n exact sums on the model's backend, and release (the empty view is fine).
xsum_t model_xsum(const model_t *m, int64_t n);
void model_xsum_free(const model_t *m, xsum_t *s);
// bf16 models whose layers keep their activations' gradients and 2-D outputs in bf16, written
// straight from their own passes: in the plain mode, and in the invariant one where BatchNorm runs
// by groups on the default kernels (those passes a group at a time). The 1-D units' BatchNorms
// write their convolutions' output gradients rounded (kernels/conv1d_bf16.h), with the bias
// gradient's sums; the 2-D units (app/model/layers/conv2d_bn.h) keep their convolutions' and
// BatchNorms' outputs in bf16 (the invariant mode's fixed twins write the rounded outputs).
// Elsewhere the invariant mode rounds them in its convolutions. (Every bf16 model writes the
// 1-D convolutions' inputs rounded: model_round_conv1d_input.)
static inline int model_writes_bf16(const model_t *m) {
    return m->bf16 && (!m->invariant || model_bn_by_default_kernels(m));
}

// Called by a backward pass as gradients become final: grads[0, upto) will not change again
// this step (model_t.grads_ready).
static inline void model_grads_ready(model_t *m, int64_t upto) {
    if (m->grads_ready) m->grads_ready(m->grads_ready_ctx, upto);
}

// The exact gradient sums of the parameters at offset off (m->xgrads), or none for off < 0.
static inline xsum_t model_xgrad(const model_t *m, int64_t off) {
    return off < 0 ? xsum_none() : xsum_at(m->xgrads, off);
}

// Replaces the n exact sums s (on the model's backend) by their sums over all ranks, in place
// (model_t.exact_allreduce; nothing to do on one rank).
static inline void model_exact_allreduce(model_t *m, xsum_t s, int64_t n) {
    if (m->exact_allreduce) m->exact_allreduce(m->exact_ctx, s, n);
}
