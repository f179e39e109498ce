// The ONNX nodes of the 2-D encoders' units (app/model/layers/conv2d_bn.h, res_block.h) and what
// their graphs share (ResNets, CAM++): the input's mean normalisation and the statistics pooling.
// Activations are PyTorch's NCHW (NCT for a unit of nn.Conv1d geometry).
#pragma once
#include "app/model/layers/conv2d_bn.h"
#include "app/model/layers/onnx_graph.h"
#include "app/model/layers/res_block.h"

// The graph input "fbank" (B, T, F), mean-normalised over its frames as the loader does, as
// (B, F, T).
const char *onnx_fbank_input(onnx_graph_t *g, int64_t feat);
// The unit's convolution (no bias) and BatchNorm, then a ReLU when relu is set.
const char *onnx_conv2d_bn(onnx_graph_t *g, const conv2d_bn_t *u, const char *x, int relu);
// The residual block: relu(main path + shortcut).
const char *onnx_res_block(onnx_graph_t *g, const res_block_t *b, const char *x);
// The mean and sqrt(unbiased variance + eps) over `axis` (the last, time), each flattened from
// axis 1, concatenated: (B, 2 x the other axes' product). Names start with prefix.
const char *onnx_stats_pool(onnx_graph_t *g, const char *prefix, const char *h, int64_t axis, float eps);
