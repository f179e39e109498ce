// What happens to the averaged gradient before the optimizer update, and the figures of each
// update:
//   gradient norm     the L2 norm of the averaged gradient (kernels/norm.h), every update. Every
//                     rank holds the same gradient and sums it in the same order, so every rank
//                     gets the same bits and reaches the decisions below on its own: no message.
//   --skip-nonfinite N  an update whose loss or gradient is NaN/Inf is skipped (no optimizer
//                     step; its samples still count as seen) and logged, at most N times in a
//                     run; with none left the run stops (exit 5), as it does by default. The
//                     skipped step's forward has updated BatchNorm's running statistics all the
//                     same (as with PyTorch's GradScaler).
//   --clip-grad-norm X  the gradient is scaled by X / (norm + 1e-6) when the norm exceeds X
//                     (PyTorch's clip_grad_norm_).
//   --log-every N     one JSON line every N updates (--step-log FILE, else rank 0's stdout).
// The epoch's gradient-norm figures ride in checkpoints, so a resumed epoch reports what an
// uninterrupted one would.
// Measuring: the norm and the loss are needed before the update, so the host waits for the
// device at every update. That costs nothing on the CPU backend, which measures always; on a
// device (separate memory) only a run with one of the three flags measures, and the others
// keep the host a step ahead of the device and leave the gradient norm out of the metrics.
#pragma once
#include "app/dist/comm.h"
#include "io/ckpt/checkpoint.h"
#include "kernels/backend.h"

#include <stdint.h>

// What a non-finite loss, gradient or parameter points to (after "...; "): a rate too high,
// or data with no variance for a model that normalises by it. %s: the training data.
#define NONFINITE_ADVICE \
    "lower --lr, or check %s (utterances constant in time leave the pooled standard deviations no variance)"

// The run's settings the controls take (its train_config_t's fields of the same names).
typedef struct {
    double clip_grad_norm;   // 0: no clipping
    int64_t skip_nonfinite;  // non-finite updates skipped before the run stops
    int64_t log_every;       // updates between JSON lines (0: none)
    const char *step_log;    // their file ("": rank 0's stdout)
    const char *data;        // the training data, for messages
} step_controls_config_t;

typedef struct {
    step_controls_config_t cfg;
    const spk_backend_t *be;
    double *dev_norm;             // one double on the backend: vec_sum_squares' output
    int measure;                  // every update's norm and loss are read before it (see above)
    int64_t skipped;              // updates skipped in this run
    const comm_t *comm;           // with own > 0: grads[0, own) are this rank's slice of a sharded head,
    int64_t own;                  // whose squares the norm sums over the ranks
    int64_t block;                // > 0: floats of a class block (the invariant mode, step_controls_shard)
    double *dev_blocks, *blocks;  // each block's sum of squares, on the backend and the host
    int64_t cap_blocks;
    // the epoch in progress (checkpointed)
    double ep_norm_sum, ep_norm_max;  // over its applied updates, before clipping
    int64_t ep_skipped;
} step_controls_t;

// The figures of one update (identical on every rank).
typedef struct {
    double loss, accuracy;  // global means over the update's samples
    double grad_norm;       // of the averaged gradient, before clipping
    double clip_scale;      // what clipping multiplied the gradient by (1: untouched)
    int skipped;            // no optimizer step was taken
} step_report_t;

void step_controls_init(step_controls_t *c, const step_controls_config_t *cfg, const spk_backend_t *be);
// The gradient's first `own` floats are this rank's slice of a sharded classifier (--head sharded):
// the norm is the whole gradient's, with every rank's slice. block > 0 (the invariant mode: the
// floats of a class block, which slices never split) sums each block's squares alone and the
// blocks' sums exactly, so the norm has the same bits on any number of ranks.
void step_controls_shard(step_controls_t *c, const comm_t *comm, int64_t own, int64_t block);
void step_controls_free(step_controls_t *c);
// After the gradient (grads, n floats on the backend) is averaged: its norm, the non-finite
// verdict (skip, or stop every rank with one line naming the epoch and step), clipping. Fills
// r->grad_norm, clip_scale and skipped; returns 1 when the optimizer should update. epoch and
// global_step (0-based, of this update) are for messages.
int step_controls_apply(step_controls_t *c, float *grads, int64_t n, step_report_t *r, int64_t epoch,
                        int64_t global_step);
// Rank 0, every --log-every updates: the update's JSON line. data_wait and seconds are this
// update's; samples its global sample count.
void step_controls_log(const step_controls_t *c, const step_report_t *r, int64_t epoch, int64_t global_step, double lr,
                       int64_t samples, double seconds, double data_wait);
// Where a resumed run's step log continues: lines after global_step go (rank 0).
void step_controls_resume_log(const step_controls_t *c, int64_t global_step);
// The epoch's figures into a checkpoint's header and back, and the start of a new epoch.
void step_controls_save(const step_controls_t *c, ckpt_meta_t *m);
void step_controls_restore(step_controls_t *c, const ckpt_meta_t *m);
void step_controls_new_epoch(step_controls_t *c);
// The mean gradient norm of the epoch's applied updates (NAN when none or not measured);
// ep_norm_max is the largest.
double step_controls_epoch_norm(const step_controls_t *c, int64_t updates);
