// --device cpu|cuda|auto|cpu-staged, decided by every rank together. With CUDA, rank r takes
// GPU (local rank % visible GPUs): one GPU per task under Slurm, or all GPUs visible to every
// rank of a node, both work.
#pragma once
#include "app/dist/comm.h"
#include "kernels/backend.h"

#define DEVICE_CHOICES "cpu|cuda|auto|cpu-staged"

// The default of --device: $SPKDDP_DEVICE when set (a site or test setting), else "auto".
const char *device_default(void);
// Collective. `command` names the caller in messages ("train", "bench", "embed").
const spk_backend_t *device_select(const comm_t *c, const char *device, const char *command);
// --tf32: TF32 tensor-core math on a CUDA backend (returns 1); elsewhere a notice that it
// does not apply (returns 0).
int device_set_tf32(const spk_backend_t *be, int allow);
// Whether two ranks of a node drive the same GPU (fine for inference, not for NCCL).
int device_gpu_shared(void);
// Releases what device_select set up (after every model and optimizer is freed).
void device_release(const spk_backend_t *be);
