// The training configuration: every `spkddp train` flag, its default and the cross-field
// checks (the flags' ranges and help are app/cli/train_options.c). The whole config is
// stored in every checkpoint. The modules it drives get only their part of it: the model
// (model_config_t), the optimizer (optimizer_config_t), the learning-rate schedule, the
// loader's augmentation (augment_config_t).
#pragma once

#include "app/model/core/model_config.h"
#include "app/train/lr_schedule.h"
#include "app/train/optimizer.h"
#include "io/augment/augment_config.h"

#include <stdint.h>

#define TRAIN_STR_MAX 512  // every string field (paths, names)

typedef struct {
    // data
    char data[TRAIN_STR_MAX];
    char val_data[TRAIN_STR_MAX];
    char val_trials[TRAIN_STR_MAX];  // with it, --val-data is a verification set (EER, minDCF)
    int drop_last;
    int no_shuffle;
    char device[TRAIN_STR_MAX];  // cpu | cuda | auto | cpu-staged
    int tf32;                    // the older --tf32: --precision tf32 (train_config_model)
    // --model, --frames and the model's hyperparameters, as the model takes them; its
    // seed is --seed (train_config_model fills it in)
    model_config_t model;
    // optimisation
    int64_t epochs;
    int64_t batch;                  // per-rank batch of one forward/backward (a micro-batch with --grad-accum)
    int64_t global_batch;           // alternative: per-rank = global / (ranks x grad_accum); after finalize,
                                    // the samples of one optimizer update
    char optimizer[TRAIN_STR_MAX];  // sgd | adam | adamw
    double lr, momentum, weight_decay;
    int nesterov;
    char lr_schedule[TRAIN_STR_MAX];  // constant | warmup-exp | cosine | cyclic
    int64_t warmup_steps;
    double lr_decay;      // warmup-exp: factor per epoch
    double lr_min;        // cosine/cyclic floor
    int64_t cycle_steps;  // cyclic: half-cycle length in steps
    int64_t seed;
    // run control
    char ckpt_dir[TRAIN_STR_MAX];
    int64_t ckpt_every;  // steps between checkpoints (0: only at epoch ends)
    int64_t keep;        // checkpoints kept
    char metrics[TRAIN_STR_MAX];
    char resume[TRAIN_STR_MAX];        // "" | auto | PATH
    char resume_allow[TRAIN_STR_MAX];  // what a resume may change: comma-separated names (app/train/resume.h)
    int set_aside_newer;  // resuming an older checkpoint: move the directory's newer ones aside (ckpt_policy.h)
    int64_t max_steps;    // stop after this global step (0: no limit)
    int64_t progress;     // seconds between progress lines (0: per epoch only)
    // on-the-fly augmentation of the training samples (io/augment/augment.h)
    augment_config_t aug;
    // step controls (app/train/step_controls.h)
    double clip_grad_norm;         // 0: no clipping
    int64_t skip_nonfinite;        // non-finite steps skipped before the run stops
    int64_t grad_accum;            // micro-batches per update (global batch = ranks x batch x grad_accum)
    int64_t log_every;             // updates between per-step JSON lines (0: none)
    char step_log[TRAIN_STR_MAX];  // their file ("": rank 0's stdout)
    // start from another run's weights (app/train/init_from.h)
    char init_from[TRAIN_STR_MAX];  // "" | a checkpoint or safetensors file
    char init_head[TRAIN_STR_MAX];  // keep | drop: the classifier from the file, or fresh
    char head[TRAIN_STR_MAX];       // replicated | sharded: the classifier whole on every rank, or
                                    // its classes split across the ranks (app/dist/head_comm.h)
    // metric learning (app/model/layers/contrastive_head.h; the loss itself is model.loss)
    char negatives[TRAIN_STR_MAX];  // global | local: the contrastive batch is the global batch or each rank's
    char sampler[TRAIN_STR_MAX];    // plain | balanced: speaker-balanced global batches (io/loader/sampler.h)
    int64_t views;                  // crops of each utterance in a batch (io/loader/loader.h: loader_set_views)
    int64_t local_frames;        // --loss dino: the views after the global ones are crops of this length (0: --frames)
    int picture_augment;         // training pictures through picture augmentation (loader_set_picture_augment)
    char labels[TRAIN_STR_MAX];  // speaker | utterance: what the contrastive loss calls the same
} train_config_t;

train_config_t train_config_defaults(void);
// Cross-field validation that needs the world size (batch vs global batch).
void train_config_finalize(train_config_t *c, int world);
// The parts of the config each module needs (the model's: c->model with the seed).
model_config_t train_config_model(const train_config_t *c);
optimizer_config_t train_config_optimizer(const train_config_t *c);
lr_schedule_t train_config_lr_schedule(const train_config_t *c, int64_t steps_per_epoch);
