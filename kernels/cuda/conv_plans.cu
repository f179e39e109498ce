// The convolution plan cache (kernels/cuda/conv_plans.cuh): descriptors, algorithm choice and
// workspace sizes per shape, eviction, and the listing of the choices.
//
// Candidates come from cuDNN's heuristics (cudnnGet*Algorithm_v7), best-ranked first, among
// the results this precision may run:
//   fp32 (default)  deterministic FMA kernels, under a CUDNN_FMA_MATH descriptor, which rules
//                   tensor cores out. cuDNN reports them as CUDNN_FMA_MATH (what PyTorch
//                   asserts) or possibly CUDNN_DEFAULT_MATH: both are taken.
//   --tf32          a deterministic tensor-core (TF32) result, else a non-deterministic one
//                   (the user asked for tensor cores; PyTorch's default takes those too), else
//                   a deterministic result of another math type; never the fp16
//                   down-conversion. The result's math type goes onto the pass's descriptor.
//   bf16 data       (the bf16 convolutions, whatever --tf32 says) a deterministic tensor-core
//                   result, else a deterministic one of another math type: bf16 runs stay
//                   bitwise reproducible; never the fp16 down-conversion.
// SPKDDP_CUDNN_FAST=1 counts every result as deterministic. A candidate is taken only once it
// has run: each is executed on scratch tensors of the plan's shape, and one that cuDNN refuses
// to run, or whose workspace is over the cap (SPKDDP_CUDNN_WORKSPACE_MB, default the smaller of
// 1 GiB and an eighth of the free device memory), gives way to the next:
//   SPKDDP_CUDNN_SEARCH=heuristic (default)  the best-ranked candidate that runs: the choice
//                   depends on the shape, the GPU and the libraries only, so runs, resumed runs
//                   and ranks agree bitwise;
//   SPKDDP_CUDNN_SEARCH=time  every candidate of the best tier that runs is timed (one run
//                   after a warm-up) and the fastest is taken, as PyTorch's cudnn.benchmark
//                   does: faster, but the choice, and with it the rounding, can differ between
//                   runs and ranks when two candidates are close.
// When no candidate runs: the classic deterministic IMPLICIT_GEMM, BWD_DATA_ALGO_1,
// BWD_FILTER_ALGO_1 in FMA math; when that does not run either, the job ends with a sentence.
// SPKDDP_CUDNN_VERBOSE=1 prints each plan as it is made; spk_cuda_print_conv_plans lists all.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/env.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cuda/conv_plans.cuh"
#include "kernels/cuda/cuda_check.h"

namespace {

// ECAPA training uses ~7 shapes, plus 7 for a short last batch and 7 per evaluation batch size;
// inference adds 7 per length bucket, which evict each other but not the training plans. A
// ResNet34 has 11 convolution shapes; CAM++ 41, and 82 in bf16 in the invariant mode (its dense
// layers' input widths, in batches and single samples), which a cache of 64 remade every step.
const int kPlans = 256;
spk_conv_plan_t g_plans[kPlans];
int g_last = 0;              // the plan found last: the invariant mode asks for one sample's plan B times in a row
long long g_serial = 0;      // plans made
long long g_selections = 0;  // algorithm choices (heuristics queried)
int g_tf32 = 0;              // spk_cuda_set_tf32

const int kMaxPerf = 32;

// SPKDDP_CUDNN_FAST=1: the heuristics' best-ranked algorithm even when it is not deterministic
// (atomics), trading run-to-run bitwise reproducibility for speed.
bool fast_algorithms() {
    static const bool fast = spk_env_switch("SPKDDP_CUDNN_FAST");
    return fast;
}

bool verbose() {
    static const bool on = spk_env_switch("SPKDDP_CUDNN_VERBOSE");
    return on;
}

// SPKDDP_CUDNN_SEARCH=time: the fastest candidate instead of the best-ranked one that runs.
bool timed_search() {
    static const bool timed = spk_env_choice("SPKDDP_CUDNN_SEARCH", "heuristic|time") == 1;
    return timed;
}

// The largest cuDNN workspace a candidate may ask for.
size_t workspace_cap() {
    const double mb = spk_env_number("SPKDDP_CUDNN_WORKSPACE_MB", -1.0, 0.0, 1e7);
    if (mb >= 0) return (size_t)(mb * (1 << 20));
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    const size_t gib = (size_t)1 << 30;
    return free_b / 8 < gib ? free_b / 8 : gib;
}

// Lengths up to 64 are their own bucket; above, 8 buckets per octave (the largest length of
// each is at most 12.5% above its smallest).
int length_bucket(int len) {
    if (len <= 64) return len;
    int step = 1;
    while ((len - 1) / step >= 16) step *= 2;
    return (len + step - 1) / step * step;
}

// ---- names ----------------------------------------------------------------------------------

const char *algo_name(int pass, int algo) {
    static const char *const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                                      "WINOGRAD",      "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const filt[] = {"ALGO_0",    "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                                       "FFT_TILING"};
    const char *const *names = pass == SPK_CONV_FWD ? fwd : pass == SPK_CONV_BWD_DATA ? data : filt;
    const int n = pass == SPK_CONV_FWD ? 8 : pass == SPK_CONV_BWD_DATA ? 6 : 7;
    return algo >= 0 && algo < n ? names[algo] : "?";
}

const char *math_name(cudnnMathType_t m) {
    switch (m) {
        case CUDNN_DEFAULT_MATH:
            return "DEFAULT";
        case CUDNN_TENSOR_OP_MATH:
            return "TENSOR_OP";
        case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
            return "TENSOR_OP_ALLOW_CONVERSION";
        case CUDNN_FMA_MATH:
            return "FMA";
    }
    return "?";
}

// "fwd IMPLICIT_PRECOMP_GEMM (reported TENSOR_OP, runs TENSOR_OP, 1.50 MiB)" into buf.
void describe_pass(char *buf, size_t cap, const spk_conv_plan_t &pl, int pass) {
    static const char *const pass_names[] = {"fwd", "bwd-data", "bwd-filter"};
    const spk_conv_pass_t &p = pl.pass[pass];
    cudnnMathType_t runs = CUDNN_FMA_MATH;
    cudnnCheck(cudnnGetConvolutionMathType(pl.cd[pass], &runs));
    char how[64];
    if (p.ms > 0)
        snprintf(how, sizeof how, "fastest of %d run, %.3f ms", p.tried - p.failed, p.ms);
    else
        snprintf(how, sizeof how, "%d tried", p.tried);
    if (p.failed) snprintf(how + strlen(how), sizeof how - strlen(how), ", %d refused", p.failed);
    if (p.fallback)
        snprintf(buf, cap, "%s %s (fallback: no heuristic result ran, runs %s, %.2f MiB; %s)", pass_names[pass],
                 algo_name(pass, p.algo), math_name(runs), (double)p.ws_bytes / (1 << 20), how);
    else
        snprintf(buf, cap, "%s %s (reported %s, runs %s%s, %.2f MiB; %s)", pass_names[pass], algo_name(pass, p.algo),
                 math_name(p.reported), math_name(runs), p.deterministic ? "" : ", NON-DETERMINISTIC",
                 (double)p.ws_bytes / (1 << 20), how);
}

// "B=16 Cin=32 Cout=32 T=200 (bucket 208) K=3 d=2" into buf (2-D: H, W, kernel, stride, padding,
// dilation, data type).
void describe_shape(char *buf, size_t cap, const spk_conv_plan_t &pl) {
    const spk_conv_geom_t &g = pl.geom;
    if (g.dims == 1)
        snprintf(buf, cap, "B=%d Cin=%d Cout=%d T=%d (bucket %d) K=%d d=%d", g.B, g.Cin, g.Cout, pl.len, pl.bucket,
                 g.KW, g.DW);
    else
        snprintf(buf, cap, "B=%d Cin=%d Cout=%d H=%d W=%d (bucket %d) k=%dx%d s=%d,%d p=%d,%d d=%d,%d %s %s", g.B,
                 g.Cin, g.Cout, g.H, pl.len + g.W_extra, pl.bucket, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.DH, g.DW,
                 g.nhwc ? "NHWC" : "NCHW", g.bf16 ? "bf16" : "fp32");
}

void print_plan(FILE *f, const spk_conv_plan_t &pl) {
    char d[3][224], shape[160];
    for (int i = 0; i < 3; i++) describe_pass(d[i], sizeof d[i], pl, i);
    describe_shape(shape, sizeof shape, pl);
    fprintf(f, "conv%dd %s: %s; %s; %s; used %lld times\n", pl.geom.dims, shape, d[0], d[1], d[2], pl.uses);
}

// ---- choosing -------------------------------------------------------------------------------

// What a plan's candidates may be (the list at the top).
enum Precision { kFp32, kTf32, kBf16 };

Precision precision(const spk_conv_plan_t &pl) { return pl.geom.bf16 ? kBf16 : g_tf32 ? kTf32 : kFp32; }

// The preference tier of a heuristic result (0 first), or -1 when this precision may not run it.
template <typename Perf>
int tier(const Perf &p, Precision prec) {
    if (p.status != CUDNN_STATUS_SUCCESS) return -1;
    const bool det = p.determinism == CUDNN_DETERMINISTIC || fast_algorithms();
    if (prec == kFp32) return det && (p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH) ? 0 : -1;
    if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return -1;  // fp16 inputs
    if (p.mathType == CUDNN_TENSOR_OP_MATH) return det ? 0 : prec == kTf32 ? 1 : -1;
    return det ? 2 : -1;
}

// The math type the heuristics are asked under, which bounds what they offer: FMA only in fp32
// (fp32-accurate); CUDNN_DEFAULT_MATH with --tf32 (it permits TF32 for float data on Ampere and
// newer, as PyTorch's allow_tf32); CUDNN_TENSOR_OP_MATH for bf16 data, as PyTorch sets it:
// under CUDNN_DEFAULT_MATH cuDNN 9.19 offered an H200 only non-tensor-core bf16 kernels
// (ResNet34's step at 1.6 TFLOP/s, 0.04x PyTorch's).
cudnnMathType_t query_math(Precision prec) {
    return prec == kFp32 ? CUDNN_FMA_MATH : prec == kBf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

// The math type a taken result runs in: FMA in fp32 (never tensor cores), else its own.
cudnnMathType_t run_math(cudnnMathType_t reported, Precision prec) { return prec == kFp32 ? CUDNN_FMA_MATH : reported; }

// An output axis's size; the plan's output height and width and the elements of its x, y and w,
// at its current length.
int out_size(int in, int pad, int dil, int k, int stride) { return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
int out_h(const spk_conv_plan_t &pl) {
    const spk_conv_geom_t &g = pl.geom;
    return out_size(g.H, g.PH, g.DH, g.KH, g.SH);
}
int out_w(const spk_conv_plan_t &pl) {
    const spk_conv_geom_t &g = pl.geom;
    return out_size(pl.len + g.W_extra, g.PW, g.DW, g.KW, g.SW);
}
size_t x_elems(const spk_conv_plan_t &pl) {
    const spk_conv_geom_t &g = pl.geom;
    return (size_t)g.B * g.Cin * g.H * (pl.len + g.W_extra);
}
size_t y_elems(const spk_conv_plan_t &pl) { return (size_t)pl.geom.B * pl.geom.Cout * out_h(pl) * out_w(pl); }
size_t w_elems(const spk_conv_plan_t &pl) {
    const spk_conv_geom_t &g = pl.geom;
    return (size_t)g.Cout * g.Cin * g.KH * g.KW;
}

// cuDNN's query of one pass's workspace for `algo` at the descriptors' current shape.
cudnnStatus_t pass_workspace(const spk_conv_plan_t &pl, int pass, int algo, size_t *bytes) {
    cudnnHandle_t h = spk_cudnn_handle();
    switch (pass) {
        case SPK_CONV_FWD:
            return cudnnGetConvolutionForwardWorkspaceSize(h, pl.xd, pl.wd, pl.cd[pass], pl.yd,
                                                           (cudnnConvolutionFwdAlgo_t)algo, bytes);
        case SPK_CONV_BWD_DATA:
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, pl.wd, pl.yd, pl.cd[pass], pl.xd,
                                                                (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
        default:
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, pl.xd, pl.yd, pl.cd[pass], pl.wd,
                                                                  (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
}

// Scratch tensors of a plan's shape (x, y, w) and a workspace of the cap, made when the first
// candidate is tried and freed once the pass is chosen. Filled with a non-zero pattern: some
// kernels run faster on zeros.
struct Trial {
    const spk_conv_plan_t &pl;
    size_t cap;
    void *x = nullptr, *y = nullptr, *w = nullptr;
    void *ws = nullptr;
    size_t ws_bytes = 0;
    cudaEvent_t t0 = nullptr, t1 = nullptr;

    Trial(const spk_conv_plan_t &plan, size_t workspace_cap) : pl(plan), cap(workspace_cap) {}
    ~Trial() {
        spk_cuda_free(x), spk_cuda_free(y), spk_cuda_free(w), spk_cuda_free(ws);  // each waits for the stream
        if (t0) cudaCheck(cudaEventDestroy(t0));
        if (t1) cudaCheck(cudaEventDestroy(t1));
    }

    void ensure_buffers(size_t bytes) {
        if (!x) {
            const size_t elem = pl.geom.bf16 ? 2 : sizeof(float);
            const size_t xb = x_elems(pl) * elem, yb = y_elems(pl) * elem, wb = w_elems(pl) * elem;
            x = spk_cuda_malloc(xb), y = spk_cuda_malloc(yb), w = spk_cuda_malloc(wb);
            cudaStream_t s = spk_cuda_stream_checked();
            cudaCheck(cudaMemsetAsync(x, 0x3c, xb, s));
            cudaCheck(cudaMemsetAsync(y, 0x3c, yb, s));
            cudaCheck(cudaMemsetAsync(w, 0x3c, wb, s));
            cudaCheck(cudaEventCreateWithFlags(&t0, cudaEventDefault));
            cudaCheck(cudaEventCreateWithFlags(&t1, cudaEventDefault));
        }
        if (bytes > ws_bytes) {
            spk_cuda_free(ws);
            ws = spk_cuda_malloc(bytes);
            ws_bytes = bytes;
        }
    }

    // Runs `pass` once with `algo`; CUDNN_STATUS_SUCCESS when cuDNN ran it.
    cudnnStatus_t run(int pass, int algo, size_t bytes) {
        cudnnHandle_t h = spk_cudnn_handle();
        const float one = 1.0f, zero = 0.0f;
        void *wsp = bytes ? ws : nullptr;
        switch (pass) {
            case SPK_CONV_FWD:
                return cudnnConvolutionForward(h, &one, pl.xd, x, pl.wd, w, pl.cd[pass],
                                               (cudnnConvolutionFwdAlgo_t)algo, wsp, bytes, &zero, pl.yd, y);
            case SPK_CONV_BWD_DATA:
                return cudnnConvolutionBackwardData(h, &one, pl.wd, w, pl.yd, y, pl.cd[pass],
                                                    (cudnnConvolutionBwdDataAlgo_t)algo, wsp, bytes, &zero, pl.xd, x);
            default:
                return cudnnConvolutionBackwardFilter(h, &one, pl.xd, x, pl.yd, y, pl.cd[pass],
                                                      (cudnnConvolutionBwdFilterAlgo_t)algo, wsp, bytes, &zero, pl.wd,
                                                      w);
        }
    }

    // Tries `algo` under math type `math`: its workspace within the cap, then one run (and, when
    // timing, a timed second one, in *ms). False when it cannot run here.
    bool attempt(int pass, int algo, cudnnMathType_t math, size_t *bytes, float *ms) {
        cudnnCheck(cudnnSetConvolutionMathType(pl.cd[pass], math));
        if (pass_workspace(pl, pass, algo, bytes) != CUDNN_STATUS_SUCCESS || *bytes > cap) return false;
        ensure_buffers(*bytes);
        if (run(pass, algo, *bytes) != CUDNN_STATUS_SUCCESS) return false;
        *ms = 0;
        if (!timed_search()) return true;
        cudaStream_t s = spk_cuda_stream_checked();
        cudaCheck(cudaEventRecord(t0, s));
        const cudnnStatus_t again = run(pass, algo, *bytes);
        cudaCheck(cudaEventRecord(t1, s));
        cudaCheck(cudaEventSynchronize(t1));
        cudaCheck(cudaEventElapsedTime(ms, t0, t1));
        if (*ms <= 0) *ms = 1e-6f;  // a clock too coarse for the run still counts as timed
        return again == CUDNN_STATUS_SUCCESS;
    }
};

// The pass's choice among the heuristics' results: the best tier with a candidate that runs,
// and in it the best-ranked one (or the fastest, timing); else `fallback` in FMA math. The
// chosen result's math type is left on the pass's descriptor.
template <typename Perf, typename Algo>
void pick(spk_conv_plan_t &pl, int pass, const Perf *perf, int n, Algo fallback) {
    Trial trial(pl, workspace_cap());
    const Precision prec = precision(pl);
    spk_conv_pass_t &out = pl.pass[pass];
    out = spk_conv_pass_t{};
    int best = -1;
    for (int t = 0; t <= 2 && best < 0; t++)
        for (int i = 0; i < n; i++) {
            if (tier(perf[i], prec) != t) continue;
            size_t bytes = 0;
            float ms = 0;
            out.tried++;
            if (!trial.attempt(pass, (int)perf[i].algo, run_math(perf[i].mathType, prec), &bytes, &ms)) {
                out.failed++;
                continue;
            }
            if (best >= 0 && !(ms < out.ms)) continue;
            best = i;
            out.algo = (int)perf[i].algo, out.reported = perf[i].mathType, out.ws_bytes = bytes, out.ms = ms;
            out.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
            if (!timed_search()) break;
        }
    if (best >= 0) {
        cudnnCheck(cudnnSetConvolutionMathType(pl.cd[pass], run_math(perf[best].mathType, prec)));
        return;
    }
    size_t bytes = 0;
    float ms = 0;
    out.tried++;
    if (!trial.attempt(pass, (int)fallback, CUDNN_FMA_MATH, &bytes, &ms)) {
        char shape[160];
        describe_shape(shape, sizeof shape, pl);
        spk_die(SPK_EXIT_FAILURE,
                "cuDNN runs no algorithm for the %s pass of a convolution of %s: the %d candidate(s) offered and the "
                "classic %s refused it or needed more workspace than the %.0f MiB cap (SPKDDP_CUDNN_WORKSPACE_MB)",
                pass == SPK_CONV_FWD        ? "forward"
                : pass == SPK_CONV_BWD_DATA ? "backward-data"
                                            : "backward-filter",
                shape, out.tried - 1, algo_name(pass, (int)fallback), (double)trial.cap / (1 << 20));
    }
    out.algo = (int)fallback, out.reported = CUDNN_FMA_MATH, out.deterministic = 1, out.fallback = 1;
    out.ws_bytes = bytes, out.ms = ms;
}

// One pass's choice: the heuristics' results (count(&n) says how many it has, query(want, &n,
// perf) gives them), then pick().
template <typename Perf, typename Algo, typename Count, typename Query>
void choose_pass(spk_conv_plan_t &pl, int pass, Algo fallback, Count count, Query query) {
    Perf perf[kMaxPerf];
    int want = 0, n = 0;
    cudnnCheck(count(&want));
    cudnnCheck(query(want < kMaxPerf ? want : kMaxPerf, &n, perf));
    pick(pl, pass, perf, n, fallback);
}

// BWD_FILTER_ALGO_0 and _3 sum with atomics: tier() excludes them unless fast or TF32 needs them.
void choose_all(spk_conv_plan_t &pl) {
    cudnnHandle_t h = spk_cudnn_handle();
    g_selections++;
    choose_pass<cudnnConvolutionFwdAlgoPerf_t>(
        pl, SPK_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        [&](int *n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); },
        [&](int want, int *n, cudnnConvolutionFwdAlgoPerf_t *perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, pl.xd, pl.wd, pl.cd[SPK_CONV_FWD], pl.yd, want, n, perf);
        });
    choose_pass<cudnnConvolutionBwdDataAlgoPerf_t>(
        pl, SPK_CONV_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        [&](int *n) { return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n); },
        [&](int want, int *n, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, pl.wd, pl.yd, pl.cd[SPK_CONV_BWD_DATA], pl.xd, want,
                                                               n, perf);
        });
    choose_pass<cudnnConvolutionBwdFilterAlgoPerf_t>(
        pl, SPK_CONV_BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        [&](int *n) { return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n); },
        [&](int want, int *n, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, pl.xd, pl.yd, pl.cd[SPK_CONV_BWD_FILTER], pl.wd,
                                                                 want, n, perf);
        });
}

// ---- descriptors ----------------------------------------------------------------------------

cudnnTensorFormat_t format(const spk_conv_geom_t &g) { return g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; }
cudnnDataType_t data_type(const spk_conv_geom_t &g) { return g.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

void set_length(spk_conv_plan_t &pl, int len) {
    const spk_conv_geom_t &g = pl.geom;
    pl.len = len;
    cudnnCheck(cudnnSetTensor4dDescriptor(pl.xd, format(g), data_type(g), g.B, g.Cin, g.H, len + g.W_extra));
    cudnnCheck(cudnnSetTensor4dDescriptor(pl.yd, format(g), data_type(g), g.B, g.Cout, out_h(pl), out_w(pl)));
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(cudnnGetConvolution2dForwardOutputDim(pl.cd[SPK_CONV_FWD], pl.xd, pl.wd, &on, &oc, &oh, &ow));
    SPK_ASSERT(on == g.B && oc == g.Cout && oh == out_h(pl) && ow == out_w(pl));
}

void update_workspace(spk_conv_plan_t &pl) {
    pl.ws_bytes = 0;
    for (int i = 0; i < 3; i++)
        if (pl.pass[i].ws_bytes > pl.ws_bytes) pl.ws_bytes = pl.pass[i].ws_bytes;
}

// Re-sets the descriptors to this length and asks for the workspaces there; an algorithm the
// bucket's choice cannot run at exactly this length is chosen anew for it.
void bind_length(spk_conv_plan_t &pl, int len) {
    set_length(pl, len);
    for (int i = 0; i < 3; i++)
        if (pass_workspace(pl, i, pl.pass[i].algo, &pl.pass[i].ws_bytes) != CUDNN_STATUS_SUCCESS) {
            choose_all(pl);
            break;
        }
    update_workspace(pl);
}

void destroy_plan(spk_conv_plan_t &pl) {
    if (!pl.valid) return;
    cudnnCheck(cudnnDestroyTensorDescriptor(pl.xd));
    cudnnCheck(cudnnDestroyTensorDescriptor(pl.yd));
    cudnnCheck(cudnnDestroyFilterDescriptor(pl.wd));
    for (int i = 0; i < 3; i++) cudnnCheck(cudnnDestroyConvolutionDescriptor(pl.cd[i]));
    pl.valid = 0;
}

// The least-used plan (the oldest among equals), or a free slot.
spk_conv_plan_t &victim() {
    spk_conv_plan_t *v = &g_plans[0];
    for (int i = 0; i < kPlans; i++) {
        spk_conv_plan_t &p = g_plans[i];
        if (!p.valid) return p;
        if (p.uses < v->uses || (p.uses == v->uses && p.serial < v->serial)) v = &p;
    }
    return *v;
}

spk_conv_plan_t &make_plan(const spk_conv_geom_t &g, int bucket) {
    spk_conv_plan_t &pl = victim();
    // cuDNN reads descriptors during the API call, not when the queued kernels run, so the
    // evicted plan's descriptors can go now.
    destroy_plan(pl);
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.xd));
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.yd));
    cudnnCheck(cudnnCreateFilterDescriptor(&pl.wd));
    for (int i = 0; i < 3; i++) cudnnCheck(cudnnCreateConvolutionDescriptor(&pl.cd[i]));
    pl.valid = 1;  // from here on destroy_plan must release the descriptors
    pl.geom = g;
    pl.bucket = bucket;
    pl.uses = 0;
    pl.serial = ++g_serial;
    cudnnCheck(cudnnSetFilter4dDescriptor(pl.wd, data_type(g), format(g), g.Cout, g.Cin, g.KH, g.KW));
    for (int i = 0; i < 3; i++) {
        cudnnCheck(cudnnSetConvolution2dDescriptor(pl.cd[i], g.PH, g.PW, g.SH, g.SW, g.DH, g.DW,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        cudnnCheck(cudnnSetConvolutionMathType(pl.cd[i], query_math(precision(pl))));
    }
    set_length(pl, bucket);  // choose for the bucket's largest length
    choose_all(pl);
    return pl;
}

}  // namespace

const spk_conv_plan_t &spk_conv_plan(const spk_conv_geom_t &g, int length) {
    const int bucket = length_bucket(length);
    auto matches = [&](const spk_conv_plan_t &p) {
        return p.valid && p.bucket == bucket && memcmp(&p.geom, &g, sizeof g) == 0;
    };
    spk_conv_plan_t *pl = matches(g_plans[g_last]) ? &g_plans[g_last] : nullptr;
    for (int i = 0; i < kPlans && !pl; i++)
        if (matches(g_plans[i])) pl = &g_plans[i];
    const bool fresh = !pl;
    if (fresh) pl = &make_plan(g, bucket);
    g_last = (int)(pl - g_plans);
    if (pl->len != length || fresh) bind_length(*pl, length);
    pl->uses++;
    if (fresh && verbose()) print_plan(stderr, *pl);
    return *pl;
}

void spk_conv1d_cuda_set_tf32(int allow) {
    if (g_tf32 == !!allow) return;
    spk_conv1d_cuda_release_plans();  // plans hold the old math permission
    g_tf32 = !!allow;
}

extern "C" void spk_conv1d_cuda_release_plans(void) {
    for (int i = 0; i < kPlans; i++) destroy_plan(g_plans[i]);
}

extern "C" void spk_cuda_print_conv_plans(void) {
    for (long long s = 1; s <= g_serial; s++)  // in creation order
        for (int i = 0; i < kPlans; i++)
            if (g_plans[i].valid && g_plans[i].serial == s) print_plan(stdout, g_plans[i]);
}

extern "C" void spk_cuda_conv_plan_counts(long long *made, long long *selections) {
    *made = g_serial;
    *selections = g_selections;
}

extern "C" void spk_cuda_conv_plan_census(int bf16, int *passes, int *tensor_op) {
    *passes = *tensor_op = 0;
    for (int i = 0; i < kPlans; i++)
        if (g_plans[i].valid && g_plans[i].geom.bf16 == !!bf16)
            for (int p = 0; p < 3; p++) {
                cudnnMathType_t runs = CUDNN_FMA_MATH;
                cudnnCheck(cudnnGetConvolutionMathType(g_plans[i].cd[p], &runs));
                ++*passes;
                *tensor_op += runs == CUDNN_TENSOR_OP_MATH;
            }
}
