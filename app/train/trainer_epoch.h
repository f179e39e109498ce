// An epoch's end in a training run: the replica and finiteness checks, validation (loss and
// accuracy, or EER and minDCF of held-out trials), the epoch's line and its metrics (--metrics).
#pragma once
#include "app/train/trainer_state.h"

// After an epoch's last step: checks, validation, the epoch line and metrics; then the position
// moves to the next epoch. Collective; ends the job when the replicas differ or a parameter is
// not finite.
void trainer_end_epoch(trainer_t *t);

// max |theta_r - theta_0| over ranks and parameters; in the invariant mode over the running
// statistics too, which come out the same on every rank without a broadcast. Needs the host
// copies downloaded. Collective.
double trainer_replica_divergence(trainer_t *t);

// The invariant mode's loss sum: the exact sum of every sample's loss over all ranks. Collective.
double trainer_global_loss(const trainer_t *t, step_stats_t *st);
