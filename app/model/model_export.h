// What `spkddp export` needs of a model beyond its named tensors (app/model/ecapa_export.c):
// SpeechBrain's constructor arguments for the same encoder, and the encoder as an ONNX graph.
// Both cover --model ecapa, whose tensors already carry SpeechBrain's state-dict names.
#pragma once
#include "app/model/model.h"
#include "io/export/safetensors.h"

#include <stddef.h>

// SpeechBrain's keyword arguments, as JSON objects, for an `ecapa` model:
//   encoder:    speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN(**args)
//               {"input_size": 80, "channels": [512, 512, 512, 512, 1536], ...}
//   classifier: speechbrain.lobes.models.ECAPA_TDNN.Classifier(**args)
// 0, or -1 when the model has no SpeechBrain counterpart (linear, ecapa-av).
int model_speechbrain_args(const model_t *m, char *encoder, char *classifier, size_t cap);

// The encoder of an `ecapa` model as an ONNX graph (opset 17), from host_params/host_state
// (current after model_download): input "fbank" (batch, frames, F) float32, the Kaldi fbank
// frames as a dataset holds them (the graph subtracts each utterance's mean over its frames,
// as the loader does); output "embedding" (batch, E), what `spkddp embed` computes. Batch and
// frames are dynamic axes; an utterance needs at least 5 frames (the reflect padding of the
// widest dilated convolution). meta: n entries for the model's metadata_props.
// 0, or an spk_exit code with one sentence in err.
int model_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
