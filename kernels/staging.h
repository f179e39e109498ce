// The staging handle of the backends (kernels/backend.h describes its calls): double-buffered
// traffic between the host and a backend's kernels, one slot per batch, used in turn
// (kernels/cpu/staging.c, kernels/cuda/staging.cu). C and C++.
#pragma once

typedef struct spk_staging spk_staging_t;
#define SPK_STAGING_ALIGN 256       // each piece put into a slot starts at a multiple of this
#define SPK_STAGING_FETCH_BYTES 64  // the most one slot fetches back
