// cuBLAS (cublas_v2.h): handles with a stream, workspace and math mode; column-major SGEMM,
// strided-batched SGEMM and their GemmEx forms with bf16 A and B as plain loops with one fp32 accumulator per element, summed in k
// order (deterministic, like cuBLAS without atomics). The operands' extents are checked
// against their allocations (cuBLAS does not, the GPU would read or write out of bounds), and
// so is C against A and B (an in-place GEMM is undefined).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "cublas_v2.h"
#include "device_memory.h"
#include "diag.h"
#include "streams.h"
#include "tf32.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace spk_emu {
namespace {

std::set<cublasContext*> g_handles;

struct Operand {
    const void* p;
    int rows, cols, ld;  // as stored, column-major
    long long stride;
    bool bf16 = false;  // bf16 elements (GemmEx), else float32

    size_t elem() const { return bf16 ? sizeof(uint16_t) : sizeof(float); }
    // element i of batch q, as float32 (a bf16 value is the upper half of its float32's bits)
    float at(int q, size_t i) const {
        const size_t o = (size_t)q * stride + i;
        if (!bf16) return ((const float*)p)[o];
        const uint32_t u = (uint32_t)((const uint16_t*)p)[o] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
};

struct Gemm {
    cublasOperation_t ta, tb;
    int m, n, k, batch;
    float alpha, beta;
    Operand a, b, c;
    bool tf32;
};

class GemmOp final : public Operation {
public:
    explicit GemmOp(const Gemm& g) : g_(g) {}
    void run() override {
        const Gemm& g = g_;
        for (int q = 0; q < g.batch; q++) {
            float* C = (float*)const_cast<void*>(g.c.p) + q * g.c.stride;
            for (int j = 0; j < g.n; j++)
                for (int i = 0; i < g.m; i++) {
                    float acc = 0.0f;
                    for (int l = 0; l < g.k; l++) {
                        float x = g.a.at(q, g.ta == CUBLAS_OP_N ? i + (size_t)l * g.a.ld : l + (size_t)i * g.a.ld);
                        float y = g.b.at(q, g.tb == CUBLAS_OP_N ? l + (size_t)j * g.b.ld : j + (size_t)l * g.b.ld);
                        if (g.tf32) x = round_tf32(x), y = round_tf32(y);
                        acc = std::fma(x, y, acc);
                    }
                    float& c = C[i + (size_t)j * g.c.ld];
                    c = g.beta == 0.0f ? g.alpha * acc : g.alpha * acc + g.beta * c;  // beta 0: C unread
                }
        }
    }

private:
    Gemm g_;
};

size_t extent_bytes(const Operand& o, int batch) {
    if (o.rows == 0 || o.cols == 0 || batch == 0) return 0;
    return ((size_t)o.ld * (o.cols - 1) + o.rows + (size_t)o.stride * (batch - 1)) * o.elem();
}

void check_operand(const Operand& o, int batch, const char* name) {
    char what[64];
    snprintf(what, sizeof what, "cuBLAS SGEMM operand %s", name);
    if (extent_bytes(o, batch)) require_range(o.p, extent_bytes(o, batch), what);
}

bool overlaps(const Operand& x, const Operand& y, int batch) {
    const char *x0 = (const char*)x.p, *y0 = (const char*)y.p;
    const size_t xb = extent_bytes(x, batch), yb = extent_bytes(y, batch);
    return xb && yb && x0 < y0 + yb && y0 < x0 + xb;
}

cublasStatus_t invalid(const char* why) {
    note("cuBLAS: %s", why);
    return CUBLAS_STATUS_INVALID_VALUE;
}

// bf16: A and B hold bf16 elements (GemmEx), C float32.
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float* alpha, const void* A, int lda, long long sa, const void* B, int ldb, long long sb,
                    const float* beta, float* C, int ldc, long long sc, int batch, bool bf16 = false) {
    if (!g_handles.count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ta == CUBLAS_OP_C || tb == CUBLAS_OP_C) return invalid("CUBLAS_OP_C is not emulated");
    if (m < 0 || n < 0 || k < 0 || batch < 0) return invalid("negative m, n, k or batch count");
    Gemm g{ta, tb, m, n, k, batch, 0.0f, 0.0f, {}, {}, {}, h->math == CUBLAS_TF32_TENSOR_OP_MATH};
    g.a = {A, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, sa, bf16};
    g.b = {B, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, sb, bf16};
    if (bf16) g.tf32 = false;  // bf16 products are exact in float32
    g.c = {C, m, n, ldc, sc};
    if (lda < (g.a.rows > 1 ? g.a.rows : 1) || ldb < (g.b.rows > 1 ? g.b.rows : 1) || ldc < (m > 1 ? m : 1))
        return invalid("a leading dimension is smaller than its matrix's rows");
    if (h->pointer_mode != CUBLAS_POINTER_MODE_HOST) {
        note("cuBLAS: CUBLAS_POINTER_MODE_DEVICE is not emulated");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!alpha || !beta) return invalid("alpha or beta is NULL");
    if (in_arena(alpha) || in_arena(beta))
        fail("cuBLAS SGEMM: alpha/beta are device memory but the pointer mode is CUBLAS_POINTER_MODE_HOST");
    g.alpha = *alpha;  // host scalars are read at the call
    g.beta = *beta;
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    CUstream_st* s = stream_from_handle(h->stream);
    if (!s) fail("cuBLAS: the handle's stream was destroyed");
    check_operand(g.a, batch, "A");
    check_operand(g.b, batch, "B");
    check_operand(g.c, batch, "C");
    if (overlaps(g.c, g.a, batch) || overlaps(g.c, g.b, batch))
        fail("cuBLAS SGEMM: C overlaps A or B (an in-place GEMM is undefined)");
    if (batch > 1 && sc != 0 && (long long)ldc * (n - 1) + m > sc)
        fail("cuBLAS SGEMM: the batches of C overlap (strideC %lld < one matrix)", sc);
    enqueue(s, std::make_unique<GemmOp>(g));
    return CUBLAS_STATUS_SUCCESS;
}

// The GemmEx forms spkddp calls: bf16 A and B, float32 C, float32 compute.
cublasStatus_t gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const void* alpha, const void* A, cudaDataType_t at, int lda, long long sa, const void* B,
                       cudaDataType_t bt, int ldb, long long sb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                       long long sc, int batch, cublasComputeType_t compute) {
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F) {
        note("cuBLAS GemmEx: only bf16 A and B, float32 C and CUBLAS_COMPUTE_32F are emulated");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return gemm(h, ta, tb, m, n, k, (const float*)alpha, A, lda, sa, B, ldb, sb, (const float*)beta, (float*)C, ldc, sc,
                batch, true);
}

}  // namespace
}  // namespace spk_emu

using namespace spk_emu;

extern "C" {

const char* cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:
            return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR:
            return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS:
            return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "the GPU program failed to execute";
        case CUBLAS_STATUS_INTERNAL_ERROR:
            return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "the functionality requested is not supported";
    }
    return "unknown error";
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    *value = type == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext;
    g_handles.insert(*handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!g_handles.erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream_from_handle(stream)) return invalid("cublasSetStream: not a stream");
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

// The workspace only has to be device memory of that size: the loops need none, so its pages
// are given back (it is cuBLAS's alone).
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
    if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes) {
        require_range(workspace, bytes, "cublasSetWorkspace");
        device_discard(workspace, bytes);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH) return invalid("unknown math mode");
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode) {
    if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    (void)mode;  // the loops never use atomics
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (!g_handles.count(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC, int batchCount) {
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                batchCount);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    (void)algo;  // one loop for every algorithm
    return gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0,
                   1, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType_t Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType_t Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    (void)algo;
    return gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                   Ctype, ldc, strideC, batchCount, computeType);
}

}  // extern "C"
