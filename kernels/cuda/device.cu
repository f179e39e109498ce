// CUDA device discovery and selection.
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "kernels/device.h"
}

// "13.0" from CUDA's encoding 1000 * major + 10 * minor.
static void cuda_version_text(int v, char *out, size_t cap) { snprintf(out, cap, "%d.%d", v / 1000, v % 1000 / 10); }

extern "C" int spk_device_count(char *why, size_t cap) {
    int n = 0, driver = 0, runtime = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) {
        if (n == 0 && why)
            snprintf(why, cap, "no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)",
                     getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
        return n;
    }
    cudaGetLastError();             // clear the sticky error so later queries start clean
    cudaDriverGetVersion(&driver);  // 0 when no driver library is installed
    cudaRuntimeGetVersion(&runtime);
    if (e == cudaErrorNoDevice || driver == 0) {
        if (why) {
            if (driver == 0)
                snprintf(why, cap, "no usable CUDA device: no CUDA driver is installed (%s)", cudaGetErrorName(e));
            else
                snprintf(why, cap, "no usable CUDA device (%s)", cudaGetErrorString(e));
        }
        return 0;
    }
    char d[16], r[16];
    cuda_version_text(driver, d, sizeof d);
    cuda_version_text(runtime, r, sizeof r);
    if (why) {
        if (driver < runtime)
            snprintf(why, cap,
                     "the CUDA driver supports CUDA %s but this spkddp was built with the CUDA %s runtime: install a "
                     "driver for CUDA %s or newer, or build with a CUDA toolkit of at most %s (%s)",
                     d, r, r, d, cudaGetErrorName(e));
        else
            snprintf(why, cap, "the CUDA driver (CUDA %s) cannot start with the CUDA %s runtime: %s (%s)", d, r,
                     cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return -1;
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

extern "C" void spk_device_profile(int on) {
    const cudaError_t e = on ? cudaProfilerStart() : cudaProfilerStop();
    if (e != cudaSuccess) {
        fprintf(stderr, "spkddp: note: %s failed: %s\n", on ? "cudaProfilerStart" : "cudaProfilerStop",
                cudaGetErrorString(e));
        cudaGetLastError();
    }
}

extern "C" void spk_device_libraries(char *out, size_t cap) {
    int runtime = 0, driver = 0, nccl = 0, blas[3] = {0, 0, 0};
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);  // 0 when no driver library is installed: still worth the rest
    const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int i = 0; i < 3; i++) cublasGetProperty(parts[i], &blas[i]);
    ncclGetVersion(&nccl);
    const size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
    char r[16], d[32] = "none";
    cuda_version_text(runtime, r, sizeof r);
    if (driver) cuda_version_text(driver, d, sizeof d);
    snprintf(out, cap, "CUDA runtime %s (driver: %s%s), cuBLAS %d.%d.%d, cuDNN %zu.%zu.%zu, NCCL %d.%d.%d", r,
             driver ? "CUDA " : "", d, blas[0], blas[1], blas[2], dnn / 10000, dnn / 100 % 100, dnn % 100, nccl / 10000,
             nccl / 100 % 100, nccl % 100);
}
