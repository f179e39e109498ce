// cuDNN's legacy convolution API (cudnn.h): handles, descriptors, the v7 heuristics over the
// menu of conv_algorithms.cpp, workspace sizes and the three convolution passes, which check
// their arguments as cuDNN does (status codes) and what cuDNN leaves to the GPU (extents,
// overlaps: the process ends), then queue the loops of conv_math.cpp. Descriptors are read at
// the call, as cuDNN does. The workspace is filled with garbage before each pass, so a
// workspace that overlaps data the caller still needs shows up.
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "config.h"
#include "conv_algorithms.h"
#include "conv_math.h"
#include "cudnn.h"
#include "device_memory.h"
#include "diag.h"
#include "streams.h"

struct cudnnContext {
    cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
    bool set = false;
    int n = 0, c = 0, h = 0, w = 0;
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
};
struct cudnnFilterStruct {
    bool set = false;
    int k = 0, c = 0, h = 0, w = 0;
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;  // NHWC: (K, R, S, C)
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
};
struct cudnnConvolutionStruct {
    bool set = false;
    int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace spk_emu {
namespace {

std::set<cudnnContext*> g_handles;
std::set<void*> g_descriptors;

cudnnStatus_t bad(const char* fmt, const char* a = "", const char* b = "") {
    note(fmt, a, b);
    return CUDNN_STATUS_BAD_PARAM;
}

template <typename D>
cudnnStatus_t create(D** d) {
    if (!d) return CUDNN_STATUS_BAD_PARAM;
    *d = new D;
    g_descriptors.insert(*d);
    return CUDNN_STATUS_SUCCESS;
}

template <typename D>
cudnnStatus_t destroy(D* d) {
    if (!d) return CUDNN_STATUS_SUCCESS;
    if (!g_descriptors.erase(d)) return bad("destroying a descriptor that does not exist");
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

template <typename D>
bool valid(const D* d) {
    return d && g_descriptors.count((void*)d) && d->set;
}

cudnnStatus_t max_count(cudnnHandle_t h, int* count, int n) {
    if (!g_handles.count(h) || !count) return CUDNN_STATUS_BAD_PARAM;
    *count = n;
    return CUDNN_STATUS_SUCCESS;
}

// The layouts and data types the stand-in runs (bfloat16 with float compute only: the
// convolution descriptor's compute type is float).
bool emulated(cudnnTensorFormat_t format, cudnnDataType_t type) {
    return (format == CUDNN_TENSOR_NCHW || format == CUDNN_TENSOR_NHWC) &&
           (type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_BFLOAT16);
}

int out_dim(int in, int pad, int stride, int dil, int taps) {
    return (in + 2 * pad - (dil * (taps - 1) + 1)) / stride + 1;
}

// The shape of a convolution from its descriptors, with cuDNN's consistency checks.
cudnnStatus_t shape_of(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                       cudnnTensorDescriptor_t y, ConvShape* g) {
    if (!valid(x) || !valid(w) || !valid(conv) || !valid(y)) return bad("a descriptor is not created or not set");
    if (x->c != w->c) return bad("the input's channels differ from the filter's");
    if (x->type != w->type || y->type != x->type) return bad("the tensors and the filter have different data types");
    *g = ConvShape{};
    g->n = x->n, g->c = x->c, g->h = x->h, g->w = x->w;
    g->k = w->k, g->r = w->h, g->s = w->w;
    g->pad_h = conv->pad_h, g->pad_w = conv->pad_w, g->stride_h = conv->u, g->stride_w = conv->v;
    g->dil_h = conv->dil_h, g->dil_w = conv->dil_w;
    g->flip = conv->mode == CUDNN_CONVOLUTION;
    g->x_nhwc = x->format == CUDNN_TENSOR_NHWC, g->y_nhwc = y->format == CUDNN_TENSOR_NHWC;
    g->w_nhwc = w->format == CUDNN_TENSOR_NHWC;
    g->bf16 = x->type == CUDNN_DATA_BFLOAT16;
    g->oh = out_dim(x->h, conv->pad_h, conv->u, conv->dil_h, w->h);
    g->ow = out_dim(x->w, conv->pad_w, conv->v, conv->dil_w, w->w);
    if (g->oh <= 0 || g->ow <= 0) return bad("the filter is larger than the padded input");
    if (y->n != x->n || y->c != w->k || y->h != g->oh || y->w != g->ow)
        return bad("the output descriptor does not have the convolution's output shape");
    return CUDNN_STATUS_SUCCESS;
}

template <typename Perf>
cudnnStatus_t heuristics(ConvPass pass, cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                         cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int requested, int* returned,
                         Perf* perf) {
    if (!g_handles.count(h)) return CUDNN_STATUS_NOT_INITIALIZED;
    if (!returned || !perf || requested <= 0) return bad("bad result array");
    ConvShape g;
    if (cudnnStatus_t s = shape_of(x, w, conv, y, &g)) return s;
    const std::vector<ConvOffer> offers = conv_offers(pass, g, conv->math);
    int n = 0;
    for (const ConvOffer& o : offers) {
        if (n == requested) break;
        Perf& p = perf[n++];
        memset(&p, 0, sizeof p);
        p.algo = static_cast<decltype(p.algo)>(o.algo);
        p.status = o.status;
        p.time = (float)n;
        p.memory = o.workspace_bytes;
        p.determinism = o.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
        p.mathType = conv_reported_math(o);
    }
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t workspace_size(ConvPass pass, cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                             cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo, size_t* bytes) {
    if (!g_handles.count(h)) return CUDNN_STATUS_NOT_INITIALIZED;
    if (!bytes) return bad("bytes is NULL");
    ConvShape g;
    if (cudnnStatus_t s = shape_of(x, w, conv, y, &g)) return s;
    ConvOffer o;
    if (!conv_offer_for(pass, g, conv->math, algo, &o)) {
        note("algorithm %d is not available for this shape with math type %d", algo, (int)conv->math);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    *bytes = o.workspace_bytes;
    return CUDNN_STATUS_SUCCESS;
}

struct Span {
    const void* p;
    size_t bytes;
    const char* name;
};

bool overlap(const Span& a, const Span& b) {
    const char *x = (const char*)a.p, *y = (const char*)b.p;
    return a.bytes && b.bytes && x < y + b.bytes && y < x + a.bytes;
}

class ConvOp final : public Operation {
public:
    ConvOp(ConvPass pass, const ConvShape& g, const void* in1, const void* in2, void* out, float alpha, float beta,
           void* workspace, size_t workspace_bytes, bool descending)
        : pass_(pass),
          g_(g),
          in1_(in1),
          in2_(in2),
          out_(out),
          alpha_(alpha),
          beta_(beta),
          workspace_(workspace),
          workspace_bytes_(workspace_bytes),
          descending_(descending) {}
    void run() override {
        if (workspace_bytes_) memset(workspace_, 0xFF, workspace_bytes_);  // the algorithm's scratch
        switch (pass_) {
            case ConvPass::forward:
                conv_forward(g_, in1_, in2_, out_, alpha_, beta_);
                break;
            case ConvPass::backward_data:
                conv_backward_data(g_, in1_, in2_, out_, alpha_, beta_);
                break;
            case ConvPass::backward_filter:
                conv_backward_filter(g_, in1_, in2_, out_, alpha_, beta_, descending_);
                break;
        }
    }

private:
    ConvPass pass_;
    ConvShape g_;
    const void *in1_, *in2_;
    void* out_;
    float alpha_, beta_;
    void* workspace_;
    size_t workspace_bytes_;
    bool descending_;
};

const char* pass_name(ConvPass p) {
    return p == ConvPass::forward         ? "cudnnConvolutionForward"
           : p == ConvPass::backward_data ? "cudnnConvolutionBackwardData"
                                          : "cudnnConvolutionBackwardFilter";
}

// in1/in2: x and w (forward), w and dy (backward data), x and dy (backward filter).
cudnnStatus_t convolve(ConvPass pass, cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x,
                       cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                       int algo, const void* in1, const void* in2, void* workspace, size_t workspace_bytes,
                       const void* beta, void* out) {
    if (!g_handles.count(h)) return CUDNN_STATUS_NOT_INITIALIZED;
    ConvShape g;
    if (cudnnStatus_t s = shape_of(x, w, conv, y, &g)) return s;
    if (!alpha || !beta || !in1 || !in2 || !out) return bad("%s: a pointer argument is NULL", pass_name(pass));
    ConvOffer o;
    if (!conv_offer_for(pass, g, conv->math, algo, &o)) {
        note("%s: algorithm %d is not available for this shape with math type %d", pass_name(pass), algo,
             (int)conv->math);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (config().refused[(int)pass] & (1u << algo)) {
        note("%s: algorithm %d refuses to run (SPKDDP_CUDA_EMU_CUDNN_REFUSE)", pass_name(pass), algo);
        return CUDNN_STATUS_EXECUTION_FAILED;
    }
    if (workspace_bytes < o.workspace_bytes || (o.workspace_bytes && !workspace)) {
        note("%s: algorithm %d needs %zu bytes of workspace, got %zu", pass_name(pass), algo, o.workspace_bytes,
             workspace_bytes);
        return CUDNN_STATUS_BAD_PARAM;
    }
    g.tf32 = o.math != CUDNN_FMA_MATH;
    const size_t xb = conv_x_bytes(g), wb = conv_w_bytes(g), yb = conv_y_bytes(g);
    const Span xs{pass == ConvPass::backward_data ? out : in1, xb, "x"};
    const Span ws{pass == ConvPass::forward ? in2 : (pass == ConvPass::backward_data ? in1 : out), wb, "w"};
    const Span ys{pass == ConvPass::forward ? out : in2, yb, "y"};
    const Span scratch{workspace, o.workspace_bytes, "workspace"};
    const Span spans[] = {xs, ws, ys, scratch};
    char what[128];
    for (const Span& s : spans) {
        if (!s.bytes) continue;
        snprintf(what, sizeof what, "%s: %s", pass_name(pass), s.name);
        require_range(s.p, s.bytes, what);
    }
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            if (overlap(spans[i], spans[j]))
                fail("%s: %s and %s overlap", pass_name(pass), spans[i].name, spans[j].name);
    CUstream_st* s = stream_from_handle(h->stream);
    if (!s) fail("cuDNN: the handle's stream was destroyed");
    const float a = *(const float*)alpha, b = *(const float*)beta;  // host scalars, read at the call
    enqueue(s, std::make_unique<ConvOp>(pass, g, in1, in2, out, a, b, workspace, o.workspace_bytes,
                                        !o.deterministic && config().reverse));
    return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace spk_emu

using namespace spk_emu;

extern "C" {

const char* cudnnGetErrorString(cudnnStatus_t status) {
    switch (status) {
        case CUDNN_STATUS_SUCCESS:
            return "CUDNN_STATUS_SUCCESS";
        case CUDNN_STATUS_NOT_INITIALIZED:
            return "CUDNN_STATUS_NOT_INITIALIZED";
        case CUDNN_STATUS_BAD_PARAM:
            return "CUDNN_STATUS_BAD_PARAM";
        case CUDNN_STATUS_NOT_SUPPORTED:
            return "CUDNN_STATUS_NOT_SUPPORTED";
        case CUDNN_STATUS_INTERNAL_ERROR:
            return "CUDNN_STATUS_INTERNAL_ERROR";
        case CUDNN_STATUS_EXECUTION_FAILED:
            return "CUDNN_STATUS_EXECUTION_FAILED";
    }
    return "CUDNN_STATUS_UNKNOWN";
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
    if (message && max_size) snprintf(message, max_size, "%s", last_note());
}

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
    if (!handle) return CUDNN_STATUS_BAD_PARAM;
    *handle = new cudnnContext;
    g_handles.insert(*handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (!g_handles.erase(handle)) return CUDNN_STATUS_BAD_PARAM;
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    if (!g_handles.count(handle)) return CUDNN_STATUS_NOT_INITIALIZED;
    if (!stream_from_handle(stream)) return bad("cudnnSetStream: not a stream");
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { return destroy(d); }

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format, cudnnDataType_t type,
                                         int n, int c, int h, int w) {
    if (!g_descriptors.count(d)) return bad("not a tensor descriptor");
    if (!emulated(format, type)) {
        note("only NCHW and NHWC tensors of float or bfloat16 are emulated");
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return bad("a tensor dimension is not positive");
    *d = cudnnTensorStruct{true, n, c, h, w, format, type};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
    if (!g_descriptors.count(d)) return bad("not a filter descriptor");
    if (!emulated(format, type)) {
        note("only NCHW and NHWC filters of float or bfloat16 are emulated");
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return bad("a filter dimension is not positive");
    *d = cudnnFilterStruct{true, k, c, h, w, format, type};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute_type) {
    if (!g_descriptors.count(d)) return bad("not a convolution descriptor");
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
        return bad("negative padding, or a stride or dilation below 1");
    if (compute_type != CUDNN_DATA_FLOAT) {
        note("only float compute is emulated");
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    const cudnnMathType_t math = d->math;
    *d = cudnnConvolutionStruct{true, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, math};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
    if (!g_descriptors.count(d)) return bad("not a convolution descriptor");
    if (math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH) return bad("unknown math type");
    d->math = math;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t* math) {
    if (!g_descriptors.count(d) || !math) return bad("not a convolution descriptor");
    *math = d->math;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t x,
                                                    cudnnFilterDescriptor_t w, int* n, int* c, int* h, int* wd) {
    if (!valid(conv) || !valid(x) || !valid(w) || !n || !c || !h || !wd) return bad("bad descriptor or result");
    if (x->c != w->c) return bad("the input's channels differ from the filter's");
    *n = x->n;
    *c = w->k;
    *h = out_dim(x->h, conv->pad_h, conv->u, conv->dil_h, w->h);
    *wd = out_dim(x->w, conv->pad_w, conv->v, conv->dil_w, w->w);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int* count) {
    return max_count(h, count, CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int* count) {
    return max_count(h, count, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int* count) {
    return max_count(h, count, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                                     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                                     cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
    return heuristics(ConvPass::forward, h, x, w, conv, y, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, cudnnFilterDescriptor_t w,
                                                          cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,
                                                          cudnnTensorDescriptor_t dx, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf) {
    return heuristics(ConvPass::backward_data, h, dx, w, conv, dy, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                                            cudnnTensorDescriptor_t dy,
                                                            cudnnConvolutionDescriptor_t conv,
                                                            cudnnFilterDescriptor_t dw, int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
    return heuristics(ConvPass::backward_filter, h, x, dw, conv, dy, requested, returned, perf);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                                      cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                                      cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t* bytes) {
    return workspace_size(ConvPass::forward, h, x, w, conv, y, algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, cudnnFilterDescriptor_t w,
                                                           cudnnTensorDescriptor_t dy,
                                                           cudnnConvolutionDescriptor_t conv,
                                                           cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
    return workspace_size(ConvPass::backward_data, h, dx, w, conv, dy, algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                                             cudnnTensorDescriptor_t dy,
                                                             cudnnConvolutionDescriptor_t conv,
                                                             cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
    return workspace_size(ConvPass::backward_filter, h, x, dw, conv, dy, algo, bytes);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x_desc, const void* x,
                                      cudnnFilterDescriptor_t w_desc, const void* w, cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void* workspace, size_t workspace_bytes,
                                      const void* beta, cudnnTensorDescriptor_t y_desc, void* y) {
    return convolve(ConvPass::forward, h, alpha, x_desc, w_desc, conv, y_desc, algo, x, w, workspace, workspace_bytes,
                    beta, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha, cudnnFilterDescriptor_t w_desc,
                                           const void* w, cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
                                           void* workspace, size_t workspace_bytes, const void* beta,
                                           cudnnTensorDescriptor_t dx_desc, void* dx) {
    return convolve(ConvPass::backward_data, h, alpha, dx_desc, w_desc, conv, dy_desc, algo, w, dy, workspace,
                    workspace_bytes, beta, dx);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x_desc,
                                             const void* x, cudnnTensorDescriptor_t dy_desc, const void* dy,
                                             cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdFilterAlgo_t algo,
                                             void* workspace, size_t workspace_bytes, const void* beta,
                                             cudnnFilterDescriptor_t dw_desc, void* dw) {
    return convolve(ConvPass::backward_filter, h, alpha, x_desc, dw_desc, conv, dy_desc, algo, x, dy, workspace,
                    workspace_bytes, beta, dw);
}

}  // extern "C"
