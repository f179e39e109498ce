// The model zoo's registry: one row per --model name, naming what the rest of spkddp needs of
// a model beyond its model_ops_t. Adding an encoder is a folder app/model/<family>/ with its
// builder and one row in app/model/registry.c; model_create, the option tables, `spkddp
// bench` and `spkddp export` read the table and change with it.
#pragma once
#include "app/model/core/model_core.h"
#include "io/export/safetensors.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;  // --model NAME
    // Fills m (already holding the data's sizes, the backend, the precision and the mode; see
    // model_create): registers the tensors, sets ops, input, emb_dim and min_batch, allocates
    // the buffers (model_alloc_buffers) and initialises host_params/host_state from cfg->seed.
    void (*build)(model_t *m, const model_config_t *cfg, const model_data_t *data);
    int visual;  // the model needs a dataset with a /visual stream
    // Option defaults: the training crop in frames when --frames is 0 (0: whole utterances,
    // and --frames does not apply); the width (--channels) and the embedding size (--emb-dim)
    // when they are 0 (0 here: the model has none).
    int64_t frames, channels, emb_dim;
    // Forward FLOP per sample (2 x multiply-adds) at cfg's width and crop, for F features (NULL:
    // not counted; `spkddp bench` reports GFLOP/s with it).
    double (*forward_flop)(const model_config_t *cfg, int64_t feat);
    // The toolkit whose state-dict names the tensors carry ("SpeechBrain", "WeSpeaker"; NULL:
    // spkddp's own), and its class of the encoder with the keyword arguments that rebuild it
    // (export metadata: "<toolkit>_model", "<toolkit>_model_args"; NULL: not given).
    const char *toolkit, *toolkit_model;
    int (*toolkit_args)(const model_t *m, char *args, size_t cap);
    // Export (`spkddp export`, app/model/model_export.h; NULL: none). SpeechBrain's classes of
    // the same encoder and its classifier, and their keyword arguments as JSON objects (0, or
    // -1 when m has no counterpart).
    const char *speechbrain_encoder, *speechbrain_classifier;
    int (*speechbrain_args)(const model_t *m, char *encoder, size_t encoder_cap, char *classifier,
                            size_t classifier_cap);
    // The encoder as an ONNX graph (0, or an spk_exit code with one sentence in err).
    int (*onnx_write)(const model_t *m, const char *path, const st_meta_t *meta, int n, char *err, size_t cap);
} model_family_t;

// The row of --model `name`; NULL when there is none.
const model_family_t *model_family_find(const char *name);
// cfg with the model's own width and embedding size where cfg leaves them 0 (model_create builds
// from it; anything else that reads them, such as a FLOP count, should too).
model_config_t model_config_resolve(const model_config_t *cfg);
// The row of a built model.
const model_family_t *model_family_of(const model_t *m);
// Every name, "a|b|c" in table order, for the option tables' --model; _audio: only the models
// that need no visual stream.
const char *model_family_choices(void);
const char *model_family_choices_audio(void);
// The names of the models with an ONNX graph, "a, b" (for the message of a model without one).
const char *model_family_onnx_names(void);
