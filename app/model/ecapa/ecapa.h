// ECAPA-TDNN (SpeechBrain's ECAPA_TDNN topology) built from kernels/: layer structs hold
// parameter offsets (into model->params / model->grads), state offsets (BatchNorm running
// statistics in model->state) and pointers to their activations, which are allocated once
// per (batch, frames) shape and reused every step. Every buffer lives on the model's backend
// (m->be) and every op goes through it, so the same code trains on the CPU and on a GPU.
// Parameter names follow SpeechBrain's state_dict, so its checkpoints map one to one.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/ecapa/ecapa_asp.h"
#include "app/model/ecapa/ecapa_blocks.h"
#include "app/model/layers/aam_encoder.h"
#include "app/model/layers/face_encoder.h"

#include <stddef.h>
#include <stdint.h>

#define ECAPA_FRAMES   200  // the training crop when --frames is 0
#define ECAPA_CHANNELS 512  // SpeechBrain's defaults: C
#define ECAPA_EMB      192  // and the embedding size

typedef struct {
    int64_t feat;                                       // F
    int64_t channels;                                   // C
    int64_t att;                                        // attention channels (128)
    int64_t se;                                         // SE bottleneck (128)
    int64_t emb;                                        // embedding size (192)
    int64_t classes;                                    // S, AAM-softmax classes
    int64_t vfeat;                                      // visual stream: Fv features per frame (0: audio only)
    int64_t vchannels;                                  // visual TDNN channels Cv
    int64_t vratio;                                     // audio frames per visual frame
    int64_t image_size, image_channels, face_channels;  // pictures: S, C, the face encoder's width
} ecapa_dims_t;

// ecapa-av's visual branch: two TDNN blocks and its own attentive statistics pooling.
typedef struct {
    tdnn_t blocks[2];            // visual.blocks.0 (Fv -> Cv, k=3, d=1), visual.blocks.1 (Cv -> Cv, k=3, d=2)
    asp_t asp;                   // visual.asp
    float *x;                    // (B, Fv, Tv) transposed visual frames
    float *g_h, *g_mid, *g_tmp;  // (B, Cv, Tv) backward scratch
    // pictures (--face-channels): the face encoder makes each frame's Fv values
    face_encoder_t face;
    int has_face;
    const float *pictures;  // (B, Tv, S, S, C) the forward's frames (the batch's, kept for the backward)
    float *fx;              // (B, Tv, Fv) the face encoder's output
    float *g_fx, *g_x;      // (B, Tv, Fv), (B, Fv, Tv) its gradient
} visual_t;

typedef struct {
    aam_encoder_t head;  // the AAM-softmax head and the model_t steps (first: app/model/layers/aam_encoder.h)
    ecapa_dims_t d;
    int64_t pooled_dim;  // 6C, plus 2Cv with the visual branch
    tdnn_t block0;
    seres_t blocks[3];
    tdnn_t mfa;
    asp_t asp;
    int has_visual;
    visual_t vis;
    int64_t asp_bn_w, asp_bn_b;       // asp_bn.norm.weight/bias (P)
    int64_t asp_bn_mean, asp_bn_var;  // state (P)
    int64_t fc_w, fc_b;               // fc.conv.weight (E, P, 1), fc.conv.bias (E)
    // activations for the current shape
    int cap_b;                 // activations hold up to cap_b samples
    size_t cap_bt;             // and up to cap_bt sample-frames (B * T)
    float *x;                  // (B, F, T) transposed input
    float *cat;                // (B, 3C, T) blocks 1..3 concatenated (MFA input; NULL in bf16)
    float *pooled;             // (B, P) [mean | std] of the audio (and visual) stream
    float *pooled_bn;          // (B, P)
    float *pooled_kept;        // (B, P) ecapa-av: pooled with the statistics of dropped streams zero
    const float *bn_in;        // what the BatchNorm took in the last forward: pooled or pooled_kept
    float *bn_mean, *bn_rstd;  // (P)
    float *emb;                // (B, E)
    // gradient scratch, reused by every step
    float *g3[3];    // (B, 3C, T): MFA output and input gradients, and a scratch
    float *gblk[4];  // (B, C, T) gradients of the outputs of blocks 0..3
    float *gvec[2];  // (B, P)
    float *work;     // convolution and pooling workspace
    size_t work_floats;
} ecapa_t;

// Makes room for B samples of T frames (grows the buffers when needed, never shrinks).
void ecapa_reserve(ecapa_t *e, const model_t *m, int B, int T);

// Encoder forward on frames (B, T, F) time-major (and, for ecapa-av, visual frames
// (B, T / vratio, Fv)), both in backend memory: fills e->emb. train = 1 uses batch statistics and updates running
// statistics; train = 0 uses running statistics.
void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, const float *vframes, int B, int T, int train);
// Backward from g_emb (B, E) through the encoder; accumulates parameter gradients into
// m->grads and, when dframes is not NULL, the audio input gradient (B, T, F).
void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T);

// The `ecapa` and `ecapa-av` rows of app/model/registry.c: the builder, and the forward FLOP
// per sample (every convolution over T = cfg->frames frames, the SE and embedding layers once).
void model_ecapa_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
double ecapa_forward_flop(const model_config_t *cfg, int64_t feat);
