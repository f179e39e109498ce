// The library context (kernels/cuda/context.h): one stream, one cuDNN and one cuBLAS handle
// bound to it, a cuBLAS workspace of our own (bitwise-reproducible GEMMs, see docs/cuda.md), a
// growable scratch buffer, and the device memory helpers. What also reaches the convolution
// plans (spk_cuda_shutdown, spk_cuda_set_tf32) is kernels/cuda/context_plans.cu, above both.
#include "kernels/cuda/context.h"

#include "kernels/cuda/cuda_check.h"

namespace {

// cuBLAS workspace: NVIDIA recommends 32 MiB on Hopper, 4 MiB before; take the larger.
const size_t kCublasWorkspaceBytes = (size_t)32 << 20;

struct Context {
    int initialised = 0;
    int device = -1;
    cudaStream_t stream = nullptr;
    cudnnHandle_t cudnn = nullptr;
    cublasHandle_t cublas = nullptr;
    void *cublas_ws = nullptr;
    void *scratch = nullptr;
    size_t scratch_bytes = 0;
};
Context g_ctx;

void require_init(const char *what) {
    if (!g_ctx.initialised)
        spk_die(SPK_EXIT_FAILURE, "%s was used before spk_cuda_init() selected a CUDA device", what);
}

}  // namespace

extern "C" int spk_cuda_init(int device) {
    if (g_ctx.initialised) {
        if (device == g_ctx.device) return 0;
        fprintf(stderr, "spkddp: the CUDA kernels already run on device %d; cannot switch to %d\n", g_ctx.device,
                device);
        return -1;
    }
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        fprintf(stderr, "spkddp: cannot use CUDA device %d: %s\n", device, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    cudaCheck(cudaStreamCreateWithFlags(&g_ctx.stream, cudaStreamNonBlocking));
    cudnnCheck(cudnnCreate(&g_ctx.cudnn));
    cudnnCheck(cudnnSetStream(g_ctx.cudnn, g_ctx.stream));
    cublasCheck(cublasCreate(&g_ctx.cublas));
    // cublasSetStream resets the workspace to cuBLAS's pool, so the stream goes first.
    cublasCheck(cublasSetStream(g_ctx.cublas, g_ctx.stream));
    cudaCheck(cudaMalloc(&g_ctx.cublas_ws, kCublasWorkspaceBytes));
    cublasCheck(cublasSetWorkspace(g_ctx.cublas, g_ctx.cublas_ws, kCublasWorkspaceBytes));
    // Plain fp32 FMA GEMMs: no TF32 tensor-core paths, no atomics.
    cublasCheck(cublasSetMathMode(g_ctx.cublas, CUBLAS_DEFAULT_MATH));
    cublasCheck(cublasSetAtomicsMode(g_ctx.cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    cublasCheck(cublasSetPointerMode(g_ctx.cublas, CUBLAS_POINTER_MODE_HOST));
    g_ctx.device = device;
    g_ctx.initialised = 1;
    return 0;
}

int spk_cuda_context_ready(void) { return g_ctx.initialised; }

void spk_cuda_context_release(void) {
    if (!g_ctx.initialised) return;
    cublasCheck(cublasDestroy(g_ctx.cublas));
    cudnnCheck(cudnnDestroy(g_ctx.cudnn));
    cudaCheck(cudaFree(g_ctx.cublas_ws));
    cudaCheck(cudaFree(g_ctx.scratch));
    cudaCheck(cudaStreamDestroy(g_ctx.stream));
    g_ctx = Context();
}

extern "C" struct CUstream_st *spk_cuda_stream(void) { return spk_cuda_stream_checked(); }

cudaStream_t spk_cuda_stream_checked(void) {
    require_init("a CUDA kernel");
    return g_ctx.stream;
}

cudnnHandle_t spk_cudnn_handle(void) {
    require_init("cuDNN");
    return g_ctx.cudnn;
}

cublasHandle_t spk_cublas_handle(void) {
    require_init("cuBLAS");
    return g_ctx.cublas;
}

void *spk_cuda_scratch(size_t bytes) {
    require_init("the CUDA scratch buffer");
    if (bytes > g_ctx.scratch_bytes) {
        // Work queued on the stream may still read the old buffer.
        cudaCheck(cudaStreamSynchronize(g_ctx.stream));
        cudaCheck(cudaFree(g_ctx.scratch));
        g_ctx.scratch = nullptr;
        g_ctx.scratch_bytes = 0;
        const size_t want = (bytes + 0xFFFFF) & ~(size_t)0xFFFFF;  // whole MiB
        cudaCheck(cudaMalloc(&g_ctx.scratch, want));
        g_ctx.scratch_bytes = want;
    }
    return g_ctx.scratch;
}

// ---- memory helpers -------------------------------------------------------------------------

extern "C" void *spk_cuda_malloc(size_t bytes) {
    require_init("spk_cuda_malloc");
    if (bytes == 0) return nullptr;
    void *p = nullptr;
    cudaCheck(cudaMalloc(&p, bytes));
    return p;
}

extern "C" void spk_cuda_free(void *p) {
    if (!p) return;
    // Queued work may still use p.
    cudaCheck(cudaStreamSynchronize(spk_cuda_stream_checked()));
    cudaCheck(cudaFree(p));
}

extern "C" void spk_cuda_memset0(void *p, size_t bytes) {
    if (bytes == 0) return;
    cudaCheck(cudaMemsetAsync(p, 0, bytes, spk_cuda_stream_checked()));
}

extern "C" void spk_cuda_upload(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return;
    cudaStream_t s = spk_cuda_stream_checked();
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    cudaCheck(cudaStreamSynchronize(s));
}

extern "C" void spk_cuda_download(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return;
    cudaStream_t s = spk_cuda_stream_checked();
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
}

extern "C" void spk_cuda_sync(void) { cudaCheck(cudaStreamSynchronize(spk_cuda_stream_checked())); }

void spk_cublas_set_tf32(int allow) {
    require_init("spk_cuda_set_tf32");
    cublasCheck(cublasSetMathMode(g_ctx.cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

extern "C" size_t spk_cuda_bytes_in_use(void) {
    require_init("spk_cuda_bytes_in_use");
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}
