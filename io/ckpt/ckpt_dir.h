// What a run may do with a checkpoint directory. The rules (docs/checkpoints.md):
//   - a run deletes only checkpoints it wrote itself or adopted as its own past (same run_id,
//     at or before the step it resumed from), and only ones that verified when recorded;
//   - files that do not verify are never counted towards --keep and never deleted;
//   - nothing is ever written over an existing checkpoint (ckpt_write);
//   - checkpoints newer than the one a run resumes from belong to an abandoned future: the
//     trainer refuses to run into them, or moves them aside (ckpt_dir_set_aside) when told to.
#pragma once
#include "io/ckpt/checkpoint.h"

#include <stdint.h>

typedef struct {
    char path[CKPT_PATH_MAX];
    int64_t step;  // from the name ckpt-<step>.h5
} ckpt_entry_t;

// The ckpt-<step>.h5 files of dir (temp files and other names excluded), newest first.
// Returns the count (0 for a missing directory); *out is malloc'ed.
int ckpt_dir_list(const char *dir, ckpt_entry_t **out);

// Moves every checkpoint of dir whose step is above `step` into dir/<subdir>/ (created),
// never deleting or replacing anything; they no longer take part in --resume auto. Returns the number
// moved, or -1 with a sentence in err.
int ckpt_dir_set_aside(const char *dir, int64_t step, const char *subdir, char *err, size_t cap);
// Newest checkpoint in dir that verifies: 1 and its path. 0: dir holds no checkpoint. -1: it
// holds some but none verifies (each is named in a warning); path_out is then the newest,
// so loading it reports why.
int ckpt_find_latest(const char *dir, char *path_out, size_t cap);

// Rotation: the checkpoints a run may delete, oldest first.
typedef struct {
    int keep;  // newest checkpoints to keep; 0 keeps all
    int n, cap;
    char (*path)[CKPT_PATH_MAX];
} ckpt_keeper_t;

void ckpt_keeper_init(ckpt_keeper_t *k, int keep);
// A resumed run's past: the checkpoints in dir of run `run_id` at or before `step` that
// verify (run_id 0, as in format 1 files, adopts nothing). Returns how many were adopted.
int ckpt_keeper_adopt(ckpt_keeper_t *k, const char *dir, uint64_t run_id, int64_t step);
// Records a checkpoint this run has just written, then deletes the oldest recorded ones
// beyond `keep` (a failed delete is a warning).
void ckpt_keeper_add(ckpt_keeper_t *k, const char *path);
void ckpt_keeper_free(ckpt_keeper_t *k);
