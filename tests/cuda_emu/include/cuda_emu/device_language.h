// CUDA C++'s device-side language on the host, for the rewritten .cu files (cuda_runtime.h
// includes it under __CUDACC__). tests/cuda_emu/rewrite_cuda_source.cmake has turned
//   kernel<<<grid, block, shared_bytes, stream>>>(args)
// into
//   SPK_EMU_KERNEL(kernel) * SPK_EMU_LAUNCH("kernel", grid, block, shared_bytes, stream)(args)
// The call binds first: the arguments are evaluated at the launch and kept; operator* below
// joins them with a lambda that calls the kernel with them, so template arguments are deduced
// and arguments converted as in a call (but for 0 or NULL as a pointer: kept as an integer
// first, it no longer converts; write nullptr). It also appended SPK_EMU_SHARED(name) to every
// static __shared__ declaration and turned `extern __shared__ T name[];` into a
// DynamicShared<T>. Kernels are plain functions; the runtime runs each block's threads as
// fibers that switch at __syncthreads.
#pragma once
#include <math.h>  // CUDA C++ has the C math functions (fmaxf, expf, ...) in scope

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// One block runs at a time, so a function-local static is exactly one block's shared memory.
#define __shared__ static

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace spk_emu {

// The running thread's coordinates; the block runner sets them at every switch.
struct ThreadCoords {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
extern ThreadCoords g_coords;

// One launched kernel with its arguments; each thread of each block calls run_thread().
class KernelBody {
public:
    virtual ~KernelBody() = default;
    virtual void run_thread() const = 0;
};

struct LaunchSite {
    const char* kernel;
    const char* file;
    int line;
};

struct PointerArgument {
    int position;  // among the kernel's parameters, from 0
    const void* value;
};

// Queues the kernel on `stream` after checking the configuration and that every pointer
// argument is NULL or device memory (runtime/kernel_launch.cpp).
void launch_kernel(const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   KernelBody* body, const PointerArgument* pointers, int n_pointers);
void sync_threads(const char* file, int line);
void* dynamic_shared_memory();
// Fills a static __shared__ array with garbage when the first thread of a block declares it,
// as a new block's shared memory holds whatever the last one left there.
void shared_block_start(void* p, size_t bytes, unsigned long long* block_serial);

template <typename K, typename... A>
class KernelCall final : public KernelBody {
public:
    KernelCall(K kernel, std::tuple<A...> args) : kernel_(kernel), args_(std::move(args)) {}
    void run_thread() const override { std::apply(kernel_, args_); }  // by value: per thread

private:
    K kernel_;
    std::tuple<A...> args_;
};

template <typename... A>
struct PendingLaunch {
    LaunchSite site;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    std::tuple<A...> args;
};

struct Launcher {
    LaunchSite site;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    template <typename... A>
    PendingLaunch<std::decay_t<A>...> operator()(A&&... a) const {
        return {site, grid, block, shared_bytes, stream, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
    }
};

inline Launcher launcher(const char* kernel, const char* file, int line, dim3 grid, dim3 block, size_t shared_bytes = 0,
                         cudaStream_t stream = nullptr) {
    return {{kernel, file, line}, grid, block, shared_bytes, stream};
}

template <typename T>
void collect_pointer(const T& v, int position, PointerArgument* out, int* n) {
    if constexpr (std::is_pointer_v<T>) out[(*n)++] = {position, (const void*)v};
}

template <typename K, typename... A, size_t... I>
void launch_with(K kernel, PendingLaunch<A...>& l, std::index_sequence<I...>) {
    PointerArgument pointers[sizeof...(A) + 1];
    int n = 0;
    (collect_pointer(std::get<I>(l.args), (int)I, pointers, &n), ...);
    launch_kernel(l.site, l.grid, l.block, l.shared_bytes, l.stream, new KernelCall<K, A...>(kernel, std::move(l.args)),
                  pointers, n);
}

// K: the lambda of SPK_EMU_KERNEL (or a kernel's address).
template <typename K, typename... A>
void operator*(K kernel, PendingLaunch<A...>&& l) {
    launch_with(kernel, l, std::index_sequence_for<A...>{});
}

// `extern __shared__ T name[];`: the block's dynamic shared memory, as a T array.
template <typename T>
struct DynamicShared {
    operator T*() const { return static_cast<T*>(dynamic_shared_memory()); }
    T& operator[](size_t i) const { return static_cast<T*>(dynamic_shared_memory())[i]; }
};

struct SharedTouch {
    SharedTouch(void* p, size_t bytes, unsigned long long* serial) { shared_block_start(p, bytes, serial); }
};

}  // namespace spk_emu

// Round-to-nearest float addition and subtraction that are never contracted into an FMA or
// reassociated: defined out of line (runtime/device_math.cpp), so that the host compiler
// cannot fuse them with a multiplication around the call, as nvcc does not.
float __fadd_rn(float a, float b);
float __fsub_rn(float a, float b);

#define threadIdx (static_cast<const uint3&>(::spk_emu::g_coords.thread_idx))
#define blockIdx (static_cast<const uint3&>(::spk_emu::g_coords.block_idx))
#define blockDim (static_cast<const dim3&>(::spk_emu::g_coords.block_dim))
#define gridDim (static_cast<const dim3&>(::spk_emu::g_coords.grid_dim))
#define __syncthreads() ::spk_emu::sync_threads(__FILE__, __LINE__)

#define SPK_EMU_KERNEL(...) [](const auto&... spk_emu_args) { __VA_ARGS__(spk_emu_args...); }
#define SPK_EMU_LAUNCH(kernel_name, ...) ::spk_emu::launcher(kernel_name, __FILE__, __LINE__, __VA_ARGS__)
#define SPK_EMU_SHARED(name)                         \
    static unsigned long long spk_emu_serial_##name; \
    ::spk_emu::SharedTouch spk_emu_touch_##name(&(name), sizeof(name), &spk_emu_serial_##name)
