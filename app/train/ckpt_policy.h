// A training run's checkpoint directory: what the run may write there and what it may delete
// (docs/checkpoints.md). Checked at the start, so a run never learns at its first checkpoint
// that it cannot write one:
//   - --ckpt-dir must exist (it is created) and take new files;
//   - a fresh run refuses a directory that holds checkpoints or a FINISHED marker (its own
//     checkpoints would mix with them, and --resume auto would continue the newest);
//   - a resumed run refuses a directory holding checkpoints newer than its step (the future
//     it abandons), or with --set-aside-newer moves them into DIR/abandoned-after-<step>/;
//   - rotation (--keep) deletes only the run's own checkpoints (io/ckpt/ckpt_dir.h's keeper): those
//     it writes, and its past of the same run id at or before the step it resumed from.
// Rank 0 owns the files; the collective calls say so.
#pragma once
#include "app/dist/comm.h"
#include "io/ckpt/checkpoint.h"
#include "io/ckpt/ckpt_dir.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *dir;  // --ckpt-dir ("": no checkpoints)
    uint64_t run_id;  // stamped into every checkpoint (rank 0)
    ckpt_keeper_t keeper;
} ckpt_policy_t;

// Collective, before the data is opened: the directory exists and takes files, or every
// rank stops with one line naming it and the reason (exit 2).
void ckpt_policy_check_dir(const comm_t *comm, const char *dir);
// Collective, once the start is known: dir is --ckpt-dir (kept, not copied), keep --keep,
// set_aside_newer --set-aside-newer; resumed is the checkpoint's header, NULL for a fresh run.
// Refuses (exit 4) or sets aside as described above, then adopts the run's past.
void ckpt_policy_start(ckpt_policy_t *p, const comm_t *comm, const char *dir, int64_t keep, int set_aside_newer,
                       const ckpt_meta_t *resumed);
// Rank 0: writes dir/ckpt-<step>.h5 (meta->run_id is set) and deletes the run's oldest
// checkpoints beyond --keep.
void ckpt_policy_save(ckpt_policy_t *p, ckpt_meta_t *meta, const ckpt_tensors_t *t, char *path, size_t cap);
// Rank 0: dir/FINISHED, so job scripts do not requeue a finished run.
void ckpt_policy_mark_finished(const ckpt_policy_t *p, int64_t step);
void ckpt_policy_free(ckpt_policy_t *p);
