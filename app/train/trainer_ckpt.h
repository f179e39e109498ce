// A training run's checkpoints: what it writes (collective; rank 0 writes, a sliced head gathered
// to it) and how --resume loads one into every rank, checked against the run (app/train/resume.h).
#pragma once
#include "app/train/trainer_state.h"
#include "io/ckpt/checkpoint.h"

// Writes the run's position, model and optimizer through its checkpoint policy (nothing without
// --ckpt-dir). Collective: every rank leaves once the file is in place.
void trainer_save_checkpoint(trainer_t *t);

// Loads --resume into every rank (rank 0 reads, everyone receives). Returns 1 and the
// checkpoint's header in m if resumed, 0 when there is nothing to resume.
int trainer_resume(trainer_t *t, ckpt_meta_t *m);
