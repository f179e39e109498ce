// What `spkddp export` needs of a model beyond its named tensors, from its row of the registry
// (app/model/registry.h): SpeechBrain's counterpart of the encoder, and the encoder as an ONNX
// graph (--model ecapa, app/model/ecapa/ecapa_export.h); the toolkit whose names the tensors carry.
#pragma once
#include "app/model/model.h"
#include "io/export/safetensors.h"

#include <stddef.h>

typedef struct {
    const char *encoder, *classifier;  // SpeechBrain's classes ("speechbrain.lobes.models....")
    char encoder_args[1024];           // their keyword arguments, as JSON objects
    char classifier_args[256];
} model_speechbrain_t;

// 0, or -1 when the model has no SpeechBrain counterpart.
int model_speechbrain(const model_t *m, model_speechbrain_t *sb);

// The toolkit whose state-dict names the model's tensors carry, and its class of the encoder
// with the keyword arguments (a JSON object) that rebuild it.
typedef struct {
    const char *toolkit;  // "SpeechBrain", "WeSpeaker", or "spkddp" (names of its own)
    const char *model;    // NULL when not given
    char args[512];
} model_toolkit_t;
void model_toolkit(const model_t *m, model_toolkit_t *t);

// The encoder as an ONNX graph (opset 17), from host_params/host_state (current after
// model_download): input "fbank" (batch, frames, F) float32, the Kaldi fbank frames as a
// dataset holds them (the graph subtracts each utterance's mean over its frames, as the loader
// does); output "embedding" (batch, E), what `spkddp embed` computes. Batch and frames are
// dynamic axes; an ECAPA utterance needs at least 5 frames (the reflect padding of the widest
// dilated convolution). meta: n entries for the model's metadata_props. 0, or an spk_exit code
// with one sentence in err (SPK_EXIT_USAGE for a model without a graph).
int model_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
