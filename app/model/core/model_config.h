// What a model is built from: its hyperparameters (a few of the training flags) and what it
// needs to know about its data. Models see these, never the command line's config.
#pragma once
#include <stdint.h>

typedef struct {
    char name[32];            // linear | ecapa | ecapa-av
    int64_t channels;         // encoder width: ECAPA's C, a ResNet's m_channels (0: the model's)
    int64_t emb_dim;          // embedding size (0: the model's)
    int64_t att_channels;     // attentive-pooling channels
    int64_t se_channels;      // squeeze-excitation bottleneck
    int64_t visual_channels;  // ecapa-av visual TDNN channels
    double modality_dropout;  // audio-visual models: the chance a training sample goes without one stream
    int64_t face_channels;    // ecapa-av on pictures: the face encoder's width (0: the stream holds feature vectors)
    double margin, scale;     // AAM-softmax
    int64_t margin_warmup_start, margin_warmup_end;  // epochs: margin ramps 0 -> margin
    int64_t frames;                                  // training crop length (0: the model's default)
    char precision[8];          // fp32 | tf32 | bf16: the math of the convolutions and GEMMs (model.h)
    uint64_t seed;              // parameter initialisation
    int invariant;              // the world-size-invariant mode (docs/invariant.md): BatchNorm over
                                // the global batch, every per-sample contribution summed exactly
    int64_t invariant_group;    // invariant mode: samples per exact term (a divisor of every per-rank
                                // batch the run will see; 1: each sample on its own)
    char invariant_bn[8];       // invariant mode: global (BatchNorm over the global batch) | group
                                // (over each invariant group: no exchange, app/model/core/model_core.h)
    int64_t growth_rate;        // CAM++: channels each CAM layer adds (0: the model's, 32)
    int64_t bn_size;            // CAM++: a CAM layer's bottleneck in growth_rate widths (0: the model's, 4)
    double head_sample;         // a sharded head's Partial FC: the fraction of the other classes each
                                // step scores (0 or 1: all of them)
    int recompute;              // CAM++: make the dense layers' normalised inputs again in the backward
                                // (speakerlab's memory_efficient) instead of keeping them
    char conv_algorithm[12];    // the 2-D convolutions on CPUs: auto | direct | winograd (model.h)
    int zero_init_residual;     // 2-D residual blocks start as their shortcuts (res_block.h)
    char loss[16];              // aam | supcon | angleproto | ge2e | aam+supcon | aam+angleproto | aam+ge2e
                                // (app/model/layers/contrastive_head.h)
    double contrastive_weight;  // the metric-learning term's weight beside the AAM-softmax
    double contrastive_scale;   // its cosines' scale (an inverse temperature)
    int64_t per_speaker;        // angleproto, ge2e: the batches' groups of utterances of one speaker
    int local_negatives;        // each rank's batch alone, not the global batch (--negatives local)
    int instance_labels;        // training contrasts utterances, not speakers (--labels utterance: SimCLR)
    // DINO (--loss dino, app/model/layers/dino.h): self-distillation without labels.
    int64_t views;         // crops of each utterance in a training batch (the trainer's --views)
    int64_t global_views;  // the first of them, which the teacher sees too
    int64_t dino_hidden, dino_bottleneck, dino_out;  // the projection head: MLP width, bottleneck, prototypes
    double student_temp;                             // softmax temperatures: the student's,
    double teacher_temp, teacher_temp_start;         // the teacher's after its warmup, and at epoch 0
    int64_t teacher_temp_epochs;                     // epochs of the teacher temperature's linear warmup
    double centre_momentum;                          // the teacher's output centre: c <- m c + (1 - m) batch mean
    double ema_start;                                // the teacher's EMA momentum at step 0 (cosine to 1)
    int64_t freeze_last_layer;                       // epochs the prototypes (the head's last layer) stay fixed
} model_config_t;

// Model `name` with the default hyperparameters: the width and embedding size of the model
// (0 here; model_config_resolve in app/model/registry.h fills them), SpeechBrain's ECAPA-TDNN
// attention and squeeze-excitation 128; AAM-softmax m=0.2, s=30; seed 1234; fp32.
model_config_t model_config_defaults(const char *name);
// The older --tf32 switch: with tf32 set, an fp32 config becomes tf32. Returns -1 (config
// unchanged) when it already asks for bf16, 0 otherwise.
int model_config_apply_tf32(model_config_t *c, int tf32);

enum { VISUAL_UNKNOWN, VISUAL_FEATURES, VISUAL_PICTURES };

typedef struct {
    int64_t feature_dim;   // F
    int64_t num_classes;   // speakers
    int64_t class_first;   // the classifier holds classes [class_first, class_first + class_rows) on
    int64_t class_rows;    // this rank (--head sharded); class_rows 0: all of them
    int64_t visual_dim;    // Fv of the /visual stream, 0 without one
    int64_t visual_ratio;  // audio frames per visual frame
    int visual_kind;       // what the stream holds, when a dataset is at hand: VISUAL_* (0: not known)
    const char *source;    // the dataset's file name, for messages (may be NULL)
    // Memory the parameters will take on this node, checked before anything is allocated:
    int64_t param_copies;    // buffers of num_params floats per rank: parameters, gradients and
                             // the optimizer's slots (0: 2, parameters and gradients)
    int64_t ranks_per_node;  // ranks sharing this node's memory (0: 1)
} model_data_t;
