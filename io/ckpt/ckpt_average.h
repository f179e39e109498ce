// Checkpoint averaging (WeSpeaker's model averaging, `spkddp average`): the element-wise mean
// of the parameters and of the BatchNorm running statistics of checkpoints of one model.
#pragma once
#include <stddef.h>

// Reads the n checkpoints one at a time, accumulates in double and writes the mean, rounded
// once to float, to `out` (replacing it). They must hold the same model: name, tensor layout,
// feature_dim and classes. The result carries the newest input's metadata (position, config)
// under a fresh run id, and no optimizer state: embed or export it, or start a run from it
// with --init-from (--resume refuses it). 0, or an spk_exit code with one sentence in err.
int ckpt_average(const char *const *paths, int n, const char *out, char *err, size_t errcap);
