// The checkpoint format's names, limits and records: what a checkpoint file holds
// (ckpt_meta_t, ckpt_tensors_t) and the version attributes, shared by the reader and writer
// (io/ckpt/checkpoint.h) and the checksums (io/ckpt/ckpt_checksum.h), neither of which
// includes the other.
#pragma once
#include "kernels/base/params.h"

#include <stdint.h>

#define CKPT_FORMAT         "checkpoint"
#define CKPT_VERSION        2  // what ckpt_write writes
#define CKPT_VERSION_OLDEST 1  // the oldest format still read
#define CKPT_CONFIG_MAX     16384
#define CKPT_MAX_SLOTS      8  // optimizer buffers per parameter
#define CKPT_PATH_MAX       4200

typedef struct {
    char model[64];
    char optimizer[32];
    int64_t epoch;             // epoch in progress (0-based)
    int64_t samples_in_epoch;  // global samples of that epoch already trained on
    int64_t step_in_epoch;     // steps of that epoch done (for humans; samples_in_epoch rules)
    int64_t global_step;       // optimizer steps taken
    int64_t opt_step;          // optimizer's own step counter (Adam bias correction)
    int64_t world_size;        // ranks of the run that wrote it
    int64_t seed;
    int64_t feature_dim;   // F of the training data
    int64_t num_classes;   // speakers of the training data
    int64_t visual_dim;    // Fv of the visual stream (0: none)
    int64_t visual_ratio;  // audio frames per visual frame
    // metrics of the epoch in progress, so a resumed epoch reports what an uninterrupted one would
    double ep_loss_sum;
    int64_t ep_correct, ep_count;
    double ep_seconds;
    double ep_grad_norm_sum, ep_grad_norm_max;  // over the epoch's applied updates (optional
    int64_t ep_skipped;                         // attributes: 0 when absent); updates skipped
    // Format 2 (0 = not recorded, and always 0 when read from format 1):
    uint64_t run_id;               // the training run, the same across its resumes (ckpt_new_run_id)
    int64_t global_batch;          // samples per optimizer step
    uint64_t data_fingerprint;     // dataset_fingerprint() of the training data
    int64_t version;               // format of the file read (ckpt_load/ckpt_peek fill it)
    char config[CKPT_CONFIG_MAX];  // key=value lines
} ckpt_meta_t;

// What a checkpoint holds besides its metadata. Buffers belong to the caller.
typedef struct {
    const param_table_t *params;  // layout of params
    float *param_data;            // (params->total,)
    const param_table_t *state;   // layout of state (may have count 0)
    float *state_data;            // (state->total,)
    int opt_slots;                // optimizer buffers, each params->total floats
    float *opt_data;              // (opt_slots, params->total)
} ckpt_tensors_t;
