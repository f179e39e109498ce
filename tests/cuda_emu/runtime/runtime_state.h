// Per-process runtime state shared by the API files: the current device and the error that
// cudaGetLastError reports (and clears).
#pragma once
#include "cuda_runtime.h"

namespace spk_emu {

int current_device();
void set_current_device(int device);
// Records e as the last error (unless cudaSuccess) and returns it.
cudaError_t report(cudaError_t e);
cudaError_t take_last_error();

}  // namespace spk_emu
