// The CPU backends' staging functions (kernels/cpu/staging.c), for their tables in
// kernels/cpu/backend_cpu.c; the contract is kernels/backend.h's.
#pragma once
#include <stddef.h>

#include "kernels/staging.h"

spk_staging_t *spk_cpu_staging_create(void);           // "cpu": the host data itself
spk_staging_t *spk_cpu_staging_create_separate(void);  // "cpu-staged": copies of its own
void spk_cpu_staging_free(spk_staging_t *s);
void spk_cpu_staging_begin(spk_staging_t *s, size_t bytes);
const void *spk_cpu_staging_put(spk_staging_t *s, const void *host, size_t bytes);
void spk_cpu_staging_ready(spk_staging_t *s);
void spk_cpu_staging_fetch(spk_staging_t *s, const void *src, size_t bytes);
const void *spk_cpu_staging_fetched(spk_staging_t *s, int age);
