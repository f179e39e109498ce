// Conv1d (kernels/conv1d.h) on cuDNN: the 1-D convolution is a 2-D one of height 1,
//   x (B, Cin, 1, T + 2p)  *  w (Cout, Cin, 1, K), dilation (1, d), no cuDNN padding
//   -> y (B, Cout, 1, T),
// with the reflect padding done by our own kernel into the caller's workspace, and its
// adjoint (folding the gradient of padded positions back onto their sources) after the
// backward-data call. Bias and its gradient are our own kernels.
//
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7), keeping only results that
// are CUDNN_DETERMINISTIC (unless SPKDDP_CUDNN_FAST=1) and plain FMA math (no TF32); when
// none qualifies, the classic deterministic ones (IMPLICIT_GEMM, BWD_DATA_ALGO_1,
// BWD_FILTER_ALGO_1). Descriptors, choices
// and the workspace size are cached per shape in a small table. SPKDDP_CUDNN_VERBOSE=1 prints
// the choices.
//
// workspace = [ padded x / padded dx: B*Cin*(T+2p) floats, rounded up to 64 ] [ cuDNN ]
#include <string.h>

#include "kernels/cuda/conv1d_bias.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }

size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

void check_shape(int B, int Cin, int Cout, int T, int K, int dilation) {
    SPK_ASSERT(B > 0 && Cin > 0 && Cout > 0 && T > 0);
    SPK_ASSERT(K > 0 && K % 2 == 1 && dilation > 0);
    SPK_ASSERT(T > conv_pad(K, dilation));  // reflect padding needs T > pad
    const size_t tp = (size_t)T + 2 * (size_t)conv_pad(K, dilation);
    // cuDNN's legacy descriptors count elements in int
    SPK_ASSERT((size_t)B * Cin * tp < 0x7fffffffu && (size_t)B * Cout * T < 0x7fffffffu);
    SPK_ASSERT((size_t)Cout * Cin * K < 0x7fffffffu);
}

// Floats of the padded buffer (0 when there is no padding, K = 1).
size_t pad_floats(int B, int Cin, int T, int K, int dilation) {
    const int p = conv_pad(K, dilation);
    return p > 0 ? round64((size_t)B * Cin * ((size_t)T + 2 * (size_t)p)) : 0;
}

// ---- kernels --------------------------------------------------------------------------------

// xp[r, s] = x[r, refl(s - p)] for the rows r of (B*Cin) and s in [0, T + 2p)
__global__ void reflect_pad_kernel(float* xp, const float* x, size_t rows, int T, int p) {
    const size_t tp = (size_t)T + 2 * (size_t)p;
    SPK_GRID_LOOP(i, rows * tp) {
        const size_t r = i / tp;
        int u = (int)(i - r * tp) - p;
        u = u < 0 ? -u : (u >= T ? 2 * (T - 1) - u : u);
        xp[i] = x[r * T + u];
    }
}

// Adjoint of reflect_pad_kernel, accumulated: dx[r, t] += sum of g[r, s] over the padded
// positions s that read x[r, t]. Gathered per t, so no two threads write one element:
//   s = t + p                      (always)
//   s = p - t          for 1 <= t <= p          (left pad, u = -t)
//   s = p + 2(T-1) - t for T-1-p <= t <= T-2    (right pad, u = 2(T-1) - t)
__global__ void reflect_fold_add_kernel(float* dx, const float* g, size_t rows, int T, int p) {
    const size_t tp = (size_t)T + 2 * (size_t)p;
    SPK_GRID_LOOP(i, rows * (size_t)T) {
        const size_t r = i / T;
        const int t = (int)(i - r * T);
        const float* gr = g + r * tp;
        float acc = gr[t + p];
        if (t >= 1 && t <= p) acc += gr[p - t];
        if (t <= T - 2 && t >= T - 1 - p) acc += gr[p + 2 * (T - 1) - t];
        dx[i] += acc;
    }
}

// ---- plans ----------------------------------------------------------------------------------

struct Plan {
    int valid;
    int key[6];                  // B, Cin, Cout, T, K, dilation
    cudnnTensorDescriptor_t xd;  // (B, Cin, 1, T + 2p)
    cudnnTensorDescriptor_t yd;  // (B, Cout, 1, T)
    cudnnFilterDescriptor_t wd;  // (Cout, Cin, 1, K)
    cudnnConvolutionDescriptor_t cd[3];  // fwd, bwd-data, bwd-filter: each with its algorithm's math type
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_bytes;  // the largest of the three algorithms' workspaces
};

// Training uses ~7 shapes, plus 7 for a short last batch, 7 per other evaluation batch size
// and 7 per utterance length when embedding: keep enough that training never re-plans.
const int kPlans = 64;
Plan g_plans[kPlans];
int g_next_plan = 0;  // round-robin eviction

const int kMaxPerf = 32;
enum { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };
int g_tf32 = 0;  // spk_cuda_set_tf32

// SPKDDP_CUDNN_FAST=1: take the heuristics' best-ranked algorithm even when it is not
// deterministic (atomics), trading run-to-run bitwise reproducibility for speed.
bool fast_algorithms() {
    static const int fast = [] {
        const char* s = getenv("SPKDDP_CUDNN_FAST");
        return s && strcmp(s, "1") == 0;
    }();
    return fast;
}

// A heuristic result we take: it succeeded, runs plain FMA math (or, with TF32 allowed, any
// math but the fp16 down-conversion), and is deterministic unless fast_algorithms(). Its
// math type goes onto the pass's descriptor, as cuDNN requires for running it.
template <typename Perf>
bool acceptable(const Perf& p, cudnnConvolutionDescriptor_t cd) {
    const bool math = g_tf32 ? p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                             : p.mathType == CUDNN_FMA_MATH;
    if (p.status != CUDNN_STATUS_SUCCESS || !math ||
        (p.determinism != CUDNN_DETERMINISTIC && !fast_algorithms()))
        return false;
    cudnnCheck(cudnnSetConvolutionMathType(cd, p.mathType));
    return true;
}

// The classic deterministic fallback runs in FMA math.
void fma_math(cudnnConvolutionDescriptor_t cd) {
    cudnnCheck(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
}

// The first heuristic result we accept whose workspace size cuDNN can give (ws_of(algo,
// &bytes) asks for this pass), else `fallback` in FMA math.
template <typename Perf, typename Algo, typename WsOf>
Algo pick(const Perf* perf, int n, cudnnConvolutionDescriptor_t cd, Algo fallback, WsOf ws_of,
          size_t* ws) {
    for (int i = 0; i < n; i++)
        if (acceptable(perf[i], cd) && ws_of(perf[i].algo, ws) == CUDNN_STATUS_SUCCESS)
            return perf[i].algo;
    fma_math(cd);
    cudnnCheck(ws_of(fallback, ws));
    return fallback;
}

cudnnConvolutionFwdAlgo_t choose_fwd(const Plan& pl, size_t* ws) {
    cudnnHandle_t h = spk_cudnn_handle();
    cudnnConvolutionDescriptor_t cd = pl.cd[kFwd];
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxPerf];
    int want = 0, n = 0;
    cudnnCheck(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &want));
    want = want < kMaxPerf ? want : kMaxPerf;
    cudnnCheck(cudnnGetConvolutionForwardAlgorithm_v7(h, pl.xd, pl.wd, cd, pl.yd, want, &n, perf));
    return pick(perf, n, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
                    return cudnnGetConvolutionForwardWorkspaceSize(h, pl.xd, pl.wd, cd, pl.yd, a, bytes);
                },
                ws);
}

cudnnConvolutionBwdDataAlgo_t choose_bwd_data(const Plan& pl, size_t* ws) {
    cudnnHandle_t h = spk_cudnn_handle();
    cudnnConvolutionDescriptor_t cd = pl.cd[kBwdData];
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxPerf];
    int want = 0, n = 0;
    cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &want));
    want = want < kMaxPerf ? want : kMaxPerf;
    cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, pl.wd, pl.yd, cd, pl.xd, want, &n, perf));
    return pick(perf, n, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
                    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, pl.wd, pl.yd, cd, pl.xd, a, bytes);
                },
                ws);
}

// BWD_FILTER_ALGO_0 and _3 sum with atomics; acceptable()'s determinism test excludes them.
cudnnConvolutionBwdFilterAlgo_t choose_bwd_filter(const Plan& pl, size_t* ws) {
    cudnnHandle_t h = spk_cudnn_handle();
    cudnnConvolutionDescriptor_t cd = pl.cd[kBwdFilter];
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxPerf];
    int want = 0, n = 0;
    cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &want));
    want = want < kMaxPerf ? want : kMaxPerf;
    cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, pl.xd, pl.yd, cd, pl.wd, want, &n, perf));
    return pick(perf, n, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
                    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, pl.xd, pl.yd, cd, pl.wd, a, bytes);
                },
                ws);
}

void destroy_plan(Plan& pl) {
    if (!pl.valid) return;
    cudnnCheck(cudnnDestroyTensorDescriptor(pl.xd));
    cudnnCheck(cudnnDestroyTensorDescriptor(pl.yd));
    cudnnCheck(cudnnDestroyFilterDescriptor(pl.wd));
    for (int i = 0; i < 3; i++) cudnnCheck(cudnnDestroyConvolutionDescriptor(pl.cd[i]));
    pl.valid = 0;
}

const Plan& get_plan(int B, int Cin, int Cout, int T, int K, int dilation) {
    const int key[6] = {B, Cin, Cout, T, K, dilation};
    for (int i = 0; i < kPlans; i++)
        if (g_plans[i].valid && memcmp(g_plans[i].key, key, sizeof key) == 0) return g_plans[i];

    Plan& pl = g_plans[g_next_plan];
    g_next_plan = (g_next_plan + 1) % kPlans;
    // cuDNN reads descriptors during the API call, not when the queued kernels run, so the
    // evicted plan's descriptors can go now.
    destroy_plan(pl);
    const int tp = T + 2 * conv_pad(K, dilation);
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.xd));
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.yd));
    cudnnCheck(cudnnCreateFilterDescriptor(&pl.wd));
    for (int i = 0; i < 3; i++) cudnnCheck(cudnnCreateConvolutionDescriptor(&pl.cd[i]));
    cudnnCheck(
        cudnnSetTensor4dDescriptor(pl.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, Cin, 1, tp));
    cudnnCheck(
        cudnnSetTensor4dDescriptor(pl.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, Cout, 1, T));
    cudnnCheck(
        cudnnSetFilter4dDescriptor(pl.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, Cout, Cin, 1, K));
    for (int i = 0; i < 3; i++) {
        cudnnCheck(cudnnSetConvolution2dDescriptor(pl.cd[i], 0, 0, 1, 1, 1, dilation,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        // What the heuristics may offer: FMA only (fp32-accurate), or with TF32 allowed
        // (CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 on Ampere and newer).
        cudnnCheck(cudnnSetConvolutionMathType(pl.cd[i], g_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    }
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(
        cudnnGetConvolution2dForwardOutputDim(pl.cd[kFwd], pl.xd, pl.wd, &on, &oc, &oh, &ow));
    SPK_ASSERT(on == B && oc == Cout && oh == 1 && ow == T);
    pl.valid = 1;  // from here on destroy_plan must release the descriptors
    memcpy(pl.key, key, sizeof key);

    size_t wf = 0, wbd = 0, wbf = 0;
    pl.fwd = choose_fwd(pl, &wf);
    pl.bwd_data = choose_bwd_data(pl, &wbd);
    pl.bwd_filter = choose_bwd_filter(pl, &wbf);
    pl.ws_bytes = wf > wbd ? wf : wbd;
    pl.ws_bytes = pl.ws_bytes > wbf ? pl.ws_bytes : wbf;
    const char* verbose = getenv("SPKDDP_CUDNN_VERBOSE");
    if (verbose && verbose[0] == '1') {
        cudnnMathType_t mt[3];
        for (int i = 0; i < 3; i++) cudnnCheck(cudnnGetConvolutionMathType(pl.cd[i], &mt[i]));
        fprintf(stderr,
                "spkddp: conv1d B=%d Cin=%d Cout=%d T=%d K=%d d=%d: cuDNN fwd algo %d (%zu B, "
                "math %d), bwd-data algo %d (%zu B, math %d), bwd-filter algo %d (%zu B, math %d)\n",
                B, Cin, Cout, T, K, dilation, (int)pl.fwd, wf, (int)mt[0], (int)pl.bwd_data, wbd,
                (int)mt[1], (int)pl.bwd_filter, wbf, (int)mt[2]);
    }
    return pl;
}

float* cudnn_workspace(float* workspace, int B, int Cin, int T, int K, int dilation) {
    return workspace + pad_floats(B, Cin, T, K, dilation);
}

}  // namespace

void spk_conv1d_cuda_set_tf32(int allow) {
    if (g_tf32 == !!allow) return;
    spk_conv1d_cuda_release_plans();  // plans hold the old math permission
    g_tf32 = !!allow;
}

void spk_conv1d_cuda_release_plans(void) {
    for (int i = 0; i < kPlans; i++) destroy_plan(g_plans[i]);
    g_next_plan = 0;
}

extern "C" size_t conv1d_workspace_floats_cuda(int B, int Cin, int Cout, int T, int K,
                                               int dilation) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const Plan& pl = get_plan(B, Cin, Cout, T, K, dilation);
    return pad_floats(B, Cin, T, K, dilation) + round64((pl.ws_bytes + 3) / 4);
}

extern "C" void conv1d_forward_cuda(float* y, const float* x, const float* w, const float* bias,
                                    int B, int Cin, int Cout, int T, int K, int dilation,
                                    float* workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    const Plan& pl = get_plan(B, Cin, Cout, T, K, dilation);
    const int p = conv_pad(K, dilation);
    SPK_ASSERT(workspace != nullptr || (p == 0 && pl.ws_bytes == 0));
    const float one = 1.0f, zero = 0.0f;
    const float* xin = x;
    if (p > 0) {
        const size_t rows = (size_t)B * Cin;
        SPK_LAUNCH(reflect_pad_kernel, spk_grid(rows * (T + 2 * p)), workspace, x, rows, T, p);
        xin = workspace;
    }
    float* cws = cudnn_workspace(workspace, B, Cin, T, K, dilation);
    cudnnCheck(cudnnConvolutionForward(spk_cudnn_handle(), &one, pl.xd, xin, pl.wd, w, pl.cd[kFwd],
                                       pl.fwd, pl.ws_bytes ? cws : nullptr, pl.ws_bytes, &zero,
                                       pl.yd, y));
    if (bias) {
        const size_t rows = (size_t)B * Cout;
        SPK_LAUNCH(add_bias_kernel, spk_grid(rows * T), y, bias, rows, Cout, T);
    }
}

extern "C" void conv1d_backward_cuda(float* dx, float* dw, float* dbias, const float* dy,
                                     const float* x, const float* w, int B, int Cin, int Cout,
                                     int T, int K, int dilation, float* workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (!dx && !dw && !dbias) return;
    const Plan& pl = get_plan(B, Cin, Cout, T, K, dilation);
    cudnnHandle_t h = spk_cudnn_handle();
    const int p = conv_pad(K, dilation);
    SPK_ASSERT(workspace != nullptr || (p == 0 && pl.ws_bytes == 0));
    const float one = 1.0f, zero = 0.0f;
    float* cws = cudnn_workspace(workspace, B, Cin, T, K, dilation);
    void* cws_or_null = pl.ws_bytes ? cws : nullptr;
    const size_t rows = (size_t)B * Cin;
    if (dx) {
        if (p == 0) {  // no padding: accumulate straight into dx (beta = 1)
            cudnnCheck(cudnnConvolutionBackwardData(h, &one, pl.wd, w, pl.yd, dy, pl.cd[kBwdData],
                                                    pl.bwd_data, cws_or_null, pl.ws_bytes, &one,
                                                    pl.xd, dx));
        } else {  // gradient of the padded input, then folded onto dx
            cudnnCheck(cudnnConvolutionBackwardData(h, &one, pl.wd, w, pl.yd, dy, pl.cd[kBwdData],
                                                    pl.bwd_data, cws_or_null, pl.ws_bytes, &zero,
                                                    pl.xd, workspace));
            SPK_LAUNCH(reflect_fold_add_kernel, spk_grid(rows * T), dx, workspace, rows, T, p);
        }
    }
    if (dw) {
        const float* xin = x;
        if (p > 0) {  // the padded-gradient buffer is free again (same stream, in order)
            SPK_LAUNCH(reflect_pad_kernel, spk_grid(rows * (T + 2 * p)), workspace, x, rows, T, p);
            xin = workspace;
        }
        cudnnCheck(cudnnConvolutionBackwardFilter(h, &one, pl.xd, xin, pl.yd, dy, pl.cd[kBwdFilter],
                                                  pl.bwd_filter, cws_or_null, pl.ws_bytes, &one,
                                                  pl.wd, dw));
    }
    if (dbias) {
        SPK_LAUNCH(bias_grad_kernel, spk_rows_grid((size_t)Cout), dbias, dy, B, Cout, T);
    }
}
