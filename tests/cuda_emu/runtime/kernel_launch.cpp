// Kernel launches: the configuration checks CUDA makes at launch (reported by
// cudaGetLastError), the pointer checks it does not make (a host or freed pointer would fault
// on the GPU; here it ends the process naming the kernel and the argument), then the launch
// is queued on its stream.
#include <cstdio>
#include <memory>
#include <vector>

#include "block_runner.h"
#include "cuda_emu/device_language.h"
#include "device_memory.h"
#include "diag.h"
#include "runtime_state.h"
#include "streams.h"

namespace spk_emu {
namespace {

const size_t kMaxSharedBytes = 48 << 10;  // without cudaFuncSetAttribute opt-in

class KernelOp final : public Operation {
public:
    KernelOp(const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes, KernelBody* body,
             std::vector<const Allocation*> touched)
        : site_(site),
          grid_(grid),
          block_(block),
          shared_bytes_(shared_bytes),
          body_(body),
          touched_(std::move(touched)) {}

    void run() override {
        run_grid(*body_, site_, grid_, block_, shared_bytes_);
        char after[512];
        snprintf(after, sizeof after, "kernel %s (launched at %s:%d)", site_.kernel, site_.file, site_.line);
        for (const Allocation* a : touched_) check_redzone(*a, after);
    }

private:
    LaunchSite site_;
    dim3 grid_, block_;
    size_t shared_bytes_;
    std::unique_ptr<KernelBody> body_;
    std::vector<const Allocation*> touched_;  // stays valid: cudaFree waits for queued work
};

bool valid_configuration(dim3 grid, dim3 block, size_t shared_bytes) {
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535 &&
           block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= 1024 && block.y <= 1024 && block.z <= 64 &&
           threads <= 1024 && shared_bytes <= kMaxSharedBytes;
}

}  // namespace

void launch_kernel(const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   KernelBody* body, const PointerArgument* pointers, int n_pointers) {
    std::unique_ptr<KernelBody> owned(body);
    CUstream_st* s = stream_from_handle(stream);
    if (!s) {
        note("kernel %s launched at %s:%d on %p, which is not a stream", site.kernel, site.file, site.line,
             (void*)stream);
        report(cudaErrorInvalidResourceHandle);
        return;
    }
    if (!valid_configuration(grid, block, shared_bytes)) {
        note("kernel %s launched at %s:%d with grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of shared memory",
             site.kernel, site.file, site.line, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
        report(cudaErrorInvalidConfiguration);
        return;
    }
    std::vector<const Allocation*> touched;
    for (int i = 0; i < n_pointers; i++) {
        const void* p = pointers[i].value;
        if (!p) continue;
        char what[512];
        snprintf(what, sizeof what, "kernel %s launched at %s:%d, argument %d", site.kernel, site.file, site.line,
                 pointers[i].position + 1);
        // A pointer may point just past its allocation's end (a loop bound), hence 0 bytes.
        const Allocation& a = require_range(p, 0, what);
        const int device = stream_device(s) < 0 ? current_device() : stream_device(s);
        if (a.device != device)
            fail("%s: the pointer is memory of device %d, the stream's device is %d", what, a.device, device);
        touched.push_back(&a);
    }
    enqueue(s, std::make_unique<KernelOp>(site, grid, block, shared_bytes, owned.release(), std::move(touched)));
}

}  // namespace spk_emu
