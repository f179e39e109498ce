// The three 2-D convolution passes of cuDNN on NCHW fp32 tensors, as plain loops: zero
// padding, stride, dilation, one group; CUDNN_CONVOLUTION flips the filter, cross-correlation
// does not. out = alpha * result + beta * out, where beta == 0 does not read out (as cuDNN).
// Every output element is one fp32 sum in a fixed order, except the backward-filter sum over
// the batch when `batch_descending` (how the stand-in's non-deterministic algorithms differ
// between its two scheduling orders).
#pragma once

namespace spk_emu {

struct ConvShape {
    int n, c, h, w;  // input (B, Cin, H, W)
    int k, r, s;     // filter (Cout, Cin, R, S)
    int oh, ow;      // output (B, Cout, OH, OW)
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flip;  // CUDNN_CONVOLUTION
    bool tf32;  // inputs rounded to TF32 (tensor-op math)
};

void conv_forward(const ConvShape& g, const float* x, const float* w, float* y, float alpha, float beta);
void conv_backward_data(const ConvShape& g, const float* w, const float* dy, float* dx, float alpha, float beta);
void conv_backward_filter(const ConvShape& g, const float* x, const float* dy, float* dw, float alpha, float beta,
                          bool batch_descending);

}  // namespace spk_emu
