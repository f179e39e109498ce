// Accelerator discovery. Built everywhere; without the CUDA backend every query answers
// "no device", so callers need no #ifdefs.
#pragma once
#include <stddef.h>

// Whether this machine shows an NVIDIA GPU: an NVIDIA display or 3-D controller on the PCI
// bus, the NVIDIA driver's control device, or WSL's GPU device (/dev/dxg). Needs no CUDA; a
// container may show the devices without the bus.
int spk_nvidia_gpu_present(void);
// Devices visible to this process: 0 when there is none to use (no CUDA build, no driver
// installed, no GPU visible), -1 when a driver is there but cannot run this build (older than
// the CUDA runtime spkddp was built with, or failing to start): a failure, not an absence.
// `why` (may be NULL) receives a sentence when the answer is 0 or -1; -1's names both versions.
int spk_device_count(char *why, size_t cap);
// Makes `index` the current device; 0 on success, else -1 with a sentence in `why`.
int spk_device_select(int index, char *why, size_t cap);
// The device's PCI bus id ("0000:3b:00.0"), the same in every process that sees the GPU
// whatever CUDA_VISIBLE_DEVICES numbers it as; 0 on success, else -1.
int spk_device_pci_id(int index, char *out, size_t cap);
// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)" or "" when unknown.
void spk_device_describe(int index, char *out, size_t cap);
// The CUDA libraries this build runs on, with their versions ("CUDA runtime 13.0, cuBLAS 13.1.0,
// cuDNN 9.14.0, NCCL 2.28.3"), or why there are none; needs no GPU.
void spk_device_libraries(char *out, size_t cap);
// Brackets the work a profiler should record (ncu --profile-from-start off, nsys
// --capture-range=cudaProfilerApi): on 1 starts, on 0 stops (cudaProfilerStart/Stop). A
// refusal is a note on stderr, not a failure; nothing without CUDA.
void spk_device_profile(int on);

// ---- the CUDA kernels' context (SPKDDP_HAVE_CUDA only: kernels/cuda/context.cu) -------------
// What app/dist and the commands call to start, tune and stop the CUDA backend; the rest of
// the context is kernels/cuda's own (kernels/cuda/context.h).
// Selects `device`, creates the stream and the cuDNN/cuBLAS handles. Returns 0 on success (also
// when already initialised on the same device), -1 with a sentence on stderr otherwise.
int spk_cuda_init(int device);
// Waits for the stream, then releases the handles, cached plans, scratch and the stream.
void spk_cuda_shutdown(void);
// Allows TF32 tensor-core math in cuDNN convolutions and cuBLAS GEMMs (10-bit mantissa inputs,
// fp32 accumulation; Ampere and newer). Off by default: plain fp32. Re-plans convolutions.
void spk_cuda_set_tf32(int allow);
// Device memory in use (all processes on the device), in bytes.
size_t spk_cuda_bytes_in_use(void);
// Prints the cuDNN algorithms chosen so far, one line per convolution shape (stdout).
void spk_cuda_print_conv_plans(void);
