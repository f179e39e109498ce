// What the float32 and the bf16 2-D convolutions (kernels/cuda/conv2d.cu, conv2d_bf16.cu) share:
// the shape checks, the cuDNN plan and its three passes, the weights' reorder into the KRSC
// copy cuDNN's NHWC kernels take and the filter gradient's reorder back, the output epilogue
// (widening, bias, accumulation) and the bias gradient: channel sums over the output rows in two
// deterministic stages (kernels/cuda/channel_sums.cuh).
#pragma once
#include "kernels/conv2d.h"
#include "kernels/cuda/channel_sums.cuh"
#include "kernels/cuda/conv_plans.cuh"
#include "kernels/cuda/group_calls.cuh"

namespace {

inline void conv2d_check(const conv2d_shape_t *s) {
    SPK_ASSERT(s->B > 0 && s->Cin > 0 && s->Cout > 0 && s->H > 0 && s->W > 0 && s->KH > 0 && s->KW > 0);
    SPK_ASSERT(s->SH > 0 && s->SW > 0 && s->DH > 0 && s->DW > 0 && s->PH >= 0 && s->PW >= 0);
    SPK_ASSERT(conv2d_out_h(s) > 0 && conv2d_out_w(s) > 0);
    // cuDNN's legacy descriptors count elements in int
    SPK_ASSERT(conv2d_x_size(s) < 0x7fffffffu && conv2d_y_size(s) < 0x7fffffffu && conv2d_w_size(s) < 0x7fffffffu);
}

// The shape of `per` of s's samples: one cuDNN call's.
inline conv2d_shape_t conv2d_samples_of(const conv2d_shape_t *s, int per) {
    conv2d_shape_t c = *s;
    c.B = per;
    return c;
}

inline size_t conv2d_rows(const conv2d_shape_t *s) { return (size_t)s->B * conv2d_out_h(s) * conv2d_out_w(s); }
inline size_t round256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

// The plan: NHWC tensors, a KRSC filter, float or bf16 data; the width W is the length.
inline const spk_conv_plan_t &conv2d_plan(const conv2d_shape_t *s, int bf16) {
    spk_conv_geom_t g = {};  // W_extra 0: cuDNN pads
    g.dims = 2, g.B = s->B, g.Cin = s->Cin, g.Cout = s->Cout, g.H = s->H;
    g.KH = s->KH, g.KW = s->KW, g.SH = s->SH, g.SW = s->SW, g.PH = s->PH, g.PW = s->PW, g.DH = s->DH, g.DW = s->DW;
    g.nhwc = 1, g.bf16 = bf16;
    return spk_conv_plan(g, s->W);
}

// Bytes of the bias gradient's partial sums.
inline size_t conv2d_bias_bytes(const conv2d_shape_t *s) {
    return round256(sizeof(spk_fsum) * (size_t)s->Cout * spk_rows_channel_splits(conv2d_rows(s), s->Cout));
}

// A workspace ends with the bias gradient's partial sums and the plan's cuDNN workspace, after
// `head` bytes (a multiple of 256) of the caller's own regions.
struct conv2d_tail_t {
    void *part;   // the bias gradient's partial sums
    void *cudnn;  // the plan's workspace
};

inline conv2d_tail_t conv2d_tail(float *workspace, size_t head, const conv2d_shape_t *s) {
    char *p = (char *)workspace + head;
    return conv2d_tail_t{p, p + conv2d_bias_bytes(s)};
}

inline size_t conv2d_workspace_floats_of(const conv2d_shape_t *s, int bf16, size_t head) {
    conv2d_check(s);
    return (head + conv2d_bias_bytes(s) + round256(conv2d_plan(s, bf16).ws_bytes)) / sizeof(float);
}

// The cuDNN workspace of the plan: a pointer only when there is one.
inline void *cudnn_ws(const spk_conv_plan_t &pl, void *p) { return pl.ws_bytes ? p : nullptr; }

// ---- the three passes on the plan's descriptors (alpha 1; out = or += by beta 0 or 1) ----------

inline void conv2d_forward_pass(const spk_conv_plan_t &pl, void *y, const void *x, const void *wk, void *ws) {
    const float one = 1.0f, zero = 0.0f;
    cudnnCheck(cudnnConvolutionForward(spk_cudnn_handle(), &one, pl.xd, x, pl.wd, wk, pl.cd[SPK_CONV_FWD],
                                       (cudnnConvolutionFwdAlgo_t)pl.pass[SPK_CONV_FWD].algo, cudnn_ws(pl, ws),
                                       pl.ws_bytes, &zero, pl.yd, y));
}

inline void conv2d_data_pass(const spk_conv_plan_t &pl, void *dx, int accumulate, const void *dy, const void *wk,
                             void *ws) {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cudnnCheck(cudnnConvolutionBackwardData(spk_cudnn_handle(), &one, pl.wd, wk, pl.yd, dy, pl.cd[SPK_CONV_BWD_DATA],
                                            (cudnnConvolutionBwdDataAlgo_t)pl.pass[SPK_CONV_BWD_DATA].algo,
                                            cudnn_ws(pl, ws), pl.ws_bytes, &beta, pl.xd, dx));
}

inline void conv2d_filter_pass(const spk_conv_plan_t &pl, void *dwk, const void *dy, const void *x, void *ws) {
    const float one = 1.0f, zero = 0.0f;
    cudnnCheck(cudnnConvolutionBackwardFilter(spk_cudnn_handle(), &one, pl.xd, x, pl.yd, dy, pl.cd[SPK_CONV_BWD_FILTER],
                                              (cudnnConvolutionBwdFilterAlgo_t)pl.pass[SPK_CONV_BWD_FILTER].algo,
                                              cudnn_ws(pl, ws), pl.ws_bytes, &zero, pl.wd, dwk));
}

// ---- kernels --------------------------------------------------------------------------------

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(spk_bf16 v) { return spk_bf16_to_f32(v); }

// wk (Cout, KH*KW, Cin) = w (Cout, Cin, KH*KW): one thread per element of wk (coalesced writes).
template <typename T>
__global__ void to_krsc_kernel(T *wk, const T *w, int Cout, int Cin, int taps) {
    SPK_GRID_LOOP(i, (size_t)Cout * taps * Cin) {
        const size_t c = i % Cin, ot = i / Cin, t = ot % taps, o = ot / taps;
        wk[i] = w[(o * Cin + c) * taps + t];
    }
}

// dw (Cout, Cin, KH*KW) += dwk (Cout, KH*KW, Cin), widened: one thread per element of dw.
template <typename T>
__global__ void add_from_krsc_kernel(float *dw, const T *dwk, int Cout, int Cin, int taps) {
    SPK_GRID_LOOP(i, (size_t)Cout * Cin * taps) {
        const size_t t = i % taps, oc = i / taps, c = oc % Cin, o = oc / Cin;
        dw[i] += widen(dwk[(o * taps + t) * Cin + c]);
    }
}

// out (n / C rows of C) = or += widen(src) (+ bias); out may be src (float): each element is read,
// then written, by one thread.
template <typename T>
__global__ void epilogue_kernel(float *out, const T *src, const float *bias, int accumulate, size_t n, int C) {
    SPK_GRID_LOOP(i, n) {
        float v = widen(src[i]);
        if (bias) v += bias[i % C];
        out[i] = accumulate ? out[i] + v : v;
    }
}

__global__ void bias_grad_sum_kernel(spk_fsum *part, const float *dy, size_t N, int C) {
    __shared__ spk_fsum sh[SPK_CUDA_THREADS];
    spk_rows_channel_partial<1>(part, N, C, spk_value_term{dy}, sh);
}

// ---- launches -------------------------------------------------------------------------------

template <typename T>
inline void conv2d_to_krsc(T *wk, const T *w, const conv2d_shape_t *s) {
    SPK_LAUNCH(to_krsc_kernel<T>, spk_grid(conv2d_w_size(s)), wk, w, s->Cout, s->Cin, s->KH * s->KW);
}
template <typename T>
inline void conv2d_add_from_krsc(float *dw, const T *dwk, const conv2d_shape_t *s) {
    SPK_LAUNCH(add_from_krsc_kernel<T>, spk_grid(conv2d_w_size(s)), dw, dwk, s->Cout, s->Cin, s->KH * s->KW);
}
// out = or += src (+ bias) over n elements of rows of C channels.
template <typename T>
inline void conv2d_epilogue(float *out, const T *src, const float *bias, int accumulate, size_t n, int C) {
    SPK_LAUNCH(epilogue_kernel<T>, spk_grid(n), out, src, bias, accumulate, n, C);
}

// dbias[o] += sum over the output rows of dy[row, o]; `part` of conv2d_bias_bytes.
inline void conv2d_bias_backward(float *dbias, const float *dy, const conv2d_shape_t *s, void *part) {
    const size_t N = conv2d_rows(s);
    const int S = spk_rows_channel_splits(N, s->Cout);
    SPK_LAUNCH(bias_grad_sum_kernel, spk_rows_channel_grid(s->Cout, S), (spk_fsum *)part, dy, N, s->Cout);
    spk_channel_totals_add(dbias, (const spk_fsum *)part, s->Cout, S);
}

}  // namespace
