// The three 2-D convolution passes of cuDNN as plain loops: zero padding, stride, dilation, one
// group; CUDNN_CONVOLUTION flips the filter, cross-correlation does not. Each tensor is indexed
// by its own layout (NCHW, or NHWC: channels last; a filter in NHWC is (K, R, S, C)). Data are
// float, or bfloat16 with float compute: inputs widened, every output element rounded to bf16
// (to nearest, ties to even) when stored, as cuDNN stores it. out = alpha * result + beta * out,
// where beta == 0 does not read out (as cuDNN). Every output element is one fp32 sum in a fixed
// order, except the backward-filter sum over the batch when `batch_descending` (how the
// stand-in's non-deterministic algorithms differ between its two scheduling orders).
#pragma once
#include <cstddef>

namespace spk_emu {

struct ConvShape {
    int n, c, h, w;  // input (B, Cin, H, W)
    int k, r, s;     // filter (Cout, Cin, R, S)
    int oh, ow;      // output (B, Cout, OH, OW)
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flip;    // CUDNN_CONVOLUTION
    bool tf32;    // inputs rounded to TF32 (tensor-op math)
    bool x_nhwc;  // the input's layout (and its gradient's)
    bool y_nhwc;  // the output's layout (and its gradient's)
    bool w_nhwc;  // the filter's layout: (K, R, S, C)
    bool bf16;    // x, w, y stored as bfloat16
};

// Bytes of the input, filter and output tensors.
size_t conv_x_bytes(const ConvShape& g);
size_t conv_w_bytes(const ConvShape& g);
size_t conv_y_bytes(const ConvShape& g);

void conv_forward(const ConvShape& g, const void* x, const void* w, void* y, float alpha, float beta);
void conv_backward_data(const ConvShape& g, const void* w, const void* dy, void* dx, float alpha, float beta);
void conv_backward_filter(const ConvShape& g, const void* x, const void* dy, void* dw, float alpha, float beta,
                          bool batch_descending);

}  // namespace spk_emu
