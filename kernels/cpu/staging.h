// The CPU backends' staging functions (kernels/cpu/staging.c), for their tables in
// kernels/cpu/backend_cpu.c; the contract is kernels/backend.h's. spk_cpu_staging_create hands
// "cpu" the host data itself; spk_cpu_staging_create_separate gives "cpu-staged" copies.
#pragma once
#include "kernels/staging.h"

SPK_STAGING_DECLARE(spk_cpu_staging)
spk_staging_t *spk_cpu_staging_create_separate(void);
