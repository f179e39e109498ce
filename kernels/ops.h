// Every math op a backend implements (kernels/backend.h), in one list: the backend struct, each
// backend's table and the declarations of the CUDA siblings (kernels/cuda/ops.h) expand it. The
// exact-sum ops at the end serve the world-size-invariant mode.
#pragma once

#include "kernels/aam_shard.h"
#include "kernels/aam_softmax.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/batchnorm2d.h"
#include "kernels/bf16.h"
#include "kernels/conv1d.h"
#include "kernels/conv1d_bf16.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_bf16.h"
#include "kernels/dense_bn.h"
#include "kernels/dino.h"
#include "kernels/exact_sum.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pooling.h"
#include "kernels/rows_norm.h"
#include "kernels/segment_pool.h"
#include "kernels/tensor_ops.h"
#include "kernels/xent.h"

#define SPK_BACKEND_OPS(X)                  \
    X(spk_sgemm)                            \
    X(spk_sgemm_batched)                    \
    X(conv1d_workspace_floats)              \
    X(conv1d_forward)                       \
    X(conv1d_backward)                      \
    X(spk_gemm_bf16)                        \
    X(spk_gemm_bf16_batched)                \
    X(conv1d_bf16_workspace_floats)         \
    X(conv1d_bf16_forward)                  \
    X(conv1d_bf16_backward)                 \
    X(conv2d_workspace_floats)              \
    X(conv2d_forward_workspace_floats)      \
    X(conv2d_forward)                       \
    X(conv2d_backward)                      \
    X(conv2d_bf16_workspace_floats)         \
    X(conv2d_bf16_forward_workspace_floats) \
    X(conv2d_bf16_forward)                  \
    X(conv2d_bf16_forward_rounded)          \
    X(conv2d_bf16_backward)                 \
    X(conv2d_bf16_backward_rounded)         \
    X(bf16_from_f32)                        \
    X(bf16_to_f32)                          \
    X(bf16_fold_from_f32)                   \
    X(bf16_slice_from_f32)                  \
    X(batchnorm1d_forward_train)            \
    X(batchnorm1d_relu_forward_train)       \
    X(batchnorm1d_forward_infer)            \
    X(batchnorm1d_backward)                 \
    X(batchnorm1d_relu_backward)            \
    X(batchnorm1d_relu_backward_bf16)       \
    X(batchnorm2d_workspace_floats)         \
    X(batchnorm2d_forward_train)            \
    X(batchnorm2d_forward_infer)            \
    X(batchnorm2d_backward)                 \
    X(batchnorm2d_backward_rounded)         \
    X(dense_bn_stats_partial)               \
    X(dense_bn_stats_finish)                \
    X(dense_bn_running_update)              \
    X(dense_bn_relu_forward)                \
    X(dense_bn_relu_backward)               \
    X(dense_bn_input_grad)                  \
    X(relu_forward)                         \
    X(relu_backward)                        \
    X(relu_mask)                            \
    X(sigmoid_forward)                      \
    X(sigmoid_backward)                     \
    X(tanh_forward)                         \
    X(tanh_backward)                        \
    X(gelu_forward)                         \
    X(gelu_backward)                        \
    X(time_mean_forward)                    \
    X(time_mean_backward)                   \
    X(channel_scale_forward)                \
    X(channel_scale_backward)               \
    X(weighted_stats_forward)               \
    X(weighted_stats_backward)              \
    X(attentive_stats_forward)              \
    X(attentive_stats_backward)             \
    X(tstp_forward)                         \
    X(tstp_backward)                        \
    X(segment_context_forward)              \
    X(segment_context_backward)             \
    X(segment_mask_forward)                 \
    X(segment_mask_backward)                \
    X(channel_slice_copy)                   \
    X(channel_slice_add)                    \
    X(time_repeat_forward)                  \
    X(time_repeat_backward)                 \
    X(batch_transpose)                      \
    X(rows_gather)                          \
    X(rows_scatter_add)                     \
    X(vec_acc)                              \
    X(vec_copy)                             \
    X(vec_zero)                             \
    X(vec_sum_squares)                      \
    X(vec_scale)                            \
    X(rows_normalize_forward)               \
    X(rows_normalize_backward)              \
    X(aam_softmax_cache_floats)             \
    X(aam_softmax_workspace_floats)         \
    X(aam_softmax_forward)                  \
    X(aam_softmax_backward)                 \
    X(aam_shard_cache_floats)               \
    X(aam_shard_workspace_floats)           \
    X(aam_shard_forward)                    \
    X(aam_shard_backward)                   \
    X(xent_forward)                         \
    X(xent_backward)                        \
    X(dino_xent_workspace_floats)           \
    X(dino_xent)                            \
    X(linear_forward)                       \
    X(linear_backward)                      \
    X(sgd_step)                             \
    X(adam_step)                            \
    X(adamw_step)                           \
    X(xsum_zero)                            \
    X(xsum_add)                             \
    X(xsum_to_float)                        \
    X(xsum_rows_add)                        \
    X(spk_sgemm_batched_exact)              \
    X(conv1d_forward_grouped)               \
    X(conv1d_backward_exact)                \
    X(conv2d_backward_exact)                \
    X(spk_gemm_bf16_batched_exact)          \
    X(conv1d_bf16_forward_grouped)          \
    X(conv1d_bf16_backward_exact)           \
    X(conv2d_bf16_backward_exact)           \
    X(conv2d_bf16_backward_rounded_exact)   \
    X(batchnorm1d_stats_partial)            \
    X(batchnorm1d_forward_global)           \
    X(batchnorm1d_backward_partial)         \
    X(batchnorm1d_backward_global)          \
    X(batchnorm2d_stats_partial)            \
    X(batchnorm2d_forward_global)           \
    X(batchnorm2d_backward_partial)         \
    X(batchnorm2d_backward_global)          \
    X(aam_softmax_forward_rows)             \
    X(aam_softmax_backward_exact)           \
    X(aam_shard_forward_fixed)              \
    X(aam_shard_expsum_exact)               \
    X(aam_shard_backward_exact)

// The world-size-invariant mode's replacements (kernels/backend.h, spk_backend_invariant):
// X(op, replacement), each replacement with op's contract and type, but per-sample results that
// depend neither on the batch size nor on the thread count. The ops not listed need none: their
// per-sample results do not depend on either already (elementwise ops; per-row ops such as
// rows_normalize_* and dino_xent, which reduce each row on its own in a fixed order).
#define SPK_INVARIANT_OPS(X)                                                    \
    X(spk_sgemm, spk_sgemm_rows)                                                \
    X(spk_sgemm_batched, spk_sgemm_batched_fixed)                               \
    X(conv1d_workspace_floats, conv1d_workspace_floats_fixed)                   \
    X(conv1d_forward, conv1d_forward_fixed)                                     \
    X(conv2d_workspace_floats, conv2d_workspace_floats_fixed)                   \
    X(conv2d_forward_workspace_floats, conv2d_workspace_floats_fixed)           \
    X(conv2d_forward, conv2d_forward_fixed)                                     \
    X(linear_forward, linear_forward_rows)                                      \
    X(spk_gemm_bf16, spk_gemm_bf16_rows)                                        \
    X(spk_gemm_bf16_batched, spk_gemm_bf16_batched_fixed)                       \
    X(conv1d_bf16_workspace_floats, conv1d_bf16_workspace_floats_fixed)         \
    X(conv1d_bf16_forward, conv1d_bf16_forward_fixed)                           \
    X(conv2d_bf16_workspace_floats, conv2d_bf16_workspace_floats_fixed)         \
    X(conv2d_bf16_forward_workspace_floats, conv2d_bf16_workspace_floats_fixed) \
    X(conv2d_bf16_forward, conv2d_bf16_forward_fixed)                           \
    X(conv2d_bf16_forward_rounded, conv2d_bf16_forward_rounded_fixed)
