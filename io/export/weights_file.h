// Named float tensors of an spkddp checkpoint or of a safetensors file (told apart by their
// first bytes): what `train --init-from` and `embed --ckpt X.safetensors` read. A checkpoint
// gives its parameters and state under their names; a safetensors file its F32 tensors (its
// I64 counters, such as BatchNorm's num_batches_tracked, are listed with data NULL) and its
// metadata.
#pragma once
#include "io/ckpt/checkpoint.h"
#include "io/export/safetensors.h"

typedef struct {
    char name[ST_NAME_MAX];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    const float *data;  // (numel,), or NULL for a tensor that is not float32
} weight_t;

typedef struct {
    int is_checkpoint;
    weight_t *w;  // (count,)
    int count;
    ckpt_image_t ckpt;  // a checkpoint's contents (is_checkpoint)
    safetensors_t st;   // a safetensors file's header and metadata (!is_checkpoint)
    float *floats;      // safetensors: the F32 tensors, copied out aligned
} weights_file_t;

// 0, or an spk_exit code with one sentence naming the file in err.
int weights_file_read(const char *path, weights_file_t *wf, char *err, size_t cap);
const weight_t *weights_file_find(const weights_file_t *wf, const char *name);
void weights_file_free(weights_file_t *wf);
