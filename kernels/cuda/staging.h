// The CUDA backend's staging (kernels/cuda/staging.cu), for its table in
// kernels/cuda/backend_cuda.c; the contract is kernels/backend.h's.
#pragma once
#include <stddef.h>

#include "kernels/staging.h"

#ifdef __cplusplus
extern "C" {
#endif

spk_staging_t *spk_cuda_staging_create(void);
void spk_cuda_staging_free(spk_staging_t *s);
void spk_cuda_staging_begin(spk_staging_t *s, size_t bytes);
const void *spk_cuda_staging_put(spk_staging_t *s, const void *host, size_t bytes);
void spk_cuda_staging_ready(spk_staging_t *s);
void spk_cuda_staging_fetch(spk_staging_t *s, const void *src, size_t bytes);
const void *spk_cuda_staging_fetched(spk_staging_t *s, int age);

#ifdef __cplusplus
}
#endif
