// Checkpoints: one HDF5 file per save. The file is built in memory, checksummed, and written
// by rank 0 through io/atomic_file.h (temp file, fsync, rename without replacing, directory
// fsync): a checkpoint either exists whole or not at all, and a failed write (a full disk)
// leaves the directory as it was. Contents: parameters, non-trainable state (BatchNorm
// running statistics), optimizer slots, the training position, metric accumulators of the
// epoch in progress, the full config, format/version attributes and a checksum over every
// dataset and attribute (io/ckpt_checksum.h). Format 1 files (written before the checksum
// covered everything) still load; their own, narrower checksum is verified.
// Which checkpoints a run may delete: io/ckpt_dir.h (the trainer keeps its own record,
// app/train/ckpt_policy.h).
#pragma once
#include "io/params.h"

#include <hdf5.h>
#include <stddef.h>
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

// Rank 0 only. Writes dir/ckpt-<global_step>.h5 (the path in path_out), never over an
// existing file. A failure leaves the directory as it was, prints one line and ends the job:
// exit 1 for a system failure (full disk, read-only directory), 4 when the name is taken.
void ckpt_write(const char *dir, const ckpt_meta_t *meta, const ckpt_tensors_t *t, char *path_out, size_t cap);
// The same file at exactly `path`, replacing what is there (spkddp average --out); failures
// end the job as ckpt_write's do.
void ckpt_write_path(const char *path, const ckpt_meta_t *meta, const ckpt_tensors_t *t);

// Reads and verifies a checkpoint into the caller's buffers (rank 0 only). Returns 0, or
// an spk_exit code with a one-line message naming the file and field in `err`.
int ckpt_load(const char *path, const char *expect_model, ckpt_meta_t *meta, const ckpt_tensors_t *t, char *err,
              size_t errcap);
// Reads and checks the metadata and layout (for `spkddp inspect`, and to build a model before
// ckpt_load); format 2 files are checksummed first. 0 or an spk_exit code.
int ckpt_peek(const char *path, ckpt_meta_t *meta, param_table_t *params, param_table_t *state, int *opt_slots,
              char *err, size_t errcap);
// Loads path into buffers of its own layout: 0 when it is a complete checkpoint with a valid
// checksum, else an spk_exit code and the reason in err. meta may be NULL.
int ckpt_verify(const char *path, ckpt_meta_t *meta, char *err, size_t errcap);
// ckpt_verify of a file already open (an HDF5 file id; what the fuzzer drives). f stays open.
int ckpt_verify_file(hid_t f, const char *path, ckpt_meta_t *meta, char *err, size_t errcap);
// A checkpoint read whole into buffers of its own layout, for the tools that need no model
// (diff, average, export, --init-from). Reading another run's weights never makes its
// checkpoints this run's to rotate (only the trainer's resume does: app/train/ckpt_policy.h).
typedef struct {
    ckpt_meta_t *meta;
    param_table_t params, state;
    int slots;
    float *param_data;  // (params.total,)
    float *state_data;  // (state.total,)
    float *opt_data;    // (slots, params.total)
} ckpt_image_t;
// 0, or an spk_exit code with a one-line message naming the file and field in err.
int ckpt_image_load(const char *path, ckpt_image_t *img, char *err, size_t errcap);
void ckpt_image_free(ckpt_image_t *img);
// A fresh run identifier (never 0).
uint64_t ckpt_new_run_id(void);
// The value of `key` in a checkpoint's config (key=value lines): 0 and the value in out
// (truncated to cap), or -1 when the key is absent.
int ckpt_config_value(const char *config, const char *key, char *out, size_t cap);
// Newest checkpoint in dir that verifies: 1 and its path. 0: dir holds no checkpoint. -1: it
// holds some but none verifies (each is named in a warning); path_out is then the newest,
// so loading it reports why. (io/ckpt_dir.c, with the rest of the directory logic.)
int ckpt_find_latest(const char *dir, char *path_out, size_t cap);
