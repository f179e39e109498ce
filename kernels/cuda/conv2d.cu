// Conv2d (kernels/conv2d.h) on cuDNN's legacy API over channels-last tensors: x and y are NHWC as
// the contract has them; the weights, in PyTorch's layout, are reordered per call into a KRSC
// (Cout, KH, KW, Cin) copy in the workspace, the filter layout cuDNN's fast NHWC kernels take,
// and the filter gradient comes back the same way, added to dw. Plans, algorithms and math
// types: kernels/cuda/conv_plans.cuh (the policy of the 1-D convolution). dx is overwritten or
// accumulated through cuDNN's beta (0 or 1). Bias and its gradient are our own kernels (the
// gradient: channel sums over the output rows, fixed order; kernels/cuda/conv2d_common.cuh).
//
// workspace = [ KRSC weights, then the KRSC filter gradient ][ bias partial sums ][ cuDNN ],
// each region rounded up to 256 bytes. The world-size-invariant mode's (below) is the largest of
// one sample's and each group size's; its per-sample bias sums use the head before the calls.
#include "kernels/cuda/conv2d_common.cuh"

namespace {

// The workspace's head: the KRSC weights, then the KRSC filter gradient.
size_t head_bytes(const conv2d_shape_t *s) { return round256(conv2d_w_size(s) * sizeof(float)); }

// y = conv(x) (+ bias) over s's samples in calls of `per` samples each, on the plan of B = per.
void forward_in_calls(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s, int per,
                      float *workspace) {
    conv2d_check(s);
    SPK_ASSERT(per > 0 && s->B % per == 0);
    const conv2d_shape_t sc = conv2d_samples_of(s, per);
    const spk_conv_plan_t &pl = conv2d_plan(&sc, 0);
    void *cws = conv2d_tail(workspace, head_bytes(s), &sc).cudnn;
    float *wk = workspace;
    conv2d_to_krsc(wk, w, s);
    const size_t nx = conv2d_x_size(&sc), ny = conv2d_y_size(&sc);
    for (int b = 0; b < s->B; b += per) conv2d_forward_pass(pl, y + b / per * ny, x + b / per * nx, wk, cws);
    if (bias) conv2d_epilogue(y, y, bias, 0, conv2d_y_size(s), s->Cout);
}

}  // namespace

extern "C" size_t conv2d_workspace_floats_cuda(const conv2d_shape_t *s) {
    return conv2d_workspace_floats_of(s, 0, head_bytes(s));
}

// A shape's plan holds its three passes' algorithms, chosen together, and one workspace for them.
extern "C" size_t conv2d_forward_workspace_floats_cuda(const conv2d_shape_t *s) {
    return conv2d_workspace_floats_cuda(s);
}

extern "C" void conv2d_forward_cuda(float *y, const float *x, const float *w, const float *bias,
                                    const conv2d_shape_t *s, float *workspace) {
    forward_in_calls(y, x, w, bias, s, s->B, workspace);
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

// ---- the world-size-invariant mode (kernels/conv2d.h) -------------------------------------------
// cuDNN's algorithm and its rounding may depend on B: every sample's forward gets calls of its
// own, with the plan of B = 1 (one per shape, so the same for every batch), and the exact
// backward calls of each group of samples, with the plan of B = group, as the 1-D convolution's
// (kernels/cuda/conv1d.cu). The weights are reordered once per call, not per sample.

namespace {

// The per-sample bias sums after the one-sample workspace: their compensated partials (Cout, B),
// then the floats (B, Cout) that xsum_add takes.
size_t sample_part_bytes(const conv2d_shape_t *s) { return round256(sizeof(spk_fsum) * (size_t)s->Cout * s->B); }
size_t sample_bias_bytes(const conv2d_shape_t *s) {
    return sample_part_bytes(s) + round256(sizeof(float) * (size_t)s->B * s->Cout);
}

// out (B, C) = part (C, B), each sample's sum rounded to float.
__global__ void sample_sums_kernel(float *out, const spk_fsum *part, int B, int C) {
    SPK_GRID_LOOP(i, (size_t)B * C) {
        const size_t b = i / C, c = i - b * C;
        out[i] = spk_fsum_value(part[c * B + b]);
    }
}

// dbias += every group's sum of its samples' bias gradients (each a channel sum over the sample's
// output rows in a fixed order: the split of the channel sums is the sample), one term per group.
void sample_bias_backward(xsum_t dbias, const float *dy, const conv2d_shape_t *s, int group, char *region) {
    spk_fsum *part = (spk_fsum *)region;
    float *sums = (float *)(region + sample_part_bytes(s));
    SPK_LAUNCH(bias_grad_sum_kernel, spk_rows_channel_grid(s->Cout, s->B), part, dy, conv2d_rows(s), s->Cout);
    SPK_LAUNCH(sample_sums_kernel, spk_grid((size_t)s->B * s->Cout), sums, part, s->B, s->Cout);
    xsum_add_cuda(dbias, sums, s->B, s->Cout, group);
}

}  // namespace

// Room for the calls of one sample and of any group of samples; the per-sample bias sums, queued
// before those calls on the same stream, take its head first.
extern "C" size_t conv2d_workspace_floats_fixed_cuda(const conv2d_shape_t *s) {
    const size_t calls = most_over_group_sizes(s->B, [&](int n) {
        const conv2d_shape_t sn = conv2d_samples_of(s, n);
        return conv2d_workspace_floats_cuda(&sn);
    });
    const size_t sums = sample_bias_bytes(s) / sizeof(float);
    return calls > sums ? calls : sums;
}

extern "C" void conv2d_forward_fixed_cuda(float *y, const float *x, const float *w, const float *bias,
                                          const conv2d_shape_t *s, float *workspace) {
    forward_in_calls(y, x, w, bias, s, 1, workspace);
}

extern "C" void conv2d_backward_exact_cuda(float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias,
                                           const float *dy, const float *x, const float *w, const conv2d_shape_t *s,
                                           float *workspace, int group) {
    conv2d_check(s);
    SPK_ASSERT(group > 0 && s->B % group == 0);
    if (!xsum_empty(dbias)) sample_bias_backward(dbias, dy, s, group, (char *)workspace);
    if (!dx && xsum_empty(dw)) return;
    const conv2d_shape_t sg = conv2d_samples_of(s, group);
    const spk_conv_plan_t &pl = conv2d_plan(&sg, 0);
    void *cws = conv2d_tail(workspace, head_bytes(s), &sg).cudnn;
    const size_t nx = conv2d_x_size(&sg), ny = conv2d_y_size(&sg), nw = conv2d_w_size(s);
    float *wk = workspace;
    if (dx) {
        conv2d_to_krsc(wk, w, s);
        for (int g = 0; g < s->B / group; g++) conv2d_data_pass(pl, dx + g * nx, dx_accumulate, dy + g * ny, wk, cws);
    }
    if (xsum_empty(dw)) return;
    by_group_terms(s->B / group, dw_tmp, dw, nw, [&](int g, float *dwg) {  // the weights' copy is free again
        conv2d_filter_pass(pl, wk, dy + g * ny, x + g * nx, cws);
        conv2d_add_from_krsc(dwg, wk, s);
    });
}
