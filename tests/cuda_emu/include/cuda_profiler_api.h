// cudaProfilerStart/Stop on the stand-in (tests/cuda_emu): no profiler is attached, so both
// succeed and do nothing, as on a GPU run without one.
#pragma once
#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);

#ifdef __cplusplus
}
#endif
