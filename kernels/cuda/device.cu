// CUDA device discovery and selection.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "kernels/device.h"
}

extern "C" int spk_device_count(char *why, size_t cap) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why) snprintf(why, cap, "no usable CUDA device (%s)", cudaGetErrorString(e));
        cudaGetLastError();  // clear the sticky error so later queries start clean
        return 0;
    }
    if (n == 0 && why)
        snprintf(why, cap, "no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    return n;
}

extern "C" int spk_device_select(int index, char *why, size_t cap) {
    cudaError_t e = cudaSetDevice(index);
    if (e != cudaSuccess) {
        if (why) snprintf(why, cap, "cannot use CUDA device %d (%s)", index, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" int spk_device_pci_id(int index, char *out, size_t cap) {
    if (cudaDeviceGetPCIBusId(out, (int)cap, index) != cudaSuccess) {
        cudaGetLastError();
        if (cap) out[0] = 0;
        return -1;
    }
    return 0;
}

extern "C" void spk_device_describe(int index, char *out, size_t cap) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
        if (cap) out[0] = 0;
        return;
    }
    snprintf(out, cap, "%s (sm_%d%d, %.0f GiB)", p.name, p.major, p.minor, (double)p.totalGlobalMem / (1u << 30));
}
