// Checkpoints: one HDF5 file per save. The file is built in memory, checksummed, and written
// by rank 0 through io/common/atomic_file.h (temp file, fsync, rename without replacing,
// directory fsync): a checkpoint either exists whole or not at all, and a failed write (a full
// disk) leaves the directory as it was. Contents (io/ckpt/ckpt_format.h): parameters,
// non-trainable state (BatchNorm running statistics), optimizer slots, the training position,
// metric accumulators of the epoch in progress, the full config, format/version attributes and
// a checksum over every dataset and attribute (io/ckpt/ckpt_checksum.h). Format 1 files
// (written before the checksum covered everything) still load; their own, narrower checksum is
// verified. Which checkpoints a run may delete: io/ckpt/ckpt_dir.h (the trainer keeps its own
// record, app/train/ckpt_policy.h).
#pragma once
#include "io/ckpt/ckpt_format.h"
#include "kernels/base/params.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

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
