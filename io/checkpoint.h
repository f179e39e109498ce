// Checkpoints: one HDF5 file per save, written by rank 0 as a hidden temp file, fsynced,
// renamed into place, and the directory fsynced -- a checkpoint either exists whole or not
// at all. Contents: parameters, non-trainable state (BatchNorm running statistics),
// optimizer slots, the training position, metric accumulators of the epoch in progress, the
// full config, format/version attributes and an FNV-1a checksum over all of it.
#pragma once
#include "io/params.h"

#include <stddef.h>

#include <stdint.h>

#define CKPT_FORMAT "checkpoint"
#define CKPT_VERSION 1
#define CKPT_CONFIG_MAX 16384

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
    int64_t feature_dim;       // F of the training data
    int64_t num_classes;       // speakers of the training data
    int64_t visual_dim;        // Fv of the visual stream (0: none)
    int64_t visual_ratio;      // audio frames per visual frame
    // metrics of the epoch in progress, so a resumed epoch reports what an uninterrupted one would
    double ep_loss_sum;
    int64_t ep_correct, ep_count;
    double ep_seconds;
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

// Rank 0 only. Returns the path written in `path_out`. Removes all but the newest `keep`.
void ckpt_save(const char *dir, const ckpt_meta_t *meta, const ckpt_tensors_t *t, int keep,
               char *path_out, size_t cap);
// Reads and verifies a checkpoint into the caller's buffers (rank 0 only). Returns 0, or
// an spk_exit code with a one-line message naming the file and field in `err`.
int ckpt_load(const char *path, const char *expect_model, ckpt_meta_t *meta, const ckpt_tensors_t *t,
              char *err, size_t errcap);
// Newest complete, checksum-valid checkpoint in dir: 1 and its path, or 0 when none.
int ckpt_find_latest(const char *dir, char *path_out, size_t cap);
// Reads only the metadata and layout (for `spkddp inspect`); 0 or an spk_exit code.
int ckpt_peek(const char *path, ckpt_meta_t *meta, param_table_t *params, param_table_t *state,
              int *opt_slots, char *err, size_t errcap);
