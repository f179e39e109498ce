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
// --precision (model_config_t.precision) on this backend. CUDA: tf32 allows TF32 tensor-core
// math in fp32 convolutions and GEMMs; bf16 runs on bf16 tensor cores as it is. CPU: tf32 does
// not apply (a notice; it computes in fp32); bf16 on a CPU without native bf16 instructions
// (AVX512-BF16, AMX) on some rank runs its GEMMs widened to fp32, slower than fp32 itself (a
// notice). Collective; notices come from rank 0, once.
void device_set_precision(const comm_t *c, const spk_backend_t *be, const char *precision);
// Whether two ranks of a node drive the same GPU (fine for inference, not for NCCL).
int device_gpu_shared(void);
// Releases what device_select set up (after every model and optimizer is freed).
void device_release(const spk_backend_t *be);
