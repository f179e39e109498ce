// The training loop: data-parallel SGD over the sampler's shards, gradient averaging,
// per-epoch metrics and replica check, checkpoints and exact resume.
#pragma once
#include "app/dist/comm.h"
#include "app/train/train_config.h"

// Runs `spkddp train` with a finalized config (train_config_finalize); config_text is the
// same config as key=value lines, stored in checkpoints, and config_yaml (may be NULL) as a
// YAML document, written to ckpt_dir/config.yaml with the first checkpoint. Returns the process
// exit code (SPK_EXIT_OK when finished or stopped at --max-steps).
int trainer_run(const comm_t *comm, const train_config_t *cfg, const char *config_text, const char *config_yaml);
