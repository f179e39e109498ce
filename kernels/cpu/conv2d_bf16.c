// Conv2d with bf16 operands (kernels/conv2d_bf16.h): oneDNN's bf16 convolutions where the CPU
// has bf16 instructions (kernels/cpu/conv2d_dnnl.c), else the rounded operands widened back to
// float32 and the float32 convolution (the same products, as the bf16 GEMM does without them).
// The output gradient is rounded once per backward, into the head of the workspace.
#include "kernels/conv2d_bf16.h"

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/rows.h"

#define ALIGN 64

static size_t up_floats(size_t n) { return (n + ALIGN / 4 - 1) / (ALIGN / 4) * (ALIGN / 4); }
static size_t half_floats(size_t n) { return up_floats((n + 1) / 2); }  // n bf16 values, in floats

// Workspace: [dy rounded (bf16)] then, with oneDNN, its scratch; without, [x][w][dy] widened to
// float32 and the float32 convolution's workspace.
size_t conv2d_bf16_workspace_floats(const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_shape_ok(s));
    const size_t head = half_floats(conv2d_y_size(s));
    if (conv2d_dnnl_usable(CONV2D_BF16)) return head + (conv2d_dnnl_workspace_bytes(s, CONV2D_BF16) + 3) / 4;
    return head + up_floats(conv2d_x_size(s)) + up_floats(conv2d_w_size(s)) + up_floats(conv2d_y_size(s)) +
           conv2d_workspace_floats(s);
}

typedef struct {
    float *x, *w, *dy, *conv;
} wide_t;

static wide_t wide_parts(const conv2d_shape_t *s, float *workspace) {
    wide_t p;
    p.x = workspace + half_floats(conv2d_y_size(s));
    p.w = p.x + up_floats(conv2d_x_size(s));
    p.dy = p.w + up_floats(conv2d_w_size(s));
    p.conv = p.dy + up_floats(conv2d_y_size(s));
    return p;
}

void conv2d_bf16_forward(float *y, spk_bf16 *xh, const float *x, const spk_bf16 *w, const float *bias,
                         const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    if (x) bf16_from_f32(xh, x, conv2d_x_size(s));
    if (conv2d_dnnl_usable(CONV2D_BF16)) {
        conv2d_dnnl_forward(y, xh, w, bias, s, CONV2D_BF16, workspace + half_floats(conv2d_y_size(s)));
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    bf16_to_f32(p.x, xh, conv2d_x_size(s));
    bf16_to_f32(p.w, w, conv2d_w_size(s));
    conv2d_forward(y, p.x, p.w, bias, s, p.conv);
}

void conv2d_bf16_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const spk_bf16 *xh,
                          const spk_bf16 *w, const conv2d_shape_t *s, float *workspace) {
    SPK_ASSERT(conv2d_shape_ok(s));
    const size_t ny = conv2d_y_size(s);
    if (dbias) spk_rows_channel_sums(dbias, dy, ny / (size_t)s->Cout, s->Cout);
    if (!dx && !dw) return;
    spk_bf16 *dyh = (spk_bf16 *)workspace;
    bf16_from_f32(dyh, dy, ny);
    if (conv2d_dnnl_usable(CONV2D_BF16)) {
        float *ws = workspace + half_floats(ny);
        if (dx) conv2d_dnnl_backward_data(dx, dx_accumulate, dyh, w, s, CONV2D_BF16, ws);
        if (dw) conv2d_dnnl_backward_weights(dw, xh, dyh, s, CONV2D_BF16, ws);
        return;
    }
    const wide_t p = wide_parts(s, workspace);
    bf16_to_f32(p.x, xh, conv2d_x_size(s));
    bf16_to_f32(p.w, w, conv2d_w_size(s));
    bf16_to_f32(p.dy, dyh, ny);
    conv2d_backward(dx, dx_accumulate, dw, NULL, p.dy, p.x, p.w, s, p.conv);
}
