// The CUDA runtime API calls (cuda_runtime.h): devices, errors, memory, copies, streams, events.
// Copies follow CUDA's rules: with pageable host memory, host-to-device takes the source at the
// call and device-to-host returns when the copy (and the work queued before it) is done; with
// pinned memory (cudaMallocHost) both are asynchronous and touch the host memory when they run
// (pinned_memory.h guards it meanwhile).
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "config.h"
#include "cuda_profiler_api.h"
#include "cuda_runtime.h"
#include "device_memory.h"
#include "diag.h"
#include "digest.h"
#include "pinned_memory.h"
#include "runtime_state.h"
#include "streams.h"

namespace spk_emu {
namespace {

int g_device = 0;
cudaError_t g_last_error = cudaSuccess;

class HostToDevice final : public Operation {
public:
    HostToDevice(void* dst, const void* src, size_t bytes)
        : dst_(dst), staged_(static_cast<const char*>(src), static_cast<const char*>(src) + bytes) {}
    void run() override { memcpy(dst_, staged_.data(), staged_.size()); }

private:
    void* dst_;
    std::vector<char> staged_;
};

class DeviceCopy final : public Operation {  // device to device, or device to host
public:
    DeviceCopy(void* dst, const void* src, size_t bytes, bool to_host)
        : dst_(dst), src_(src), bytes_(bytes), to_host_(to_host) {}
    void run() override {
        memmove(dst_, src_, bytes_);
        if (to_host_) digest_add(dst_, bytes_);
    }

private:
    void* dst_;
    const void* src_;
    size_t bytes_;
    bool to_host_;
};

// Between pinned host memory and the device: the host side is touched when the copy runs.
class PinnedCopy final : public Operation {
public:
    PinnedCopy(void* dst, const void* src, size_t bytes, bool to_host)
        : dst_(dst), src_(src), bytes_(bytes), to_host_(to_host) {
        pinned_hold(host(), to_host_);
    }
    void run() override {
        PinnedAccess access(host());
        memcpy(dst_, src_, bytes_);
        if (to_host_) digest_add(dst_, bytes_);
        pinned_release(host(), to_host_);
    }

private:
    const void* host() const { return to_host_ ? dst_ : src_; }
    void* dst_;
    const void* src_;
    size_t bytes_;
    bool to_host_;
};

class Memset final : public Operation {
public:
    Memset(void* p, int value, size_t bytes) : p_(p), value_(value), bytes_(bytes) {}
    void run() override { memset(p_, value_, bytes_); }

private:
    void* p_;
    int value_;
    size_t bytes_;
};

bool device_exists(int d) { return d >= 0 && d < config().devices; }

cudaError_t invalid(const char* fmt, const char* call, const char* why) {
    note(fmt, call, why);
    return report(cudaErrorInvalidValue);
}

}  // namespace

int current_device() { return g_device; }
void set_current_device(int device) { g_device = device; }

cudaError_t report(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}

cudaError_t take_last_error() {
    const cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}

}  // namespace spk_emu

using namespace spk_emu;

extern "C" {

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidMemcpyDirection:
            return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorInsufficientDriver:
            return "cudaErrorInsufficientDriver";
        case cudaErrorNoDevice:
            return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle:
            return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady:
            return "cudaErrorNotReady";
        case cudaErrorIllegalAddress:
            return "cudaErrorIllegalAddress";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidMemcpyDirection:
            return "invalid copy direction for memcpy";
        case cudaErrorInsufficientDriver:
            return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorNoDevice:
            return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle:
            return "invalid resource handle";
        case cudaErrorNotReady:
            return "device not ready";
        case cudaErrorIllegalAddress:
            return "an illegal memory access was encountered";
    }
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) { return take_last_error(); }

cudaError_t cudaDriverGetVersion(int* version) {
    if (!version) return report(cudaErrorInvalidValue);
    *version = config().driver_version;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
    if (!version) return report(cudaErrorInvalidValue);
    *version = kRuntimeVersion;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return report(cudaErrorInvalidValue);
    *count = 0;
    if (config().driver_version < kRuntimeVersion) return report(cudaErrorInsufficientDriver);
    *count = config().devices;
    return config().devices > 0 ? cudaSuccess : report(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
    if (!device_exists(device)) return report(cudaErrorInvalidDevice);
    set_current_device(device);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
    if (!device_exists(device)) return report(cudaErrorInvalidDevice);
    if (!pci_bus_id || len < 13) return report(cudaErrorInvalidValue);
    snprintf(pci_bus_id, (size_t)len, "0000:%02x:00.0", 0x10 + device);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (!device_exists(device)) return report(cudaErrorInvalidDevice);
    if (!prop) return report(cudaErrorInvalidValue);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "spkddp CUDA stand-in on the CPU (tests/cuda_emu)");
    prop->totalGlobalMem = device_bytes_total();
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->maxThreadsPerBlock = 1024;
    prop->sharedMemPerBlock = 48 << 10;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    if (!ptr) return report(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (!device_exists(current_device())) return report(cudaErrorNoDevice);
    if (bytes == 0) return cudaSuccess;
    *ptr = device_alloc(bytes, current_device());
    return *ptr ? cudaSuccess : report(cudaErrorMemoryAllocation);
}

// Like CUDA, waits for all queued work first (so nothing queued can still use the memory).
cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    if (!find_allocation(ptr)) {
        note("cudaFree(%p): %s", ptr,
             in_arena(ptr) ? "not the start of a live allocation (freed twice?)" : "host memory");
        return report(cudaErrorInvalidValue);
    }
    synchronize_device();
    if (!device_free(ptr)) {
        note("cudaFree(%p): not the start of an allocation", ptr);
        return report(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
    if (!ptr) return report(cudaErrorInvalidValue);
    *ptr = pinned_alloc(bytes);
    return *ptr ? cudaSuccess : report(cudaErrorMemoryAllocation);
}

// Like CUDA, waits for all queued work first.
cudaError_t cudaFreeHost(void* ptr) {
    if (!ptr) return cudaSuccess;
    synchronize_device();
    if (!pinned_free(ptr)) {
        note("cudaFreeHost(%p): not the start of a block from cudaMallocHost", ptr);
        return report(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    if (!free_bytes || !total_bytes) return report(cudaErrorInvalidValue);
    *total_bytes = device_bytes_total();
    *free_bytes = device_bytes_total() - device_bytes_in_use();
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s) return report(cudaErrorInvalidResourceHandle);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return report(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault)
        kind = in_arena(src) ? (in_arena(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                             : (in_arena(dst) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    char why[256];
    if (dst_device ? !find_range(dst, bytes, why, sizeof why) : in_arena(dst)) {
        if (!dst_device) snprintf(why, sizeof why, "%p is device memory", dst);
        return invalid("%s: the destination does not fit the copy's direction: %s", "cudaMemcpyAsync", why);
    }
    if (src_device ? !find_range(src, bytes, why, sizeof why) : in_arena(src)) {
        if (!src_device) snprintf(why, sizeof why, "%p is device memory", src);
        return invalid("%s: the source does not fit the copy's direction: %s", "cudaMemcpyAsync", why);
    }
    if (kind == cudaMemcpyHostToHost) {
        synchronize(s);
        memmove(dst, src, bytes);
    } else if (kind == cudaMemcpyHostToDevice && is_pinned(src, bytes)) {
        enqueue(s, std::make_unique<PinnedCopy>(dst, src, bytes, false));
    } else if (kind == cudaMemcpyDeviceToHost && is_pinned(dst, bytes)) {
        enqueue(s, std::make_unique<PinnedCopy>(dst, src, bytes, true));
    } else if (kind == cudaMemcpyHostToDevice) {
        enqueue(s, std::make_unique<HostToDevice>(dst, src, bytes));
    } else {
        enqueue(s, std::make_unique<DeviceCopy>(dst, src, bytes, kind == cudaMemcpyDeviceToHost));
        if (kind == cudaMemcpyDeviceToHost) synchronize(s);  // pageable destination: synchronous
    }
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s) return report(cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    char why[256];
    if (!find_range(ptr, bytes, why, sizeof why)) return invalid("%s: %s", "cudaMemsetAsync", why);
    enqueue(s, std::make_unique<Memset>(ptr, value, bytes));
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
    if (!stream || (flags & ~(unsigned)cudaStreamNonBlocking)) return report(cudaErrorInvalidValue);
    if (!device_exists(current_device())) return report(cudaErrorNoDevice);
    *stream = stream_create(flags, current_device());
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s || !stream) return report(cudaErrorInvalidResourceHandle);
    stream_destroy(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s) return report(cudaErrorInvalidResourceHandle);
    synchronize(s);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s || !event_valid(event)) return report(cudaErrorInvalidResourceHandle);
    if (flags != 0) return report(cudaErrorInvalidValue);
    enqueue_wait(s, event_marker(event));
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    if (!event || (flags & ~(unsigned)cudaEventDisableTiming)) return report(cudaErrorInvalidValue);
    *event = event_create(!(flags & cudaEventDisableTiming));
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (!event_valid(event)) return report(cudaErrorInvalidResourceHandle);
    event_destroy(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    CUstream_st* s = stream_from_handle(stream);
    if (!s || !event_valid(event)) return report(cudaErrorInvalidResourceHandle);
    event_record(event, s);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    if (!event_valid(event)) return report(cudaErrorInvalidResourceHandle);
    return event_query(event) ? cudaSuccess : cudaErrorNotReady;  // not ready is no error
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (!event_valid(event)) return report(cudaErrorInvalidResourceHandle);
    event_synchronize(event);
    return cudaSuccess;
}

cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !event_valid(start) || !event_valid(end)) return report(cudaErrorInvalidResourceHandle);
    if (!marker_done(event_marker(start)) || !marker_done(event_marker(end))) return cudaErrorNotReady;
    return event_elapsed_ms(start, end, ms) ? cudaSuccess : report(cudaErrorInvalidResourceHandle);
}

}  // extern "C"
