// Conv1d (kernels/conv1d.h) on cuDNN: the 1-D convolution is a 2-D one of height 1 (plans,
// algorithms and math types: kernels/cuda/conv_plans.cuh), with the reflect padding done by
// our own kernel into the caller's workspace, and its adjoint (folding the gradient of padded
// positions back onto their sources) after the backward-data call. Bias and its gradient are
// our own kernels (the gradient: channel sums of kernels/cuda/channel_sums.cuh).
//
// workspace = [ padded x / padded dx: B*Cin*(T+2p) floats, rounded up to 64 ] [ cuDNN ]
//
// SPKDDP_CONV1X1_GEMM=1 runs K = 1 on cuBLAS instead (the bf16 path's way): y_b = W x_b and
// dx_b += W^T dy_b as strided-batched GEMMs, dW += dyf xf^T as one GEMM over the batch folded to
// (C, B*T) in the workspace = [ xf: Cin*B*T ][ dyf: Cout*B*T ]. Deterministic, as cuDNN's
// choices are. An experiment against cuDNN's deterministic 1x1 passes, which ran at 21 (input
// gradient) and 33 TFLOP/s (weight gradient) on an H200 where the forward reached 43: the
// default follows what gpu_check's bench-fp32-gemm1x1 measures.
#include <stdlib.h>
#include <string.h>

#include "kernels/base/env.h"
#include "kernels/cuda/conv1d_common.cuh"
#include "kernels/cuda/conv_plans.cuh"
#include "kernels/cuda/group_calls.cuh"

namespace {

size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

void check_shape(int B, int Cin, int Cout, int T, int K, int dilation) {
    conv_check_contract(B, Cin, Cout, T, K, dilation);
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
__global__ void reflect_pad_kernel(float *xp, const float *x, size_t rows, int T, int p) {
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
__global__ void reflect_fold_add_kernel(float *dx, const float *g, size_t rows, int T, int p) {
    const size_t tp = (size_t)T + 2 * (size_t)p;
    SPK_GRID_LOOP(i, rows * (size_t)T) {
        const size_t r = i / T;
        const int t = (int)(i - r * T);
        const float *gr = g + r * tp;
        float acc = gr[t + p];
        if (t >= 1 && t <= p) acc += gr[p - t];
        if (t <= T - 2 && t >= T - 1 - p) acc += gr[p + 2 * (T - 1) - t];
        dx[i] += acc;
    }
}

bool gemm_1x1(int K) {
    static const bool on = spk_env_switch("SPKDDP_CONV1X1_GEMM");
    return K == 1 && on;
}

size_t gemm_1x1_floats(int B, int Cin, int Cout, int T) {
    return round64((size_t)Cin * B * T) + round64((size_t)Cout * B * T);
}

// The plan: a convolution of height 1 on NCHW floats over the padded input (conv_plans.cuh).
const spk_conv_plan_t &plan_of(int B, int Cin, int Cout, int T, int K, int dilation) {
    const spk_conv_geom_t g = {1, B, Cin, Cout, 1, 2 * conv_pad(K, dilation), 1, K, 1, 1, 0, 0, 1, dilation, 0, 0};
    return spk_conv_plan(g, T);
}

float *cudnn_workspace(float *workspace, int B, int Cin, int T, int K, int dilation) {
    return workspace + pad_floats(B, Cin, T, K, dilation);
}

}  // namespace

extern "C" size_t conv1d_workspace_floats_cuda(int B, int Cin, int Cout, int T, int K, int dilation) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (gemm_1x1(K)) return gemm_1x1_floats(B, Cin, Cout, T);
    const spk_conv_plan_t &pl = plan_of(B, Cin, Cout, T, K, dilation);
    return pad_floats(B, Cin, T, K, dilation) + round64((pl.ws_bytes + 3) / 4);
}

extern "C" void conv1d_forward_cuda(float *y, const float *x, const float *w, const float *bias, int B, int Cin,
                                    int Cout, int T, int K, int dilation, float *workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (gemm_1x1(K)) {
        spk_sgemm_batched_cuda('N', 'N', Cout, T, Cin, 1.0f, w, Cin, 0, x, T, (int64_t)Cin * T, 0.0f, y, T,
                               (int64_t)Cout * T, B);
        if (bias) conv_bias_forward(y, bias, B, Cout, T);
        return;
    }
    const spk_conv_plan_t &pl = plan_of(B, Cin, Cout, T, K, dilation);
    const int p = conv_pad(K, dilation);
    SPK_ASSERT(workspace != nullptr || (p == 0 && pl.ws_bytes == 0));
    const float one = 1.0f, zero = 0.0f;
    const float *xin = x;
    if (p > 0) {
        const size_t rows = (size_t)B * Cin;
        SPK_LAUNCH(reflect_pad_kernel, spk_grid(rows * (T + 2 * p)), workspace, x, rows, T, p);
        xin = workspace;
    }
    float *cws = cudnn_workspace(workspace, B, Cin, T, K, dilation);
    const auto fwd = (cudnnConvolutionFwdAlgo_t)pl.pass[SPK_CONV_FWD].algo;
    cudnnCheck(cudnnConvolutionForward(spk_cudnn_handle(), &one, pl.xd, xin, pl.wd, w, pl.cd[SPK_CONV_FWD], fwd,
                                       pl.ws_bytes ? cws : nullptr, pl.ws_bytes, &zero, pl.yd, y));
    if (bias) conv_bias_forward(y, bias, B, Cout, T);
}

// dx overwritten: zeroed first (a device memset is cheap), then the accumulating passes.
extern "C" void conv1d_backward_cuda(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy,
                                     const float *x, const float *w, int B, int Cin, int Cout, int T, int K,
                                     int dilation, float *workspace) {
    check_shape(B, Cin, Cout, T, K, dilation);
    if (!dx && !dw && !dbias) return;
    if (dx && !dx_accumulate) spk_cuda_memset0(dx, (size_t)B * Cin * T * sizeof(float));
    if (gemm_1x1(K)) {
        if (dx)
            spk_sgemm_batched_cuda('T', 'N', Cin, T, Cout, 1.0f, w, Cin, 0, dy, T, (int64_t)Cout * T, 1.0f, dx, T,
                                   (int64_t)Cin * T, B);
        if (dw) {
            SPK_ASSERT(workspace != nullptr);
            float *xf = workspace, *dyf = workspace + round64((size_t)Cin * B * T);
            conv_fold(xf, x, B, Cin, T);
            conv_fold(dyf, dy, B, Cout, T);
            spk_sgemm_cuda('N', 'T', Cout, Cin, B * T, 1.0f, dyf, B * T, xf, B * T, 1.0f, dw, Cin);
        }
        if (dbias) conv_bias_backward(dbias, dy, B, Cout, T);
        return;
    }
    const spk_conv_plan_t &pl = plan_of(B, Cin, Cout, T, K, dilation);
    cudnnHandle_t h = spk_cudnn_handle();
    const int p = conv_pad(K, dilation);
    SPK_ASSERT(workspace != nullptr || (p == 0 && pl.ws_bytes == 0));
    const float one = 1.0f, zero = 0.0f;
    float *cws = cudnn_workspace(workspace, B, Cin, T, K, dilation);
    void *cws_or_null = pl.ws_bytes ? cws : nullptr;
    const auto bwd_data = (cudnnConvolutionBwdDataAlgo_t)pl.pass[SPK_CONV_BWD_DATA].algo;
    const auto bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)pl.pass[SPK_CONV_BWD_FILTER].algo;
    const size_t rows = (size_t)B * Cin;
    if (dx) {
        if (p == 0) {  // no padding: accumulate straight into dx (beta = 1)
            cudnnCheck(cudnnConvolutionBackwardData(h, &one, pl.wd, w, pl.yd, dy, pl.cd[SPK_CONV_BWD_DATA], bwd_data,
                                                    cws_or_null, pl.ws_bytes, &one, pl.xd, dx));
        } else {  // gradient of the padded input, then folded onto dx
            cudnnCheck(cudnnConvolutionBackwardData(h, &one, pl.wd, w, pl.yd, dy, pl.cd[SPK_CONV_BWD_DATA], bwd_data,
                                                    cws_or_null, pl.ws_bytes, &zero, pl.xd, workspace));
            SPK_LAUNCH(reflect_fold_add_kernel, spk_grid(rows * T), dx, workspace, rows, T, p);
        }
    }
    if (dw) {
        const float *xin = x;
        if (p > 0) {  // the padded-gradient buffer is free again (same stream, in order)
            SPK_LAUNCH(reflect_pad_kernel, spk_grid(rows * (T + 2 * p)), workspace, x, rows, T, p);
            xin = workspace;
        }
        cudnnCheck(cudnnConvolutionBackwardFilter(h, &one, pl.xd, xin, pl.yd, dy, pl.cd[SPK_CONV_BWD_FILTER],
                                                  bwd_filter, cws_or_null, pl.ws_bytes, &one, pl.wd, dw));
    }
    if (dbias) conv_bias_backward(dbias, dy, B, Cout, T);
}

// ---- the world-size-invariant mode (kernels/conv1d.h) -------------------------------------------
// cuDNN's algorithm and its rounding may depend on B: every sample gets calls of its own, with the
// plan of B = 1 (one per shape, so the same for every batch), and in training every group of
// samples, with the plan of B = group.

namespace {

// part[b, o] = sum_t dy[b, o, t] in a fixed order: one block per (b, o).
__global__ void sample_bias_sums_kernel(float *part, const float *dy, int T) {
    __shared__ double sh[SPK_CUDA_THREADS];
    const size_t row = blockIdx.x;
    double acc = 0.0;
    SPK_ROW_LOOP(t, T) acc += dy[row * T + t];
    const double s = spk_block_sum(acc, sh);
    if (threadIdx.x == 0) part[row] = (float)s;
}

}  // namespace

// Room for the calls of any group of B samples.
extern "C" size_t conv1d_workspace_floats_fixed_cuda(int B, int Cin, int Cout, int T, int K, int dilation) {
    return most_over_group_sizes(B, [&](int n) { return conv1d_workspace_floats_cuda(n, Cin, Cout, T, K, dilation); });
}

extern "C" void conv1d_forward_grouped_cuda(float *y, const float *x, const float *w, const float *bias, int B, int Cin,
                                            int Cout, int T, int K, int dilation, float *workspace, int group) {
    check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    const size_t nx = (size_t)group * Cin * T, ny = (size_t)group * Cout * T;
    for (int g = 0; g < B / group; g++)
        conv1d_forward_cuda(y + g * ny, x + g * nx, w, bias, group, Cin, Cout, T, K, dilation, workspace);
}

extern "C" void conv1d_forward_fixed_cuda(float *y, const float *x, const float *w, const float *bias, int B, int Cin,
                                          int Cout, int T, int K, int dilation, float *workspace) {
    conv1d_forward_grouped_cuda(y, x, w, bias, B, Cin, Cout, T, K, dilation, workspace, 1);
}

extern "C" void conv1d_backward_exact_cuda(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias,
                                           const float *dy, const float *x, const float *w, int B, int Cin, int Cout,
                                           int T, int K, int dilation, float *workspace, int group) {
    check_shape(B, Cin, Cout, T, K, dilation);
    SPK_ASSERT(group > 0 && B % group == 0);
    const size_t nx = (size_t)group * Cin * T, ny = (size_t)group * Cout * T, nw = (size_t)Cout * Cin * K;
    if (dx || !xsum_empty(dw))
        by_group_terms(B / group, dw_tmp, dw, nw, [&](int g, float *dwg) {
            conv1d_backward_cuda(dx ? dx + g * nx : nullptr, dx_accumulate, dwg, nullptr, dy + g * ny, x + g * nx, w,
                                 group, Cin, Cout, T, K, dilation, workspace);
        });
    if (xsum_empty(dbias)) return;
    float *part = (float *)spk_cuda_scratch((size_t)B * Cout * sizeof(float));  // (B, Cout)
    SPK_LAUNCH(sample_bias_sums_kernel, spk_rows_grid((size_t)B * Cout), part, dy, T);
    xsum_add_cuda(dbias, part, B, Cout, group);
}
