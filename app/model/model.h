// The model interface. One struct per model with contiguous buffers and named views:
//   params (num_params,)  trainable, averaged gradients update them identically everywhere
//   grads  (num_params,)  same layout; train_step ACCUMULATES into it (caller zeroes)
//   state  (num_state,)   non-trainable buffers (BatchNorm running statistics); like PyTorch
//                         DDP, rank 0's copy is authoritative (broadcast before checkpoints)
//   params_bf16           with --precision bf16: params rounded to bf16 at the start of every
//                         forward, the weights its convolutions and GEMMs read
// Precision (model_config_t.precision): fp32 computes in float32 throughout; tf32 is fp32 on
// the CPU and lets a GPU's tensor cores round GEMM inputs to TF32 (device_set_precision);
// bf16 (ECAPA) gives the convolutions and the attention GEMMs bf16 operands with float32
// accumulation (kernels/conv1d_bf16.h), while params, gradients, optimizer state, BatchNorm,
// pooling statistics, softmax, the embedding layer and the AAM loss stay float32.
// In the world-size-invariant mode (model_config_t.invariant, docs/invariant.md) train_step
// adds its gradients to the exact sums xgrads instead (grads is its scratch; the caller turns
// the cross-rank sums into grads), BatchNorm normalises over the global batch through
// exact_allreduce, the loss is a sum over the global batch divided by its size, and state comes
// out the same on every rank.
// These live on the model's backend (device memory for CUDA) and every op runs there.
// host_params / host_state are the host's copies for initialisation, checkpoints and MPI;
// with a host-memory backend they are the same buffers, otherwise model_upload and
// model_download move them.
#pragma once
#include "app/model/core/model_core.h"
#include "app/model/core/model_stats.h"

// Builds the model named by cfg->name (a row of app/model/registry.h; an unknown name stops every
// rank with a usage error) on backend `be`, with parameters initialised from cfg->seed (on the
// host, then uploaded). It also sets the process's CPU 2-D convolution algorithm
// (cfg->conv_algorithm; auto: Winograd for the ResNets and CAM++, direct otherwise; kernels/conv2d.h).
model_t *model_create(const model_config_t *cfg, const model_data_t *data, const spk_backend_t *be);
void model_free(model_t *m);
// Floats at the start of the gradient that need no averaging across ranks: the classifier when
// the loss leaves it without a gradient (--loss supcon ...: zero on every rank; in the
// invariant mode its exact sums stay zero anyway, and it is averaged as the rest). 0 otherwise.
int64_t model_unaveraged_head(const model_t *m);
