// The metadata spkddp writes into the files it exports (safetensors __metadata__, ONNX
// metadata_props), all strings: enough to rebuild the model from the file alone.
//   spkddp_model   linear | ecapa | ecapa-av | resnet18 ... resnet293
//   spkddp_config  the training flags as key=value lines (a checkpoint's config attribute)
//   feature_dim, num_classes, visual_dim, visual_ratio, global_step   decimal integers
// tools/speechbrain_to_safetensors.py writes the same keys for a SpeechBrain model.
#pragma once
#include "io/ckpt/checkpoint.h"
#include "io/export/safetensors.h"

#define SPKDDP_META_MAX 24

typedef struct {
    st_meta_t kv[SPKDDP_META_MAX];
    int n;
    char numbers[5][24];
} spkddp_meta_t;

// The keys above from a checkpoint's header; the pointers into meta must outlive out.
void spkddp_meta_fill(spkddp_meta_t *out, const ckpt_meta_t *meta);
// One more entry (the strings must outlive out).
void spkddp_meta_add(spkddp_meta_t *out, const char *key, const char *value);
// The keys above from a safetensors file into meta (model, config, sizes, global_step).
// 0, or SPK_EXIT_CKPT with one sentence naming the file and key in err.
int spkddp_meta_read(const safetensors_t *st, const char *path, ckpt_meta_t *meta, char *err, size_t cap);
