// ECAPA-TDNN in other toolkits' terms (app/model/ecapa/ecapa_export.c): the export columns of
// the `ecapa` row of app/model/registry.c, whose tensors already carry SpeechBrain's
// state-dict names.
#pragma once
#include "app/model/core/model_core.h"
#include "io/export/safetensors.h"

#include <stddef.h>

// SpeechBrain's keyword arguments, as JSON objects:
//   encoder:    speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN(**args)
//               {"input_size": 80, "channels": [512, 512, 512, 512, 1536], ...}
//   classifier: speechbrain.lobes.models.ECAPA_TDNN.Classifier(**args)
// 0, or -1 for a model with a visual branch (no SpeechBrain counterpart).
int ecapa_speechbrain_args(const model_t *m, char *encoder, size_t encoder_cap, char *classifier,
                           size_t classifier_cap);

// The encoder as an ONNX graph (opset 17) that mirrors SpeechBrain's ECAPA_TDNN.forward node for
// node (app/model/model_export.h says what goes in and out). 0, or an spk_exit code with one
// sentence in err.
int ecapa_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
