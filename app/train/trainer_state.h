// The state of a training run, shared by the trainer's files, private to app/train:
// trainer.c (the steps and the loop), trainer_setup.c (what a run opens and frees),
// trainer_ckpt.c (checkpoints, resume), trainer_epoch.c (an epoch's end: checks, validation,
// metrics).
#pragma once
#include "app/dist/comm.h"
#include "app/dist/grad_sync.h"
#include "app/dist/head_comm.h"
#include "app/eval/scoring.h"
#include "app/model/model.h"
#include "app/train/ckpt_policy.h"
#include "app/train/lr_schedule.h"
#include "app/train/optimizer.h"
#include "app/train/progress.h"
#include "app/train/sharded_head.h"
#include "app/train/step_controls.h"
#include "app/train/step_watchdog.h"
#include "app/train/train_config.h"
#include "io/dataset/dataset.h"
#include "io/loader/loader.h"
#include "io/loader/sampler.h"
#include "kernels/base/stop_signals.h"

typedef struct trainer {
    const comm_t *comm;
    const train_config_t *cfg;
    const char *config_text;  // the flags as key=value lines, stored in checkpoints
    const char *config_yaml;  // the same as YAML for ckpt_dir/config.yaml (NULL: written, or none)
    const spk_backend_t *be;  // where the model computes (--device)
    dataset_t data, val;
    uint64_t data_fingerprint;  // of the training data (checkpoints record it)
    int has_val;                // held-out set: loss/accuracy (same speakers) or verification (trials)
    trials_t trials;            // verification trials over the held-out utterances (n = 0: none)
    sampler_t sampler;
    loader_t loader, val_loader;
    augment_t *aug;  // training samples' augmentation (NULL: none)
    model_t *model;
    optimizer_t opt;
    head_comm_impl_t head_comm;  // collectives over the global batch: a sharded head's, contrastive losses'
    int sliced;                  // ... over more than one rank: checkpoints gather it (shard)
    sharded_head_t shard;
    grad_sync_t grad_sync;
    lr_schedule_t sched;
    step_controls_t controls;  // gradient norm, clipping, skips, step log
    int64_t *idx;              // (batch,) a micro-batch's sample indices
    int64_t steps;             // optimizer updates per epoch
    int64_t micro_steps;       // micro-batches per epoch (steps x --grad-accum, the last update may have fewer)
    int64_t prefetched;        // micro-batches of this epoch handed to the loader
    int64_t unaccounted;       // updates queued whose statistics were not accounted for yet
    step_stats_t partial;      // this rank's statistics of the oldest such update's micro-batches read so far
    double last_update[3];     // the last accounted update's global loss sum, correct and count
    float *scratch;            // (max(num_params, num_state),) divergence check
    // position
    int64_t epoch;             // epoch in progress
    int64_t samples_in_epoch;  // global samples done in it
    int64_t step_in_epoch;
    int64_t global_step;
    // metrics of the epoch in progress (global, identical on every rank)
    double ep_loss_sum, ep_seconds;
    double ep_data_wait;  // seconds this rank waited for batches (timing; not in checkpoints)
    int64_t ep_correct, ep_count;
    double lr;
    int stop_signal;  // a signal every rank agreed to stop on (0: none)
    int started;      // a step was taken (a stop before the first one has nothing new to save)
    progress_t progress;
    ckpt_policy_t ckpt;  // what this run may write and delete in --ckpt-dir
} trainer_t;

// The ranks have just met (an allreduce, a collective read, a barrier): a stop in progress
// gets a fresh grace period, the watchdog's clock starts again.
static inline void trainer_met(void) {
    stop_signals_progress();
    step_watchdog_met();
}
