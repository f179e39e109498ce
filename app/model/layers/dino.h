// DINO self-distillation without labels (Caron et al. 2021, as the speaker toolkits train it:
// WeSpeaker's examples/voxceleb/v3/dino, 3D-Speaker's RDINO) on an encoder with an
// AAM-softmax head's interface (app/model/layers/aam_encoder.h), --loss dino:
//   - a batch holds V views of each utterance (--views): the first Vg (--global-views) global
//     crops of --frames, the others local crops of --local-frames (io/loader/loader.h);
//   - the teacher, an exponential moving average of the student (momentum cosine from --ema to 1
//     over the run), encodes the global crops, the student every crop; both through the
//     projection head (app/model/layers/dino_head.h, synchronized BatchNorm);
//   - the loss (kernels/dino.h): each of the teacher's centred, sharpened distributions against
//     the student's distribution of every other view of the same utterance; the centre follows
//     the teacher outputs' mean over the global batch (exact sums across the ranks, momentum
//     --centre-momentum), the teacher's temperature warms up linearly;
//   - the prototypes stay fixed for --freeze-last-layer epochs.
// The teacher's parameters and state live in the model's state ("ema.*", MODEL_TEACHER; model_t.teacher),
// so checkpoints, resume and broadcasts carry them; embed and export take the teacher
// (model_use_teacher). The local crops' encoder pass is made again before its backward (the
// encoder keeps one pass's activations), with the BatchNorm running statistics kept as the
// first pass left them.
#pragma once
#include "app/model/core/model_config.h"
#include "app/model/core/model_core.h"
#include "app/model/layers/dino_head.h"
#include "app/model/layers/encoder_ops.h"

#include <stdint.h>

typedef struct dino dino_t;

// NULL unless cfg->loss is "dino". Registers the head's tensors and the centre, and asks the
// model for a teacher. Call where the classifier was just registered.
dino_t *dino_create(model_t *m, const model_config_t *cfg, int64_t emb_dim);
// The head's initial values (model_ops_t.finish).
void dino_finish(dino_t *d, model_t *m);
// A training step on a batch of b->n = B V samples (utterance-major, the views of one utterance
// in a row), through the encoder `enc`: loss statistics to `scalars` (backend: [loss, 0]).
void dino_train_step(dino_t *d, model_t *m, const aam_encoder_ops_t *enc, const batch_t *b, float *scalars);
void dino_set_epoch(dino_t *d, int64_t epoch);
// Once the gradients are over the ranks: the prototypes' (app/model/layers/dino_head.h).
void dino_after_averaging(dino_t *d, model_t *m);
// The teacher's EMA after update `step` of `total`.
void dino_after_update(dino_t *d, model_t *m, int64_t step, int64_t total);
void dino_free(dino_t *d, const model_t *m);
