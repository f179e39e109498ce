// The model in a trained file, built on every rank: an spkddp checkpoint (its stored config
// builds the model), or a safetensors file written by `spkddp export` or
// tools/speechbrain_to_safetensors.py (its metadata carries the same config; a file without
// "classifier.weight" gets the model's fresh classifier). What embed and export start from. A
// checkpoint of a run with a teacher (--loss dino) gives the teacher.
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"
#include "io/ckpt/checkpoint.h"

// Collective. precision (fp32|tf32|bf16) is the model's math, or NULL for the one the file's
// config stored; conv_algorithm (auto|direct|winograd) the CPU's 2-D convolutions, this run's
// whatever the training's was (NULL: auto). meta (may be NULL) receives the file's header: a
// checkpoint's, or for a safetensors file the model, config, data sizes and global step of its
// metadata. A file that cannot give a model ends every rank with one line (exit 4).
model_t *model_file_load(const comm_t *comm, const char *path, const spk_backend_t *be, const char *precision,
                         const char *conv_algorithm, ckpt_meta_t *meta);
