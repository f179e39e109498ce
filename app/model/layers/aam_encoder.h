// A speaker encoder trained through an AAM-softmax head, as a model_t: what every encoder
// family shares (app/model/layers/aam_encoder.c). The head's classifier (classifier.weight,
// SpeechBrain's and WeSpeaker's projection alike: (S, E), xavier-uniform), the margin schedule,
// staging a batch, the loss and its statistics, and the train, eval and embed steps. A
// metric-learning loss over the global batch (app/model/layers/contrastive_head.h) may join the
// AAM-softmax or replace it (--loss); the classifier stays in the table either way. A family
// provides its encoder as aam_encoder_ops_t and keeps an aam_encoder_t as the FIRST member of
// the struct its builder puts in m->impl.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/layers/encoder_ops.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const aam_encoder_ops_t *enc;
    int64_t cls_w;                     // classifier.weight (S, E)
    int64_t emb;                       // E
    int visual;                        // batches carry a visual stream (vratio audio frames per frame)
    int64_t vratio;                    //
    float margin, scale, margin_max;   // AAM-softmax; margin follows the schedule
    int64_t margin_start, margin_end;  // epochs of the margin ramp
    int cap_b;                         // the head's buffers hold up to cap_b samples
    float *aam_cache;                  // (aam_softmax_cache_floats)
    float *work;                       // (aam_softmax_workspace_floats)
    float *g_emb;                      // (B, E)
    float *scalars;                    // [loss, correct (an int)] of the last forward
    float *row_loss;                   // (B) invariant mode: each sample's loss of the last forward
    struct aam_head_shard *shard;      // the classifier sharded across ranks (m->head_comm set)
    int aam;                           // the AAM-softmax is part of the loss (--loss)
    struct contrastive_head *con;      // a metric-learning term (NULL: --loss aam)
    struct dino *dino;                 // --loss dino (app/model/layers/dino.h) in place of both
    float *h_rows, *d_rows;            // (B) its per-sample losses on the host and the backend
    double sample;                     // its Partial FC rate (model_config_t.head_sample)
    double modality_p;                 // visual models: modality dropout's chance (model_config_t)
    int8_t *modality;                  // (B) the streams each sample keeps (model_t.modality)
    uint64_t seed;
} aam_encoder_t;

// Registers classifier.weight for E-dimensional embeddings, the first tensor of the table (its
// gradient is ready first), takes the margin schedule from cfg and sets m->ops. Call before the
// encoder registers its own tensors.
void aam_encoder_init(aam_encoder_t *h, model_t *m, const model_config_t *cfg, const aam_encoder_ops_t *enc,
                      int64_t emb_dim);
// Makes room for B samples of T frames: the head's buffers and the encoder's (the steps do it
// themselves; for tests that drive the encoder and the head separately).
void aam_encoder_reserve(model_t *m, int B, int T);
// Xavier-uniform initial weights of the classifier (in m->host_params, drawn from seed for the
// table's tensor `index`).
void aam_encoder_init_classifier(const aam_encoder_t *h, model_t *m, uint64_t seed, int index);
