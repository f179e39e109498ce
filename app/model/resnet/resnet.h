// The ResNet speaker encoders of WeSpeaker (wespeaker/models/resnet.py), under their state-dict
// names: the fbank (B, T, F) as a one-channel image (F high, T wide), a 3x3 stem of m channels,
// four stages of BasicBlocks (resnet18, resnet34) or Bottlenecks (resnet50 and deeper) with
// m, 2m, 4m, 8m planes and strides 1, 2, 2, 2, temporal statistics pooling (TSTP: the mean and
// the unbiased standard deviation over time of every channel and frequency row) and one linear
// embedding layer (seg_1; two_emb_layer False). Trained through the AAM-softmax head of
// app/model/layers/aam_encoder.h. Activations are channels-last (kernels/conv2d.h).
//
// ResNet34 at WeSpeaker's defaults (F 80, m 32, embedding 256) has 6,634,336 parameters.
//
// resnet34-av (spkddp's): the same audio encoder beside a face encoder on a /visual stream of
// pictures (app/model/layers/face_branch.h, --face-channels), its per-frame values pooled over
// time (mean and standard deviation) and joined to the audio's statistics before seg_1, with
// modality dropout (model_t.modality) zeroing a sample's statistics of the stream it goes without.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/layers/aam_encoder.h"
#include "app/model/layers/conv2d_bn.h"
#include "app/model/layers/face_branch.h"
#include "app/model/layers/res_block.h"

#include <stdint.h>

#define RESNET_FRAMES   200  // the training crop when --frames is 0 (WeSpeaker's num_frms)
#define RESNET_CHANNELS 32   // m_channels
#define RESNET_EMB      256  // embed_dim
#define RESNET_STAGES   4

typedef struct {
    aam_encoder_t head;  // the AAM-softmax head and the model_t steps (first: app/model/layers/aam_encoder.h)
    int64_t feat, m_channels, emb;
    int expansion;              // 1 (BasicBlock) or 4 (Bottleneck)
    int blocks[RESNET_STAGES];  // blocks per stage
    conv2d_bn_t stem;           // conv1, bn1
    res_block_t *block;         // every block, stage by stage
    int nblocks;
    conv2d_bn_t **units;  // every unit (the stem, the blocks' units and shortcuts)
    int nunits;
    int64_t seg_w, seg_b;  // seg_1.weight (E, P), seg_1.bias (E)
    int64_t pooled_dim;    // P = 2 * channels * rows of the last stage (the audio's statistics)
    int64_t seg_dim;       // seg_1's input: P, or with the face branch P and its statistics
    int has_face;          // resnet34-av: the face branch beside the audio
    face_branch_t av;
    // activations for the current shape
    int cap_b, cap_t;         // shapes up to cap_b samples of cap_t frames fit
    int out_h, out_w, out_c;  // the last stage's map
    float *x;                 // (B, F, T): the frames as a one-channel image
    float *pooled;            // (B, P)
    float *emb_out;           // (B, E)
    float *g_pooled;          // (B, seg_dim)
    float *g[4];              // backward scratch, each of the largest map
    float *work;              // the units' scratch
    size_t work_floats, map_floats;
    const float *seg_in;  // what seg_1 took in the last forward (pooled, or the face branch's joined)
} resnet_t;

// Encoder forward on frames (B, T, F) time-major in backend memory (the model's buffers reserved
// for B x T, aam_encoder_reserve): returns the embeddings (B, E). train: batch statistics, updating
// the running ones; else the running statistics.
const float *resnet_forward(resnet_t *r, model_t *m, const float *frames, int B, int T, int train);
// Backward from g_emb (B, E) through the encoder: accumulates the parameter gradients into
// m->grads and, when dframes is not NULL, writes the input's gradient (B, T, F).
void resnet_backward(resnet_t *r, model_t *m, const float *g_emb, float *dframes, int B, int T);

// The rows of app/model/registry.c: the builder of every depth (cfg->name), and the forward FLOP
// per sample (every convolution at cfg->frames frames, the embedding layer).
void model_resnet_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
double resnet_forward_flop(const model_config_t *cfg, int64_t feat);
