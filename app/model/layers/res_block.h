// The residual block of the 2-D encoders (WeSpeaker's ResNets, CAM++'s front end): two
// (BasicBlock) or three (Bottleneck) conv2d_bn units on the main path, the last one's output
// relu(bn(conv) + shortcut), and a 1x1 convolution with its BatchNorm as the shortcut when the
// block changes the shape. Parameters are named as PyTorch's: <prefix>.conv<i>, <prefix>.bn<i>,
// <prefix>.shortcut.0 and .1.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/layers/conv2d_bn.h"

typedef struct {
    conv2d_bn_t u[3];
    int n;  // units on the main path
    conv2d_bn_t sc;
    int has_sc;
} res_block_t;

// in channels in, `planes` planes (expansion 1: BasicBlock, 4: Bottleneck, whose output has
// 4 planes), the stride (sh, sw) on the block's strided convolution; registered last unit first.
void res_block_register(res_block_t *b, model_t *m, const char *prefix, int in, int planes, int sh, int sw,
                        int expansion);
// Sets the units' shapes for B inputs of *H x *W, and the output's size into *H, *W.
void res_block_shape(res_block_t *b, int B, int *H, int *W);
// Appends the block's units to units[] (the main path, then the shortcut);
// returns how many.
int res_block_units(res_block_t *b, conv2d_bn_t **units);
// Chains `before` (a stem), blocks b[0, count) in order and `after` (NULL: none) for bf16
// training (conv2d_bn_t.next): every unit's output to the unit that reads it first (a block's
// first convolution reads its input), which in bf16 training is its only reader (the last
// block's output is written in float32 too when `after` is NULL). Call once every unit is
// registered.
void res_blocks_chain(conv2d_bn_t *before, res_block_t *b, int count, conv2d_bn_t *after);
// The block's output (B, OH, OW, cout) of the last forward.
const float *res_block_out(const res_block_t *b);
int res_block_out_channels(const res_block_t *b);
void res_block_forward(res_block_t *b, model_t *m, const float *in, int train, float *work);
// From the gradient of the output in go to that of the input in gx (overwritten), in the
// forward's input `in`; go is clobbered (a unit's input gradient overwrites the buffer its output
// gradient came in). ga, gres: scratch of the largest unit output each.
void res_block_backward(res_block_t *b, model_t *m, const float *in, float *go, float *gx, float *ga, float *gres,
                        float *work);
// The offset just past the block's parameters (final once its backward ran).
int64_t res_block_end(const res_block_t *b);
// --zero-init-residual: the weight of each block's last BatchNorm on the main path set to 0 in
// m's initial parameters, so that blocks b[0, count) start as their shortcuts and the network as
// a shallow one (Goyal et al. 2017; torchvision's zero_init_residual). Marks m as having some.
void res_blocks_zero_residual(const res_block_t *b, int count, model_t *m);
