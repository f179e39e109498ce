// The training loop: data-parallel SGD over the sampler's shards, gradient averaging,
// per-epoch metrics and replica check, checkpoints and exact resume.
#pragma once
#include "app/comm.h"
#include "app/config.h"

// Runs `spkddp train`; returns the process exit code (SPK_EXIT_OK when finished or stopped
// at --max-steps).
int trainer_run(const comm_t *comm, train_config_t *cfg);
