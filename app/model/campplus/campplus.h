// CAM++ (3D-Speaker's speakerlab.models.campplus.DTDNN.CAMPPlus), under its state-dict names:
// the fbank (B, T, F) as a one-channel image (F high, T wide) through the FCM front end (a 3x3
// stem of 32 channels, two stages of two residual blocks whose first block has stride (2, 1),
// a 3x3 stride-(2, 1) convolution: F / 8 rows), flattened to 32 F / 8 channels per frame; a TDNN
// layer (kernel 5, stride 2: half the frames); three densely connected blocks of CAM layers
// ((layers, dilation) = (12, 1), (24, 2), (16, 2) at 3D-Speaker's defaults) with a transition
// halving the channels after each; BatchNorm + ReLU, statistics pooling (the mean and the unbiased
// standard deviation over time), a 1x1 convolution to the embedding and a BatchNorm without
// affine parameters. Trained through the AAM-softmax head of app/model/layers/aam_encoder.h.
// campplus-av (spkddp's): the same beside a face encoder on a /visual stream of pictures, its
// statistics over time joined to the audio's before the dense layer (app/model/layers/face_branch.h).
//
// Activations are channels-last (kernels/conv2d.h): the front end's (B, F', T, 32) maps, then
// (B, T', C) rows of frames, every 1-D convolution a conv2d over a map one row high. The dense
// blocks are app/model/campplus/campplus_dense.h.
//
// CAM++ at 3D-Speaker's defaults (F 80, embedding 512) has 7,176,224 parameters (6,848,544 at
// embedding 192).
#pragma once
#include "app/model/campplus/campplus_dense.h"
#include "app/model/core/model_core.h"
#include "app/model/layers/aam_encoder.h"
#include "app/model/layers/conv2d_bn.h"
#include "app/model/layers/face_branch.h"
#include "app/model/layers/res_block.h"

#include <stdint.h>

#define CAMPP_FRAMES     200  // the training crop when --frames is 0
#define CAMPP_CHANNELS   128  // init_channels: the TDNN layer's output, the first block's input
#define CAMPP_EMB        512  // embedding_size
#define CAMPP_GROWTH     32   // growth_rate: channels each CAM layer adds
#define CAMPP_BN_SIZE    4    // bn_size: a CAM layer's bottleneck is bn_size * growth_rate wide
#define CAMPP_FCM        32   // the front end's channels (FCM's m_channels)
#define CAMPP_FCM_BLOCKS 2    // residual blocks per front-end stage

typedef struct {
    aam_encoder_t head;  // the AAM-softmax head and the model_t steps (first: app/model/layers/aam_encoder.h)
    campp_dims_t d;
    // the front end (head.*)
    conv2d_bn_t stem;                                  // head.conv1, head.bn1
    res_block_t fcm[2 * CAMPP_FCM_BLOCKS];             // head.layer1.0 ... head.layer2.1
    conv2d_bn_t fcm_out;                               // head.conv2, head.bn2
    conv2d_bn_t *units[3 * 2 * CAMPP_FCM_BLOCKS + 3];  // every conv2d_bn unit of the front end and the TDNN
    int nunits;
    // the x-vector part (xvector.*)
    conv2d_bn_t tdnn;                    // xvector.tdnn: linear (k 5, stride 2) and nonlinear.batchnorm
    dense_block_t blocks[CAMPP_BLOCKS];  // xvector.block<i> and xvector.transit<i>
    int64_t out_bn_w, out_bn_b, out_bn_mean, out_bn_var;  // xvector.out_nonlinear.batchnorm
    int64_t dense_w;                                      // xvector.dense.linear.weight (E, dense_in, 1)
    int64_t dense_in;  // the dense layer's input: 2 C_last, or with the face branch those and the face's
    int has_face;      // campplus-av: the face branch beside the audio (app/model/layers/face_branch.h)
    face_branch_t av;
    const float *dense_x;           // what the dense layer took in the last forward
    int64_t dense_mean, dense_var;  // xvector.dense.nonlinear.batchnorm (no affine parameters)
    // activations for the current shape
    int cap_b, cap_t;  // shapes up to cap_b samples of cap_t frames fit
    int fh, t1;        // the front end's output height (F / 8) and the frames after the TDNN
    float *x;          // (B, F, T): the frames as a one-channel image
    float *flat;       // (B, T, 32 F / 8): the front end's output as frames
    float *out_y;      // (B, T1, C_last) out_nonlinear's output
    float *out_mean, *out_rstd;
    float *pooled;     // (B, 2 C_last)
    float *dense_out;  // (B, E) before the last BatchNorm
    float *emb_out;    // (B, E)
    float *emb_mean, *emb_rstd;
    // backward scratch
    float *g[4];                         // the front end's, each of its largest map
    float *g_pooled, *g_dense, *g_rows;  // g_pooled: (B, dense_in)
    dense_scratch_t scratch;             // the blocks' shared scratch
    float *work;                         // the units' and the blocks' scratch
    size_t work_floats, map_floats;
} campplus_t;

// Encoder forward on frames (B, T, F) time-major in backend memory (the model's buffers reserved
// for B x T, aam_encoder_reserve): returns the embeddings (B, E). train: batch statistics, updating
// the running ones; else the running statistics.
const float *campplus_forward(campplus_t *c, model_t *m, const float *frames, int B, int T, int train);
// Backward from g_emb (B, E): accumulates the parameter gradients into m->grads (m->xgrads in
// the invariant mode) and, when dframes is not NULL, writes the input's gradient (B, T, F).
void campplus_backward(campplus_t *c, model_t *m, const float *g_emb, float *dframes, int B, int T);

// The `campplus` row of app/model/registry.c: the builder and the forward FLOP per sample (every
// convolution at cfg->frames frames, the embedding layer).
void model_campplus_build(model_t *m, const model_config_t *cfg, const model_data_t *data);
double campplus_forward_flop(const model_config_t *cfg, int64_t feat);
