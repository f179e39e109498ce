// Conv2d (kernels/conv2d.h) on cuDNN's legacy API over channels-last tensors: x and y are NHWC as
// the contract has them; the weights, in PyTorch's layout, are reordered per call into a KRSC
// (Cout, KH, KW, Cin) copy in the workspace, the filter layout cuDNN's fast NHWC kernels take,
// and the filter gradient comes back the same way, added to dw. Plans, algorithms and math
// types: kernels/cuda/conv_plans.cuh (the policy of the 1-D convolution). dx is overwritten or
// accumulated through cuDNN's beta (0 or 1). Bias and its gradient are our own kernels (the
// gradient: channel sums over the output rows, fixed order; kernels/cuda/conv2d_common.cuh).
//
// workspace = [ KRSC weights, then the KRSC filter gradient ][ bias partial sums ][ cuDNN ],
// each region rounded up to 256 bytes.
#include "kernels/cuda/conv2d_common.cuh"

namespace {

// The workspace's head: the KRSC weights, then the KRSC filter gradient.
size_t head_bytes(const conv2d_shape_t *s) { return round256(conv2d_w_size(s) * sizeof(float)); }

}  // namespace

extern "C" size_t conv2d_workspace_floats_cuda(const conv2d_shape_t *s) {
    return conv2d_workspace_floats_of(s, 0, head_bytes(s));
}

extern "C" void conv2d_forward_cuda(float *y, const float *x, const float *w, const float *bias,
                                    const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    const spk_conv_plan_t &pl = conv2d_plan(s, 0);
    float *wk = workspace;
    conv2d_to_krsc(wk, w, s);
    conv2d_forward_pass(pl, y, x, wk, conv2d_tail(workspace, head_bytes(s), s).cudnn);
    if (bias) conv2d_epilogue(y, y, bias, 0, conv2d_y_size(s), s->Cout);
}

extern "C" void conv2d_backward_cuda(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy,
                                     const float *x, const float *w, const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    const conv2d_tail_t t = conv2d_tail(workspace, head_bytes(s), s);
    if (dbias) conv2d_bias_backward(dbias, dy, s, t.part);
    if (!dx && !dw) return;
    const spk_conv_plan_t &pl = conv2d_plan(s, 0);
    float *wk = workspace;
    if (dx) {
        conv2d_to_krsc(wk, w, s);
        conv2d_data_pass(pl, dx, dx_accumulate, dy, wk, t.cudnn);
    }
    if (dw) {  // the weights' copy is free again (same stream, in order)
        conv2d_filter_pass(pl, wk, dy, x, t.cudnn);
        conv2d_add_from_krsc(dw, wk, s);
    }
}
