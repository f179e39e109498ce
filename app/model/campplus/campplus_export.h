// CAM++ in its toolkit's terms: the keyword arguments of 3D-Speaker's class that rebuild it, and
// the encoder as an ONNX graph (3D-Speaker's forward: (B, T, F) fbank -> (B, E) embeddings).
#pragma once
#include "app/model/core/model_core.h"
#include "io/export/safetensors.h"

#include <stddef.h>

// speakerlab.models.campplus.DTDNN.CAMPPlus's keyword arguments as a JSON object (0), or -1 when
// the model has no counterpart there.
int campplus_speakerlab_args(const model_t *m, char *args, size_t cap);
// The encoder as an ONNX graph (app/model/registry.h's onnx_write).
int campplus_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
