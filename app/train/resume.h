// What a resumed run must share with the checkpoint it continues: everything that decides
// the trajectory -- the seed, the training data, the global batch, the optimizer and the
// flags of its schedule, loss and augmentation (the model's shape is the checkpoint's
// layout, checked when it is loaded). A difference is refused with one sentence naming
// each flag, unless --resume-allow lists it (docs/checkpoints.md, "Resuming").
#pragma once
#include "app/train/train_config.h"
#include "io/ckpt/checkpoint.h"

#include <stddef.h>
#include <stdint.h>

// Whether the checkpoint's optimizer state carries over: the same optimizer with the same
// number of slots (momentum turned on or off changes them).
int resume_keeps_optimizer(const ckpt_meta_t *m, int ckpt_slots, const train_config_t *c, int run_slots);

// The checkpoint's header against this run: c and config_text (its flags as key=value
// lines), fingerprint the dataset_fingerprint of its training data. Returns 0, or
// SPK_EXIT_CKPT with one sentence in err. Allowed changes are listed in note (may be "").
int resume_check(const ckpt_meta_t *m, const char *path, const train_config_t *c, const char *config_text,
                 uint64_t fingerprint, char *err, size_t cap, char *note, size_t note_cap);
