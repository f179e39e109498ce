// The run's memory, for the epoch metrics: the largest resident set any rank has had
// (getrusage's ru_maxrss) and, on CUDA, the device memory in use when asked (cudaMemGetInfo:
// every process on the device; spkddp allocates up front and its scratch only grows, so this
// is its peak too), the largest over ranks. Collective.
#pragma once
#include "app/dist/comm.h"
#include "kernels/backend.h"

// MiB; *device_mib is NAN when the backend's memory is the host's or not known.
void memory_peaks(const comm_t *comm, const spk_backend_t *be, double *rss_mib, double *device_mib);
