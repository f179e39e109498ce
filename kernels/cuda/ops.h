// The CUDA sibling of every op of the backends (kernels/ops.h): `name_cuda`, declared
// here with the TYPE of the CPU function `name`, so its definition in kernels/cuda/<op>.cu
// (extern "C") must have the CPU parameter list or it does not compile. Semantics are the CPU
// header's (kernels/<op>.h), with every pointer in device memory (scalar loss outputs and labels
// too) and the work queued on spk_cuda_stream() (kernels/cuda/context.h).
#pragma once
#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPK_CUDA_SIBLING(name)                  __typeof__(name) name##_cuda;
#define SPK_CUDA_REPLACEMENT(name, replacement) __typeof__(name) replacement##_cuda;
SPK_BACKEND_OPS(SPK_CUDA_SIBLING)
SPK_INVARIANT_OPS(SPK_CUDA_REPLACEMENT)
#undef SPK_CUDA_SIBLING
#undef SPK_CUDA_REPLACEMENT

#ifdef __cplusplus
}
#endif
