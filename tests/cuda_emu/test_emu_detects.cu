// The stand-in against its own claims: a correct program runs alike in both scheduling
// orders, and each misuse it promises to catch is caught. `test_emu_detects CASE` runs one
// case; tests.cmake says what each must print.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <thread>

namespace {

const int kThreads = 128;

#define CHECK(call)                                                   \
    do {                                                              \
        cudaError_t e_ = (call);                                      \
        if (e_ != cudaSuccess) {                                      \
            printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                  \
        }                                                             \
    } while (0)

// out[b] = sum of in[b*n .. b*n+n) through a shared-memory tree, and the block's dynamic
// shared memory holds the partial sums' order statistics (a second reduction, max).
__global__ void block_sum(float* out, const float* in, int n) {
    __shared__ float sh[kThreads];
    extern __shared__ float dyn[];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += kThreads) acc += in[blockIdx.x * n + i];
    sh[threadIdx.x] = acc;
    dyn[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sh[threadIdx.x] += sh[threadIdx.x + s];
            dyn[threadIdx.x] = fmaxf(dyn[threadIdx.x], dyn[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = sh[0] + dyn[0];
}

// The same tree without the barriers: each round reads what another thread may not have
// written yet.
__global__ void racy_sum(float* out, const float* in) {
    __shared__ float sh[kThreads];
    sh[threadIdx.x] = in[blockIdx.x * kThreads + threadIdx.x];
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1)
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

__global__ void early_exit(float* out) {
    __shared__ float sh[kThreads];
    if (threadIdx.x >= 64) return;
    sh[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = sh[0];
}

// Only block 0 writes the shared array; every block reads it.
__global__ void shared_from_block0(float* out) {
    __shared__ float sh[kThreads];
    if (blockIdx.x == 0) sh[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * kThreads + threadIdx.x] = sh[threadIdx.x];
}

__global__ void fill(float* out, int n, float v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += blockDim.x * gridDim.x) out[i] = v;
}

__global__ void scale(float* y, const float* x, int n, float a) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i];
}

float* device_floats(const float* host, int n) {
    void* d = nullptr;
    CHECK(cudaMalloc(&d, sizeof(float) * n));
    if (host) CHECK(cudaMemcpyAsync(d, host, sizeof(float) * n, cudaMemcpyHostToDevice, nullptr));
    CHECK(cudaStreamSynchronize(nullptr));  // non-blocking streams do not wait for the legacy one
    return (float*)d;
}

void download(float* host, const float* dev, int n, cudaStream_t s) {
    CHECK(cudaMemcpyAsync(host, dev, sizeof(float) * n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
}

// Pinned host memory: an asynchronous upload, a kernel, an asynchronous download, then the host
// waits for the download's event before it reads (and before it writes the source again).
void pinned_round_trip(cudaStream_t s) {
    const int n = 256;
    float *h_in = nullptr, *h_out = nullptr;
    CHECK(cudaMallocHost((void**)&h_in, sizeof(float) * n));
    CHECK(cudaMallocHost((void**)&h_out, sizeof(float) * n));
    float* d = device_floats(nullptr, n);
    cudaEvent_t back;
    CHECK(cudaEventCreateWithFlags(&back, cudaEventDisableTiming));
    for (int i = 0; i < n; i++) h_in[i] = (float)i;
    CHECK(cudaMemcpyAsync(d, h_in, sizeof(float) * n, cudaMemcpyHostToDevice, s));
    scale<<<2, 64, 0, s>>>(d, d, n, 3.0f);
    CHECK(cudaMemcpyAsync(h_out, d, sizeof(float) * n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaEventRecord(back, s));
    CHECK(cudaEventSynchronize(back));
    h_in[0] = -1.0f;  // the upload is done: the source may change
    printf("pinned round trip: %g %g\n", h_out[1], h_out[n - 1]);
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
}

// A correct program: reductions with static and dynamic shared memory, a second stream that
// waits for the first through an event, and a pinned round trip.
int run_ok() {
    const int blocks = 5, n = 1000;
    float* in = (float*)malloc(sizeof(float) * blocks * n);
    for (int i = 0; i < blocks * n; i++) in[i] = (float)((i * 37) % 101) / 7.0f;
    float* d_in = device_floats(in, blocks * n);
    float* d_out = device_floats(nullptr, blocks);
    float* d_scaled = device_floats(nullptr, blocks);
    cudaStream_t a, b;
    cudaEvent_t done;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    block_sum<<<blocks, kThreads, kThreads * sizeof(float), a>>>(d_out, d_in, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaStreamWaitEvent(b, done, 0));
    scale<<<1, 64, 0, b>>>(d_scaled, d_out, blocks, 2.0f);
    float out[blocks];
    download(out, d_scaled, blocks, b);
    for (int k = 0; k < blocks; k++) printf("block %d: %.6f\n", k, out[k]);
    pinned_round_trip(a);
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_scaled));
    free(in);
    return 0;
}

int run_race() {
    const int blocks = 3;
    float in[blocks * kThreads];
    for (int i = 0; i < blocks * kThreads; i++) in[i] = 1.0f + (float)(i % 13);
    float* d_in = device_floats(in, blocks * kThreads);
    float* d_out = device_floats(nullptr, blocks);
    racy_sum<<<blocks, kThreads>>>(d_out, d_in);
    float out[blocks];
    download(out, d_out, blocks, nullptr);
    for (int k = 0; k < blocks; k++) printf("block %d: %.1f\n", k, out[k]);
    return 0;
}

int run_missing_wait() {
    const int n = 4096;
    float* d_x = device_floats(nullptr, n);
    float* d_y = device_floats(nullptr, n);
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    fill<<<4, 256, 0, a>>>(d_x, n - 1, 3.0f);
    scale<<<4, 256, 0, b>>>(d_y, d_x, n, 2.0f);  // forgot: b waits for a
    float y[n];
    download(y, d_y, n, b);
    if (y[0] != 6.0f) {
        printf("stale: stream b read x before stream a wrote it (y[0] = %g)\n", y[0]);
        return 1;
    }
    printf("y[0] = %g\n", y[0]);
    return 0;
}

// A convolution with a dilation the FFT algorithm refuses, and with too small a workspace.
int run_cudnn_misuse() {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    cudnnCreate(&h);
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&c);
    cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 2, 1, 10);
    cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 3, 2, 1, 3);
    cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 2, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH);
    cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 1, 6);
    float *dx = device_floats(nullptr, 20), *dw = device_floats(nullptr, 18), *dy = device_floats(nullptr, 18);
    const float one = 1.0f, zero = 0.0f;
    size_t need = 0;
    cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need);
    float* ws = device_floats(nullptr, 64);
    const cudnnStatus_t fft =
        cudnnConvolutionForward(h, &one, x, dx, w, dw, c, CUDNN_CONVOLUTION_FWD_ALGO_FFT, ws, 256, &zero, y, dy);
    const cudnnStatus_t small = cudnnConvolutionForward(
        h, &one, x, dx, w, dw, c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need - 4, &zero, y, dy);
    printf("dilated FFT: %s, workspace %zu of %zu bytes: %s\n", cudnnGetErrorString(fft), need - 4, need,
           cudnnGetErrorString(small));
    return fft == CUDNN_STATUS_NOT_SUPPORTED && small == CUDNN_STATUS_BAD_PARAM ? 0 : 1;
}

}  // namespace

extern "C" int emu_selftest(const char* what) {
    if (!strcmp(what, "ok")) return run_ok();
    if (!strcmp(what, "race")) return run_race();
    if (!strcmp(what, "missing_wait")) return run_missing_wait();
    if (!strcmp(what, "host_pointer")) {
        static float host[kThreads];
        fill<<<1, 32>>>(host, 10, 1.0f);
        return 0;
    }
    if (!strcmp(what, "host_access")) {
        float* d = device_floats(nullptr, 16);
        printf("%g\n", d[3]);
        return 0;
    }
    // A host thread started before device memory existed (a data loader, say) is denied too:
    // with a protection key the right is each thread's own.
    if (!strcmp(what, "host_access_thread")) {
        float* volatile shared = nullptr;
        std::thread reader([&shared] {
            while (!shared) std::this_thread::yield();
            printf("%g\n", shared[3]);
        });
        shared = device_floats(nullptr, 16);
        reader.join();
        return 0;
    }
    if (!strcmp(what, "divergent_barrier")) {
        float* d = device_floats(nullptr, kThreads);
        early_exit<<<1, kThreads>>>(d);
        float out[kThreads];
        download(out, d, kThreads, nullptr);
        return 0;
    }
    if (!strcmp(what, "overrun")) {
        float* d = device_floats(nullptr, 100);
        fill<<<1, 64>>>(d, 100, 1.0f);  // writes d[100] too: `<=`
        float out[100];
        download(out, d, 100, nullptr);
        return 0;
    }
    if (!strcmp(what, "fresh_memory")) {  // cudaMalloc'd memory nobody wrote reads as garbage
        float* d = device_floats(nullptr, 4);
        float out[4];
        download(out, d, 4, nullptr);
        printf("fresh device memory reads %g\n", out[0]);
        return 0;
    }
    if (!strcmp(what, "fresh_shared")) {  // a block does not see the shared memory of the last one
        float* d = device_floats(nullptr, 2 * kThreads);
        shared_from_block0<<<2, kThreads>>>(d);
        float out[2 * kThreads];
        download(out, d, 2 * kThreads, nullptr);
        printf("block 0 reads %g, block 1 reads %g\n", out[0], out[kThreads]);
        return 0;
    }
    if (!strcmp(what, "cudnn_misuse")) return run_cudnn_misuse();
    if (!strcmp(what, "pinned_overwrite") || !strcmp(what, "pinned_early_read")) {
        float* h = nullptr;
        CHECK(cudaMallocHost((void**)&h, sizeof(float) * 64));
        float* d = device_floats(nullptr, 64);
        cudaStream_t s;
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        h[5] = 1.0f;
        if (!strcmp(what, "pinned_overwrite")) {  // the next batch written before the upload ran
            CHECK(cudaMemcpyAsync(d, h, sizeof(float) * 64, cudaMemcpyHostToDevice, s));
            h[5] = 2.0f;
        } else {  // a result read before the download ran
            CHECK(cudaMemcpyAsync(h, d, sizeof(float) * 64, cudaMemcpyDeviceToHost, s));
            printf("%g\n", h[5]);
        }
        CHECK(cudaStreamSynchronize(s));
        return 0;
    }
    if (!strcmp(what, "bad_config")) {
        float* d = device_floats(nullptr, 16);
        fill<<<1, 2048>>>(d, 15, 1.0f);
        const cudaError_t e = cudaGetLastError();
        printf("launch of 2048 threads per block: %s\n", cudaGetErrorName(e));
        return e == cudaErrorInvalidConfiguration ? 0 : 1;
    }
    printf("unknown case %s\n", what);
    return 2;
}
