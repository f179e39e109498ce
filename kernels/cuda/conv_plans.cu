// The convolution plan cache (kernels/cuda/conv_plans.cuh): descriptors, algorithm choice and
// workspace sizes per shape, eviction, and the listing of the choices.
//
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7), best-ranked first, among
// the results this precision may run:
//   fp32 (default)  deterministic FMA kernels, under a CUDNN_FMA_MATH descriptor, which rules
//                   tensor cores out. cuDNN reports them as CUDNN_FMA_MATH (what PyTorch
//                   asserts) or possibly CUDNN_DEFAULT_MATH: both are taken.
//   --tf32          a deterministic tensor-core (TF32) result, else a non-deterministic one
//                   (the user asked for tensor cores; PyTorch's default takes those too), else
//                   a deterministic result of another math type; never the fp16
//                   down-conversion. The result's math type goes onto the pass's descriptor.
// SPKDDP_CUDNN_FAST=1 counts every result as deterministic. When nothing qualifies: the
// classic deterministic IMPLICIT_GEMM, BWD_DATA_ALGO_1, BWD_FILTER_ALGO_1 in FMA math.
// SPKDDP_CUDNN_VERBOSE=1 prints each plan as it is made; spk_cuda_print_conv_plans lists all.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cuda/conv_plans.cuh"
#include "kernels/cuda/cuda_check.h"

namespace {

// Training uses ~7 shapes, plus 7 for a short last batch and 7 per evaluation batch size;
// inference adds 7 per length bucket, which evict each other but not the training plans.
const int kPlans = 64;
spk_conv_plan_t g_plans[kPlans];
long long g_serial = 0;      // plans made
long long g_selections = 0;  // algorithm choices (heuristics queried)
int g_tf32 = 0;              // spk_cuda_set_tf32

const int kMaxPerf = 32;

// SPKDDP_CUDNN_FAST=1: the heuristics' best-ranked algorithm even when it is not deterministic
// (atomics), trading run-to-run bitwise reproducibility for speed.
bool fast_algorithms() {
    static const int fast = [] {
        const char *s = getenv("SPKDDP_CUDNN_FAST");
        return s && strcmp(s, "1") == 0;
    }();
    return fast;
}

bool verbose() {
    const char *s = getenv("SPKDDP_CUDNN_VERBOSE");
    return s && s[0] == '1';
}

int conv_pad(int K, int dilation) { return dilation * (K - 1) / 2; }

// Lengths up to 64 are their own bucket; above, 8 buckets per octave (the largest length of
// each is at most 12.5% above its smallest).
int length_bucket(int T) {
    if (T <= 64) return T;
    int step = 1;
    while ((T - 1) / step >= 16) step *= 2;
    return (T + step - 1) / step * step;
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
    if (p.fallback)
        snprintf(buf, cap, "%s %s (fallback: no heuristic result qualified, runs %s, %.2f MiB)", pass_names[pass],
                 algo_name(pass, p.algo), math_name(runs), (double)p.ws_bytes / (1 << 20));
    else
        snprintf(buf, cap, "%s %s (reported %s, runs %s%s, %.2f MiB)", pass_names[pass], algo_name(pass, p.algo),
                 math_name(p.reported), math_name(runs), p.deterministic ? "" : ", NON-DETERMINISTIC",
                 (double)p.ws_bytes / (1 << 20));
}

void print_plan(FILE *f, const spk_conv_plan_t &pl) {
    char d[3][160];
    for (int i = 0; i < 3; i++) describe_pass(d[i], sizeof d[i], pl, i);
    fprintf(f, "conv1d B=%d Cin=%d Cout=%d T=%d (bucket %d) K=%d d=%d: %s; %s; %s; used %lld times\n", pl.key[0],
            pl.key[1], pl.key[2], pl.T, pl.key[3], pl.key[4], pl.key[5], d[0], d[1], d[2], pl.uses);
}

// ---- choosing -------------------------------------------------------------------------------

// The preference tier of a heuristic result (0 first), or -1 when this precision may not run it.
template <typename Perf>
int tier(const Perf &p) {
    if (p.status != CUDNN_STATUS_SUCCESS) return -1;
    const bool det = p.determinism == CUDNN_DETERMINISTIC || fast_algorithms();
    if (!g_tf32) return det && (p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH) ? 0 : -1;
    if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return -1;  // fp16 inputs
    if (p.mathType == CUDNN_TENSOR_OP_MATH) return det ? 0 : 1;
    return det ? 2 : -1;
}

// The math type a taken result runs in: FMA in fp32 (never tensor cores), its own with TF32.
cudnnMathType_t run_math(cudnnMathType_t reported) { return g_tf32 ? reported : CUDNN_FMA_MATH; }

// Takes the first result of the best tier whose workspace size cuDNN gives under its math
// type (ws_of(algo, &bytes) asks for this pass), else `fallback` in FMA math.
template <typename Perf, typename Algo, typename WsOf>
void pick(spk_conv_pass_t *out, const Perf *perf, int n, cudnnConvolutionDescriptor_t cd, Algo fallback, WsOf ws_of) {
    for (int t = 0; t <= 2; t++)
        for (int i = 0; i < n; i++) {
            if (tier(perf[i]) != t) continue;
            cudnnCheck(cudnnSetConvolutionMathType(cd, run_math(perf[i].mathType)));
            if (ws_of(perf[i].algo, &out->ws_bytes) != CUDNN_STATUS_SUCCESS) continue;
            out->algo = (int)perf[i].algo;
            out->reported = perf[i].mathType;
            out->deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
            out->fallback = 0;
            return;
        }
    cudnnCheck(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    cudnnCheck(ws_of(fallback, &out->ws_bytes));
    *out = spk_conv_pass_t{(int)fallback, CUDNN_FMA_MATH, 1, 1, out->ws_bytes};
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

// One pass's choice: the heuristics' results (count(&n) says how many it has, query(want, &n,
// perf) gives them), then pick().
template <typename Perf, typename Algo, typename Count, typename Query>
void choose_pass(spk_conv_plan_t &pl, int pass, Algo fallback, Count count, Query query) {
    Perf perf[kMaxPerf];
    int want = 0, n = 0;
    cudnnCheck(count(&want));
    cudnnCheck(query(want < kMaxPerf ? want : kMaxPerf, &n, perf));
    pick(&pl.pass[pass], perf, n, pl.cd[pass], fallback,
         [&](Algo a, size_t *bytes) { return pass_workspace(pl, pass, (int)a, bytes); });
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

void set_length(spk_conv_plan_t &pl, int T) {
    const int B = pl.key[0], Cin = pl.key[1], Cout = pl.key[2], K = pl.key[4], d = pl.key[5];
    cudnnCheck(
        cudnnSetTensor4dDescriptor(pl.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, Cin, 1, T + 2 * conv_pad(K, d)));
    cudnnCheck(cudnnSetTensor4dDescriptor(pl.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, Cout, 1, T));
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(cudnnGetConvolution2dForwardOutputDim(pl.cd[SPK_CONV_FWD], pl.xd, pl.wd, &on, &oc, &oh, &ow));
    SPK_ASSERT(on == B && oc == Cout && oh == 1 && ow == T);
    pl.T = T;
}

void update_workspace(spk_conv_plan_t &pl) {
    pl.ws_bytes = 0;
    for (int i = 0; i < 3; i++)
        if (pl.pass[i].ws_bytes > pl.ws_bytes) pl.ws_bytes = pl.pass[i].ws_bytes;
}

// Re-sets the descriptors to length T and asks for the workspaces there; an algorithm the
// bucket's choice cannot run at exactly T is chosen anew for T.
void bind_length(spk_conv_plan_t &pl, int T) {
    set_length(pl, T);
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

spk_conv_plan_t &make_plan(const int key[6]) {
    spk_conv_plan_t &pl = victim();
    // cuDNN reads descriptors during the API call, not when the queued kernels run, so the
    // evicted plan's descriptors can go now.
    destroy_plan(pl);
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.xd));
    cudnnCheck(cudnnCreateTensorDescriptor(&pl.yd));
    cudnnCheck(cudnnCreateFilterDescriptor(&pl.wd));
    for (int i = 0; i < 3; i++) cudnnCheck(cudnnCreateConvolutionDescriptor(&pl.cd[i]));
    pl.valid = 1;  // from here on destroy_plan must release the descriptors
    memcpy(pl.key, key, sizeof pl.key);
    pl.uses = 0;
    pl.serial = ++g_serial;
    cudnnCheck(cudnnSetFilter4dDescriptor(pl.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, key[2], key[1], 1, key[4]));
    for (int i = 0; i < 3; i++) {
        cudnnCheck(cudnnSetConvolution2dDescriptor(pl.cd[i], 0, 0, 1, 1, 1, key[5], CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
        // What the heuristics may offer: FMA only (fp32-accurate), or with TF32 allowed
        // (CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 on Ampere and newer).
        cudnnCheck(cudnnSetConvolutionMathType(pl.cd[i], g_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    }
    set_length(pl, key[3]);  // choose for the bucket's largest length
    choose_all(pl);
    return pl;
}

}  // namespace

const spk_conv_plan_t &spk_conv_plan(int B, int Cin, int Cout, int T, int K, int dilation) {
    const int key[6] = {B, Cin, Cout, length_bucket(T), K, dilation};
    spk_conv_plan_t *pl = nullptr;
    for (int i = 0; i < kPlans && !pl; i++)
        if (g_plans[i].valid && memcmp(g_plans[i].key, key, sizeof key) == 0) pl = &g_plans[i];
    const bool fresh = !pl;
    if (fresh) pl = &make_plan(key);
    if (pl->T != T || fresh) bind_length(*pl, T);
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
