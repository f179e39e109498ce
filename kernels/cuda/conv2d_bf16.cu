// Conv2d with bf16 operands (kernels/conv2d_bf16.h) on cuDNN's bf16 convolutions: bf16 NHWC
// tensors and KRSC filter with float compute (cuDNN's PSEUDO_BFLOAT16_CONFIG, tensor cores),
// planned as the float32 convolution (kernels/cuda/conv2d.cu, conv_plans.cuh). The forward
// rounds x into xh (unless x is NULL), the backward rounds dy into the workspace; the weights
// are reordered into a KRSC copy per call, the filter gradient back into dw's layout.
//
// On the GPU the outputs pass through bf16, as PyTorch AMP's convolutions do: cuDNN writes y, dx
// and dw in bf16 (its bf16 configuration has bf16 outputs), and our kernels widen them into the
// float32 outputs (y written, dx written or added, dw added); the rounded forward keeps cuDNN's
// y. The CPU keeps float32 outputs, so the two agree to bf16 precision (8 significant bits), not
// to float32 rounding. The bias is added in float32 and its gradient is the channel sums of the
// float32 dy, as on the CPU.
//
// workspace = [ dy rounded: (B, OH, OW, Cout) bf16 ][ KRSC weights, then the KRSC filter
// gradient: bf16 ][ cuDNN's y or dx: bf16 ][ bias partial sums ][ cuDNN ], each region rounded
// up to 256 bytes.
#include "kernels/cuda/conv2d_common.cuh"

namespace {

struct Regions {
    spk_bf16 *dyh;  // (B, OH, OW, Cout)
    spk_bf16 *wk;   // (Cout, KH, KW, Cin)
    spk_bf16 *out;  // y (B, OH, OW, Cout) or dx (B, H, W, Cin) as cuDNN writes them
    conv2d_tail_t tail;
};

size_t half_bytes(size_t n) { return round256(n * sizeof(spk_bf16)); }

size_t out_bytes(const conv2d_shape_t *s) {
    const size_t nx = conv2d_x_size(s), ny = conv2d_y_size(s);
    return half_bytes(nx > ny ? nx : ny);
}

size_t head_bytes(const conv2d_shape_t *s) {
    return half_bytes(conv2d_y_size(s)) + half_bytes(conv2d_w_size(s)) + out_bytes(s);
}

Regions regions(float *workspace, const conv2d_shape_t *s) {
    Regions r;
    r.dyh = (spk_bf16 *)workspace;
    r.wk = r.dyh + half_bytes(conv2d_y_size(s)) / sizeof(spk_bf16);
    r.out = r.wk + half_bytes(conv2d_w_size(s)) / sizeof(spk_bf16);
    r.tail = conv2d_tail(workspace, head_bytes(s), s);
    return r;
}

}  // namespace

extern "C" size_t conv2d_bf16_workspace_floats_cuda(const conv2d_shape_t *s) {
    return conv2d_workspace_floats_of(s, 1, head_bytes(s));
}

// As the float32 one's: the plan's passes share one workspace.
extern "C" size_t conv2d_bf16_forward_workspace_floats_cuda(const conv2d_shape_t *s) {
    return conv2d_bf16_workspace_floats_cuda(s);
}

namespace {

// cuDNN's bf16 forward into out, on xh (rounded from x first unless x is NULL).
void forward_into(spk_bf16 *out, spk_bf16 *xh, const float *x, const spk_bf16 *w, const conv2d_shape_t *s,
                  const Regions &r) {
    const spk_conv_plan_t &pl = conv2d_plan(s, 1);
    if (x) bf16_from_f32_cuda(xh, x, conv2d_x_size(s));
    conv2d_to_krsc(r.wk, w, s);
    conv2d_forward_pass(pl, out, xh, r.wk, r.tail.cudnn);
}

// cuDNN's bf16 backward passes from dyh: the input gradient into dxh, the weight gradient added
// into dw (either NULL: not computed).
void backward_passes(spk_bf16 *dxh, float *dw, const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w,
                     const conv2d_shape_t *s, const Regions &r) {
    const spk_conv_plan_t &pl = conv2d_plan(s, 1);
    if (dxh) {
        conv2d_to_krsc(r.wk, w, s);
        conv2d_data_pass(pl, dxh, 0, dyh, r.wk, r.tail.cudnn);
    }
    if (dw) {  // the weights' copy is free again (same stream, in order)
        conv2d_filter_pass(pl, r.wk, dyh, xh, r.tail.cudnn);
        conv2d_add_from_krsc(dw, r.wk, s);
    }
}

}  // namespace

extern "C" void conv2d_bf16_forward_cuda(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                                         const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    const Regions r = regions(workspace, s);
    forward_into(r.out, xh, x, w, s, r);
    conv2d_epilogue(y, r.out, bias, 0, conv2d_y_size(s), s->Cout);
}

// cuDNN writes its bf16 output straight into yh.
extern "C" void conv2d_bf16_forward_rounded_cuda(spk_bf16 *yh, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                                 const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    forward_into(yh, xh, x, w, s, regions(workspace, s));
}

extern "C" void conv2d_bf16_backward_cuda(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy,
                                          const spk_bf16 *dyh, const spk_bf16 *xh, const spk_bf16 *w,
                                          const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    SPK_ASSERT(!dyh != !dy && (!dyh || !dbias));
    const Regions r = regions(workspace, s);
    if (dbias) conv2d_bias_backward(dbias, dy, s, r.tail.part);
    if (!dx && !dw) return;
    if (!dyh) {
        bf16_from_f32_cuda(r.dyh, dy, conv2d_y_size(s));
        dyh = r.dyh;
    }
    backward_passes(dx ? r.out : nullptr, dw, dyh, xh, w, s, r);
    if (dx) conv2d_epilogue(dx, r.out, nullptr, dx_accumulate, conv2d_x_size(s), s->Cin);
}

// cuDNN writes its bf16 input gradient straight into dxh.
extern "C" void conv2d_bf16_backward_rounded_cuda(spk_bf16 *dxh, float *dw, const spk_bf16 *dyh, const spk_bf16 *xh,
                                                  const spk_bf16 *w, const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    SPK_ASSERT(dxh && dyh);
    backward_passes(dxh, dw, dyh, xh, w, s, regions(workspace, s));
}

// ---- the world-size-invariant mode (kernels/conv2d_bf16.h) ---------------------------------------
// Every sample's forward gets calls of its own on the plan of B = 1, and the exact backward calls
// of each group of samples on the plan of B = group, as the float32 convolution's
// (kernels/cuda/conv2d.cu), whose exact bias sums serve here too.

// Room for the calls of one sample and of any group of samples (a divisor of B), and for the
// float32 convolution's exact bias sums.
extern "C" size_t conv2d_bf16_workspace_floats_fixed_cuda(const conv2d_shape_t *s) {
    const size_t calls = most_over_group_sizes(s->B, [&](int n) {
        const conv2d_shape_t sn = conv2d_samples_of(s, n);
        return conv2d_bf16_workspace_floats_cuda(&sn);
    });
    const size_t f32 = conv2d_workspace_floats_fixed_cuda(s);
    return calls > f32 ? calls : f32;
}

extern "C" void conv2d_bf16_forward_fixed_cuda(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                               const float *bias, const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    const conv2d_shape_t s1 = conv2d_samples_of(s, 1);
    const size_t nx = conv2d_x_size(&s1), ny = conv2d_y_size(&s1);
    for (int b = 0; b < s->B; b++)
        conv2d_bf16_forward_cuda(y + b * ny, xh + b * nx, x ? x + b * nx : nullptr, w, bias, &s1, workspace);
}

extern "C" void conv2d_bf16_forward_rounded_fixed_cuda(spk_bf16 *yh, spk_bf16 *xh, const float *x, const spk_bf16 *w,
                                                       const conv2d_shape_t *s, float *workspace) {
    conv2d_check(s);
    const conv2d_shape_t s1 = conv2d_samples_of(s, 1);
    const size_t nx = conv2d_x_size(&s1), ny = conv2d_y_size(&s1);
    for (int b = 0; b < s->B; b++)
        conv2d_bf16_forward_rounded_cuda(yh + b * ny, xh + b * nx, x ? x + b * nx : nullptr, w, &s1, workspace);
}

extern "C" void conv2d_bf16_backward_exact_cuda(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias,
                                                const float *dy, const spk_bf16 *dyh, const spk_bf16 *xh,
                                                const spk_bf16 *w, const conv2d_shape_t *s, float *workspace,
                                                int group) {
    conv2d_check(s);
    SPK_ASSERT(group > 0 && s->B % group == 0);
    SPK_ASSERT(!dy != !dyh && (!dyh || xsum_empty(dbias)));
    if (!xsum_empty(dbias))  // of dy as float32, as the default backward's
        conv2d_backward_exact_cuda(nullptr, 0, nullptr, xsum_none(), dbias, dy, nullptr, nullptr, s, workspace, group);
    const conv2d_shape_t sg = conv2d_samples_of(s, group);
    const size_t nx = conv2d_x_size(&sg), ny = conv2d_y_size(&sg), nw = conv2d_w_size(s);
    if (dx || !xsum_empty(dw))
        by_group_terms(s->B / group, dw_tmp, dw, nw, [&](int g, float *dwg) {
            conv2d_bf16_backward_cuda(dx ? dx + g * nx : nullptr, dx_accumulate, dwg, nullptr,
                                      dy ? dy + g * ny : nullptr, dyh ? dyh + g * ny : nullptr, xh + g * nx, w, &sg,
                                      workspace);
        });
}

// The weight sums as conv2d_bf16_backward_exact_cuda's (the same call); each group's input
// gradient rounded by cuDNN on the plan of B = group.
extern "C" void conv2d_bf16_backward_rounded_exact_cuda(spk_bf16 *dxh, float *dw_tmp, xsum_t dw, const spk_bf16 *dyh,
                                                        const spk_bf16 *xh, const spk_bf16 *w, const conv2d_shape_t *s,
                                                        float *workspace, int group) {
    conv2d_check(s);
    SPK_ASSERT(dxh && dyh && group > 0 && s->B % group == 0);
    if (!xsum_empty(dw))
        conv2d_bf16_backward_exact_cuda(nullptr, 0, dw_tmp, dw, xsum_none(), nullptr, dyh, xh, w, s, workspace, group);
    const conv2d_shape_t sg = conv2d_samples_of(s, group);
    const size_t nx = conv2d_x_size(&sg), ny = conv2d_y_size(&sg);
    for (int g = 0; g < s->B / group; g++)
        conv2d_bf16_backward_rounded_cuda(dxh + g * nx, nullptr, dyh + g * ny, xh + g * nx, w, &sg, workspace);
}
