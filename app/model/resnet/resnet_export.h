// WeSpeaker's ResNets in their toolkit's terms: the keyword arguments of wespeaker.models.resnet's
// ResNet<depth>(feat_dim, embed_dim, pooling_func, two_emb_layer) that rebuild the encoder, with
// m_channels (the ResNet class's argument, 32 in those functions) beside them, as a JSON object.
#pragma once
#include "app/model/core/model_core.h"
#include "io/export/safetensors.h"

#include <stddef.h>

int resnet_wespeaker_args(const model_t *m, char *args, size_t cap);

// The encoder as an ONNX graph (opset 17) that mirrors WeSpeaker's ResNet.forward (NCHW, TSTP
// with its 1e-7) node for node (app/model/model_export.h says what goes in and out). 0, or an
// spk_exit code with one sentence in err.
int resnet_onnx_write(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
