// The CUDA backend's staging (kernels/cuda/staging.cu), for its table in
// kernels/cuda/backend_cuda.c; the contract is kernels/backend.h's.
#pragma once
#include "kernels/staging.h"

#ifdef __cplusplus
extern "C" {
#endif

SPK_STAGING_DECLARE(spk_cuda_staging)

#ifdef __cplusplus
}
#endif
