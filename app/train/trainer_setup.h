// What a training run opens before its first step and frees after its last: the device, the
// data (and held-out set), the model with identical replicas, the optimizer and gradient
// averaging, the sampler, loaders and schedule, and where it starts (--resume, --init-from).
#pragma once
#include "app/train/trainer_state.h"

// A run ready for its first step (or its resumed one): every rank, collective; a problem with the
// data, the flags or the checkpoint ends the job with its sentence. config_text and config_yaml as
// trainer_run's (app/train/trainer.h).
trainer_t *trainer_setup(const comm_t *comm, const train_config_t *cfg, const char *config_text,
                         const char *config_yaml);

// Frees what trainer_setup opened, the device last.
void trainer_free(trainer_t *t);
