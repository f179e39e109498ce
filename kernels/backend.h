// A backend: where a model's buffers live and which implementation of the math kernels runs
// on them. Models call every op through this table, so the CPU and the GPU share one model
// code path and the CPU tests exercise it.
//
// Each op member has the type of the CPU function of the same name (kernels/*.h), taken with
// __typeof__, so a sibling with a different parameter list does not compile into the table.
// All pointers an op receives are backend memory (device memory for CUDA), including the
// scalar outputs of the losses and the integer labels; hyperparameters are host values.
#pragma once
#include <stddef.h>

#include "kernels/aam_softmax.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/optim.h"
#include "kernels/pooling.h"
#include "kernels/tensor_ops.h"
#include "kernels/xent.h"

// Every op of a backend, in one list: the struct below and each backend's table expand it.
#define SPK_BACKEND_OPS(X)                \
    X(spk_sgemm) \
    X(spk_sgemm_batched) \
    X(conv1d_workspace_floats) \
    X(conv1d_forward) \
    X(conv1d_backward) \
    X(batchnorm1d_forward_train) \
    X(batchnorm1d_forward_infer) \
    X(batchnorm1d_backward) \
    X(relu_forward) \
    X(relu_backward) \
    X(relu_mask) \
    X(sigmoid_forward) \
    X(sigmoid_backward) \
    X(tanh_forward) \
    X(tanh_backward) \
    X(time_mean_forward) \
    X(time_mean_backward) \
    X(channel_scale_forward) \
    X(channel_scale_backward) \
    X(weighted_stats_forward) \
    X(weighted_stats_backward) \
    X(softmax_time_forward) \
    X(softmax_time_backward) \
    X(channel_slice_copy) \
    X(channel_slice_add) \
    X(time_repeat_forward) \
    X(time_repeat_backward) \
    X(batch_transpose) \
    X(vec_acc) \
    X(vec_copy) \
    X(vec_zero) \
    X(aam_softmax_cache_floats) \
    X(aam_softmax_workspace_floats) \
    X(aam_softmax_forward) \
    X(aam_softmax_backward) \
    X(xent_forward) \
    X(xent_backward) \
    X(linear_forward) \
    X(linear_backward) \
    X(sgd_step) \
    X(adam_step) \
    X(adamw_step)

#define SPK_BACKEND_OP(name) __typeof__(name)* name;

typedef struct spk_backend {
    const char* name;     // "cpu", "cpu-staged", "cuda"
    int separate_memory;  // buffers are not the host's: inputs are uploaded, results downloaded

    // memory: zero-filled allocation in bytes (aborts with a sentence when out of memory)
    void* (*alloc)(size_t bytes);
    void (*free)(void* p);
    void (*upload)(void* dst, const void* src, size_t bytes);    // host -> backend, blocking
    void (*download)(void* dst, const void* src, size_t bytes);  // backend -> host, blocking
    void (*sync)(void);                                          // queued work is done

    SPK_BACKEND_OPS(SPK_BACKEND_OP)
} spk_backend_t;

// The CPU kernels on host memory.
extern const spk_backend_t spk_backend_cpu;
// The CPU kernels on buffers of their own, reached only through upload/download like device
// memory: runs the GPU path's data movement (and finds a missing copy) on any machine.
extern const spk_backend_t spk_backend_cpu_staged;
// The CUDA kernels on the device spk_cuda_init selected; NULL when built without CUDA.
const spk_backend_t* spk_backend_cuda(void);
