// The CUDA backend as the spkddp program loads it: kernels/cuda built as a module of its own
// (libspkddp_cuda.so) and opened when a command first looks for a GPU on a machine that has
// one. The program then starts without cuBLAS, cuDNN and NCCL: 0.1 s less CPU per start, and
// a CUDA build runs on a machine that lacks them (a cluster's login node). The module exports
// one symbol, spk_cuda_module_table, the table of the entry points declared in
// kernels/device.h, kernels/backend.h and kernels/nccl_comm.h (kernels/cuda/module_table.c);
// the program's kernels/cuda_loader.c defines those names as calls through it. Test programs
// link kernels/cuda directly.
#pragma once
#include <stddef.h>

#include "kernels/backend.h"
#include "kernels/device.h"
#include "kernels/nccl_comm.h"

#define SPK_CUDA_MODULE_FILE "libspkddp_cuda.so"

// Every entry point, X(name): the backend tables, device discovery, the context, NCCL.
// clang-format off
#define SPK_CUDA_MODULE_ENTRIES(X)                                                                 \
    X(spk_backend_cuda) X(spk_backend_cuda_invariant)                                              \
    X(spk_device_count) X(spk_device_select) X(spk_device_pci_id) X(spk_device_describe)           \
    X(spk_device_profile) X(spk_device_libraries)                                                  \
    X(spk_cuda_init) X(spk_cuda_shutdown) X(spk_cuda_set_tf32) X(spk_cuda_bytes_in_use)            \
    X(spk_cuda_print_conv_plans)                                                                   \
    X(nccl_comm_unique_id) X(nccl_comm_create) X(nccl_allreduce_start) X(nccl_allreduce_end)       \
    X(nccl_allreduce_drain) X(nccl_exact_allreduce_start) X(nccl_exact_words_start)               \
    X(nccl_allgather) X(nccl_reduce_scatter) X(nccl_join) X(nccl_comm_destroy)
// clang-format on

#define SPK_CUDA_MODULE_MEMBER(name) __typeof__(name) *name;

typedef struct spk_cuda_module {
    size_t size;  // sizeof (spk_cuda_module_t) where the module was built: another build's is refused
    SPK_CUDA_MODULE_ENTRIES(SPK_CUDA_MODULE_MEMBER)
} spk_cuda_module_t;

extern const spk_cuda_module_t spk_cuda_module_table;
