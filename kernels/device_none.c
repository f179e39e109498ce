// Without the CUDA backend there is no device to find and no CUDA backend table
// (kernels/device.h, kernels/backend.h): what kernels/cuda/device.cu and
// kernels/cuda/backend_cuda.c answer with CUDA.
#include "kernels/backend.h"
#include "kernels/device.h"

#include <stddef.h>
#include <stdio.h>

#ifndef SPKDDP_HAVE_CUDA
const spk_backend_t *spk_backend_cuda(void) { return NULL; }
const spk_backend_t *spk_backend_cuda_invariant(void) { return NULL; }

int spk_device_count(char *why, size_t cap) {
    if (why) snprintf(why, cap, "this spkddp was built without CUDA (configure with nvcc present, -DSPKDDP_CUDA=ON)");
    return 0;
}

int spk_device_select(int index, char *why, size_t cap) {
    (void)index;
    return spk_device_count(why, cap) > 0 ? 0 : -1;
}

int spk_device_pci_id(int index, char *out, size_t cap) {
    (void)index;
    if (cap) out[0] = 0;
    return -1;
}

void spk_device_describe(int index, char *out, size_t cap) {
    (void)index;
    if (cap) out[0] = 0;
}

void spk_device_libraries(char *out, size_t cap) { snprintf(out, cap, "none (built without CUDA)"); }

void spk_device_profile(int on) { (void)on; }
#endif
