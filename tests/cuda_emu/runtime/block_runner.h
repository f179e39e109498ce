// Runs one kernel launch on the host: blocks one after another, the threads of a block as
// fibers that run until they finish or reach __syncthreads. Every thread reaches a barrier
// before any leaves it; the barrier must be the same __syncthreads for all of them, and no
// thread may have exited while others wait (the CUDA Programming Guide leaves both undefined).
// The scheduling order (config.h) is ascending or descending for both blocks and threads, so
// a result that depends on the order between barriers (a race) differs between the two.
#pragma once
#include <cstddef>

#include "cuda_runtime.h"  // first: the device language uses its types

#include "cuda_emu/device_language.h"

namespace spk_emu {

void run_grid(const KernelBody& body, const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes);

}  // namespace spk_emu
