// CAM++'s densely connected blocks (speakerlab's CAMDenseTDNNBlock and TransitLayer) over
// channels-last rows of frames (R = B x T rows).
//
// A block keeps its input and every layer's output side by side in one buffer (R, cmax): a layer
// writes its growth-rate channels into their columns, no concatenation copies. Every layer and
// the transition begin with BatchNorm + ReLU over a prefix of those channels; their batch
// statistics are computed once per channel and shared by the readers, and the readers' backwards
// meet in one accumulator per channel (kernels/dense_bn.h). A CAM layer: the normalised prefix
// -> 1x1 convolution to the bottleneck (bn_size x growth) -> BatchNorm + ReLU -> a dilated 3-tap
// convolution to the growth channels, scaled by the context-aware mask sigmoid(linear2(relu(
// linear1(the utterance's mean + its 100-frame segment's mean)))) (kernels/segment_pool.h).
// The transition: BatchNorm + ReLU over all channels, a 1x1 convolution halving them.
//
// With recompute set (speakerlab's memory_efficient), the layers' normalised inputs are not kept
// for the backward but made again from the block's buffer: the same bits, a pass over memory more, and activation memory linear in the layers instead of
// quadratic.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/layers/conv2d_bn.h"
#include "app/model/layers/dense_bn.h"
#include "app/model/layers/model_layers.h"

#include <stddef.h>
#include <stdint.h>

#define CAMPP_BLOCKS 3
#define CAMPP_SEG    100  // the CAM layer's segment in frames (after the TDNN's stride)

typedef struct {
    int64_t feat, channels, emb;  // F, init_channels, embedding_size
    int growth, bn_size;          // growth_rate, bn_size
    int layers[CAMPP_BLOCKS];     // CAM layers per block
    int recompute;                // memory_efficient
} campp_dims_t;

// One CAM layer (CAMDenseTDNNLayer).
typedef struct {
    int cin;                                  // the block's channels it reads
    int64_t bn1_w, bn1_b, bn1_mean, bn1_var;  // nonlinear1.batchnorm (cin)
    conv2d_bn_t lin;                          // linear1 (1x1, cin -> bottleneck), nonlinear2.batchnorm, ReLU
    int64_t local_w;                          // cam_layer.linear_local.weight (growth, bottleneck, 3)
    int64_t l1_w, l1_b, l2_w, l2_b;           // cam_layer.linear1 (bottleneck / 2, bottleneck, 1), linear2
    conv2d_shape_t local;                     // linear_local at the current shape
    float *z;                                 // (R, cin) the normalised input (NULL with recompute or bf16)
    float *y;                                 // (R, growth) linear_local's output
    spk_bf16 *yh;                             // bf16 models: linear_local's rounded input (R, bottleneck)
    float *ctx, *q, *mask;                    // (B S, bottleneck), (B S, bottleneck / 2), (B S, growth)
} cam_layer_t;

typedef struct {
    int c0, n, growth, bneck, cmax, dilation;  // input channels, layers, their widths, all channels
    cam_layer_t *layer;
    int64_t tr_bn_w, tr_bn_b, tr_bn_mean, tr_bn_var;  // transit.nonlinear.batchnorm (cmax)
    int64_t tr_w;                                     // transit.linear.weight (cmax / 2, cmax, 1)
    conv2d_shape_t tr;                                // its convolution at the current shape
    int B, T, S;                                      // the current shape (S segments)
    int recompute;                                    // memory_efficient
    size_t cap_r, cap_bs, cap_stats;                  // buffers hold cap_r rows, cap_bs segment rows
    float *buf;                                       // (R, cmax) the block's channels
    float *mean, *var;  // (sets, cmax) their batch statistics (model_dense_bn_stats's sets; cap_stats floats)
    float *zt;          // (R, cmax) the transition's normalised input (NULL with recompute or bf16)
    spk_bf16 *zth;      // bf16 models: its rounded copy
    float *out;         // (R, cmax / 2) the transition's output
} dense_block_t;

// The scratch every block shares (campplus_t owns one), sized by dense_scratch_reserve.
typedef struct {
    size_t cap_r, cap_bs;     // rows, and segment rows B x S, it holds
    int cap_c, cap_b;         // the widest block, the largest batch (part's per-sample sums)
    float *g;                 // (R, cmax) the readers' accumulated gradients at the normalised channels
    float *gz;                // (R, cmax) a reader's normalised-input gradient
    float *zs;                // (R, cmax) recompute: a reader's normalised input, made for its forward and again
                              // for its backward (bf16 models keep the rounded copy instead)
    float *gy, *gl;           // (R, growth): a layer's output gradient, linear_local's
    float *gh, *ga;           // (R, bottleneck): the bottleneck's gradient, the conv2d_bn unit's scratch
    float *gmask, *gm2;       // (B S, growth): the mask's gradient, at its logits
    float *gq, *gctx;         // (B S, bottleneck / 2), (B S, bottleneck)
    float *part;              // (4, B, cmax) per-group sums
    model_dense_sums_t sums;  // the readers' S1 and S2 (cmax, each statistics set's)
} dense_scratch_t;

// Registers block `index` (1-based: xvector.block<index>, xvector.transit<index>), in reverse
// execution order: the transition, then the layers last first.
void dense_block_register(dense_block_t *k, model_t *m, int index, int c0, int layers, int growth, int bn_size,
                          int dilation);
// Sets the block's shapes for B samples of T frames and makes its buffers hold them (grows,
// never shrinks); release frees them. Returns the convolution and normalisation scratch (floats)
// the block needs.
size_t dense_block_reserve(dense_block_t *k, const model_t *m, int B, int T, int recompute);
void dense_block_release(dense_block_t *k, const model_t *m);
// Makes s hold the scratch of block k at its current shape (grows, never shrinks).
void dense_scratch_reserve(dense_scratch_t *s, const model_t *m, const dense_block_t *k);
void dense_scratch_release(dense_scratch_t *s, const model_t *m);

// Forward from in (R, c0) to k->out (R, cmax / 2). train: batch statistics (and running-statistics
// updates); else each reader's running statistics. work: dense_block_reserve's floats.
void dense_block_forward(dense_block_t *k, model_t *m, const float *in, int train, dense_scratch_t *s, float *work);
// Backward from g_out (R, cmax / 2), the gradient of k->out: the parameter gradients (each layer's
// reported ready as it is done) and g_in (R, c0), the input's gradient (overwritten).
void dense_block_backward(dense_block_t *k, model_t *m, const float *g_out, float *g_in, dense_scratch_t *s,
                          float *work);
// The offset just past the block's parameters (its first layer's last tensor).
int64_t dense_block_end(const dense_block_t *k);
// The forward's multiply-adds per sample for T frames (the convolutions and the mask's linears).
double dense_block_macs(int c0, int layers, int growth, int bn_size, double T);
