// `train --init-from FILE`: a run that starts from another run's weights -- an spkddp
// checkpoint, or a safetensors file with SpeechBrain's names (spkddp export,
// tools/speechbrain_to_safetensors.py) -- with a fresh optimizer, schedule and position.
// Tensors are matched by name and must have this model's shapes; every tensor of the model
// comes from the file, and every tensor of the file finds a place, except BatchNorm's
// num_batches_tracked counters (spkddp keeps none) and, with --init-head drop, the
// classifier ("classifier.*", the AAM-softmax weights), which then keeps its fresh
// initialisation for a new speaker set.
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"
#include "io/export/weights_file.h"

#include <stddef.h>

// Copies wf's tensors into m's host buffers (m->host_params, m->host_state). 0, or an
// spk_exit code with one sentence naming `path` and the tensor in err.
int init_from_copy(model_t *m, const weights_file_t *wf, const char *path, int keep_head, char *err, size_t cap);
// Collective: rank 0 reads `path` and copies, every rank receives the weights, m is uploaded.
// A bad file ends every rank with its message (exit 4).
void init_from_apply(const comm_t *comm, model_t *m, const char *path, int keep_head);
// The trainer's start from --init-from FILE --init-head keep|drop: init_from_apply and one
// line saying what was taken.
void init_from_start(const comm_t *comm, model_t *m, const char *path, const char *head);
